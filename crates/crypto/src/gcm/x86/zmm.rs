//! GCM on VAES + VPCLMULQDQ with zmm registers: CTR and GHASH stitched in one pass, for
//! the `avx512` AES backend paired with the zmm GHASH ([`Pair`]).
//!
//! # Design
//! Target: CPUs with AVX-512F/BW/VL, VAES and VPCLMULQDQ and the OS saving the AVX-512
//! state (Zen 4 and later, Ice Lake and later); the only zmm code of the crate, since AES
//! alone gains nothing from zmm on the cores it targets (`aes_core/x86`).
//!
//! The same plan as the ymm kernel (`ymm.rs`), on groups of 32 blocks (8 zmm, 512 bytes):
//! a step encrypts the counters of group `i` and, between its rounds, hashes an independent
//! group (the ciphertext of group `i - 1` when encrypting, of group `i` itself when
//! decrypting): register `j` of the hashed group after round `j` for j = 1..=7, then, after
//! the last round and the stores, register 0 (which takes in the running hash) and the
//! reduction, whose latency chain overlaps the next step's first rounds. Register 0 is
//! loaded before the stores, which overwrite it when decrypting in place. Two groups share
//! one reduction (`FIRST` with powers 32 higher, then `SECOND`); a message's only group,
//! which no other group's hash can fill, is encrypted in two halves with the first half
//! hashed under the second's rounds; a shorter last group is done under byte masks.
//!
//! What changes with zmm (the probe, `sectorcrypt bench --probe`): a VAESENC zmm costs the
//! AES pipes what two ymm cost on Zen 4 and what one costs on Zen 5, a VPCLMULQDQ zmm
//! multiplies four blocks for what a ymm one costs for two (one per 2 cycles on both) and
//! issues beside the AES pipes, as do XORs and 32-bit shuffles; only the byte shuffle
//! (VPSHUFB) takes an AES pipe, for about half a cycle. Per 512-byte group of AES-256: 112
//! VAESENC (56 cycles on Zen 5), 24 VPCLMULQDQ (48 cycles), one reduction per two groups
//! and 8 byte swaps of the hashed data: the AES pipes bind, which is why the multiplies stay
//! Karatsuba (a schoolbook fourth multiply per register made the multiplier bind, and ran
//! slower). With 32 registers the 15 round keys, the 8 AES states and the 3 hash
//! accumulators all stay in registers. (What it reaches: docs/PERFORMANCE.md.) What it
//! loses: on Zen 5 the step takes about 100 cycles per group where its CTR half alone
//! takes about 69 and the zmm GHASH alone about 54, although the probe's balanced rows
//! (48 or 56 VAESENC beside 12 VPCLMULQDQ) show the two units running side by side at
//! full load; spreading the multiplies evenly over the rounds in the source changed
//! nothing, since the compiler regroups them (docs/PERFORMANCE.md, "What binds GCM").
//!
//! Counters: kept big-endian in a register (`cur`, lanes `c..c + 3`) and advanced by adding
//! to byte 15 (the top byte of each lane's last 32-bit word), which needs no byte shuffle as
//! long as that byte does not carry within the group; the groups where it would (one in
//! eight) build their counters from the scalar counter with 32-bit adds on the
//! little-endian form and a byte swap. The glue passes counters that do not wrap GCM's
//! 32-bit counter within the message.
#![allow(unsafe_code)]

use super::glue::{self, encrypt_j0};
use crate::aes_core::x86::scaffold::round_keys;
use crate::aes_core::x86::vaes;
use crate::aes_core::{expand_key, Backend};
use crate::gcm::hash_key::with_hash_key;
use crate::ghash::clmul::to_xmm;
use crate::ghash::vpclmul512::{
    add_lengths, bswap, finish, first_power, hash_group, mul_add, mul_add2, Key as GhashKey, N,
};
use crate::secret::Secret;
use crate::Error;
use core::arch::x86_64::*;

/// Bytes in one group of 8 zmm registers.
const GROUP: usize = 512;

round_keys! {
    /// The cipher's round keys broadcast to the four lanes of a zmm register (encryption
    /// only: GCM never runs the inverse cipher).
    struct ZmmKeys {
        register: __m512i,
        words: 8,
        features: "avx512f,aes",
        load: _mm512_load_si512,
        broadcast: _mm512_broadcast_i32x4,
        store: _mm512_storeu_si512,
        decryption: false,
        kernels: Backend::Avx512,
    }
}

/// An AES key on the avx512 backend with its GHASH key on VPCLMULQDQ zmm: the vaes (ymm)
/// kernels for the parts of a message outside the stitched loop, the round keys on zmm for
/// the stitched kernel of this file, which takes this pair and no other (see
/// [`crate::gcm`]).
pub(crate) struct Pair {
    pub(crate) aes: vaes::Keys,
    zmm: ZmmKeys,
    pub(crate) ghash: Secret<GhashKey>,
}

impl Pair {
    /// The pair for `key`. The avx512 backend must be usable (checked by the caller); the
    /// GHASH backend is checked here.
    pub(crate) fn new(key: &[u8]) -> Result<Pair, Error> {
        let rk = expand_key(key)?;
        let aes = vaes::Keys::new(&rk, Backend::Avx512);
        let ghash = with_hash_key(&aes, GhashKey::checked)?;
        let zmm = ZmmKeys::new(&rk, Backend::Avx512);
        Ok(Pair { aes, zmm, ghash })
    }
}

impl glue::Stitched for Pair {
    const GROUP: usize = GROUP;
    const ANY_LENGTH: bool = true;

    unsafe fn kernel(&self, decrypt: bool, args: glue::Args<'_>) {
        // SAFETY: the two keys prove the avx512 and vpclmul512 features; the rest is the
        // glue's contract (the caller's), a shorter last group allowed with `lens`, which
        // this kernel finishes with a masked group.
        unsafe { gcm_vaes_avx512(&self.zmm, &self.ghash, decrypt, args) }
    }
}

/// Encrypts or decrypts `len` bytes, a multiple of [`GROUP`], with the
/// 32-bit counter `*ctr` (advanced by the blocks done) and hashes the ciphertext into `*y`.
/// `j0`, if given, is encrypted in place (GCM's E_K(J0)) on xmm at the start, a dependent
/// chain that runs under the first group. `lens`, if given, is GCM's length block (the data
/// ends the message): it is hashed in the last group's reduction and `j0` (which must then
/// be given) comes back as the tag, GHASH ^ E_K(J0); neither E_K(J0) nor the final GHASH
/// leaves the registers on its own (`glue::finish`).
///
/// # Safety
/// The CPU features of the avx512 backend (a `ZmmKeys` and a `GhashKey` exist); `src` and
/// `dst` cover `len` bytes (equal or not overlapping); the low 32 bits of `*ctr` do not
/// wrap within `len.div_ceil(16)` blocks; `len` is whole groups unless `lens` is given
/// (the end of a message: its last, shorter group is done by [`last_group`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
unsafe fn gcm_vaes_avx512(k: &ZmmKeys, g: &GhashKey, decrypt: bool, args: glue::Args<'_>) {
    let glue::Args(ctr, y, src, dst, len, j0, lens) = args;
    debug_assert!(GROUP == 16 * N && (len.is_multiple_of(GROUP) || lens.is_some()));
    let (groups, rest) = (len / GROUP, len % GROUP);
    if len == 0 {
        return;
    }
    let mut j0 = j0;
    if let Some(b) = j0.as_deref_mut() {
        encrypt_j0(b, k.rounds(), |r| _mm512_castsi512_si128(k.key::<false>(r)));
    }
    let state = (to_xmm(*y), Counters::new(*ctr), [_mm512_setzero_si512(); 3]);
    let mut run = Run::new::<GROUP>((k, g), (src, dst), decrypt, state);
    // One monomorphised loop per key size: the rounds unroll into straight-line code.
    match (decrypt, k.rounds()) {
        (false, 10) => run.groups::<false, 10>(groups, rest, lens),
        (false, 12) => run.groups::<false, 12>(groups, rest, lens),
        (false, _) => run.groups::<false, 14>(groups, rest, lens),
        (true, 10) => run.groups::<true, 10>(groups, rest, lens),
        (true, 12) => run.groups::<true, 12>(groups, rest, lens),
        (true, _) => run.groups::<true, 14>(groups, rest, lens),
    }
    *ctr = run.ctr.scalar;
    glue::finish(&mut run.h, y, j0, lens);
}

/// One call of this kernel: its counters, and the sums a [`FIRST`] step leaves for the
/// [`SECOND`].
type Run<'a> = glue::Call<'a, ZmmKeys, GhashKey, Counters, [__m512i; 3]>;

impl Run<'_> {
    /// Group `i` through [`step`], with the call's state taken apart into its arguments
    /// (a step reading them from this struct itself ran decryption some 5% slower).
    #[inline(always)]
    unsafe fn step<const MODE: u8, const R: usize>(&mut self, i: usize, lens: Option<u128>) {
        let (s, d, hashed) = self.at::<GROUP>(i);
        let (h, c, carry) = (&mut self.h, &mut self.ctr, &mut self.carry);
        step::<MODE, R>(self.k, self.g, h, c, carry, s, d, hashed, lens);
    }

    /// The loop over `groups` whole groups for a key of `R` rounds, then the `rest` bytes
    /// of a shorter last group.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
    unsafe fn groups<const DEC: bool, const R: usize>(
        &mut self,
        groups: usize,
        rest: usize,
        lens: Option<u128>,
    ) {
        debug_assert_eq!(self.k.rounds(), R);
        // With a shorter last group, the length block goes with it.
        let (lens, tail_lens) = if rest > 0 { (None, lens) } else { (lens, None) };
        // The hashing steps go in pairs that share one reduction (`FIRST` then `SECOND`), a
        // last odd one alone (`ALONE`). Decryption hashes each step's own input;
        // encryption the previous step's output, after a first step that only encrypts
        // and before a last group hashed alone.
        if groups == 0 {
            // Only the short group.
        } else if DEC {
            let mut i = 0;
            while i + 2 <= groups {
                let l = if i + 2 == groups { lens } else { None };
                self.step::<FIRST, R>(i, l);
                self.step::<SECOND, R>(i + 1, l);
                i += 2;
            }
            if i < groups {
                self.step::<ALONE, R>(i, lens);
            }
        } else if groups == 1 {
            only_group::<R>(self, lens);
        } else {
            self.step::<NO_HASH, R>(0, None);
            let mut i = 1;
            while i + 2 <= groups {
                self.step::<FIRST, R>(i, None);
                self.step::<SECOND, R>(i + 1, None);
                i += 2;
            }
            if i < groups {
                self.step::<ALONE, R>(i, None);
            }
            let last = self.dst.add((groups - 1) * GROUP);
            self.h = hash_group(self.g, self.h, last, lens);
        }
        if rest > 0 {
            let start = self.ctr.scalar;
            last_group::<DEC, R>(self, groups, rest, tail_lens);
            // Its counters: one per (possibly partial) block.
            let blocks = rest.div_ceil(16) as u32;
            self.ctr.scalar = (start & !0xffff_ffff) | (start as u32).wrapping_add(blocks) as u128;
        }
    }
}

/// The last `bytes` (1 to `GROUP - 1`) bytes of a message, from group `i` on, not stitched
/// with anything: the counters of `bytes.div_ceil(16)` blocks in as many registers as they
/// need, loads and stores under byte masks (nothing outside the message is read or
/// written), then the hash of the blocks, the last one zero-padded as GHASH requires, and
/// the length block `lens`, all in one reduction.
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
unsafe fn last_group<const DEC: bool, const R: usize>(
    run: &mut Run<'_>,
    i: usize,
    bytes: usize,
    lens: Option<u128>,
) {
    let (k, g) = (run.k, run.g);
    let (s, d, _) = run.at::<GROUP>(i);
    debug_assert!(bytes > 0 && bytes < GROUP);
    let blocks = bytes.div_ceil(16);
    let regs = blocks.div_ceil(4);
    // Register j's bytes: 64, except in the last register.
    let mask = |j: usize| u64::MAX >> (64 - (bytes - 64 * j).min(64));
    let mut v = run.ctr.group();
    let mut data = [_mm512_setzero_si512(); 8];
    for j in 0..regs {
        // SAFETY (of the masked load): only the bytes under the mask, which are inside the
        // message, are read.
        data[j] = _mm512_maskz_loadu_epi8(mask(j), s.add(64 * j).cast());
        v[j] = _mm512_xor_si512(v[j], k.key::<false>(0));
    }
    for round in 1..R {
        for r in v.iter_mut().take(regs) {
            *r = _mm512_aesenc_epi128(*r, k.key::<false>(round));
        }
    }
    let mut hashed = [_mm512_setzero_si512(); 8];
    for j in 0..regs {
        let out = _mm512_aesenclast_epi128(v[j], _mm512_xor_si512(data[j], k.key::<false>(R)));
        // Only the message's bytes are written.
        _mm512_mask_storeu_epi8(d.add(64 * j).cast(), mask(j), out);
        // GHASH takes the ciphertext, zero past the message's end.
        hashed[j] = bswap(if DEC {
            data[j]
        } else {
            _mm512_maskz_mov_epi8(mask(j), out)
        });
    }
    // Block i is multiplied by H^(blocks - i), one higher with the length block.
    let first = first_power(lens.is_some(), false) + N - blocks;
    let mut acc = [_mm512_setzero_si512(); 3];
    hashed[0] = _mm512_xor_si512(hashed[0], _mm512_zextsi128_si512(run.h));
    for (j, x) in hashed.iter().enumerate().take(regs) {
        mul_add(g, first + 4 * j, *x, &mut acc);
    }
    if let Some(l) = lens {
        add_lengths(g, l, &mut acc);
    }
    run.h = finish(acc);
}

/// The counter blocks: `scalar` is the next counter (GCM's `inc32` arithmetic), `cur` the
/// big-endian blocks `scalar..scalar + 3`, valid while the last byte has not carried.
struct Counters {
    scalar: u128,
    cur: __m512i,
}

impl Counters {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
    unsafe fn new(c: u128) -> Counters {
        Counters {
            scalar: c,
            cur: slow::<1>(c)[0],
        }
    }

    /// The 32 counter blocks of the next group, big-endian, four per register.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
    unsafe fn group(&mut self) -> [__m512i; 8] {
        let c = self.scalar;
        // inc32 (the caller guarantees no wrap of the low 32 bits).
        self.scalar = (c & !0xffff_ffff) | (c as u32).wrapping_add(32) as u128;
        if (c as u8) <= 255 - 32 - 3 {
            // Byte 15 of every block of this group and of the next `cur` stays below 256:
            // add to it directly (it is the top byte of each lane's fourth 32-bit word).
            let mut v = [self.cur; 8];
            for (j, x) in v.iter_mut().enumerate() {
                *x = _mm512_add_epi32(*x, byte15(4 * j as i32));
            }
            self.cur = _mm512_add_epi32(self.cur, byte15(32));
            v
        } else {
            self.cur = slow::<1>(self.scalar)[0];
            slow::<8>(c)
        }
    }
}

/// `x << 24` in the fourth 32-bit word of every lane: adds `x` to byte 15 of each block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
unsafe fn byte15(x: i32) -> __m512i {
    let w = x << 24;
    _mm512_set_epi32(w, 0, 0, 0, w, 0, 0, 0, w, 0, 0, 0, w, 0, 0, 0)
}

/// The big-endian counter blocks `c..c + 4M` with `inc32` arithmetic: the little-endian
/// form, 32-bit adds on its low word, then a byte swap per register.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
unsafe fn slow<const M: usize>(c: u128) -> [__m512i; M] {
    let le = _mm512_broadcast_i32x4(to_xmm(c));
    let mut v = [le; M];
    for (j, x) in v.iter_mut().enumerate() {
        let b = 4 * j as i32;
        let inc = _mm512_set_epi32(0, 0, 0, b + 3, 0, 0, 0, b + 2, 0, 0, 0, b + 1, 0, 0, 0, b);
        *x = bswap(_mm512_add_epi32(*x, inc));
    }
    v
}

/// A step's part in the hash: none; the first of two groups reduced together (takes in the
/// running hash, powers 32 higher, leaves its sums in `carry`); the second (starts from
/// `carry`, reduces); or a group alone (takes in the running hash, reduces).
const NO_HASH: u8 = 0;
const FIRST: u8 = 1;
const SECOND: u8 = 2;
const ALONE: u8 = 3;

/// One group: the CTR rounds of the next 32 counters (`c`) over `s` into `d` and, unless
/// `MODE` is [`NO_HASH`], the GHASH of the 32 blocks at `hashed` into the running hash `h`
/// (module doc); `carry` holds the sums of a [`FIRST`] step for the [`SECOND`]. `lens`:
/// GCM's length block, hashed in this step's reduction (or, for [`FIRST`], in the next
/// step's: the powers are one higher either way).
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
#[allow(clippy::too_many_arguments)]
unsafe fn step<const MODE: u8, const R: usize>(
    k: &ZmmKeys,
    g: &GhashKey,
    h: &mut __m128i,
    c: &mut Counters,
    carry: &mut [__m512i; 3],
    s: *const u8,
    d: *mut u8,
    hashed: *const u8,
    lens: Option<u128>,
) {
    let hash = MODE != NO_HASH;
    let at = first_power(lens.is_some(), MODE == FIRST);
    let mut v = c.group();
    for r in v.iter_mut() {
        *r = _mm512_xor_si512(*r, k.key::<false>(0));
    }
    // Registers 0 and 7 are hashed after the stores below, which overwrite them when
    // decrypting in place: load them first.
    let (x0, x7) = if hash {
        (
            _mm512_loadu_si512(hashed.cast()),
            _mm512_loadu_si512(hashed.add(64 * 7).cast()),
        )
    } else {
        (_mm512_setzero_si512(), _mm512_setzero_si512())
    };
    let mut acc = if MODE == SECOND {
        *carry
    } else {
        [_mm512_setzero_si512(); 3]
    };
    if let (Some(l), SECOND | ALONE) = (lens, MODE) {
        add_lengths(g, l, &mut acc);
    }
    let round = |v: &mut [__m512i; 8], r: usize| {
        for x in v.iter_mut() {
            *x = _mm512_aesenc_epi128(*x, k.key::<false>(r));
        }
    };
    // Registers 1..=6 of the hashed group in pairs after rounds 2, 4 and 6, written out so
    // that the rounds stay straight-line code.
    for j in [1, 3, 5] {
        round(&mut v, j);
        round(&mut v, j + 1);
        if hash {
            let a = bswap(_mm512_loadu_si512(hashed.add(64 * j).cast()));
            let b = bswap(_mm512_loadu_si512(hashed.add(64 * j + 64).cast()));
            mul_add2(g, at + 4 * j, a, at + 4 * j + 4, b, &mut acc);
        }
    }
    for r in 7..R {
        round(&mut v, r);
    }
    for (j, r) in v.iter().enumerate() {
        let data = _mm512_loadu_si512(s.add(64 * j).cast());
        let out = _mm512_aesenclast_epi128(*r, _mm512_xor_si512(data, k.key::<false>(R)));
        _mm512_storeu_si512(d.add(64 * j).cast(), out);
    }
    if hash {
        let x = if MODE == SECOND {
            bswap(x0)
        } else {
            _mm512_xor_si512(bswap(x0), _mm512_zextsi128_si512(*h))
        };
        mul_add2(g, at + 28, bswap(x7), at, x, &mut acc);
        if MODE == FIRST {
            *carry = acc;
        } else {
            *h = finish(acc);
        }
    }
}

/// Encryption of a message's only group (a 512-byte message, the storage case), where no
/// other group's hash can fill the AES rounds: the group is encrypted in two halves of four
/// registers, and the first half's ciphertext is hashed while the second half's rounds run
/// (the core runs both halves' rounds at once; the first half, older in program order,
/// finishes first). Then the second half, the length block and the reduction.
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,pclmulqdq,aes")]
unsafe fn only_group<const R: usize>(run: &mut Run<'_>, lens: Option<u128>) {
    let (k, g, s, d) = (run.k, run.g, run.src, run.dst);
    let at = first_power(lens.is_some(), false);
    let v = run.ctr.group();
    let half = |first: usize| {
        let mut x = [v[first], v[first + 1], v[first + 2], v[first + 3]];
        for r in x.iter_mut() {
            *r = _mm512_xor_si512(*r, k.key::<false>(0));
        }
        for round in 1..R {
            for r in x.iter_mut() {
                *r = _mm512_aesenc_epi128(*r, k.key::<false>(round));
            }
        }
        for (j, r) in x.iter_mut().enumerate() {
            let p = 64 * (first + j);
            let data = _mm512_loadu_si512(s.add(p).cast());
            *r = _mm512_aesenclast_epi128(*r, _mm512_xor_si512(data, k.key::<false>(R)));
            _mm512_storeu_si512(d.add(p).cast(), *r);
            *r = bswap(*r);
        }
        x
    };
    let mut acc = [_mm512_setzero_si512(); 3];
    let a = half(0);
    let x0 = _mm512_xor_si512(a[0], _mm512_zextsi128_si512(run.h));
    mul_add2(g, at, x0, at + 4, a[1], &mut acc);
    mul_add2(g, at + 8, a[2], at + 12, a[3], &mut acc);
    let b = half(4);
    mul_add2(g, at + 16, b[0], at + 20, b[1], &mut acc);
    mul_add2(g, at + 24, b[2], at + 28, b[3], &mut acc);
    if let Some(l) = lens {
        add_lengths(g, l, &mut acc);
    }
    run.h = finish(acc);
}
