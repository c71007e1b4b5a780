//! The `avx512` Twofish backend: 64 blocks per step in zmm registers, the key-dependent
//! S-boxes looked up in registers with `vpermi2b` and the MDS matrix as GFNI affine maps:
//! no table in memory is indexed by data, so unlike the table-driven `soft` (and the
//! gather-based Twofish of libgcrypt) this kernel is constant-time.
//!
//! # Design
//! Target: x86-64 with AVX-512 F/BW/VBMI and GFNI (Ice Lake and later, Zen 4 and later).
//!
//! ## Layout
//! A step loads 64 blocks into 16 registers; a 4x4 transpose of 32-bit words inside each
//! 128-bit lane (its own inverse) turns each group of four registers into the four words
//! A, B, C, D of 16 blocks, one block per 32-bit lane, so that the round's additions and
//! rotations are plain lane-wise instructions on four groups.
//!
//! ## The function g, 64 words at a time
//! - byte slicing: `vpermt2b` over pairs of groups and `vshufi64x2` gather byte `j` of all
//!   64 words into one register (8 instructions);
//! - the S-boxes: S-box `j` is 256 bytes, four registers; two `vpermi2b` look up the low 7
//!   bits of each byte in both halves and the top bit (`vpmovb2m`) picks one (4
//!   instructions per S-box);
//! - MDS: multiplying by a constant of GF(2^8) is linear over GF(2), so each product by
//!   0x5b or 0xef is one `vgf2p8affineqb` with a matrix made here (8), and each output byte
//!   is four terms XORed (`vpternlogd`, 8);
//! - back to words: `vshufi64x2` and `vpermt2b` (8).
//!
//! The two g of a round run over 64 words each; with the PHT, rotations and key additions a
//! round is about 136 instructions for 64 blocks. Blocks short of a whole step go through a
//! zeroized stack buffer.

#![allow(unsafe_code)]

use super::soft::{gf_mul, Keys, MDS, MDS_POLY};
use crate::block::BLOCK;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Blocks per step.
pub(super) const STEP: usize = 64;

/// The affine matrix of `vgf2p8affineqb` that multiplies a byte by `c` in the MDS field:
/// output bit `i` is the parity of matrix byte `7 - i` AND the input, so byte `7 - i` has
/// bit `b` set when bit `i` of `c * x^b` is.
const fn mul_matrix(c: u8) -> i64 {
    let mut m = 0u64;
    let mut b = 0;
    while b < 8 {
        let col = gf_mul(c, 1 << b, MDS_POLY);
        let mut i = 0;
        while i < 8 {
            if col & (1 << i) != 0 {
                m |= 1u64 << (8 * (7 - i) + b);
            }
            i += 1;
        }
        b += 1;
    }
    m as i64
}

const MUL_5B: i64 = mul_matrix(0x5b);
const MUL_EF: i64 = mul_matrix(0xef);

// The MDS matrix this kernel writes out is the one of `soft`.
const _: () = assert!(MDS[0][1] == 0xef && MDS[0][2] == 0x5b && MDS[1][0] == 0x5b);

/// The key as the kernel reads it: the S-boxes as 16 registers' worth of bytes and the
/// subkeys. Zeroized on drop.
pub(super) struct Wide {
    sbox: [[u8; 256]; 4],
    k: [u32; 40],
}

impl Drop for Wide {
    fn drop(&mut self) {
        self.sbox.iter_mut().for_each(|s| s.zeroize());
        self.k.zeroize();
    }
}

impl Wide {
    pub(super) fn new(keys: &Keys) -> Box<Wide> {
        Box::new(Wide {
            sbox: keys.sbox,
            k: keys.k,
        })
    }
}

/// Encrypts or decrypts every whole block of `data` in place.
pub(super) fn ecb(wide: &Wide, encrypt: bool, data: &mut [u8]) {
    // SAFETY: the backend is only selected (and its self-test only run) where the CPU
    // has AVX-512 F/BW/VBMI and GFNI, which `kernel` requires.
    unsafe { kernel(wide, encrypt, data) }
}

/// Byte-index vectors of the kernel's permutations.
struct Idx {
    /// Bytes 0 and 1 (`a`) or 2 and 3 (`b`) of the 32 words of two groups.
    slice_a: __m512i,
    slice_b: __m512i,
    /// Words of group 0 (and 2) or 1 (and 3) back from the byte slices.
    back_0: __m512i,
    back_1: __m512i,
}

#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn indices() -> Idx {
    let slice = |lo: usize, hi: usize| -> [u8; 64] {
        core::array::from_fn(|p| if p < 32 { 4 * p + lo } else { 4 * (p - 32) + hi } as u8)
    };
    let back = |g: usize| -> [u8; 64] {
        core::array::from_fn(|p| {
            let (i, k) = (p / 4, p % 4);
            (16 * g + i + 32 * k) as u8
        })
    };
    let load = |b: [u8; 64]| -> __m512i {
        // SAFETY: reads 64 bytes from a 64-byte array.
        unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
    };
    Idx {
        slice_a: load(slice(0, 1)),
        slice_b: load(slice(2, 3)),
        back_0: load(back(0)),
        back_1: load(back(1)),
    }
}

/// The 4x4 transpose of 32-bit words inside each 128-bit lane (its own inverse).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn transpose(v: [__m512i; 4]) -> [__m512i; 4] {
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

/// One S-box over 64 bytes: the low 7 bits index both halves, the top bit picks one.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn sbox(t: &[__m512i; 4], x: __m512i) -> __m512i {
    let lo = _mm512_permutex2var_epi8(t[0], x, t[1]);
    let hi = _mm512_permutex2var_epi8(t[2], x, t[3]);
    _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi)
}

/// The function g over the 64 words of four groups.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn g(tables: &[[__m512i; 4]; 4], idx: &Idx, x: [__m512i; 4]) -> [__m512i; 4] {
    // Byte slices: position 16 * group + lane.
    let p01a = _mm512_permutex2var_epi8(x[0], idx.slice_a, x[1]);
    let p01b = _mm512_permutex2var_epi8(x[0], idx.slice_b, x[1]);
    let p23a = _mm512_permutex2var_epi8(x[2], idx.slice_a, x[3]);
    let p23b = _mm512_permutex2var_epi8(x[2], idx.slice_b, x[3]);
    let b0 = _mm512_shuffle_i64x2::<0x44>(p01a, p23a);
    let b1 = _mm512_shuffle_i64x2::<0xee>(p01a, p23a);
    let b2 = _mm512_shuffle_i64x2::<0x44>(p01b, p23b);
    let b3 = _mm512_shuffle_i64x2::<0xee>(p01b, p23b);
    let s0 = sbox(&tables[0], b0);
    let s1 = sbox(&tables[1], b1);
    let s2 = sbox(&tables[2], b2);
    let s3 = sbox(&tables[3], b3);
    let m5b = _mm512_set1_epi64(MUL_5B);
    let mef = _mm512_set1_epi64(MUL_EF);
    let (s0_5b, s0_ef) = (
        _mm512_gf2p8affine_epi64_epi8::<0>(s0, m5b),
        _mm512_gf2p8affine_epi64_epi8::<0>(s0, mef),
    );
    let (s1_5b, s1_ef) = (
        _mm512_gf2p8affine_epi64_epi8::<0>(s1, m5b),
        _mm512_gf2p8affine_epi64_epi8::<0>(s1, mef),
    );
    let (s2_5b, s2_ef) = (
        _mm512_gf2p8affine_epi64_epi8::<0>(s2, m5b),
        _mm512_gf2p8affine_epi64_epi8::<0>(s2, mef),
    );
    let (s3_5b, s3_ef) = (
        _mm512_gf2p8affine_epi64_epi8::<0>(s3, m5b),
        _mm512_gf2p8affine_epi64_epi8::<0>(s3, mef),
    );
    // The rows of MDS: (01 ef 5b 5b), (5b ef ef 01), (ef 5b 01 ef), (ef 01 ef 5b).
    let xor4 = |a, b, c, d| _mm512_xor_si512(_mm512_ternarylogic_epi32::<0x96>(a, b, c), d);
    let z0 = xor4(s0, s1_ef, s2_5b, s3_5b);
    let z1 = xor4(s0_5b, s1_ef, s2_ef, s3);
    let z2 = xor4(s0_ef, s1_5b, s2, s3_ef);
    let z3 = xor4(s0_ef, s1, s2_ef, s3_5b);
    let qa = _mm512_shuffle_i64x2::<0x44>(z0, z1);
    let qb = _mm512_shuffle_i64x2::<0x44>(z2, z3);
    let qc = _mm512_shuffle_i64x2::<0xee>(z0, z1);
    let qd = _mm512_shuffle_i64x2::<0xee>(z2, z3);
    [
        _mm512_permutex2var_epi8(qa, idx.back_0, qb),
        _mm512_permutex2var_epi8(qa, idx.back_1, qb),
        _mm512_permutex2var_epi8(qc, idx.back_0, qd),
        _mm512_permutex2var_epi8(qc, idx.back_1, qd),
    ]
}

/// The round function F's two outputs for the words `r0`, `r1` of four groups and the
/// round keys `k0`, `k1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn f(
    tables: &[[__m512i; 4]; 4],
    idx: &Idx,
    r0: [__m512i; 4],
    r1: [__m512i; 4],
    k0: u32,
    k1: u32,
) -> ([__m512i; 4], [__m512i; 4]) {
    let t0 = g(tables, idx, r0);
    let t1 = g(tables, idx, r1.map(|x| _mm512_rol_epi32::<8>(x)));
    let (k0, k1) = (_mm512_set1_epi32(k0 as i32), _mm512_set1_epi32(k1 as i32));
    let f0 = core::array::from_fn(|i| _mm512_add_epi32(_mm512_add_epi32(t0[i], t1[i]), k0));
    let f1 = core::array::from_fn(|i| {
        let twice = _mm512_add_epi32(t1[i], t1[i]);
        _mm512_add_epi32(_mm512_add_epi32(t0[i], twice), k1)
    });
    (f0, f1)
}

/// Runs 64 blocks: the state as words A, B, C, D of four groups.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn blocks(
    tables: &[[__m512i; 4]; 4],
    idx: &Idx,
    k: &[u32; 40],
    encrypt: bool,
    s: &mut [[__m512i; 4]; 4],
) {
    let [a, b, c, d] = s;
    if encrypt {
        for r in 0..16 {
            let (f0, f1) = f(tables, idx, *a, *b, k[2 * r + 8], k[2 * r + 9]);
            for i in 0..4 {
                c[i] = _mm512_ror_epi32::<1>(_mm512_xor_si512(c[i], f0[i]));
                d[i] = _mm512_xor_si512(_mm512_rol_epi32::<1>(d[i]), f1[i]);
            }
            core::mem::swap(a, c);
            core::mem::swap(b, d);
        }
    } else {
        // The inverse round: swap back, then recover C and D from F of A and B.
        for r in (0..16).rev() {
            core::mem::swap(a, c);
            core::mem::swap(b, d);
            let (f0, f1) = f(tables, idx, *a, *b, k[2 * r + 8], k[2 * r + 9]);
            for i in 0..4 {
                c[i] = _mm512_xor_si512(_mm512_rol_epi32::<1>(c[i]), f0[i]);
                d[i] = _mm512_ror_epi32::<1>(_mm512_xor_si512(d[i], f1[i]));
            }
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn kernel(wide: &Wide, encrypt: bool, data: &mut [u8]) {
    let tables: [[__m512i; 4]; 4] = core::array::from_fn(|j| {
        core::array::from_fn(|q| {
            // SAFETY: reads bytes 64q..64q+64 of a 256-byte S-box.
            unsafe { _mm512_loadu_si512(wide.sbox[j][64 * q..].as_ptr().cast()) }
        })
    });
    let idx = indices();
    let k = &wide.k;
    let key = |i: usize| _mm512_set1_epi32(k[i] as i32);
    // Whitening in, as words: encryption XORs K0..K3 into A..D; decryption starts from
    // (C ^ K6, D ^ K7, A ^ K4, B ^ K5), the state after the last round.
    let (win, wout): ([usize; 4], [usize; 4]) = if encrypt {
        ([0, 1, 2, 3], [4, 5, 6, 7])
    } else {
        ([4, 5, 6, 7], [0, 1, 2, 3])
    };
    let step = |chunk: &mut [u8]| {
        let p = chunk.as_mut_ptr();
        let mut s: [[__m512i; 4]; 4] = [[_mm512_setzero_si512(); 4]; 4];
        for g in 0..4 {
            // SAFETY: `chunk` is 1 KiB; register 4g + m reads bytes 256g + 64m..+64.
            let v: [__m512i; 4] = core::array::from_fn(|m| unsafe {
                _mm512_loadu_si512(p.add(256 * g + 64 * m).cast())
            });
            let w = transpose(v);
            for word in 0..4 {
                s[word][g] = _mm512_xor_si512(w[word], key(win[word]));
            }
        }
        if !encrypt {
            // The words after the last round are (C, D, A, B) of the ciphertext.
            s.swap(0, 2);
            s.swap(1, 3);
        }
        blocks(&tables, &idx, k, encrypt, &mut s);
        if encrypt {
            // Undo the last swap: the ciphertext is (C, D, A, B).
            s.swap(0, 2);
            s.swap(1, 3);
        }
        for g in 0..4 {
            let w: [__m512i; 4] =
                core::array::from_fn(|word| _mm512_xor_si512(s[word][g], key(wout[word])));
            let v = transpose(w);
            for (m, r) in v.iter().enumerate() {
                // SAFETY: as the loads.
                unsafe { _mm512_storeu_si512(p.add(256 * g + 64 * m).cast(), *r) };
            }
        }
    };
    let mut steps = data.chunks_exact_mut(STEP * BLOCK);
    for chunk in &mut steps {
        step(chunk);
    }
    let rest = steps.into_remainder();
    let whole = rest.len() / BLOCK * BLOCK;
    if whole > 0 {
        let mut buf = [0u8; STEP * BLOCK];
        buf[..whole].copy_from_slice(&rest[..whole]);
        step(&mut buf);
        rest[..whole].copy_from_slice(&buf[..whole]);
        buf.zeroize();
    }
}
