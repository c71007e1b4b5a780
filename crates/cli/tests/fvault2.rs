//! FileVault 2 through the binary, on cryptsetup's test image (committed under
//! `crates/volume/tests/data/fvault2/`): `dump` and `dump --json` with the fields
//! cryptsetup's `fvault2-compat-test` checks, `test-key`'s exit codes (3 for a wrong
//! passphrase), `read` whose output has the SHA-256 and the file system UUID that test
//! expects, `serve` (read-only without being asked) read by nbdcopy, `mount` (a read-only
//! disk), and the refusals: `write` (read-only), TCRYPT flags
//! with `--type fvault2`, a damaged header only named with `--type fvault2`. The image is
//! never changed.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{fixtures_or_skip, require};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{code, ok, ok_bytes, s, sc};

const SHA256: &str = "2c662e36c0f7e2f5583e6a939bbcbdc660805692d0fccaa45ad4052beb3b8e18";

macro_rules! image_or_skip {
    () => {{
        let tarball = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../volume/tests/data/fvault2/fvault2-images.tar.xz");
        fixtures_or_skip!(tarball, "fvault2-images").join("small")
    }};
}

fn sha256(data: &[u8]) -> String {
    hex::encode(openssl::sha::sha256(data))
}

/// A private copy of the image (sparse: only its first 80 MiB hold data, 64 MiB of them
/// before the logical volume), so that tests that change or check it run apart.
fn copy(image: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("small");
    sectorcrypt_testkit::run(
        Command::new("cp")
            .arg("--sparse=always")
            .arg(image)
            .arg(&out),
    );
    out
}

#[test]
fn dump_shows_the_fields_cryptsetups_test_checks() {
    let image = image_or_skip!();
    let text = ok(sc(&["dump", s(&image)], b""));
    let fields: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    for want in [
        (
            "Physical volume UUID",
            "fc52bfae-5a1f-4f9b-b3a6-f33303a0e401",
        ),
        ("Family UUID", "33a76caa-1481-4bc5-8d04-1ac1707c19c0"),
        ("Logical volume offset", "67108864 [bytes]"),
        ("Logical volume size", "167772160 [bytes]"),
        ("PBKDF2 iterations", "204222"),
        (
            "PBKDF2 salt",
            "2c 24 9e db 66 63 d6 fb cc 79 05 b7 a4 d7 27 52",
        ),
    ] {
        assert!(fields.contains(&want), "{want:?} not in\n{text}");
    }
    let j: serde_json::Value =
        serde_json::from_str(&ok(sc(&["dump", "--json", s(&image)], b""))).unwrap();
    assert_eq!(j["family_uuid"], "33a76caa-1481-4bc5-8d04-1ac1707c19c0");
    assert_eq!(j["cipher_mode"], "xts-plain64");
    assert_eq!(j["key_bits"], 256);
    // Exactly the fields docs/JSON.md lists.
    assert_eq!(
        support::json_paths(&j),
        support::documented_fields("`dump --json`: FileVault 2")
    );
    let j: serde_json::Value =
        serde_json::from_str(&ok(sc(&["dump", "--json=common", s(&image)], b""))).unwrap();
    assert_eq!(j["format"], "fvault2");
    assert_eq!(j["cipher"], "aes-xts-plain64");
    assert_eq!(j["data_offset"], 67108864);
    assert_eq!(j["keyslots"][0]["kdf"]["iterations"], 204222);
}

#[test]
fn test_key_read_and_write_as_cryptsetup_would() {
    let image = image_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let img = copy(&image, tmp.path());
    let before = sha256(&std::fs::read(&img).unwrap());
    let pw = volumes::key_file(tmp.path(), "pw", "heslo123");
    let bad = volumes::key_file(tmp.path(), "bad", "heslo1234");
    let out = sc(&["test-key", s(&img), "--key-file", s(&pw)], b"");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let out = sc(&["test-key", s(&img), "--key-file", s(&bad)], b"");
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    // Standard input as the key file, as cryptsetup's test gives it.
    let out = sc(&["test-key", s(&img), "--key-file", "-"], b"heslo123");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));

    let plain = ok_bytes(sc(&["read", s(&img), "--key-file", s(&pw)], b""));
    assert_eq!(plain.len(), 167772160);
    assert_eq!(sha256(&plain), SHA256);
    if !sectorcrypt_testkit::have("blkid") {
        sectorcrypt_testkit::skipped!("skipped (the file system UUID): blkid is not installed");
    } else {
        let out_file = tmp.path().join("plain");
        std::fs::write(&out_file, &plain).unwrap();
        let uuid = sectorcrypt_testkit::run_stdout(
            Command::new("blkid")
                .args(["-po", "value", "-s", "UUID"])
                .arg(&out_file),
        );
        assert_eq!(uuid.trim(), "de124d8a-2164-394e-924f-8e28db0a09cb");
    }

    // Writes are refused, and nothing of the image changes.
    let out = sc(&["write", s(&img), "--key-file", s(&pw)], &[0x41; 4096]);
    assert_ne!(code(&out), 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("read-only"), "{err}");
    assert_eq!(sha256(&std::fs::read(&img).unwrap()), before);
}

/// `serve` without `--read-only`: the export is read-only all the same (nbdinfo says so),
/// and nbdcopy reads the plaintext cryptsetup's test expects.
#[test]
fn serve_exports_the_plaintext_read_only() {
    require!("nbdcopy", "nbdinfo");
    let image = image_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let pw = volumes::key_file(tmp.path(), "pw", "heslo123");
    let sock = tmp.path().join("sock");
    // A copy: serving without --read-only claims the image as a writer would.
    let img = copy(&image, tmp.path());
    let served = served::Served::start(&["--key-file", s(&pw), s(&img)], &sock);
    let ro = Command::new("nbdinfo")
        .args(["--is", "read-only"])
        .arg(served.uri())
        .status()
        .unwrap();
    assert_eq!(ro.code(), Some(0), "nbdinfo --is read-only: {ro}");
    let out = tmp.path().join("out");
    sectorcrypt_testkit::run(Command::new("nbdcopy").arg(served.uri()).arg(&out));
    drop(served);
    assert_eq!(sha256(&std::fs::read(&out).unwrap()), SHA256);
}

/// `mount` without `--read-only` shows a read-only MOUNTPOINT/disk with the plaintext.
#[test]
fn mount_shows_a_read_only_disk() {
    let image = image_or_skip!();
    if !Path::new("/dev/fuse").exists() {
        sectorcrypt_testkit::skipped!("skipped: no /dev/fuse");
        return;
    }
    require!("fusermount3");
    let tmp = tempfile::tempdir().unwrap();
    let mp = tmp.path().join("mp");
    std::fs::create_dir(&mp).unwrap();
    let pw = volumes::key_file(tmp.path(), "pw", "heslo123");
    let img = copy(&image, tmp.path());
    ok(sc(&["mount", s(&img), s(&mp), "--key-file", s(&pw)], b""));
    let disk = mp.join("disk");
    let data = std::fs::read(&disk);
    // The handle is closed at once: an open file would keep the mount busy.
    let writable = std::fs::OpenOptions::new().write(true).open(&disk).is_ok();
    volumes::unmount(&mp);
    assert_eq!(sha256(&data.unwrap()), SHA256);
    assert!(!writable, "the disk opened for writing");
}

#[test]
fn refusals_are_clear() {
    let image = image_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let img = copy(&image, tmp.path());
    // TCRYPT flags with --type fvault2.
    let out = sc(
        &["dump", s(&img), "--type", "fvault2", "--tcrypt-hidden"],
        b"",
    );
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("FileVault 2 takes none"));
    // A damaged volume header: not detected; named, its checksum.
    let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"\xff", 300).unwrap();
    let out = sc(&["dump", s(&img)], b"");
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--type fvault2"));
    let out = sc(&["dump", s(&img), "--type", "fvault2"], b"");
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("volume header fails its checksum"), "{err}");
    // Random data named as FileVault 2.
    let random = tmp.path().join("random");
    std::fs::write(&random, sectorcrypt_testkit::pattern(1 << 16, 3)).unwrap();
    let out = sc(
        &[
            "test-key",
            s(&random),
            "--type",
            "fvault2",
            "--key-file",
            "-",
        ],
        b"x",
    );
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a FileVault 2 volume"), "{err}");
}

/// Formatting GELI over a FileVault 2 volume (whose metadata sits in the last sector, far
/// from the CoreStorage header at 0) wipes that header first, so the provider opens as
/// GELI alone instead of as two formats at once.
#[test]
fn geli_init_over_it_wipes_the_corestorage_header() {
    let image = image_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let img = copy(&image, tmp.path());
    let pass = volumes::key_file(tmp.path(), "pass", "secret");
    let out = sc(
        &[
            "geli",
            "init",
            "-J",
            s(&pass),
            "-i",
            "0",
            "-B",
            "none",
            s(&img),
            "--batch",
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let head = std::fs::read(&img).unwrap();
    assert!(
        head[..512].iter().all(|&b| b == 0),
        "the header is still there"
    );
    let j: serde_json::Value =
        serde_json::from_str(&ok(sc(&["dump", "--json=common", s(&img)], b""))).unwrap();
    assert_eq!(j["format"], "geli");
}
