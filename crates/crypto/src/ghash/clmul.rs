//! GHASH with PCLMULQDQ on xmm registers (GCM pairs it with the `aesni` AES backend).
//!
//! Targets every x86-64 CPU with PCLMULQDQ and SSE4.1 (Westmere and later, every AMD since
//! Bulldozer). Tuned for long runs of blocks: groups of [`N`] = 8 blocks are multiplied by
//! `H^8..H^1` with Karatsuba (3 PCLMULQDQ per block: low halves, high halves, and the XOR
//! of the halves against a precomputed `h_lo ^ h_hi`), the unreduced 256-bit products are
//! summed in three accumulators, and one reduction per group (2 PCLMULQDQ by 0xC2 << 56)
//! brings the sum back to 128 bits. A shorter last group uses the last entries of the same
//! table, so there is no separate one-block loop. The 8 independent products per group keep
//! the multiplier busy; the only serial dependency is the state `Y` from one group to the
//! next.
//!
//! Register roles in [`update_pclmul`]: `y` the state, `lo`/`hi`/`mid` the Karatsuba
//! accumulators, `bswap` the byte-reversal shuffle (blocks are big-endian, see
//! [`super`]), `poly` the reduction constant.
//!
//! Calling contract: a [`Key`] is built only after the CPU check of `GhashBackend::Clmul`
//! (pclmulqdq, sse4.1) succeeded; that is what makes its safe `update` sound.

#![allow(unsafe_code)]

use core::arch::x86_64::*;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Blocks per reduction.
pub(super) const N: usize = 8;

/// `H^8..H^1` (twisted, reflected) and for each `lo ^ hi` of its two halves in both halves.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct Key {
    pow: [u128; N],
    mid: [u128; N],
}

impl Key {
    /// `pow` = `[H^N, ..., H^1]` twisted. Only call after the CPU check (module doc).
    pub(super) fn new(pow: &[u128; N]) -> Key {
        let mid = pow.map(|p| {
            let m = (p as u64 ^ (p >> 64) as u64) as u128;
            m | (m << 64)
        });
        Key { pow: *pow, mid }
    }

    pub(crate) fn update(&self, y: &mut u128, blocks: &[u8]) {
        // SAFETY: a Key exists only after the CPU check for pclmulqdq and sse4.1 (module
        // doc), which are the features `update_pclmul` is compiled for.
        unsafe { update_pclmul(self, y, blocks) }
    }
}

/// Reduces the 256-bit reflected product `high:low` (see `super::soft::reduce` for the
/// algebra): the low 64-bit lane `X0` is folded up by 64 bits as
/// `X0 * (x^64-shift + 0xC2 << 56)`, which is a lane swap plus one carry-less
/// multiplication, then the new low lane the same way.
///
/// Shared by the ymm and zmm GHASH, which reduce their lane sums on xmm.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.1")]
pub(crate) fn reduce(high: __m128i, low: __m128i) -> __m128i {
    let poly = _mm_set_epi64x(0, 0xC200_0000_0000_0000_u64 as i64);
    let t = _mm_clmulepi64_si128::<0x00>(low, poly);
    let v = _mm_xor_si128(_mm_shuffle_epi32::<0x4E>(low), t);
    let t2 = _mm_clmulepi64_si128::<0x00>(v, poly);
    let w = _mm_xor_si128(_mm_shuffle_epi32::<0x4E>(v), t2);
    _mm_xor_si128(high, w)
}

/// The state `y` as kept in a register (GHASH's bit order: the integer's low half in the
/// low lane).
#[inline(always)]
pub(crate) fn to_xmm(y: u128) -> __m128i {
    // SAFETY: SSE2 is the x86-64 baseline.
    unsafe { _mm_set_epi64x((y >> 64) as i64, y as i64) }
}

/// Stores the state kept in the register `x` into the integer `y` (the inverse of
/// [`to_xmm`]), straight from the register: no copy on the stack.
#[inline(always)]
pub(crate) fn store_xmm(y: &mut u128, x: __m128i) {
    // SAFETY: a u128 is 16 writable bytes, stored little-endian on x86-64, which is the
    // order of `to_xmm`'s lanes; unaligned store (SSE2, the x86-64 baseline).
    unsafe { _mm_storeu_si128((y as *mut u128).cast(), x) };
}

/// Byte reversal of a block (GCM's blocks are big-endian).
#[inline]
#[target_feature(enable = "ssse3")]
pub(crate) fn bswap_xmm(x: __m128i) -> __m128i {
    _mm_shuffle_epi8(
        x,
        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    )
}

#[target_feature(enable = "pclmulqdq,sse4.1")]
fn update_pclmul(key: &Key, y: &mut u128, blocks: &[u8]) {
    let mut acc = to_xmm(*y);
    for group in blocks.chunks(16 * N) {
        let n = group.len() / 16;
        let first = N - n;
        let mut lo = _mm_setzero_si128();
        let mut hi = _mm_setzero_si128();
        let mut mid = _mm_setzero_si128();
        for i in 0..n {
            // SAFETY: `16 * i + 16 <= group.len()`; unaligned load.
            let raw = unsafe { _mm_loadu_si128(group.as_ptr().add(16 * i).cast()) };
            let mut x = bswap_xmm(raw);
            if i == 0 {
                x = _mm_xor_si128(x, acc);
            }
            // SAFETY: `first + i < N`; u128 entries are 16 bytes, unaligned load.
            let (h, m) = unsafe {
                (
                    _mm_loadu_si128(key.pow.as_ptr().add(first + i).cast()),
                    _mm_loadu_si128(key.mid.as_ptr().add(first + i).cast()),
                )
            };
            lo = _mm_xor_si128(lo, _mm_clmulepi64_si128::<0x00>(x, h));
            hi = _mm_xor_si128(hi, _mm_clmulepi64_si128::<0x11>(x, h));
            let xm = _mm_xor_si128(x, _mm_shuffle_epi32::<0x4E>(x));
            mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x00>(xm, m));
        }
        // Karatsuba: the middle term is (a0^a1)(b0^b1) ^ a0b0 ^ a1b1, placed at bit 64.
        mid = _mm_xor_si128(mid, _mm_xor_si128(lo, hi));
        let high = _mm_xor_si128(hi, _mm_srli_si128::<8>(mid));
        let low = _mm_xor_si128(lo, _mm_slli_si128::<8>(mid));
        acc = reduce(high, low);
    }
    store_xmm(y, acc);
}
