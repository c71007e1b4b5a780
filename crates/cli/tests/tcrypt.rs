//! VeraCrypt and TrueCrypt through the binary, on cryptsetup's test images (committed
//! under `crates/volume/tests/data/tcrypt/`): `read` of outer and hidden volumes, with a
//! PIM and with keyfiles, checked by the FAT serial cryptsetup's test expects; `write`
//! read back (refused on a hidden volume); `mount`; `test-key`'s exit codes; `dump` and
//! `dump --json`; and the refusals (no `--type`, TCRYPT flags without it, random data).

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
/// process; into a hidden volume it is refused and changes nothing.
#[test]
fn write_reads_back_and_hidden_volumes_refuse_it() {
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
    let before = std::fs::read(&hidden).unwrap();
    let h = hidden.display().to_string();
    let args = [
        "write",
        &h,
        "--type",
        "tcrypt",
        "--tcrypt-hidden",
        "--hash",
        "sha512",
        "--key-file",
        &pb,
    ];
    let out = sc(&args, &data);
    assert_ne!(code(&out), 0);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read-only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read(&hidden).unwrap() == before,
        "the hidden volume's image changed"
    );
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

/// `mount --read-only` of a chained volume (Serpent-Twofish-AES) shows its plaintext as
/// MOUNTPOINT/disk; a hidden volume without --read-only is refused.
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
    let mut hidden = base.to_vec();
    hidden.push("--tcrypt-hidden");
    let out = sc(&hidden, b"");
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
