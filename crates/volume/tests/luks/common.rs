//! Helpers: images on files, plaintext access through the sector cipher (independent of
//! the engine), fast KDF settings, what cryptsetup says. Tool detection, commands and
//! deterministic data come from `sectorcrypt-testkit`.

use sectorcrypt_testkit::run;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::{FileStore, IvRule, Unlocked};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const MIB: u64 = 1 << 20;

/// `dir/name` holding `content` (a key file, a token).
pub fn file_with(dir: &Path, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// `dir/v.img`: `len` bytes of zeros (sparse).
pub fn blank_image(dir: &Path, len: u64) -> PathBuf {
    let img = dir.join("v.img");
    File::create(&img).unwrap().set_len(len).unwrap();
    img
}

/// A file of `len` bytes holding `data` at the start (sparse after it).
pub fn make_file(path: &Path, len: u64, data: &[u8]) {
    let f = File::create(path).unwrap();
    f.set_len(len).unwrap();
    f.write_all_at(data, 0).unwrap();
}

/// The IV number of the data byte `off` (sector-aligned): LUKS counts 512-byte units.
fn first_iv(u: &Unlocked, off: u64) -> u64 {
    let IvRule::Units512 { first } = u.iv else {
        panic!("luks volumes count IVs in 512-byte units, not {:?}", u.iv)
    };
    first + off / 512
}

/// Reads `len` plaintext bytes at plaintext offset `off` (sector-aligned), decrypting
/// with the sector cipher directly (not the engine).
pub fn read_plain(store: &FileStore, u: &Unlocked, off: u64, len: usize) -> Vec<u8> {
    let ss = u.sector_size as u64;
    assert!(off.is_multiple_of(ss) && (len as u64).is_multiple_of(ss));
    let mut buf = vec![0u8; len];
    store
        .file()
        .read_exact_at(&mut buf, u.data_offset + off)
        .unwrap();
    u.sector_cipher()
        .unwrap()
        .decrypt(first_iv(u, off), &mut buf)
        .unwrap();
    buf
}

/// Writes plaintext at a sector-aligned plaintext offset.
pub fn write_plain(store: &FileStore, u: &Unlocked, off: u64, data: &[u8]) {
    let mut buf = data.to_vec();
    u.sector_cipher()
        .unwrap()
        .encrypt(first_iv(u, off), &mut buf)
        .unwrap();
    store
        .file()
        .write_all_at(&buf, u.data_offset + off)
        .unwrap();
}

/// PBKDF2 at cryptsetup's minimum cost.
pub fn fast_pbkdf2() -> KdfOptions {
    KdfOptions {
        force_iterations: Some(1000),
        ..KdfOptions::pbkdf2(HashAlg::Sha256)
    }
}

/// Argon2 at a small cost.
pub fn fast_argon2(kind: KdfKind) -> KdfOptions {
    KdfOptions {
        kind,
        force_iterations: Some(4),
        memory_kib: Some(64),
        parallel: Some(1),
        ..KdfOptions::default()
    }
}

/// Opens read-write.
pub fn open_rw(path: &Path) -> FileStore {
    FileStore::open(path, true).unwrap()
}

/// Opens read-only.
pub fn open_ro(path: &Path) -> FileStore {
    FileStore::open(path, false).unwrap()
}

/// `dir/v.img` of `size` bytes formatted by `cryptsetup luksFormat -q ARGS` with the
/// passphrase `pass`, and the key file holding it (`dir/pass`).
pub fn cryptsetup_volume(dir: &Path, size: u64, pass: &str, args: &[&str]) -> (PathBuf, PathBuf) {
    let img = blank_image(dir, size);
    let key = file_with(dir, "pass", pass);
    run(Command::new("cryptsetup")
        .args(["luksFormat", "-q"])
        .args(args)
        .arg("--key-file")
        .arg(&key)
        .arg(&img));
    (img, key)
}

/// Hex of the volume key as `cryptsetup luksDump --dump-volume-key` prints it.
pub fn cryptsetup_volume_key(image: &Path, passphrase_file: &Path) -> Vec<u8> {
    let out = run(Command::new("cryptsetup")
        .args(["luksDump", "-q", "--dump-volume-key", "--key-file"])
        .arg(passphrase_file)
        .arg(image));
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text
        .find("MK dump:")
        .map(|i| i + 8)
        .unwrap_or_else(|| panic!("no key in {text}"));
    let hexdigits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || c.is_whitespace())
        .filter(|c| c.is_ascii_hexdigit())
        .collect();
    hex::decode(hexdigits).unwrap()
}
