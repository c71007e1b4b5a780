//! Volumes made by cryptsetup and qemu-img, opened here; the plaintext those tools put in
//! reads back.

use crate::common::*;
use sectorcrypt_crypto::dmcrypt::{SectorCipher, SectorLayout};
use sectorcrypt_testkit::{pattern, require, run};
use sectorcrypt_volume::{Error, FileStore, Header, Store, Unlocked};
use std::path::Path;
use std::process::Command;

/// Opens `img`: `passphrase` with one byte less is wrong, `passphrase` unlocks a volume
/// of `cipher` with a key of `key_bits`.
fn unlock_checked(
    img: &Path,
    passphrase: &[u8],
    cipher: &str,
    key_bits: usize,
) -> (FileStore, Header, Unlocked) {
    let f = open_ro(img);
    let h = Header::read(&f).unwrap();
    let wrong = &passphrase[..passphrase.len() - 1];
    assert!(matches!(h.unlock(&f, wrong), Err(Error::WrongPassphrase)));
    let u = h.unlock(&f, passphrase).unwrap();
    assert_eq!(u.cipher, cipher);
    assert_eq!(u.volume_key().len() * 8, key_bits);
    (f, h, u)
}

/// Encrypts a plaintext image in place with `cryptsetup reencrypt --encrypt` (offline,
/// LUKS2, the header made room for by shifting the data: the first `size - 8 MiB` bytes
/// of the plaintext become the volume) with the keyslot KDF options `kdf` and `cipher`,
/// `key_bits`, `sector` bytes per sector, then opens it here and compares every byte.
/// Returns the image path and the header.
fn reencrypt_and_check(
    dir: &Path,
    kdf: &[&str],
    cipher: &str,
    key_bits: usize,
    sector: usize,
) -> (std::path::PathBuf, Header) {
    let (want_cipher, want_key_bits, want_sector) = (cipher, key_bits, sector);
    let (bits, sector) = (key_bits.to_string(), sector.to_string());
    let cipher = [
        "--cipher",
        cipher,
        "--key-size",
        &bits,
        "--sector-size",
        &sector,
    ];
    let extra = [kdf, &cipher[..]].concat();
    let img = dir.join("v.img");
    let size = 12 * MIB;
    let plain = pattern(size as usize, want_key_bits as u64 + want_sector as u64);
    make_file(&img, size, &plain);
    let pass = file_with(dir, "pass", b"correct horse");
    run(Command::new("cryptsetup")
        .args(["reencrypt", "-q", "--encrypt", "--type", "luks2"])
        .args(["--reduce-device-size", "8M", "--key-file"])
        .arg(&pass)
        .args(&extra)
        .arg(&img));
    let (f, h, u) = unlock_checked(&img, b"correct horse", want_cipher, want_key_bits);
    assert_eq!(u.sector_size, want_sector);
    assert_eq!(u.data_offset, 4 * MIB);
    assert_eq!(u.data_size, size - 4 * MIB);
    // `--reduce-device-size 8M` moved the header in and gave up the last 8 MiB; what
    // lies beyond (the data segment is "dynamic") is left-over plaintext, not volume data.
    let kept = (size - 8 * MIB) as usize;
    let got = read_plain(&f, &u, 0, kept);
    assert!(
        got == plain[..kept],
        "plaintext differs from what cryptsetup encrypted"
    );
    // The key is the one cryptsetup reports.
    assert_eq!(cryptsetup_volume_key(&img, &pass), u.volume_key());
    (img, h)
}

#[test]
fn cryptsetup_luks2_pbkdf2_xts512_sector512() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    reencrypt_and_check(
        dir.path(),
        &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"],
        "aes-xts-plain64",
        512,
        512,
    );
}

/// The IV rule: for 4096-byte sectors LUKS2 (cryptsetup/dm-crypt) counts the IV in
/// 512-byte units (sector n has IV 8n); decrypting with one IV per sector fails.
#[test]
fn cryptsetup_luks2_argon2i_xts256_sector4096_iv_counts_512_byte_units() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, h) = reencrypt_and_check(
        dir.path(),
        &[
            "--pbkdf",
            "argon2i",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "32",
            "--pbkdf-parallel",
            "1",
        ],
        "aes-xts-plain64",
        256,
        4096,
    );
    let f = open_ro(&img);
    let u = h.unlock(&f, b"correct horse").unwrap();
    // Sector 1 decrypted with IV 1 (large-IV rule) is not the plaintext; with IV 8 it is.
    let mut raw = vec![0u8; 4096];
    f.read_at(&mut raw, u.data_offset + 4096).unwrap();
    let large = SectorCipher::new(
        u.spec,
        u.volume_key(),
        SectorLayout::new(4096, true).unwrap(),
    )
    .unwrap();
    let mut a = raw.clone();
    large.decrypt(1, &mut a).unwrap();
    let mut b = raw.clone();
    u.sector_cipher().unwrap().decrypt(8, &mut b).unwrap();
    assert_eq!(b, read_plain(&f, &u, 4096, 4096));
    assert_ne!(a, b, "large-IV decryption must not match cryptsetup's data");
}

#[test]
fn cryptsetup_luks2_argon2id_cbc_essiv() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    reencrypt_and_check(
        dir.path(),
        &[
            "--pbkdf",
            "argon2id",
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "64",
            "--pbkdf-parallel",
            "2",
        ],
        "aes-cbc-essiv:sha256",
        256,
        512,
    );
}

#[test]
fn cryptsetup_luks2_xts_plain_and_cbc_plain64_sector_2048() {
    require!("cryptsetup");
    for (hash, cipher, bits, sector) in [
        ("sha512", "aes-xts-plain", 512, 2048),
        ("sha1", "aes-cbc-plain64", 128, 4096),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let kdf = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
        let kdf = [&kdf[..], &["--hash", hash]].concat();
        reencrypt_and_check(dir.path(), &kdf, cipher, bits, sector);
    }
}

/// A LUKS1 volume written by qemu-img (its own header layout) reads back here.
fn qemu_luks1(opts: &str, want_cipher: &str, want_bits: usize) {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("p.raw");
    let plain = pattern(3 * MIB as usize, want_bits as u64);
    make_file(&raw, 3 * MIB, &plain);
    let img = dir.path().join("q.luks");
    run(Command::new("qemu-img")
        .args(["convert", "-q", "-f", "raw", "-O", "luks"])
        .args(["--object", "secret,id=sec0,data=qemu pass"])
        .args(["-o", &format!("key-secret=sec0,iter-time=10{opts}")])
        .arg(&raw)
        .arg(&img));
    let (f, h, u) = unlock_checked(&img, b"qemu pass", want_cipher, want_bits);
    assert_eq!(h.name(), "luks1");
    assert!(u.data_size >= 3 * MIB);
    assert!(read_plain(&f, &u, 0, 3 * MIB as usize) == plain);
    // A keyslot added here (at qemu's keyslot offsets) opens in qemu-img.
    drop(f);
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    h.add_key(&f, &u, b"added here", &fast_pbkdf2(), None)
        .unwrap();
    drop(f);
    let out = dir.path().join("out.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-q", "-O", "raw"])
        .args(["--object", "secret,id=s,data=added here", "--image-opts"])
        .arg(format!(
            "driver=luks,key-secret=s,file.filename={}",
            img.display()
        ))
        .arg(&out));
    assert!(std::fs::read(&out).unwrap()[..plain.len()] == plain[..]);
}

#[test]
fn qemu_img_luks1_xts() {
    require!("qemu-img");
    qemu_luks1("", "aes-xts-plain64", 512);
}

#[test]
fn qemu_img_luks1_cbc_essiv_sha1() {
    require!("qemu-img");
    qemu_luks1(
        ",cipher-alg=aes-256,cipher-mode=cbc,ivgen-alg=essiv,ivgen-hash-alg=sha256,hash-alg=sha1",
        "aes-cbc-essiv:sha256",
        256,
    );
}

/// A LUKS1 volume made by `cryptsetup luksFormat`, filled by qemu-img (which opens
/// cryptsetup's LUKS1 volumes), read back here.
#[test]
fn cryptsetup_luks1_filled_by_qemu() {
    require!("cryptsetup", "qemu-img");
    let dir = tempfile::tempdir().unwrap();
    let cipher = ["--cipher", "aes-xts-plain64", "--key-size", "256"];
    let args = [
        &["--type", "luks1"],
        &cipher[..],
        &["--pbkdf-force-iterations", "1000"],
    ];
    let (img, pass) = cryptsetup_volume(dir.path(), 4 * MIB, "luks one", &args.concat());
    let raw = dir.path().join("p.raw");
    let plain = pattern(2 * MIB as usize, 77);
    make_file(&raw, 2 * MIB, &plain);
    run(Command::new("qemu-img")
        .args([
            "convert",
            "-q",
            "-n",
            "-f",
            "raw",
            "--object",
            "secret,id=s,data=luks one",
        ])
        .arg("--target-image-opts")
        .arg(&raw)
        .arg(format!(
            "driver=luks,key-secret=s,file.filename={}",
            img.display()
        )));
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    let u = h.unlock(&f, b"luks one").unwrap();
    assert_eq!(
        (u.cipher.as_str(), u.volume_key().len()),
        ("aes-xts-plain64", 32)
    );
    assert_eq!(u.data_offset, 4096 * 512);
    assert!(read_plain(&f, &u, 0, 2 * MIB as usize) == plain);
    assert_eq!(cryptsetup_volume_key(&img, &pass), u.volume_key());
}

/// Non-default metadata and keyslot area sizes (64 KiB header copies): the key cryptsetup
/// reports opens here, a keyslot added here opens in cryptsetup, and with the primary
/// destroyed the secondary is found at 64 KiB.
#[test]
fn cryptsetup_luks2_64k_metadata_and_small_keyslots_area() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let sizes = [
        "--luks2-metadata-size",
        "64k",
        "--luks2-keyslots-size",
        "1m",
    ];
    let kdf = [
        "--pbkdf",
        "argon2id",
        "--pbkdf-memory",
        "64",
        "--pbkdf-parallel",
        "1",
    ];
    let args = [
        &["--type", "luks2"],
        &sizes[..],
        &kdf,
        &["--pbkdf-force-iterations", "4"],
    ];
    let (img, pass) = cryptsetup_volume(dir.path(), 8 * MIB, "big header", &args.concat());
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    let u = h.unlock(&f, b"big header").unwrap();
    // Two 64 KiB copies and 1 MiB of keyslots, then cryptsetup aligns the data to 1 MiB.
    assert_eq!(u.data_offset, 2 * MIB);
    assert_eq!(cryptsetup_volume_key(&img, &pass), u.volume_key());
    let slot = h.add_key(&f, &u, b"second", &fast_pbkdf2(), None).unwrap();
    let second = file_with(dir.path(), "second", b"second");
    run(Command::new("cryptsetup")
        .args([
            "open",
            "--test-passphrase",
            "--key-slot",
            &slot.to_string(),
            "--key-file",
        ])
        .arg(&second)
        .arg(&img));
    // Destroy the primary copy entirely: the secondary at 64 KiB still opens the volume.
    f.write_at(&vec![0u8; 64 * 1024], 0).unwrap();
    let h = Header::read(&f).unwrap();
    assert!(h.needs_repair());
    assert_eq!(
        h.unlock(&f, b"second").unwrap().volume_key(),
        u.volume_key()
    );
}
