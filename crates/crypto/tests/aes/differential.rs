//! Every mode against OpenSSL on random keys, IVs and lengths at every boundary, at
//! unaligned buffer offsets; in place against out of place.

use crate::harness::backends;
use openssl::symm::{Cipher, Crypter, Mode};
use rand::{rngs::StdRng, Rng, RngCore, SeedableRng};
use sectorcrypt_crypto::{Backend, Cbc, Ctr, Ecb, Xts};

/// The lengths the issue names, plus a large one.
pub const LENGTHS: [usize; 18] = [
    0,
    1,
    15,
    16,
    17,
    31,
    32,
    33,
    127,
    128,
    129,
    511,
    512,
    513,
    4095,
    4096,
    4097,
    1 << 20,
];

pub fn rng(test: &str) -> StdRng {
    let seed: u64 = std::env::var("SECTORCRYPT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("{test}: seed {seed} (rerun with SECTORCRYPT_TEST_SEED={seed})");
    StdRng::seed_from_u64(seed)
}

pub fn openssl(cipher: Cipher, mode: Mode, key: &[u8], iv: Option<&[u8]>, input: &[u8]) -> Vec<u8> {
    let mut c = Crypter::new(cipher, mode, key, iv).expect("openssl crypter");
    c.pad(false);
    let mut out = vec![0u8; input.len() + 32];
    let mut n = c.update(input, &mut out).expect("openssl update");
    n += c.finalize(&mut out[n..]).expect("openssl finalize");
    out.truncate(n);
    out
}

fn aes_cipher(mode: &str, key_len: usize) -> Cipher {
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
        other => panic!("no openssl cipher for {other:?}"),
    }
}

fn random(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

/// Runs `ours` out of place from an unaligned source into an unaligned destination and in
/// place, checks both against `want`.
fn check(
    b: Backend,
    what: &str,
    input: &[u8],
    want: &[u8],
    rng: &mut StdRng,
    ours: impl Fn(Option<&[u8]>, &mut [u8]),
) {
    let (so, dof) = (rng.gen_range(0..16), rng.gen_range(0..16));
    let mut src = vec![0u8; input.len() + so];
    src[so..].copy_from_slice(input);
    let mut dst = vec![0u8; input.len() + dof];
    ours(Some(&src[so..]), &mut dst[dof..]);
    assert!(
        dst[dof..] == *want,
        "{what} out of place (offsets {so}/{dof}) on {b}"
    );
    let mut inplace = src.clone();
    ours(None, &mut inplace[so..]);
    assert!(inplace[so..] == *want, "{what} in place on {b}");
}

#[test]
fn block_modes_match_openssl() {
    let mut rng = rng("block_modes_match_openssl");
    for b in backends() {
        for key_len in [16, 24, 32] {
            for &len in &LENGTHS {
                let len = if b == Backend::Soft {
                    len.min(1 << 16)
                } else {
                    len
                };
                let whole = len / 16 * 16;
                let key = random(&mut rng, key_len);
                let iv: [u8; 16] = rng.gen();
                let pt = random(&mut rng, len);
                let what = |m: &str| format!("aes-{}-{m} {len} bytes", key_len * 8);

                let ecb = Ecb::with_backend(&key, b).unwrap();
                let want = openssl(
                    aes_cipher("ecb", key_len),
                    Mode::Encrypt,
                    &key,
                    None,
                    &pt[..whole],
                );
                check(
                    b,
                    &what("ecb enc"),
                    &pt[..whole],
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => ecb.encrypt_to(s, d).unwrap(),
                        None => ecb.encrypt(d).unwrap(),
                    },
                );
                let want = openssl(
                    aes_cipher("ecb", key_len),
                    Mode::Decrypt,
                    &key,
                    None,
                    &pt[..whole],
                );
                check(
                    b,
                    &what("ecb dec"),
                    &pt[..whole],
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => ecb.decrypt_to(s, d).unwrap(),
                        None => ecb.decrypt(d).unwrap(),
                    },
                );

                let cbc = Cbc::with_backend(&key, b).unwrap();
                let want = openssl(
                    aes_cipher("cbc", key_len),
                    Mode::Encrypt,
                    &key,
                    Some(&iv),
                    &pt[..whole],
                );
                check(
                    b,
                    &what("cbc enc"),
                    &pt[..whole],
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => cbc.encrypt_to(&iv, s, d).unwrap(),
                        None => cbc.encrypt(&iv, d).unwrap(),
                    },
                );
                let want = openssl(
                    aes_cipher("cbc", key_len),
                    Mode::Decrypt,
                    &key,
                    Some(&iv),
                    &pt[..whole],
                );
                check(
                    b,
                    &what("cbc dec"),
                    &pt[..whole],
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => cbc.decrypt_to(&iv, s, d).unwrap(),
                        None => cbc.decrypt(&iv, d).unwrap(),
                    },
                );

                let ctr = Ctr::with_backend(&key, b).unwrap();
                let want = openssl(
                    aes_cipher("ctr", key_len),
                    Mode::Encrypt,
                    &key,
                    Some(&iv),
                    &pt,
                );
                check(b, &what("ctr"), &pt, &want, &mut rng, |s, d| match s {
                    Some(s) => ctr.apply_keystream_to(&iv, 0, s, d).unwrap(),
                    None => ctr.apply_keystream(&iv, 0, d),
                });
                // Random access: the keystream from byte k on equals OpenSSL's from k.
                if len > 0 {
                    let k = rng.gen_range(0..len);
                    let mut part = pt[k..].to_vec();
                    ctr.apply_keystream(&iv, k as u64, &mut part);
                    assert_eq!(part, want[k..], "{} at offset {k} on {b}", what("ctr"));
                }
            }
        }
    }
}

#[test]
fn ctr_wraps_like_openssl() {
    let mut rng = rng("ctr_wraps_like_openssl");
    for b in backends() {
        let key = random(&mut rng, 32);
        let ctr = Ctr::with_backend(&key, b).unwrap();
        // Just below the 2^64 carry and the 2^128 wrap.
        let mut near64 = [0u8; 16];
        near64[..8].copy_from_slice(&7u64.to_be_bytes());
        near64[8..].copy_from_slice(&(u64::MAX - 9).to_be_bytes());
        for iv in [near64, [0xff; 16], {
            let mut v = [0xff; 16];
            v[15] = 0xf0;
            v
        }] {
            let pt = random(&mut rng, 16 * 70 + 5);
            let want = openssl(Cipher::aes_256_ctr(), Mode::Encrypt, &key, Some(&iv), &pt);
            let mut got = pt.clone();
            ctr.apply_keystream(&iv, 0, &mut got);
            assert_eq!(got, want, "ctr wrap from {iv:02x?} on {b}");
        }
    }
}

#[test]
fn xts_matches_openssl() {
    let mut rng = rng("xts_matches_openssl");
    for b in backends() {
        for key_len in [32, 64] {
            for &len in LENGTHS.iter().filter(|&&l| l >= 16) {
                let len = if b == Backend::Soft {
                    len.min(1 << 16)
                } else {
                    len
                };
                let key = random(&mut rng, key_len);
                let tweak: [u8; 16] = rng.gen();
                let pt = random(&mut rng, len);
                let x = Xts::with_backend(&key, b).unwrap();
                let cipher = aes_cipher("xts", key_len);
                let want = openssl(cipher, Mode::Encrypt, &key, Some(&tweak), &pt);
                check(
                    b,
                    &format!("xts{} enc {len}", key_len * 4),
                    &pt,
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => x.encrypt_to(&tweak, s, d).unwrap(),
                        None => x.encrypt(&tweak, d).unwrap(),
                    },
                );
                let want = openssl(cipher, Mode::Decrypt, &key, Some(&tweak), &pt);
                check(
                    b,
                    &format!("xts{} dec {len}", key_len * 4),
                    &pt,
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => x.decrypt_to(&tweak, s, d).unwrap(),
                        None => x.decrypt(&tweak, d).unwrap(),
                    },
                );
            }
        }
    }
}

/// OpenSSL has no AES-192-XTS: a 384-bit key is checked against the soft backend (whose
/// XTS is checked against OpenSSL above and against the Wycheproof 384-bit vectors).
#[test]
fn xts_384_matches_soft() {
    let mut rng = rng("xts_384_matches_soft");
    let key = random(&mut rng, 48);
    let reference = Xts::with_backend(&key, Backend::Soft).unwrap();
    for b in backends() {
        let x = Xts::with_backend(&key, b).unwrap();
        for len in (16..=600).step_by(7) {
            let tweak: [u8; 16] = rng.gen();
            let pt = random(&mut rng, len);
            let (mut a, mut r) = (pt.clone(), pt.clone());
            x.encrypt(&tweak, &mut a).unwrap();
            reference.encrypt(&tweak, &mut r).unwrap();
            assert_eq!(a, r, "xts-192 {len} on {b}");
            x.decrypt(&tweak, &mut a).unwrap();
            assert_eq!(a, pt);
        }
    }
}
