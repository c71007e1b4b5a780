//! `sectorcrypt demo`: a known-answer check (IEEE 1619 vector 2) on the chosen backend, a
//! dm-crypt style round trip of a few sectors of built-in text, then the main job: a
//! temporary 256 MiB LUKS2 volume (aes-xts-plain64, generated passphrase) is formatted,
//! reopened by its passphrase, written and read back through the sector engine, verified,
//! and removed; the throughput is printed.

use crate::failure::Failure;
use sectorcrypt_crypto::{
    aes::Xts,
    cpu,
    dmcrypt::{CipherSpec, SectorCipher, SectorLayout},
    Backend,
};
use std::time::Instant;

const TEXT: &str = "sectorcrypt encrypts storage sectors in userspace: many sectors per call, \
tweaks computed in registers, every backend checked against a portable constant-time reference.";

pub fn run() -> Result<(), Failure> {
    let backend = Backend::selected()?;
    println!("cpu features : {}", cpu::features().names().join(" "));
    println!("aes backend  : {backend}");

    // IEEE 1619-2007 vector 2.
    let key = [[0x11u8; 16], [0x22u8; 16]].concat();
    let mut tweak = [0u8; 16];
    tweak[..5].fill(0x33);
    let mut unit = [0x44u8; 32];
    Xts::new(&key)?.encrypt(&tweak, &mut unit)?;
    let want = "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0";
    if hex::encode(unit) != want {
        return Err(Failure::runtime(
            "known-answer check failed: IEEE 1619 vector 2 does not match",
        ));
    }
    println!("known answer : IEEE 1619-2007 vector 2 ok");

    // A 64 KiB "disk" of 128 sectors filled with the text, encrypted as aes-xts-plain64.
    let spec: CipherSpec = "aes-xts-plain64".parse()?;
    let volume_key: Vec<u8> = (0u8..64)
        .map(|i| i.wrapping_mul(37).wrapping_add(11))
        .collect();
    let cipher = SectorCipher::new(spec, &volume_key, SectorLayout::new(512, false)?)?;
    let plain: Vec<u8> = TEXT.bytes().cycle().take(128 * 512).collect();
    let mut disk = plain.clone();
    let start = Instant::now();
    cipher.encrypt(0, &mut disk)?;
    let took = start.elapsed();
    println!(
        "encrypted    : {} sectors of 512 bytes with {spec} in one call ({:.1} us)",
        disk.len() / 512,
        took.as_secs_f64() * 1e6
    );
    println!("sector 0     : {}...", hex::encode(&disk[..24]));
    cipher.decrypt(0, &mut disk)?;
    if disk != plain {
        return Err(Failure::runtime(
            "round trip failed: decrypted sectors differ",
        ));
    }
    println!("round trip   : ok ({:?}...)", &TEXT[..40]);
    volume_demo()
}

/// Plaintext bytes of the demo volume.
const VOLUME_BYTES: u64 = 256 << 20;

/// A temporary directory removed on drop (also when the demo fails).
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn volume_demo() -> Result<(), Failure> {
    use sectorcrypt_volume::engine::EngineOptions;
    use sectorcrypt_volume::hash::HashAlg;
    use sectorcrypt_volume::kdf::KdfOptions;
    use sectorcrypt_volume::luks::{self, FormatOptions};
    use sectorcrypt_volume::{FileStore, Header};
    let rt = |e: std::io::Error| Failure::runtime(format!("demo volume: {e}"));
    let mut seed = [0u8; 16];
    getrandom::getrandom(&mut seed).map_err(|e| Failure::runtime(format!("random source: {e}")))?;
    let dir = TempDir(std::env::temp_dir().join(format!(
        "sectorcrypt-demo-{}-{}",
        std::process::id(),
        hex::encode(&seed[..4])
    )));
    std::fs::create_dir(&dir.0).map_err(rt)?;
    let path = dir.0.join("demo.luks");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(rt)?;
    file.set_len(luks::LUKS2_DEFAULT_DATA_OFFSET + VOLUME_BYTES)
        .map_err(rt)?;
    let store = FileStore::new(file, path.display().to_string());
    // A generated passphrase; the keyslot uses PBKDF2 at its minimum cost because the
    // demo is about the data path, not about slowing down guessing.
    let passphrase = zeroize::Zeroizing::new(hex::encode(seed));
    let opts = FormatOptions {
        sector_size: 4096,
        kdf: KdfOptions {
            force_iterations: Some(1000),
            ..KdfOptions::pbkdf2(HashAlg::Sha256)
        },
        label: "sectorcrypt demo".into(),
        ..FormatOptions::default()
    };
    let (header, _) = luks::format(&store, &opts, passphrase.as_bytes(), None)?;
    println!(
        "volume       : LUKS2 {} at {} ({} MiB of data, aes-xts-plain64, 512-bit key, 4096-byte sectors)",
        header.uuid().unwrap_or("-"),
        path.display(),
        VOLUME_BYTES >> 20
    );
    // Reopen it the way a user would: header, passphrase, keyslot.
    let header = Header::read(&store)?;
    let unlocked = header.unlock(&store, passphrase.as_bytes())?;
    println!(
        "unlocked     : keyslot {} with the generated passphrase",
        unlocked.keyslot
    );
    let volume = unlocked.engine(Box::new(store), EngineOptions::default())?;
    let chunk = 16usize << 20;
    let data: Vec<u8> = TEXT.bytes().cycle().take(chunk).collect();
    let start = Instant::now();
    let mut off = 0u64;
    while off < VOLUME_BYTES {
        volume.write_at(&data, off).map_err(rt)?;
        off += chunk as u64;
    }
    volume.flush().map_err(rt)?;
    let wrote = start.elapsed().as_secs_f64();
    let mut back = vec![0u8; chunk];
    let start = Instant::now();
    let mut off = 0u64;
    let mut same = true;
    while off < VOLUME_BYTES {
        volume.read_at(&mut back, off).map_err(rt)?;
        same &= back == data;
        off += chunk as u64;
    }
    let read = start.elapsed().as_secs_f64();
    if !same {
        return Err(Failure::runtime(
            "volume round trip failed: data read back differs",
        ));
    }
    let mb = VOLUME_BYTES as f64 / 1e6;
    println!(
        "write        : {:.0} MB/s ({} MiB, fdatasync included)",
        mb / wrote,
        VOLUME_BYTES >> 20
    );
    println!("read         : {:.0} MB/s", mb / read);
    println!("verify       : ok, the plaintext read back matches");
    drop(volume);
    drop(dir);
    println!("removed      : {}", path.display());
    Ok(())
}
