//! GHASH with VPCLMULQDQ on 256-bit ymm registers (GCM pairs it with the `vaes` AES
//! backend).
//!
//! Targets CPUs with VPCLMULQDQ and AVX2 but not necessarily AVX-512 (Zen 3/4, Ice Lake
//! and later, Alder Lake E-cores): only ymm registers, so only the YMM register state is
//! needed. Each ymm holds two blocks, one per 128-bit lane, and one VPCLMULQDQ does the
//! same half-product for both. Groups of [`N`] = 16 blocks (8 ymm registers) are multiplied
//! by `H^16..H^1` with Karatsuba (3 VPCLMULQDQ per pair of blocks), the three 256-bit
//! accumulators `lo`/`hi`/`mid` are summed lane-wise, the two lanes are added together, and
//! one reduction per group (2 carry-less multiplications by 0xC2 << 56, on xmm) ends the
//! group. A shorter last group uses the last entries of the same table; an odd block is
//! paired with a zero block (its partner power is the zero padding entry of the table).
//!
//! The key also holds `H^64..H^17` ([`FAR`] tables of 16): the stitched GCM kernel on ymm
//! (`gcm/x86/ymm.rs`) multiplies four consecutive groups by `H^64..H^49`, ...,
//! `H^16..H^1`, sums the unreduced products and reduces once per four groups, because
//! there the reduction's extra vector instructions compete with the AES rounds for pipes.
//!
//! The 4-way (zmm) version, which needs the AVX-512 state, is `vpclmul512.rs`; this one
//! must run without it.
//!
//! Calling contract: a [`Key`] is built only after the CPU check of
//! `GhashBackend::Vpclmul` (vpclmulqdq, pclmulqdq, avx2, os ymm state) succeeded; that is
//! what makes its safe `update` sound.

#![allow(unsafe_code)]

use super::clmul::{reduce, store_xmm, to_xmm};
use core::arch::x86_64::*;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Blocks per reduction.
pub(crate) const N: usize = 16;

/// Power tables of the fused GCM kernel, which reduces once per `FAR` groups.
pub(crate) const FAR: usize = 4;

/// `pow[0]` = `H^16..H^1` (twisted, reflected), then a zero entry; `mid[0]` for each the
/// `lo ^ hi` of its halves. `pow[t]`, `mid[t]`: the same for `H^(16t + 16)..H^(16t + 1)`,
/// used by the fused GCM kernel for the `t`-th group before the one that reduces.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct Key {
    pow: [[u128; N + 1]; FAR],
    mid: [[u128; N + 1]; FAR],
}

/// The `lo ^ hi` entry of a power, in both halves.
fn mid_of(p: u128) -> u128 {
    let x = (p as u64 ^ (p >> 64) as u64) as u128;
    x | (x << 64)
}

impl Key {
    /// `pow` = `[H^(FAR * N), ..., H^1]` twisted. Only call after the CPU check (module
    /// doc).
    pub(super) fn new(pow: &[u128; FAR * N]) -> Key {
        let mut k = Key {
            pow: [[0; N + 1]; FAR],
            mid: [[0; N + 1]; FAR],
        };
        for t in 0..FAR {
            let from = (FAR - 1 - t) * N;
            k.pow[t][..N].copy_from_slice(&pow[from..from + N]);
            for i in 0..N {
                k.mid[t][i] = mid_of(k.pow[t][i]);
            }
        }
        k
    }

    pub(crate) fn update(&self, y: &mut u128, blocks: &[u8]) {
        // SAFETY: a Key exists only after the CPU check for vpclmulqdq, avx2 (with the OS
        // saving ymm state) and pclmulqdq (module doc), the features of `update_vpclmul`.
        unsafe { update_vpclmul(self, y, blocks) }
    }
}

/// The XOR of the two 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn fold_lanes(v: __m256i) -> __m128i {
    _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
}

/// Multiplies the block pair `x` by the table entries `at`, `at + 1` and adds the three
/// Karatsuba partial products to the accumulators.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
pub(crate) fn mul_add(key: &Key, at: usize, x: __m256i, acc: &mut [__m256i; 3]) {
    mul_add_in(&key.pow[0], &key.mid[0], at, x, acc)
}

/// [`mul_add`] with the powers of table `t`: `H^(16t + 16 - at)`, `H^(16t + 15 - at)`.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
pub(crate) fn mul_add_table(key: &Key, t: usize, at: usize, x: __m256i, acc: &mut [__m256i; 3]) {
    mul_add_in(&key.pow[t], &key.mid[t], at, x, acc)
}

#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn mul_add_in(
    pow: &[u128; N + 1],
    mid: &[u128; N + 1],
    at: usize,
    x: __m256i,
    acc: &mut [__m256i; 3],
) {
    assert!(at < N);
    // SAFETY: `at + 1 <= N` and the tables have N + 1 entries of 16 bytes, so 32 bytes from
    // entry `at` are in bounds; unaligned loads.
    let (h, m) = unsafe {
        (
            _mm256_loadu_si256(pow.as_ptr().add(at).cast()),
            _mm256_loadu_si256(mid.as_ptr().add(at).cast()),
        )
    };
    acc[0] = _mm256_xor_si256(acc[0], _mm256_clmulepi64_epi128::<0x00>(x, h));
    acc[1] = _mm256_xor_si256(acc[1], _mm256_clmulepi64_epi128::<0x11>(x, h));
    let xm = _mm256_xor_si256(x, _mm256_shuffle_epi32::<0x4E>(x));
    acc[2] = _mm256_xor_si256(acc[2], _mm256_clmulepi64_epi128::<0x00>(xm, m));
}

/// Sums the two lanes, places Karatsuba's middle term at bit 64 and reduces once.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
pub(crate) fn finish_group(acc: [__m256i; 3]) -> __m128i {
    let (lo, hi, mut mid) = (fold_lanes(acc[0]), fold_lanes(acc[1]), fold_lanes(acc[2]));
    mid = _mm_xor_si128(mid, _mm_xor_si128(lo, hi));
    let high = _mm_xor_si128(hi, _mm_srli_si128::<8>(mid));
    let low = _mm_xor_si128(lo, _mm_slli_si128::<8>(mid));
    reduce(high, low)
}

/// `x * H`, reduced (one block hashed into a state already XORed with it: GCM's length
/// block at the end of the fused kernel).
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
pub(crate) fn mul_h(key: &Key, x: __m128i) -> __m128i {
    let mut acc = [_mm256_setzero_si256(); 3];
    // Entry N - 1 is H^1 and entry N the zero padding, which meets the zero upper lane.
    mul_add(key, N - 1, _mm256_zextsi128_si256(x), &mut acc);
    finish_group(acc)
}

/// One full group of `N` blocks at `group` hashed into the state `y` (GHASH's bit order, as
/// kept in a register by [`update_vpclmul`]); also the last hash of the stitched GCM
/// kernel on ymm.
///
/// # Safety
/// The CPU features of this GHASH (module doc); `group` points to `16 * N` readable bytes.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
pub(crate) unsafe fn hash_group(key: &Key, y: __m128i, group: *const u8) -> __m128i {
    let bswap = _mm256_broadcastsi128_si256(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ));
    // SAFETY: 32 bytes from block `i < N` are inside the group (caller); unaligned load.
    let load2 = |i: usize| unsafe { _mm256_loadu_si256(group.add(16 * i).cast()) };
    // The pairs that do not depend on the state go first, so they overlap with the
    // previous group's reduction.
    let mut acc = [_mm256_setzero_si256(); 3];
    for p in 1..N / 2 {
        mul_add(
            key,
            2 * p,
            _mm256_shuffle_epi8(load2(2 * p), bswap),
            &mut acc,
        );
    }
    let x = _mm256_shuffle_epi8(load2(0), bswap);
    mul_add(
        key,
        0,
        _mm256_xor_si256(x, _mm256_zextsi128_si256(y)),
        &mut acc,
    );
    finish_group(acc)
}

#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn update_vpclmul(key: &Key, y: &mut u128, blocks: &[u8]) {
    let bswap = _mm256_broadcastsi128_si256(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ));
    let load2 = |group: &[u8], i: usize| {
        assert!(16 * i + 32 <= group.len());
        // SAFETY: the 32 bytes from block `i` are in `group` (asserted); unaligned load.
        unsafe { _mm256_loadu_si256(group.as_ptr().add(16 * i).cast()) }
    };
    let mut y_acc = to_xmm(*y);
    let mut groups = blocks.chunks_exact(16 * N);
    for group in &mut groups {
        // SAFETY: `group` is 16 * N readable bytes.
        y_acc = unsafe { hash_group(key, y_acc, group.as_ptr()) };
    }
    // The last, shorter group uses the last n table entries; an odd block pairs with zero.
    let rest = groups.remainder();
    if !rest.is_empty() {
        let n = rest.len() / 16;
        let mut acc = [_mm256_setzero_si256(); 3];
        let mut i = 0;
        while i < n {
            let raw = if i + 2 <= n {
                load2(rest, i)
            } else {
                // SAFETY: `16 * i + 16 <= rest.len()`; unaligned load.
                _mm256_zextsi128_si256(unsafe { _mm_loadu_si128(rest.as_ptr().add(16 * i).cast()) })
            };
            let mut x = _mm256_shuffle_epi8(raw, bswap);
            if i == 0 {
                x = _mm256_xor_si256(x, _mm256_zextsi128_si256(y_acc));
            }
            mul_add(key, N - n + i, x, &mut acc);
            i += 2;
        }
        y_acc = finish_group(acc);
    }
    store_xmm(y, y_acc);
}
