//! The `avx512` GOST 28147-89 / Magma backend: ECB of many independent blocks, and the
//! counter modes (GOST 28147-89 CNT, Magma CTR and CTR-ACPKM) with their counter blocks
//! made in registers and the keystream XORed from source to destination in the same pass.
//! Every other parallel mode (CBC and CFB decryption, the sector-interleaved CBC and CFB
//! encryption, MGM's counter streams) is built on the ECB kernel by the mode layer.
//!
//! # Design
//! Target: x86-64 with AVX-512 F, BW, VL and VBMI (Ice Lake and later, Zen 4 and later);
//! tuned on Zen 5 (CPU family 0x1a, the VM it was written on).
//!
//! ## Layout: one half-block per 32-bit lane, 16 blocks per group
//! A group is 16 blocks = 128 bytes = two zmm registers. Two `vpermt2b` (VBMI: any byte of
//! two registers to any byte) turn them into `A` = the halves `N1` of the 16 blocks, one per
//! dword lane, and `B` = the halves `N2`; the byte convention (GOST 28147-89 little-endian
//! words, Magma big-endian blocks) is part of the permutation, so both run the same kernel.
//! Two more permutes store a group back. In this layout the round is word arithmetic, as in
//! the standard: `vpaddd` adds the key word (no carry emulation), `vprold` rotates by 11.
//!
//! ## The S-boxes: two `vpermb` per round
//! `vpermb` looks a byte up in a 64-byte table held in a register, using the index's low
//! six bits. A byte's low nibble goes through row `pi[2j]` and its high nibble through
//! `pi[2j+1]`, where `j` is the byte's place in the word; so the index is the nibble plus
//! `16 j` (bits 4-5), and one 64-byte table holds the four rows that low nibbles use, with
//! another for the high nibbles (pre-shifted left by 4). Index making: `(x & 0x0f) | 16j`
//! is one `vpternlogd`; for high nibbles a `vpsrld` by 4 first. One round on 16 blocks:
//! `vpaddd`, `vpsrld`, two `vpternlogd`, two `vpermb`, `vpord`, `vprold`, `vpxord`:
//! 9 instructions (and a register copy) per 16 blocks. Measured on the Zen 5 VM this was
//! written on (full-width zmm units): the rounds alone, in registers, take ~715 ns for the
//! 32 rounds of 4 KiB of blocks, ~3 cycles per round of a group, and 16 KiB of ECB runs at ~97% of that ([`round_seconds`] is the
//! probe). Thought through and left: one 8-bit lookup per byte (`vpermi2b` covers 7
//! index bits, so each byte needs two lookups and a blend, and each byte position its own
//! tables), and the byte-sliced layout of the `avx2` backend (its byte-wise add with carry
//! lookahead alone costs more than this whole round).
//!
//! ## Many groups in flight
//! A round's dependency chain (add, index, `vpermb`, or, rotate, xor) is longer than the
//! throughput cost of a group, and rounds of a group are serial, so `INTERLEAVE` groups
//! run round by round: 8 groups = 128 blocks = 1 KiB per iteration (16 state registers
//! plus 4 constants of the 32). Measured with `sectorcrypt bench`: with 4 groups
//! `gost89-ecb/16384` took 1.3-1.4 c/B against 0.9 with 8 (latency-bound); 12 gained
//! nothing measurable over 8. 1 KiB is also the CryptoPro key meshing period. Plain
//! instead of masked loads and stores for whole groups made no difference, so every group
//! uses the masked forms.
//! A shorter rest runs as 1, 2 or 4 groups; the last group is loaded and stored with byte
//! masks (AVX-512BW masked moves do not touch, or fault on, the masked-out bytes), so no
//! length needs a bounce buffer.
//!
//! ## Counters in registers
//! Both counters are arithmetic progressions in this layout: Magma CTR's block is the 64-bit
//! integer `c + i` (`N1` = low word: `vpaddd` of 0..15, then a masked `+1` of `N2` where the
//! low word wrapped); GOST 28147-89 CNT's block `i` (from 1) is `N3 + i C2 mod 2^32` and
//! `N4 + i C1 mod 2^32 - 1` (`vpaddd` of the precomputed `i C2` and `i C1 mod 2^32 - 1`,
//! the end-around carry as a compare and a masked `+1`; see
//! [`Counter`](super::keystream::Counter) for why one addition of `i C1` equals `i` steps).
//! So the counter modes never write counter blocks to memory: the keystream is XORed into
//! the data as each group is stored.
//!
//! ## Constant time
//! The S-box tables are loaded into registers from fixed addresses and looked up by
//! `vpermb`, which selects bytes within a register; round keys are broadcast from a stack
//! array at offsets that depend on the round number only; there is no branch on data, and
//! the masks of masked loads and stores depend on lengths only. How this was checked:
//! `scripts/gost-ct-disasm.sh` lists the memory operands and branches of [`ecb_groups`] and
//! [`ctr_groups`] (and fails on a gather, a scatter or a `vpermb` from memory): the memory
//! operands are the source and destination plus the group offset, the round keys at the
//! round counter's offset, the tables and permutations at constant offsets, and stack
//! slots; the branches are the loop counters over public lengths; the shifts by a register
//! count are the length masks and the inlined side job's S-box (the portable code's
//! register lookup). valgrind, which `scripts/gost-ct-cachegrind.sh` uses, does not run
//! AVX-512 code, so `scripts/gost-ct-timing.sh` checks this backend by timing instead:
//! fixed against random keys, IVs and data (dudect's method), with a deliberately leaking
//! control that must be seen; every mode's |t| stayed under 5 in 20000 samples per class
//! while the control's was 66.
//!
//! Calling contract: [`ecb`] and [`ctr`] may only be called for keys on
//! [`GostBackend::Avx512`], which exists only after its CPU check; they re-check and panic
//! otherwise, which is what makes the `unsafe` calls of the `#[target_feature]` functions
//! sound.
#![allow(unsafe_code)]

use super::keystream::{Counter, C1, C2};
use super::soft::SideJob;
use super::{Core, GostBackend, Order, Sbox};
use crate::buf::InOut;
use core::arch::x86_64::*;
use std::sync::OnceLock;
use zeroize::Zeroize;

/// Blocks per group.
const BLOCKS: usize = 16;
/// Bytes per group.
const GROUP: usize = BLOCKS * 8;
/// Groups interleaved per iteration of the main loop.
const INTERLEAVE: usize = 8;

/// The S-box tables of one parameter set: public, built once per process.
#[repr(C, align(64))]
struct Tables {
    /// `lo[16 j + x] = pi[2j][x]`: the rows of the low nibbles of byte `j`.
    lo: [u8; 64],
    /// `hi[16 j + x] = pi[2j+1][x] << 4`: the rows of the high nibbles.
    hi: [u8; 64],
}

impl Tables {
    fn new(sbox: Sbox) -> Tables {
        let rows = sbox.rows();
        let mut t = Tables {
            lo: [0; 64],
            hi: [0; 64],
        };
        for j in 0..4 {
            for x in 0..16 {
                t.lo[16 * j + x] = rows[2 * j][x];
                t.hi[16 * j + x] = rows[2 * j + 1][x] << 4;
            }
        }
        t
    }

    /// The tables of `sbox`, built on first use.
    fn get(sbox: Sbox) -> &'static Tables {
        static ALL: OnceLock<Vec<Tables>> = OnceLock::new();
        let all = ALL.get_or_init(|| Sbox::ALL.iter().map(|&s| Tables::new(s)).collect());
        &all[Sbox::ALL.iter().position(|&s| s == sbox).unwrap_or(0)]
    }
}

/// The byte permutations between memory and the lane layout, for one byte convention.
#[repr(C, align(64))]
struct Perm {
    /// Byte `4i + b` of `A` (then of `B`) from byte `load[..]` of the two loaded registers.
    load_a: [u8; 64],
    load_b: [u8; 64],
    /// Byte `q` of the first (then second) stored register from byte `store[..]` of `A:B`.
    store_0: [u8; 64],
    store_1: [u8; 64],
}

/// Where byte `b` (0 = least significant) of half `h` (0 = `N1`) of block `i` is in memory.
const fn mem_pos(order: Order, i: usize, h: usize, b: usize) -> usize {
    match order {
        // Little-endian words, N1 first.
        Order::Gost89 => 8 * i + 4 * h + b,
        // A big-endian 64-bit block whose low word is N1.
        Order::Magma => 8 * i + 7 - 4 * h - b,
    }
}

const fn perm(order: Order) -> Perm {
    let mut p = Perm {
        load_a: [0; 64],
        load_b: [0; 64],
        store_0: [0; 64],
        store_1: [0; 64],
    };
    let mut i = 0;
    while i < BLOCKS {
        let mut b = 0;
        while b < 4 {
            let (a, bb) = (mem_pos(order, i, 0, b), mem_pos(order, i, 1, b));
            p.load_a[4 * i + b] = a as u8;
            p.load_b[4 * i + b] = bb as u8;
            // In the stored pair, A is bytes 0..64 of the table source and B 64..128.
            let (sa, sb) = ((4 * i + b) as u8, (64 + 4 * i + b) as u8);
            if a < 64 {
                p.store_0[a] = sa;
            } else {
                p.store_1[a - 64] = sa;
            }
            if bb < 64 {
                p.store_0[bb] = sb;
            } else {
                p.store_1[bb - 64] = sb;
            }
            b += 1;
        }
        i += 1;
    }
    p
}

static PERM_GOST89: Perm = perm(Order::Gost89);
static PERM_MAGMA: Perm = perm(Order::Magma);

/// What the kernel reads besides the data: the tables, the permutations and the 32 round
/// keys in the order of the rounds (zeroized on drop).
struct Ctx {
    t: &'static Tables,
    p: &'static Perm,
    rk: RoundKeys,
}

#[repr(C, align(64))]
struct RoundKeys([u32; 32]);

impl Drop for RoundKeys {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl Ctx {
    fn new(k: &[u32; 8], rounds: &[usize; 32], sbox: Sbox, order: Order) -> Ctx {
        assert!(
            GostBackend::Avx512.check_cpu().is_ok(),
            "gost avx512 kernel called on a cpu without avx512f/bw/vl/vbmi"
        );
        Ctx {
            t: Tables::get(sbox),
            p: match order {
                Order::Gost89 => &PERM_GOST89,
                Order::Magma => &PERM_MAGMA,
            },
            rk: RoundKeys(rounds.map(|i| k[i & 7])),
        }
    }
}

/// What a kernel call makes of the blocks of its buffer.
#[derive(Clone, Copy)]
pub(super) enum Job {
    /// ECB: each block of the source, transformed.
    Ecb,
    /// A counter mode: the source XORed with the encryption of the counter's blocks.
    Ctr(Counter),
}

/// `job` over the whole blocks of `io` with the key of `core` used in the round order
/// `rounds` (encryption's for a counter). Returns the bytes done: every whole block, or
/// none when there are fewer than two (left to the portable code).
pub(super) fn run(
    core: &Core,
    rounds: &[usize; 32],
    job: Job,
    mut io: InOut<'_>,
    side: Option<&mut SideJob>,
) -> usize {
    let len = io.len() / 8 * 8;
    if len < 16 {
        return 0;
    }
    let c = Ctx::new(&core.s.k, rounds, core.sbox, core.order);
    let (src, dst) = io.ptrs();
    // SAFETY: the CPU features were checked in `Ctx::new`; `src` and `dst` (equal when in
    // place) are valid for `io.len() >= len` bytes.
    unsafe {
        match job {
            Job::Ecb => ecb_groups(&c, src, dst, len, side),
            Job::Ctr(ctr) => ctr_groups(&c, ctr, src, dst, len, side),
        }
    }
    len
}

/// Loads one 64-byte register from a table.
#[inline(always)]
unsafe fn ld(p: &[u8; 64]) -> __m512i {
    // SAFETY: `p` is 64 bytes inside a 64-byte-aligned table, at a 64-byte offset.
    unsafe { _mm512_load_si512(p.as_ptr() as *const __m512i) }
}

/// The byte mask of the `h`-th 64-byte register of a group that has `have` bytes.
#[inline(always)]
fn mask(have: usize, h: usize) -> u64 {
    let n = have.saturating_sub(64 * h).min(64);
    if n == 64 {
        !0
    } else {
        (1u64 << n) - 1
    }
}

/// Loads the `have` first bytes of a group (zeros for the rest).
#[inline(always)]
unsafe fn load(p: *const u8, have: usize) -> (__m512i, __m512i) {
    // SAFETY: masked-out bytes are neither read nor faulted on; the caller vouches for
    // the `have` bytes at `p`.
    unsafe {
        (
            _mm512_maskz_loadu_epi8(mask(have, 0), p as *const i8),
            _mm512_maskz_loadu_epi8(mask(have, 1), p.add(64) as *const i8),
        )
    }
}

/// Loads a group (as [`load`]) and permutes it: returns (A, B) = the halves N1 and N2 of
/// its 16 blocks.
#[inline(always)]
unsafe fn load_group(c: &Ctx, p: *const u8, have: usize) -> (__m512i, __m512i) {
    // SAFETY: the caller vouches for the `have` bytes at `p`; aligned table loads.
    unsafe {
        let (v0, v1) = load(p, have);
        (
            _mm512_permutex2var_epi8(v0, ld(&c.p.load_a), v1),
            _mm512_permutex2var_epi8(v0, ld(&c.p.load_b), v1),
        )
    }
}

/// The memory form of a group from its halves `n1`, `n2`.
#[inline(always)]
unsafe fn unpermute(c: &Ctx, n1: __m512i, n2: __m512i) -> (__m512i, __m512i) {
    // SAFETY: register operations and aligned table loads.
    unsafe {
        (
            _mm512_permutex2var_epi8(n1, ld(&c.p.store_0), n2),
            _mm512_permutex2var_epi8(n1, ld(&c.p.store_1), n2),
        )
    }
}

/// Stores the `have` first bytes of a group.
#[inline(always)]
unsafe fn store(p: *mut u8, have: usize, v: (__m512i, __m512i)) {
    // SAFETY: masked-out bytes are neither written nor faulted on; the caller vouches for
    // the `have` bytes at `p`.
    unsafe {
        _mm512_mask_storeu_epi8(p as *mut i8, mask(have, 0), v.0);
        _mm512_mask_storeu_epi8(p.add(64) as *mut i8, mask(have, 1), v.1);
    }
}

/// The registers the rounds use: the two tables, the low-nibble mask and the place bits.
#[derive(Clone, Copy)]
struct RoundConst {
    lo: __m512i,
    hi: __m512i,
    m0f: __m512i,
    pos: __m512i,
}

impl RoundConst {
    #[inline(always)]
    unsafe fn new(c: &Ctx) -> RoundConst {
        // SAFETY: aligned table loads and register constants.
        unsafe {
            RoundConst {
                lo: ld(&c.t.lo),
                hi: ld(&c.t.hi),
                m0f: _mm512_set1_epi8(0x0f),
                pos: _mm512_set1_epi32(0x3020_1000),
            }
        }
    }
}

/// `b ^= S(a + k) <<< 11` for `G` groups.
#[inline(always)]
unsafe fn round<const G: usize>(
    rc: RoundConst,
    k: __m512i,
    a: &[__m512i; G],
    b: &mut [__m512i; G],
) {
    // SAFETY (whole function): register AVX-512 operations; the caller has the features.
    unsafe {
        for g in 0..G {
            let x = _mm512_add_epi32(a[g], k);
            // (x & 0x0f) | 16 j and the same for the high nibbles.
            let il = _mm512_ternarylogic_epi32::<0xea>(x, rc.m0f, rc.pos);
            let ih = _mm512_ternarylogic_epi32::<0xea>(_mm512_srli_epi32::<4>(x), rc.m0f, rc.pos);
            let s = _mm512_or_si512(
                _mm512_permutexvar_epi8(il, rc.lo),
                _mm512_permutexvar_epi8(ih, rc.hi),
            );
            b[g] = _mm512_xor_si512(b[g], _mm512_rol_epi32::<11>(s));
        }
    }
}

/// The 32 rounds on `G` groups held as (A, B); returns (N1, N2) of the result. Two scalar
/// rounds of `side` run per two vector rounds (on the integer units, in the shadow of the
/// vector work).
#[inline(always)]
unsafe fn rounds<const G: usize>(
    c: &Ctx,
    mut a: [__m512i; G],
    mut b: [__m512i; G],
    side: &mut Option<&mut SideJob>,
) -> ([__m512i; G], [__m512i; G]) {
    // SAFETY (whole function): register operations and round-key broadcasts from the
    // 32-entry stack array at public offsets.
    unsafe {
        let rc = RoundConst::new(c);
        for r in (0..32).step_by(2) {
            if let Some(j) = side.as_deref_mut() {
                j.step();
                j.step();
            }
            round(rc, _mm512_set1_epi32(c.rk.0[r] as i32), &a, &mut b);
            round(rc, _mm512_set1_epi32(c.rk.0[r + 1] as i32), &b, &mut a);
        }
        // After an even number of in-place rounds the output is N1 = b, N2 = a.
        (b, a)
    }
}

/// One iteration of up to `G` groups over `len` bytes (whole blocks) from `src` to `dst`:
/// ECB, or with `CTR` the keystream of `ctr` (advanced past the groups) XORed from `src`.
#[inline(always)]
unsafe fn iter<const G: usize, const CTR: bool>(
    c: &Ctx,
    ctr: &mut Counter,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    side: &mut Option<&mut SideJob>,
) {
    // SAFETY (whole function): the caller vouches for `len` bytes at `src` and `dst` and
    // for the CPU features; group `g` covers bytes `g * GROUP..` of them, masked to `len`.
    unsafe {
        let have = |g: usize| len.saturating_sub(g * GROUP);
        let at = |g: usize| (g * GROUP).min(len);
        let mut a = [_mm512_setzero_si512(); G];
        let mut b = [_mm512_setzero_si512(); G];
        for g in 0..G {
            (a[g], b[g]) = if CTR {
                counter_group(ctr)
            } else {
                load_group(c, src.add(at(g)), have(g))
            };
        }
        let (n1, n2) = rounds(c, a, b, side);
        for g in 0..G {
            let mut out = unpermute(c, n1[g], n2[g]);
            if CTR {
                let x = load(src.add(at(g)), have(g));
                out = (_mm512_xor_si512(x.0, out.0), _mm512_xor_si512(x.1, out.1));
            }
            store(dst.add(at(g)), have(g), out);
        }
    }
}

/// The groups of a rest of `len` bytes: 1, 2, 4 or `INTERLEAVE`.
fn rest_groups(len: usize) -> usize {
    match len.div_ceil(GROUP) {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => INTERLEAVE,
    }
}

/// `io.2` bytes (whole blocks) from the source `io.0` to the destination `io.1` (equal
/// when in place) as [`iter`] does, `INTERLEAVE` groups at a time, then the rest as 1, 2,
/// 4 or `INTERLEAVE` groups.
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VL and VBMI with the OS saving the zmm state; `io.0`
/// must be valid for reads and `io.1` for writes of `io.2` bytes.
#[inline(always)]
unsafe fn groups<const CTR: bool>(
    c: &Ctx,
    ctr: &mut Counter,
    io: (*const u8, *mut u8, usize),
    side: &mut Option<&mut SideJob>,
) {
    let (src, dst, len) = io;
    let mut off = 0;
    while len - off >= INTERLEAVE * GROUP {
        let n = INTERLEAVE * GROUP;
        // SAFETY: `off + n <= len`, the range the caller vouches for.
        unsafe { iter::<INTERLEAVE, CTR>(c, ctr, src.add(off), dst.add(off), n, side) };
        off += n;
    }
    while off < len {
        let n = (len - off).min(INTERLEAVE * GROUP);
        // SAFETY: `off + n <= len`, the range the caller vouches for.
        unsafe {
            let (s, d) = (src.add(off), dst.add(off));
            match rest_groups(n) {
                1 => iter::<1, CTR>(c, ctr, s, d, n, side),
                2 => iter::<2, CTR>(c, ctr, s, d, n, side),
                4 => iter::<4, CTR>(c, ctr, s, d, n, side),
                _ => iter::<INTERLEAVE, CTR>(c, ctr, s, d, n, side),
            }
        }
        off += n;
    }
}

/// ECB of `len` bytes (whole blocks) from `src` to `dst` (equal when in place).
///
/// # Safety
/// As [`groups`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi")]
unsafe fn ecb_groups(
    c: &Ctx,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    mut side: Option<&mut SideJob>,
) {
    // SAFETY: the caller's guarantees are those of `groups`; the counter is unused.
    unsafe { groups::<false>(c, &mut Counter::Add64(0), (src, dst, len), &mut side) };
}

/// The keystream of `ctr` XORed from `src` into `dst` (equal when in place), `len` bytes
/// (whole blocks).
///
/// # Safety
/// As [`groups`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi")]
unsafe fn ctr_groups(
    c: &Ctx,
    mut ctr: Counter,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    mut side: Option<&mut SideJob>,
) {
    // SAFETY: the caller's guarantees are those of `groups`.
    unsafe { groups::<true>(c, &mut ctr, (src, dst, len), &mut side) };
    ctr.zeroize();
}

/// The counter blocks of one group, as (N1, N2) lanes, and the counter advanced past them.
#[inline(always)]
unsafe fn counter_group(ctr: &mut Counter) -> (__m512i, __m512i) {
    // SAFETY (whole function): register AVX-512 operations.
    unsafe {
        let one = _mm512_set1_epi32(1);
        let out = match *ctr {
            // Block i is c + i: N1 = low word + i, N2 = high word plus the carry.
            Counter::Add64(c) => {
                let iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
                let lo = _mm512_add_epi32(_mm512_set1_epi32(c as u32 as i32), iota);
                let hi = _mm512_set1_epi32((c >> 32) as u32 as i32);
                let wrapped = _mm512_cmplt_epu32_mask(lo, iota);
                (lo, _mm512_mask_add_epi32(hi, wrapped, hi, one))
            }
            // Block i (from 1) is N3 + i C2 mod 2^32 and N4 + i C1 mod 2^32 - 1.
            Counter::Cnt(n3, n4) => {
                let d3 = _mm512_loadu_si512(CNT_STEPS.0.as_ptr() as *const __m512i);
                let d4 = _mm512_loadu_si512(CNT_STEPS.1.as_ptr() as *const __m512i);
                let lo = _mm512_add_epi32(_mm512_set1_epi32(n3 as i32), d3);
                let s = _mm512_add_epi32(_mm512_set1_epi32(n4 as i32), d4);
                let carry = _mm512_cmplt_epu32_mask(s, d4);
                (lo, _mm512_mask_add_epi32(s, carry, s, one))
            }
        };
        *ctr = ctr.advance(BLOCKS as u64);
        out
    }
}

/// `i C2 mod 2^32` and `i C1 mod 2^32 - 1` for i = 1..=16.
static CNT_STEPS: ([u32; 16], [u32; 16]) = {
    let mut s = ([0u32; 16], [0u32; 16]);
    let mut i = 0;
    while i < 16 {
        s.0[i] = C2.wrapping_mul(i as u32 + 1);
        s.1[i] = ((C1 as u64 * (i as u64 + 1)) % 0xffff_ffff) as u32;
        i += 1;
    }
    s
};

/// Seconds per round per block of this kernel's rounds alone (no loads, stores or
/// permutes): `INTERLEAVE` groups through 32 rounds, repeated, the best of five runs.
pub(super) fn round_seconds() -> f64 {
    let c = Ctx::new(
        &[0x1234_5678; 8],
        &super::ENC_ORDER,
        Sbox::Tc26Z,
        Order::Magma,
    );
    let reps = 200;
    super::best_seconds(reps * 32 * INTERLEAVE * BLOCKS, || {
        // SAFETY: the CPU features were checked in `Ctx::new`.
        unsafe { probe(&c, reps) }
    })
}

/// The probe's starting lanes: different values, as data has (the same value in every
/// lane would switch fewer bits).
static PROBE_LANES: [u32; 16] = [
    0x0f1e_2d3c,
    0x4b5a_6978,
    0x8796_a5b4,
    0xc3d2_e1f0,
    0x1357_9bdf,
    0x2468_ace0,
    0x7f3e_5d1c,
    0x6b2a_4908,
    0x1a2b_3c4d,
    0x5e6f_7081,
    0x92a3_b4c5,
    0xd6e7_f809,
    0x3141_5926,
    0x5358_9793,
    0x2384_6264,
    0x3383_2795,
];

/// `reps` times 32 rounds on `INTERLEAVE` groups in registers.
///
/// # Safety
/// As [`ecb_groups`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi")]
unsafe fn probe(c: &Ctx, reps: usize) {
    // SAFETY: an unaligned load of the 64 bytes of `PROBE_LANES`.
    let lanes = unsafe { _mm512_loadu_si512(PROBE_LANES.as_ptr() as *const __m512i) };
    let mut a = [lanes; INTERLEAVE];
    let mut b = [lanes; INTERLEAVE];
    for g in 0..INTERLEAVE {
        a[g] = _mm512_add_epi32(lanes, _mm512_set1_epi32(g as i32));
        b[g] = _mm512_xor_si512(lanes, _mm512_set1_epi32(0x5555 * g as i32));
    }
    for _ in 0..reps {
        // SAFETY: the caller has the features.
        (a, b) = unsafe { rounds(c, a, b, &mut None) };
        a = std::hint::black_box(a);
    }
    std::hint::black_box((a, b));
}
