//! XTS on zmm: 32 blocks per group, four tweaks per register, computed in registers.
//!
//! Tweak arithmetic as on ymm (`super::super::vaes::xts`): a 128-bit lane times x^k is a
//! shift of the lane, and the bits shifted out of the top, h, folded back as h * 0x87 with
//! one carry-less multiply. Per data unit, the encrypted tweak T is broadcast; four
//! independent multiplies with per-lane shift counts give registers 0 to 3, [T x^4j, ...,
//! T x^(4j+3)], and registers 4 to 7 are those times x^16. After each group every register
//! is multiplied by x^32. The next group's tweaks (or the next unit's first ones) are built
//! before the group's rounds, in registers of their own (32 zmm registers leave room), so
//! their dependency chains run among the rounds. A new unit costs eight multiplies, a group
//! step eight: many 512-byte units per call run close to the rate of long ones.
#![allow(unsafe_code)]

use super::super::scaffold::tail_through_buffer;
use super::{tweaked_group, Keys, GROUP, REGS};
use crate::block::Block;
use core::arch::x86_64::*;

/// XTS over data units of `unit` bytes (a multiple of 16), one encrypted tweak each, at
/// least one.
///
/// # Safety
/// The avx512 backend's CPU features (`k` proves them); `src` readable and `dst` writable
/// for `tweaks.len()` units.
#[target_feature(enable = "avx512f,avx512bw,vaes,vpclmulqdq")]
pub(super) unsafe fn xts_zmm<const DEC: bool>(
    k: &Keys,
    tweaks: &[Block],
    src: *const u8,
    dst: *mut u8,
    unit: usize,
) {
    let n = tweaks.len();
    let groups = unit / GROUP;
    let tail = !unit.is_multiple_of(GROUP);
    let mut tw = first_tweaks(&tweaks[0]);
    // SAFETY (of the pointer offsets and the groups): `n` units of `unit` bytes are inside
    // both buffers (caller); every group is inside its unit, and the tail goes through a
    // group buffer.
    unsafe {
        for u in 0..n {
            let (src, dst) = (src.add(u * unit), dst.add(u * unit));
            let next_unit = &tweaks[(u + 1).min(n - 1)];
            for g in 0..groups {
                let next = if g + 1 < groups || tail {
                    tw.map(|v| mul_x32(v))
                } else {
                    first_tweaks(next_unit)
                };
                let at = g * GROUP;
                tweaked_group::<REGS, DEC>(k, &tw, src.add(at), dst.add(at));
                tw = next;
            }
            if tail {
                let at = groups * GROUP;
                let next = first_tweaks(next_unit);
                short_group::<DEC>(k, &tw, src.add(at), dst.add(at), unit - at);
                tw = next;
            }
        }
    }
}

/// The last `len` bytes of a unit, fewer than a group (a multiple of 16): its whole
/// registers in place, all in flight together, then the one to three blocks left through
/// one register's buffer. (The whole group through a group's buffer did twice the work
/// and more for a short unit: a 256-byte unit ran at a third of the ymm kernel's rate.)
///
/// # Safety
/// As for [`xts_zmm`], for `len < GROUP` bytes at `src` and `dst`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vaes,vpclmulqdq")]
unsafe fn short_group<const DEC: bool>(
    k: &Keys,
    tw: &[__m512i; REGS],
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let whole = len / 64;
    macro_rules! registers {
        ($($n:literal)+) => {
            match whole {
                $($n => {
                    let t: &[__m512i; $n] = tw[..$n].try_into().expect("n <= REGS");
                    // SAFETY: `$n` registers of 64 bytes lie inside the `len` bytes.
                    unsafe { tweaked_group::<$n, DEC>(k, t, src, dst) }
                })+
                _ => {}
            }
        };
    }
    registers!(1 2 3 4 5 6 7);
    let rest = len - whole * 64;
    if rest > 0 {
        let t = [tw[whole]];
        let at = whole * 64;
        // SAFETY: the `rest` bytes from `at` are the end of the `len` bytes; the buffer
        // holds one register.
        unsafe {
            tail_through_buffer::<64>(src.add(at), dst.add(at), rest, |s, d| {
                tweaked_group::<1, DEC>(k, &t, s, d)
            })
        };
    }
}

/// `t * x^k` in each lane, `k` given per quadword in `shl` (`0 <= k < 57`): the shift,
/// the bits crossing from the low to the high quadword, and the `k` bits shifted out of
/// the top folded back as h * 0x87.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x_pow(t: __m512i, shl: __m512i) -> __m512i {
    let poly = _mm512_set_epi64(0, 0x87, 0, 0x87, 0, 0x87, 0, 0x87);
    let shr = _mm512_sub_epi64(_mm512_set1_epi64(64), shl);
    let carry = _mm512_srlv_epi64(t, shr);
    let shifted = _mm512_sllv_epi64(t, shl);
    let cross = _mm512_bslli_epi128::<8>(carry);
    let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly);
    _mm512_ternarylogic_epi64::<0x96>(shifted, cross, folded)
}

/// `t * x^ROT` for `ROT` of 16 or 32 (a whole number of bytes) in each lane: the lane
/// rotated left by `ROT` bits is `t << ROT` with the bits h shifted out of the top in its
/// low bits; the product wants h * 0x87 there instead of h, so h * 0x86 (at most ROT + 8
/// bits, inside the low quadword), one carry-less multiply of the isolated low bits, is
/// XORed in.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x_rot<const BYTES: i32, const MASK: u64>(t: __m512i) -> __m512i {
    let poly = _mm512_set_epi64(0, 0x86, 0, 0x86, 0, 0x86, 0, 0x86);
    let r = _mm512_alignr_epi8::<BYTES>(t, t);
    // The low `16 - BYTES` bytes of each lane's rotation are h; the mask keeps the bytes
    // of h (byte-granular masked move).
    let h = _mm512_maskz_mov_epi8(MASK, r);
    let folded = _mm512_clmulepi64_epi128::<0x00>(h, poly);
    _mm512_xor_si512(r, folded)
}

/// `t * x^32` in each lane (one group of 32 blocks on).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x32(t: __m512i) -> __m512i {
    // Rotate each lane left by 4 bytes (alignr by 12), keep its bytes 0..4.
    mul_x_rot::<12, 0x000f_000f_000f_000f>(t)
}

/// `t * x^16` in each lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x16(t: __m512i) -> __m512i {
    mul_x_rot::<14, 0x0003_0003_0003_0003>(t)
}

/// The tweaks of a unit's first 32 blocks, [T x^4j, ..., T x^(4j+3)] in register j, from
/// the encrypted tweak T.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn first_tweaks(t: &Block) -> [__m512i; REGS] {
    // SAFETY: `t` is 16 readable bytes; unaligned load.
    let all = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(t.as_ptr().cast()) });
    let mut out = [_mm512_setzero_si512(); REGS];
    for (j, v) in out.iter_mut().enumerate().take(REGS / 2) {
        let p = |l: usize| (4 * j + l) as i64;
        *v = mul_x_pow(
            all,
            _mm512_set_epi64(p(3), p(3), p(2), p(2), p(1), p(1), p(0), p(0)),
        );
    }
    for j in REGS / 2..REGS {
        out[j] = mul_x16(out[j - REGS / 2]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aes_core::{xts_mul_alpha, Backend};

    /// Encrypted tweaks whose top bits set every reduction.
    const SEEDS: [u128; 7] = [
        0,
        u128::MAX,
        1 << 127,
        0xffff << 112,
        0xffff_ffff << 96,
        0x8000_0001 << 96,
        0x1234_5678_9abc_def0_0fed_cba9_8765_4321,
    ];

    /// The zmm tweak steps against the scalar multiply by alpha: a unit's first 32 tweaks
    /// and the 64 after them (two steps by x^32).
    #[test]
    fn zmm_tweak_steps_match_the_scalar_multiply() {
        if let Err(e) = Backend::Avx512.check_cpu() {
            eprintln!("avx512: SKIPPED ({e})");
            return;
        }
        for seed in SEEDS {
            // SAFETY: the CPU has the avx512 backend's features (checked above).
            let groups = unsafe {
                let g0 = first_tweaks(&seed.to_le_bytes());
                let g1 = g0.map(|v| mul_x32(v));
                [g0, g1, g1.map(|v| mul_x32(v))]
            };
            let mut want = seed;
            for (g, regs) in groups.iter().enumerate() {
                for (i, r) in regs.iter().enumerate() {
                    let mut b = [0u8; 64];
                    // SAFETY: as above; `b` is 64 writable bytes.
                    unsafe { _mm512_storeu_si512(b.as_mut_ptr().cast(), *r) };
                    for l in 0..4 {
                        let got = u128::from_le_bytes(b[16 * l..16 * l + 16].try_into().unwrap());
                        assert_eq!(got, want, "{seed:#x} group {g} register {i} lane {l}");
                        want = xts_mul_alpha(want);
                    }
                }
            }
        }
    }
}
