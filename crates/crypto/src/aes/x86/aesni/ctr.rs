//! CTR on AES-NI: 8 counter blocks per group, built in registers.
//!
//! The counter is kept as a little-endian (lo, hi) pair so the increments are 64-bit adds,
//! and a byte shuffle makes the big-endian block. A group in which the low 64 bits would
//! carry is built with 128-bit scalar arithmetic instead (which also wraps at 2^128).
#![allow(unsafe_code)]

use super::{crypt_aesni, tail_through_buffer, Keys, GROUP};
use core::arch::x86_64::*;

#[target_feature(enable = "aes,sse4.1")]
unsafe fn group(k: &Keys, c: u128, src: *const u8, dst: *mut u8) {
    let bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let mut x = [_mm_setzero_si128(); 8];
    let lo = c as u64;
    if lo <= u64::MAX - 7 {
        let base = _mm_set_epi64x((c >> 64) as i64, lo as i64);
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm_shuffle_epi8(_mm_add_epi64(base, _mm_set_epi64x(0, i as i64)), bswap);
        }
    } else {
        for (i, v) in x.iter_mut().enumerate() {
            let b = c.wrapping_add(i as u128).to_be_bytes();
            *v = _mm_loadu_si128(b.as_ptr().cast());
        }
    }
    crypt_aesni::<8, false>(k, &mut x);
    for (i, v) in x.iter().enumerate() {
        let d = _mm_loadu_si128(src.add(16 * i).cast());
        _mm_storeu_si128(dst.add(16 * i).cast(), _mm_xor_si128(*v, d));
    }
}

/// `len` is a multiple of 16; `counter` advances by `len / 16`.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn ctr_aesni(
    k: &Keys,
    counter: &mut u128,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let mut off = 0;
    while off + GROUP <= len {
        group(k, *counter, src.add(off), dst.add(off));
        *counter = counter.wrapping_add(8);
        off += GROUP;
    }
    if off < len {
        let c = *counter;
        // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
        tail_through_buffer(src.add(off), dst.add(off), len - off, |s, d| unsafe {
            group(k, c, s, d)
        });
        *counter = counter.wrapping_add(((len - off) / 16) as u128);
    }
}
