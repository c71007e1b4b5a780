//! SHA-256 and SHA-1 on 16 lanes of AVX-512: one independent message per 32-bit lane of
//! the zmm registers (multi-buffer hashing).
//!
//! # Design
//! Target: x86-64 CPUs with AVX-512F and AVX-512BW and the OS saving the AVX-512 state
//! (Intel since Skylake-SP, AMD since Zen 4). Tuned for Zen 4/5, where the 512-bit integer
//! operations used here (add, rotate, three-input logic, shuffles) issue at several per
//! cycle.
//!
//! Throughput model: a SHA-256 round is about 6 rotates, 4 `vpternlogd` (the two Σ XORs,
//! Ch, Maj) and 7 adds for all 16 lanes at once, plus 11 operations of message schedule for
//! 48 of the 64 rounds: ~1650 operations per 16 blocks, with no instruction whose latency
//! binds (each round depends on the previous one through ~5 operations, and the two halves
//! of the round run in parallel). SHA-1 is ~800 operations per 16 blocks (80 rounds of
//! `vprold` twice, one `vpternlogd` for the round function, four adds; the schedule is
//! one `vpternlogd`, one XOR and one rotate).
//!
//! Register budget (32 zmm): 8 state registers (one per word, 16 lanes each), 16 for the
//! message schedule (word `t` of every lane), the rest for temporaries and the saved
//! state; nothing spills.
//!
//! Data layout: states and constructed blocks arrive word-major
//! ([`super::super::lanes`]), which is this kernel's own layout: a row of 16 lanes is one
//! zmm load. Message blocks from the caller are loaded one lane per register (64 bytes),
//! byte-swapped (`vpshufb`, AVX-512BW) and transposed 16x16 (two unpack stages and two
//! 128-bit shuffle stages, 64 operations, ~5% of the rounds). Lanes with fewer blocks read
//! a zero block and are masked out of the feed-forward (`vpaddd` under a mask), so units
//! of different lengths share a call.
//!
//! Left out: an 8-lane AVX2 variant. Without AVX-512 the `shani` backend is chosen where
//! the CPU has SHA-NI (every Zen, Intel since Ice Lake and the Atom cores); only Intel
//! client cores from Haswell to Comet Lake have AVX2 and neither, and run `soft` (about
//! half the speed such a variant would give them). AVX-512 together with SHA-NI in one loop
//! was measured slower than AVX-512 alone (docs/PERFORMANCE.md).
//!
//! Calling contract: the `unsafe fn`s need AVX-512F and AVX-512BW; an [`Avx512`] value
//! exists only when [`Avx512::new`] found them, which makes its safe trait methods sound.
//! Every pointer read is inside a slice of the stated length.

#![allow(unsafe_code)]

use crate::cpu;
use crate::mac::lanes::{Lanes, Words, K256, MAX_LANES};
use core::arch::x86_64::*;

/// 16 lanes of SHA-256 and SHA-1 on AVX-512. Exists only on a CPU that runs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// The kernels, when this CPU and OS run AVX-512F and AVX-512BW.
    pub(crate) fn new() -> Option<Self> {
        let f = cpu::features();
        (f.avx512f && f.avx512bw && f.os_zmm).then_some(Avx512(()))
    }
}

/// Lanes per call: 32-bit lanes of a zmm register.
const L: usize = 16;

/// An all-zero block, read by lanes that have no block at this step.
static ZERO_BLOCK: [u8; 64] = [0; 64];

/// Implements [`Lanes`] for [`Avx512`], for each hash given as `W => type`.
macro_rules! lanes {
    ($($w:literal => $hash:ty),*) => {$(
        impl Lanes<$w> for Avx512 {
            fn lanes(&self) -> usize {
                L
            }

            fn compress_bytes(&self, s: &mut [[u32; MAX_LANES]; $w], data: &[&[u8]]) {
                assert!(data.len() <= L && data.iter().all(|d| d.len() % 64 == 0));
                // SAFETY: an `Avx512` exists only when the CPU runs avx512f/bw (`new`);
                // the slices are checked above to be whole blocks, and at most 16 lanes.
                unsafe { bytes::<$w, $hash>(s, data) }
            }

            fn compress_words(&self, s: &mut [[u32; MAX_LANES]; $w], w: &Words, n: usize) {
                assert!(n <= L);
                // SAFETY: as in `compress_bytes`; the rows are read as whole arrays.
                unsafe { words::<$w, $hash>(s, w, n) }
            }
        }
    )*};
}
lanes!(8 => Sha256, 5 => Sha1);

/// A compression function of `W` state words.
trait Compress<const W: usize> {
    /// One block per lane (message words `w`) into the state `st`, feed-forward included,
    /// for the lanes of `k` only.
    ///
    /// # Safety
    /// Needs avx512f/bw.
    unsafe fn block(st: &mut [__m512i; W], w: [__m512i; 16], k: __mmask16);
}

/// SHA-256's compression function.
struct Sha256;

/// SHA-1's compression function.
struct Sha1;

impl Compress<8> for Sha256 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn block(st: &mut [__m512i; 8], w: [__m512i; 16], k: __mmask16) {
        sha256_block(st, w, k)
    }
}

impl Compress<5> for Sha1 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn block(st: &mut [__m512i; 5], w: [__m512i; 16], k: __mmask16) {
        sha1_block(st, w, k)
    }
}

/// Loads the rows of a word-major state.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn load_rows<const W: usize>(s: &[[u32; MAX_LANES]; W]) -> [__m512i; W] {
    // SAFETY: each row is 16 u32 = 64 readable bytes.
    core::array::from_fn(|w| unsafe { _mm512_loadu_si512(s[w].as_ptr().cast()) })
}

/// Stores the rows of a word-major state.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn store_rows<const W: usize>(s: &mut [[u32; MAX_LANES]; W], v: &[__m512i; W]) {
    for w in 0..W {
        // SAFETY: each row is 16 u32 = 64 writable bytes.
        unsafe { _mm512_storeu_si512(s[w].as_mut_ptr().cast(), v[w]) }
    }
}

/// # Safety
/// Needs avx512f/bw; `data` has at most 16 lanes of whole 64-byte blocks.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn bytes<const W: usize, H: Compress<W>>(s: &mut [[u32; MAX_LANES]; W], data: &[&[u8]]) {
    let mut st = load_rows(s);
    let blocks = data.iter().map(|d| d.len() / 64).max().unwrap_or(0);
    for j in 0..blocks {
        let mut k: __mmask16 = 0;
        let ptrs: [*const u8; L] = core::array::from_fn(|l| match data.get(l) {
            Some(d) if d.len() / 64 > j => {
                k |= 1 << l;
                d[64 * j..].as_ptr()
            }
            _ => ZERO_BLOCK.as_ptr(),
        });
        // SAFETY: every pointer starts 64 readable bytes (a block of a lane, or the zero
        // block).
        let w = unsafe { transpose(&ptrs) };
        // SAFETY: this function has the features `block` needs.
        unsafe { H::block(&mut st, w, k) };
    }
    store_rows(s, &st);
}

/// # Safety
/// Needs avx512f/bw; `n <= 16`.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn words<const W: usize, H: Compress<W>>(
    s: &mut [[u32; MAX_LANES]; W],
    w: &Words,
    n: usize,
) {
    let mut st = load_rows(s);
    // SAFETY: each row of `w` is 16 u32 = 64 readable bytes.
    let m = core::array::from_fn(|t| unsafe { _mm512_loadu_si512(w[t].as_ptr().cast()) });
    let k = ((1u32 << n) - 1) as __mmask16;
    // SAFETY: this function has the features `block` needs.
    unsafe { H::block(&mut st, m, k) };
    store_rows(s, &st);
}

/// The message words of 16 lanes' blocks at `ptrs` (big-endian words), word-major: one
/// load per lane, a byte swap, then a 16x16 transpose of 32-bit words.
///
/// # Safety
/// Every pointer must be valid for reading 64 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn transpose(ptrs: &[*const u8; L]) -> [__m512i; 16] {
    let swap = _mm512_broadcast_i32x4(_mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203));
    // SAFETY: the caller gives 64 readable bytes at every pointer.
    let r: [__m512i; 16] = core::array::from_fn(|l| {
        _mm512_shuffle_epi8(unsafe { _mm512_loadu_si512(ptrs[l].cast()) }, swap)
    });
    // a[2k], a[2k+1]: rows 2k and 2k+1 interleaved by words (low and high pairs of every
    // 128-bit chunk).
    let a: [__m512i; 16] = core::array::from_fn(|i| {
        let (x, y) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_epi32(x, y)
        } else {
            _mm512_unpackhi_epi32(x, y)
        }
    });
    // b[4k + m], chunk c: word 4c + m of rows 4k..4k+3.
    let b: [__m512i; 16] = core::array::from_fn(|i| {
        let (base, m) = (i & !3, i & 3);
        let (x, y) = (a[base + (m >> 1)], a[base + 2 + (m >> 1)]);
        if m % 2 == 0 {
            _mm512_unpacklo_epi64(x, y)
        } else {
            _mm512_unpackhi_epi64(x, y)
        }
    });
    // A 4x4 transpose of 128-bit chunks for every m: word 4c + m of all 16 rows.
    let mut out = [_mm512_setzero_si512(); 16];
    for m in 0..4 {
        let x0 = _mm512_shuffle_i32x4::<0x44>(b[m], b[4 + m]);
        let x1 = _mm512_shuffle_i32x4::<0xee>(b[m], b[4 + m]);
        let x2 = _mm512_shuffle_i32x4::<0x44>(b[8 + m], b[12 + m]);
        let x3 = _mm512_shuffle_i32x4::<0xee>(b[8 + m], b[12 + m]);
        out[m] = _mm512_shuffle_i32x4::<0x88>(x0, x2);
        out[4 + m] = _mm512_shuffle_i32x4::<0xdd>(x0, x2);
        out[8 + m] = _mm512_shuffle_i32x4::<0x88>(x1, x3);
        out[12 + m] = _mm512_shuffle_i32x4::<0xdd>(x1, x3);
    }
    out
}

// ---- SHA-256 ----

/// `x ^ y ^ z`.
#[inline]
#[target_feature(enable = "avx512f")]
fn xor3(x: __m512i, y: __m512i, z: __m512i) -> __m512i {
    _mm512_ternarylogic_epi32::<0x96>(x, y, z)
}

/// One SHA-256 round `t`: the roles a..h rotate through the slots of `s`, role `r` at slot
/// `(r + 8 - t % 8) % 8`, so that no register is moved.
#[inline]
#[target_feature(enable = "avx512f")]
fn round256(s: &mut [__m512i; 8], t: usize, w: __m512i) {
    let slot = |r: usize| (r + 8 - t % 8) % 8;
    let (a, b, c, e, f, g, h) = (
        s[slot(0)],
        s[slot(1)],
        s[slot(2)],
        s[slot(4)],
        s[slot(5)],
        s[slot(6)],
        s[slot(7)],
    );
    let big_s1 = xor3(
        _mm512_ror_epi32::<6>(e),
        _mm512_ror_epi32::<11>(e),
        _mm512_ror_epi32::<25>(e),
    );
    let ch = _mm512_ternarylogic_epi32::<0xca>(e, f, g);
    let kw = _mm512_add_epi32(w, _mm512_set1_epi32(K256[t] as i32));
    let t1 = _mm512_add_epi32(_mm512_add_epi32(h, big_s1), _mm512_add_epi32(ch, kw));
    let big_s0 = xor3(
        _mm512_ror_epi32::<2>(a),
        _mm512_ror_epi32::<13>(a),
        _mm512_ror_epi32::<22>(a),
    );
    let maj = _mm512_ternarylogic_epi32::<0xe8>(a, b, c);
    s[slot(3)] = _mm512_add_epi32(s[slot(3)], t1);
    s[slot(7)] = _mm512_add_epi32(t1, _mm512_add_epi32(big_s0, maj));
}

/// Extends the SHA-256 message schedule to word `t` (16 <= t < 64), kept in `w[t % 16]`.
#[inline]
#[target_feature(enable = "avx512f")]
fn schedule256(w: &mut [__m512i; 16], t: usize) {
    let (w2, w7, w15, w16) = (
        w[(t - 2) % 16],
        w[(t - 7) % 16],
        w[(t - 15) % 16],
        w[t % 16],
    );
    let s0 = xor3(
        _mm512_ror_epi32::<7>(w15),
        _mm512_ror_epi32::<18>(w15),
        _mm512_srli_epi32::<3>(w15),
    );
    let s1 = xor3(
        _mm512_ror_epi32::<17>(w2),
        _mm512_ror_epi32::<19>(w2),
        _mm512_srli_epi32::<10>(w2),
    );
    w[t % 16] = _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(w7, w16));
}

/// The body of a block function: `$round(state, t, w)` for `t` in `0..$rounds` (64 or
/// 80; extending the schedule first from 16), then the feed-forward into `$st` in the
/// lanes of `$k`. The number of rounds is a multiple of the state's words, so every role
/// ends in its own slot.
macro_rules! block {
    ($st:ident, $w:ident, $k:ident, $round:ident, $schedule:ident, $rounds:literal) => {
        block!(@list $st, $w, $k, $round, $schedule, $rounds, [
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56
            57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
        ])
    };
    (@list $st:ident, $w:ident, $k:ident, $round:ident, $schedule:ident, $rounds:literal,
        [$($t:literal)*]) => {
        let mut s = *$st;
        $(
            // (Constant conditions: the rounds past `$rounds` compile to nothing.)
            if $t < $rounds {
                if $t >= 16 {
                    $schedule(&mut $w, $t);
                }
                $round(&mut s, $t, $w[$t % 16]);
            }
        )*
        for (st, s) in $st.iter_mut().zip(s) {
            *st = _mm512_mask_add_epi32(*st, $k, *st, s);
        }
    };
}

/// One block per lane: the 64 rounds, and the feed-forward in the lanes of `k`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn sha256_block(st: &mut [__m512i; 8], mut w: [__m512i; 16], k: __mmask16) {
    block!(st, w, k, round256, schedule256, 64);
}

// ---- SHA-1 ----

/// SHA-1's round constants, by group of 20 rounds (FIPS 180-4 section 4.2.1).
const K160: [u32; 4] = [0x5a82_7999, 0x6ed9_eba1, 0x8f1b_bcdc, 0xca62_c1d6];

/// One SHA-1 round `t`: role `r` (a..e) at slot `(r + 80 - t) % 5`; the new a goes into
/// e's slot, b is rotated in place (it becomes c).
#[inline]
#[target_feature(enable = "avx512f")]
fn round160(s: &mut [__m512i; 5], t: usize, w: __m512i) {
    let slot = |r: usize| (r + 80 - t) % 5;
    let (a, b, c, d, e) = (s[slot(0)], s[slot(1)], s[slot(2)], s[slot(3)], s[slot(4)]);
    let f = match t / 20 {
        0 => _mm512_ternarylogic_epi32::<0xca>(b, c, d),
        2 => _mm512_ternarylogic_epi32::<0xe8>(b, c, d),
        _ => xor3(b, c, d),
    };
    let kw = _mm512_add_epi32(w, _mm512_set1_epi32(K160[t / 20] as i32));
    let x = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_rol_epi32::<5>(a), f),
        _mm512_add_epi32(e, kw),
    );
    s[slot(1)] = _mm512_rol_epi32::<30>(b);
    s[slot(4)] = x;
}

/// Extends the SHA-1 message schedule to word `t` (16 <= t < 80), kept in `w[t % 16]`.
#[inline]
#[target_feature(enable = "avx512f")]
fn schedule160(w: &mut [__m512i; 16], t: usize) {
    let x = xor3(w[(t - 3) % 16], w[(t - 8) % 16], w[(t - 14) % 16]);
    w[t % 16] = _mm512_rol_epi32::<1>(_mm512_xor_si512(x, w[t % 16]));
}

/// One block per lane: the 80 rounds, and the feed-forward in the lanes of `k`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn sha1_block(st: &mut [__m512i; 5], mut w: [__m512i; 16], k: __mmask16) {
    block!(st, w, k, round160, schedule160, 80);
}
