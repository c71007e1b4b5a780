//! The `avx2` Serpent backend: the bitsliced cipher on ymm registers, for ECB of many
//! blocks (the unit tweaks) and XTS over whole data units.
//!
//! # Design
//! Target: x86-64 with AVX2 (Haswell and later, Zen and later), for the CPUs without
//! AVX-512; the structure is that of the `avx512` backend (read its design notes first),
//! narrowed to what AVX2 has.
//!
//! ## Layout: 8 blocks per step
//! Four ymm registers hold 8 blocks as loaded (two per register, one per 128-bit lane); the
//! same in-lane 4x4 transpose of 32-bit words makes register `j` hold word `j` of the 8
//! blocks. One group per step: AVX2 has 16 registers, and a second group's state and
//! temporaries would spill.
//!
//! ## One round
//! - the round key: four `vpxor` with the key word broadcast;
//! - the S-box: without `vpternlogd`, each S-box is evaluated from its algebraic normal
//!   form (the portable backend's formulas, computed at compile time from the
//!   specification's tables): the 11 products of two or more input bits (`vpand`), then for
//!   each output bit the XOR of its monomials (and an all-ones constant where the form
//!   has one). The tables are constants and the S-box number a const parameter, so the
//!   compiler unrolls the selection and emits only the instructions each S-box needs;
//! - the linear transformation: rotations as a shift each way and an OR (AVX2 has no
//!   rotate), the shifts and XORs of the specification.
//!
//! ## XTS
//! The tweaks of a step are four ymm registers in memory order (register `r` = the tweaks
//! of blocks `2r`, `2r+1`), XORed in before the transpose; a unit's first 8 are `T x^i`
//! made with per-quadword shifts, each next step multiplies by `x^8`, the bits shifted out
//! of a lane folded back as `h * 0x87` with shifts (no carry-less multiply, so plain AVX2
//! suffices). A unit's last step of fewer than 8 blocks runs through a zeroed buffer.
//!
//! ## Constant time
//! No table lookups, no branch on data or keys.
//!
//! Calling contract: [`ecb`] and [`xts`] check that the CPU has the backend's features and
//! panic otherwise, which is what makes the `unsafe` calls of the `#[target_feature]`
//! functions sound.
#![allow(unsafe_code)]

use super::soft::{RoundKeys, ANF, ANF_INV};
use super::SerpentBackend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Bytes of one step: 8 blocks.
const STEP: usize = 128;
/// ymm registers of data (or tweaks) in one step.
const REGS: usize = 4;

/// Four words of 8 blocks: register `j` holds word `j` of each.
type State = [__m256i; 4];

/// S-box `S` (its inverse when `INV`) from its algebraic normal form.
#[inline]
#[target_feature(enable = "avx2")]
fn sbox<const S: usize, const INV: bool>(x: &State) -> State {
    let anf = if INV { ANF_INV[S] } else { ANF[S] };
    // Monomial m: the product of the input bits set in m (m = 0: the constant one),
    // written out: the compiler neither unrolls a loop over them nor drops unused ones
    // reliably, and it must see each selection below as a constant.
    let [x0, x1, x2, x3] = *x;
    let and = _mm256_and_si256;
    let (m3, m5, m6, m9, m10, m12) = (
        and(x0, x1),
        and(x0, x2),
        and(x1, x2),
        and(x0, x3),
        and(x1, x3),
        and(x2, x3),
    );
    let m7 = and(m3, x2);
    let (m11, m13, m14, m15) = (and(m3, x3), and(m5, x3), and(m6, x3), and(m7, x3));
    let mono = [
        _mm256_set1_epi32(-1),
        x0,
        x1,
        m3,
        x2,
        m5,
        m6,
        m7,
        x3,
        m9,
        m10,
        m11,
        m12,
        m13,
        m14,
        m15,
    ];
    // The XOR of the monomials of output bit `b`, unrolled.
    macro_rules! bit {
        ($b:literal: $($m:literal)*) => {{
            let mut y = _mm256_setzero_si256();
            $(if anf[$b] >> $m & 1 == 1 {
                y = _mm256_xor_si256(y, mono[$m]);
            })*
            y
        }};
    }
    [
        bit!(0: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15),
        bit!(1: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15),
        bit!(2: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15),
        bit!(3: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15),
    ]
}

/// Rotates each word left by `L` (`R` = 32 - `L`).
#[inline]
#[target_feature(enable = "avx2")]
fn rol<const L: i32, const R: i32>(v: __m256i) -> __m256i {
    _mm256_or_si256(_mm256_slli_epi32::<L>(v), _mm256_srli_epi32::<R>(v))
}

/// XORs of three.
#[inline]
#[target_feature(enable = "avx2")]
fn xor3(a: __m256i, b: __m256i, c: __m256i) -> __m256i {
    _mm256_xor_si256(_mm256_xor_si256(a, b), c)
}

/// XORs round key `k` in.
#[inline]
#[target_feature(enable = "avx2")]
fn add_key(x: &mut State, k: &[u32; 4]) {
    for (w, kw) in x.iter_mut().zip(k) {
        *w = _mm256_xor_si256(*w, _mm256_set1_epi32(*kw as i32));
    }
}

/// The linear transformation of the specification.
#[inline]
#[target_feature(enable = "avx2")]
fn linear(x: &mut State) {
    let x0 = rol::<13, 19>(x[0]);
    let x2 = rol::<3, 29>(x[2]);
    let x1 = xor3(x[1], x0, x2);
    let x3 = xor3(x[3], x2, _mm256_slli_epi32::<3>(x0));
    let x1 = rol::<1, 31>(x1);
    let x3 = rol::<7, 25>(x3);
    let x0 = xor3(x0, x1, x3);
    let x2 = xor3(x2, x3, _mm256_slli_epi32::<7>(x1));
    *x = [rol::<5, 27>(x0), x1, rol::<22, 10>(x2), x3];
}

/// The inverse of [`linear`].
#[inline]
#[target_feature(enable = "avx2")]
fn linear_inv(x: &mut State) {
    let x2 = rol::<10, 22>(x[2]);
    let x0 = rol::<27, 5>(x[0]);
    let x2 = xor3(x2, x[3], _mm256_slli_epi32::<7>(x[1]));
    let x0 = xor3(x0, x[1], x[3]);
    let x3 = rol::<25, 7>(x[3]);
    let x1 = rol::<31, 1>(x[1]);
    let x3 = xor3(x3, x2, _mm256_slli_epi32::<3>(x0));
    let x1 = xor3(x1, x0, x2);
    *x = [rol::<19, 13>(x0), x1, rol::<29, 3>(x2), x3];
}

/// Eight encryption rounds with S0..S7 and the keys from `k[r]`, the last without the
/// linear transformation when `LAST`.
#[inline]
#[target_feature(enable = "avx2")]
fn enc8<const LAST: bool>(k: &RoundKeys, r: usize, x: &mut State) {
    macro_rules! round {
        ($s:literal) => {
            add_key(x, &k[r + $s]);
            *x = sbox::<$s, false>(x);
            if !LAST || $s < 7 {
                linear(x);
            }
        };
    }
    round!(0);
    round!(1);
    round!(2);
    round!(3);
    round!(4);
    round!(5);
    round!(6);
    round!(7);
}

/// Eight decryption rounds with the inverses of S7..S0 and the keys down to `k[r]`, the
/// first without the inverse linear transformation when `FIRST`.
#[inline]
#[target_feature(enable = "avx2")]
fn dec8<const FIRST: bool>(k: &RoundKeys, r: usize, x: &mut State) {
    macro_rules! round {
        ($s:literal) => {
            if !FIRST || $s < 7 {
                linear_inv(x);
            }
            *x = sbox::<$s, true>(x);
            add_key(x, &k[r + $s]);
        };
    }
    round!(7);
    round!(6);
    round!(5);
    round!(4);
    round!(3);
    round!(2);
    round!(1);
    round!(0);
}

/// The 32 rounds of encryption.
#[inline]
#[target_feature(enable = "avx2")]
fn encrypt(k: &RoundKeys, x: &mut State) {
    for r in [0, 8, 16] {
        enc8::<false>(k, r, x);
    }
    enc8::<true>(k, 24, x);
    add_key(x, &k[32]);
}

/// The 32 rounds of decryption.
#[inline]
#[target_feature(enable = "avx2")]
fn decrypt(k: &RoundKeys, x: &mut State) {
    add_key(x, &k[32]);
    dec8::<true>(k, 24, x);
    for r in [16, 8, 0] {
        dec8::<false>(k, r, x);
    }
}

/// The 4x4 transpose of 32-bit words inside each 128-bit lane (its own inverse).
#[inline]
#[target_feature(enable = "avx2")]
fn transpose(v: State) -> State {
    let t0 = _mm256_unpacklo_epi32(v[0], v[1]);
    let t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    let t2 = _mm256_unpacklo_epi32(v[2], v[3]);
    let t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ]
}

/// One step: the 8 blocks of `buf`, each XORed with its tweak before and after the cipher
/// (`tw`; zeros for ECB).
#[inline]
#[target_feature(enable = "avx2")]
fn step<const DEC: bool>(k: &RoundKeys, tw: &[__m256i; REGS], buf: &mut [u8; STEP]) {
    let mut v = [_mm256_setzero_si256(); REGS];
    for (r, x) in v.iter_mut().enumerate() {
        // SAFETY: bytes 32r..32r+32 are inside the STEP-byte array; unaligned load.
        let d = unsafe { _mm256_loadu_si256(buf.as_ptr().add(32 * r).cast()) };
        *x = _mm256_xor_si256(d, tw[r]);
    }
    let mut x = transpose(v);
    if DEC {
        decrypt(k, &mut x);
    } else {
        encrypt(k, &mut x);
    }
    for (r, w) in transpose(x).into_iter().enumerate() {
        let out = _mm256_xor_si256(w, tw[r]);
        // SAFETY: bytes 32r..32r+32 are inside the STEP-byte array; unaligned store.
        unsafe { _mm256_storeu_si256(buf.as_mut_ptr().add(32 * r).cast(), out) };
    }
}

/// [`step`] on a piece of fewer than 8 blocks, through a zeroed buffer wiped afterwards.
#[inline]
#[target_feature(enable = "avx2")]
fn short_step<const DEC: bool>(k: &RoundKeys, tw: &[__m256i; REGS], piece: &mut [u8]) {
    let mut buf = [0u8; STEP];
    buf[..piece.len()].copy_from_slice(piece);
    step::<DEC>(k, tw, &mut buf);
    piece.copy_from_slice(&buf[..piece.len()]);
    buf.zeroize();
}

/// `t * x^k` in each 128-bit lane, `k` (below 58) in both quadwords of the lane in `shl`
/// (see the `avx512` backend's `mul_x_pow`).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_x_pow(t: __m256i, shl: __m256i) -> __m256i {
    let shr = _mm256_sub_epi64(_mm256_set1_epi64x(64), shl);
    let carry = _mm256_srlv_epi64(t, shr);
    let shifted = _mm256_sllv_epi64(t, shl);
    let cross = _mm256_bslli_epi128::<8>(carry);
    let h = _mm256_bsrli_epi128::<8>(carry);
    let folded = xor3(h, _mm256_slli_epi64::<1>(h), _mm256_slli_epi64::<2>(h));
    let folded = _mm256_xor_si256(folded, _mm256_slli_epi64::<7>(h));
    xor3(shifted, cross, folded)
}

/// The tweaks of a unit's first step from its encrypted tweak `t`: register `r` holds
/// `t x^(2r)` and `t x^(2r+1)`.
#[inline]
#[target_feature(enable = "avx2")]
fn first_tweaks(t: &[u8; 16]) -> [__m256i; REGS] {
    // SAFETY: `t` is 16 readable bytes; unaligned load.
    let both = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(t.as_ptr().cast()) });
    core::array::from_fn(|r| {
        let (lo, hi) = (2 * r as i64, 2 * r as i64 + 1);
        mul_x_pow(both, _mm256_set_epi64x(hi, hi, lo, lo))
    })
}

/// XTS over the units of `data` (`unit` bytes each, a multiple of 16), unit `i` under the
/// encrypted tweak `tweaks[i]`.
#[target_feature(enable = "avx2")]
fn xts_units<const DEC: bool>(k: &RoundKeys, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    let next = _mm256_set1_epi64x(8);
    for (u, t) in data.chunks_exact_mut(unit).zip(tweaks) {
        let mut tw = first_tweaks(t);
        let mut steps = u.chunks_exact_mut(STEP);
        for s in &mut steps {
            step::<DEC>(k, &tw, s.try_into().expect("a whole step"));
            for t in tw.iter_mut() {
                *t = mul_x_pow(*t, next);
            }
        }
        let rest = steps.into_remainder();
        if !rest.is_empty() {
            short_step::<DEC>(k, &tw, rest);
        }
    }
}

/// ECB over the whole blocks of `data`.
#[target_feature(enable = "avx2")]
fn ecb_blocks<const DEC: bool>(k: &RoundKeys, data: &mut [u8]) {
    let zero = [_mm256_setzero_si256(); REGS];
    let mut steps = data.chunks_exact_mut(STEP);
    for s in &mut steps {
        step::<DEC>(k, &zero, s.try_into().expect("a whole step"));
    }
    let rest = steps.into_remainder();
    if !rest.is_empty() {
        short_step::<DEC>(k, &zero, rest);
    }
}

/// Panics unless this CPU runs the backend: what makes the calls below sound.
fn check() {
    assert!(
        SerpentBackend::Avx2.check_cpu().is_ok(),
        "serpent avx2 kernel called on a cpu without avx2"
    );
}

/// Encrypts or decrypts the whole blocks of `data` in place (ECB).
pub(super) fn ecb(k: &RoundKeys, encrypt: bool, data: &mut [u8]) {
    check();
    let len = data.len() / 16 * 16;
    let data = &mut data[..len];
    // SAFETY: the CPU has AVX2 and the OS saves ymm state (checked above).
    unsafe {
        if encrypt {
            ecb_blocks::<false>(k, data)
        } else {
            ecb_blocks::<true>(k, data)
        }
    }
}

/// XTS over `tweaks.len()` units of `unit` bytes (a multiple of 16) at the start of `data`,
/// unit `i` under the encrypted tweak `tweaks[i]`.
pub(super) fn xts(k: &RoundKeys, encrypt: bool, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    check();
    assert!(unit > 0 && unit.is_multiple_of(16) && data.len() >= unit * tweaks.len());
    // SAFETY: the CPU has AVX2 and the OS saves ymm state (checked above).
    unsafe {
        if encrypt {
            xts_units::<false>(k, tweaks, unit, data)
        } else {
            xts_units::<true>(k, tweaks, unit, data)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::soft::{inverses, SBOX};
    use super::*;

    /// Runs `f` when the CPU has the backend's features; otherwise prints why not.
    fn on_cpu(f: impl FnOnce()) {
        match SerpentBackend::Avx2.check_cpu() {
            Ok(()) => f(),
            Err(e) => eprintln!("skipped: serpent avx2: {e}"),
        }
    }

    /// Every entry of every S-box and inverse S-box, as this code evaluates it.
    #[test]
    fn sboxes_reproduce_the_tables() {
        on_cpu(|| {
            // SAFETY: the CPU has AVX2 (checked by `on_cpu`).
            unsafe { check_tables() }
        });
    }

    #[target_feature(enable = "avx2")]
    fn check_tables() {
        let word = |j: u32| (0..32u32).map(|p| ((p % 16) >> j & 1) << p).sum::<u32>();
        let x: State = core::array::from_fn(|j| _mm256_set1_epi32(word(j as u32) as i32));
        let outs: [[State; 8]; 2] = [
            [
                sbox::<0, false>(&x),
                sbox::<1, false>(&x),
                sbox::<2, false>(&x),
                sbox::<3, false>(&x),
                sbox::<4, false>(&x),
                sbox::<5, false>(&x),
                sbox::<6, false>(&x),
                sbox::<7, false>(&x),
            ],
            [
                sbox::<0, true>(&x),
                sbox::<1, true>(&x),
                sbox::<2, true>(&x),
                sbox::<3, true>(&x),
                sbox::<4, true>(&x),
                sbox::<5, true>(&x),
                sbox::<6, true>(&x),
                sbox::<7, true>(&x),
            ],
        ];
        let tables = [SBOX, inverses()];
        for (dir, (out, table)) in outs.iter().zip(tables).enumerate() {
            for s in 0..8 {
                let lane0: [u32; 4] =
                    core::array::from_fn(|j| _mm256_extract_epi32::<0>(out[s][j]) as u32);
                for p in 0..32 {
                    let got = (0..4).map(|j| (lane0[j] >> p & 1) << j).sum::<u32>();
                    let want = u32::from(table[s][p % 16]);
                    assert_eq!(got, want, "direction {dir}, S{s}({})", p % 16);
                }
            }
        }
    }

    /// The ymm tweaks of a unit's first steps against the scalar multiply by alpha.
    #[test]
    fn tweak_steps_match_the_scalar_multiply() {
        on_cpu(|| {
            // SAFETY: the CPU has AVX2 (checked by `on_cpu`).
            unsafe { check_tweaks() }
        });
    }

    #[target_feature(enable = "avx2")]
    fn check_tweaks() {
        let next = _mm256_set1_epi64x(8);
        for seed in [
            1u128,
            u128::MAX,
            0x8000_0000 << 96,
            0xdead_beef_u128 << 90 | 0x1234,
        ] {
            let mut want = seed;
            let mut tw = first_tweaks(&seed.to_le_bytes());
            for _ in 0..5 {
                for reg in tw {
                    let mut b = [0u8; 32];
                    // SAFETY: `b` is 32 writable bytes; unaligned store.
                    unsafe { _mm256_storeu_si256(b.as_mut_ptr().cast(), reg) };
                    for c in b.chunks_exact(16) {
                        assert_eq!(u128::from_le_bytes(c.try_into().unwrap()), want);
                        let carry = want >> 127;
                        want = (want << 1) ^ (0x87 * carry);
                    }
                }
                tw = tw.map(|t| mul_x_pow(t, next));
            }
        }
    }
}
