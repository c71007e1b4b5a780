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
//! - The steady steps store four steps at once: a 4 x 4 transpose of 128-bit lanes turns a
//!   register's four steps into four 64-byte stores, one per sector (`store4x4`); sixteen
//!   16-byte stores cost the rounds more than the eight shuffles. The loads stay gathers
//!   (two inserts from memory and one 256-bit insert per register and step): four 64-byte
//!   loads and a transpose, and masked loads, both ran slower (docs/PERFORMANCE.md).
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

/// The 4x4 transpose of 128-bit lanes: lane `j` of result `i` is lane `i` of `v[j]`
/// (8 shuffles, each a quarter of an AES slot on Zen 5).
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose(v: [__m512i; 4]) -> [__m512i; 4] {
    // Lanes, as (register, lane): a = 0.0 0.1 1.0 1.1, b = 0.2 0.3 1.2 1.3,
    // c = 2.0 2.1 3.0 3.1, d = 2.2 2.3 3.2 3.3.
    let a = _mm512_shuffle_i64x2::<0x44>(v[0], v[1]);
    let b = _mm512_shuffle_i64x2::<0xee>(v[0], v[1]);
    let c = _mm512_shuffle_i64x2::<0x44>(v[2], v[3]);
    let d = _mm512_shuffle_i64x2::<0xee>(v[2], v[3]);
    [
        _mm512_shuffle_i64x2::<0x88>(a, c),
        _mm512_shuffle_i64x2::<0xdd>(a, c),
        _mm512_shuffle_i64x2::<0x88>(b, d),
        _mm512_shuffle_i64x2::<0xdd>(b, d),
    ]
}

/// Four steps' registers `v` (lane `j` of `v[i]`: block `i` of sector `j`) to the four
/// sectors, 64 bytes each: `p + j size` receives lane `j` of `v[0]` to `v[3]`.
///
/// A transpose and four full-width stores: sixteen 16-byte stores (`store4` four times)
/// slow the interleaved rounds down more than the shuffles do (an assembly probe on Zen 5,
/// 8 registers of 14 rounds with this kernel's loads: 71 cycles per step with the narrow
/// stores, 61.5 with one full-width store per register and step; the rounds alone 58).
///
/// # Safety
/// AVX-512F; the 64 bytes at each `p + j size` writable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store4x4(p: *mut u8, size: usize, v: &[__m512i; 4]) {
    for (j, w) in transpose(*v).into_iter().enumerate() {
        // SAFETY: the caller's; unaligned stores.
        unsafe { _mm512_storeu_si512(p.add(j * size).cast(), w) };
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
    steps: 4,
    store_steps: |p, size, v| store4x4(p, size, v),
    ivs: |ivs| load4(ivs.as_ptr().cast(), 16),
}
