//! FileVault 2, read: cryptsetup's test image (`tests/data/fvault2/`, see its README),
//! detected, opened with its passphrase, its `dump` fields, volume key and decrypted
//! logical volume checked against what cryptsetup's `fvault2-compat-test` expects, and
//! the dump against `cryptsetup fvault2Dump`; writes refused and nothing ever written;
//! bad input: a wrong passphrase, damaged checksums (volume header, disk label, encrypted
//! metadata), random data, a truncated image.

use sectorcrypt_testkit::{fixtures_or_skip, require};
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::formats::{read_as, Requested};
use sectorcrypt_volume::fvault2::Fvault2;
use sectorcrypt_volume::{Error, FileStore, Header, HeaderError};
use sha2::{Digest, Sha256};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const PASS: &[u8] = b"heslo123";

/// The extracted image, or a skip.
macro_rules! image_or_skip {
    () => {{
        let tarball =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fvault2/fvault2-images.tar.xz");
        fixtures_or_skip!(tarball, "fvault2-images").join("small")
    }};
}

fn store(path: &Path) -> FileStore {
    FileStore::open(path, false).unwrap()
}

fn sha256_file(path: &Path) -> String {
    hex::encode(Sha256::digest(fs::read(path).unwrap()))
}

/// A scratch copy of the image in `tmp` (holes are not kept: 512 MiB would be written,
/// so only the first `len` bytes are copied and the rest left as a hole).
fn scratch(image: &Path, tmp: &Path, len: u64) -> PathBuf {
    let out = tmp.join("small");
    let src = fs::File::open(image).unwrap();
    let dst = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&out)
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = buf.len().min((len - at) as usize);
        src.read_exact_at(&mut buf[..n], at).unwrap();
        if buf[..n].iter().any(|&b| b != 0) {
            dst.write_all_at(&buf[..n], at).unwrap();
        }
        at += n as u64;
    }
    dst.set_len(fs::metadata(image).unwrap().len()).unwrap();
    out
}

/// The dump's `field: value` lines.
fn fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn field<'a>(f: &'a [(String, String)], key: &str) -> &'a str {
    f.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key} in {f:?}"))
}

#[test]
fn the_image_is_detected_and_dumps_what_cryptsetups_test_expects() {
    let image = image_or_skip!();
    let h = Header::read(&store(&image)).unwrap();
    assert_eq!(h.name(), "fvault2");
    let f = fields(&h.dump());
    for (k, v) in [
        (
            "Physical volume UUID",
            "fc52bfae-5a1f-4f9b-b3a6-f33303a0e401",
        ),
        ("Family UUID", "33a76caa-1481-4bc5-8d04-1ac1707c19c0"),
        ("Logical volume offset", "67108864 [bytes]"),
        ("Logical volume size", "167772160 [bytes]"),
        ("Cipher", "aes"),
        ("Cipher mode", "xts-plain64"),
        ("Cipher key", "256 bits"),
        ("PBKDF2 iterations", "204222"),
        (
            "PBKDF2 salt",
            "2c 24 9e db 66 63 d6 fb cc 79 05 b7 a4 d7 27 52",
        ),
    ] {
        assert_eq!(field(&f, k), v, "{k}");
    }
    let j = h.to_json();
    assert_eq!(j["pbkdf2"]["iterations"], 204222);
    assert_eq!(j["pbkdf2"]["salt"], "2c249edb6663d6fbcc7905b7a4d72752");
    assert_eq!(j["logical_volume"]["offset"], 67108864);
    assert_eq!(j["logical_volume"]["size"], 167772160);
    assert_eq!(h.uuid(), Some("33a76caa-1481-4bc5-8d04-1ac1707c19c0"));
    // Named, the same header.
    let named = read_as(&store(&image), Some(&Requested::Fvault2)).unwrap();
    assert_eq!(named.dump(), h.dump());
}

#[test]
fn the_passphrase_gives_cryptsetups_volume_key_and_the_data_hashes_as_expected() {
    let image = image_or_skip!();
    let before = sha256_file(&image);
    let s = store(&image);
    let h = Header::read(&s).unwrap();
    let u = h.unlock(&s, PASS).unwrap();
    assert_eq!(
        hex::encode(u.volume_key()),
        "20734d3389212774d7610c29d732880916f3be14c4b12ac7aaf07e5ccc77b319"
    );
    assert_eq!(u.cipher, "aes-xts-plain64");
    assert_eq!((u.data_offset, u.data_size), (67108864, 167772160));
    let vol = u
        .engine(Box::new(store(&image)), EngineOptions::default())
        .unwrap();
    assert_eq!(vol.size(), 167772160);
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut at = 0;
    while at < vol.size() {
        vol.read_at(&mut buf, at).unwrap();
        hash.update(&buf);
        at += buf.len() as u64;
    }
    assert_eq!(
        hex::encode(hash.finalize()),
        "2c662e36c0f7e2f5583e6a939bbcbdc660805692d0fccaa45ad4052beb3b8e18"
    );
    // The file system cryptsetup's test finds (HFS+, its UUID checked by blkid there):
    // the volume header signature `H+` at byte 1024.
    vol.read_at(&mut buf[..4096], 0).unwrap();
    assert_eq!(&buf[1024..1026], b"H+");
    // A write, through an engine opened for writing, is refused and writes nothing.
    let vol = u
        .engine(
            Box::new(FileStore::open(&image, true).unwrap()),
            EngineOptions::default(),
        )
        .unwrap();
    let err = vol.write_at(&[0x55; 4096], 8192).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    drop(vol);
    assert_eq!(sha256_file(&image), before, "the image changed");
}

#[test]
fn a_wrong_passphrase_is_a_wrong_passphrase() {
    let image = image_or_skip!();
    let s = store(&image);
    let h = Header::read(&s).unwrap();
    for wrong in [&b"heslo124"[..], b"", b"heslo123\n"] {
        let err = h.unlock(&s, wrong).unwrap_err();
        assert!(matches!(err, Error::WrongPassphrase), "{wrong:?}: {err}");
    }
}

#[test]
fn keyslot_changes_are_refused() {
    let image = image_or_skip!();
    let s = store(&image);
    let h = Header::read(&s).unwrap();
    assert_eq!(h.active_keyslots().unwrap(), vec![0]);
    let mut h = h;
    let err = h.remove_key(&s, 0).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
}

/// Flips one bit of the file at `at`.
fn flip(path: &Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x10;
    f.write_all_at(&b, at).unwrap();
}

#[test]
fn damaged_checksums_are_clear_errors() {
    let image = image_or_skip!();
    let md = Fvault2::read(&store(&image)).unwrap().metadata().clone();
    let label = md.header.disk_label_block * u64::from(md.header.block_size);
    let encrypted = md.encrypted_metadata.0;
    let tmp = tempfile::tempdir().unwrap();
    let path = scratch(&image, tmp.path(), encrypted + (1 << 20));
    let named = |p: &Path| read_as(&store(p), Some(&Requested::Fvault2));

    // The volume header: no longer detected for certain; named, its checksum is the error.
    flip(&path, 200);
    let err = Header::read(&store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Unrecognised(_))),
        "{err}"
    );
    assert!(err.to_string().contains("--type fvault2"), "{err}");
    let err = named(&path).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Corrupt(_))),
        "{err}"
    );
    assert!(
        err.to_string().contains("volume header fails its checksum"),
        "{err}"
    );
    flip(&path, 200);
    Header::read(&store(&path)).unwrap();

    // The disk label block.
    flip(&path, label + 300);
    let err = Header::read(&store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Corrupt(_))),
        "{err}"
    );
    assert!(err.to_string().contains("disk label block"), "{err}");
    flip(&path, label + 300);

    // The first encrypted metadata block: its checksum once decrypted.
    flip(&path, encrypted + 5000);
    let err = named(&path).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Corrupt(_))),
        "{err}"
    );
    assert!(
        err.to_string().contains("encrypted metadata block 0"),
        "{err}"
    );
}

#[test]
fn random_data_and_other_formats_are_not_fvault2() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("random");
    fs::write(&path, sectorcrypt_testkit::pattern(1 << 20, 7)).unwrap();
    let err = Header::read(&store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Unrecognised(_))),
        "{err}"
    );
    let err = read_as(&store(&path), Some(&Requested::Fvault2)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Unrecognised(_))),
        "{err}"
    );
    assert!(
        err.to_string().contains("not a FileVault 2 volume"),
        "{err}"
    );
    // `CS` at byte 88 of random data: still not claimed (the checksum decides).
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(b"CS", 88).unwrap();
    let err = Header::read(&store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Unrecognised(_))),
        "{err}"
    );
}

#[test]
fn a_truncated_image_is_a_clear_error() {
    let image = image_or_skip!();
    let md = Fvault2::read(&store(&image)).unwrap().metadata().clone();
    let tmp = tempfile::tempdir().unwrap();
    let path = scratch(&image, tmp.path(), md.encrypted_metadata.0 + (1 << 20));
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    // Inside the logical volume: the metadata and the key read, the data does not.
    f.set_len(md.data_offset + (1 << 20)).unwrap();
    let s = store(&path);
    let h = Header::read(&s).unwrap();
    let err = h.unlock(&s, PASS).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Truncated(_))),
        "{err}"
    );
    assert!(err.to_string().contains("234881024"), "{err}");
    // Inside the encrypted metadata.
    f.set_len(md.encrypted_metadata.0 + 4096).unwrap();
    let err = Header::read(&store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Truncated(_))),
        "{err}"
    );
    // Inside the volume header: too short to be detected; named, truncated.
    f.set_len(100).unwrap();
    let err = Header::read(&store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Unrecognised(_))),
        "{err}"
    );
    let err = read_as(&store(&path), Some(&Requested::Fvault2)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Truncated(_))),
        "{err}"
    );
}

#[test]
fn dump_agrees_with_cryptsetup_fvault2dump() {
    require!("cryptsetup");
    let image = image_or_skip!();
    // fvault2Dump needs no device-mapper and no root; its AES-XTS may come from the
    // kernel's AF_ALG interface, as tcryptDump's does.
    let out = Command::new("cryptsetup")
        .arg("fvault2Dump")
        .arg(&image)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("kernel crypto interface not available") {
        // A property of the running kernel, which no package installs: a skip even under
        // SECTORCRYPT_STRICT (README, "What still only skips").
        eprintln!("skipped: cryptsetup fvault2Dump needs the kernel's AF_ALG skcipher: {err}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let theirs = fields(&String::from_utf8(out.stdout).unwrap());
    let ours = fields(&Header::read(&store(&image)).unwrap().dump());
    let mut compared = 0;
    for (k, v) in &theirs {
        if k.starts_with("Header information") {
            continue;
        }
        assert_eq!(field(&ours, k), v, "{k}");
        compared += 1;
    }
    assert!(compared >= 8, "{theirs:?}");
}
