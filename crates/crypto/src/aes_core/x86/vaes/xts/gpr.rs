//! The vaes XTS kernel for 12- and 14-round keys: the tweaks computed on the integer units.
//!
//! The vector kernel ([`super::xts_vaes_avx2`]) moves each tweak register on by x^16 with
//! two byte shifts, a carry-less multiply and an XOR, which share the vector pipes with
//! the rounds. Here the tweaks are 128-bit integers in pairs of general-purpose registers,
//! which are idle during AES: a doubling is ADD, ADC, SBB, AND and XOR (the carry out of
//! the top selects the reduction 0x87 through a mask: constant time, no tables), and the
//! 16 tweaks of a group are four chains of four (the first of each chain stepped by x^16
//! from the previous group's, or by x^4c from a new unit's encrypted tweak). They are
//! computed two groups ahead into a ring of three 256-byte tables, two tweak steps after
//! each of the group's first eight rounds, and each group reads its own from its table as
//! memory operands of the whitening and last-key XORs. Empty assembly blocks keep LLVM from
//! gathering the integer work into one block before the rounds (which fills the integer
//! schedulers and stalls the rounds behind it), from fusing 128-bit shifts into SHLD
//! (several operations on AMD cores), and from merging the two loads of each tweak.
//!
//! This costs about 150 integer operations per group of 16 blocks. On the Zen 5 it was
//! measured on, a group of AES-256 (56 cycles of rounds) hides them: XTS-AES-256 on
//! 4096-byte units went from 0.93 to 0.99 of ECB at kernel level, and 512-byte units run
//! at the 4096-byte rate; a group of AES-128 (40 cycles) does not (0.93 -> 0.86), so
//! 10-round keys keep the vector kernel (docs/PERFORMANCE.md).
#![allow(unsafe_code)]

use super::super::{last_round, Keys, GROUP, REGS};
use super::tail_group;
use crate::block::Block;
use core::arch::asm;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// A group's 16 tweaks in block order, each as its low and high 64-bit word, which is
/// the lane order of the group's 8 registers (register i is the 32 bytes at 32 i).
#[derive(Clone, Copy, Zeroize)]
#[repr(C, align(32))]
struct TweakTable([[u64; 2]; 2 * REGS]);

/// Chains per group in [`next_group_tweaks`]: each covers `2 * REGS / CHAINS` consecutive
/// tweaks, its first one stepped by x^16 from the previous group's and the rest by x.
const CHAINS: usize = 4;

/// How many groups ahead the tweaks are computed.
const AHEAD: usize = 2;

/// `x`, which the compiler cannot see through (an empty assembly block): keeps it from
/// fusing the two shifts of a 128-bit shift into a double-precision shift (SHLD), which
/// costs several operations on AMD cores.
#[inline(always)]
fn opaque_word(mut x: u64) -> u64 {
    // SAFETY: an empty assembly block that passes a register through.
    unsafe { asm!("/* {0} */", inout(reg) x, options(pure, nomem, nostack, preserves_flags)) };
    x
}

/// `t * x^k` for `0 < k < 57` on a tweak (low and high word): the 128-bit shift, and the
/// `k` bits `h` shifted out of the top folded back as the carry-less product h * 0x87
/// (shifts and XORs, no branches, no tables).
#[inline(always)]
fn mul_xk([lo, hi]: [u64; 2], k: u32) -> [u64; 2] {
    let h = opaque_word(hi >> (64 - k));
    let hi = (hi << k) | opaque_word(lo >> (64 - k));
    [(lo << k) ^ h ^ (h << 1) ^ (h << 2) ^ (h << 7), hi]
}

/// `t * x` on a tweak (low and high word): add and add-with-carry double the 128 bits,
/// and the carry out of the top, as a mask (subtract-with-borrow), selects the reduction
/// 0x87. Five operations, no branch.
#[inline(always)]
fn mul_x([mut lo, mut hi]: [u64; 2]) -> [u64; 2] {
    // SAFETY: arithmetic on registers only.
    unsafe {
        asm!(
            "add {lo}, {lo}",
            "adc {hi}, {hi}",
            "sbb {m}, {m}",
            "and {m:e}, 0x87",
            "xor {lo}, {m}",
            lo = inout(reg) lo,
            hi = inout(reg) hi,
            m = out(reg) _,
            options(pure, nomem, nostack),
        )
    };
    [lo, hi]
}

/// Fills `out` with `prev`'s tweaks times x^16 (the next group of the same unit).
#[inline(always)]
fn next_group_tweaks(prev: &TweakTable, out: &mut TweakTable) {
    let len = 2 * REGS / CHAINS;
    for c in 0..CHAINS {
        let mut t = mul_xk(prev.0[c * len], 16);
        out.0[c * len] = t;
        for l in 1..len {
            t = mul_x(t);
            out.0[c * len + l] = t;
        }
    }
}

/// An encrypted tweak as its low and high 64-bit word.
#[inline(always)]
fn words(t: &Block) -> [u64; 2] {
    let (lo, hi) = t.split_at(8);
    [lo, hi].map(|w| u64::from_le_bytes(w.try_into().unwrap()))
}

/// Fills `out` with the tweaks of a unit's first group, T x^0 ... T x^15, from its
/// encrypted tweak T.
#[inline(always)]
fn first_group_tweaks(t: &Block, out: &mut TweakTable) {
    let t = words(t);
    let len = 2 * REGS / CHAINS;
    for c in 0..CHAINS {
        let mut t = if c == 0 {
            t
        } else {
            mul_xk(t, (c * len) as u32)
        };
        out.0[c * len] = t;
        for l in 1..len {
            t = mul_x(t);
            out.0[c * len + l] = t;
        }
    }
}

/// XTS with the tweaks computed in general-purpose registers, `AHEAD` groups ahead into a
/// ring of tables: data units of `unit` bytes (a multiple of 16), one encrypted tweak each,
/// at least one.
///
/// # Safety
/// The vaes backend's CPU features (`k` proves them); `src` readable and `dst` writable
/// for `tweaks.len()` units.
#[target_feature(enable = "avx2,vaes")]
pub(super) unsafe fn xts_gpr_tweaks<const DEC: bool>(
    k: &Keys,
    tweaks: &[Block],
    src: *const u8,
    dst: *mut u8,
    unit: usize,
) {
    let (n, groups) = (tweaks.len(), unit.div_ceil(GROUP));
    let mut ring = [TweakTable([[0; 2]; 2 * REGS]); AHEAD + 1];
    let base = ring.as_mut_ptr();
    let ring_at = |i: usize| base.wrapping_add(i);
    let wrap = |i: usize| if i == AHEAD { 0 } else { i + 1 };
    // The group being prepared: unit `pu`, group `pg` of it, into slot `ps`.
    let (mut pu, mut pg, mut ps) = (0, 0, 0);
    // Where the tweaks of the group in slot `ps` come from.
    let source = |pu: usize, pg: usize, ps: usize| -> Next<'_> {
        if pg > 0 {
            let prev = if ps == 0 { AHEAD } else { ps - 1 };
            // SAFETY: a slot of `ring`, only read while slot `ps` is written.
            Next::Step(unsafe { &*ring_at(prev) })
        } else if pu < n {
            Next::First(&tweaks[pu])
        } else {
            Next::Done
        }
    };
    let advance = |pu: &mut usize, pg: &mut usize, ps: &mut usize| {
        *pg += 1;
        if *pg == groups {
            (*pu, *pg) = (*pu + 1, 0);
        }
        *ps = wrap(*ps);
    };
    for _ in 0..AHEAD {
        // SAFETY: a slot of `ring`, written alone.
        next_tweaks(source(pu, pg, ps), unsafe { &mut *ring_at(ps) });
        advance(&mut pu, &mut pg, &mut ps);
    }
    let mut slot = 0;
    // SAFETY (of the pointer offsets and the groups): `n` units of `unit` bytes are
    // inside both buffers (caller); every group is inside its unit, and the tail goes
    // through a group buffer. Of the ring: the slot read (`slot`), the one written (`ps`,
    // `AHEAD` ahead) and the one it steps from (`ps - 1`) are distinct places of `ring`.
    unsafe {
        for u in 0..n {
            for g in 0..groups {
                let now = &*ring_at(slot);
                let (from, out) = (source(pu, pg, ps), &mut *ring_at(ps));
                let at = u * unit + g * GROUP;
                if g * GROUP + GROUP <= unit {
                    table_group::<DEC>(k, now, src.add(at), dst.add(at), from, out);
                } else {
                    next_tweaks(from, out);
                    let tw = core::array::from_fn(|i| {
                        _mm256_load_si256(now.0.as_ptr().add(2 * i).cast())
                    });
                    tail_group::<DEC>(k, &tw, src.add(at), dst.add(at), unit - g * GROUP);
                }
                advance(&mut pu, &mut pg, &mut ps);
                slot = wrap(slot);
            }
        }
    }
    ring.zeroize();
}

/// Where the next group's tweaks come from.
#[derive(Clone, Copy)]
enum Next<'a> {
    /// The next group of the same unit: these tweaks times x^16.
    Step(&'a TweakTable),
    /// The first group of the next unit, whose encrypted tweak this is.
    First(&'a Block),
    /// No next group.
    Done,
}

/// Fills `out` with the next group's tweaks.
#[inline(always)]
fn next_tweaks(from: Next<'_>, out: &mut TweakTable) {
    match from {
        Next::Step(prev) => next_group_tweaks(prev, out),
        Next::First(t) => first_group_tweaks(t, out),
        Next::Done => {}
    }
}

/// `p` with an address the compiler cannot see through ([`opaque_word`]): loads through it
/// are not merged with earlier loads of the same place (which would keep their values live
/// in registers between the two uses, and spill them).
#[inline(always)]
fn opaque<T>(p: *const T) -> *const T {
    p.with_addr(opaque_word(p.addr() as u64) as usize)
}

/// Round `r` (neither the first nor the last) on the group's registers.
#[inline]
#[target_feature(enable = "avx2,vaes")]
fn round<const DEC: bool>(k: &Keys, r: usize, x: &mut [__m256i; REGS]) {
    let kr = k.key::<DEC>(r);
    for v in x.iter_mut() {
        *v = if DEC {
            _mm256_aesdec_epi128(*v, kr)
        } else {
            _mm256_aesenc_epi128(*v, kr)
        };
    }
}

/// Passes the group's registers and the tweak chains through an empty assembly block,
/// which keeps the compiler from moving the tweak work of a round away from it (it
/// would gather all of it in one block before the rounds).
#[inline]
#[target_feature(enable = "avx2")]
fn fence(x: &mut [__m256i; REGS], c: &mut [[u64; 2]; CHAINS]) {
    // SAFETY: an empty assembly block that passes registers through.
    unsafe {
        asm!(
            "/* {0} {1} {2} {3} {4} {5} {6} {7} {8} {9} {10} {11} {12} {13} {14} {15} */",
            inout(ymm_reg) x[0],
            inout(ymm_reg) x[1],
            inout(ymm_reg) x[2],
            inout(ymm_reg) x[3],
            inout(ymm_reg) x[4],
            inout(ymm_reg) x[5],
            inout(ymm_reg) x[6],
            inout(ymm_reg) x[7],
            inout(reg) c[0][0],
            inout(reg) c[0][1],
            inout(reg) c[1][0],
            inout(reg) c[1][1],
            inout(reg) c[2][0],
            inout(reg) c[2][1],
            inout(reg) c[3][0],
            inout(reg) c[3][1],
            options(pure, nomem, nostack, preserves_flags),
        )
    };
}

/// Work items (tweak steps) per round in [`tweak_work`].
const PER_ROUND: usize = 2;

/// The share of round `r` (from 1) of the next group's tweaks: the chains' first tweaks
/// (from the previous group's or the next unit's encrypted tweak), then their doublings,
/// chain by chain in turn, `PER_ROUND` per round, so that the integer work is spread among
/// the rounds instead of filling the schedulers in one block.
#[inline(always)]
fn tweak_work(r: usize, from: Next<'_>, chains: &mut [[u64; 2]; CHAINS], out: &mut TweakTable) {
    let len = 2 * REGS / CHAINS;
    for e in 0..PER_ROUND {
        let w = (r - 1) * PER_ROUND + e;
        if w < CHAINS {
            let c = w;
            chains[c] = match from {
                Next::Step(prev) => mul_xk(prev.0[c * len], 16),
                Next::First(t) if c == 0 => words(t),
                Next::First(t) => mul_xk(words(t), (c * len) as u32),
                Next::Done => return,
            };
            out.0[c * len] = chains[c];
        } else if w < 2 * REGS {
            if let Next::Done = from {
                return;
            }
            let d = w - CHAINS;
            let (c, pos) = (d % CHAINS, d / CHAINS + 1);
            chains[c] = mul_x(chains[c]);
            out.0[c * len + pos] = chains[c];
        }
    }
}

/// An XTS group with its tweaks read from `tw` (in the whitening and again for the last
/// round key), and a later group's tweaks computed into `out` (from `from`) among its
/// first eight rounds, on the integer units.
///
/// # Safety
/// `src` readable and `dst` writable for one group.
#[inline]
#[target_feature(enable = "avx2,vaes")]
unsafe fn table_group<const DEC: bool>(
    k: &Keys,
    tw: &TweakTable,
    src: *const u8,
    dst: *mut u8,
    from: Next<'_>,
    out: &mut TweakTable,
) {
    let (first, last) = (k.key::<DEC>(0), k.key::<DEC>(k.rounds()));
    let t = tw.0.as_ptr().cast::<__m256i>();
    let mut x = [_mm256_setzero_si256(); REGS];
    for (i, v) in x.iter_mut().enumerate() {
        // SAFETY: register `i` is inside the group (caller) and the (aligned) table.
        let (d, tw) = unsafe {
            (
                _mm256_loadu_si256(src.add(32 * i).cast()),
                _mm256_load_si256(t.add(i)),
            )
        };
        *v = _mm256_xor_si256(d, _mm256_xor_si256(tw, first));
    }
    let mut chains = [[0u64; 2]; CHAINS];
    // Rounds 1 to 8 written out, each with its share of the tweak work (a loop over them
    // stays rolled, and the chains go through memory), then the others.
    macro_rules! rounds_with_work {
        ($($r:literal)*) => {
            $(
                round::<DEC>(k, $r, &mut x);
                tweak_work($r, from, &mut chains, out);
                fence(&mut x, &mut chains);
            )*
        };
    }
    rounds_with_work!(1 2 3 4 5 6 7 8);
    for r in 9..k.rounds() {
        round::<DEC>(k, r, &mut x);
    }
    let t = opaque(t);
    for (i, v) in x.iter().enumerate() {
        // SAFETY: as for the loads.
        let out = last_round::<DEC>(
            *v,
            _mm256_xor_si256(unsafe { _mm256_load_si256(t.add(i)) }, last),
        );
        // SAFETY: as for the loads.
        unsafe { _mm256_storeu_si256(dst.add(32 * i).cast(), out) };
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::SEEDS;
    use super::*;
    use crate::aes_core::xts_mul_alpha;

    /// A table of zeros.
    fn empty() -> TweakTable {
        TweakTable([[0; 2]; 2 * REGS])
    }

    /// Asserts that `tables`, in block order, hold `seed` times x^0, x^1, ... (the scalar
    /// multiply by alpha).
    fn assert_powers(seed: u128, tables: &[&TweakTable]) {
        let mut want = seed;
        for (g, table) in tables.iter().enumerate() {
            for (i, [lo, hi]) in table.0.iter().enumerate() {
                let got = u128::from(*lo) | u128::from(*hi) << 64;
                assert_eq!(got, want, "{seed:#x} group {g} block {i}");
                want = xts_mul_alpha(want);
            }
        }
    }

    /// The integer tweak steps against the scalar multiply by alpha, for tweaks that set
    /// every reduction: a unit's first 16 tweaks and the 16 after them (one step by x^16),
    /// each computed at once (the ring's first groups and a tail group's next ones) and
    /// spread over the rounds ([`tweak_work`], the groups' own path); with no next group,
    /// the spread work leaves the table alone.
    #[test]
    fn integer_tweak_steps_match_the_scalar_multiply() {
        for seed in SEEDS {
            let t = seed.to_le_bytes();
            let (mut first, mut second) = (empty(), empty());
            first_group_tweaks(&t, &mut first);
            next_group_tweaks(&first, &mut second);
            assert_powers(seed, &[&first, &second]);

            let (mut first, mut second, mut none) = (empty(), empty(), empty());
            let mut chains = [[0; 2]; CHAINS];
            for r in 1..=8 {
                tweak_work(r, Next::First(&t), &mut chains, &mut first);
            }
            for r in 1..=8 {
                tweak_work(r, Next::Step(&first), &mut chains, &mut second);
                tweak_work(r, Next::Done, &mut chains, &mut none);
            }
            assert_powers(seed, &[&first, &second]);
            assert_eq!(none.0, empty().0);
        }
    }
}
