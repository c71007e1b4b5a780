//! VeraCrypt and TrueCrypt through the binary, on cryptsetup's test images (committed
//! under `crates/volume/tests/data/tcrypt/`): `read` of outer and hidden volumes, with a
//! PIM and with keyfiles, checked by the FAT serial cryptsetup's test expects; `write`
//! read back (in a hidden volume too); `mount`; `test-key`'s exit codes; `dump` and
//! `dump --json`; the refusals (no `--type`, TCRYPT flags without it, random data);
//! `format --type veracrypt` with a hidden volume, checked by `cryptsetup tcryptDump`;
//! hidden-volume protection through `write` and `serve` (nbdsh); VeraCrypt's Argon2id; and
//! legacy TrueCrypt 4.3 and older volumes (`read`, `dump`, `test-key`, `serve` read-only,
//! `write` refused).

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{require, skipped};
use std::path::Path;
use support::{code, ok, ok_bytes, sc};

/// The extracted images (once per test binary, `sectorcrypt_testkit::fixtures`), or a
/// skip when `xz` is missing.
macro_rules! images_or_skip {
    () => {
        sectorcrypt_testkit::fixtures_or_skip!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../volume/tests/data/tcrypt/tcrypt-images.tar.xz"),
            "tcrypt-images"
        )
    };
}

fn img(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// The FAT12/16 volume serial in the boot sector `boot`.
fn serial(boot: &[u8]) -> String {
    assert_eq!(&boot[510..512], &[0x55, 0xaa], "no boot sector");
    let s = u32::from_le_bytes(boot[0x27..0x2b].try_into().unwrap());
    format!("{:04X}-{:04X}", s >> 16, s & 0xffff)
}

#[test]
fn read_gives_the_file_systems_cryptsetup_expects() {
    let dir = images_or_skip!();
    let kf1 = img(dir, "keyfile1");
    let kf2 = img(dir, "keyfile2");
    let cases: &[(&str, &[u8], &[&str], &str)] = &[
        ("vc_1-sha512-xts-aes", b"aaaaaaaaaaaa", &[], "DEAD-BABE"),
        (
            "vc_1-sha512-xts-aes-hidden",
            b"bbbbbbbbbbbb",
            &["--tcrypt-hidden"],
            "CAFE-BABE",
        ),
        (
            "vc_1-sha512-xts-aes",
            b"aaaaaaaaaaaa",
            &["--tcrypt-backup"],
            "DEAD-BABE",
        ),
        (
            "tc_5-sha512-xts-serpent-twofish-aes",
            b"aaaaaaaaaaaa",
            &["--cipher", "serpent"],
            "DEAD-BABE",
        ),
        (
            "vcpim_1_1234-sha256-xts-aes",
            b"cccccccccccccccccccc",
            &["--veracrypt-pim", "1234", "--hash", "sha256"],
            "DEAD-BABE",
        ),
        (
            "vck_1_pw12-sha512-xts-aes",
            b"aaaaaaaaaaaa",
            &["--keyfile-component", &kf1, "--keyfile-component", &kf2],
            "DEAD-BABE",
        ),
    ];
    for (name, pass, extra, want) in cases {
        let path = img(dir, name);
        let mut args = vec![
            "read",
            &path,
            "--type",
            "tcrypt",
            "--key-file",
            "-",
            "--length",
            "512",
        ];
        args.extend_from_slice(extra);
        let boot = ok_bytes(sc(&args, pass));
        assert_eq!(serial(&boot), *want, "{name} {extra:?}");
    }
}

/// `write` into a copy of a normal volume (a chain) reads back through `read` in another
/// process; so does a write into a hidden volume VeraCrypt made, whose file system stays.
#[test]
fn write_reads_back_in_normal_and_hidden_volumes() {
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let pw = volumes::key_file(tmp.path(), "pw", "aaaaaaaaaaaa");
    let p = pw.display().to_string();
    let copy = tmp.path().join("vol");
    std::fs::copy(dir.join("tc_5-sha512-xts-serpent-twofish-aes"), &copy).unwrap();
    let c = copy.display().to_string();
    let flags = [
        "--type",
        "tcrypt",
        "--hash",
        "sha512",
        "--cipher",
        "serpent",
        "--key-file",
        &p,
    ];
    let data: Vec<u8> = (0..2000u32).map(|i| (i * 13 + 5) as u8).collect();
    let mut w = vec!["write", &c, "--offset", "1000"];
    w.extend_from_slice(&flags);
    ok(sc(&w, &data));
    let mut r = vec!["read", &c, "--offset", "1000", "--length", "2000"];
    r.extend_from_slice(&flags);
    assert!(
        ok_bytes(sc(&r, b"")) == data,
        "the write does not read back"
    );
    let mut r = vec!["read", &c, "--length", "512"];
    r.extend_from_slice(&flags);
    assert_eq!(serial(&ok_bytes(sc(&r, b""))), "DEAD-BABE");

    let pwb = volumes::key_file(tmp.path(), "pwb", "bbbbbbbbbbbb");
    let pb = pwb.display().to_string();
    let hidden = tmp.path().join("hidden");
    std::fs::copy(dir.join("vc_1-sha512-xts-aes-hidden"), &hidden).unwrap();
    let h = hidden.display().to_string();
    let flags = [
        "--type",
        "tcrypt",
        "--tcrypt-hidden",
        "--hash",
        "sha512",
        "--key-file",
        &pb,
    ];
    let mut w = vec!["write", &h, "--offset", "5000"];
    w.extend_from_slice(&flags);
    ok(sc(&w, &data));
    let mut r = vec!["read", &h, "--offset", "5000", "--length", "2000"];
    r.extend_from_slice(&flags);
    assert!(
        ok_bytes(sc(&r, b"")) == data,
        "the hidden write does not read back"
    );
    let mut r = vec!["read", &h, "--length", "512"];
    r.extend_from_slice(&flags);
    assert_eq!(serial(&ok_bytes(sc(&r, b""))), "CAFE-BABE");
}

#[test]
fn test_key_exit_codes() {
    let dir = images_or_skip!();
    let path = img(dir, "vc_1-sha512-xts-aes");
    let args = [
        "test-key",
        &path,
        "--type",
        "veracrypt",
        "--hash",
        "sha512",
        "--key-file",
        "-",
    ];
    let out = ok(sc(&args, b"aaaaaaaaaaaa"));
    assert!(out.contains("opens"), "{out}");
    let wrong = sc(&args, b"aaaaaaaaaaab");
    assert_eq!(
        code(&wrong),
        3,
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    // A TrueCrypt volume is not a VeraCrypt one.
    let tc = img(dir, "tc_5-sha512-xts-aes");
    let args = [
        "test-key",
        &tc,
        "--type",
        "veracrypt",
        "--hash",
        "sha512",
        "--cipher",
        "aes",
        "--key-file",
        "-",
    ];
    assert_eq!(code(&sc(&args, b"aaaaaaaaaaaa")), 3);
}

#[test]
fn dump_shows_the_decrypted_header() {
    let dir = images_or_skip!();
    let path = img(dir, "vc_1-sha512-xts-aes-hidden");
    let base = [
        "dump",
        &path,
        "--type",
        "tcrypt",
        "--tcrypt-hidden",
        "--key-file",
        "-",
    ];
    let text = ok(sc(&base, b"bbbbbbbbbbbb"));
    assert!(text.starts_with("VERACRYPT header information."), "{text}");
    for line in [
        "MK offset:     165888 [bytes]",
        "Hidden size:   47104 [bytes]",
        "PBKDF2 hash:   sha512",
        "Cipher chain:  aes",
        "MK bits:       512",
        "Header offset: 65536 [bytes]",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    let mut args = base.to_vec();
    args.push("--json");
    let json: serde_json::Value = serde_json::from_str(&ok(sc(&args, b"bbbbbbbbbbbb"))).unwrap();
    assert_eq!(json["magic"], "VERA");
    assert_eq!(json["mk_offset"], 165_888);
    assert_eq!(json["cipher"], "aes");
    assert_eq!(json["iterations"], 500_000);
    // Exactly the fields docs/JSON.md lists.
    let got: std::collections::BTreeSet<String> =
        json.as_object().unwrap().keys().cloned().collect();
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/JSON.md"))
            .unwrap();
    let listed: std::collections::BTreeSet<String> = doc
        .lines()
        .skip_while(|l| *l != "## `dump --json`: TCRYPT")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap().to_string())
        .collect();
    assert_eq!(got, listed);
}

/// VeraCrypt's Argon2id through the binary, on the PIM 8 image (5 passes of 288 MiB):
/// `read` gives the file system, `dump` shows the KDF and its costs (text and JSON),
/// `test-key` refuses a wrong passphrase with exit 3.
#[test]
fn argon2id_volumes_read_dump_and_refuse_a_wrong_passphrase() {
    let dir = images_or_skip!();
    let path = img(dir, "vcpim_1_8-argon2id-xts-aes");
    let flags = [
        "--type",
        "veracrypt",
        "--veracrypt-pim",
        "8",
        "--hash",
        "argon2id",
        "--key-file",
        "-",
    ];
    let pass = b"cccccccccccccccccccc";
    let mut args = vec!["read", &path, "--length", "512"];
    args.extend_from_slice(&flags);
    assert_eq!(serial(&ok_bytes(sc(&args, pass))), "DEAD-BABE");

    let mut args = vec!["dump", &path];
    args.extend_from_slice(&flags);
    let text = ok(sc(&args, pass));
    for line in [
        "PBKDF:         Argon2id",
        "Cipher chain:  aes",
        "Time cost:     5",
        "Memory:        294912 [kB]",
        "Threads:       1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    assert!(!text.contains("PBKDF2 hash"), "{text}");
    args.push("--json");
    let json: serde_json::Value = serde_json::from_str(&ok(sc(&args, pass))).unwrap();
    assert_eq!(json["kdf"], "argon2id");
    assert_eq!(json["hash"], serde_json::Value::Null);
    assert_eq!(json["time"], 5);
    assert_eq!(json["memory"], 294_912);
    assert_eq!(json["cpus"], 1);
    assert_eq!(json["pim"], 8);

    let mut args = vec!["test-key", &path];
    args.extend_from_slice(&flags);
    let wrong = sc(&args, b"cccccccccccccccccccd");
    assert_eq!(
        code(&wrong),
        3,
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
}

/// `mount --read-only` of a chained volume (Serpent-Twofish-AES) shows its plaintext as
/// MOUNTPOINT/disk; a system volume without --read-only is refused.
#[test]
fn mount_shows_the_plaintext_read_only() {
    let dir = images_or_skip!();
    if !Path::new("/dev/fuse").exists() {
        skipped!("skipped: no /dev/fuse");
        return;
    }
    require!("fusermount3");
    let tmp = tempfile::tempdir().unwrap();
    let mp = tmp.path().join("mp");
    std::fs::create_dir(&mp).unwrap();
    let pw = volumes::key_file(tmp.path(), "pw", "aaaaaaaaaaaa");
    let path = img(dir, "vc_1-sha512-xts-serpent-twofish-aes");
    let (m, p) = (mp.display().to_string(), pw.display().to_string());
    let base = [
        "mount",
        &path,
        &m,
        "--type",
        "tcrypt",
        "--hash",
        "sha512",
        "--key-file",
        &p,
    ];
    let mut system = base.to_vec();
    system.push("--tcrypt-system");
    let out = sc(&system, b"");
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--read-only"));
    let mut args = base.to_vec();
    args.push("--read-only");
    ok(sc(&args, b""));
    let boot = std::fs::read(mp.join("disk")).map(|d| d[..512].to_vec());
    volumes::unmount(&mp);
    assert_eq!(serial(&boot.unwrap()), "DEAD-BABE");
}

#[test]
fn refusals_are_clear() {
    let dir = images_or_skip!();
    let path = img(dir, "vc_1-sha512-xts-aes");
    // Never detected.
    let out = sc(&["dump", &path], b"");
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a volume of a known format"), "{err}");
    assert!(err.contains("--type tcrypt"), "{err}");
    // TCRYPT flags need --type.
    let out = sc(
        &["test-key", &path, "--tcrypt-hidden", "--key-file", "-"],
        b"x",
    );
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--type tcrypt"));
    // Random data asked for as TCRYPT: the passphrase finds no header.
    let tmp = tempfile::tempdir().unwrap();
    let random = tmp.path().join("random.img");
    let mut data = vec![0u8; 300_000];
    for (i, b) in data.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0];
    }
    std::fs::write(&random, &data).unwrap();
    let r = random.display().to_string();
    let args = [
        "test-key",
        &r,
        "--type",
        "tcrypt",
        "--hash",
        "sha512",
        "--cipher",
        "aes",
        "--veracrypt-pim",
        "1",
        "--key-file",
        "-",
    ];
    assert_eq!(code(&sc(&args, b"aaaaaaaaaaaa")), 3);
}

/// Bytes of the VeraCrypt volumes `format_hidden` makes, and of their hidden volumes.
const VC_SIZE: u64 = 4 << 20;
const VC_HIDDEN: u64 = 1 << 20;
/// Where the hidden data lies: at the end of the outer data area (host offset), and as an
/// offset of the outer volume's plaintext.
const VC_HIDDEN_AT: u64 = VC_SIZE - 131_072 - VC_HIDDEN;
const VC_HIDDEN_IN_OUTER: u64 = VC_HIDDEN_AT - 131_072;

/// A new VeraCrypt image `vc.img` in `dir` (PIM 1) with a hidden volume (PIM 2) made by
/// `format`, and the key files of both passphrases.
fn format_hidden(dir: &Path, extra: &[&str]) -> (String, String, String) {
    let outer = volumes::key_file(dir, "outer.pass", "outer passphrase");
    let hidden = volumes::key_file(dir, "hidden.pass", "hidden passphrase");
    let img = dir.join("vc.img").display().to_string();
    let (o, h) = (outer.display().to_string(), hidden.display().to_string());
    let size = VC_SIZE.to_string();
    let hidden_size = VC_HIDDEN.to_string();
    let mut args = vec![
        "format",
        &img,
        "--size",
        &size,
        "--type",
        "veracrypt",
        "--key-file",
        &o,
        "--veracrypt-pim",
        "1",
        "--hidden-size",
        &hidden_size,
        "--hidden-key-file",
        &h,
        "--hidden-veracrypt-pim",
        "2",
        "--batch",
    ];
    args.extend_from_slice(extra);
    let said = ok(sc(&args, b""));
    assert!(
        said.contains(&format!(
            "hidden volume: {VC_HIDDEN} bytes of data at offset {VC_HIDDEN_AT}"
        )),
        "{said}"
    );
    (img, o, h)
}

/// The image's bytes, to compare before and after.
fn sha(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// `format --type veracrypt --hidden-size`: the hidden volume's data written by `write`
/// reads back through `read` (other processes), the outer volume's written outside it too,
/// and the hidden data stays; `cryptsetup tcryptDump --tcrypt-hidden` finds the hidden
/// header with its data where VeraCrypt places it, and the master key it prints decrypts
/// the hidden sector as written here. A cascade with outer keyfiles opens here too.
#[test]
fn format_veracrypt_makes_a_hidden_volume_cryptsetup_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let (img, o, h) = format_hidden(tmp.path(), &[]);
    let hidden = [
        "--type",
        "veracrypt",
        "--tcrypt-hidden",
        "--veracrypt-pim",
        "2",
    ];
    let outer = ["--type", "veracrypt", "--veracrypt-pim", "1"];
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 29 + 1) as u8).collect();
    let args = |cmd: &'static str, flags: &[&'static str], key: &str, more: &[&str]| {
        let mut a: Vec<String> = vec![cmd.into(), img.clone(), "--key-file".into(), key.into()];
        a.extend(flags.iter().chain(more).map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>, input: &[u8]| {
        let v: Vec<&str> = a.iter().map(String::as_str).collect();
        sc(&v, input)
    };
    ok(run(
        args("write", &hidden, &h, &["--offset", "8192"]),
        &data,
    ));
    let back = ok_bytes(run(
        args(
            "read",
            &hidden,
            &h,
            &["--offset", "8192", "--length", "4096"],
        ),
        b"",
    ));
    assert!(back == data, "the hidden volume's write does not read back");
    // The outer volume, written outside the hidden area.
    let outer_data = vec![0x6bu8; 65536];
    ok(run(
        args("write", &outer, &o, &["--offset", "1000"]),
        &outer_data,
    ));
    let back = ok_bytes(run(
        args(
            "read",
            &outer,
            &o,
            &["--offset", "1000", "--length", "65536"],
        ),
        b"",
    ));
    assert!(
        back == outer_data,
        "the outer volume's write does not read back"
    );
    let back = ok_bytes(run(
        args(
            "read",
            &hidden,
            &h,
            &["--offset", "8192", "--length", "4096"],
        ),
        b"",
    ));
    assert!(back == data, "the outer write changed the hidden data");
    let dump = ok(run(args("dump", &outer, &o, &[]), b""));
    assert!(
        dump.contains("MK offset:") && dump.contains("131072 [bytes]"),
        "{dump}"
    );

    require!("cryptsetup");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cryptsetup tcryptDump --veracrypt --tcrypt-hidden --veracrypt-pim=2 --hash sha512 \
             --cipher aes --dump-volume-key --batch-mode {img} < {h}"
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("kernel crypto interface not available") {
        skipped!("skipped: cryptsetup tcryptDump needs the kernel's AF_ALG skcipher: {stderr}");
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cryptsetup refused: {stderr}{stdout}");
    assert!(
        stdout.contains(&format!("Payload offset:\t{}", VC_HIDDEN_AT / 512)),
        "{stdout}"
    );
    let (_, rest) = stdout.split_once("MK dump:").expect("no MK dump");
    let mk: Vec<u8> = rest
        .split_whitespace()
        .take_while(|w| w.len() == 2 && w.chars().all(|c| c.is_ascii_hexdigit()))
        .map(|w| u8::from_str_radix(w, 16).unwrap())
        .collect();
    assert_eq!(mk.len(), 64);
    let at = (VC_HIDDEN_AT + 8192) as usize;
    let mut sector = std::fs::read(&img).unwrap()[at..at + 512].to_vec();
    let (k1, k2) = mk.split_at(32);
    let xts = openssl::symm::Cipher::aes_256_xts();
    let mut iv = [0u8; 16];
    iv[..8].copy_from_slice(&((at / 512) as u64).to_le_bytes());
    let key = [k1, k2].concat();
    sector = openssl::symm::decrypt(xts, &key, Some(&iv), &sector).unwrap();
    assert!(
        sector == data[..512],
        "cryptsetup's hidden key does not decrypt our sector"
    );

    // A cascade, the outer volume keyed by its passphrase and a keyfile.
    let tmp = tempfile::tempdir().unwrap();
    let kf = volumes::key_file(tmp.path(), "kf", "keyfile bytes");
    let k = kf.display().to_string();
    let (img, _, h) = format_hidden(
        tmp.path(),
        &["--cipher", "serpent-twofish-aes", "--keyfile-component", &k],
    );
    let flags = [
        "--type",
        "veracrypt",
        "--tcrypt-hidden",
        "--veracrypt-pim",
        "2",
        "--cipher",
        "serpent-twofish-aes",
        "--key-file",
        &h,
    ];
    let mut w = vec!["write", &img];
    w.extend_from_slice(&flags);
    ok(sc(&w, &data));
    let mut r = vec!["read", &img, "--length", "4096"];
    r.extend_from_slice(&flags);
    assert!(ok_bytes(sc(&r, b"")) == data);
}

/// Hidden-volume protection: the outer volume opened with `--protect-hidden-key-file`
/// refuses a `write` into the hidden volume, and one that straddles its start (an input of
/// several pieces: refused before the first), exit 1 naming it, the image unchanged; over
/// NBD (`serve`) a straddling write of several engine chunks (1 MiB, 768 KiB of it before
/// the hidden data) and a zeroing there get EPERM and change nothing, while
/// writes elsewhere go through; a wrong hidden passphrase refuses to open (exit 2) and a
/// wrong outer one exits 3, both writing nothing. The hidden data stays readable.
#[test]
fn protection_refuses_writes_into_the_hidden_volume() {
    let tmp = tempfile::tempdir().unwrap();
    let (img, o, h) = format_hidden(tmp.path(), &[]);
    let wrong = volumes::key_file(tmp.path(), "wrong", "not it")
        .display()
        .to_string();
    let hidden_data = vec![0xc3u8; 4096];
    let hidden = [
        "--type",
        "veracrypt",
        "--tcrypt-hidden",
        "--veracrypt-pim",
        "2",
        "--key-file",
        &h,
    ];
    let mut w = vec!["write", &img];
    w.extend_from_slice(&hidden);
    ok(sc(&w, &hidden_data));
    let protect = |outer_key: &str, hidden_key: &str, cmd: &str, more: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            cmd,
            &img,
            "--type",
            "veracrypt",
            "--veracrypt-pim",
            "1",
            "--key-file",
            outer_key,
            "--protect-hidden-key-file",
            hidden_key,
            "--protect-hidden-veracrypt-pim",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(more.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>, input: &[u8]| {
        let v: Vec<&str> = a.iter().map(String::as_str).collect();
        sc(&v, input)
    };
    let input = tmp.path().join("input");
    let before = sha(&img);
    // Inside, straddling with one piece, straddling with several pieces (1.5 MiB from
    // 1 MiB before the hidden data).
    for (offset, len) in [
        (VC_HIDDEN_IN_OUTER + 4096, 4096),
        (VC_HIDDEN_IN_OUTER - 512, 1024),
        (VC_HIDDEN_IN_OUTER - (1 << 20), 3 << 19),
    ] {
        std::fs::write(&input, vec![0x11u8; len]).unwrap();
        let off = offset.to_string();
        let i = input.display().to_string();
        let out = run(
            protect(&o, &h, "write", &["--offset", &off, "--input", &i]),
            b"",
        );
        assert_eq!(code(&out), 1, "{offset}+{len}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("protected hidden volume"), "{err}");
        assert!(
            sha(&img) == before,
            "{offset}+{len}: a refused write changed the image"
        );
    }
    let out = run(protect(&o, &wrong, "write", &[]), &[0u8; 512]);
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("opens no hidden volume header"), "{err}");
    let out = run(protect(&wrong, &h, "write", &[]), &[0u8; 512]);
    assert_eq!(code(&out), 3);
    assert!(sha(&img) == before, "a refused open changed the image");
    // Before the hidden data, the outer volume takes writes.
    let off = (VC_HIDDEN_IN_OUTER - 4096).to_string();
    ok(run(
        protect(&o, &h, "write", &["--offset", &off]),
        &[0x22u8; 4096],
    ));
    let mut r = vec!["read", &img, "--length", "4096"];
    r.extend_from_slice(&hidden);
    assert!(
        ok_bytes(sc(&r, b"")) == hidden_data,
        "the hidden data changed"
    );

    // nbdsh runs the first `python3` in PATH, which must have libnbd's binding: the
    // system's.
    let nbdsh = || {
        let mut c = std::process::Command::new("nbdsh");
        let path = std::env::var("PATH").unwrap_or_default();
        c.env("PATH", format!("/usr/bin:{path}"));
        c
    };
    if !nbdsh()
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        sectorcrypt_testkit::skipped!("skipped: nbdsh (with the system's python3) does not run");
        return;
    }
    let sock = tmp.path().join("s.sock");
    let a = protect(&o, &h, "serve", &[]);
    let v: Vec<&str> = a[1..].iter().map(String::as_str).collect();
    let srv = served::Served::start(&v, &sock);
    let before = sha(&img);
    let script = format!(
        "def refused(f):\n\
         \x20   try:\n\
         \x20       f()\n\
         \x20   except nbd.Error as e:\n\
         \x20       return str(e.errno)\n\
         \x20   return 'accepted'\n\
         print(refused(lambda: h.pwrite(b'x' * (1 << 20), {at} - (3 << 18))))\n\
         print(refused(lambda: h.zero(4096, {at} + 512)))\n\
         print(refused(lambda: h.pwrite(b'y' * 512, 0)))\n",
        at = VC_HIDDEN_IN_OUTER
    );
    let out = nbdsh()
        .args(["-u", &srv.uri(), "-c", &script])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nbdsh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines, ["EPERM", "EPERM", "accepted"], "{said}");
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "{log}");
    let after = std::fs::read(&img).unwrap();
    let hidden_range = VC_HIDDEN_AT as usize..(VC_HIDDEN_AT + VC_HIDDEN) as usize;
    assert!(after != before, "the write outside did not arrive");
    assert!(
        after[hidden_range.clone()] == before[hidden_range],
        "the hidden area changed"
    );
    let mut r = vec!["read", &img, "--length", "4096"];
    r.extend_from_slice(&hidden);
    assert!(
        ok_bytes(sc(&r, b"")) == hidden_data,
        "the hidden data changed"
    );
}

/// `format --type veracrypt` refuses what does not fit or does not apply, each with a
/// clear error (exit 2), and writes nothing: a hidden volume larger than the outer volume
/// leaves room for (the existing image keeps its bytes; a new one is not left behind), a
/// hidden size without its passphrase, VeraCrypt's flags on LUKS, an unknown chain.
#[test]
fn format_veracrypt_refuses_bad_input_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = volumes::key_file(dir, "o", "outer").display().to_string();
    let h = volumes::key_file(dir, "h", "hidden").display().to_string();
    let existing = dir.join("existing.img");
    let content: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&existing, &content).unwrap();
    let e = existing.display().to_string();
    let base = [
        "--type",
        "veracrypt",
        "--key-file",
        &o,
        "--veracrypt-pim",
        "1",
        "--batch",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--hidden-size", "1M", "--hidden-key-file", &h],
            "does not fit",
        ),
        (
            vec!["--hidden-size", "740K", "--hidden-key-file", &h],
            "does not fit",
        ),
        (
            vec!["--hidden-size", "8K", "--hidden-key-file", &h],
            "too small",
        ),
        (vec!["--hidden-size", "64K"], "--hidden-key-file"),
        (vec!["--cipher", "rot13"], "unknown VeraCrypt cipher"),
        (vec!["--hash", "argon2id"], "volumes open but are not made"),
        (
            vec![
                "--hidden-size",
                "64K",
                "--hidden-key-file",
                &o,
                "--hidden-veracrypt-pim",
                "1",
            ],
            "must differ",
        ),
    ];
    for (extra, want) in &cases {
        let mut args = vec!["format", &e];
        args.extend_from_slice(&base);
        args.extend_from_slice(extra);
        let out = sc(&args, b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(
            std::fs::read(&existing).unwrap() == content,
            "{extra:?}: the image changed"
        );
    }
    let new = dir.join("new.img").display().to_string();
    let mut args = vec!["format", &new, "--size", "1M"];
    args.extend_from_slice(&base);
    args.extend_from_slice(&["--hidden-size", "1M", "--hidden-key-file", &h]);
    let out = sc(&args, b"");
    assert_eq!(code(&out), 2);
    assert!(
        !Path::new(&new).exists(),
        "a failed format left its new image behind"
    );
    let out = sc(
        &[
            "format",
            &e,
            "--key-file",
            &o,
            "--batch",
            "--veracrypt-pim",
            "1",
        ],
        b"",
    );
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--type veracrypt"));
    assert!(std::fs::read(&existing).unwrap() == content);
}

/// Keyfiles: an outer volume of keyfiles alone (`--no-passphrase`) with a hidden volume of
/// a passphrase and a keyfile (`--hidden-keyfile-component`); the hidden volume opens with
/// both, and protection given both (`--protect-hidden-keyfile-component`) refuses a write
/// into it, while the passphrase alone does not open it for protection.
#[test]
fn hidden_volume_keyfiles_open_and_protect() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let k_outer = volumes::key_file(dir, "ko", "outer keyfile")
        .display()
        .to_string();
    let k_hidden = volumes::key_file(dir, "kh", "hidden keyfile")
        .display()
        .to_string();
    let h = volumes::key_file(dir, "h", "hidden").display().to_string();
    let img = dir.join("vc.img").display().to_string();
    ok(sc(
        &[
            "format",
            &img,
            "--size",
            "2M",
            "--type",
            "veracrypt",
            "--no-passphrase",
            "--keyfile-component",
            &k_outer,
            "--veracrypt-pim",
            "1",
            "--hidden-size",
            "512K",
            "--hidden-key-file",
            &h,
            "--hidden-keyfile-component",
            &k_hidden,
            "--hidden-veracrypt-pim",
            "1",
            "--batch",
        ],
        b"",
    ));
    let data = vec![0x5eu8; 4096];
    let hidden = [
        "--type",
        "veracrypt",
        "--tcrypt-hidden",
        "--veracrypt-pim",
        "1",
        "--key-file",
        &h,
        "--keyfile-component",
        &k_hidden,
    ];
    let mut w = vec!["write", &img];
    w.extend_from_slice(&hidden);
    ok(sc(&w, &data));
    let mut r = vec!["read", &img, "--length", "4096"];
    r.extend_from_slice(&hidden);
    assert!(ok_bytes(sc(&r, b"")) == data);
    // The hidden data is the last 512 KiB of the outer data (2 MiB - 256 KiB).
    let at = ((2 << 20) - 2 * 131_072 - (512 << 10)).to_string();
    let input = dir.join("in");
    std::fs::write(&input, [1u8; 512]).unwrap();
    let input = input.display().to_string();
    let outer = |extra: &[&str]| {
        let mut a = vec![
            "write",
            &img,
            "--input",
            &input,
            "--type",
            "veracrypt",
            "--veracrypt-pim",
            "1",
            "--no-passphrase",
            "--keyfile-component",
            &k_outer,
            "--offset",
            &at,
            "--protect-hidden-key-file",
            &h,
            "--protect-hidden-veracrypt-pim",
            "1",
        ];
        a.extend_from_slice(extra);
        sc(&a, b"")
    };
    let before = std::fs::read(&img).unwrap();
    let out = outer(&["--protect-hidden-keyfile-component", &k_hidden]);
    assert_eq!(code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("protected hidden volume"));
    let out = outer(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("opens no hidden volume header"), "{err}");
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a refused write changed the image"
    );
}

/// Legacy TrueCrypt volumes (4.3 and older) through the binary: `read` of LRW and CBC
/// volumes (a hidden LRW cascade, SHA-1 CAST5) gives the file system cryptsetup's test
/// expects; `dump` names the legacy mode; `test-key` refuses a wrong passphrase (exit 3);
/// `write` is refused as read-only, saying why, and the image does not change.
#[test]
fn legacy_volumes_read_and_refuse_writes() {
    let dir = images_or_skip!();
    let cases: &[(&str, &[u8], &[&str], &str)] = &[
        (
            "tc_2-ripemd160-lrw-serpent-twofish-aes-hidden",
            b"bbbbbbbbbbbb",
            &[
                "--tcrypt-hidden",
                "--hash",
                "ripemd160",
                "--cipher",
                "serpent",
            ],
            "CAFE-BABE",
        ),
        (
            "tc_1-sha1-cbc-cast5",
            b"aaaaaaaaaaaa",
            &["--hash", "sha1"],
            "DEAD-BABE",
        ),
        (
            "tc_2-whirlpool-cbc-aes",
            b"aaaaaaaaaaaa",
            &["--hash", "whirlpool"],
            "DEAD-BABE",
        ),
    ];
    for (name, pass, extra, want) in cases {
        let path = img(dir, name);
        let mut args = vec![
            "read",
            &path,
            "--type",
            "tcrypt",
            "--key-file",
            "-",
            "--length",
            "512",
        ];
        args.extend_from_slice(extra);
        let boot = ok_bytes(sc(&args, pass));
        assert_eq!(serial(&boot), *want, "{name}");
    }

    let path = img(dir, "tc_2-ripemd160-lrw-aes");
    let base = ["--type", "tcrypt", "--hash", "ripemd160", "--key-file", "-"];
    let mut args = vec!["dump", path.as_str()];
    args.extend_from_slice(&base);
    let text = ok(sc(&args, b"aaaaaaaaaaaa"));
    for line in [
        "Cipher chain:  aes",
        "Cipher mode:   lrw-benbi",
        "MK bits:       384",
        "PBKDF2 hash:   ripemd160",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    let mut args = vec!["test-key", path.as_str()];
    args.extend_from_slice(&base);
    let wrong = sc(&args, b"aaaaaaaaaaab");
    assert_eq!(
        code(&wrong),
        3,
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );

    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("legacy");
    std::fs::copy(&path, &copy).unwrap();
    let c = copy.display().to_string();
    let before = sha(&c);
    let pw = volumes::key_file(tmp.path(), "pw", "aaaaaaaaaaaa");
    let p = pw.display().to_string();
    let out = sc(
        &[
            "write",
            &c,
            "--type",
            "tcrypt",
            "--hash",
            "ripemd160",
            "--key-file",
            &p,
        ],
        &[0x41; 4096],
    );
    assert_ne!(code(&out), 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read-only") && err.contains("TrueCrypt 4.3 and older"),
        "{err}"
    );
    assert!(sha(&c) == before, "a refused write changed the image");
}

/// `serve` of a legacy (LRW) volume without `--read-only`: the export is read-only all the
/// same (nbdinfo says so), and nbdcopy reads the file system cryptsetup's test expects.
#[test]
fn serve_exports_a_legacy_volume_read_only() {
    require!("nbdcopy", "nbdinfo");
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let pw = volumes::key_file(tmp.path(), "pw", "aaaaaaaaaaaa");
    let p = pw.display().to_string();
    let copy = tmp.path().join("legacy");
    std::fs::copy(dir.join("tc_2-ripemd160-lrw-twofish"), &copy).unwrap();
    let c = copy.display().to_string();
    let before = sha(&c);
    let sock = tmp.path().join("sock");
    let args = [
        "--type",
        "tcrypt",
        "--hash",
        "ripemd160",
        "--cipher",
        "twofish",
        "--key-file",
        &p,
        &c,
    ];
    let served = served::Served::start(&args, &sock);
    let ro = std::process::Command::new("nbdinfo")
        .args(["--is", "read-only"])
        .arg(served.uri())
        .status()
        .unwrap();
    assert_eq!(ro.code(), Some(0), "nbdinfo --is read-only: {ro}");
    let out = tmp.path().join("out");
    sectorcrypt_testkit::run(
        std::process::Command::new("nbdcopy")
            .arg(served.uri())
            .arg(&out),
    );
    drop(served);
    let plain = std::fs::read(&out).unwrap();
    assert_eq!(serial(&plain[..512]), "DEAD-BABE");
    assert!(sha(&c) == before, "serving changed the image");
}
