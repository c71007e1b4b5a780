//! The JSON output of `dump`, `test-key`, `backends`, `status`, `bench` and
//! `--progress=json`, parsed with serde_json and checked against independent truth:
//! cryptsetup's own `luksDump` (LUKS1 text, LUKS2 `--dump-json-metadata`) and
//! `open --test-passphrase` for LUKS, the GELI
//! reference model (`tests/geli_ref.py`) on FreeBSD-made images, /proc/cpuinfo for the
//! CPU features. Each command's fields are compared with the tables of docs/JSON.md both
//! ways, so the document cannot drift from the output.

#[path = "support/luks2_cases.rs"]
mod luks2_cases;
mod support;
#[macro_use]
#[path = "support/geli.rs"]
mod geli;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::run;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{bin, code, ok, s, sc, sc_on};

/// The sections of docs/JSON.md this file checks (the BitLocker, TCRYPT and FileVault 2
/// ones are checked by `tests/bitlk.rs`, `tests/tcrypt.rs` and `tests/fvault2.rs`, beside
/// their images).
const SECTIONS: [&str; 11] = [
    "`dump --json=common`",
    "`dump --json`: LUKS2",
    "`dump --json`: LUKS1",
    "`dump --json`: GELI",
    "`test-key --json`",
    "`backends --json`",
    "`status --json`",
    "`dump --json`: BitLocker",
    "`dump --json`: TCRYPT",
    "`status --json`: gateways",
    "`dump --json`: FileVault 2",
];
const BENCH: &str = "`bench --json`";
const PROGRESS: &str = "`--progress=json`";

fn doc() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/JSON.md");
    std::fs::read_to_string(p).expect("docs/JSON.md")
}

/// The fields the table of section `## TITLE` of docs/JSON.md lists.
fn documented(title: &str) -> BTreeSet<String> {
    let text = doc();
    let head = format!("## {title}");
    let mut lines = text.lines().skip_while(|l| *l != head);
    assert!(
        lines.next().is_some(),
        "no section {head:?} in docs/JSON.md"
    );
    lines
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap().to_string())
        .collect()
}

/// Every field path in `v` (`a.b`, `a[].b`), not looking inside the paths in `opaque`.
fn fields(v: &Value, prefix: &str, opaque: &[&str], out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if !opaque.contains(&p.as_str()) {
                    fields(x, &p, opaque, out);
                }
                out.insert(p);
            }
        }
        Value::Array(a) => {
            for x in a {
                fields(x, &format!("{prefix}[]"), opaque, out);
            }
        }
        _ => {}
    }
}

/// The fields of `outputs` together are exactly those section `title` documents.
fn same_fields_as_doc(title: &str, outputs: &[&Value], opaque: &[&str]) {
    let mut seen = BTreeSet::new();
    for v in outputs {
        fields(v, "", opaque, &mut seen);
    }
    let doc = documented(title);
    let undocumented: Vec<_> = seen.difference(&doc).collect();
    let missing: Vec<_> = doc.difference(&seen).collect();
    assert!(
        undocumented.is_empty() && missing.is_empty(),
        "{title}: printed but not in docs/JSON.md: {undocumented:?}; documented but not \
         printed: {missing:?}"
    );
}

fn json(o: Output) -> Value {
    serde_json::from_str(&ok(o)).expect("JSON output")
}

/// `dump IMG FORM`'s JSON (FORM: `--json` or `--json=common`), of a run that succeeded.
fn dump(img: &Path, form: &str) -> Value {
    json(sc(&["dump", s(img), form], b""))
}

fn cryptsetup(args: &[&str]) -> String {
    String::from_utf8(run(Command::new("cryptsetup").args(args)).stdout).unwrap()
}

/// `file` holding `text`.
fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A 20 MiB volume `dir/NAME` made by cryptsetup (`luksFormat ARGS`, split at spaces) and
/// the key file `dir/k0` of its passphrase, "zero".
fn cryptsetup_volume(dir: &Path, name: &str, args: &str) -> (PathBuf, PathBuf) {
    let key = &file(dir, "k0", "zero");
    let img = dir.join(name);
    std::fs::File::create(&img)
        .unwrap()
        .set_len(20 << 20)
        .unwrap();
    let mut all = vec!["luksFormat", "--batch-mode", "--key-file", s(key)];
    all.extend(args.split(' '));
    all.push(s(&img));
    cryptsetup(&all);
    (img, key.clone())
}

/// The value after `label:` on the first line of `text` that starts with it (trimmed).
fn field<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} in\n{text}"))
        .trim_start_matches(':')
        .trim()
}

fn num(v: &Value) -> u64 {
    match v {
        Value::String(t) => t.parse().unwrap(),
        other => other
            .as_u64()
            .unwrap_or_else(|| panic!("not a number: {other}")),
    }
}

/// The numbers in `dump --json=common`'s `keyslots`.
fn slot_numbers(common: &Value) -> Vec<u64> {
    let slots = common["keyslots"].as_array().unwrap();
    slots.iter().map(|k| num(&k["slot"])).collect()
}

/// The keyslot `cryptsetup open --test-passphrase -v` says `key` opens.
fn cryptsetup_slot(img: &Path, key: &Path) -> u64 {
    let out = cryptsetup(&[
        "open",
        "--test-passphrase",
        "-v",
        "--key-file",
        s(key),
        s(img),
    ]);
    let n = field(&out, "Key slot").split(' ').next().unwrap();
    n.parse().unwrap()
}

/// `test-key IMG --key-file KEY --json`: the JSON and the exit code.
fn test_key(img: &Path, key: &Path) -> (Value, i32) {
    let o = sc(&["test-key", s(img), "--key-file", s(key), "--json"], b"");
    let c = code(&o);
    (serde_json::from_slice(&o.stdout).expect("JSON"), c)
}

#[test]
fn luks2_dump_is_cryptsetups_document_and_common_fields_match_it() {
    sectorcrypt_testkit::require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k3 = file(d, "k3", "three");
    let (img, k0) = cryptsetup_volume(
        d,
        "l2.img",
        "--type luks2 --pbkdf argon2id --pbkdf-memory 32 --pbkdf-force-iterations 4 --sector-size 4096",
    );
    let pbkdf2 = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
    let args = [
        &["luksAddKey", "--batch-mode", "--key-file", s(&k0)][..],
        &pbkdf2,
    ]
    .concat()
    .into_iter()
    .chain(["--key-slot", "3", s(&img), s(&k3)])
    .collect::<Vec<_>>();
    cryptsetup(&args);
    let theirs: Value =
        serde_json::from_str(&cryptsetup(&["luksDump", "--dump-json-metadata", s(&img)])).unwrap();
    let ours = dump(&img, "--json");
    assert_eq!(ours, theirs, "dump --json is cryptsetup's document");
    let common = dump(&img, "--json=common");
    assert_eq!(common["metadata"], theirs);
    assert_eq!(common["format"], "luks2");
    assert_eq!(common["uuid"], cryptsetup(&["luksUUID", s(&img)]).trim());
    let seg = &theirs["segments"]["0"];
    assert_eq!(common["cipher"], seg["encryption"]);
    assert_eq!(common["sector_size"], seg["sector_size"]);
    assert_eq!(common["sector_size"], 4096);
    assert_eq!(num(&common["data_offset"]), num(&seg["offset"]));
    assert_eq!(seg["size"], "dynamic");
    assert_eq!(num(&common["size"]), (20 << 20) - num(&seg["offset"]));
    let slots = slot_numbers(&common);
    assert_eq!(slots, [0, 3]);
    for k in common["keyslots"].as_array().unwrap() {
        let theirs = &theirs["keyslots"][num(&k["slot"]).to_string()]["kdf"];
        // cryptsetup's kdf object, less the salt.
        let mut want = theirs.clone();
        want.as_object_mut().unwrap().remove("salt");
        assert_eq!(k["kdf"], want);
        // No salt outside the document cryptsetup prints.
        let salt = theirs["salt"].as_str().unwrap();
        let mut outside = common.clone();
        outside["metadata"] = Value::Null;
        assert!(!outside.to_string().contains(salt), "{outside}");
    }
    // test-key names the keyslot cryptsetup opens.
    for key in [&k0, &k3] {
        let (v, c) = test_key(&img, key);
        assert_eq!(c, 0, "{v}");
        assert_eq!(v["opened"], true);
        assert_eq!(num(&v["keyslot"]), cryptsetup_slot(&img, key));
        assert_eq!(v["error"], Value::Null);
        assert_eq!(v["exit_code"], 0);
    }
    let (v, c) = test_key(&img, &file(d, "bad", "nope"));
    assert_eq!(
        (c, &v["opened"], &v["keyslot"]),
        (3, &false.into(), &Value::Null)
    );
    assert_eq!(v["exit_code"], 3);
    assert!(
        v["error"].as_str().unwrap().contains("no keyslot opens"),
        "{v}"
    );
    // Bad input: exit 2, said in the JSON too.
    let (v, c) = test_key(&d.join("missing.img"), &k0);
    assert_eq!(
        (c, &v["exit_code"], &v["opened"]),
        (2, &2.into(), &false.into())
    );
    same_fields_as_doc(SECTIONS[4], &[&v], &[]);
}

#[test]
fn luks1_dump_matches_cryptsetups_luksdump() {
    sectorcrypt_testkit::require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (img, k0) = cryptsetup_volume(
        d,
        "l1.img",
        "--type luks1 --cipher aes-cbc-essiv:sha256 --key-size 256 --pbkdf-force-iterations 1000",
    );
    let text = cryptsetup(&["luksDump", s(&img)]);
    let md = dump(&img, "--json");
    assert_eq!(md["version"], 1);
    assert_eq!(md["cipher_name"], field(&text, "Cipher name"));
    assert_eq!(md["cipher_mode"], field(&text, "Cipher mode"));
    assert_eq!(md["hash_spec"], field(&text, "Hash spec"));
    assert_eq!(
        num(&md["payload_offset"]).to_string(),
        field(&text, "Payload offset")
    );
    assert_eq!(
        (num(&md["key_bytes"]) * 8).to_string(),
        field(&text, "MK bits")
    );
    assert_eq!(
        num(&md["mk_digest_iterations"]).to_string(),
        field(&text, "MK iterations")
    );
    assert_eq!(md["uuid"], field(&text, "UUID"));
    let slots = md["keyslots"].as_array().unwrap();
    assert_eq!(slots.len(), 8);
    for (i, k) in slots.iter().enumerate() {
        let head = format!("Key Slot {i}: ");
        let line = text.lines().find(|l| l.starts_with(&head)).unwrap();
        let active = line.ends_with("ENABLED");
        assert_eq!(k["slot"], i);
        assert_eq!(k["active"], active, "{line}");
        if active {
            let part = &text[text.find(&head).unwrap()..];
            assert_eq!(num(&k["iterations"]).to_string(), field(part, "Iterations"));
            assert_eq!(num(&k["stripes"]).to_string(), field(part, "AF stripes"));
            assert_eq!(
                num(&k["key_material_offset"]).to_string(),
                field(part, "Key material offset")
            );
        }
    }
    let common = dump(&img, "--json=common");
    assert_eq!(common["metadata"], md);
    assert_eq!(common["format"], "luks1");
    assert_eq!(common["uuid"], md["uuid"]);
    assert_eq!(common["cipher"], "aes-cbc-essiv:sha256");
    assert_eq!(common["sector_size"], 512);
    assert_eq!(
        num(&common["data_offset"]),
        num(&md["payload_offset"]) * 512
    );
    assert_eq!(
        num(&common["size"]),
        (20 << 20) - num(&common["data_offset"])
    );
    let k = &common["keyslots"][0];
    assert_eq!((num(&k["slot"]), &k["kdf"]["type"]), (0, &"pbkdf2".into()));
    assert_eq!(k["kdf"]["hash"], field(&text, "Hash spec"));
    assert_eq!(k["kdf"]["iterations"], slots[0]["iterations"]);
    assert_eq!(common["keyslots"].as_array().unwrap().len(), 1);
    same_fields_as_doc(SECTIONS[2], &[&md], &[]);
    let (v, c) = test_key(&img, &k0);
    assert_eq!((c, num(&v["keyslot"])), (0, cryptsetup_slot(&img, &k0)));
}

#[test]
fn geli_dump_matches_the_reference_model_on_a_freebsd_image() {
    require_model!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = geli::fixture("aes-xts-256-100", d);
    let pass = file(d, "pass", "password");
    let model = geli::model_ok(&["info", s(&img)]);
    let md = dump(&img, "--json");
    for k in [
        "magic",
        "version",
        "flags",
        "keylen",
        "provsize",
        "sectorsize",
        "keys",
        "iterations",
        "salt",
    ] {
        assert_eq!(md[k], model[k], "{k}");
    }
    assert_eq!(md["ealgo"], model["ealgo_name"]);
    assert_eq!(md["aalgo"], Value::Null, "no authentication");
    let common = dump(&img, "--json=common");
    assert_eq!(common["metadata"], md);
    assert_eq!(common["format"], "geli");
    assert_eq!(common["uuid"], Value::Null);
    assert_eq!(common["cipher"], "aes-xts-256");
    assert_eq!(common["sector_size"], model["sectorsize"]);
    assert_eq!(common["data_offset"], 0);
    let unlocked = geli::model_ok(&["unlock", s(&img), "--passfile", s(&pass)]);
    assert_eq!(common["size"], unlocked["datasize"]);
    let keys = num(&model["keys"]);
    let slots = slot_numbers(&common);
    let want: Vec<u64> = (0..2).filter(|n| keys & (1 << n) != 0).collect();
    assert_eq!(slots, want);
    same_fields_as_doc(SECTIONS[3], &[&md], &[]);
    let (v, c) = test_key(&img, &pass);
    assert_eq!((c, &v["keyslot"]), (0, &unlocked["slot"]), "{v}");
    let (v, c) = test_key(&img, &file(d, "bad", "Password"));
    assert_eq!(
        (c, &v["exit_code"], &v["keyslot"]),
        (3, &3.into(), &Value::Null)
    );
}

/// The fields of `dump --json=common` over LUKS1 (pbkdf2), LUKS2 (argon2id) and GELI,
/// made here without other tools: together, exactly those documented.
#[test]
fn dump_common_fields_are_the_documented_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut outputs = Vec::new();
    let l1 = d.join("l1");
    std::fs::create_dir(&l1).unwrap();
    let img = volumes::new_volume(&l1, &["--type", "luks1"]);
    outputs.push(dump(&img, "--json=common"));
    let img = d.join("l2.img");
    let key = file(d, "k", "zero");
    ok(sc(
        &[
            "format",
            s(&img),
            "--size",
            "20M",
            "--key-file",
            s(&key),
            "--pbkdf",
            "argon2id",
            "--pbkdf-memory",
            "32",
            "--pbkdf-force-iterations",
            "4",
        ],
        b"",
    ));
    outputs.push(dump(&img, "--json=common"));
    let img = geli::fixture("aes-xts-128-0", d);
    outputs.push(dump(&img, "--json=common"));
    let refs: Vec<&Value> = outputs.iter().collect();
    same_fields_as_doc(SECTIONS[0], &refs, &["metadata"]);
    // A refused header: the same fields, null, exit 2; the metadata as found, as
    // `dump --json` prints it (null when none could be read).
    let case = luks2_cases::CASES
        .iter()
        .find(|c| c.name == "overlapping-areas-c0-json0")
        .unwrap();
    let bad = d.join("overlap.img");
    case.write(&bad);
    let mut bytes = std::fs::read(d.join("l1/v.img")).unwrap();
    bytes[6..8].copy_from_slice(&[0, 9]); // LUKS1's version field
    std::fs::write(d.join("v9.img"), bytes).unwrap();
    for (img, found) in [(bad, true), (d.join("v9.img"), false)] {
        let o = sc(&["dump", s(&img), "--json=common"], b"");
        assert_eq!(code(&o), 2, "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["format"], Value::Null);
        assert_eq!(v["keyslots"], serde_json::json!([]));
        let o = sc(&["dump", s(&img), "--json"], b"");
        assert_eq!(code(&o), 2);
        if found {
            let md: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["metadata"], md);
        } else {
            assert!(o.stdout.is_empty());
            assert_eq!(v["metadata"], Value::Null);
        }
        same_fields_as_doc(SECTIONS[0], &[&v, refs[0], refs[1]], &["metadata"]);
    }
}

/// Which /proc/cpuinfo flag each of `backends`' CPU features is (none: OS state).
fn cpuinfo_flag(feature: &str) -> Option<&str> {
    match feature {
        "sse4.1" => Some("sse4_1"),
        "sha" => Some("sha_ni"),
        "os-ymm-state" | "os-zmm-state" => None,
        f => Some(f),
    }
}

#[test]
fn backends_json_agrees_with_cpuinfo_and_the_text_report() {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let Some(flags) = info.lines().find_map(|l| l.strip_prefix("flags")) else {
        eprintln!("skipped: /proc/cpuinfo has no flags line (not x86)");
        return;
    };
    let flags: BTreeSet<&str> = flags
        .trim_start_matches([' ', '\t', ':'])
        .split(' ')
        .collect();
    let v = json(sc(&["backends", "--json"], b""));
    let in_order: Vec<&str> = v["cpu_features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let seen: BTreeSet<&str> = in_order.iter().copied().collect();
    for f in [
        "sse4.1",
        "aes",
        "pclmulqdq",
        "avx",
        "avx2",
        "vaes",
        "vpclmulqdq",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512vbmi",
        "sha",
        "gfni",
    ] {
        let flag = cpuinfo_flag(f).unwrap();
        assert_eq!(seen.contains(f), flags.contains(flag), "{f} ({flag})");
    }
    let text = ok(sc(&["backends"], b""));
    assert_eq!(
        text.lines().next().unwrap(),
        format!("cpu features: {}", in_order.join(" "))
    );
    let names: Vec<&str> = v["algorithms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "aes",
            "aes-gcm",
            "gost",
            "mac",
            "serpent",
            "camellia",
            "twofish",
            "kuznyechik"
        ]
    );
    for a in v["algorithms"].as_array().unwrap() {
        let usable: Vec<&str> = a["backends"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| {
                assert_eq!(b["usable"].as_bool().unwrap(), b["reason"].is_null(), "{b}");
                b["usable"] == true
            })
            .map(|b| b["name"].as_str().unwrap())
            .collect();
        let chosen = a["chosen"].as_str().unwrap();
        assert!(usable.contains(&chosen), "{a}");
        // The text report names the family the same way (its choice, made by another
        // process's measurement, may differ within the margin: compared when forced).
        let head = format!("{}: ", a["description"].as_str().unwrap());
        assert!(
            text.lines().any(|l| l.starts_with(&head)),
            "no {head:?} in\n{text}"
        );
        match &a["measurement"] {
            Value::Null => assert!(a["reason"] != "chosen by measurement", "{a}"),
            m => {
                let measured: Vec<&str> = m["figures"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["backend"].as_str().unwrap())
                    .collect();
                assert!(measured.len() >= 2, "{a}");
                assert!(measured.iter().all(|b| usable.contains(b)), "{a}");
                // The documented rule: in order, a candidate displaces the one chosen so
                // far only when more than 5% faster.
                let f = |v: &Value| v["bytes_per_sec"].as_f64().unwrap();
                let figures = m["figures"].as_array().unwrap();
                let mut best = &figures[0];
                for c in figures {
                    if f(c) > f(best) * 1.05 {
                        best = c;
                    }
                }
                assert_eq!(best["backend"], chosen, "{a}");
                assert!(m["took_ms"].as_f64().unwrap() > 0.0);
            }
        }
    }
    // Forced: every choice says so, nothing measured.
    let forced = json(sc_on(&["backends", "--json"], b"", Some("soft")));
    assert_eq!(forced["forced"], "soft");
    assert_eq!(forced["measuring_ms"], Value::Null);
    let forced_text = ok(sc_on(&["backends"], b"", Some("soft")));
    for a in forced["algorithms"].as_array().unwrap() {
        assert_eq!(a["chosen"], "soft", "{a}");
        assert_eq!(a["reason"], "forced by SECTORCRYPT_BACKEND");
        let line = format!(
            "{}: soft (forced by SECTORCRYPT_BACKEND)",
            a["description"].as_str().unwrap()
        );
        assert!(
            forced_text.lines().any(|l| l == line),
            "no {line:?} in\n{forced_text}"
        );
    }
    same_fields_as_doc(SECTIONS[5], &[&v, &forced], &[]);
}

/// `sectorcrypt backends` with `SECTORCRYPT_AES_WIDTH` set to `width`: on the binary's
/// choice of backend when unforced (`width` empty), else on avx512 (forced ymm kernels
/// measure within the margin of the vaes backend's, which may then be chosen).
fn backends_with_width(args: &[&str], width: &str) -> std::process::Output {
    let mut cmd = std::process::Command::new(support::bin());
    cmd.args(args).env("SECTORCRYPT_AES_WIDTH", width);
    if width.is_empty() {
        cmd.env_remove("SECTORCRYPT_BACKEND");
    } else {
        cmd.env("SECTORCRYPT_BACKEND", "avx512");
    }
    cmd.output().expect("run sectorcrypt")
}

/// The AES units and the limit `backends` states follow from the probe's own figures
/// (rounds / (16 x block rounds per cycle) on the best width, the same limit in bytes per
/// second at the clock), the text report says the same, and the avx512 widths can be forced
/// (an unknown width is refused, naming the known ones).
#[test]
fn backends_states_the_cores_aes_limit_and_the_widths() {
    let v = json(backends_with_width(&["backends", "--json"], ""));
    let u = &v["aes_units"];
    let has = |f: &str| v["cpu_features"].as_array().unwrap().iter().any(|x| x == f);
    if !has("aes") {
        assert!(u.is_null(), "{u}");
        eprintln!("skipped: no AES units to probe (missing aes)");
        return;
    }
    let ghz = u["clock_ghz"].as_f64().unwrap();
    let best = u["best_width"].as_str().unwrap();
    let per_cycle = u["block_rounds_per_cycle"][best].as_f64().unwrap();
    for w in ["xmm", "ymm", "zmm"] {
        if let Some(r) = u["block_rounds_per_cycle"][w].as_f64() {
            assert!(r <= per_cycle, "{best} is not the best: {u}");
        }
    }
    let limit = u["limit"].as_array().unwrap();
    let ciphers: Vec<&str> = limit
        .iter()
        .map(|l| l["cipher"].as_str().unwrap())
        .collect();
    assert_eq!(ciphers, ["aes-128", "aes-192", "aes-256"]);
    for l in limit {
        let rounds = l["rounds"].as_f64().unwrap();
        let cpb = l["cycles_per_byte"].as_f64().unwrap();
        let bps = l["bytes_per_sec"].as_f64().unwrap();
        assert!((cpb - rounds / (16.0 * per_cycle)).abs() < 1e-9, "{l}");
        assert!((bps * cpb / (ghz * 1e9) - 1.0).abs() < 1e-9, "{l}");
    }
    let text = ok(backends_with_width(&["backends"], ""));
    assert!(
        text.lines().any(|l| l.starts_with(&format!(
            "aes physical limit of one core (on {best}): aes-128 "
        ))),
        "{text}"
    );
    let w = &v["aes_widths"];
    if v["algorithms"][0]["chosen"] != "avx512" {
        assert!(w.is_null(), "{w}");
        eprintln!("widths skipped: AES does not run on the avx512 backend here");
        return;
    }
    assert_eq!(w["forced"], Value::Null);
    for forced in ["ymm", "zmm"] {
        let f = json(backends_with_width(&["backends", "--json"], forced));
        assert_eq!(f["aes_widths"]["forced"], forced);
        for m in f["aes_widths"]["modes"].as_array().unwrap() {
            assert_eq!(m["width"], forced, "{m}");
            assert_eq!(m["ymm_bytes_per_sec"], Value::Null, "{m}");
        }
        let t = ok(backends_with_width(&["backends"], forced));
        assert!(
            t.contains(&format!(
                "aes widths on avx512 (forced by SECTORCRYPT_AES_WIDTH): ecb {forced}, ctr {forced}"
            )),
            "{t}"
        );
    }
    let bad = backends_with_width(&["backends"], "xmm");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("\"xmm\"") && err.contains("ymm, zmm"), "{err}");
}

#[test]
fn status_json_fields_are_the_documented_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let key = d.join("k0");
    let rt = d.join("run");
    let sc_rt = |args: &[&str]| {
        Command::new(bin())
            .args(args)
            .env("SECTORCRYPT_RUNTIME_DIR", &rt)
            .env_remove("SECTORCRYPT_BACKEND")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let uri = ok(sc_rt(&["open", s(&img), "vol", "--key-file", s(&key)]));
    let one = json(sc_rt(&["status", "vol", "--json"]));
    let all = json(sc_rt(&["status", "--json"]));
    ok(sc_rt(&["close", "vol"]));
    assert_eq!(all, Value::Array(vec![one.clone()]));
    assert_eq!(one["uri"], uri.trim());
    let common = dump(&img, "--json=common");
    for k in ["format", "cipher", "size", "sector_size"] {
        assert_eq!(one[k], common[k], "{k}");
    }
    same_fields_as_doc(SECTIONS[6], &[&one], &[]);
}

#[test]
fn status_json_fields_of_a_gateway_are_the_documented_ones() {
    use std::io::{BufRead, Write};
    let py = "/usr/bin/python3";
    let with_nbd = Command::new(py)
        .args(["-c", "import nbd"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !with_nbd {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let key = d.join("k0");
    let (rt, sock) = (d.join("run"), d.join("gw.sock"));
    let export = format!("a={}", s(&img));
    let mut gw = Command::new(bin())
        .args(["serve", "--export", &export, "--key-file", s(&key)])
        .args(["--socket", s(&sock), "--name", "gw"])
        .env("SECTORCRYPT_RUNTIME_DIR", &rt)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !sock.exists() || !rt.join("gw.json").exists() {
        assert!(t0.elapsed().as_secs() < 30, "the gateway did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A client connected throughout, so that `clients` has its fields.
    let script = "import nbd, sys\nh = nbd.NBD()\nh.connect_uri(sys.argv[1])\n\
                  h.pread(512, 0)\nprint('ready', flush=True)\nsys.stdin.readline()\n";
    let mut client = Command::new(py)
        .args(["-c", script, &format!("nbd+unix:///a?socket={}", s(&sock))])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(client.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let all = json(
        Command::new(bin())
            .args(["status", "--json"])
            .env("SECTORCRYPT_RUNTIME_DIR", &rt)
            .output()
            .unwrap(),
    );
    client.stdin.take().unwrap().write_all(b"\n").unwrap();
    let _ = client.wait();
    let _ = gw.kill();
    let _ = gw.wait();
    assert_eq!(line.trim(), "ready");
    let gateway = &all[0];
    assert_eq!(gateway["kind"], "gateway", "{all:#}");
    assert_eq!(
        gateway["exports"][0]["clients"].as_array().map(Vec::len),
        Some(1)
    );
    // A peer's fields depend on how it connected (documented in prose).
    same_fields_as_doc(SECTIONS[9], &[gateway], &["exports[].clients[].peer"]);
}

#[test]
fn bench_json_fields_are_the_documented_ones() {
    let v = json(sc(
        &["bench", "--quick", "--json", "--filter", "aes-256-xts/4096"],
        b"",
    ));
    let r = &v["results"][0];
    assert_eq!(r["name"], "aes-256-xts/4096");
    assert!(r["min"].as_f64() <= r["bytes_per_sec"].as_f64());
    assert!(r["bytes_per_sec"].as_f64() <= r["max"].as_f64());
    same_fields_as_doc(BENCH, &[&v], &[]);
}

#[test]
fn progress_json_fields_are_the_documented_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = d.join("v.img");
    let key = file(d, "k", "progress");
    // A calibrated KDF (calibrate, derive), then bytes (write).
    let mut lines = Vec::new();
    let mut a = vec!["format", s(&img), "--size", "20M", "--key-file", s(&key)];
    a.extend(["--pbkdf", "pbkdf2", "--iter-time", "20", "--progress=json"]);
    let input = file(d, "in", "some plaintext");
    let w = [
        "write",
        s(&img),
        "--key-file",
        s(&key),
        "-i",
        s(&input),
        "--progress=json",
    ];
    for args in [&a[..], &w[..]] {
        let o = sc(args, b"");
        assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8(o.stderr).unwrap();
        for l in err.lines().filter(|l| l.starts_with('{')) {
            lines.push(serde_json::from_str::<Value>(l).expect("a JSON line"));
        }
    }
    let ops: BTreeSet<&str> = lines.iter().filter_map(|v| v["op"].as_str()).collect();
    assert_eq!(ops, BTreeSet::from(["calibrate", "derive", "write"]));
    same_fields_as_doc(PROGRESS, &lines.iter().collect::<Vec<_>>(), &[]);
}

/// Every section of docs/JSON.md is one a test here checks, and the LUKS2 document (whose
/// fields are cryptsetup's) lists none of its own.
#[test]
fn every_section_of_the_document_is_checked() {
    let text = doc();
    let sections: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    let mut want: Vec<&str> = SECTIONS.to_vec();
    want.extend([BENCH, PROGRESS]);
    assert_eq!(sections.len(), want.len(), "{sections:?}");
    for s in &sections {
        assert!(
            want.contains(s),
            "docs/JSON.md section {s:?} is not checked"
        );
    }
    assert!(documented(SECTIONS[1]).is_empty());
}
