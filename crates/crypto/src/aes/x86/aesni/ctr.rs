//! CTR on AES-NI: 12 counter blocks per group, built in registers.
//!
//! When the counter's last byte does not carry inside a group, the blocks are the
//! big-endian counter plus 0..11 in byte 15: one 64-bit add per block. Otherwise the
//! counter is kept as a little-endian (lo, hi) pair, added and byte-swapped, or, when the
//! low 64 bits carry (or at the 2^128 wrap), built with 128-bit scalar arithmetic.
//! Counters are built just before their group: software-pipelining them a group ahead, as
//! with 8 blocks, would need 12 more registers than xmm has (12 blocks: 1.0x -> 1.1x
//! OpenSSL's 8-block AES-NI CTR).
#![allow(unsafe_code)]

use super::{last_round_aesni, rounds_but_last_aesni, Keys};
use core::arch::x86_64::*;

/// Blocks per group: 12 rather than the minimum of 8 (latency 4 x 2 per cycle), so that
/// the rounds of one group keep both units busy while the next group's loads and counters
/// are issued; 12 data + key registers fit the 16 xmm registers.
const BLOCKS: usize = 12;
const GROUP: usize = 16 * BLOCKS;

#[inline]
#[target_feature(enable = "sse4.1")]
unsafe fn counters(c: u128) -> [__m128i; BLOCKS] {
    let mut x = [_mm_setzero_si128(); BLOCKS];
    if (c as u8) <= 0xff - (BLOCKS as u8 - 1) {
        let be = c.to_be_bytes();
        let base = _mm_loadu_si128(be.as_ptr().cast());
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm_add_epi64(base, _mm_set_epi64x((i as i64) << 56, 0));
        }
    } else if (c as u64) <= u64::MAX - (BLOCKS as u64 - 1) {
        let bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let base = _mm_set_epi64x((c >> 64) as i64, c as u64 as i64);
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm_shuffle_epi8(_mm_add_epi64(base, _mm_set_epi64x(0, i as i64)), bswap);
        }
    } else {
        for (i, v) in x.iter_mut().enumerate() {
            let b = c.wrapping_add(i as u128).to_be_bytes();
            *v = _mm_loadu_si128(b.as_ptr().cast());
        }
    }
    x
}

/// Encrypts the counter blocks `x` and XORs the keystream over one group; the data XOR is
/// folded into the last round key.
#[inline]
#[target_feature(enable = "aes,sse4.1")]
unsafe fn group(k: &Keys, mut x: [__m128i; BLOCKS], src: *const u8, dst: *mut u8) {
    let (first, last) = (k.key::<false>(0), k.key::<false>(k.rounds));
    for v in x.iter_mut() {
        *v = _mm_xor_si128(*v, first);
    }
    rounds_but_last_aesni::<BLOCKS, false>(k, &mut x);
    for (i, v) in x.iter().enumerate() {
        let d = _mm_loadu_si128(src.add(16 * i).cast());
        let out = last_round_aesni::<false>(*v, _mm_xor_si128(d, last));
        _mm_storeu_si128(dst.add(16 * i).cast(), out);
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
        group(k, counters(*counter), src.add(off), dst.add(off));
        *counter = counter.wrapping_add(BLOCKS as u128);
        off += GROUP;
    }
    if off < len {
        let x = counters(*counter);
        // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
        crate::aes::x86::common::tail_through_buffer::<GROUP>(
            src.add(off),
            dst.add(off),
            len - off,
            |s, d| unsafe { group(k, x, s, d) },
        );
        *counter = counter.wrapping_add(((len - off) / 16) as u128);
    }
}
