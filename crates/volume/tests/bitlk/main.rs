//! BitLocker, read: cryptsetup's Windows-made test images (`tests/data/bitlk/`), each
//! opened with every protector `images.conf` names and its whole decrypted view hashed
//! against the SHA-256 there; `dump` against `cryptsetup bitlkDump` (and the data key
//! against `bitlkDump --dump-volume-key`); the plaintext against dislocker's `dislocker-file`;
//! and bad input: a wrong password, damaged FVE
//! copies, a damaged volume header, a truncated image.

use sectorcrypt_testkit::{require, skipped};
use sectorcrypt_volume::bitlk::Bitlk;
use sectorcrypt_volume::format::Format;
use sectorcrypt_volume::{Error, FileStore, Header, HeaderError};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use zeroize::Zeroizing;

/// The extracted images (once per test binary, `sectorcrypt_testkit::fixtures`), or a
/// skip when `xz` is missing.
macro_rules! images_or_skip {
    () => {
        sectorcrypt_testkit::fixtures_or_skip!(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bitlk/bitlk-images.tar.xz"),
            "bitlk-images"
        )
    };
}

/// `images.conf`: image name → its settings.
fn config(dir: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let text = fs::read_to_string(dir.join("images.conf")).unwrap();
    let mut out = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.to_string());
            out.insert(name.to_string(), BTreeMap::new());
        } else if let (Some(name), Some((k, v))) = (&current, line.split_once('=')) {
            out.get_mut(name)
                .unwrap()
                .insert(k.to_string(), v.to_string());
        }
    }
    out
}

fn open_store(path: &Path) -> FileStore {
    FileStore::open(path, false).unwrap()
}

/// The data key from `secret` (a passphrase, or a `.BEK` file when `bek`).
fn unlock(
    store: &FileStore,
    secret: &[u8],
    bek: Option<Vec<u8>>,
) -> sectorcrypt_volume::Result<(Bitlk, Zeroizing<Vec<u8>>, usize)> {
    let mut b = Bitlk::read(store)?;
    if let Some(bek) = bek {
        b.set_keyfiles(vec![Zeroizing::new(bek)])?;
    }
    let (key, slot) = b.unlock_key(store, secret, None)?;
    Ok((b, key, slot))
}

/// SHA-256 of the whole decrypted view.
fn view_sha256(b: &Bitlk, store: &FileStore, key: &[u8]) -> String {
    let view = b.view(store, key).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < view.size() {
        let n = (view.size() - at).min(buf.len() as u64) as usize;
        view.read_at(store, &mut buf[..n], at).unwrap();
        h.update(&buf[..n]);
        at += n as u64;
    }
    hex::encode(h.finalize())
}

/// A protector of an image: what it is, the passphrase, the BEK file, the VMK GUID it
/// opens.
type Protector = (String, Vec<u8>, Option<Vec<u8>>, String);

/// The protectors of an image.
fn protectors(dir: &Path, c: &BTreeMap<String, String>) -> Vec<Protector> {
    let get = |k: &str| c.get(k).cloned().unwrap_or_default();
    let mut out = Vec::new();
    if !get("PW").is_empty() {
        out.push((
            "password".into(),
            get("PW").into_bytes(),
            None,
            get("PW_VMK_GUID"),
        ));
    }
    if !get("RP").is_empty() {
        out.push((
            "recovery password".into(),
            get("RP").into_bytes(),
            None,
            get("RP_VMK_GUID"),
        ));
    }
    if !get("RP2").is_empty() {
        out.push((
            "second recovery password".into(),
            get("RP2").into_bytes(),
            None,
            get("RP2_VMK_GUID"),
        ));
    }
    if !get("SK_VMK_GUID").is_empty() {
        let g = get("SK_VMK_GUID");
        let bek = fs::read(dir.join(format!("{}.BEK", g.to_uppercase()))).unwrap();
        out.push(("startup key".into(), Vec::new(), Some(bek), g));
    }
    if !get("CLEARKEY_VMK_GUID").is_empty() {
        out.push((
            "clear key".into(),
            Vec::new(),
            None,
            get("CLEARKEY_VMK_GUID"),
        ));
    }
    out
}

fn vmk_guid(b: &Bitlk, slot: usize) -> String {
    b.to_json()["vmks"][slot]["guid"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn every_fixture_opens_with_each_protector_and_its_plaintext_matches_images_conf() {
    let dir = images_or_skip!();
    let conf = config(dir);
    let mut checked = 0;
    for (name, c) in &conf {
        let want = c.get("SHA256SUM").cloned().unwrap_or_default();
        let path = dir.join(format!("{name}.img"));
        let store = open_store(&path);
        let header = Header::read(&store).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(header.name(), "bitlk", "{name}");
        if want.is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        let mut first_key: Option<Zeroizing<Vec<u8>>> = None;
        for (what, secret, bek, guid) in protectors(dir, c) {
            let (b, key, slot) = unlock(&store, &secret, bek)
                .unwrap_or_else(|e| panic!("{name} with its {what}: {e}"));
            assert_eq!(
                vmk_guid(&b, slot),
                guid,
                "{name}: the {what} opened another VMK"
            );
            match &first_key {
                None => {
                    assert_eq!(
                        view_sha256(&b, &store, &key),
                        want,
                        "{name}: plaintext SHA-256"
                    );
                    first_key = Some(key);
                }
                Some(k) => assert_eq!(&key[..], &k[..], "{name}: the {what} gives another key"),
            }
        }
        assert!(first_key.is_some(), "{name}: no protector to test");
        eprintln!("TIMING {name} {:?}", started.elapsed());
        checked += 1;
    }
    assert!(checked >= 19, "only {checked} images had a SHA-256");
}

#[test]
fn the_unsupported_fixtures_open_their_keys_and_refuse_their_data_clearly() {
    let dir = images_or_skip!();
    for (name, why) in [
        ("bitlk-aes-xts-128-eow", "encrypt-on-write"),
        // Its header carries the encrypt-on-write GUID while the conversion runs.
        ("bitlk-partially-encrypted-aes-cbc-128", "encrypt-on-write"),
    ] {
        let store = open_store(&dir.join(format!("{name}.img")));
        let (b, key, _) = unlock(&store, b"anaconda", None).unwrap();
        let err = b.view(&store, &key).unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{name}: {err}");
        assert!(err.to_string().contains(why), "{name}: {err}");
        assert!(err.to_string().contains("not supported"), "{name}: {err}");
    }
    // A smart-card VMK cannot be used; its recovery password can.
    let store = open_store(&dir.join("bitlk-aes-xts-128-smart-card.img"));
    let err = unlock(&store, b"", None).unwrap_err();
    assert!(err.to_string().contains("smart-card"), "{err}");
}

#[test]
fn a_wrong_password_or_recovery_password_is_a_wrong_passphrase() {
    let dir = images_or_skip!();
    let store = open_store(&dir.join("bitlk-aes-xts-128.img"));
    for wrong in [
        &b"anacondA"[..],
        b"235818-357951-253979-013365-241120-245575-342914-591921",
    ] {
        let err = unlock(&store, wrong, None).unwrap_err();
        assert!(matches!(err, Error::WrongPassphrase), "{err}");
    }
    // A BEK of another volume's VMK opens nothing.
    let bek = fs::read(dir.join("4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK")).unwrap();
    let store = open_store(&dir.join("bitlk-aes-xts-128-startup-key-win11.img"));
    let err = unlock(&store, b"", Some(bek)).unwrap_err();
    assert!(matches!(err, Error::WrongPassphrase), "{err}");
    // Debug output names no key: the startup key's bytes and the clear key stay out.
    let mut b = Bitlk::read(&open_store(
        &dir.join("bitlk-aes-xts-128-clearkey-only.img"),
    ))
    .unwrap();
    let bek = fs::read(dir.join("AA80A52B-9B66-47AE-B097-33F536FFBB07.BEK")).unwrap();
    let clear = b.metadata().vmks[0].clear_key.clone().unwrap();
    b.set_keyfiles(vec![Zeroizing::new(bek.clone())]).unwrap();
    let debug = format!("{b:?}");
    let run = |k: &[u8]| {
        k.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(
        !debug.contains(&run(&bek[bek.len() - 32..bek.len() - 20])),
        "{debug}"
    );
    assert!(!debug.contains(&run(&clear[4..16])), "{debug}");
    // The Unicode password is hashed as UTF-16 of its characters, not of its bytes.
    let store = open_store(&dir.join("bitlk-aes-xts-128-unicode.img"));
    assert!(matches!(
        unlock(&store, b"anaconda", None).unwrap_err(),
        Error::WrongPassphrase
    ));
}

/// A sparse copy of an image, to damage.
fn scratch_copy(dir: &Path, name: &str, tmp: &Path) -> PathBuf {
    let to = tmp.join(format!("{name}.img"));
    sectorcrypt_testkit::run(
        Command::new("cp")
            .arg("--sparse=always")
            .arg(dir.join(format!("{name}.img")))
            .arg(&to),
    );
    to
}

fn fve_offsets(path: &Path) -> Vec<u64> {
    let b = Bitlk::read(&open_store(path)).unwrap();
    b.to_json()["metadata_offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

fn flip(path: &Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x55;
    f.write_all_at(&b, at).unwrap();
}

#[test]
fn a_damaged_fve_copy_falls_back_to_the_next_and_all_three_damaged_is_a_clear_error() {
    let dir = images_or_skip!();
    // cryptsetup's own image with damaged copies.
    let b = Bitlk::read(&open_store(&dir.join("bitlk-aes-xts-128-crc.img"))).unwrap();
    assert!(
        b.metadata().copy > 0,
        "the crc image's first copy is damaged"
    );
    assert!(
        b.metadata().bad_copies[0].1.contains("CRC-32"),
        "{:?}",
        b.metadata().bad_copies
    );

    let tmp = tempfile::tempdir().unwrap();
    let path = scratch_copy(dir, "bitlk-aes-xts-128", tmp.path());
    let offsets = fve_offsets(&path);
    // Damage an entry of the first copy (its description): copy 1 is used, and still opens
    // to the same plaintext.
    flip(&path, offsets[0] + 200);
    let store = open_store(&path);
    let (b, key, _) = unlock(&store, b"anaconda", None).unwrap();
    assert_eq!(b.metadata().copy, 1);
    assert!(
        b.metadata().bad_copies[0].1.contains("CRC-32 mismatch"),
        "{:?}",
        b.metadata().bad_copies
    );
    let want = config(dir)["bitlk-aes-xts-128"]["SHA256SUM"].clone();
    assert_eq!(view_sha256(&b, &store, &key), want);
    drop(store);
    flip(&path, offsets[1] + 200);
    flip(&path, offsets[2] + 3);
    let err = Bitlk::read(&open_store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Corrupt(_))),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("no valid BitLocker FVE metadata copy"),
        "{msg}"
    );
    assert!(msg.contains("copy 2") && msg.contains("signature"), "{msg}");
}

#[test]
fn a_damaged_volume_header_is_a_clear_error() {
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let path = scratch_copy(dir, "bitlk-aes-xts-128", tmp.path());
    flip(&path, 0);
    let err = Header::read(&open_store(&path)).unwrap_err();
    assert!(err.to_string().contains("unknown boot code"), "{err}");
    flip(&path, 0);
    // A sector size of 1024.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&1024u16.to_le_bytes(), 11).unwrap();
    let err = Header::read(&open_store(&path)).unwrap_err();
    assert!(err.to_string().contains("sector size 1024"), "{err}");
    // No signature: not BitLocker at all.
    f.write_all_at(b"NTFS    ", 3).unwrap();
    let err = Header::read(&open_store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Unrecognised(_))),
        "{err}"
    );
}

#[test]
fn a_truncated_image_is_a_clear_error() {
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let path = scratch_copy(dir, "bitlk-aes-xts-128", tmp.path());
    let offsets = fve_offsets(&path);
    // Past the first copy: the metadata reads, the data does not.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(offsets[0] + 2 * 65536).unwrap();
    let store = open_store(&path);
    let (b, key, _) = unlock(&store, b"anaconda", None).unwrap();
    let err = b.view(&store, &key).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Truncated(_))),
        "{err}"
    );
    assert!(err.to_string().contains("104857600"), "{err}");
    // Before every copy.
    f.set_len(1 << 20).unwrap();
    let err = Header::read(&open_store(&path)).unwrap_err();
    assert!(
        matches!(err, Error::Header(HeaderError::Truncated(_))),
        "{err}"
    );
    // Inside the volume header.
    f.set_len(100).unwrap();
    let err = Header::read(&open_store(&path)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Header(HeaderError::Unrecognised(_)) | Error::Header(HeaderError::Truncated(_))
        ),
        "{err}"
    );
}

/// `cryptsetup bitlkDump` as field → value lines, in order.
fn bitlk_dump(path: &Path, extra: &[&str], stdin: Option<&[u8]>) -> Vec<(String, String)> {
    bitlk_dump_text(path, extra, stdin)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// `cryptsetup bitlkDump`'s output.
fn bitlk_dump_text(path: &Path, extra: &[&str], stdin: Option<&[u8]>) -> String {
    use std::io::Write as _;
    let mut cmd = Command::new("cryptsetup");
    cmd.arg("bitlkDump").args(extra).arg(path);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        let mut sin = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            sin.write_all(s).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn dump_agrees_with_cryptsetup_bitlk_dump_on_every_fixture() {
    require!("cryptsetup");
    let dir = images_or_skip!();
    for name in config(dir).keys() {
        let path = dir.join(format!("{name}.img"));
        let ours = Bitlk::read(&open_store(&path)).unwrap().to_json();
        let theirs = bitlk_dump(&path, &[], None);
        let get = |k: &str| -> Vec<&str> {
            theirs
                .iter()
                .filter(|(a, _)| a == k)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        let num = |v: &str| v.split_whitespace().next().unwrap().to_string();
        assert_eq!(get("GUID")[0], ours["guid"], "{name}");
        assert_eq!(
            num(get("Sector size")[0]),
            ours["sector_size"].to_string(),
            "{name}"
        );
        assert_eq!(
            num(get("Volume size")[0]),
            ours["volume_size"].to_string(),
            "{name}"
        );
        // cryptsetup 2.6 reads the first FVE copy without checking its CRC-32: where that
        // copy is damaged (the crc image) its description shows the damage, ours the good
        // copy's.
        if ours["skipped_copies"].as_array().unwrap().is_empty() {
            assert_eq!(
                get("Description")[0],
                ours["description"].as_str().unwrap(),
                "{name}"
            );
        } else {
            assert_ne!(
                get("Description")[0],
                ours["description"].as_str().unwrap(),
                "{name}"
            );
        }
        assert_eq!(get("Cipher mode")[0], ours["cipher_mode"], "{name}");
        assert_eq!(
            num(get("Cipher key")[0]),
            ours["key_bits"].to_string(),
            "{name}"
        );
        let vmks = ours["vmks"].as_array().unwrap();
        let guids = get("GUID");
        let salts = get("Salt");
        assert_eq!(guids.len() - 1, vmks.len(), "{name}: VMK count");
        for (i, v) in vmks.iter().enumerate() {
            assert_eq!(guids[i + 1], v["guid"], "{name}: VMK {i}");
            assert_eq!(
                salts[i],
                v["salt"]
                    .as_str()
                    .unwrap_or("00000000000000000000000000000000"),
                "{name}: VMK {i}"
            );
        }
        let offsets: Vec<String> = get("Offset").iter().map(|v| num(v)).collect();
        let sizes: Vec<String> = get("Size").iter().map(|v| num(v)).collect();
        for i in 0..3 {
            assert_eq!(
                offsets[i],
                ours["metadata_offsets"][i].to_string(),
                "{name}: copy {i}"
            );
        }
        assert_eq!(
            offsets[3],
            ours["volume_header"]["offset"].to_string(),
            "{name}"
        );
        assert_eq!(
            sizes[3],
            ours["volume_header"]["size"].to_string(),
            "{name}"
        );
    }
}

#[test]
fn the_data_key_agrees_with_cryptsetup_dump_volume_key() {
    require!("cryptsetup");
    let dir = images_or_skip!();
    for name in [
        "bitlk-aes-xts-128",
        "bitlk-aes-xts-256",
        "bitlk-aes-cbc-128",
        "bitlk-aes-cbc-elephant-128",
        "bitlk-aes-cbc-elephant-256",
        "bitlk-aes-xts-128-4k",
    ] {
        let path = dir.join(format!("{name}.img"));
        let text = bitlk_dump_text(
            &path,
            &["--dump-volume-key", "--batch-mode", "--key-file=-"],
            Some(b"anaconda"),
        );
        // "MK dump:" then hex bytes over several tab-indented lines.
        let after = text.split_once("MK dump:").expect("an MK dump").1;
        let theirs: String = after
            .lines()
            .take_while(|l| !l.trim().is_empty() && !l.contains(':'))
            .flat_map(|l| l.split_whitespace())
            .collect();
        let store = open_store(&path);
        let (_, key, _) = unlock(&store, b"anaconda", None).unwrap();
        assert_eq!(hex::encode(&key[..]), theirs, "{name}");
    }
}

#[test]
fn the_plaintext_agrees_with_dislocker_file() {
    // dislocker-file has no --version (testkit's `have`): its -h succeeds.
    if !Command::new("dislocker-file")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        skipped!("skipped: dislocker-file is not installed");
        return;
    }
    let dir = images_or_skip!();
    let conf = config(dir);
    let tmp = tempfile::tempdir().unwrap();
    // One image of each method and sector size, with a password or a recovery password.
    for (name, flag, key) in [
        ("bitlk-aes-cbc-elephant-128", "-u", "PW"),
        ("bitlk-aes-cbc-256", "-p", "RP"),
        ("bitlk-aes-xts-128-4k", "-u", "PW"),
        ("bitlk-togo-aes-cbc-128", "-p", "RP"),
    ] {
        let path = dir.join(format!("{name}.img"));
        let out = tmp.path().join(format!("{name}.raw"));
        let secret = &conf[name][key];
        sectorcrypt_testkit::run(
            Command::new("dislocker-file")
                .arg("-V")
                .arg(&path)
                .arg(format!("{flag}{secret}"))
                .arg("--")
                .arg(&out),
        );
        let theirs = hex::encode(Sha256::digest(fs::read(&out).unwrap()));
        fs::remove_file(&out).unwrap();
        let store = open_store(&path);
        let (b, key, _) = unlock(&store, secret.as_bytes(), None).unwrap();
        assert_eq!(view_sha256(&b, &store, &key), theirs, "{name}");
    }
}

/// The plaintext of the whole view.
fn view_bytes(path: &Path, pass: &[u8]) -> Vec<u8> {
    let store = open_store(path);
    let (b, key, _) = unlock(&store, pass, None).unwrap();
    let view = b.view(&store, &key).unwrap();
    let mut out = vec![0u8; view.size() as usize];
    view.read_at(&store, &mut out, 0).unwrap();
    out
}

#[test]
fn writes_through_the_engine_read_back_and_leave_other_sectors_alone() {
    for name in [
        "bitlk-aes-xts-128",
        "bitlk-aes-cbc-elephant-128",
        "bitlk-aes-cbc-128-4k",
    ] {
        write_round_trip(name);
    }
}

fn write_round_trip(name: &str) {
    use sectorcrypt_volume::engine::EngineOptions;
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let orig = dir.join(format!("{name}.img"));
    let path = scratch_copy(dir, name, tmp.path());
    let before_plain = view_bytes(&orig, b"anaconda");
    let offsets = fve_offsets(&path);
    let b = Bitlk::read(&open_store(&path)).unwrap();
    let ((vh, vh_len), ss) = (
        b.metadata().volume_header,
        u64::from(b.metadata().header.sector_size),
    );
    // In the relocated boot sector (stored at the volume-header offset), unaligned across
    // sectors; in place; at the end of the volume.
    let size = before_plain.len() as u64;
    let writes: Vec<(u64, Vec<u8>)> = vec![
        (100, (0..3000).map(|i| (i % 253) as u8).collect()),
        ((1 << 20) + 512, vec![0xa5; 8192]),
        (size - 4096, vec![0x3c; 4096]),
    ];
    {
        let store = FileStore::open(&path, true).unwrap();
        let header = Header::read(&store).unwrap();
        let unlocked = header.unlock(&store, b"anaconda").unwrap();
        let vol = unlocked
            .engine(
                Box::new(FileStore::open(&path, true).unwrap()),
                EngineOptions::default(),
            )
            .unwrap();
        for (at, data) in &writes {
            vol.write_at(data, *at).unwrap();
        }
        // Into the first FVE area (metadata, shown as zeros): refused, nothing written.
        let err = vol.write_at(&[1u8; 1024], offsets[0] - 512).unwrap_err();
        assert!(err.to_string().contains("metadata"), "{name}: {err}");
        vol.flush().unwrap();
    }
    // Read back by another path (the library's view over a fresh open).
    let mut want = before_plain.clone();
    for (at, data) in &writes {
        want[*at as usize..*at as usize + data.len()].copy_from_slice(data);
    }
    let got = view_bytes(&path, b"anaconda");
    assert!(got == want, "{name}: the written volume does not read back");
    // Untouched sectors keep their ciphertext: only the sectors written may differ.
    let (a, b) = (fs::read(&orig).unwrap(), fs::read(&path).unwrap());
    let changed: Vec<u64> = a
        .chunks(ss as usize)
        .zip(b.chunks(ss as usize))
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, _)| i as u64 * ss)
        .collect();
    let stored = |v: u64| if v < vh_len { vh + v } else { v };
    let allowed: Vec<u64> = writes
        .iter()
        .flat_map(|(at, d)| (at / ss * ss..at + d.len() as u64).step_by(ss as usize))
        .map(stored)
        .collect();
    for c in &changed {
        assert!(allowed.contains(c), "{name}: sector at {c} changed");
    }
    assert!(!changed.is_empty());
    // dislocker reads what was written.
    if Command::new("dislocker-file")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let out = tmp.path().join("dl.raw");
        sectorcrypt_testkit::run(
            Command::new("dislocker-file")
                .arg("-V")
                .arg(&path)
                .arg("-uanaconda")
                .arg("--")
                .arg(&out),
        );
        assert!(
            fs::read(&out).unwrap() == want,
            "{name}: dislocker reads other bytes"
        );
    } else {
        skipped!("skipped (the dislocker part): dislocker-file is not installed");
    }
}

#[test]
fn an_unknown_encryption_method_is_refused_before_any_key_work() {
    use sectorcrypt_volume::bitlk::metadata::crc32;
    let dir = images_or_skip!();
    let tmp = tempfile::tempdir().unwrap();
    let path = scratch_copy(dir, "bitlk-aes-xts-128", tmp.path());
    // Method 0x9000 in every copy, each copy's CRC-32 made to match again.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    for off in fve_offsets(&path) {
        let mut head = [0u8; 10];
        f.read_exact_at(&mut head, off).unwrap();
        let len = usize::from(u16::from_le_bytes([head[8], head[9]])) << 4;
        let mut block = vec![0u8; len];
        f.read_exact_at(&mut block, off).unwrap();
        block[100..102].copy_from_slice(&0x9000u16.to_le_bytes());
        f.write_all_at(&block, off).unwrap();
        f.write_all_at(&crc32(&block).to_le_bytes(), off + len as u64 + 4)
            .unwrap();
    }
    let store = open_store(&path);
    let b = Bitlk::read(&store).unwrap();
    assert_eq!(b.to_json()["method"], "0x9000");
    let started = std::time::Instant::now();
    let err = b.unlock_key(&store, b"anaconda", None).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("0x9000"), "{err}");
    // Refused before the password stretch (which takes far longer in a test build).
    assert!(started.elapsed() < std::time::Duration::from_millis(200));
}
