//! CTR on VAES: 16 counter blocks per group, built in registers.
//!
//! The 128-bit big-endian counter is kept as a little-endian (lo, hi) pair per lane, so
//! the increments are plain 64-bit vector adds, and a byte shuffle turns each lane into the
//! big-endian counter block. When the low 64 bits would carry inside a group (once every
//! 2^60 groups, or at a chosen IV), the group's counters are built with 128-bit scalar
//! arithmetic instead, which also gives the wrap at 2^128.
#![allow(unsafe_code)]

use super::{crypt_vaes_avx2, tail_through_buffer, Keys, GROUP};
use core::arch::x86_64::*;

#[target_feature(enable = "avx2,vaes")]
unsafe fn group(k: &Keys, c: u128, src: *const u8, dst: *mut u8) {
    // Reverses the 16 bytes of each lane: little-endian (lo, hi) -> big-endian block.
    let bswap = _mm256_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
        12, 13, 14, 15,
    );
    let mut x = [_mm256_setzero_si256(); 8];
    let lo = c as u64;
    if lo <= u64::MAX - 15 {
        let hi = (c >> 64) as i64;
        let base = _mm256_set_epi64x(hi, lo.wrapping_add(1) as i64, hi, lo as i64);
        for (i, v) in x.iter_mut().enumerate() {
            let inc = _mm256_set_epi64x(0, 2 * i as i64, 0, 2 * i as i64);
            *v = _mm256_shuffle_epi8(_mm256_add_epi64(base, inc), bswap);
        }
    } else {
        let mut blocks = [0u8; GROUP];
        for (i, b) in blocks.chunks_exact_mut(16).enumerate() {
            b.copy_from_slice(&c.wrapping_add(i as u128).to_be_bytes());
        }
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm256_loadu_si256(blocks.as_ptr().add(32 * i).cast());
        }
    }
    crypt_vaes_avx2::<8, false>(k, &mut x);
    for (i, v) in x.iter().enumerate() {
        let d = _mm256_loadu_si256(src.add(32 * i).cast());
        _mm256_storeu_si256(dst.add(32 * i).cast(), _mm256_xor_si256(*v, d));
    }
}

/// `len` is a multiple of 16; `counter` advances by `len / 16`.
#[target_feature(enable = "avx2,vaes")]
pub(super) unsafe fn ctr_vaes_avx2(
    k: &Keys,
    counter: &mut u128,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let mut off = 0;
    while off + GROUP <= len {
        group(k, *counter, src.add(off), dst.add(off));
        *counter = counter.wrapping_add(16);
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
