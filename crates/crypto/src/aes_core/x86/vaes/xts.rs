//! XTS on VAES: 16 blocks per group, tweaks computed in registers.
//!
//! Tweak arithmetic (IEEE 1619: the tweak is a little-endian element of GF(2^128) modulo
//! x^128 + x^7 + x^2 + x + 1). Multiplying a 128-bit lane by x^k for k < 57 is a 128-bit
//! shift left by k, done as two 64-bit shifts plus the bits that cross from the low to the
//! high quadword, and the k bits shifted out of the top, h, folded back as h * 0x87 (a
//! carry-less product that fits in the low quadword), with one VPCLMULQDQ. No branches and
//! no byte loops.
//!
//! Per data unit: the encrypted tweak T is broadcast; eight independent multiplies with
//! per-lane shift counts give [T x^2i, T x^(2i+1)] for the 8 registers (a chain one
//! multiply deep, which a chain of four made measurably slower on 512-byte units). After
//! each group of 16 blocks every register is multiplied by x^16. A new unit only costs
//! these eight independent multiplies, so many 512-byte sectors in one call run at the
//! speed of one long buffer.
//!
//! Two kernels: on 16 ymm registers (the vaes backend, [`xts_vaes_avx2`]) the next group's
//! tweaks are computed after the group's rounds; with AVX-512 (the avx512 backend,
//! [`xts_vaes_avx512`]) before them, so that the multiplies run among the rounds, and on
//! zmm registers, four blocks' tweaks per multiply: the multiplies run on the same
//! units as the AES rounds, so halving them is what brings XTS close to ECB (with eight
//! ymm multiplies per group, XTS-AES-128 ran at 0.88 of ECB, with four zmm ones at 0.93).
//! Each call takes the build of the keys' backend (`aes_kernels!`'s `narrow | wide`).
//!
//! On the vaes backend, keys of 12 and 14 rounds take a third kernel ([`gpr`]): the tweaks
//! as 128-bit integers on the general-purpose registers, computed among the rounds, which
//! frees the vector pipes of the tweak update (XTS-AES-256 0.93 -> 0.99 of ECB at kernel
//! level). A group of 10 rounds is too short to hide that integer work (0.86), so AES-128
//! keeps the vector update; moving it into the rounds through memory (0.89), by one
//! shuffle (0.93), two registers per multiply (0.91), by x^64 on groups four apart (0.89),
//! a constant round count (0.92), or two registers' tweaks on the integer units (0.95 at
//! kernel level, but slower through the bench), round keys in registers with the tweaks
//! from integer chains in memory (0.70), a step without byte shifts (0.80) or without the
//! carry-less multiply (0.89) did not beat it (0.93-0.95; docs/PERFORMANCE.md).
#![allow(unsafe_code)]

mod gpr;

use super::super::scaffold::tail_through_buffer;
use super::{last_round, rounds_but_last, tweaked_group, Keys, GROUP, REGS};
#[cfg(test)]
use crate::aes_core::Backend;
use crate::block::Block;
use core::arch::x86_64::*;

/// `t * x^k` in each 128-bit lane, with the per-quadword shift counts `shl = k` and
/// `shr = 64 - k` (a count of 64 gives 0, so k = 0 is the identity).
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
unsafe fn mul_x_pow(t: __m256i, shl: __m256i, shr: __m256i) -> __m256i {
    // 0x87: x^128 = x^7 + x^2 + x + 1.
    let poly = _mm256_set_epi64x(0, 0x87, 0, 0x87);
    let carry = _mm256_srlv_epi64(t, shr);
    let shifted = _mm256_sllv_epi64(t, shl);
    let cross = _mm256_bslli_epi128::<8>(carry);
    let folded = _mm256_clmulepi64_epi128::<0x01>(carry, poly);
    _mm256_xor_si256(_mm256_xor_si256(shifted, cross), folded)
}

/// `t * x^16` in each 128-bit lane: a two-byte shift of the lane, and the 16 bits shifted
/// out of the top folded back as h * 0x87 with one carry-less multiplication.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
unsafe fn mul_x16(t: __m256i) -> __m256i {
    let poly = _mm256_set_epi64x(0, 0x87, 0, 0x87);
    let h = _mm256_bsrli_epi128::<14>(t);
    let folded = _mm256_clmulepi64_epi128::<0x00>(h, poly);
    _mm256_xor_si256(_mm256_bslli_epi128::<2>(t), folded)
}

/// Bytes per call from which keys of more than 10 rounds take the integer kernel.
const GPR_FROM: usize = 8192;

/// XTS on 16 ymm registers (the vaes backend): data units of `unit` bytes (a multiple of
/// 16), one encrypted tweak each, at least one. Each group's tweak XORs are folded into the
/// round-0 whitening and the last round key (`tweaked_group`), so they cost no step on the
/// AES dependency chain.
///
/// The tweaks of the next group are computed after the current
/// group's rounds: built before them (software pipelining), eight more registers stay live
/// through the rounds and spill, which costs more than the latency it hides. In units of
/// more than two groups each tweak is moved on right after its register's last round
/// ([`group_and_step`]), not after all eight: XTS-AES-128 on 4096-byte units went from
/// 0.89 to 0.93 of ECB. 512-byte units keep the step after the group (through
/// `group_and_step` there, they ran at 0.79 of their former rate). The next *unit's*
/// first tweaks, a longer chain, are still built before the unit's rounds: computed after
/// them, 512-byte units ran slower (both measured: docs/PERFORMANCE.md). Calls of
/// [`GPR_FROM`] bytes or more with keys of more than 10 rounds go to
/// [`gpr::xts_gpr_tweaks`].
#[target_feature(enable = "avx2,vaes,vpclmulqdq")]
pub(super) unsafe fn xts_vaes_avx2<const DEC: bool>(
    k: &Keys,
    tweaks: &[Block],
    src: *const u8,
    dst: *mut u8,
    unit: usize,
) {
    // The integer kernel's start (two groups' tweaks before the first group, its ring of
    // tables) costs more than it saves on short calls: one 512-byte unit per call ran at
    // 7.8 GB/s against 14.4, one of 4096 bytes 15.7 against 16.7, two of 4096 at the same
    // rate, four 4% faster (AES-256, kernel level).
    if k.rounds() > 10 && tweaks.len() * unit >= GPR_FROM {
        // SAFETY: the caller's.
        return unsafe { gpr::xts_gpr_tweaks::<DEC>(k, tweaks, src, dst, unit) };
    }
    let n = tweaks.len();
    let mut tw = first_tweaks(&tweaks[0]);
    // SAFETY (of the pointer offsets and the groups): `n` units of `unit` bytes are
    // inside both buffers (caller); every group is inside its unit, and the tail
    // goes through a group buffer.
    unsafe {
        if unit == 2 * GROUP {
            // 512-byte sectors, the most common unit: the next unit's tweaks built
            // unconditionally (for the last unit, a harmless repeat), and the two
            // groups in a loop with one call site of `tweaked_group`, which the
            // compiler then inlines (with two call sites it did not, and 512-byte
            // units fell well below the 4096-byte rate).
            for u in 0..n {
                let (src, dst) = (src.add(u * unit), dst.add(u * unit));
                let next_unit = first_tweaks(&tweaks[(u + 1).min(n - 1)]);
                for half in 0..2 {
                    let at = half * GROUP;
                    tweaked_group::<REGS, DEC>(k, &tw, src.add(at), dst.add(at));
                    tw = tw.map(|v| mul_x16(v));
                }
                tw = next_unit;
            }
            return;
        }
        for u in 0..n {
            let (src, dst) = (src.add(u * unit), dst.add(u * unit));
            let next_unit = match tweaks.get(u + 1) {
                Some(t) => first_tweaks(t),
                None => tw,
            };
            let mut off = 0;
            while off + GROUP <= unit {
                group_and_step::<DEC>(k, &mut tw, src.add(off), dst.add(off));
                off += GROUP;
            }
            if off < unit {
                tail_group::<DEC>(k, &tw, src.add(off), dst.add(off), unit - off);
            }
            tw = next_unit;
        }
    }
}

/// An XTS group with the tweaks `tw` (as `tweaked_group`), each tweak then moved on to the
/// next group's (times x^16) right after its register's last round and store, so that the
/// next group's first tweaks are ready while this group's last registers finish.
///
/// # Safety
/// `src` readable and `dst` writable for one group.
#[inline]
#[target_feature(enable = "avx2,vaes,vpclmulqdq")]
unsafe fn group_and_step<const DEC: bool>(
    k: &Keys,
    tw: &mut [__m256i; REGS],
    src: *const u8,
    dst: *mut u8,
) {
    let (first, last) = (k.key::<DEC>(0), k.key::<DEC>(k.rounds()));
    let mut x = [_mm256_setzero_si256(); REGS];
    for (i, v) in x.iter_mut().enumerate() {
        // SAFETY: register `i` is inside the group (caller); unaligned load.
        let d = unsafe { _mm256_loadu_si256(src.add(32 * i).cast()) };
        *v = _mm256_xor_si256(d, _mm256_xor_si256(tw[i], first));
    }
    rounds_but_last::<REGS, DEC>(k, &mut x);
    for (i, v) in x.iter().enumerate() {
        let out = last_round::<DEC>(*v, _mm256_xor_si256(tw[i], last));
        // SAFETY: as for the loads.
        unsafe { _mm256_storeu_si256(dst.add(32 * i).cast(), out) };
        tw[i] = mul_x16(tw[i]);
    }
}

/// The AVX-512 build: the data on ymm like the AVX2 one, the tweaks in four zmm registers
/// (register j holds the tweaks of ymm registers 2j and 2j + 1), so that moving them on
/// by x^16 costs four multiplies instead of eight (the tweak update runs on the same
/// units as the AES rounds, and was what kept XTS below ECB), plus one extraction of an
/// upper half per zmm register. The next group's tweaks, or the next unit's first ones,
/// are built before each group's rounds, in ymm16-31 and zmm registers, so their
/// dependency chain runs among the rounds and nothing spills. The step by x^16 is a byte
/// rotation, a masked move and one carry-less multiply ([`mul_x16_zmm`]); a variant with
/// two carry-less products (the low quadword times x^k, the high one shifted in place
/// under a mask) ran slower on ymm, 14.6 against 16.8 GB/s for 4096-byte units, the
/// multiplier becoming the bottleneck. On a core that lowers its clock for 512-bit
/// operations these would cost more than they save; there the choice by measurement
/// (`crate::backend::measure`, which times this kernel against the vaes one) takes the
/// vaes backend.
#[target_feature(enable = "avx2,vaes,vpclmulqdq,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn xts_vaes_avx512<const DEC: bool>(
    k: &Keys,
    tweaks: &[Block],
    src: *const u8,
    dst: *mut u8,
    unit: usize,
) {
    let n = tweaks.len();
    let groups = unit / GROUP;
    let mut tw = first_tweaks_zmm(&tweaks[0]);
    // SAFETY (of the pointer offsets and the groups): `n` units of `unit` bytes are inside
    // both buffers (caller); every group is inside its unit, and the tail goes through a
    // group buffer.
    unsafe {
        for u in 0..n {
            let (src, dst) = (src.add(u * unit), dst.add(u * unit));
            let next_unit = &tweaks[(u + 1).min(n - 1)];
            for g in 0..groups {
                let next = if g + 1 < groups || off_tail(unit) {
                    tw.map(|v| mul_x16_zmm(v))
                } else {
                    first_tweaks_zmm(next_unit)
                };
                let at = g * GROUP;
                tweaked_group::<REGS, DEC>(k, &halves(&tw), src.add(at), dst.add(at));
                tw = next;
            }
            if off_tail(unit) {
                let at = groups * GROUP;
                let next = first_tweaks_zmm(next_unit);
                tail_group::<DEC>(k, &halves(&tw), src.add(at), dst.add(at), unit - at);
                tw = next;
            }
        }
    }
}

/// Four zmm registers of tweaks as the eight ymm registers of a group.
#[inline]
#[target_feature(enable = "avx512f")]
fn halves(tw: &[__m512i; REGS / 2]) -> [__m256i; REGS] {
    core::array::from_fn(|i| {
        let z = tw[i / 2];
        if i % 2 == 0 {
            _mm512_castsi512_si256(z)
        } else {
            _mm512_extracti64x4_epi64::<1>(z)
        }
    })
}

/// `t * x^16` in each 128-bit lane of a zmm register. The lane rotated left by 16 bits
/// (one byte rotation) is `t << 16` with the 16 bits h shifted out of the top in its low
/// word; the product wants h * 0x87 there instead of h, so h * 0x86 (at most 24 bits), one
/// carry-less multiply of the isolated low word, is XORed in. One shuffle where [`mul_x16`]
/// has two byte shifts: the shuffles and the multiply share units with the AES rounds.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x16_zmm(t: __m512i) -> __m512i {
    let poly = _mm512_set_epi64(0, 0x86, 0, 0x86, 0, 0x86, 0, 0x86);
    let r = _mm512_alignr_epi8::<14>(t, t);
    // Word 0 of each lane: bits 0, 8, 16 and 24 of the word mask.
    let h = _mm512_maskz_mov_epi16(0x0101_0101, r);
    let folded = _mm512_clmulepi64_epi128::<0x00>(h, poly);
    _mm512_xor_si512(r, folded)
}

/// The tweaks of a unit's first 16 blocks in four zmm registers, [T x^4j, ..., T x^(4j+3)]
/// in register j, from the encrypted tweak T (each an independent multiply of T by
/// per-lane powers, as in [`first_tweaks`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
unsafe fn first_tweaks_zmm(t: &Block) -> [__m512i; REGS / 2] {
    // SAFETY: `t` is 16 readable bytes; unaligned load.
    let all = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(t.as_ptr().cast()) });
    let poly = _mm512_set_epi64(0, 0x87, 0, 0x87, 0, 0x87, 0, 0x87);
    core::array::from_fn(|j| {
        let p = |l: usize| (4 * j + l) as i64;
        let shl = _mm512_set_epi64(p(3), p(3), p(2), p(2), p(1), p(1), p(0), p(0));
        let shr = _mm512_sub_epi64(_mm512_set1_epi64(64), shl);
        let carry = _mm512_srlv_epi64(all, shr);
        let shifted = _mm512_sllv_epi64(all, shl);
        let cross = _mm512_bslli_epi128::<8>(carry);
        let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly);
        _mm512_xor_si512(_mm512_xor_si512(shifted, cross), folded)
    })
}

/// The last `len < GROUP` bytes of a unit, with the tweaks `tw`, through a group buffer.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes.
#[inline]
#[target_feature(enable = "avx2,vaes")]
unsafe fn tail_group<const DEC: bool>(
    k: &Keys,
    tw: &[__m256i; REGS],
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    // SAFETY: the caller's; the closure's pointers are the group buffer's.
    unsafe {
        tail_through_buffer::<GROUP>(src, dst, len, |s, d| {
            tweaked_group::<REGS, DEC>(k, tw, s, d)
        })
    }
}

/// Whether a unit of `unit` bytes ends with a group shorter than 16 blocks.
#[inline(always)]
fn off_tail(unit: usize) -> bool {
    !unit.is_multiple_of(GROUP)
}

/// The tweaks of a unit's first 16 blocks, [T x^2i, T x^(2i+1)] in register i, from the
/// encrypted tweak T: registers 0 to 3 by independent multiplies of T by per-lane powers,
/// registers 4 to 7 from them times x^8 (a one-byte shift and one carry-less multiply,
/// cheaper than another multiply by per-lane powers: 512-byte units, whose every second
/// group starts a unit, ran 3.5% faster so).
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
unsafe fn first_tweaks(t: &Block) -> [__m256i; REGS] {
    let both = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast()));
    // A chain of at most two multiplies (one of four made 512-byte units slower).
    let mut out = [_mm256_setzero_si256(); REGS];
    for (i, v) in out.iter_mut().enumerate().take(REGS / 2) {
        let (lo, hi) = (2 * i as i64, 2 * i as i64 + 1);
        *v = mul_x_pow(
            both,
            _mm256_set_epi64x(hi, hi, lo, lo),
            _mm256_set_epi64x(64 - hi, 64 - hi, 64 - lo, 64 - lo),
        );
    }
    let poly = _mm256_set_epi64x(0, 0x87, 0, 0x87);
    for i in REGS / 2..REGS {
        let t = out[i - REGS / 2];
        let h = _mm256_bsrli_epi128::<15>(t);
        let folded = _mm256_clmulepi64_epi128::<0x00>(h, poly);
        out[i] = _mm256_xor_si256(_mm256_bslli_epi128::<1>(t), folded);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aes_core::xts_mul_alpha;

    /// Encrypted tweaks whose top bits set every reduction.
    pub(super) const SEEDS: [u128; 6] = [
        0,
        u128::MAX,
        1 << 127,
        0xffff << 112,
        0x8000_0001 << 96,
        0x1234_5678_9abc_def0_0fed_cba9_8765_4321,
    ];

    /// Asserts that the 128-bit lanes of `groups`, in block order, are `seed` times
    /// x^0, x^1, ... (the scalar multiply by alpha).
    fn assert_powers(seed: u128, groups: &[[__m256i; REGS]]) {
        let mut want = seed;
        for (g, regs) in groups.iter().enumerate() {
            for i in 0..2 * REGS {
                let mut b = [0u8; 32];
                // SAFETY: `b` is 32 writable bytes; AVX is in every backend that got here.
                unsafe { _mm256_storeu_si256(b.as_mut_ptr().cast(), regs[i / 2]) };
                let l = i % 2;
                let got = u128::from_le_bytes(b[16 * l..16 * l + 16].try_into().unwrap());
                assert_eq!(got, want, "{seed:#x} group {g} block {i}");
                want = xts_mul_alpha(want);
            }
        }
    }

    /// The tweak steps against the scalar multiply by alpha: a unit's first 16 tweaks and
    /// the 16 after them (one step by x^16), on ymm (vaes) and on zmm (avx512).
    #[test]
    fn tweak_steps_match_the_scalar_multiply() {
        for b in [Backend::Vaes, Backend::Avx512] {
            if let Err(e) = b.check_cpu() {
                eprintln!("{b}: SKIPPED ({e})");
                continue;
            }
            for seed in SEEDS {
                let t = seed.to_le_bytes();
                // SAFETY: the CPU has the backend's features (checked above).
                let groups = unsafe {
                    if b == Backend::Vaes {
                        let tw = first_tweaks(&t);
                        [tw, tw.map(|v| mul_x16(v))]
                    } else {
                        let tw = first_tweaks_zmm(&t);
                        [halves(&tw), halves(&tw.map(|v| mul_x16_zmm(v)))]
                    }
                };
                assert_powers(seed, &groups);
            }
        }
    }
}
