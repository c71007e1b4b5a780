//! CTR on VAES: 16 counter blocks per group, built in registers.
//!
//! When the counter's last byte does not carry inside a group of 16 (15 groups in 16 for
//! an aligned start), the blocks are made by adding 0..15 to byte 15 of the big-endian
//! counter, one vector add per register. Otherwise the group's counters are built with
//! 128-bit scalar arithmetic, which also handles the 2^64 carry and the 2^128 wrap.
#![allow(unsafe_code)]

use super::super::scaffold::tail_through_buffer;
use super::{keystream_group, Keys, GROUP, REGS};
use core::arch::x86_64::*;

/// The 16 counter blocks `c, c + 1, ..., c + 15`, big-endian, two per register.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn counters(c: u128) -> [__m256i; REGS] {
    let mut x = [_mm256_setzero_si256(); REGS];
    if (c as u8) <= 0xff - 15 {
        // Common case: the 16 counters differ only in their last (least significant) byte.
        // Keep them big-endian and add i to byte 15, which is the top byte of the lane's
        // high quadword: one add per register, no byte shuffle.
        let be = c.to_be_bytes();
        let base = _mm256_broadcastsi128_si256(_mm_loadu_si128(be.as_ptr().cast()));
        for (i, v) in x.iter_mut().enumerate() {
            let (lo, hi) = ((2 * i as i64) << 56, (2 * i as i64 + 1) << 56);
            *v = _mm256_add_epi64(base, _mm256_set_epi64x(hi, 0, lo, 0));
        }
    } else if (c as u64) <= u64::MAX - 15 {
        // The last byte carries but the low 64 bits do not: (lo, hi) little-endian pairs,
        // 64-bit adds, then a byte shuffle to big-endian.
        let bswap = _mm256_set_epi8(
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
            11, 12, 13, 14, 15,
        );
        let (lo, hi) = (c as u64, (c >> 64) as i64);
        let base = _mm256_set_epi64x(hi, lo.wrapping_add(1) as i64, hi, lo as i64);
        for (i, v) in x.iter_mut().enumerate() {
            let inc = _mm256_set_epi64x(0, 2 * i as i64, 0, 2 * i as i64);
            *v = _mm256_shuffle_epi8(_mm256_add_epi64(base, inc), bswap);
        }
    } else {
        // The low 64 bits carry (or the counter wraps at 2^128): scalar arithmetic.
        let mut blocks = [0u8; GROUP];
        for (i, b) in blocks.chunks_exact_mut(16).enumerate() {
            b.copy_from_slice(&c.wrapping_add(i as u128).to_be_bytes());
        }
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm256_loadu_si256(blocks.as_ptr().add(32 * i).cast());
        }
    }
    x
}

/// Defines `$name(k, counter, src, dst, len)`, compiled with `$features`: `len` is a
/// multiple of 16; `counter` advances by `len / 16`. The next group's counters are built
/// before this group's rounds in program order, so their short dependency chain runs among
/// the rounds (software pipelining); with 16 ymm registers some of them spill, with
/// AVX-512VL's 32 they stay in ymm16-31.
macro_rules! ctr_kernel {
    ($name:ident, $features:literal) => {
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            k: &Keys,
            counter: &mut u128,
            src: *const u8,
            dst: *mut u8,
            len: usize,
        ) {
            // SAFETY (of the pointer offsets and the groups): the groups are inside the
            // `len` bytes of both buffers (caller), the tail goes through a buffer.
            unsafe {
                let mut off = 0;
                let mut x = counters(*counter);
                while off + GROUP <= len {
                    *counter = counter.wrapping_add(16);
                    let next = counters(*counter);
                    keystream_group::<REGS>(k, x, src.add(off), dst.add(off));
                    x = next;
                    off += GROUP;
                }
                let rest = len - off;
                let (s, d) = (src.add(off), dst.add(off));
                if rest > 0 && rest <= 32 {
                    // One or two blocks (a GCM tail): one register, through a 32-byte buffer.
                    tail_through_buffer::<32>(s, d, rest, |s, d| {
                        keystream_group::<1>(k, [x[0]], s, d)
                    });
                } else if rest > 0 {
                    tail_through_buffer::<GROUP>(s, d, rest, |s, d| {
                        keystream_group::<REGS>(k, x, s, d)
                    });
                }
                *counter = counter.wrapping_add((rest / 16) as u128);
            }
        }
    };
}

ctr_kernel!(ctr_vaes_avx2, "avx2,vaes");
ctr_kernel!(ctr_vaes_avx512, "avx2,vaes,avx512f,avx512vl");
