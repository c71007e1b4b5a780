//! Every mode against OpenSSL on random keys, IVs and lengths at every boundary, at
//! unaligned buffer offsets; in place against out of place. The seed is printed; set
//! `SECTORCRYPT_TEST_SEED` to replay a run.

use crate::harness::backends;
use openssl::symm::{Cipher, Mode};
use rand::{rngs::StdRng, Rng, RngCore, SeedableRng};
use sectorcrypt_crypto::{
    aes::{Cbc, Ctr, Ecb, Xts},
    Backend, Mode as AesMode,
};
use sectorcrypt_testkit::reference::{aes, evp};

/// Every block and group boundary (1, 16, 32, 64, 128, 256, 512 and 1024 bytes: the
/// registers and groups of every width; 4 KiB sectors) and one off either side of it, the
/// empty message, and 1 MiB (many groups and IV batches).
pub const LENGTHS: [usize; 27] = [
    0,
    1,
    15,
    16,
    17,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    511,
    512,
    513,
    1023,
    1024,
    1025,
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

fn random(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

/// The whole-block lengths nearest to each of [`LENGTHS`] (both neighbours when a length
/// falls between two), for ECB and CBC.
fn whole_block_lengths() -> Vec<usize> {
    let mut v: Vec<usize> = LENGTHS
        .iter()
        .flat_map(|&l| [l / 16 * 16, l.div_ceil(16) * 16])
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Runs `ours` out of place from a source at a random odd offset (1..=15 bytes past an
/// allocation) into a destination at another, then in place at an odd offset, and checks
/// both against `want`.
fn check(
    b: Backend,
    what: &str,
    input: &[u8],
    want: &[u8],
    rng: &mut StdRng,
    ours: impl Fn(Option<&[u8]>, &mut [u8]),
) {
    assert_eq!(input.len(), want.len(), "{what}: openssl output length");
    let (so, dof) = (rng.gen_range(1..16), rng.gen_range(1..16));
    let mut src = vec![0u8; input.len() + so];
    src[so..].copy_from_slice(input);
    let mut dst = vec![0u8; input.len() + dof];
    ours(Some(&src[so..]), &mut dst[dof..]);
    assert!(
        dst[dof..] == *want,
        "{what} out of place (offsets {so}/{dof}) on {b}"
    );
    assert!(src[so..] == *input, "{what}: source modified on {b}");
    let mut inplace = src;
    ours(None, &mut inplace[so..]);
    assert!(
        inplace[so..] == *want,
        "{what} in place (offset {so}) on {b}"
    );
}

/// [`check`] of both directions of the mode `m` with `iv` (empty for ECB) against OpenSSL's
/// `cipher`, through the `Mode` trait (which the trait tests check against each type's own
/// methods).
fn check_both<M: AesMode>(
    b: Backend,
    what: &str,
    (m, cipher, key, iv): (&M, Cipher, &[u8], Option<&[u8]>),
    pt: &[u8],
    rng: &mut StdRng,
) {
    let v = iv.unwrap_or_default();
    for (dir, mode, enc) in [("enc", Mode::Encrypt, true), ("dec", Mode::Decrypt, false)] {
        let want = evp(cipher, mode, key, iv, pt);
        check(
            b,
            &format!("{what} {dir}"),
            pt,
            &want,
            rng,
            |s, d| match s {
                Some(s) if enc => m.encrypt_to(v, s, d).unwrap(),
                Some(s) => m.decrypt_to(v, s, d).unwrap(),
                None => m.apply(enc, v, d).unwrap(),
            },
        );
    }
}

#[test]
fn ecb_and_cbc_match_openssl() {
    crate::harness::each_width(ecb_and_cbc_match_openssl_under_each_width);
}

fn ecb_and_cbc_match_openssl_under_each_width() {
    let mut rng = rng("ecb_and_cbc_match_openssl");
    for b in backends() {
        for key_len in [16, 24, 32] {
            for len in whole_block_lengths() {
                let key = random(&mut rng, key_len);
                let iv: [u8; 16] = rng.gen();
                let pt = random(&mut rng, len);
                let what = |m: &str| format!("aes-{}-{m} {len} bytes", key_len * 8);
                let (ecb_c, cbc_c) = (aes("ecb", key_len), aes("cbc", key_len));

                let ecb = Ecb::with_backend(&key, b).unwrap();
                check_both(b, &what("ecb"), (&ecb, ecb_c, &key, None), &pt, &mut rng);
                let cbc = Cbc::with_backend(&key, b).unwrap();
                check_both(
                    b,
                    &what("cbc"),
                    (&cbc, cbc_c, &key, Some(&iv)),
                    &pt,
                    &mut rng,
                );
            }
        }
    }
}

/// OpenSSL's CTR keystream XORed into `data`, starting `offset` bytes into the stream of
/// `iv`: the counter is advanced here (128-bit, wrapping), the partial first block is
/// produced by running OpenSSL over `offset % 16` filler bytes first.
fn openssl_ctr_at(key: &[u8], iv: &[u8; 16], offset: u64, data: &[u8]) -> Vec<u8> {
    let start = u128::from_be_bytes(*iv).wrapping_add(u128::from(offset / 16));
    let skip = (offset % 16) as usize;
    let mut input = vec![0u8; skip];
    input.extend_from_slice(data);
    let out = evp(
        aes("ctr", key.len()),
        Mode::Encrypt,
        key,
        Some(&start.to_be_bytes()),
        &input,
    );
    out[skip..].to_vec()
}

#[test]
fn ctr_matches_openssl() {
    crate::harness::each_width(ctr_matches_openssl_under_each_width);
}

fn ctr_matches_openssl_under_each_width() {
    let mut rng = rng("ctr_matches_openssl");
    for b in backends() {
        for key_len in [16, 24, 32] {
            for &len in &LENGTHS {
                let key = random(&mut rng, key_len);
                let iv: [u8; 16] = rng.gen();
                let pt = random(&mut rng, len);
                let what = format!("aes-{}-ctr {len} bytes", key_len * 8);
                let ctr = Ctr::with_backend(&key, b).unwrap();
                let want = openssl_ctr_at(&key, &iv, 0, &pt);
                check(b, &what, &pt, &want, &mut rng, |s, d| match s {
                    Some(s) => ctr.apply_keystream_to(&iv, 0, s, d).unwrap(),
                    None => ctr.apply_keystream(&iv, 0, d),
                });
                // Random access: the keystream from byte k on equals OpenSSL's from k, both
                // inside this message and far beyond it.
                if len > 0 {
                    let k = rng.gen_range(0..len);
                    let mut part = pt[k..].to_vec();
                    ctr.apply_keystream(&iv, k as u64, &mut part);
                    assert_eq!(part, want[k..], "{what} at offset {k} on {b}");
                }
                let far: u64 = rng.gen_range(0..1u64 << 44);
                let n = len.min(4097);
                let want = openssl_ctr_at(&key, &iv, far, &pt[..n]);
                check(
                    b,
                    &format!("{what} at offset {far}"),
                    &pt[..n],
                    &want,
                    &mut rng,
                    |s, d| match s {
                        Some(s) => ctr.apply_keystream_to(&iv, far, s, d).unwrap(),
                        None => ctr.apply_keystream(&iv, far, d),
                    },
                );
            }
        }
    }
}

#[test]
fn ctr_wraps_like_openssl() {
    crate::harness::each_width(ctr_wraps_like_openssl_under_each_width);
}

fn ctr_wraps_like_openssl_under_each_width() {
    let mut rng = rng("ctr_wraps_like_openssl");
    for b in backends() {
        for key_len in [16, 32] {
            let key = random(&mut rng, key_len);
            let ctr = Ctr::with_backend(&key, b).unwrap();
            // Just below the carry out of the low 64 bits, and just below the 2^128 wrap
            // (OpenSSL's CTR counts with all 128 bits).
            let mut near64 = [0u8; 16];
            near64[..8].copy_from_slice(&7u64.to_be_bytes());
            near64[8..].copy_from_slice(&(u64::MAX - 9).to_be_bytes());
            let mut near64_full = [0xffu8; 16];
            near64_full[15] = 0xfd;
            near64_full[7] = 0x00;
            let mut near128 = [0xffu8; 16];
            near128[15] = 0xf0;
            for iv in [near64, near64_full, near128, [0xff; 16]] {
                let pt = random(&mut rng, 16 * 70 + 5);
                let want = openssl_ctr_at(&key, &iv, 0, &pt);
                let mut got = pt.clone();
                ctr.apply_keystream(&iv, 0, &mut got);
                assert_eq!(got, want, "ctr wrap from {iv:02x?} on {b}");
                // Entering the stream past the wrap at an unaligned offset.
                for k in [1u64, 17, 16 * 20 + 3, 16 * 69 + 1] {
                    let mut part = pt[k as usize..].to_vec();
                    ctr.apply_keystream(&iv, k, &mut part);
                    assert_eq!(
                        part,
                        want[k as usize..],
                        "ctr wrap from {iv:02x?} at {k} on {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn xts_matches_openssl() {
    crate::harness::each_width(xts_matches_openssl_under_each_width);
}

fn xts_matches_openssl_under_each_width() {
    let mut rng = rng("xts_matches_openssl");
    for b in backends() {
        for key_len in [32, 64] {
            for &len in LENGTHS.iter().filter(|&&l| l >= 16) {
                let key = random(&mut rng, key_len);
                let tweak: [u8; 16] = rng.gen();
                let pt = random(&mut rng, len);
                let x = Xts::with_backend(&key, b).unwrap();
                let what = format!("xts{} {len}", key_len * 4);
                let cipher = aes("xts", key_len);
                check_both(b, &what, (&x, cipher, &key, Some(&tweak)), &pt, &mut rng);
            }
        }
    }
}

/// OpenSSL has no AES-192-XTS: a 384-bit key is checked against the soft backend (whose
/// XTS is checked against OpenSSL above and against the Wycheproof 384-bit vectors).
#[test]
fn xts_384_matches_soft() {
    crate::harness::each_width(xts_384_matches_soft_under_each_width);
}

fn xts_384_matches_soft_under_each_width() {
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
