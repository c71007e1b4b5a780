//! BitLocker through the binary, on cryptsetup's Windows-made images (committed under
//! `crates/volume/tests/data/bitlk/`): `read` of AES-XTS volumes against the SHA-256 of
//! `images.conf`, with a password, a recovery password, `--bitlk-startup-key` and a
//! clear key (`--no-passphrase`);
//! `serve` read by nbdcopy; `test-key`'s exit codes; `dump --json`; writing an XTS volume and reading it back in
//! another process; and the clear refusals (AES-CBC through the engine, writes into the
//! metadata).

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::require;
use std::path::Path;
use std::process::Command;
use support::{code, ok, ok_bytes, sc};

/// The extracted images (once per test binary, `sectorcrypt_testkit::fixtures`), or a
/// skip when `xz` is missing.
macro_rules! images_or_skip {
    () => {
        sectorcrypt_testkit::fixtures_or_skip!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../volume/tests/data/bitlk/bitlk-images.tar.xz"),
            "bitlk-images"
        )
    };
}

/// `KEY=value` of image `name` in `images.conf`.
fn conf(dir: &Path, name: &str, key: &str) -> String {
    let text = std::fs::read_to_string(dir.join("images.conf")).unwrap();
    let section = text.split(&format!("[{name}]")).nth(1).unwrap();
    section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap()
        .to_string()
}

fn img(dir: &Path, name: &str) -> String {
    dir.join(format!("{name}.img")).display().to_string()
}

#[test]
fn read_of_an_xts_volume_is_its_whole_plaintext() {
    let dir = images_or_skip!();
    for (name, secret) in [
        ("bitlk-aes-xts-128", "PW"),
        ("bitlk-aes-xts-128-4k", "RP"),
        ("bitlk-togo-aes-xts-128", "PW"),
    ] {
        let pass = conf(dir, name, secret);
        let out = ok_bytes(sc(
            &["read", "--key-file", "-", &img(dir, name)],
            pass.as_bytes(),
        ));
        assert_eq!(
            hex::encode(openssl::sha::sha256(&out)),
            conf(dir, name, "SHA256SUM"),
            "{name}"
        );
    }
    // A startup key, no passphrase read; a part of the volume at an offset.
    let name = "bitlk-aes-xts-128-startup-key";
    let bek = dir.join("4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK");
    let whole = ok_bytes(sc(
        &[
            "read",
            "--bitlk-startup-key",
            bek.to_str().unwrap(),
            &img(dir, name),
        ],
        b"",
    ));
    assert_eq!(
        hex::encode(openssl::sha::sha256(&whole)),
        conf(dir, name, "SHA256SUM")
    );
}

#[test]
fn test_key_exits_0_for_each_protector_and_3_for_a_wrong_one() {
    let dir = images_or_skip!();
    let name = "bitlk-aes-xts-128-startup-key-win11";
    let image = img(dir, name);
    let rp = conf(dir, name, "RP");
    let out = ok(sc(&["test-key", "--key-file", "-", &image], rp.as_bytes()));
    assert!(out.contains("keyslot 1 opens"), "{out}");
    let bek = dir.join("AA80A52B-9B66-47AE-B097-33F536FFBB07.BEK");
    let out = ok(sc(
        &[
            "test-key",
            "--bitlk-startup-key",
            bek.to_str().unwrap(),
            &image,
        ],
        b"",
    ));
    assert!(out.contains("keyslot 2 opens"), "{out}");
    let o = sc(
        &["test-key", "--key-file", "-", &image],
        b"not-the-password",
    );
    assert_eq!(code(&o), 3, "{}", String::from_utf8_lossy(&o.stderr));
    // The startup key flag on a LUKS or GELI volume is a usage error.
    let o = sc(
        &[
            "test-key",
            "--bitlk-startup-key",
            bek.to_str().unwrap(),
            "/dev/null",
        ],
        b"",
    );
    assert_ne!(code(&o), 0);
}

#[test]
fn dump_json_shows_the_protectors_and_regions() {
    let dir = images_or_skip!();
    let name = "bitlk-aes-cbc-elephant-256";
    let out = ok(sc(&["dump", "--json", &img(dir, name)], b""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["guid"], conf(dir, name, "GUID"));
    assert_eq!(v["cipher_mode"], "cbc-elephant");
    assert_eq!(v["key_bits"], 512);
    let guids: Vec<&str> = v["vmks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["guid"].as_str().unwrap())
        .collect();
    assert!(
        guids.contains(&conf(dir, name, "PW_VMK_GUID").as_str()),
        "{guids:?}"
    );
    assert!(
        guids.contains(&conf(dir, name, "RP_VMK_GUID").as_str()),
        "{guids:?}"
    );
    // Exactly the fields docs/JSON.md lists (the crc image has a skipped copy).
    let v: serde_json::Value = serde_json::from_str(&ok(sc(
        &["dump", "--json", &img(dir, "bitlk-aes-xts-128-crc")],
        b"",
    )))
    .unwrap();
    let (got, listed) = (
        support::json_paths(&v),
        support::documented_fields("`dump --json`: BitLocker"),
    );
    assert_eq!(got, listed);
    let text = ok(sc(&["dump", &img(dir, name)], b""));
    assert!(
        text.contains("VMK protected with recovery passphrase"),
        "{text}"
    );
}

#[test]
fn cbc_and_elephant_volumes_read_through_the_engine() {
    let dir = images_or_skip!();
    for name in ["bitlk-aes-cbc-elephant-256", "bitlk-aes-cbc-128-4k"] {
        let out = ok_bytes(sc(
            &["read", "--key-file", "-", &img(dir, name)],
            conf(dir, name, "PW").as_bytes(),
        ));
        assert_eq!(
            hex::encode(openssl::sha::sha256(&out)),
            conf(dir, name, "SHA256SUM"),
            "{name}"
        );
    }
}

#[test]
fn write_then_read_in_another_process_and_metadata_stays_unwritable() {
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("v.img");
    std::fs::copy(dir.join("bitlk-aes-xts-128.img"), &image).unwrap();
    let image = image.to_str().unwrap();
    let pass = tmp.path().join("pass");
    std::fs::write(&pass, "anaconda").unwrap();
    let pass = pass.to_str().unwrap();
    let data = tmp.path().join("data");
    let bytes: Vec<u8> = (0..10000u32).map(|i| (i * 7) as u8).collect();
    std::fs::write(&data, &bytes).unwrap();
    // Across the relocated boot sector and into the data after it.
    ok(sc(
        &[
            "write",
            "--key-file",
            pass,
            "--offset",
            "7000",
            "--input",
            data.to_str().unwrap(),
            image,
        ],
        b"",
    ));
    let back = ok_bytes(sc(
        &[
            "read",
            "--key-file",
            pass,
            "--offset",
            "7000",
            "--length",
            "10000",
            image,
        ],
        b"",
    ));
    assert!(back == bytes, "what was written does not read back");
    // Into the metadata (the first FVE area): refused, the image unchanged.
    let dump: serde_json::Value =
        serde_json::from_str(&ok(sc(&["dump", "--json", image], b""))).unwrap();
    let fve = dump["metadata_offsets"][0].as_u64().unwrap().to_string();
    let before = std::fs::read(image).unwrap();
    let o = sc(
        &[
            "write",
            "--key-file",
            pass,
            "--offset",
            &fve,
            "--input",
            data.to_str().unwrap(),
            image,
        ],
        b"",
    );
    assert_ne!(code(&o), 0);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("metadata"), "{err}");
    assert!(
        std::fs::read(image).unwrap() == before,
        "a refused write changed the image"
    );
}

#[test]
fn serve_gives_nbdcopy_the_plaintext() {
    require!("nbdcopy");
    let dir = images_or_skip!();
    let name = "bitlk-togo-aes-xts-128";
    let tmp = tempfile::tempdir().unwrap();
    let pass = tmp.path().join("pass");
    std::fs::write(&pass, conf(dir, name, "RP")).unwrap();
    let sock = tmp.path().join("sock");
    let served = served::Served::start(
        &[
            "--key-file",
            pass.to_str().unwrap(),
            "--read-only",
            &img(dir, name),
        ],
        &sock,
    );
    let out = tmp.path().join("out");
    sectorcrypt_testkit::run(Command::new("nbdcopy").arg(served.uri()).arg(&out));
    drop(served);
    let got = std::fs::read(&out).unwrap();
    assert_eq!(
        hex::encode(openssl::sha::sha256(&got)),
        conf(dir, name, "SHA256SUM")
    );
}
