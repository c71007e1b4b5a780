//! The `avx512` Kuznyechik backend: 64 blocks per step, byte-sliced in zmm registers, the
//! S-box as `vpermi2b` lookups in registers and the linear map `L` as a 16x16 matrix over
//! GF(2^8) applied with GFNI; for ECB of many blocks (the unit tweaks) and XTS over whole
//! data units.
//!
//! # Design
//! Target: x86-64 with AVX-512 F/BW/VBMI, GFNI and VPCLMULQDQ (Ice Lake and later, Zen 4
//! and later); tuned on the Zen 5 VM it was written on. The method is the byte-sliced one
//! (the state of many blocks held byte position by byte position, `L` as a matrix over
//! the field instead of the 64 KiB LS tables); this is a new implementation of it in
//! intrinsics, the register allocation left to the compiler.
//!
//! ## Layout: byte-sliced, 64 blocks per step
//! Sixteen zmm registers hold 64 blocks as loaded (four per register, one per 128-bit
//! lane). A 16x16 byte transpose inside each lane (four rounds of `vpunpck{l,h}bw`, its
//! own inverse, as the Camellia kernel's) makes register `j` hold byte `j` of all 64
//! blocks (byte 0 is the standard's `a_15`).
//!
//! ## One round (`X[k]`, `S`, `L`)
//! - the key: sixteen `vpxord`, each byte of the round key broadcast from a 32-bit word;
//! - `S`: per register two `vpermi2b` (the halves 0..127 and 128..255 of `pi`, four
//!   64-byte tables kept in registers), `vpmovb2m` of the index's top bit and a masked
//!   blend: 64 instructions;
//! - `L`: output byte `j` is the sum over `i` of `m[j][i] * s_i`, each product one
//!   `vgf2p8affineqb` with the 8x8 bit matrix of multiplication by `m[j][i]` broadcast
//!   from memory (the field is not AES's, so `vgf2p8mulb` does not apply), the sums
//!   `vpternlogq` three-way XORs: 256 + 128 instructions.
//!
//! That is about 460 instructions per round per 64 blocks, 4 KiB of instructions for the
//! nine rounds of 1 KiB: `L` is three quarters of the work. Decryption runs the same
//! round with `pi^-1` and `L^-1`, `L^-1` moved across each key XOR into the keys
//! (`tables::Pass`).
//!
//! ## XTS
//! As the Camellia kernel's: a step's tweaks are sixteen zmm registers in memory order,
//! a unit's first ones made from its encrypted tweak with per-quadword shifts and
//! `vpclmulqdq`, the next step's by one multiply by `x^64` each; units of 64 to 1024
//! bytes (512: VeraCrypt's) are packed, several to a step; other units run step by step,
//! and the last step of fewer than 64 blocks runs through a zeroed 1 KiB buffer on the
//! stack, wiped afterwards.
//!
//! ## Constant time
//! No memory lookups indexed by data or keys: the S-box is a permutation of registers
//! (`vpermi2b`), the products GFNI instructions with constant matrices, the keys read at
//! offsets that depend on the round number only; no branch on data or keys.
//!
//! Calling contract: [`ecb`] and [`xts`] check that the CPU has the backend's features and
//! panic otherwise, which is what makes the `unsafe` calls of the `#[target_feature]`
//! functions sound.
#![allow(unsafe_code)]

use super::tables::{Wide, L_AFFINE, L_INV_AFFINE, PI, PI_INV};
use super::KuznyechikBackend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// zmm registers of one step (64 blocks).
const REGS: usize = 16;
/// Blocks in one step.
const BLOCKS: usize = 64;
/// Bytes of one step.
const STEP: usize = 16 * BLOCKS;

/// `vpternlogq` immediate of `A ^ B ^ C`.
const XOR3: i32 = 0x96;

/// Sixteen byte registers: one per byte position (sliced) or per 64 bytes (as loaded).
type State = [__m512i; REGS];

#[inline]
#[target_feature(enable = "avx512f")]
fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
    _mm512_ternarylogic_epi64::<XOR3>(a, b, c)
}

/// The four 64-byte quarters of an S-box, in registers for the whole call.
struct Sbox([__m512i; 4]);

#[inline]
#[target_feature(enable = "avx512f")]
fn sbox(table: &[u8; 256]) -> Sbox {
    let mut q = [_mm512_setzero_si512(); 4];
    for (i, x) in q.iter_mut().enumerate() {
        // SAFETY: bytes 64i..64i+64 are inside the 256-byte table; unaligned load.
        *x = unsafe { _mm512_loadu_si512(table.as_ptr().add(64 * i).cast()) };
    }
    Sbox(q)
}

/// The S-box on every byte: the low seven bits index both halves, the top bit picks one.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn substitute(x: __m512i, s: &Sbox) -> __m512i {
    let lo = _mm512_permutex2var_epi8(s.0[0], x, s.0[1]);
    let hi = _mm512_permutex2var_epi8(s.0[2], x, s.0[3]);
    _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi)
}

/// Multiplication of every byte by the field element whose affine matrix is `m`.
#[inline]
#[target_feature(enable = "avx512f,gfni")]
fn times(x: __m512i, m: u64) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(x, _mm512_set1_epi64(m as i64))
}

/// The linear map of the sliced state: `L` (`ENC`) or `L^-1`.
#[inline]
#[target_feature(enable = "avx512f,gfni")]
fn linear<const ENC: bool>(x: &State) -> State {
    let m = if ENC { &L_AFFINE } else { &L_INV_AFFINE };
    let mut out = [_mm512_setzero_si512(); REGS];
    for (o, row) in out.iter_mut().zip(m) {
        let mut acc = times(x[0], row[0]);
        for i in (1..REGS - 1).step_by(2) {
            acc = xor3(acc, times(x[i], row[i]), times(x[i + 1], row[i + 1]));
        }
        *o = _mm512_xor_si512(acc, times(x[REGS - 1], row[REGS - 1]));
    }
    out
}

/// XORs a key (each byte repeated in a 32-bit word) into the sliced state.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_key(x: &mut State, k: &[u32; 16]) {
    for (v, w) in x.iter_mut().zip(k) {
        *v = _mm512_xor_si512(*v, _mm512_set1_epi32(*w as i32));
    }
}

/// One round of the transpose: register `i` paired with `i + 8` byte by byte.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn interleave(v: &State) -> State {
    let mut out = [_mm512_setzero_si512(); REGS];
    for i in 0..REGS / 2 {
        out[2 * i] = _mm512_unpacklo_epi8(v[i], v[i + 8]);
        out[2 * i + 1] = _mm512_unpackhi_epi8(v[i], v[i + 8]);
    }
    out
}

/// The 16x16 byte transpose inside each 128-bit lane (its own inverse): four rounds of
/// [`interleave`], each rotating the 8-bit address (register, byte) of every byte left by
/// one bit.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn transpose(v: &State) -> State {
    interleave(&interleave(&interleave(&interleave(v))))
}

/// A 16-byte value in every lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn lanes(b: &[u8; 16]) -> __m512i {
    // SAFETY: `b` is 16 readable bytes; unaligned load.
    _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(b.as_ptr().cast()) })
}

/// One step: the 64 blocks of `buf` through the pass `w`, each XORed with its tweak
/// before and after the cipher (`tw`; zeros for ECB).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn step<const ENC: bool>(w: &Wide, s: &Sbox, tw: &State, buf: &mut [u8; STEP]) {
    let mut v = [_mm512_setzero_si512(); REGS];
    for (r, x) in v.iter_mut().enumerate() {
        // SAFETY: bytes 64r..64r+64 are inside the STEP-byte array; unaligned load.
        let d = unsafe { _mm512_loadu_si512(buf.as_ptr().add(64 * r).cast()) };
        *x = _mm512_xor_si512(d, tw[r]);
    }
    let mut x = transpose(&v);
    if w.first_map {
        x = linear::<ENC>(&x);
    }
    for r in 0..9 {
        add_key(&mut x, &w.k[r]);
        for b in x.iter_mut() {
            *b = substitute(*b, s);
        }
        if r < 8 || w.last_map {
            x = linear::<ENC>(&x);
        }
    }
    add_key(&mut x, &w.k[9]);
    let out = transpose(&x);
    for (r, o) in out.iter().enumerate() {
        let o = _mm512_xor_si512(*o, tw[r]);
        // SAFETY: bytes 64r..64r+64 are inside the STEP-byte array; unaligned store.
        unsafe { _mm512_storeu_si512(buf.as_mut_ptr().add(64 * r).cast(), o) };
    }
}

/// [`step`] on a piece of fewer than 64 blocks, through a zeroed buffer wiped afterwards.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn short_step<const ENC: bool>(w: &Wide, s: &Sbox, tw: &State, piece: &mut [u8]) {
    let mut buf = [0u8; STEP];
    buf[..piece.len()].copy_from_slice(piece);
    step::<ENC>(w, s, tw, &mut buf);
    piece.copy_from_slice(&buf[..piece.len()]);
    buf.zeroize();
}

/// 0x87 in the low quadword of each lane: x^128 = x^7 + x^2 + x + 1.
#[inline]
#[target_feature(enable = "avx512f")]
fn poly() -> __m512i {
    _mm512_set_epi64(0, 0x87, 0, 0x87, 0, 0x87, 0, 0x87)
}

/// `t * x^k` in each 128-bit lane, `k` (0..=63) in both quadwords of the lane in `k`: the
/// shift, the bits crossing from the low quadword to the high one, and the `k` bits
/// shifted out of the top times 0x87 (a carry-less multiply) folded back in.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x_pow(t: __m512i, k: __m512i) -> __m512i {
    let carry = _mm512_srlv_epi64(t, _mm512_sub_epi64(_mm512_set1_epi64(64), k));
    let shifted = _mm512_sllv_epi64(t, k);
    let cross = _mm512_bslli_epi128::<8>(carry);
    let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly());
    xor3(shifted, cross, folded)
}

/// `t * x^64` in each lane: the low quadword moves up, the high one comes back times 0x87.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn mul_x64(t: __m512i) -> __m512i {
    _mm512_xor_si512(
        _mm512_bslli_epi128::<8>(t),
        _mm512_clmulepi64_epi128::<0x01>(t, poly()),
    )
}

/// The first tweak registers of a unit (as many as `out` holds) from its encrypted
/// tweak `t`: register `r` holds `t x^(4r)`, ..., `t x^(4r+3)`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn first_tweaks(t: &[u8; 16], out: &mut [__m512i]) {
    let base = mul_x_pow(lanes(t), _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0));
    for (r, o) in out.iter_mut().enumerate() {
        *o = mul_x_pow(base, _mm512_set1_epi64(4 * r as i64));
    }
}

/// The tweaks of a unit's next step: every register times `x^64`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn next_tweaks(tw: &mut State) {
    for t in tw.iter_mut() {
        *t = mul_x64(*t);
    }
}

/// XTS over the units of `data` (`unit` bytes each, a multiple of 16), unit `i` under the
/// encrypted tweak `tweaks[i]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni,vpclmulqdq")]
fn xts_units<const ENC: bool>(w: &Wide, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    let s = sbox(if ENC { &PI } else { &PI_INV });
    let blocks = unit / 16;
    let mut tw = [_mm512_setzero_si512(); REGS];
    if blocks.is_multiple_of(4) && BLOCKS.is_multiple_of(blocks) {
        // Small units packed, several to a step: `per` registers each.
        let per = blocks / 4;
        let units = BLOCKS / blocks;
        for (group, ts) in data.chunks_mut(STEP).zip(tweaks.chunks(units)) {
            for (i, t) in ts.iter().enumerate() {
                first_tweaks(t, &mut tw[i * per..(i + 1) * per]);
            }
            match <&mut [u8; STEP]>::try_from(&mut *group) {
                Ok(full) => step::<ENC>(w, &s, &tw, full),
                Err(_) => short_step::<ENC>(w, &s, &tw, group),
            }
        }
    } else {
        for (u, t) in data.chunks_exact_mut(unit).zip(tweaks) {
            first_tweaks(t, &mut tw);
            let mut steps = u.chunks_exact_mut(STEP);
            for st in &mut steps {
                step::<ENC>(w, &s, &tw, st.try_into().expect("a whole step"));
                next_tweaks(&mut tw);
            }
            let rest = steps.into_remainder();
            if !rest.is_empty() {
                short_step::<ENC>(w, &s, &tw, rest);
            }
        }
    }
}

/// ECB over the whole blocks of `data`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn ecb_blocks<const ENC: bool>(w: &Wide, data: &mut [u8]) {
    let s = sbox(if ENC { &PI } else { &PI_INV });
    let zero = [_mm512_setzero_si512(); REGS];
    let mut steps = data.chunks_exact_mut(STEP);
    for st in &mut steps {
        step::<ENC>(w, &s, &zero, st.try_into().expect("a whole step"));
    }
    let rest = steps.into_remainder();
    if !rest.is_empty() {
        short_step::<ENC>(w, &s, &zero, rest);
    }
}

/// Panics unless this CPU runs the backend: what makes the calls below sound.
fn check() {
    assert!(
        KuznyechikBackend::Avx512.check_cpu().is_ok(),
        "kuznyechik avx512 kernel called on a cpu without avx512f, avx512bw, avx512vbmi, \
         gfni and vpclmulqdq"
    );
}

/// The whole blocks of `data` in place through the pass `w` (ECB).
pub(super) fn ecb(w: &Wide, data: &mut [u8]) {
    check();
    let len = data.len() / 16 * 16;
    let data = &mut data[..len];
    // SAFETY: the CPU has AVX-512 F/BW/VBMI and GFNI (checked above).
    unsafe {
        if w.encrypt {
            ecb_blocks::<true>(w, data)
        } else {
            ecb_blocks::<false>(w, data)
        }
    }
}

/// XTS through the pass `w` over `tweaks.len()` units of `unit` bytes (a multiple of 16)
/// at the start of `data`, unit `i` under the encrypted tweak `tweaks[i]`.
pub(super) fn xts(w: &Wide, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    check();
    assert!(unit > 0 && unit.is_multiple_of(16) && data.len() >= unit * tweaks.len());
    let data = &mut data[..unit * tweaks.len()];
    // SAFETY: the CPU has AVX-512 F/BW/VBMI, GFNI and VPCLMULQDQ (checked above).
    unsafe {
        if w.encrypt {
            xts_units::<true>(w, tweaks, unit, data)
        } else {
            xts_units::<false>(w, tweaks, unit, data)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` when the CPU has the backend's features; otherwise prints why not.
    fn on_cpu(f: impl FnOnce()) {
        match KuznyechikBackend::Avx512.check_cpu() {
            Ok(()) => f(),
            Err(e) => eprintln!("skipped: kuznyechik avx512: {e}"),
        }
    }

    /// The S-box and the linear maps of the kernel against the byte-wise ones of
    /// `tables`, on every byte value in every position.
    #[test]
    fn sliced_transformations_match_the_tables() {
        on_cpu(|| {
            // SAFETY: the CPU has the backend's features (checked by `on_cpu`).
            unsafe { check_transformations() }
        });
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    fn check_transformations() {
        use super::super::tables::{l, l_inv};
        let all: Vec<u8> = (0..=255u8).collect();
        let s = sbox(&PI);
        for q in 0..4 {
            // SAFETY: 64 readable bytes; unaligned load.
            let x = unsafe { _mm512_loadu_si512(all.as_ptr().add(64 * q).cast()) };
            let mut got = [0u8; 64];
            // SAFETY: 64 writable bytes; unaligned store.
            unsafe { _mm512_storeu_si512(got.as_mut_ptr().cast(), substitute(x, &s)) };
            for (i, g) in got.iter().enumerate() {
                assert_eq!(*g, PI[64 * q + i]);
            }
        }
        // 64 blocks, each byte position a register; block b's byte j is b * 17 + j * 29.
        let mut x = [_mm512_setzero_si512(); REGS];
        for (j, r) in x.iter_mut().enumerate() {
            let bytes: Vec<u8> = (0..64).map(|b| (b * 17 + j * 29) as u8).collect();
            // SAFETY: 64 readable bytes; unaligned load.
            *r = unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) };
        }
        for enc in [true, false] {
            let y = if enc {
                linear::<true>(&x)
            } else {
                linear::<false>(&x)
            };
            let mut out = [[0u8; 64]; REGS];
            for (o, r) in out.iter_mut().zip(&y) {
                // SAFETY: 64 writable bytes; unaligned store.
                unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), *r) };
            }
            for b in 0..64 {
                let block: [u8; 16] = core::array::from_fn(|j| (b * 17 + j * 29) as u8);
                let want = if enc { l(block) } else { l_inv(block) };
                for j in 0..16 {
                    assert_eq!(out[j][b], want[j], "enc {enc}, block {b}, byte {j}");
                }
            }
        }
    }

    /// The zmm tweaks of a unit's first steps against the scalar multiply by alpha.
    #[test]
    fn tweak_steps_match_the_scalar_multiply() {
        on_cpu(|| {
            // SAFETY: the CPU has the backend's features (checked by `on_cpu`).
            unsafe { check_tweaks() }
        });
    }

    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
    fn check_tweaks() {
        for seed in [
            1u128,
            u128::MAX,
            0x8000_0000 << 96,
            0xdead_beef_u128 << 90 | 0x1234,
        ] {
            let mut want = seed;
            let mut tw = [_mm512_setzero_si512(); REGS];
            first_tweaks(&seed.to_le_bytes(), &mut tw);
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
                next_tweaks(&mut tw);
            }
        }
    }
}
