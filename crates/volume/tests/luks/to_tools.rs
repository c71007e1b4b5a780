//! Volumes made here, checked by cryptsetup (luksDump, --test-passphrase, the volume key,
//! luksAddKey) and, for LUKS1, read back through qemu-img and nbdkit's luks filter.

use crate::common::*;
use sectorcrypt_testkit::{pattern, require, run};
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::luks::{format, FormatOptions, Version};
use sectorcrypt_volume::{backup_header, restore_header, Error, Header, KeyslotError};
use std::path::{Path, PathBuf};
use std::process::Command;

fn cryptsetup_accepts(img: &Path, pass_file: &Path) -> bool {
    Command::new("cryptsetup")
        .args(["open", "--test-passphrase", "--key-file"])
        .arg(pass_file)
        .arg(img)
        .output()
        .unwrap()
        .status
        .success()
}

fn luks_dump(img: &Path) -> String {
    let out = run(Command::new("cryptsetup").arg("luksDump").arg(img));
    String::from_utf8(out.stdout).unwrap()
}

/// Formats `img` here with `opts`, writes a pattern through the cipher, and checks what
/// cryptsetup says about it.
fn format_and_check(dir: &Path, opts: &FormatOptions, size: u64) -> (PathBuf, Vec<u8>) {
    let img = blank_image(dir, size);
    let f = open_rw(&img);
    let (_h, u) = format(&f, opts, b"our passphrase", None).unwrap();
    let data = pattern(MIB as usize, 5);
    write_plain(&f, &u, 0, &data);
    drop(f);
    let dump = luks_dump(&img);
    assert!(dump.contains(&opts.cipher), "{dump}");
    let good = file_with(dir, "good", b"our passphrase");
    let bad = file_with(dir, "bad", b"our passphrase\n");
    assert!(cryptsetup_accepts(&img, &good));
    assert!(!cryptsetup_accepts(&img, &bad));
    assert_eq!(cryptsetup_volume_key(&img, &good), u.volume_key());
    (img, data)
}

fn luks2_opts(cipher: &str, bits: usize, sector: usize, kdf: KdfOptions) -> FormatOptions {
    FormatOptions {
        cipher: cipher.into(),
        key_bytes: bits / 8,
        sector_size: sector,
        kdf,
        label: "sectorcrypt test".into(),
        ..FormatOptions::default()
    }
}

/// After `cryptsetup luksAddKey`, the new passphrase opens here to the same key and data.
fn cryptsetup_add_key_opens_here(dir: &Path, img: &Path, data: &[u8]) {
    let good = dir.join("good");
    let new = file_with(dir, "new", b"added by cryptsetup");
    run(Command::new("cryptsetup")
        .args([
            "luksAddKey",
            "-q",
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
        ])
        .arg("--key-file")
        .arg(&good)
        .arg(img)
        .arg(&new));
    let f = open_ro(img);
    let h = Header::read(&f).unwrap();
    let a = h.unlock(&f, b"our passphrase").unwrap();
    let b = h.unlock(&f, b"added by cryptsetup").unwrap();
    assert_ne!(a.keyslot, b.keyslot);
    assert_eq!(a.volume_key(), b.volume_key());
    assert!(read_plain(&f, &b, 0, data.len()) == data);
}

/// An aes-xts-plain64 volume with a PBKDF2 keyslot, checked by cryptsetup.
fn pbkdf2_volume(dir: &Path) -> (PathBuf, Vec<u8>) {
    let opts = luks2_opts("aes-xts-plain64", 512, 512, fast_pbkdf2());
    format_and_check(dir, &opts, 20 * MIB)
}

#[test]
fn luks2_pbkdf2_xts512_checked_by_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, data) = pbkdf2_volume(dir.path());
    assert!(luks_dump(&img).contains("sectorcrypt test"));
    cryptsetup_add_key_opens_here(dir.path(), &img, &data);
}

#[test]
fn luks2_argon2id_xts256_sector4096_checked_by_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let opts = luks2_opts("aes-xts-plain64", 256, 4096, fast_argon2(KdfKind::Argon2id));
    let (img, data) = format_and_check(dir.path(), &opts, 20 * MIB);
    let dump = luks_dump(&img);
    assert!(
        dump.contains("argon2id") && dump.contains("sector: 4096"),
        "{dump}"
    );
    cryptsetup_add_key_opens_here(dir.path(), &img, &data);
}

#[test]
fn luks2_argon2i_cbc_essiv_checked_by_cryptsetup() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let opts = luks2_opts(
        "aes-cbc-essiv:sha256",
        256,
        512,
        fast_argon2(KdfKind::Argon2i),
    );
    format_and_check(dir.path(), &opts, 20 * MIB);
}

/// Keyslot changes made here keep cryptsetup happy, and tokens sectorcrypt does not
/// understand survive the rewrite.
#[test]
fn luks2_key_changes_and_foreign_tokens_survive() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, _data) = pbkdf2_volume(dir.path());
    let token = dir.path().join("token.json");
    std::fs::write(
        &token,
        br#"{"type":"x-sectorcrypt-test","keyslots":["0"],"note":"kept","n":[1,2,3]}"#,
    )
    .unwrap();
    run(Command::new("cryptsetup")
        .args(["token", "import", "--json-file"])
        .arg(&token)
        .arg(&img));
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    let u = h.unlock(&f, b"our passphrase").unwrap();
    let added = h.add_key(&f, &u, b"second", &fast_pbkdf2(), None).unwrap();
    assert_eq!(added, 1);
    let changed = h
        .change_key(&f, b"our passphrase", b"third", &fast_pbkdf2(), None)
        .unwrap();
    assert_eq!(changed, 0);
    drop(f);
    let dump = luks_dump(&img);
    assert!(dump.contains("x-sectorcrypt-test"), "{dump}");
    let out = run(Command::new("cryptsetup")
        .args(["token", "export", "--token-id", "0"])
        .arg(&img));
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exported["note"], "kept");
    assert_eq!(exported["n"], serde_json::json!([1, 2, 3]));
    for (p, ok) in [("second", true), ("third", true), ("our passphrase", false)] {
        let pf = file_with(dir.path(), "p", p);
        assert_eq!(cryptsetup_accepts(&img, &pf), ok, "{p}");
    }
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    h.remove_key(&f, 1).unwrap();
    assert!(matches!(
        h.unlock(&f, b"second"),
        Err(Error::WrongPassphrase)
    ));
    h.erase(&f).unwrap();
    drop(f);
    let pf = file_with(dir.path(), "p", "third");
    assert!(!cryptsetup_accepts(&img, &pf));
    let dump = luks_dump(&img);
    assert!(dump.contains("x-sectorcrypt-test"), "{dump}");
    let f = open_ro(&img);
    assert!(matches!(
        Header::read(&f).unwrap().unlock(&f, b"third"),
        Err(Error::Keyslot(KeyslotError::NoneActive))
    ));
}

fn luks1_volume(dir: &Path, cipher: &str, bits: usize) -> (PathBuf, Vec<u8>) {
    let opts = FormatOptions {
        version: Version::Luks1,
        cipher: cipher.into(),
        key_bytes: bits / 8,
        kdf: fast_pbkdf2(),
        ..FormatOptions::default()
    };
    let img = blank_image(dir, 6 * MIB);
    let f = open_rw(&img);
    let (_h, u) = format(&f, &opts, b"our passphrase", None).unwrap();
    assert_eq!(u.data_offset, 2 * MIB);
    let data = pattern(4 * MIB as usize, bits as u64);
    write_plain(&f, &u, 0, &data);
    drop(f);
    let good = file_with(dir, "good", b"our passphrase");
    assert!(cryptsetup_accepts(&img, &good));
    let dump = luks_dump(&img);
    assert!(dump.contains("Version:       \t1"), "{dump}");
    assert_eq!(cryptsetup_volume_key(&img, &good), u.volume_key());
    (img, data)
}

#[test]
fn luks1_checked_by_cryptsetup_and_read_by_qemu_img() {
    require!("cryptsetup", "qemu-img");
    for (cipher, bits) in [("aes-xts-plain64", 512), ("aes-cbc-essiv:sha256", 256)] {
        let dir = tempfile::tempdir().unwrap();
        let (img, data) = luks1_volume(dir.path(), cipher, bits);
        cryptsetup_add_key_opens_here(dir.path(), &img, &data);
        let out = dir.path().join("out.raw");
        run(Command::new("qemu-img")
            .args(["convert", "-q", "-O", "raw"])
            .args([
                "--object",
                "secret,id=s,data=our passphrase",
                "--image-opts",
            ])
            .arg(format!(
                "driver=luks,key-secret=s,file.filename={}",
                img.display()
            ))
            .arg(&out));
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got.len(), 4 * MIB as usize);
        assert!(got == data, "{cipher}: qemu-img reads other plaintext");
    }
}

#[test]
fn luks1_read_by_nbdkit_luks_filter() {
    require!("cryptsetup", "nbdkit", "nbdcopy");
    let dir = tempfile::tempdir().unwrap();
    let (img, data) = luks1_volume(dir.path(), "aes-xts-plain64", 256);
    let out = dir.path().join("out.raw");
    run(Command::new("nbdkit")
        .args(["-U", "-", "file"])
        .arg(&img)
        .arg("--filter=luks")
        .arg(format!("passphrase=+{}", dir.path().join("good").display()))
        .arg("--run")
        .arg(format!("nbdcopy \"$uri\" {}", out.display())));
    let got = std::fs::read(&out).unwrap();
    assert!(got == data, "nbdkit reads other plaintext");
}

/// Header backups are byte-identical to cryptsetup's luksHeaderBackup, and each tool
/// restores the other's.
#[test]
fn header_backups_match_cryptsetup() {
    require!("cryptsetup");
    for version in [Version::Luks2, Version::Luks1] {
        let dir = tempfile::tempdir().unwrap();
        let img = blank_image(dir.path(), 20 * MIB);
        let f = open_rw(&img);
        let opts = FormatOptions {
            version,
            kdf: fast_pbkdf2(),
            ..FormatOptions::default()
        };
        format(&f, &opts, b"pw", None).unwrap();
        let ours = dir.path().join("ours.bak");
        let theirs = dir.path().join("theirs.bak");
        backup_header(&f, &ours).unwrap();
        run(Command::new("cryptsetup")
            .args(["luksHeaderBackup", "--header-backup-file"])
            .arg(&theirs)
            .arg(&img));
        assert!(std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap());
        let pw = file_with(dir.path(), "pw", "pw");
        // Theirs restored here, ours restored by cryptsetup.
        Header::read(&f).unwrap().erase(&f).unwrap();
        assert!(!cryptsetup_accepts(&img, &pw));
        restore_header(&f, &open_ro(&theirs)).unwrap();
        assert!(cryptsetup_accepts(&img, &pw));
        Header::read(&f).unwrap().erase(&f).unwrap();
        run(Command::new("cryptsetup")
            .args(["luksHeaderRestore", "-q", "--header-backup-file"])
            .arg(&ours)
            .arg(&img));
        Header::read(&f).unwrap().unlock(&f, b"pw").unwrap();
    }
}
