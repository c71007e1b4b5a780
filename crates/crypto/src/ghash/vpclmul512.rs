//! GHASH with VPCLMULQDQ on 512-bit zmm registers (GCM pairs it with the `avx512` AES
//! backend).
//!
//! Each zmm holds four blocks, one per 128-bit lane, and one VPCLMULQDQ does the same
//! half-product for all four. A group of [`N`] = 32 blocks (8 zmm) is multiplied by
//! `H^32..H^1` with Karatsuba (3 VPCLMULQDQ per four blocks); the three accumulators are
//! combined into a high and a low half per lane, the four lanes are added together, and one
//! reduction (on xmm, shared with the ymm GHASH) ends the group. A shorter last group uses
//! the last entries of the same table, its last partial register loaded with a byte mask
//! (the blocks past the end are zero and meet zero padding entries of the table).
//!
//! Why zmm, on a core that splits 512-bit operations in two: there (the `sectorcrypt bench
//! --probe` table) a VPCLMULQDQ takes the multiplier as long on ymm as on zmm, so zmm
//! doubles the multiplier's throughput per byte, while VAESENC costs the same per byte in
//! both widths. The stitched GCM kernel on zmm (`gcm/x86/zmm.rs`) hashes with the
//! functions here.
//!
//! Calling contract: a [`Key`] is built only after the CPU check of
//! `GhashBackend::Vpclmul512` (avx512f/bw/vl with the OS saving zmm state, avx2,
//! vpclmulqdq, pclmulqdq); that is what makes its safe `update` sound.

#![allow(unsafe_code)]

use super::clmul::{reduce, store_xmm, to_xmm};
use core::arch::x86_64::*;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Blocks per reduction (8 zmm registers).
pub(crate) const N: usize = 32;

/// `pow` = `H^65..H^1` (twisted, reflected), then three zero entries that a short group's
/// last register may reach; `mid` for each entry the `lo ^ hi` of its halves, in the low
/// half. A group is multiplied by 32 consecutive powers starting at [`first_power`]:
/// `H^32..H^1` normally; one higher (`H^33..H^2`) when GCM's length block follows before the
/// reduction; 32 higher (`H^64..H^33`) when it is the first of two groups that share a
/// reduction (the stitched kernel's pairs).
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct Key {
    pow: [u128; 2 * N + 4],
    mid: [u128; 2 * N + 4],
}

/// The powers in [`Key`]: `H^(2N + 1)`, the highest, down to `H^1` at index `2N`.
pub(crate) const POWERS: usize = 2 * N + 1;

/// The index of the first power (the one for the group's first block) of a group: `far`
/// for the first of two groups reduced together, `lengths` when GCM's length block follows
/// in the same reduction.
pub(crate) const fn first_power(lengths: bool, far: bool) -> usize {
    N + 1 - lengths as usize - N * far as usize
}

impl Key {
    /// `pow` = `[H^POWERS, ..., H^1]` twisted. Only call after the CPU check (module doc).
    pub(super) fn new(pow: &[u128; POWERS]) -> Key {
        let mut k = Key {
            pow: [0; 2 * N + 4],
            mid: [0; 2 * N + 4],
        };
        k.pow[..POWERS].copy_from_slice(pow);
        for (m, p) in k.mid.iter_mut().zip(pow) {
            *m = (*p as u64 ^ (*p >> 64) as u64) as u128;
        }
        k
    }

    pub(crate) fn update(&self, y: &mut u128, blocks: &[u8]) {
        // SAFETY: a Key exists only after the CPU check of its backend (module doc),
        // which covers the features of `update_zmm`.
        unsafe { update_zmm(self, y, blocks) }
    }

    /// Entries `at..at + 4` of the power table and of the middle-term table.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn powers(&self, at: usize) -> (__m512i, __m512i) {
        assert!(at + 4 <= 2 * N + 4);
        // SAFETY: entries `at..at + 4` are inside both tables (asserted); unaligned loads.
        unsafe {
            (
                _mm512_loadu_si512(self.pow.as_ptr().add(at).cast()),
                _mm512_loadu_si512(self.mid.as_ptr().add(at).cast()),
            )
        }
    }
}

/// Reverses the bytes of each 128-bit lane (GCM blocks are big-endian).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) fn bswap(x: __m512i) -> __m512i {
    let m = _mm512_broadcast_i32x4(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ));
    _mm512_shuffle_epi8(x, m)
}

/// Multiplies the four blocks `x` (byte-swapped) by table entries `at..at + 4` and adds the
/// three Karatsuba partial products (low, high, middle) to `acc`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
pub(crate) fn mul_add(key: &Key, at: usize, x: __m512i, acc: &mut [__m512i; 3]) {
    let [lo, hi, mid] = products(key, at, x);
    acc[0] = _mm512_xor_si512(acc[0], lo);
    acc[1] = _mm512_xor_si512(acc[1], hi);
    acc[2] = _mm512_xor_si512(acc[2], mid);
}

/// [`mul_add`] for two registers, `x` by entries `at..` and `z` by entries `at_z..`: each
/// accumulator takes both products in one three-way XOR, which saves the vector pipes three
/// instructions per pair (they are what the AES rounds of the GCM kernel compete with).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
pub(crate) fn mul_add2(
    key: &Key,
    at: usize,
    x: __m512i,
    at_z: usize,
    z: __m512i,
    acc: &mut [__m512i; 3],
) {
    let (p, q) = (products(key, at, x), products(key, at_z, z));
    for i in 0..3 {
        // 0x96: a ^ b ^ c.
        acc[i] = _mm512_ternarylogic_epi64::<0x96>(acc[i], p[i], q[i]);
    }
}

/// The low, high and middle Karatsuba products of the four blocks `x` and entries
/// `at..at + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn products(key: &Key, at: usize, x: __m512i) -> [__m512i; 3] {
    let (h, m) = key.powers(at);
    let xm = _mm512_xor_si512(x, _mm512_shuffle_epi32::<0x4E>(x));
    [
        _mm512_clmulepi64_epi128::<0x00>(x, h),
        _mm512_clmulepi64_epi128::<0x11>(x, h),
        _mm512_clmulepi64_epi128::<0x00>(xm, m),
    ]
}

/// Ends a group: per lane, Karatsuba's middle term is completed and split over the high and
/// low halves; the four lanes are summed and reduced once.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq")]
pub(crate) fn finish(acc: [__m512i; 3]) -> __m128i {
    let [lo, hi, mid] = acc;
    // mid ^ lo ^ hi in one instruction (0x96: three-way XOR).
    let mid = _mm512_ternarylogic_epi64::<0x96>(mid, lo, hi);
    let high = _mm512_xor_si512(hi, _mm512_bsrli_epi128::<8>(mid));
    let low = _mm512_xor_si512(lo, _mm512_bslli_epi128::<8>(mid));
    reduce(fold_lanes(high), fold_lanes(low))
}

/// The XOR of the four 128-bit lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn fold_lanes(v: __m512i) -> __m128i {
    let y = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256::<1>(y))
}

/// One full group of [`N`] blocks at `group` hashed into the state `y` (GHASH's bit order,
/// as kept in a register), and then, if given, GCM's length block `lens` (big-endian, as an
/// integer) in the same reduction. The registers that do not depend on the state go first,
/// so they overlap with the previous group's reduction.
///
/// # Safety
/// The CPU features of this GHASH (module doc); `group` points to `16 * N`
/// readable bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq")]
pub(crate) unsafe fn hash_group(
    key: &Key,
    y: __m128i,
    group: *const u8,
    lens: Option<u128>,
) -> __m128i {
    // SAFETY: register `j < 8` is inside the group (caller); unaligned load.
    let load = |j: usize| unsafe { _mm512_loadu_si512(group.add(64 * j).cast()) };
    let at = first_power(lens.is_some(), false);
    let mut acc = [_mm512_setzero_si512(); 3];
    if let Some(l) = lens {
        add_lengths(key, l, &mut acc);
    }
    for j in [1, 3, 5] {
        let (a, b) = (bswap(load(j)), bswap(load(j + 1)));
        mul_add2(key, at + 4 * j, a, at + 4 * j + 4, b, &mut acc);
    }
    let x = _mm512_xor_si512(bswap(load(0)), _mm512_zextsi128_si512(y));
    mul_add2(key, at + 28, bswap(load(7)), at, x, &mut acc);
    finish(acc)
}

/// Adds GCM's length block `lens` times `H` to the accumulators of a group multiplied from
/// `first_power(true, _)`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq")]
pub(crate) fn add_lengths(key: &Key, lens: u128, acc: &mut [__m512i; 3]) {
    let l = to_xmm(lens);
    // Entry 2N is H^1; the three after it are zero, as are the upper lanes of `l`.
    mul_add(key, 2 * N, _mm512_zextsi128_si512(l), acc);
}

#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq")]
fn update_zmm(key: &Key, y: &mut u128, blocks: &[u8]) {
    let mut y_acc = to_xmm(*y);
    let mut groups = blocks.chunks_exact(16 * N);
    for group in &mut groups {
        // SAFETY: `group` is 16 * N readable bytes.
        y_acc = unsafe { hash_group(key, y_acc, group.as_ptr(), None) };
    }
    // The last, shorter group (n < N blocks) uses the last n powers; its last
    // register is loaded with a byte mask (zero past the end).
    let rest = groups.remainder();
    if !rest.is_empty() {
        let n = rest.len() / 16;
        let mut acc = [_mm512_setzero_si512(); 3];
        for i in (0..n).step_by(4) {
            let bytes = (rest.len() - 16 * i).min(64);
            let mask = u64::MAX >> (64 - bytes);
            // SAFETY: the mask selects only the `bytes` bytes from `16 * i`, which are
            // inside `rest`; masked-off bytes are not accessed.
            let raw = unsafe { _mm512_maskz_loadu_epi8(mask, rest.as_ptr().add(16 * i).cast()) };
            let mut x = bswap(raw);
            if i == 0 {
                x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y_acc));
            }
            mul_add(key, first_power(false, false) + N - n + i, x, &mut acc);
        }
        y_acc = finish(acc);
    }
    store_xmm(y, y_acc);
}
