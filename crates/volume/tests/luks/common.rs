//! Helpers: tool detection, deterministic data, plaintext access through the sector
//! cipher (independent of the engine), fast KDF settings.

use sectorcrypt_volume::luks::{HashAlg, KdfKind, KdfOptions, Unlocked};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Output};

/// Whether `tool` runs.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Returns from the test with `skipped: ...` when a tool is missing.
#[macro_export]
macro_rules! require {
    ($($tool:expr),+) => {
        $(if !$crate::common::have($tool) {
            eprintln!("skipped: {} is not installed", $tool);
            return;
        })+
    };
}

/// Runs a command, panicking with its stderr when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Deterministic, incompressible-looking bytes (xorshift64*).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A file of `len` bytes holding `data` at the start (sparse after it).
pub fn make_file(path: &Path, len: u64, data: &[u8]) {
    let f = File::create(path).unwrap();
    f.set_len(len).unwrap();
    f.write_all_at(data, 0).unwrap();
}

/// Reads `len` plaintext bytes at plaintext offset `off` (sector-aligned), decrypting
/// with the sector cipher directly (not the engine).
pub fn read_plain(file: &File, u: &Unlocked, off: u64, len: usize) -> Vec<u8> {
    let ss = u.layout.sector_size() as u64;
    assert!(off.is_multiple_of(ss) && (len as u64).is_multiple_of(ss));
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, u.data_offset + off).unwrap();
    u.sector_cipher()
        .unwrap()
        .decrypt(u.iv_offset + off / 512, &mut buf)
        .unwrap();
    buf
}

/// Writes plaintext at a sector-aligned plaintext offset.
pub fn write_plain(file: &File, u: &Unlocked, off: u64, data: &[u8]) {
    let mut buf = data.to_vec();
    u.sector_cipher()
        .unwrap()
        .encrypt(u.iv_offset + off / 512, &mut buf)
        .unwrap();
    file.write_all_at(&buf, u.data_offset + off).unwrap();
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
pub fn open_rw(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
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
