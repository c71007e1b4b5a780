//! GCM on VAES + VPCLMULQDQ with ymm registers: CTR and GHASH stitched in one pass over
//! the data, for the `vaes` AES backend paired with the ymm GHASH ([`Pair`]).
//!
//! # Design
//! Target: CPUs with VAES and VPCLMULQDQ on ymm but not necessarily the AVX-512 state
//! (where it is there, the zmm kernel, `zmm.rs`, does better).
//!
//! The AES rounds run on the AES units and the carry-less multiplications on a separate
//! unit, and the two overlap (the `sectorcrypt bench --probe` table). Run as two passes,
//! each over a few KiB, the two halves cannot overlap: the out-of-order window (a few
//! hundred instructions) sees only one of them at a time, and the cost is the sum. Here
//! one step holds the CTR rounds of group `i` and the GHASH of an independent group (the
//! ciphertext of group `i - 1` when encrypting, of group `i` itself when decrypting), about
//! 250 instructions, so the core executes both at once.
//!
//! Layout of a step (one function per key size, `R` rounds unrolled, not inlined into the
//! loop: inlined, LLVM hoists the 15 round keys and 32 H-power loads out of the loop and
//! spills them): block pair `p` (blocks 2p, 2p + 1, multiplied by H^(16-2p), H^(15-2p)
//! with Karatsuba) after round `p` for p = 1..=7; then the remaining rounds, the last round
//! with the data XOR folded into its key, the stores; then pair 0, which needs the running
//! hash, and the reduction, whose latency chain overlaps the next step's first rounds.
//! (Pair 0 is loaded before the stores: in-place decryption overwrites it.) The hashing
//! steps go in runs of four groups that share one reduction: the first multiplies by
//! `H^64..H^49` and takes in the running hash, the next two by `H^48..H^17` and pass their
//! unreduced sums on (three ymm through memory), the last by `H^16..H^1` and reduces; a
//! remainder runs as a run of two and/or one. This removes about three quarters of the
//! reduction and lane-fold instructions per group, which is what the rounds compete with
//! (below). E_K(J0) of the message is encrypted on xmm before the first step when the
//! caller asks (one dependent chain the core runs under the first group instead of a
//! separate latency-bound call).
//!
//! What limits it: per 256-byte group, 120 AES instructions (2 per cycle: 60 cycles), 26
//! VPCLMULQDQ (1 per 2 cycles: 52 cycles), and some 75 other vector instructions (XORs,
//! byte swaps, Karatsuba shuffles, counters, lane folds). The multiplies do not take AES
//! pipe time (the probe's 16 VAESENC + 4 VPCLMULQDQ ymm cost what the 16 VAESENC cost
//! alone), but the multiplier occupies one of the two non-AES pipes and byte shuffles also
//! issue on an AES pipe, so those other instructions are what keeps the step above 60
//! cycles. Hence the counters ([`Counter::whitened`]): for the groups of a message with a
//! 12-byte IV they come already whitened from two vectors carried from step to step, one
//! XOR per register, instead of a scalar counter moved to a vector, added to and XORed
//! with the first round key (11 instructions instead of 20: +2.5-3.3% on 16 KiB, same-process
//! A/B timings). The zmm kernel does better where
//! it can run: a VPCLMULQDQ zmm multiplies four blocks for the cost of two here, and
//! VPTERNLOGQ merges the XORs.
//!
//! Tried and measured slower (the figures: docs/PERFORMANCE.md): the schoolbook middle
//! term (4 multiplications per pair, no shuffle: the multiplier becomes the bottleneck);
//! the pairs spread over all rounds or packed into the first four (LLVM then keeps the
//! round loop rolled); the next group's counters built one step ahead and passed through
//! memory; the counter block broadcast from memory instead of built in registers (a
//! store-forwarding stall on the critical path). No better: E_K(J0) under the last group's
//! GHASH instead of the first group; the lane fold done on 256 bits before extracting.
//!
//! The glue passes whole groups whose counters do not wrap GCM's 32-bit counter, so the
//! 128-bit counter arithmetic of the CTR kernel equals `inc32` here.
#![allow(unsafe_code)]

use super::glue::{self, encrypt_j0};
use crate::aes_core::x86::vaes::ctr::counters;
use crate::aes_core::x86::vaes::{Keys, GROUP, REGS};
use crate::aes_core::{expand_key, Backend};
use crate::gcm::hash_key::with_hash_key;
use crate::ghash::clmul::to_xmm;
use crate::ghash::vpclmul::{
    finish_group, hash_group, mul_add_table, mul_h, Key as GhashKey, FAR, N,
};
use crate::secret::Secret;
use crate::Error;
use core::arch::x86_64::*;

/// An AES key on the vaes kernels with its GHASH key on VPCLMULQDQ ymm: the pair the
/// stitched kernel of this file takes, and no other (see [`crate::gcm`]).
pub(crate) struct Pair {
    pub(crate) aes: Keys,
    pub(crate) ghash: Secret<GhashKey>,
}

impl Pair {
    /// The pair for `key`. The vaes backend must be usable (checked by the caller); the
    /// GHASH backend is checked here.
    pub(crate) fn new(key: &[u8]) -> Result<Pair, Error> {
        let aes = Keys::new(&expand_key(key)?, Backend::Vaes);
        let ghash = with_hash_key(&aes, GhashKey::checked)?;
        Ok(Pair { aes, ghash })
    }
}

impl glue::Stitched for Pair {
    const GROUP: usize = GROUP;
    const ANY_LENGTH: bool = false;

    unsafe fn kernel(&self, decrypt: bool, args: glue::Args<'_>) {
        let (k, g) = (&self.aes, &*self.ghash);
        // SAFETY: the two keys prove the vaes and vpclmul features; the rest is the glue's
        // contract (the caller's).
        unsafe {
            match decrypt {
                true => gcm_vaes_avx2::<true>(k, g, args),
                false => gcm_vaes_avx2::<false>(k, g, args),
            }
        }
    }
}

/// Encrypts (`DEC = false`) or decrypts `len` bytes, a multiple of [`GROUP`], with the
/// counter `*ctr` (advanced by the blocks done) and hashes the ciphertext into `*y`.
///
/// Decryption hashes group `i` (its input) while encrypting the counters of group `i`;
/// encryption hashes group `i - 1` (the output of the previous step), with a first step
/// that only encrypts and a last one that only hashes.
///
/// # Safety
/// The CPU features of the vaes backend (a `Keys` exists) and of the vpclmul GHASH (a
/// `GhashKey` exists); `src` and `dst` cover `len` bytes (equal or not overlapping); the
/// low 32 bits of `*ctr` do not wrap within `len / 16` blocks.
///
/// `j0`, if given, is encrypted in place with the same key (GCM's E_K(J0)) at the start:
/// one dependent chain of rounds on xmm that the core runs under the first group, instead
/// of a separate latency-bound call before the bulk. `lens`, if given, is GCM's length
/// block (the data ends the message): it is hashed after the data and `j0` (which must
/// then be given) comes back as the tag, GHASH ^ E_K(J0); the final GHASH leaves the
/// registers nowhere (`glue::finish`).
#[target_feature(enable = "avx2,aes,vaes,vpclmulqdq,pclmulqdq")]
unsafe fn gcm_vaes_avx2<const DEC: bool>(k: &Keys, g: &GhashKey, args: glue::Args<'_>) {
    let glue::Args(ctr, y, src, dst, len, j0, lens) = args;
    debug_assert!(len.is_multiple_of(GROUP) && GROUP == 16 * N);
    let groups = len / GROUP;
    if groups == 0 {
        return;
    }
    let mut j0 = j0;
    if let Some(b) = j0.as_deref_mut() {
        encrypt_j0(b, k.rounds(), |r| k.key128(r));
    }
    let state = (to_xmm(*y), Counter::new(*ctr), [_mm256_setzero_si256(); 3]);
    let mut run = Run::new::<GROUP>((k, g), (src, dst), DEC, state);
    // One monomorphised loop per key size: the rounds unroll into straight-line code.
    match k.rounds() {
        10 => run.groups::<DEC, 10>(groups),
        12 => run.groups::<DEC, 12>(groups),
        _ => run.groups::<DEC, 14>(groups),
    }
    *ctr = run.ctr.n;
    if let Some(l) = lens {
        run.h = mul_h(g, _mm_xor_si128(run.h, to_xmm(l)));
    }
    glue::finish(&mut run.h, y, j0, lens);
}

/// One call of this kernel: the counters of the next group, and the sums of a run of `FAR`
/// steps before its reduction.
type Run<'a> = glue::Call<'a, Keys, GhashKey, Counter, [__m256i; 3]>;

/// The counter of the next group: `n` (its first block), and, for [`Counter::whitened`],
/// `base`: `n` with its low four bits cleared, big-endian, in both lanes (public values).
#[derive(Clone, Copy)]
struct Counter {
    n: u128,
    base: __m256i,
}

/// The low byte of the first counter of a group for which [`Counter::whitened`] takes the
/// short path: its low four bits (constant within a call, groups being 16 blocks) are 2, as
/// for every message with a 12-byte IV (counters from `J0 + 1 = ...2`).
const SHORT_LOW: u8 = 2;
// Even: each register's two blocks are on the same side of the wrap of the low nibble.
const _: () = assert!(SHORT_LOW.is_multiple_of(2));

impl Counter {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(n: u128) -> Counter {
        Counter {
            n,
            base: Counter::base_of(n),
        }
    }

    /// `n` with its low four bits cleared, big-endian, in both lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn base_of(n: u128) -> __m256i {
        let be = (n & !15).to_be_bytes();
        // SAFETY: `be` is 16 readable bytes; unaligned load.
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(be.as_ptr().cast()) })
    }

    /// The group's 16 counter blocks already XORed with the first round key `k0` (AES's
    /// whitening), and the counter advanced by 16.
    ///
    /// The short path, one XOR per register: when the low byte of `n` is `h + 2` with
    /// `h <= 0xe0` a multiple of 16, counter `n + i` is `base ^ (2 + i)` in its last byte for
    /// i < 14, and `next ^ (i - 14)` for i = 14, 15, where `next = base + 16` (the last byte
    /// of each, `h` and `h + 16`, has its low four bits clear, so adding to them is XORing,
    /// and nothing carries out of the byte). So the two whitened bases `base ^ k0` and
    /// `next ^ k0` and one constant per register give all 16 blocks: 11 vector instructions
    /// against 20 for adding to a counter built from the scalar, byte swapped, and whitened
    /// (those instructions share the pipes with the AES rounds). `next` is the next
    /// group's `base`. Any other group (another low nibble: a streamed call starting
    /// elsewhere; `h = 0xf0`: once in 16 groups) takes the general [`counters`], and
    /// rebuilds `base` from the scalar.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn whitened(&mut self, k0: __m256i) -> [__m256i; REGS] {
        let low = self.n as u8;
        let n = self.n;
        self.n = n.wrapping_add(16);
        if low & 15 == SHORT_LOW && low < 0xf0 {
            let wa = _mm256_xor_si256(self.base, k0);
            let next = _mm256_add_epi64(self.base, _mm256_set_epi64x(16 << 56, 0, 16 << 56, 0));
            let wb = _mm256_xor_si256(next, k0);
            self.base = next;
            // Byte 15 of each lane (the top byte of its high quadword) gets the low four
            // bits of the counter: 2 + 2p and 3 + 2p, mod 16 for the last register.
            let byte = |i: usize| (((SHORT_LOW as usize + i) & 15) as i64) << 56;
            core::array::from_fn(|p| {
                let w = if 2 * p + 1 < 16 - SHORT_LOW as usize {
                    wa
                } else {
                    wb
                };
                _mm256_xor_si256(w, _mm256_set_epi64x(byte(2 * p + 1), 0, byte(2 * p), 0))
            })
        } else {
            // SAFETY: this function's avx2 is all `counters` needs.
            let mut v = unsafe { counters(n) };
            for r in v.iter_mut() {
                *r = _mm256_xor_si256(*r, k0);
            }
            if low & 15 == SHORT_LOW {
                self.base = Counter::base_of(self.n);
            }
            v
        }
    }
}

impl Run<'_> {
    /// Group `i` through [`step`], with the call's state taken apart into its arguments (a
    /// step reading them from this struct ran decryption slower, as on zmm).
    #[inline(always)]
    unsafe fn step<const MODE: u8, const R: usize>(&mut self, i: usize) {
        let (s, d, hashed) = self.at::<GROUP>(i);
        let (h, ctr, carry) = (&mut self.h, &mut self.ctr, &mut self.carry);
        step::<MODE, R>(self.k, self.g, s, d, hashed, h, ctr, carry);
    }

    /// The loop over `groups` whole groups for a key of `R` rounds (see [`gcm_vaes_avx2`]).
    #[inline(always)]
    unsafe fn groups<const DEC: bool, const R: usize>(&mut self, groups: usize) {
        debug_assert_eq!(self.k.rounds(), R);
        // The steps that hash: step `i` hashes group `i` (decrypting) or `i - 1`. They go
        // in runs of FAR (table FAR - 1 first, with the running hash; table 0 last, with
        // the reduction), the rest in a run of 2 and/or a single step.
        let (first, hashing) = if DEC { (0, groups) } else { (1, groups - 1) };
        let end = first + hashing;
        if !DEC {
            self.step::<NO_HASH, R>(0);
        }
        let mut i = first;
        while i + FAR <= end {
            self.step::<{ mode(3, true, false) }, R>(i);
            self.step::<{ mode(2, false, false) }, R>(i + 1);
            self.step::<{ mode(1, false, false) }, R>(i + 2);
            self.step::<{ mode(0, false, true) }, R>(i + 3);
            i += FAR;
        }
        if i + 2 <= end {
            self.step::<{ mode(1, true, false) }, R>(i);
            self.step::<{ mode(0, false, true) }, R>(i + 1);
            i += 2;
        }
        if i < end {
            self.step::<{ mode(0, true, true) }, R>(i);
        }
        if !DEC {
            self.h = hash_group(self.g, self.h, self.dst.add((groups - 1) * GROUP));
        }
    }
}

/// A step's mode: bits 0-1 the power table (`t`: H^(16t + 16)..H^(16t + 1)), bit 2 "the
/// running hash enters and the sums start from zero", bit 3 "reduce at the end", bit 4
/// "hash at all" (see [`step`]).
const fn mode(table: u8, first: bool, reduce: bool) -> u8 {
    table | (first as u8) << 2 | (reduce as u8) << 3 | 1 << 4
}
const NO_HASH: u8 = 0;

/// One group: the CTR rounds of 16 counters from `*ctr` over `s` into `d`, and (unless
/// `MODE` is `NO_HASH`) the GHASH of the 16 blocks at `hashed` into the running hash `h`:
/// pair `p` after round `p` for p = 1..=7 (they do not need the running hash), then, after
/// the last round and the stores, pair 0 (with the running hash in the first step of a run)
/// and, in the last, the reduction, whose latency chain overlaps the next step's first
/// rounds. `carry` holds the unreduced sums from one step of a run to the next.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
#[target_feature(enable = "avx2,vaes,vpclmulqdq,pclmulqdq")]
unsafe fn step<const MODE: u8, const R: usize>(
    k: &Keys,
    g: &GhashKey,
    s: *const u8,
    d: *mut u8,
    hashed: *const u8,
    h: &mut __m128i,
    ctr: &mut Counter,
    carry: &mut [__m256i; 3],
) {
    let hash = MODE & 1 << 4 != 0;
    let table = (MODE & 3) as usize;
    let first_of_run = MODE & 1 << 2 != 0;
    let reduce = MODE & 1 << 3 != 0;
    let bswap = _mm256_broadcastsi128_si256(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ));
    // SAFETY (for the closure): a hashing step's group is inside the data (caller).
    let pair = |p: usize| unsafe {
        _mm256_shuffle_epi8(_mm256_loadu_si256(hashed.add(32 * p).cast()), bswap)
    };
    let mul = |at: usize, x: __m256i, acc: &mut [__m256i; 3]| mul_add_table(g, table, at, x, acc);
    let mut v = ctr.whitened(k.key::<false>(0));
    // Pair 0 is loaded before the stores below: when decrypting in place they overwrite it.
    let p0 = if hash {
        pair(0)
    } else {
        _mm256_setzero_si256()
    };
    let mut acc = if first_of_run {
        [_mm256_setzero_si256(); 3]
    } else {
        *carry
    };
    for round in 1..N / 2 {
        let kr = k.key::<false>(round);
        for r in v.iter_mut() {
            *r = _mm256_aesenc_epi128(*r, kr);
        }
        if hash {
            mul(2 * round, pair(round), &mut acc);
        }
    }
    for round in N / 2..R {
        let kr = k.key::<false>(round);
        for r in v.iter_mut() {
            *r = _mm256_aesenc_epi128(*r, kr);
        }
    }
    let last = k.key::<false>(R);
    for (j, r) in v.iter().enumerate() {
        let data = _mm256_loadu_si256(s.add(32 * j).cast());
        let out = _mm256_aesenclast_epi128(*r, _mm256_xor_si256(data, last));
        _mm256_storeu_si256(d.add(32 * j).cast(), out);
    }
    if hash {
        let x = if first_of_run {
            _mm256_xor_si256(p0, _mm256_zextsi128_si256(*h))
        } else {
            p0
        };
        mul(0, x, &mut acc);
        if reduce {
            *h = finish_group(acc);
        } else {
            *carry = acc;
        }
    }
}
