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
//! VPCLMULQDQ (1 per 2 cycles: 52 cycles), and some 85 other vector instructions (XORs,
//! byte swaps, Karatsuba shuffles, counters, lane folds). The multiplier occupies one of the
//! two non-AES pipes and byte shuffles also issue on an AES pipe, so those other
//! instructions are what keeps the step above 60 cycles. The zmm kernel does better where
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
use crate::aes_core::x86::vaes::{Keys, GROUP};
use crate::aes_core::{expand_key, Backend};
use crate::gcm::pair::with_hash_key;
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
    let state = (to_xmm(*y), *ctr, [_mm256_setzero_si256(); 3]);
    let mut run = Run::new::<GROUP>((k, g), (src, dst), DEC, state);
    // One monomorphised loop per key size: the rounds unroll into straight-line code.
    match k.rounds() {
        10 => run.groups::<DEC, 10>(groups),
        12 => run.groups::<DEC, 12>(groups),
        _ => run.groups::<DEC, 14>(groups),
    }
    *ctr = run.ctr;
    if let Some(l) = lens {
        run.h = mul_h(g, _mm_xor_si128(run.h, to_xmm(l)));
    }
    glue::finish(&mut run.h, y, j0, lens);
}

/// One call of this kernel: the counter of the next group, and the sums of a run of `FAR`
/// steps before its reduction.
type Run<'a> = glue::Call<'a, Keys, GhashKey, u128, [__m256i; 3]>;

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
    ctr: &mut u128,
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
    let mut v = counters(*ctr);
    *ctr = ctr.wrapping_add(16);
    let first = k.key::<false>(0);
    for r in v.iter_mut() {
        *r = _mm256_xor_si256(*r, first);
    }
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
