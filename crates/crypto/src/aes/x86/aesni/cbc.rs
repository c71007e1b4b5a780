//! CBC on AES-NI: parallel decryption (8 blocks per group), serial encryption of one
//! chain, and encryption of many sectors with 8 independent chains interleaved.
#![allow(unsafe_code)]

use super::{crypt_aesni, tail_through_buffer, Keys, GROUP};
use crate::aes::Block;
use core::arch::x86_64::*;

/// One CBC chain (latency bound by definition).
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn cbc_encrypt_aesni(
    k: &Keys,
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let mut c = [_mm_loadu_si128(iv.as_ptr().cast())];
    for off in (0..len).step_by(16) {
        c[0] = _mm_xor_si128(c[0], _mm_loadu_si128(src.add(off).cast()));
        crypt_aesni::<1, false>(k, &mut c);
        _mm_storeu_si128(dst.add(off).cast(), c[0]);
    }
    _mm_storeu_si128(iv.as_mut_ptr().cast(), c[0]);
}

/// Decrypts one group of 8 blocks whose predecessor is `chain`.
#[target_feature(enable = "aes,sse4.1")]
unsafe fn decrypt_group(k: &Keys, chain: __m128i, src: *const u8, dst: *mut u8) {
    let mut x = [_mm_setzero_si128(); 8];
    for (i, v) in x.iter_mut().enumerate() {
        *v = _mm_loadu_si128(src.add(16 * i).cast());
    }
    crypt_aesni::<8, true>(k, &mut x);
    // All predecessors are read before the first store (in place is safe).
    let mut prev = [chain; 8];
    for (i, p) in prev.iter_mut().enumerate().skip(1) {
        *p = _mm_loadu_si128(src.add(16 * i - 16).cast());
    }
    for i in 0..8 {
        _mm_storeu_si128(dst.add(16 * i).cast(), _mm_xor_si128(x[i], prev[i]));
    }
}

/// One CBC chain, decrypted 8 blocks at a time; `len` is a multiple of 16.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn cbc_decrypt_aesni(
    k: &Keys,
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    if len == 0 {
        return;
    }
    let next_iv = _mm_loadu_si128(src.add(len - 16).cast());
    let mut chain = _mm_loadu_si128(iv.as_ptr().cast());
    let mut off = 0;
    while off + GROUP <= len {
        let following = _mm_loadu_si128(src.add(off + GROUP - 16).cast());
        decrypt_group(k, chain, src.add(off), dst.add(off));
        chain = following;
        off += GROUP;
    }
    if off < len {
        // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
        tail_through_buffer(src.add(off), dst.add(off), len - off, |s, d| unsafe {
            decrypt_group(k, chain, s, d)
        });
    }
    _mm_storeu_si128(iv.as_mut_ptr().cast(), next_iv);
}

/// `N` sectors of `size` bytes, each its own chain, one per register.
///
/// Sectors of 2 KiB and more start at addresses equal modulo 4 KiB, so 8 chains at the
/// same offset (16 lines with the destinations) would overflow one set of the 8-way L1
/// cache. Register pair `s / 2` therefore runs `skew` blocks (one cache line) behind the
/// previous pair; the few steps at the start and end where some chains have no block take
/// a slower masked path (the same scheme as the vaes backend).
#[target_feature(enable = "aes,sse4.1")]
unsafe fn encrypt_sectors_n<const N: usize>(
    k: &Keys,
    ivs: &[Block],
    src: *const u8,
    dst: *mut u8,
    size: usize,
    skew: usize,
) {
    let blocks = size / 16;
    let delay = |s: usize| (s / 2) * skew;
    let max_delay = delay(N - 1);
    let at = |s: usize, block: usize| s * size + 16 * block;
    let mut x = [_mm_setzero_si128(); N];
    for (s, v) in x.iter_mut().enumerate() {
        *v = _mm_loadu_si128(ivs[s].as_ptr().cast());
    }
    for step in 0..blocks + max_delay {
        if step >= max_delay && step < blocks {
            for (s, v) in x.iter_mut().enumerate() {
                let input = _mm_loadu_si128(src.add(at(s, step - delay(s))).cast());
                *v = _mm_xor_si128(*v, input);
            }
            crypt_aesni::<N, false>(k, &mut x);
            for (s, v) in x.iter().enumerate() {
                _mm_storeu_si128(dst.add(at(s, step - delay(s))).cast(), *v);
            }
        } else {
            let active = |s: usize| step >= delay(s) && step - delay(s) < blocks;
            let saved = x;
            for (s, v) in x.iter_mut().enumerate() {
                if active(s) {
                    let input = _mm_loadu_si128(src.add(at(s, step - delay(s))).cast());
                    *v = _mm_xor_si128(*v, input);
                }
            }
            crypt_aesni::<N, false>(k, &mut x);
            for (s, v) in x.iter_mut().enumerate() {
                if active(s) {
                    _mm_storeu_si128(dst.add(at(s, step - delay(s))).cast(), *v);
                } else {
                    *v = saved[s];
                }
            }
        }
    }
}

/// Independent chains, one per sector, 8 at a time.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn cbc_encrypt_sectors_aesni(
    k: &Keys,
    ivs: &[Block],
    src: *const u8,
    dst: *mut u8,
    size: usize,
) {
    // One cache line of skew between register pairs when sectors alias in the L1 cache.
    let skew = if size.is_multiple_of(2048) { 4 } else { 0 };
    let mut s = 0;
    while ivs.len() - s >= 8 {
        let at = s * size;
        encrypt_sectors_n::<8>(k, &ivs[s..s + 8], src.add(at), dst.add(at), size, skew);
        s += 8;
    }
    let (rest, at) = (&ivs[s..], s * size);
    match rest.len() {
        7 => encrypt_sectors_n::<7>(k, rest, src.add(at), dst.add(at), size, skew),
        6 => encrypt_sectors_n::<6>(k, rest, src.add(at), dst.add(at), size, skew),
        5 => encrypt_sectors_n::<5>(k, rest, src.add(at), dst.add(at), size, skew),
        4 => encrypt_sectors_n::<4>(k, rest, src.add(at), dst.add(at), size, skew),
        3 => encrypt_sectors_n::<3>(k, rest, src.add(at), dst.add(at), size, skew),
        2 => encrypt_sectors_n::<2>(k, rest, src.add(at), dst.add(at), size, skew),
        1 => encrypt_sectors_n::<1>(k, rest, src.add(at), dst.add(at), size, skew),
        _ => {}
    }
}
