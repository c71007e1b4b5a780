//! CTR on AES-NI: 12 counter blocks per group, built in registers.
//!
//! When the counter's last byte does not carry inside a group, the blocks are the
//! big-endian counter plus 0..11 in byte 15: one 64-bit add per block. Otherwise the
//! counter is kept as a little-endian (lo, hi) pair, added and byte-swapped, or, when the
//! low 64 bits carry (or at the 2^128 wrap), built with 128-bit scalar arithmetic.
//! Counters are built just before their group: software-pipelining them a group ahead, as
//! with 8 blocks, would need 12 more registers than xmm has, and 12 blocks without it beat
//! 8 blocks with it (docs/PERFORMANCE.md).
#![allow(unsafe_code)]

use super::super::scaffold::for_each_group;
use super::{keystream_group, Keys};
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

/// `len` is a multiple of 16; `counter` advances by `len / 16`.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn ctr_aesni(
    k: &Keys,
    counter: &mut u128,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    // Each group's counters are built just before it (the rest of a group's counters in a
    // short last group are not used).
    for_each_group::<GROUP>(src, dst, len, |s, d| {
        keystream_group::<BLOCKS>(k, counters(*counter), s, d);
        *counter = counter.wrapping_add(BLOCKS as u128);
    });
    // The last group may have been short: the counter advances by the blocks done.
    let short = (len.div_ceil(GROUP) * GROUP - len) / 16;
    *counter = counter.wrapping_sub(short as u128);
}
