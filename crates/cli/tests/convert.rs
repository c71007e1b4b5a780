//! `convert --type luks1|luks2` against cryptsetup 2.6's `convert` on copies of the same
//! images: the LUKS2 metadata it makes equals cryptsetup's (`luksDump
//! --dump-json-metadata`), the LUKS1 header bytes equal cryptsetup's, both tools open the
//! result with every passphrase, the plaintext written before is read back byte for byte,
//! and every refusal of cryptsetup is sectorcrypt's too, leaving the image as it was.

#[path = "support/luks2_cases.rs"]
mod luks2_cases;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{require, run};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{code, ok, ok_bytes, s, sc};
use volumes::{key_file, FAST};

const CS_FAST: [&str; 5] = [
    "--pbkdf",
    "pbkdf2",
    "--pbkdf-force-iterations",
    "1000",
    "--disable-locks",
];

/// `cryptsetup ARGS`, its output.
fn cs(args: &[&str]) -> Output {
    Command::new("cryptsetup")
        .args(args)
        .output()
        .expect("run cryptsetup")
}

fn cs_ok(args: &[&str]) -> String {
    let mut c = Command::new("cryptsetup");
    c.args(args);
    String::from_utf8(run(&mut c).stdout).unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A blank file of `mib` MiB.
fn blank(dir: &Path, name: &str, mib: u64) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .set_len(mib << 20)
        .unwrap();
    p
}

/// Whether cryptsetup opens `img` with the passphrase in `key`.
fn cs_opens(img: &Path, key: &Path) -> bool {
    cs(&[
        "open",
        "--test-passphrase",
        "--disable-locks",
        "--key-file",
        s(key),
        s(img),
    ])
    .status
    .success()
}

fn cs_is(img: &Path, t: &str) -> bool {
    cs(&["isLuks", "--disable-locks", "--type", t, s(img)])
        .status
        .success()
}

/// Known plaintext written through sectorcrypt at the start of the volume.
fn fill(img: &Path, key: &Path) -> Vec<u8> {
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    ok(sc(&["write", s(img), "--key-file", s(key)], &data));
    data
}

fn plaintext(img: &Path, key: &Path, len: usize) -> Vec<u8> {
    ok_bytes(sc(
        &[
            "read",
            s(img),
            "--key-file",
            s(key),
            "--length",
            &len.to_string(),
        ],
        b"",
    ))
}

fn json_of(img: &Path) -> serde_json::Value {
    serde_json::from_str(&cs_ok(&[
        "luksDump",
        "--disable-locks",
        "--dump-json-metadata",
        s(img),
    ]))
    .unwrap()
}

fn sha(img: &Path) -> [u8; 32] {
    openssl::sha::sha256(&std::fs::read(img).unwrap())
}

fn convert(img: &Path, to: &str) -> Output {
    sc(&["convert", s(img), "--type", to, "--batch"], b"")
}

fn cs_convert(img: &Path, to: &str) -> Output {
    cs(&[
        "convert",
        "--disable-locks",
        "--batch-mode",
        "--type",
        to,
        s(img),
    ])
}

/// A cryptsetup LUKS1 volume with keyslots 0 ("zero") and 3 ("three") and known data,
/// converted by sectorcrypt and (a copy) by cryptsetup: the same metadata, both tools
/// open both passphrases, the data is as written. sectorcrypt also opens cryptsetup's
/// result (its digest keeps LUKS1's 20 bytes).
#[test]
fn luks1_to_luks2_as_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "v.img", 4);
    let k0 = key_file(dir.path(), "k0", "zero");
    let k3 = key_file(dir.path(), "k3", "three");
    let mut args = vec!["luksFormat", "--type", "luks1", "--batch-mode"];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&k0), s(&img)]);
    cs_ok(&args);
    let mut args = vec!["luksAddKey", "--key-slot", "3", "--key-file", s(&k0)];
    args.extend(CS_FAST);
    args.extend([s(&img), s(&k3)]);
    cs_ok(&args);
    let data = fill(&img, &k0);
    let theirs = dir.path().join("theirs.img");
    std::fs::copy(&img, &theirs).unwrap();
    assert!(cs_convert(&theirs, "luks2").status.success());

    let out = ok(convert(&img, "luks2"));
    assert!(out.contains("converted from luks1 to luks2"), "{out}");
    assert!(cs_is(&img, "luks2"));
    for k in [&k0, &k3] {
        assert!(cs_opens(&img, k));
    }
    assert_eq!(json_of(&img), json_of(&theirs));
    let dump = cs_ok(&["luksDump", "--disable-locks", s(&img)]);
    assert!(dump.contains("Version:       \t2"), "{dump}");
    assert!(dump.contains("Epoch:         \t2"), "{dump}");
    assert_eq!(plaintext(&img, &k3, data.len()), data);
    assert_eq!(plaintext(&theirs, &k0, data.len()), data);
}

/// A LUKS2 volume that cryptsetup converted from LUKS1 keeps LUKS1's 20-byte volume key
/// digest under a sha256 digest: sectorcrypt opens it (it refused it as a corrupt header,
/// "digests.0.digest has 20 bytes, sha256 makes 32", before).
#[test]
fn a_volume_cryptsetup_converted_to_luks2_opens() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "v.img", 4);
    let k0 = key_file(dir.path(), "k0", "zero");
    let mut args = vec!["luksFormat", "--type", "luks1", "--batch-mode"];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&k0), s(&img)]);
    cs_ok(&args);
    let data = fill(&img, &k0);
    assert!(cs_convert(&img, "luks2").status.success());
    let digest = &json_of(&img)["digests"]["0"];
    assert_eq!(digest["hash"], "sha256");
    assert_eq!(
        digest["digest"].as_str().unwrap().len(),
        28,
        "20 bytes in base64"
    );
    let o = sc(&["test-key", s(&img), "--key-file", s(&k0)], b"");
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(plaintext(&img, &k0, data.len()), data);
}

/// A sectorcrypt LUKS2 volume (PBKDF2 keyslots 0 and 1, 512-byte sectors) to LUKS1: the
/// 592 header bytes equal those of cryptsetup's conversion of a copy (every field comes
/// from the LUKS2 metadata: nothing random is added), both tools open it, the data is as
/// written.
#[test]
fn luks2_to_luks1_as_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("v.img");
    let k0 = key_file(dir.path(), "k0", "zero");
    let k1 = key_file(dir.path(), "k1", "one");
    let mut args = vec!["format", s(&img), "--size", "20M", "--key-file", s(&k0)];
    args.extend(FAST);
    args.extend(["--sector-size", "512"]);
    ok(sc(&args, b""));
    let mut args = vec!["add-key", s(&img), s(&k1), "--key-file", s(&k0)];
    args.extend(FAST);
    ok(sc(&args, b""));
    let data = fill(&img, &k0);
    let theirs = dir.path().join("theirs.img");
    std::fs::copy(&img, &theirs).unwrap();
    assert!(cs_convert(&theirs, "luks1").status.success());

    ok(convert(&img, "luks1"));
    assert!(cs_is(&img, "luks1"));
    let (a, b) = (
        std::fs::read(&img).unwrap(),
        std::fs::read(&theirs).unwrap(),
    );
    assert_eq!(&a[..592], &b[..592], "the LUKS1 headers differ");
    for k in [&k0, &k1] {
        assert!(cs_opens(&img, k));
    }
    assert_eq!(plaintext(&img, &k1, data.len()), data);
    // The data area is untouched, and is the same as cryptsetup's.
    let off = 16 << 20;
    assert_eq!(&a[off..], &b[off..]);
}

/// LUKS1 to LUKS2 and back keeps the volume opening with both tools, and the LUKS1
/// header is the one it started with but for the keyslot cipher fields it never had.
#[test]
fn round_trip_keeps_the_volume() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "v.img", 4);
    let k0 = key_file(dir.path(), "k0", "zero");
    let mut args = vec!["luksFormat", "--type", "luks1", "--batch-mode"];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&k0), s(&img)]);
    cs_ok(&args);
    let data = fill(&img, &k0);
    let before = std::fs::read(&img).unwrap()[..592].to_vec();
    ok(convert(&img, "luks2"));
    assert!(cs_opens(&img, &k0));
    ok(convert(&img, "luks1"));
    assert!(cs_is(&img, "luks1"));
    assert!(cs_opens(&img, &k0));
    assert_eq!(plaintext(&img, &k0, data.len()), data);
    assert_eq!(std::fs::read(&img).unwrap()[..592], before[..]);
}

/// Converting to the version the volume already has, or without --batch and without a
/// terminal to confirm, changes nothing.
#[test]
fn same_version_and_unconfirmed_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = volumes::new_volume(dir.path(), &["--sector-size", "512"]);
    let before = sha(&img);
    let o = convert(&img, "luks2");
    assert_eq!(code(&o), 2, "{}", err(&o));
    assert!(err(&o).contains("already luks2"), "{}", err(&o));
    let o = sc(&["convert", s(&img), "--type", "luks1"], b"");
    assert_ne!(code(&o), 0);
    assert!(
        err(&o).contains("This operation will convert"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("--batch"), "{}", err(&o));
    assert_eq!(sha(&img), before);
}

/// One refusal case: `img` is refused by cryptsetup and by sectorcrypt (whose message
/// holds `says`), and left byte for byte as it was.
fn refused_by_both(img: &Path, to: &str, says: &str) {
    let before = sha(img);
    let copy = img.with_extension("cs");
    std::fs::copy(img, &copy).unwrap();
    let theirs = cs_convert(&copy, to);
    assert!(
        !theirs.status.success(),
        "cryptsetup converted {}",
        img.display()
    );
    let o = convert(img, to);
    assert_eq!(code(&o), 2, "{}: {}", img.display(), err(&o));
    assert!(err(&o).contains(says), "{}: {}", img.display(), err(&o));
    assert_eq!(sha(img), before, "{} changed", img.display());
}

/// A cryptsetup LUKS2 volume of 512-byte sectors with PBKDF2 keyslot 0 ("zero"),
/// with `extra` luksFormat arguments.
fn cs_luks2(dir: &Path, name: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let img = blank(dir, name, 20);
    let k0 = key_file(dir, "k0", "zero");
    let mut args = vec!["luksFormat", "--type", "luks2", "--batch-mode"];
    if !extra.contains(&"--pbkdf") {
        args.extend(CS_FAST);
    } else {
        args.push("--disable-locks");
    }
    if !extra.contains(&"--sector-size") {
        args.extend(["--sector-size", "512"]);
    }
    args.extend(extra);
    args.extend(["--key-file", s(&k0), s(&img)]);
    cs_ok(&args);
    (img, k0)
}

#[test]
fn refusals_to_luks1_as_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let kn = key_file(d, "kn", "new");

    let (argon, _) = cs_luks2(
        d,
        "argon.img",
        &[
            "--pbkdf",
            "argon2id",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "32",
        ],
    );
    refused_by_both(&argon, "luks1", "keyslot 0 is not LUKS1 compatible");

    let (token, _) = cs_luks2(d, "token.img", &[]);
    let t = d.join("t.json");
    std::fs::write(&t, r#"{"type":"sectorcrypt-test","keyslots":[]}"#).unwrap();
    cs_ok(&[
        "token",
        "import",
        "--disable-locks",
        "--json-file",
        s(&t),
        s(&token),
    ]);
    refused_by_both(&token, "luks1", "contains 1 token(s)");

    let (sector, _) = cs_luks2(d, "sector.img", &["--sector-size", "4096"]);
    refused_by_both(&sector, "luks1", "sector size is not 512 bytes");

    let (slot8, k0) = cs_luks2(d, "slot8.img", &[]);
    let mut args = vec!["luksAddKey", "--key-slot", "8", "--key-file", s(&k0)];
    args.extend(CS_FAST);
    args.extend([s(&slot8), s(&kn)]);
    cs_ok(&args);
    refused_by_both(
        &slot8,
        "luks1",
        "slot 8 (over maximum slots) is still active",
    );

    let (hash, k0) = cs_luks2(d, "hash.img", &["--hash", "sha256"]);
    let mut args = vec!["luksAddKey", "--hash", "sha512", "--key-file", s(&k0)];
    args.extend(CS_FAST);
    args.extend([s(&hash), s(&kn)]);
    cs_ok(&args);
    refused_by_both(&hash, "luks1", "keyslot 1 is not LUKS1 compatible");

    // An unfinished reencryption: the online-reencrypt-v2 requirement.
    let (reenc, k0) = cs_luks2(d, "reenc.img", &[]);
    let mut args = vec![
        "reencrypt",
        "--init-only",
        "--force-offline-reencrypt",
        "--disable-keyring",
        "--batch-mode",
        "--key-file",
        s(&k0),
    ];
    args.extend(CS_FAST);
    args.push(s(&reenc));
    cs_ok(&args);
    refused_by_both(&reenc, "luks1", "online-reencrypt-v2");

    // Two segments (as a reencryption makes them), without a requirement: the metadata
    // edited in both copies, checksums recomputed.
    let (segs, _) = cs_luks2(d, "segs.img", &[]);
    luks2_cases::edit_copies(&segs, |v| {
        let mut seg = v["segments"]["0"].clone();
        v["segments"]["0"]["size"] = "1048576".into();
        seg["offset"] = ((16u64 << 20) + (1 << 20)).to_string().into();
        seg["iv_tweak"] = "2048".into();
        v["segments"]["1"] = seg;
        v["digests"]["0"]["segments"] = serde_json::json!(["0", "1"]);
    });
    refused_by_both(&segs, "luks1", "more segments");
}

#[test]
fn refusals_to_luks2_as_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k0 = key_file(d, "k0", "zero");

    // The data right after the keyslots: no room for LUKS2's larger header.
    let tight = blank(d, "tight.img", 4);
    let mut args = vec![
        "luksFormat",
        "--type",
        "luks1",
        "--batch-mode",
        "--align-payload",
        "8",
    ];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&k0), s(&tight)]);
    cs_ok(&args);
    refused_by_both(&tight, "luks2", "Not enough space");

    // Keyslots that do not start at 4 KiB: every offset moved 8 sectors on (and slot 0's
    // material with it), a layout cryptsetup still opens.
    let odd = blank(d, "odd.img", 4);
    let mut args = vec!["luksFormat", "--type", "luks1", "--batch-mode"];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&k0), s(&odd)]);
    cs_ok(&args);
    let mut b = std::fs::read(&odd).unwrap();
    let material = b[4096..4096 + 258048].to_vec();
    b[8192..8192 + 258048].copy_from_slice(&material);
    for i in 0..8 {
        let at = 208 + 48 * i + 40;
        let off = u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) + 8;
        b[at..at + 4].copy_from_slice(&off.to_be_bytes());
    }
    std::fs::write(&odd, &b).unwrap();
    assert!(cs_opens(&odd, &k0));
    refused_by_both(&odd, "luks2", "unaligned keyslot offset");

    // luksmeta's metadata right after the keyslots (4040 sectors for a 512-bit key).
    let meta = blank(d, "luksmeta.img", 4);
    let mut args = vec!["luksFormat", "--type", "luks1", "--batch-mode"];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&k0), s(&meta)]);
    cs_ok(&args);
    let f = std::fs::OpenOptions::new().write(true).open(&meta).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"LUKSMETA", 4040 * 512).unwrap();
    drop(f);
    refused_by_both(&meta, "luks2", "LUKSMETA");
}

/// Seven LUKS1 keyslots in use move one by one through the eighth's place; with all
/// eight in use there is no free room to move one through, and sectorcrypt refuses where
/// cryptsetup converts (without that safety), leaving the image as it was.
#[test]
fn full_keyslots_move_through_the_free_one_or_are_refused() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = blank(d, "v.img", 4);
    let keys: Vec<PathBuf> = (0..8)
        .map(|i| key_file(d, &format!("k{i}"), &format!("pass{i}")))
        .collect();
    let mut args = vec!["luksFormat", "--type", "luks1", "--batch-mode"];
    args.extend(CS_FAST);
    args.extend(["--key-file", s(&keys[0]), s(&img)]);
    cs_ok(&args);
    for k in &keys[1..7] {
        let mut args = vec!["luksAddKey", "--key-file", s(&keys[0])];
        args.extend(CS_FAST);
        args.extend([s(&img), s(k)]);
        cs_ok(&args);
    }
    let data = fill(&img, &keys[0]);
    let full = d.join("full.img");
    std::fs::copy(&img, &full).unwrap();
    let theirs = d.join("theirs.img");
    std::fs::copy(&img, &theirs).unwrap();
    assert!(cs_convert(&theirs, "luks2").status.success());
    ok(convert(&img, "luks2"));
    assert_eq!(json_of(&img), json_of(&theirs));
    for k in &keys[..7] {
        assert!(cs_opens(&img, k), "{}", k.display());
    }
    assert_eq!(plaintext(&img, &keys[6], data.len()), data);
    ok(convert(&img, "luks1"));
    for k in &keys[..7] {
        assert!(cs_opens(&img, k), "{}", k.display());
    }

    let mut args = vec!["luksAddKey", "--key-file", s(&keys[0])];
    args.extend(CS_FAST);
    args.extend([s(&full), s(&keys[7])]);
    cs_ok(&args);
    let before = sha(&full);
    let o = convert(&full, "luks2");
    assert_eq!(code(&o), 2, "{}", err(&o));
    assert!(err(&o).contains("no free room"), "{}", err(&o));
    assert_eq!(sha(&full), before);
}

/// `img` converted to `to` by sectorcrypt and a copy by cryptsetup: the same LUKS2 JSON or
/// the same 592 LUKS1 header bytes, and cryptsetup opens it with `key`.
fn same_as_cryptsetup(img: &Path, to: &str, key: &Path) {
    let theirs = img.with_extension("cs");
    std::fs::copy(img, &theirs).unwrap();
    assert!(
        cs_convert(&theirs, to).status.success(),
        "{}",
        img.display()
    );
    ok(convert(img, to));
    assert!(cs_opens(img, key), "{}", img.display());
    if to == "luks2" {
        assert_eq!(json_of(img), json_of(&theirs), "{}", img.display());
    } else {
        let (a, b) = (std::fs::read(img).unwrap(), std::fs::read(&theirs).unwrap());
        assert_eq!(&a[..592], &b[..592], "{}", img.display());
    }
}

/// Other layouts and ciphers cryptsetup makes convert as cryptsetup converts them: a
/// payload at 4097 sectors (cryptsetup's compat-test2), 256-bit XTS keys, CBC-ESSIV with
/// sha1 both ways, a LUKS2 keyslot 5, 64 KiB LUKS2 metadata.
#[test]
fn layouts_and_ciphers_as_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k = key_file(d, "k", "zero");
    let kn = key_file(d, "kn", "new");
    let cases: [(&str, &str, &[&str]); 5] = [
        ("align", "luks1", &["--align-payload", "4097"]),
        ("xts256", "luks1", &["-s", "256"]),
        (
            "essiv",
            "luks1",
            &["-c", "aes-cbc-essiv:sha256", "-s", "256", "--hash", "sha1"],
        ),
        ("slot5", "luks2", &["--sector-size", "512"]),
        (
            "meta64k",
            "luks2",
            &["--sector-size", "512", "--luks2-metadata-size", "64k"],
        ),
    ];
    for (name, version, extra) in cases {
        let img = blank(
            d,
            &format!("{name}.img"),
            if version == "luks1" { 8 } else { 20 },
        );
        let mut args = vec!["luksFormat", "--type", version, "--batch-mode"];
        args.extend(CS_FAST);
        args.extend(extra);
        args.extend(["--key-file", s(&k), s(&img)]);
        cs_ok(&args);
        if name == "slot5" {
            let mut args = vec!["luksAddKey", "--key-slot", "5", "--key-file", s(&k)];
            args.extend(CS_FAST);
            args.extend([s(&img), s(&kn)]);
            cs_ok(&args);
        }
        if version == "luks1" {
            same_as_cryptsetup(&img, "luks2", &k);
            if name == "essiv" {
                same_as_cryptsetup(&img, "luks1", &k);
            }
        } else {
            same_as_cryptsetup(&img, "luks1", &k);
            if name == "slot5" {
                assert!(cs_opens(&img, &kn));
            }
        }
    }
}
