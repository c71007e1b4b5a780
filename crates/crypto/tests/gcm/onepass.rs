//! The one-pass GCM path (the stitched kernel taking a whole message) of the vaes and avx512
//! backends, on inputs the other tests do not reach deterministically (whole-group messages
//! in general are in `differential.rs`): every low byte of the first counter (the avx512
//! kernel's counter fast and slow paths), AAD that fills whole GHASH groups before the
//! message, short tags, a shorter last group.

use crate::differential::{compare, iv_for_j0};
use crate::{backends, each_key, random_bytes, rng};
use sectorcrypt_crypto::aes::Gcm;

/// Every value 0..=255 of the low byte of the first counter (so the byte-15 fast path, the
/// slow path, the switch at 220/221 and the `cur` register carried from a slow group into
/// a fast one all occur at every position), with 1, 2, 3 and 9 groups of 512 bytes, each
/// key size, in place and out of place, both directions.
#[test]
fn one_pass_every_counter_low_byte() {
    let mut rng = rng();
    for key_len in [16, 24, 32] {
        let key = random_bytes(&mut rng, key_len);
        for b in 0u128..=255 {
            // inc32(J0) = 0x7fff_ff00 + b in the low word: far from the wrap.
            let j0 = (0x0123_4567_89ab_cdef_0011_2233u128 << 32) | (0x7fff_ff00 + b - 1);
            let iv = iv_for_j0(&key, j0);
            for backend in backends() {
                let gcm = Gcm::with_backend(&key, backend).unwrap();
                for groups in [1, 2, 3, 9] {
                    let pt = random_bytes(&mut rng, groups * 512);
                    compare(&gcm, &key, &iv, b"aad", &pt, 16);
                }
            }
        }
    }
}

/// AAD of one or more whole GHASH groups (32 blocks on avx512) and ragged tails, hashed by
/// the zmm GHASH (full groups and the masked tail) before a one-pass message.
#[test]
fn one_pass_with_long_aad() {
    each_key(&[32], |rng, gcm, key| {
        for aad_len in [
            255,
            256,
            257,
            496,
            511,
            512,
            513,
            527,
            1024,
            1040,
            4096 + 100,
        ] {
            for groups in [1, 2, 3] {
                let iv = random_bytes(rng, 12);
                let aad = random_bytes(rng, aad_len);
                let pt = random_bytes(rng, groups * 512);
                compare(gcm, key, &iv, &aad, &pt, 16);
            }
        }
    });
}

/// Short and truncated tags on one-pass messages.
#[test]
fn one_pass_short_tags() {
    each_key(&[16], |rng, gcm, key| {
        for tag_len in [4, 8, 12, 13, 15] {
            for groups in [1, 2, 5] {
                let iv = random_bytes(rng, 12);
                let pt = random_bytes(rng, groups * 512);
                compare(gcm, key, &iv, b"hdr", &pt, tag_len);
            }
        }
    });
}

/// Messages that end with a shorter group, which the avx512 kernel does itself under byte
/// masks (0 to 3 whole groups, then 1 to 511 bytes), each key size, both directions, in
/// place and out of place.
#[test]
fn one_pass_with_a_short_last_group() {
    each_key(&[16, 24, 32], |rng, gcm, key| {
        for groups in 0..=3 {
            for tail in [1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 400, 511] {
                let iv = random_bytes(rng, 12);
                let aad = random_bytes(rng, tail % 40);
                let pt = random_bytes(rng, groups * 512 + tail);
                compare(gcm, key, &iv, &aad, &pt, 16);
            }
        }
    });
}
