//! SHA-256 and SHA-1 lanes on the SHA extensions (SHA-NI), several independent streams
//! interleaved.
//!
//! # Design
//! Target: x86-64 CPUs with the SHA extensions (AMD since Zen, Intel since Goldmont and Ice
//! Lake) and SSE4.1.
//!
//! Throughput model: one `sha256rnds2` does two rounds and the next one needs its result:
//! a single stream is bound by the latency of that chain (32 of them per block, about 3-4
//! cycles each on Zen), while the unit can start a new one every cycle or two. So `N`
//! independent blocks (lanes) are compressed side by side: every step of the round
//! function is issued for each lane in turn, and the core overlaps the chains. The message
//! schedule (`sha256msg1`/`sha256msg2`) runs on other ports, off the critical chain. The
//! same holds for SHA-1 (`sha1rnds4`, four rounds, then `sha1nexte` for the next E).
//!
//! Register budget (16 xmm): per lane two state registers (ABEF, CDGH) and four message
//! registers; with four lanes that is 24, so the compiler keeps part of the message
//! schedule on the stack (it is read once per group, off the critical chain).
//!
//! State layout: the lanes' states come word-major ([`super::super::lanes`]) and are
//! gathered into SHA-NI's ABEF/CDGH order (SHA-256) or ABCD/E (SHA-1) once per call; a
//! call compresses every block of its lanes, lanes with fewer blocks are left as they are
//! once their blocks are done.
//!
//! Calling contract: the `unsafe fn`s need `sha`, `sse4.1` (and the SSE2/SSSE3 they
//! imply); a [`Shani`] value exists only when [`Shani::new`] found them, which makes its
//! safe trait methods sound. Every pointer read is inside a slice of the stated length.

#![allow(unsafe_code)]

use crate::cpu;
use crate::mac::lanes::{Lanes, State160, State256, Words, K256, MAX_LANES};
use core::arch::x86_64::*;

/// `N` lanes of SHA-256 and SHA-1 on SHA-NI. Exists only on a CPU that has them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shani<const N: usize>(());

impl<const N: usize> Shani<N> {
    /// The kernels, when this CPU has the SHA extensions and SSE4.1.
    pub(crate) fn new() -> Option<Self> {
        let f = cpu::features();
        (f.sha && f.sse41 && N <= MAX_LANES).then_some(Shani(()))
    }
}

/// An all-zero block, read by lanes that have no block at this step (their result is
/// thrown away).
static ZERO_BLOCK: [u8; 64] = [0; 64];

impl<const N: usize> Lanes<8> for Shani<N> {
    fn lanes(&self) -> usize {
        N
    }

    fn compress_bytes(&self, s: &mut State256, data: &[&[u8]]) {
        assert!(data.len() <= N && data.iter().all(|d| d.len() % 64 == 0));
        // SAFETY: a `Shani` exists only when the CPU has sha and sse4.1 (`new`); the
        // slices are checked above to be whole blocks, and at most N lanes.
        unsafe { sha256_bytes::<N>(s, data) }
    }

    fn compress_words(&self, s: &mut State256, w: &Words, n: usize) {
        assert!(n <= N);
        // SAFETY: as in `compress_bytes`; no pointers are read.
        unsafe { sha256_words::<N>(s, w, n) }
    }
}

impl<const N: usize> Lanes<5> for Shani<N> {
    fn lanes(&self) -> usize {
        N
    }

    fn compress_bytes(&self, s: &mut State160, data: &[&[u8]]) {
        assert!(data.len() <= N && data.iter().all(|d| d.len() % 64 == 0));
        // SAFETY: as for SHA-256.
        unsafe { sha1_bytes::<N>(s, data) }
    }

    fn compress_words(&self, s: &mut State160, w: &Words, n: usize) {
        assert!(n <= N);
        // SAFETY: as for SHA-256; no pointers are read.
        unsafe { sha1_words::<N>(s, w, n) }
    }
}

// ---- SHA-256 ----

/// Lane `l` of `s` as (ABEF, CDGH).
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn load256(s: &State256, l: usize) -> (__m128i, __m128i) {
    let w = |i: usize| s[i][l] as i32;
    (
        _mm_set_epi32(w(0), w(1), w(4), w(5)),
        _mm_set_epi32(w(2), w(3), w(6), w(7)),
    )
}

/// Stores (ABEF, CDGH) into lane `l` of `s`.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn store256(s: &mut State256, l: usize, abef: __m128i, cdgh: __m128i) {
    let a: [u32; 4] = dwords(abef);
    let c: [u32; 4] = dwords(cdgh);
    let v = [a[3], a[2], c[3], c[2], a[1], a[0], c[1], c[0]];
    for (w, x) in v.into_iter().enumerate() {
        s[w][l] = x;
    }
}

/// The four dwords of `x`, element 0 first.
#[inline]
#[target_feature(enable = "sse4.1")]
fn dwords(x: __m128i) -> [u32; 4] {
    [
        _mm_extract_epi32::<0>(x) as u32,
        _mm_extract_epi32::<1>(x) as u32,
        _mm_extract_epi32::<2>(x) as u32,
        _mm_extract_epi32::<3>(x) as u32,
    ]
}

/// Loads the 16 message words of a block at `p` (four registers, word order).
///
/// # Safety
/// `p` must be valid for reading 64 bytes.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
unsafe fn load_block256(p: *const u8) -> [__m128i; 4] {
    let swap = _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203);
    // SAFETY: the caller gives 64 readable bytes; unaligned loads.
    core::array::from_fn(|i| unsafe {
        _mm_shuffle_epi8(_mm_loadu_si128(p.add(16 * i).cast()), swap)
    })
}

/// Four rounds (group `g` of 16) of every lane, after extending the message schedule.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn group256<const N: usize>(
    g: usize,
    abef: &mut [__m128i; N],
    cdgh: &mut [__m128i; N],
    m: &mut [[__m128i; 4]; N],
) {
    let k = _mm_set_epi32(
        K256[4 * g + 3] as i32,
        K256[4 * g + 2] as i32,
        K256[4 * g + 1] as i32,
        K256[4 * g] as i32,
    );
    let i = g % 4;
    for l in 0..N {
        if g >= 4 {
            let t = _mm_sha256msg1_epu32(m[l][i], m[l][(i + 1) % 4]);
            let t = _mm_add_epi32(
                t,
                _mm_alignr_epi8::<4>(m[l][(i + 3) % 4], m[l][(i + 2) % 4]),
            );
            m[l][i] = _mm_sha256msg2_epu32(t, m[l][(i + 3) % 4]);
        }
        let msg = _mm_add_epi32(m[l][i], k);
        cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], msg);
        abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l], _mm_shuffle_epi32::<0x0E>(msg));
    }
}

/// One block per lane (message words `m`), all 64 rounds and the feed-forward.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn block256<const N: usize>(
    abef: &mut [__m128i; N],
    cdgh: &mut [__m128i; N],
    mut m: [[__m128i; 4]; N],
) {
    let (a0, c0) = (*abef, *cdgh);
    // Written out so that every index is a constant after inlining.
    group256(0, abef, cdgh, &mut m);
    group256(1, abef, cdgh, &mut m);
    group256(2, abef, cdgh, &mut m);
    group256(3, abef, cdgh, &mut m);
    group256(4, abef, cdgh, &mut m);
    group256(5, abef, cdgh, &mut m);
    group256(6, abef, cdgh, &mut m);
    group256(7, abef, cdgh, &mut m);
    group256(8, abef, cdgh, &mut m);
    group256(9, abef, cdgh, &mut m);
    group256(10, abef, cdgh, &mut m);
    group256(11, abef, cdgh, &mut m);
    group256(12, abef, cdgh, &mut m);
    group256(13, abef, cdgh, &mut m);
    group256(14, abef, cdgh, &mut m);
    group256(15, abef, cdgh, &mut m);
    for l in 0..N {
        abef[l] = _mm_add_epi32(abef[l], a0[l]);
        cdgh[l] = _mm_add_epi32(cdgh[l], c0[l]);
    }
}

/// # Safety
/// Needs sha and sse4.1; `data` has at most `N` lanes of whole 64-byte blocks.
#[target_feature(enable = "sha,sse4.1")]
unsafe fn sha256_bytes<const N: usize>(s: &mut State256, data: &[&[u8]]) {
    let n = data.len();
    let mut abef = [_mm_setzero_si128(); N];
    let mut cdgh = [_mm_setzero_si128(); N];
    for l in 0..n {
        (abef[l], cdgh[l]) = load256(s, l);
    }
    let blocks = data.iter().map(|d| d.len() / 64).max().unwrap_or(0);
    for j in 0..blocks {
        let (a0, c0) = (abef, cdgh);
        // SAFETY: lane l reads block j of data[l] when it has one, else the zero block;
        // both are 64 readable bytes.
        let m: [[__m128i; 4]; N] = core::array::from_fn(|l| unsafe {
            match data.get(l) {
                Some(d) if d.len() / 64 > j => load_block256(d.as_ptr().add(64 * j)),
                _ => load_block256(ZERO_BLOCK.as_ptr()),
            }
        });
        block256(&mut abef, &mut cdgh, m);
        for l in 0..N {
            if data.get(l).is_none_or(|d| d.len() / 64 <= j) {
                (abef[l], cdgh[l]) = (a0[l], c0[l]);
            }
        }
    }
    for l in 0..n {
        store256(s, l, abef[l], cdgh[l]);
    }
}

/// # Safety
/// Needs sha and sse4.1; `n <= N`.
#[target_feature(enable = "sha,sse4.1")]
unsafe fn sha256_words<const N: usize>(s: &mut State256, w: &Words, n: usize) {
    let mut abef = [_mm_setzero_si128(); N];
    let mut cdgh = [_mm_setzero_si128(); N];
    for l in 0..n {
        (abef[l], cdgh[l]) = load256(s, l);
    }
    let m: [[__m128i; 4]; N] = core::array::from_fn(|l| {
        core::array::from_fn(|i| {
            let x = |t: usize| w[4 * i + t][l % MAX_LANES] as i32;
            _mm_set_epi32(x(3), x(2), x(1), x(0))
        })
    });
    block256(&mut abef, &mut cdgh, m);
    for l in 0..n {
        store256(s, l, abef[l], cdgh[l]);
    }
}

// ---- SHA-1 ----

/// Loads the 16 message words of a block at `p`, SHA-NI's order (first word in the top
/// element).
///
/// # Safety
/// `p` must be valid for reading 64 bytes.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
unsafe fn load_block160(p: *const u8) -> [__m128i; 4] {
    let rev = _mm_set_epi64x(0x0001_0203_0405_0607, 0x0809_0a0b_0c0d_0e0f);
    // SAFETY: the caller gives 64 readable bytes; unaligned loads.
    core::array::from_fn(|i| unsafe {
        _mm_shuffle_epi8(_mm_loadu_si128(p.add(16 * i).cast()), rev)
    })
}

/// `sha1rnds4` with the round function of group `g` (of 20).
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn rnds4(abcd: __m128i, e: __m128i, g: usize) -> __m128i {
    match g / 5 {
        0 => _mm_sha1rnds4_epu32::<0>(abcd, e),
        1 => _mm_sha1rnds4_epu32::<1>(abcd, e),
        2 => _mm_sha1rnds4_epu32::<2>(abcd, e),
        _ => _mm_sha1rnds4_epu32::<3>(abcd, e),
    }
}

/// Four rounds (group `g` of 20) of every lane; `prev` holds ABCD before the previous
/// group (from which `sha1nexte` derives E), `e0` the E of the start of the block.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn group160<const N: usize>(
    g: usize,
    abcd: &mut [__m128i; N],
    prev: &mut [__m128i; N],
    e0: &[__m128i; N],
    m: &mut [[__m128i; 4]; N],
) {
    let i = g % 4;
    for l in 0..N {
        if g >= 4 {
            let t = _mm_sha1msg1_epu32(m[l][i], m[l][(i + 1) % 4]);
            let t = _mm_xor_si128(t, m[l][(i + 2) % 4]);
            m[l][i] = _mm_sha1msg2_epu32(t, m[l][(i + 3) % 4]);
        }
        let e = if g == 0 {
            _mm_add_epi32(e0[l], m[l][0])
        } else {
            _mm_sha1nexte_epu32(prev[l], m[l][i])
        };
        prev[l] = abcd[l];
        abcd[l] = rnds4(abcd[l], e, g);
    }
}

/// One block per lane: all 80 rounds and the feed-forward.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn block160<const N: usize>(
    abcd: &mut [__m128i; N],
    e: &mut [__m128i; N],
    mut m: [[__m128i; 4]; N],
) {
    let (a0, e0) = (*abcd, *e);
    let mut prev = *abcd;
    // Written out so that every index is a constant after inlining.
    group160(0, abcd, &mut prev, &e0, &mut m);
    group160(1, abcd, &mut prev, &e0, &mut m);
    group160(2, abcd, &mut prev, &e0, &mut m);
    group160(3, abcd, &mut prev, &e0, &mut m);
    group160(4, abcd, &mut prev, &e0, &mut m);
    group160(5, abcd, &mut prev, &e0, &mut m);
    group160(6, abcd, &mut prev, &e0, &mut m);
    group160(7, abcd, &mut prev, &e0, &mut m);
    group160(8, abcd, &mut prev, &e0, &mut m);
    group160(9, abcd, &mut prev, &e0, &mut m);
    group160(10, abcd, &mut prev, &e0, &mut m);
    group160(11, abcd, &mut prev, &e0, &mut m);
    group160(12, abcd, &mut prev, &e0, &mut m);
    group160(13, abcd, &mut prev, &e0, &mut m);
    group160(14, abcd, &mut prev, &e0, &mut m);
    group160(15, abcd, &mut prev, &e0, &mut m);
    group160(16, abcd, &mut prev, &e0, &mut m);
    group160(17, abcd, &mut prev, &e0, &mut m);
    group160(18, abcd, &mut prev, &e0, &mut m);
    group160(19, abcd, &mut prev, &e0, &mut m);
    for l in 0..N {
        e[l] = _mm_sha1nexte_epu32(prev[l], e0[l]);
        abcd[l] = _mm_add_epi32(abcd[l], a0[l]);
    }
}

/// Lane `l` of `s` as (ABCD, E in the top element).
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn load160(s: &State160, l: usize) -> (__m128i, __m128i) {
    let w = |i: usize| s[i][l] as i32;
    (
        _mm_set_epi32(w(0), w(1), w(2), w(3)),
        _mm_set_epi32(w(4), 0, 0, 0),
    )
}

/// Stores (ABCD, E) into lane `l` of `s`.
#[inline]
#[target_feature(enable = "sha,sse4.1")]
fn store160(s: &mut State160, l: usize, abcd: __m128i, e: __m128i) {
    let a = dwords(abcd);
    let v = [a[3], a[2], a[1], a[0], dwords(e)[3]];
    for (w, x) in v.into_iter().enumerate() {
        s[w][l] = x;
    }
}

/// # Safety
/// Needs sha and sse4.1; `data` has at most `N` lanes of whole 64-byte blocks.
#[target_feature(enable = "sha,sse4.1")]
unsafe fn sha1_bytes<const N: usize>(s: &mut State160, data: &[&[u8]]) {
    let n = data.len();
    let mut abcd = [_mm_setzero_si128(); N];
    let mut e = [_mm_setzero_si128(); N];
    for l in 0..n {
        (abcd[l], e[l]) = load160(s, l);
    }
    let blocks = data.iter().map(|d| d.len() / 64).max().unwrap_or(0);
    for j in 0..blocks {
        let (a0, e0) = (abcd, e);
        // SAFETY: lane l reads block j of data[l] when it has one, else the zero block;
        // both are 64 readable bytes.
        let m: [[__m128i; 4]; N] = core::array::from_fn(|l| unsafe {
            match data.get(l) {
                Some(d) if d.len() / 64 > j => load_block160(d.as_ptr().add(64 * j)),
                _ => load_block160(ZERO_BLOCK.as_ptr()),
            }
        });
        block160(&mut abcd, &mut e, m);
        for l in 0..N {
            if data.get(l).is_none_or(|d| d.len() / 64 <= j) {
                (abcd[l], e[l]) = (a0[l], e0[l]);
            }
        }
    }
    for l in 0..n {
        store160(s, l, abcd[l], e[l]);
    }
}

/// # Safety
/// Needs sha and sse4.1; `n <= N`.
#[target_feature(enable = "sha,sse4.1")]
unsafe fn sha1_words<const N: usize>(s: &mut State160, w: &Words, n: usize) {
    let mut abcd = [_mm_setzero_si128(); N];
    let mut e = [_mm_setzero_si128(); N];
    for l in 0..n {
        (abcd[l], e[l]) = load160(s, l);
    }
    let m: [[__m128i; 4]; N] = core::array::from_fn(|l| {
        core::array::from_fn(|i| {
            let x = |t: usize| w[4 * i + t][l % MAX_LANES] as i32;
            _mm_set_epi32(x(0), x(1), x(2), x(3))
        })
    });
    block160(&mut abcd, &mut e, m);
    for l in 0..n {
        store160(s, l, abcd[l], e[l]);
    }
}
