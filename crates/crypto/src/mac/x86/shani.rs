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

/// The two registers of one lane's state: (ABEF, CDGH) for SHA-256, (ABCD, E) for SHA-1.
type Regs = (__m128i, __m128i);

/// The per-hash parts of the kernels, around which [`bytes`] and [`words`] are written
/// once.
trait ShaNi<const W: usize> {
    /// Lane `l` of `s` in the hash's register order.
    ///
    /// # Safety
    /// Needs sha and sse4.1 (as every method here).
    unsafe fn load(s: &[[u32; MAX_LANES]; W], l: usize) -> Regs;
    /// Stores a lane's registers into lane `l` of `s`.
    unsafe fn store(s: &mut [[u32; MAX_LANES]; W], l: usize, r: Regs);
    /// The message words of the block at `p` (64 readable bytes), in the hash's order.
    unsafe fn load_block(p: *const u8) -> [__m128i; 4];
    /// The message words `w[..][l]`, in the hash's order.
    unsafe fn words_block(w: &Words, l: usize) -> [__m128i; 4];
    /// One block per lane, rounds and feed-forward.
    unsafe fn block<const N: usize>(r: &mut [Regs; N], m: [[__m128i; 4]; N]);
}

/// SHA-256 on SHA-NI.
struct Sha256;

/// SHA-1 on SHA-NI.
struct Sha1;

/// Implements [`Lanes`] for every `Shani<N>`, for each hash given as `W => type`.
macro_rules! lanes {
    ($($w:literal => $hash:ty),*) => {$(
        impl<const N: usize> Lanes<$w> for Shani<N> {
            fn lanes(&self) -> usize {
                N
            }

            fn compress_bytes(&self, s: &mut [[u32; MAX_LANES]; $w], data: &[&[u8]]) {
                assert!(data.len() <= N && data.iter().all(|d| d.len() % 64 == 0));
                // SAFETY: a `Shani` exists only when the CPU has sha and sse4.1 (`new`);
                // the slices are checked above to be whole blocks, and at most N lanes.
                unsafe { bytes::<$w, $hash, N>(s, data) }
            }

            fn compress_words(&self, s: &mut [[u32; MAX_LANES]; $w], w: &Words, n: usize) {
                assert!(n <= N);
                // SAFETY: as in `compress_bytes`; no pointers are read.
                unsafe { words::<$w, $hash, N>(s, w, n) }
            }
        }
    )*};
}
lanes!(8 => Sha256, 5 => Sha1);

/// # Safety
/// Needs sha and sse4.1; `data` has at most `N` lanes of whole 64-byte blocks.
#[target_feature(enable = "sha,sse4.1")]
unsafe fn bytes<const W: usize, H: ShaNi<W>, const N: usize>(
    s: &mut [[u32; MAX_LANES]; W],
    data: &[&[u8]],
) {
    let zero = _mm_setzero_si128();
    let mut r = [(zero, zero); N];
    for (l, reg) in r.iter_mut().enumerate().take(data.len()) {
        // SAFETY: this function has the features of `load`.
        *reg = unsafe { H::load(s, l) };
    }
    let blocks = data.iter().map(|d| d.len() / 64).max().unwrap_or(0);
    for j in 0..blocks {
        let saved = r;
        // SAFETY: lane l reads block j of data[l] when it has one, else the zero block;
        // both are 64 readable bytes.
        let m: [[__m128i; 4]; N] = core::array::from_fn(|l| unsafe {
            match data.get(l) {
                Some(d) if d.len() / 64 > j => H::load_block(d.as_ptr().add(64 * j)),
                _ => H::load_block(ZERO_BLOCK.as_ptr()),
            }
        });
        // SAFETY: this function has the features of `block`.
        unsafe { H::block(&mut r, m) };
        for l in 0..N {
            if data.get(l).is_none_or(|d| d.len() / 64 <= j) {
                r[l] = saved[l];
            }
        }
    }
    for (l, reg) in r.iter().enumerate().take(data.len()) {
        // SAFETY: this function has the features of `store`.
        unsafe { H::store(s, l, *reg) };
    }
}

/// # Safety
/// Needs sha and sse4.1; `n <= N`.
#[target_feature(enable = "sha,sse4.1")]
unsafe fn words<const W: usize, H: ShaNi<W>, const N: usize>(
    s: &mut [[u32; MAX_LANES]; W],
    w: &Words,
    n: usize,
) {
    let zero = _mm_setzero_si128();
    let mut r = [(zero, zero); N];
    for (l, reg) in r.iter_mut().enumerate().take(n) {
        // SAFETY: this function has the features of `load`.
        *reg = unsafe { H::load(s, l) };
    }
    // SAFETY: this function has the features of `words_block`; `l % MAX_LANES` is a lane
    // of `w`.
    let m: [[__m128i; 4]; N] =
        core::array::from_fn(|l| unsafe { H::words_block(w, l % MAX_LANES) });
    // SAFETY: this function has the features of `block`.
    unsafe { H::block(&mut r, m) };
    for (l, reg) in r.iter().enumerate().take(n) {
        // SAFETY: this function has the features of `store`.
        unsafe { H::store(s, l, *reg) };
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

impl ShaNi<8> for Sha256 {
    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn load(s: &State256, l: usize) -> Regs {
        load256(s, l)
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn store(s: &mut State256, l: usize, (abef, cdgh): Regs) {
        store256(s, l, abef, cdgh)
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn load_block(p: *const u8) -> [__m128i; 4] {
        // SAFETY: the caller gives 64 readable bytes.
        unsafe { load_block256(p) }
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn words_block(w: &Words, l: usize) -> [__m128i; 4] {
        core::array::from_fn(|i| {
            let x = |t: usize| w[4 * i + t][l] as i32;
            _mm_set_epi32(x(3), x(2), x(1), x(0))
        })
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn block<const N: usize>(r: &mut [Regs; N], m: [[__m128i; 4]; N]) {
        let mut abef = r.map(|x| x.0);
        let mut cdgh = r.map(|x| x.1);
        block256(&mut abef, &mut cdgh, m);
        *r = core::array::from_fn(|l| (abef[l], cdgh[l]));
    }
}

impl ShaNi<5> for Sha1 {
    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn load(s: &State160, l: usize) -> Regs {
        load160(s, l)
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn store(s: &mut State160, l: usize, (abcd, e): Regs) {
        store160(s, l, abcd, e)
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn load_block(p: *const u8) -> [__m128i; 4] {
        // SAFETY: the caller gives 64 readable bytes.
        unsafe { load_block160(p) }
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn words_block(w: &Words, l: usize) -> [__m128i; 4] {
        core::array::from_fn(|i| {
            let x = |t: usize| w[4 * i + t][l] as i32;
            _mm_set_epi32(x(0), x(1), x(2), x(3))
        })
    }

    #[inline]
    #[target_feature(enable = "sha,sse4.1")]
    unsafe fn block<const N: usize>(r: &mut [Regs; N], m: [[__m128i; 4]; N]) {
        let mut abcd = r.map(|x| x.0);
        let mut e = r.map(|x| x.1);
        block160(&mut abcd, &mut e, m);
        *r = core::array::from_fn(|l| (abcd[l], e[l]));
    }
}
