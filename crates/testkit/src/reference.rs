//! OpenSSL as the independent reference the tests hold sectorcrypt to (the `openssl`
//! feature): one EVP call per message ([`evp`]), AES by mode and key length ([`aes`]), and
//! dm-crypt's sectors modelled one at a time with their IVs computed here from the cipher
//! string alone, not from the crypto crate's reading of it ([`dm_crypt`]).

use openssl::symm::{Cipher, Crypter, Mode};

/// One EVP call over `input`, without padding.
pub fn evp(cipher: Cipher, mode: Mode, key: &[u8], iv: Option<&[u8]>, input: &[u8]) -> Vec<u8> {
    let mut c = Crypter::new(cipher, mode, key, iv).expect("openssl crypter");
    c.pad(false);
    let mut out = vec![0u8; input.len() + cipher.block_size()];
    let mut n = c.update(input, &mut out).expect("openssl update");
    n += c.finalize(&mut out[n..]).expect("openssl finalize");
    out.truncate(n);
    out
}

/// OpenSSL's AES in `mode` (ecb, cbc, ctr, xts, gcm) for a key of `key_len` bytes (for XTS
/// both halves together). OpenSSL has no AES-192-XTS.
pub fn aes(mode: &str, key_len: usize) -> Cipher {
    match (mode, key_len) {
        ("ecb", 16) => Cipher::aes_128_ecb(),
        ("ecb", 24) => Cipher::aes_192_ecb(),
        ("ecb", 32) => Cipher::aes_256_ecb(),
        ("cbc", 16) => Cipher::aes_128_cbc(),
        ("cbc", 24) => Cipher::aes_192_cbc(),
        ("cbc", 32) => Cipher::aes_256_cbc(),
        ("ctr", 16) => Cipher::aes_128_ctr(),
        ("ctr", 24) => Cipher::aes_192_ctr(),
        ("ctr", 32) => Cipher::aes_256_ctr(),
        ("xts", 32) => Cipher::aes_128_xts(),
        ("xts", 64) => Cipher::aes_256_xts(),
        ("gcm", 16) => Cipher::aes_128_gcm(),
        ("gcm", 24) => Cipher::aes_192_gcm(),
        ("gcm", 32) => Cipher::aes_256_gcm(),
        other => panic!("no openssl aes for {other:?}"),
    }
}

/// What dm-crypt makes of `data` (whole sectors of `size` bytes) under the cipher string
/// `spec` (`aes-MODE[-IVGEN]`: plain64, plain, essiv:sha256, or none for ECB): sector `i`
/// gets IV number `first + i * step` (wrapping), as dm-crypt counts 512-byte units
/// (`step = size / 512`), sectors (`iv_large_sectors`, `step = 1`), or GELI bytes
/// (`step = size`).
pub fn dm_crypt(
    spec: &str,
    key: &[u8],
    size: usize,
    step: u64,
    first: u64,
    data: &[u8],
    mode: Mode,
) -> Vec<u8> {
    let mut parts = spec.splitn(3, '-');
    assert_eq!(parts.next(), Some("aes"), "{spec}");
    let chain = parts.next().expect("a mode");
    let ivgen = parts.next();
    assert!(data.len().is_multiple_of(size), "whole sectors");
    let mut out = Vec::with_capacity(data.len());
    for (i, sector) in data.chunks_exact(size).enumerate() {
        let n = first.wrapping_add((i as u64).wrapping_mul(step));
        let mut iv = [0u8; 16];
        let iv = match ivgen {
            None => None,
            Some("plain64") => {
                iv[..8].copy_from_slice(&n.to_le_bytes());
                Some(iv.to_vec())
            }
            Some("plain") => {
                iv[..4].copy_from_slice(&(n as u32).to_le_bytes());
                Some(iv.to_vec())
            }
            Some("essiv:sha256") => {
                iv[..8].copy_from_slice(&n.to_le_bytes());
                let salt = openssl::sha::sha256(key);
                Some(evp(aes("ecb", 32), Mode::Encrypt, &salt, None, &iv))
            }
            Some(other) => panic!("no model of the iv generator {other:?}"),
        };
        out.extend(evp(aes(chain, key.len()), mode, key, iv.as_deref(), sector));
    }
    out
}
