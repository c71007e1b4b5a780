//! CTR on zmm: 32 counter blocks per group, four per register, built in registers.
//!
//! # The steady state: one XOR per register
//! The bulk runs groups whose first counter is a multiple of 32. Then the counter's last
//! byte has its low five bits clear at the group's start, and the 32 blocks of the group
//! differ from the first only there: block `j` is the first with byte 15 XORed by `j`
//! (no carry can occur). Round 0 XORs round key 0 into every block, so a group's
//! whitened counters are `(broadcast(first counter) ^ key 0) ^ C_i`, with `C_i` constants
//! that put `4i + l` into byte 15 of lane `l` of register `i`: one broadcast and one XOR
//! per group, one XOR per register, no byte shuffle (shuffles compete with VAESENC on
//! this machine's probe) and no carry handling inside a group. The carries (of the 64-bit
//! halves and the 2^128 wrap) happen between groups, in the scalar `u128` that holds the
//! next group's first counter. The data is XORed into the last round key (one XOR per
//! register, its load fused), so a group costs 8 x 14 VAESENC/VAESENCLAST and 16 XORs:
//! ECB's work and one XOR per register.
//!
//! # The edges
//! A call whose counter is not a multiple of 32 first runs the blocks up to the next
//! multiple (at most 31: a head), and every call ends with the blocks after the last whole
//! group (a tail). Both go through [`partial`]: as many registers as the bytes need, the
//! last one with masked loads and stores (AVX-512BW masks never touch the bytes outside
//! the mask), the counters built by [`counters`], which handles any start: when the last
//! byte does not carry inside the 32 blocks, by adds to byte 15; when the low 64 bits do not
//! carry, by 64-bit adds on (lo, hi) pairs and a byte shuffle to big-endian; otherwise with
//! 128-bit scalar arithmetic (the 2^64 carry and the 2^128 wrap).
#![allow(unsafe_code)]

use super::{last_round, rounds_but_last, Keys, GROUP, REGS};
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

/// The constants `C_i` of a steady-state group: `4i + l` in byte 15 (the top byte of the
/// high quadword) of lane `l` of register `i`.
#[inline]
#[target_feature(enable = "avx512f")]
fn lane_numbers() -> [__m512i; REGS] {
    core::array::from_fn(|i| {
        let h = |l: i64| (4 * i as i64 + l) << 56;
        _mm512_set_epi64(h(3), 0, h(2), 0, h(1), 0, h(0), 0)
    })
}

/// `c` big-endian in each of the four lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn broadcast_be(c: u128) -> __m512i {
    // The little-endian bytes of `c` byte-swapped are its big-endian bytes.
    let be = c.swap_bytes();
    _mm512_broadcast_i32x4(_mm_set_epi64x((be >> 64) as u64 as i64, be as u64 as i64))
}

/// The keystream of the counters from `c` over `len <= GROUP` bytes (a multiple of 16, not
/// zero): `ceil(len / 64)` registers, the last with masked loads and stores.
///
/// # Safety
/// The avx512 backend's CPU features (`k` proves them); `src` readable and `dst` writable
/// for `len` bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vaes")]
unsafe fn partial(k: &Keys, c: u128, src: *const u8, dst: *mut u8, len: usize) {
    /// `N` registers of the counters `x`, the last `last_len` bytes long (1 to 64).
    ///
    /// # Safety
    /// As for [`partial`], with `len = 64 * (N - 1) + last_len`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,vaes")]
    unsafe fn run<const N: usize>(
        k: &Keys,
        x: &[__m512i; REGS],
        src: *const u8,
        dst: *mut u8,
        last_len: usize,
    ) {
        let mut y: [__m512i; N] = core::array::from_fn(|i| x[i]);
        let (first, last) = (k.key::<false>(0), k.key::<false>(k.rounds));
        for v in y.iter_mut() {
            *v = _mm512_xor_si512(*v, first);
        }
        rounds_but_last::<N, false>(k, &mut y);
        let mask: __mmask64 = if last_len == 64 {
            !0
        } else {
            (1 << last_len) - 1
        };
        for (i, v) in y.iter().enumerate() {
            let m = if i + 1 == N { mask } else { !0 };
            // SAFETY: register `i` starts inside both buffers (`64 i < len`); the mask
            // covers only its bytes inside them, and a masked load or store does not touch
            // the bytes outside the mask.
            unsafe {
                let d = _mm512_maskz_loadu_epi8(m, src.add(64 * i).cast());
                let out = last_round::<false>(*v, _mm512_xor_si512(d, last));
                _mm512_mask_storeu_epi8(dst.add(64 * i).cast(), m, out);
            }
        }
    }
    let x = counters(c);
    let last_len = len - 64 * ((len - 1) / 64);
    // SAFETY: the caller's, with `N = ceil(len / 64)`.
    unsafe {
        match len.div_ceil(64) {
            1 => run::<1>(k, &x, src, dst, last_len),
            2 => run::<2>(k, &x, src, dst, last_len),
            3 => run::<3>(k, &x, src, dst, last_len),
            4 => run::<4>(k, &x, src, dst, last_len),
            5 => run::<5>(k, &x, src, dst, last_len),
            6 => run::<6>(k, &x, src, dst, last_len),
            7 => run::<7>(k, &x, src, dst, last_len),
            _ => run::<8>(k, &x, src, dst, last_len),
        }
    }
}

/// CTR over `len` bytes (a multiple of 16); `counter` advances by `len / 16`.
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
    let mut c = *counter;
    let mut off = 0;
    // SAFETY (of the pointer offsets and the calls): the head, the groups and the tail are
    // inside the `len` bytes of both buffers (caller).
    unsafe {
        // The head: up to the next counter that is a multiple of 32.
        let head = ((BLOCKS - c % BLOCKS) % BLOCKS) as usize * 16;
        if head > 0 && len >= head + GROUP {
            partial(k, c, src, dst, head);
            c = c.wrapping_add((head / 16) as u128);
            off = head;
        }
        if c.is_multiple_of(BLOCKS) && off + GROUP <= len {
            let (first, last) = (k.key::<false>(0), k.key::<false>(k.rounds));
            let numbers = lane_numbers();
            while off + GROUP <= len {
                let base = _mm512_xor_si512(broadcast_be(c), first);
                let mut x: [__m512i; REGS] =
                    core::array::from_fn(|i| _mm512_xor_si512(base, numbers[i]));
                rounds_but_last::<REGS, false>(k, &mut x);
                let (s, d) = (src.add(off), dst.add(off));
                for (i, v) in x.iter().enumerate() {
                    let data = _mm512_loadu_si512(s.add(64 * i).cast());
                    let out = last_round::<false>(*v, _mm512_xor_si512(data, last));
                    _mm512_storeu_si512(d.add(64 * i).cast(), out);
                }
                c = c.wrapping_add(BLOCKS);
                off += GROUP;
            }
        }
        // The tail, and a short call whose counter is not a multiple of 32, a register
        // group at a time.
        while off < len {
            let n = (len - off).min(GROUP);
            partial(k, c, src.add(off), dst.add(off), n);
            c = c.wrapping_add((n / 16) as u128);
            off += n;
        }
    }
    *counter = c;
}
