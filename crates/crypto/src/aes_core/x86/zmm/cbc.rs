//! CBC on zmm (the kernels around these pieces:
//! [`cbc_kernels!`](super::super::rounds::cbc_kernels)).
//!
//! - Decryption is parallel: 32 blocks per group; the predecessors of the four blocks of
//!   a register are the four blocks 16 bytes before them, except for the first register,
//!   whose lane 0 is the chaining value.
//! - Encryption of many sectors interleaves independent chains: four sectors per register
//!   (one per lane), 8 registers = 32 sectors advancing together, which is what two zmm
//!   VAESENC per cycle at a latency of 4 cycles need to stay busy. The four sectors of a
//!   register start at addresses equal modulo 4 KiB (sectors of 2 KiB and more), so each
//!   register, not each pair as on ymm, runs one cache line behind the one before: with
//!   pairs, 8 sectors' source and 8 destination lines fell in one set of the L1 cache and
//!   4096x64 sectors ran at half the ymm rate (3.5 against 7-9 GB/s, loaded machine).
//!   Two cache lines (8 blocks) per register beat one: 4096x64 at kernel level 24.5-25.0
//!   GB/s against 20.8 (16 blocks: 21.3; 512-byte sectors, not skewed, 27.8-28.3).
#![allow(unsafe_code)]

use super::super::rounds::cbc_kernels;
use super::{crypt, last_round, rounds_but_last, Keys, GROUP, REGS};
use core::arch::x86_64::*;

/// The blocks at `p`, `p + size`, `p + 2 size`, `p + 3 size` in the four lanes.
///
/// # Safety
/// AVX-512F; the four blocks readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load4(p: *const u8, size: usize) -> __m512i {
    // SAFETY: the caller's; unaligned loads.
    unsafe {
        let lo = _mm256_loadu2_m128i(p.add(size).cast(), p.cast());
        let hi = _mm256_loadu2_m128i(p.add(3 * size).cast(), p.add(2 * size).cast());
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    }
}

/// The four lanes of `v` to `p`, `p + size`, `p + 2 size`, `p + 3 size`.
///
/// # Safety
/// AVX-512F; the four blocks writable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store4(p: *mut u8, size: usize, v: __m512i) {
    // SAFETY: the caller's; unaligned stores.
    unsafe {
        _mm_storeu_si128(p.cast(), _mm512_castsi512_si128(v));
        _mm_storeu_si128(p.add(size).cast(), _mm512_extracti32x4_epi32::<1>(v));
        _mm_storeu_si128(p.add(2 * size).cast(), _mm512_extracti32x4_epi32::<2>(v));
        _mm_storeu_si128(p.add(3 * size).cast(), _mm512_extracti32x4_epi32::<3>(v));
    }
}

cbc_kernels! {
    keys: Keys,
    register: __m512i,
    features: "avx512f,avx512bw,vaes",
    xor: _mm512_xor_si512,
    zero: _mm512_setzero_si512,
    bytes: 64,
    load: _mm512_loadu_si512,
    store: _mm512_storeu_si512,
    decrypt: cbc_decrypt_zmm,
    first: |src, chain| {
        // Lane 0 the chaining value, lanes 1 to 3 the group's first three blocks.
        let x = _mm512_castsi128_si512(chain);
        let x = _mm512_inserti32x4::<1>(x, _mm_loadu_si128(src.cast()));
        _mm512_inserti64x4::<1>(x, _mm256_loadu_si256(src.add(16).cast()))
    },
    sectors: [
        cbc_encrypt_sectors_zmm: "avx512f,avx512bw,vaes", regs: 8, rest: [7, 6, 5, 4, 3, 2, 1];
    ],
    chains: 4,
    skewed: 1,
    skew: 8,
    load: |p, size| load4(p, size),
    store: |p, size, v| store4(p, size, v),
    ivs: |ivs| load4(ivs.as_ptr().cast(), 16),
}
