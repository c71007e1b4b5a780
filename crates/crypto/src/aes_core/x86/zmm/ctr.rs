//! CTR on zmm: 32 counter blocks per group, four per register, built in registers.
//!
//! When the counter's last byte does not carry inside a group of 32 (7 groups in 8 for
//! any start, every group for a start that is a multiple of 32), the blocks are made by
//! adding 0..31 to byte 15 of the big-endian counter, one vector add per register. When
//! the low 64 bits do not carry, by 64-bit adds on (lo, hi) pairs and a byte shuffle to
//! big-endian. Otherwise the group's counters are built with 128-bit scalar arithmetic,
//! which also handles the 2^64 carry and the 2^128 wrap.
#![allow(unsafe_code)]

use super::super::scaffold::tail_through_buffer;
use super::{keystream_group, Keys, GROUP, REGS};
use core::arch::x86_64::*;

/// Blocks per group.
const BLOCKS: u128 = (GROUP / 16) as u128;

/// The 32 counter blocks `c, c + 1, ..., c + 31`, big-endian, four per register.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn counters(c: u128) -> [__m512i; REGS] {
    let mut x = [_mm512_setzero_si512(); REGS];
    if (c as u8) <= 0xff - 31 {
        // Byte 15 of each lane is the top byte of its high quadword: add 4i + l there.
        let be = c.to_be_bytes();
        // SAFETY: `be` is 16 readable bytes; unaligned load.
        let base = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(be.as_ptr().cast()) });
        for (i, v) in x.iter_mut().enumerate() {
            let h = |l: i64| (4 * i as i64 + l) << 56;
            *v = _mm512_add_epi64(base, _mm512_set_epi64(h(3), 0, h(2), 0, h(1), 0, h(0), 0));
        }
    } else if (c as u64) <= u64::MAX - 31 {
        // (lo, hi) little-endian pairs, 64-bit adds, then a byte shuffle to big-endian.
        let bswap = _mm512_broadcast_i32x4(_mm_set_epi8(
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
        ));
        let (lo, hi) = (c as u64 as i64, (c >> 64) as i64);
        let base = _mm512_set_epi64(
            hi,
            lo.wrapping_add(3),
            hi,
            lo.wrapping_add(2),
            hi,
            lo.wrapping_add(1),
            hi,
            lo,
        );
        for (i, v) in x.iter_mut().enumerate() {
            let s = 4 * i as i64;
            let inc = _mm512_set_epi64(0, s, 0, s, 0, s, 0, s);
            *v = _mm512_shuffle_epi8(_mm512_add_epi64(base, inc), bswap);
        }
    } else {
        // The low 64 bits carry (or the counter wraps at 2^128): scalar arithmetic.
        let mut blocks = [0u8; GROUP];
        for (i, b) in blocks.chunks_exact_mut(16).enumerate() {
            b.copy_from_slice(&c.wrapping_add(i as u128).to_be_bytes());
        }
        for (i, v) in x.iter_mut().enumerate() {
            // SAFETY: register `i` is inside `blocks`; unaligned load.
            *v = unsafe { _mm512_loadu_si512(blocks.as_ptr().add(64 * i).cast()) };
        }
    }
    x
}

/// CTR over `len` bytes (a multiple of 16); `counter` advances by `len / 16`. The next
/// group's counters are built before this group's rounds in program order, so their short
/// dependency chain runs among the rounds.
///
/// # Safety
/// The avx512 backend's CPU features (`k` proves them); `src` readable and `dst` writable
/// for `len` bytes.
#[target_feature(enable = "avx512f,avx512bw,vaes")]
pub(super) unsafe fn ctr_zmm(
    k: &Keys,
    counter: &mut u128,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    // SAFETY (of the pointer offsets and the groups): the groups are inside the `len`
    // bytes of both buffers (caller), the tail goes through a buffer.
    unsafe {
        let mut off = 0;
        let mut x = counters(*counter);
        while off + GROUP <= len {
            *counter = counter.wrapping_add(BLOCKS);
            let next = counters(*counter);
            keystream_group::<REGS>(k, x, src.add(off), dst.add(off));
            x = next;
            off += GROUP;
        }
        let rest = len - off;
        let (s, d) = (src.add(off), dst.add(off));
        if rest > 0 && rest <= 64 {
            // Up to four blocks (a GCM tail): one register, through a 64-byte buffer.
            tail_through_buffer::<64>(s, d, rest, |s, d| keystream_group::<1>(k, [x[0]], s, d));
        } else if rest > 0 {
            tail_through_buffer::<GROUP>(s, d, rest, |s, d| keystream_group::<REGS>(k, x, s, d));
        }
        *counter = counter.wrapping_add((rest / 16) as u128);
    }
}
