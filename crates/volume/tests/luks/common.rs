//! Helpers: images on files, plaintext access through the sector cipher (independent of
//! the engine), fast KDF settings, what cryptsetup says, LUKS volumes made here and their
//! headers edited (checksums kept right). Tool detection, commands and
//! deterministic data come from `sectorcrypt-testkit`.

use sectorcrypt_testkit::{pattern, run};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::luks::{format, FormatOptions, Version};
use sectorcrypt_volume::{FileStore, Header, IvRule, Store, Unlocked};
use sha2::{Digest, Sha256};
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

/// The size of a LUKS2 header copy made here.
pub const HDR: u64 = 16384;

/// `dir/v.img`: a 20 MiB LUKS2 volume, keyslot 0 opened by "first", keyslot 1 by
/// "second", a pattern in its first 64 KiB.
pub fn luks2_image(dir: &Path) -> PathBuf {
    let img = blank_image(dir, 20 * MIB);
    let f = open_rw(&img);
    let opts = FormatOptions {
        kdf: fast_pbkdf2(),
        ..FormatOptions::default()
    };
    let (mut h, u) = format(&f, &opts, b"first", None).unwrap();
    h.add_key(&f, &u, b"second", &fast_pbkdf2(), None).unwrap();
    write_plain(&f, &u, 0, &pattern(65536, 3));
    img
}

/// [`luks2_image`], opened read-only, and its header.
pub fn open_luks2(dir: &Path) -> (PathBuf, FileStore, Header) {
    let img = luks2_image(dir);
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    (img, f, h)
}

/// Flips the bits of one byte of `path`.
pub fn flip(path: &Path, at: u64) {
    let f = open_rw(path);
    let mut b = [0u8; 1];
    f.read_at(&mut b, at).unwrap();
    b[0] ^= 0x55;
    f.write_at(&b, at).unwrap();
}

/// Rewrites the json of the LUKS2 header copy at `at` with a valid checksum.
pub fn rewrite_json(path: &Path, at: u64, edit: impl Fn(&mut serde_json::Value)) {
    rewrite_copy(path, at, |buf| {
        let end = buf[4096..].iter().position(|&c| c == 0).unwrap();
        let mut json: serde_json::Value = serde_json::from_slice(&buf[4096..4096 + end]).unwrap();
        edit(&mut json);
        let text = serde_json::to_vec(&json).unwrap();
        buf[4096..].fill(0);
        buf[4096..4096 + text.len()].copy_from_slice(&text);
    });
}

/// Edits the LUKS2 header copy at `at` (its first 16 KiB) and gives it a valid checksum.
pub fn rewrite_copy(path: &Path, at: u64, edit: impl FnOnce(&mut [u8])) {
    let f = open_rw(path);
    let mut buf = vec![0u8; HDR as usize];
    f.read_at(&mut buf, at).unwrap();
    edit(&mut buf);
    buf[448..512].fill(0);
    let sum = Sha256::digest(&buf);
    buf[448..480].copy_from_slice(&sum);
    f.write_at(&buf, at).unwrap();
}

/// The whole image, to show a refused header wrote nothing.
pub fn snapshot(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// `dir/v.img`: a 4 MiB LUKS1 volume opened by "first".
pub fn luks1_image(dir: &Path) -> PathBuf {
    let img = blank_image(dir, 4 * MIB);
    let f = open_rw(&img);
    let opts = FormatOptions {
        version: Version::Luks1,
        kdf: fast_pbkdf2(),
        ..FormatOptions::default()
    };
    format(&f, &opts, b"first", None).unwrap();
    img
}

/// Points the material of LUKS1 keyslot `slot` of `img` at keyslot `at`'s, `plus` sectors
/// on.
pub fn point_luks1_slot(img: &Path, slot: u64, at: u64, plus: u32) {
    let f = open_rw(img);
    let mut offset = [0u8; 4];
    f.read_at(&mut offset, 208 + at * 48 + 40).unwrap();
    let moved = u32::from_be_bytes(offset) + plus;
    f.write_at(&moved.to_be_bytes(), 208 + slot * 48 + 40)
        .unwrap();
}
