//! The `avx512` Serpent backend: the bitsliced cipher on zmm registers, for ECB of many
//! blocks (the unit tweaks) and XTS over whole data units.
//!
//! # Design
//! Target: x86-64 with AVX-512 F (`vpternlogd`, `vprold`, 32 zmm registers); tuned on the
//! Zen 5 VM it was written on (full-width 512-bit units).
//!
//! ## Layout: 16 blocks per group, 32 per step
//! Serpent's own bitsliced form works on a block's four 32-bit words; bit `j` of the four
//! words is one S-box input. Four zmm registers hold 16 blocks as loaded (four blocks each,
//! one per 128-bit lane); a 4x4 transpose of 32-bit words inside each lane (`vpunpck*dq`,
//! `vpunpck*qdq`: eight instructions) makes register `j` hold word `j` of all 16 blocks, so
//! one instruction does a step of the cipher for 16 blocks. The order of the blocks inside
//! a register is a lane permutation, undone by the same transpose on the way out (it is
//! its own inverse), and irrelevant in between: the blocks are independent. A step is two
//! such groups, 32 blocks = 512 bytes (one VeraCrypt data unit), run side by side so that
//! one group's dependency chains fill the other's latency: with one group per step (16
//! blocks, `GROUPS = 1`) `serpent-256-xts/4096` ran at 1.10-1.34 GB/s against 2.2 GB/s
//! with two, in the same conditions (`sectorcrypt bench`, three runs each). Three groups
//! would leave a short step in every 4 KiB unit, and four would need the tweaks stepped by
//! `x^64`, beyond the shift-and-fold multiply below; neither was tried.
//!
//! ## One round
//! - the round key: four `vpxord` with the key word broadcast from memory;
//! - the S-box: each output bit is a 4-input boolean function, split on input bit 0 into
//!   two 3-input functions of bits 1..3 (one `vpternlogd` each, the immediate being that
//!   half of the truth table) and a multiplexer on bit 0 (one more `vpternlogd`, 0xca):
//!   twelve instructions per S-box, the immediates computed at compile time from the
//!   specification's tables ([`ternlog_tables`]); a test checks every entry of every
//!   S-box and inverse S-box as this code evaluates it;
//! - the linear transformation: `vprold` for the rotations, `vpslld` for the two shifts,
//!   and a three-way XOR (`vpternlogd` 0x96) for each of the four mixing steps: twelve
//!   instructions (its inverse the same with `vprord`).
//!
//! That is 28 instructions per round per 16 blocks, 896 per 256 bytes for the 32 rounds.
//!
//! ## XTS
//! The tweaks of a step live in eight zmm registers, four blocks' tweaks each, in memory
//! order (register `r` = the tweaks of blocks `4r..4r+3`), so they are XORed into the data
//! as loaded, before the transpose. A unit's first 32 tweaks are its encrypted tweak `T`
//! times `x^i` (`i` = 0..31) made directly with per-quadword shifts ([`mul_x_pow`]); each
//! next step multiplies every register by `x^32`. The `x^k` multiply needs no carry-less
//! multiply: the `k <= 57` bits shifted out of the top of a 128-bit lane fold back as
//! `h * 0x87 = h ^ h << 1 ^ h << 2 ^ h << 7` (0x87: x^128 = x^7 + x^2 + x + 1), so only
//! AVX-512 F is needed. A unit's last step of fewer than 32 blocks (unit lengths that are
//! not multiples of 512; VeraCrypt's never are) runs through a zeroed 512-byte buffer on the
//! stack, wiped afterwards.
//!
//! ## Constant time
//! No table lookups, no branch on data or keys: the S-boxes are boolean functions in
//! registers, the round keys are read at offsets that depend on the round number only.
//!
//! Calling contract: [`ecb`] and [`xts`] check that the CPU has the backend's features and
//! panic otherwise, which is what makes the `unsafe` calls of the `#[target_feature]`
//! functions sound.
#![allow(unsafe_code)]

use super::soft::{inverses, RoundKeys, SBOX};
use super::SerpentBackend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Groups of 16 blocks run side by side in one step.
const GROUPS: usize = 2;
/// Bytes of one step: 32 blocks.
const STEP: usize = 256 * GROUPS;
/// zmm registers of data (or tweaks) in one step.
const REGS: usize = 4 * GROUPS;

/// The `vpternlogd` immediates of each S-box: `[s][bit][half]` is the truth table of output
/// bit `bit` of S-box `s` as a function of input bits 3, 2, 1 (the instruction's operands
/// A, B, C: truth-table index `4 x3 + 2 x2 + x1`), with input bit 0 clear (`half` 0) or
/// set (`half` 1).
const fn ternlog_tables(boxes: [[u8; 16]; 8]) -> [[[i32; 2]; 4]; 8] {
    let mut out = [[[0i32; 2]; 4]; 8];
    let mut s = 0;
    while s < 8 {
        let mut b = 0;
        while b < 4 {
            let mut half = 0;
            while half < 2 {
                let mut idx = 0;
                while idx < 8 {
                    if (boxes[s][(idx << 1) | half] >> b) & 1 == 1 {
                        out[s][b][half] |= 1 << idx;
                    }
                    idx += 1;
                }
                half += 1;
            }
            b += 1;
        }
        s += 1;
    }
    out
}

/// The immediates of S0..S7.
const ENC: [[[i32; 2]; 4]; 8] = ternlog_tables(SBOX);
/// The immediates of the inverse S-boxes.
const DEC: [[[i32; 2]; 4]; 8] = ternlog_tables(inverses());
/// `vpternlogd` immediate of `A ? B : C` (truth table over the index 4A + 2B + C).
const MUX: i32 = 0xca;
/// `vpternlogd` immediate of `A ^ B ^ C`.
const XOR3: i32 = 0x96;

/// Four words of 16 blocks: register `j` holds word `j` of each.
type State = [__m512i; 4];

/// One output bit of an S-box whose halves (input bit 0 clear, set) are `LO` and `HI`.
#[inline]
#[target_feature(enable = "avx512f")]
fn out_bit<const LO: i32, const HI: i32>(x: &State) -> __m512i {
    let lo = _mm512_ternarylogic_epi32::<LO>(x[3], x[2], x[1]);
    let hi = _mm512_ternarylogic_epi32::<HI>(x[3], x[2], x[1]);
    _mm512_ternarylogic_epi32::<MUX>(x[0], hi, lo)
}

/// S-box `$s` of the immediates `$t` (`ENC` or `DEC`) applied to the state `$x`.
macro_rules! sbox {
    ($t:ident, $s:literal, $x:expr) => {{
        let x: &State = $x;
        [
            out_bit::<{ $t[$s][0][0] }, { $t[$s][0][1] }>(x),
            out_bit::<{ $t[$s][1][0] }, { $t[$s][1][1] }>(x),
            out_bit::<{ $t[$s][2][0] }, { $t[$s][2][1] }>(x),
            out_bit::<{ $t[$s][3][0] }, { $t[$s][3][1] }>(x),
        ]
    }};
}

/// XORs round key `k` into every group.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_key<const G: usize>(x: &mut [State; G], k: &[u32; 4]) {
    for s in x.iter_mut() {
        for (w, kw) in s.iter_mut().zip(k) {
            *w = _mm512_xor_si512(*w, _mm512_set1_epi32(*kw as i32));
        }
    }
}

/// The linear transformation of the specification.
#[inline]
#[target_feature(enable = "avx512f")]
fn linear(x: &mut State) {
    let x0 = _mm512_rol_epi32::<13>(x[0]);
    let x2 = _mm512_rol_epi32::<3>(x[2]);
    let x1 = _mm512_ternarylogic_epi32::<XOR3>(x[1], x0, x2);
    let x3 = _mm512_ternarylogic_epi32::<XOR3>(x[3], x2, _mm512_slli_epi32::<3>(x0));
    let x1 = _mm512_rol_epi32::<1>(x1);
    let x3 = _mm512_rol_epi32::<7>(x3);
    let x0 = _mm512_ternarylogic_epi32::<XOR3>(x0, x1, x3);
    let x2 = _mm512_ternarylogic_epi32::<XOR3>(x2, x3, _mm512_slli_epi32::<7>(x1));
    *x = [
        _mm512_rol_epi32::<5>(x0),
        x1,
        _mm512_rol_epi32::<22>(x2),
        x3,
    ];
}

/// The inverse of [`linear`].
#[inline]
#[target_feature(enable = "avx512f")]
fn linear_inv(x: &mut State) {
    let x2 = _mm512_ror_epi32::<22>(x[2]);
    let x0 = _mm512_ror_epi32::<5>(x[0]);
    let x2 = _mm512_ternarylogic_epi32::<XOR3>(x2, x[3], _mm512_slli_epi32::<7>(x[1]));
    let x0 = _mm512_ternarylogic_epi32::<XOR3>(x0, x[1], x[3]);
    let x3 = _mm512_ror_epi32::<7>(x[3]);
    let x1 = _mm512_ror_epi32::<1>(x[1]);
    let x3 = _mm512_ternarylogic_epi32::<XOR3>(x3, x2, _mm512_slli_epi32::<3>(x0));
    let x1 = _mm512_ternarylogic_epi32::<XOR3>(x1, x0, x2);
    *x = [
        _mm512_ror_epi32::<13>(x0),
        x1,
        _mm512_ror_epi32::<3>(x2),
        x3,
    ];
}

/// One encryption round with S-box `$s`: the key, the S-box, the linear transformation.
macro_rules! enc_round {
    ($x:ident, $k:expr, $s:literal) => {
        add_key(&mut $x, $k);
        for g in $x.iter_mut() {
            *g = sbox!(ENC, $s, g);
            linear(g);
        }
    };
}

/// One decryption round with inverse S-box `$s`: the inverse linear transformation, the
/// inverse S-box, the key.
macro_rules! dec_round {
    ($x:ident, $k:expr, $s:literal) => {
        for g in $x.iter_mut() {
            linear_inv(g);
            *g = sbox!(DEC, $s, g);
        }
        add_key(&mut $x, $k);
    };
}

/// The 32 rounds of encryption on `G` groups.
#[inline]
#[target_feature(enable = "avx512f")]
fn encrypt<const G: usize>(k: &RoundKeys, mut x: [State; G]) -> [State; G] {
    for i in 0..3 {
        let r = 8 * i;
        enc_round!(x, &k[r], 0);
        enc_round!(x, &k[r + 1], 1);
        enc_round!(x, &k[r + 2], 2);
        enc_round!(x, &k[r + 3], 3);
        enc_round!(x, &k[r + 4], 4);
        enc_round!(x, &k[r + 5], 5);
        enc_round!(x, &k[r + 6], 6);
        enc_round!(x, &k[r + 7], 7);
    }
    enc_round!(x, &k[24], 0);
    enc_round!(x, &k[25], 1);
    enc_round!(x, &k[26], 2);
    enc_round!(x, &k[27], 3);
    enc_round!(x, &k[28], 4);
    enc_round!(x, &k[29], 5);
    enc_round!(x, &k[30], 6);
    // The last round: no linear transformation, a final key instead.
    add_key(&mut x, &k[31]);
    for g in x.iter_mut() {
        *g = sbox!(ENC, 7, g);
    }
    add_key(&mut x, &k[32]);
    x
}

/// The 32 rounds of decryption on `G` groups.
#[inline]
#[target_feature(enable = "avx512f")]
fn decrypt<const G: usize>(k: &RoundKeys, mut x: [State; G]) -> [State; G] {
    add_key(&mut x, &k[32]);
    for g in x.iter_mut() {
        *g = sbox!(DEC, 7, g);
    }
    add_key(&mut x, &k[31]);
    dec_round!(x, &k[30], 6);
    dec_round!(x, &k[29], 5);
    dec_round!(x, &k[28], 4);
    dec_round!(x, &k[27], 3);
    dec_round!(x, &k[26], 2);
    dec_round!(x, &k[25], 1);
    dec_round!(x, &k[24], 0);
    for i in (0..3).rev() {
        let r = 8 * i;
        dec_round!(x, &k[r + 7], 7);
        dec_round!(x, &k[r + 6], 6);
        dec_round!(x, &k[r + 5], 5);
        dec_round!(x, &k[r + 4], 4);
        dec_round!(x, &k[r + 3], 3);
        dec_round!(x, &k[r + 2], 2);
        dec_round!(x, &k[r + 1], 1);
        dec_round!(x, &k[r], 0);
    }
    x
}

/// The 4x4 transpose of 32-bit words inside each 128-bit lane: four registers of four
/// blocks each to four registers of one word each (and back: it is its own inverse).
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose(v: State) -> State {
    let t0 = _mm512_unpacklo_epi32(v[0], v[1]);
    let t1 = _mm512_unpackhi_epi32(v[0], v[1]);
    let t2 = _mm512_unpacklo_epi32(v[2], v[3]);
    let t3 = _mm512_unpackhi_epi32(v[2], v[3]);
    [
        _mm512_unpacklo_epi64(t0, t2),
        _mm512_unpackhi_epi64(t0, t2),
        _mm512_unpacklo_epi64(t1, t3),
        _mm512_unpackhi_epi64(t1, t3),
    ]
}

/// One step: the 32 blocks of `buf`, each XORed with its tweak before and after the
/// cipher (`tw`; zeros for ECB).
#[inline]
#[target_feature(enable = "avx512f")]
fn step<const DEC: bool>(k: &RoundKeys, tw: &[__m512i; REGS], buf: &mut [u8; STEP]) {
    let mut v = [_mm512_setzero_si512(); REGS];
    for (r, x) in v.iter_mut().enumerate() {
        // SAFETY: bytes 64r..64r+64 are inside the STEP-byte array; unaligned load.
        let d = unsafe { _mm512_loadu_si512(buf.as_ptr().add(64 * r).cast()) };
        *x = _mm512_xor_si512(d, tw[r]);
    }
    let mut groups: [State; GROUPS] =
        core::array::from_fn(|g| transpose([v[4 * g], v[4 * g + 1], v[4 * g + 2], v[4 * g + 3]]));
    groups = if DEC {
        decrypt(k, groups)
    } else {
        encrypt(k, groups)
    };
    for (g, s) in groups.iter().enumerate() {
        for (j, w) in transpose(*s).into_iter().enumerate() {
            let r = 4 * g + j;
            let out = _mm512_xor_si512(w, tw[r]);
            // SAFETY: bytes 64r..64r+64 are inside the STEP-byte array; unaligned store.
            unsafe { _mm512_storeu_si512(buf.as_mut_ptr().add(64 * r).cast(), out) };
        }
    }
}

/// [`step`] on a piece of fewer than 32 blocks, through a zeroed buffer wiped afterwards.
#[inline]
#[target_feature(enable = "avx512f")]
fn short_step<const DEC: bool>(k: &RoundKeys, tw: &[__m512i; REGS], piece: &mut [u8]) {
    let mut buf = [0u8; STEP];
    buf[..piece.len()].copy_from_slice(piece);
    step::<DEC>(k, tw, &mut buf);
    piece.copy_from_slice(&buf[..piece.len()]);
    buf.zeroize();
}

/// `t * x^k` in each 128-bit lane, with `k` (below 58) in both quadwords of the lane in
/// `shl`: the shift, the bits crossing from the low to the high quadword, and the `k` bits
/// shifted out of the top folded back into the low quadword as `h * 0x87`.
#[inline]
#[target_feature(enable = "avx512f")]
fn mul_x_pow(t: __m512i, shl: __m512i) -> __m512i {
    let shr = _mm512_sub_epi64(_mm512_set1_epi64(64), shl);
    let carry = _mm512_srlv_epi64(t, shr);
    let shifted = _mm512_sllv_epi64(t, shl);
    // The low quadword's carry into the high one; the high one's (h) into the low one.
    let zero = _mm512_setzero_si512();
    let cross = _mm512_unpacklo_epi64(zero, carry);
    let h = _mm512_unpackhi_epi64(carry, zero);
    let folded =
        _mm512_ternarylogic_epi64::<XOR3>(h, _mm512_slli_epi64::<1>(h), _mm512_slli_epi64::<2>(h));
    let folded = _mm512_xor_si512(folded, _mm512_slli_epi64::<7>(h));
    _mm512_ternarylogic_epi64::<XOR3>(shifted, cross, folded)
}

/// The tweaks of a unit's first step from its encrypted tweak `t`: register `r` holds
/// `t x^(4r)`, ..., `t x^(4r+3)`.
#[inline]
#[target_feature(enable = "avx512f")]
fn first_tweaks(t: &[u8; 16]) -> [__m512i; REGS] {
    // SAFETY: `t` is 16 readable bytes; unaligned load.
    let all = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(t.as_ptr().cast()) });
    core::array::from_fn(|r| {
        let p = |l: usize| (4 * r + l) as i64;
        mul_x_pow(
            all,
            _mm512_set_epi64(p(3), p(3), p(2), p(2), p(1), p(1), p(0), p(0)),
        )
    })
}

/// XTS over the units of `data` (`unit` bytes each, a multiple of 16), unit `i` under the
/// encrypted tweak `tweaks[i]`.
#[target_feature(enable = "avx512f")]
fn xts_units<const DEC: bool>(k: &RoundKeys, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    let next = _mm512_set1_epi64((STEP / 16) as i64);
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
#[target_feature(enable = "avx512f")]
fn ecb_blocks<const DEC: bool>(k: &RoundKeys, data: &mut [u8]) {
    let zero = [_mm512_setzero_si512(); REGS];
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
        SerpentBackend::Avx512.check_cpu().is_ok(),
        "serpent avx512 kernel called on a cpu without avx512f"
    );
}

/// Encrypts or decrypts the whole blocks of `data` in place (ECB).
pub(super) fn ecb(k: &RoundKeys, encrypt: bool, data: &mut [u8]) {
    check();
    let len = data.len() / 16 * 16;
    let data = &mut data[..len];
    // SAFETY: the CPU has AVX-512 F (checked above).
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
    // SAFETY: the CPU has AVX-512 F (checked above).
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
    use super::*;

    /// Runs `f` when the CPU has the backend's features; otherwise prints why not.
    fn on_cpu(f: impl FnOnce()) {
        match SerpentBackend::Avx512.check_cpu() {
            Ok(()) => f(),
            Err(e) => eprintln!("skipped: serpent avx512: {e}"),
        }
    }

    /// Every entry of every S-box and inverse S-box, as the `vpternlogd` code evaluates
    /// it: bit `p` of input word `j` is bit `j` of `p mod 16`, so output bit `p` must be
    /// the table entry of `p mod 16`.
    #[test]
    fn ternlog_sboxes_reproduce_the_tables() {
        on_cpu(|| {
            // SAFETY: the CPU has AVX-512 F (checked by `on_cpu`).
            unsafe { check_tables() }
        });
    }

    #[target_feature(enable = "avx512f")]
    fn check_tables() {
        let word = |j: u32| (0..32u32).map(|p| ((p % 16) >> j & 1) << p).sum::<u32>();
        let x: State = core::array::from_fn(|j| _mm512_set1_epi32(word(j as u32) as i32));
        let outs: [[State; 8]; 2] = [
            [
                sbox!(ENC, 0, &x),
                sbox!(ENC, 1, &x),
                sbox!(ENC, 2, &x),
                sbox!(ENC, 3, &x),
                sbox!(ENC, 4, &x),
                sbox!(ENC, 5, &x),
                sbox!(ENC, 6, &x),
                sbox!(ENC, 7, &x),
            ],
            [
                sbox!(DEC, 0, &x),
                sbox!(DEC, 1, &x),
                sbox!(DEC, 2, &x),
                sbox!(DEC, 3, &x),
                sbox!(DEC, 4, &x),
                sbox!(DEC, 5, &x),
                sbox!(DEC, 6, &x),
                sbox!(DEC, 7, &x),
            ],
        ];
        let tables = [SBOX, inverses()];
        for (dir, (out, table)) in outs.iter().zip(tables).enumerate() {
            for s in 0..8 {
                let lane0: [u32; 4] =
                    core::array::from_fn(|j| _mm512_cvtsi512_si32(out[s][j]) as u32);
                for p in 0..32 {
                    let got = (0..4).map(|j| (lane0[j] >> p & 1) << j).sum::<u32>();
                    let want = u32::from(table[s][p % 16]);
                    assert_eq!(got, want, "direction {dir}, S{s}({})", p % 16);
                }
            }
        }
    }

    /// The zmm tweaks of a unit's first steps against the scalar multiply by alpha, from
    /// tweaks whose top bits exercise every reduction.
    #[test]
    fn tweak_steps_match_the_scalar_multiply() {
        on_cpu(|| {
            // SAFETY: the CPU has AVX-512 F (checked by `on_cpu`).
            unsafe { check_tweaks() }
        });
    }

    #[target_feature(enable = "avx512f")]
    fn check_tweaks() {
        let next = _mm512_set1_epi64((STEP / 16) as i64);
        for seed in [
            1u128,
            u128::MAX,
            0x8000_0000 << 96,
            0xdead_beef_u128 << 90 | 0x1234,
        ] {
            let mut want = seed;
            let mut tw = first_tweaks(&seed.to_le_bytes());
            for _ in 0..3 {
                for reg in tw {
                    let mut b = [0u8; 64];
                    // SAFETY: `b` is 64 writable bytes; unaligned store.
                    unsafe { _mm512_storeu_si512(b.as_mut_ptr().cast(), reg) };
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
