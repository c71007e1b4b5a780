//! The `avx512` Camellia backend: 64 blocks per step, byte-sliced in zmm registers, the
//! S-boxes as two GFNI instructions each; for ECB of many blocks (the unit tweaks) and XTS
//! over whole data units.
//!
//! # Design
//! Target: x86-64 with AVX-512 F/BW, GFNI and VPCLMULQDQ (Ice Lake and later, Zen 4 and
//! later); tuned on the Zen 5 VM it was written on. The method is the published one
//! (libgcrypt's and Linux's GFNI Camellia: a byte-sliced state, the S-boxes as affine maps
//! around the GF(2^8) inversion that `vgf2p8affineinvqb` computes); this is a new
//! implementation of it in intrinsics, the register allocation left to the compiler.
//!
//! ## Layout: byte-sliced, 64 blocks per step
//! Sixteen zmm registers hold 64 blocks as loaded (four per register, one per 128-bit
//! lane). A 16x16 byte transpose inside each lane makes register `j` hold byte `j` of all
//! 64 blocks: registers 0..7 are D1 (its bytes t1..t8, most significant first), 8..15 are
//! D2. The transpose is four rounds of `vpunpck{l,h}bw` pairing register `i` with
//! `i + 8`: each round rotates the 8-bit address (register, byte) of every byte left by
//! one bit, so four rounds swap register and byte. It is its own inverse, and the output
//! (D2 || D1) goes back through it. 64 instructions each way per step.
//!
//! A step is [`GROUPS`] such groups side by side; one, because two (128 blocks) need 32
//! state registers and spill: `camellia-256-xts/4096` ran at 0.96 c/B with two against
//! 0.78 with one (docs/PERFORMANCE.md). The 24 rounds are written out: as a loop, the
//! compiler kept the state in memory (1.2 c/B).
//!
//! ## One round (`D2 ^= F(D1, k)`)
//! - the key: eight `vpxord`, each byte of the round key broadcast from a 32-bit word;
//! - the S-boxes: per byte `vgf2p8affineqb` (the pre-filter: `s1`, `s2`, `s3` share one,
//!   `s4` has its own) and `vgf2p8affineinvqb` (inversion, then the post-filter: `s2` and
//!   `s3` rotate the output of `s1`'s), 16 instructions; the maps are in `keys.rs`;
//! - the P-function folded into D2: with `T` the XOR of all eight S-box outputs, output
//!   byte `y1 = T ^ t2 ^ t5`, ..., `y5 = T ^ t3 ^ t4 ^ t5`, ... (each byte of P is `T`
//!   with two or three outputs cancelled), so `T` costs four instructions and each D2
//!   byte two (`vpternlogq` three-way XORs): 20.
//!
//! That is 44 instructions per round per 64 blocks, 1056 for the 24 rounds. The FL and
//! FL^-1 layers (after rounds 6, 12, 18) work on the bytes of 32-bit words: the rotation
//! by one is `vpaddb` (each byte shifted left) and a `vgf2p8affineqb` moving each byte's
//! top bit to the bottom of the next more significant byte; 20 instructions each.
//! The whitening keys are XORed into the blocks before the transpose and after it, in the
//! same `vpternlogq` that adds the XTS tweak.
//!
//! ## XTS
//! A step's tweaks are sixteen zmm registers in memory order (register `r`: the tweaks
//! of blocks `4r..4r+3`). A unit's first sixteen are its encrypted tweak `T` times
//! `x^0..x^63`: `T x^(0..3)` with per-quadword shifts, and from it each register with one
//! more multiply by `x^(4r)`; the next step multiplies every register by `x^64` (a
//! `vpslldq` of the lane by eight bytes and the high quadword times 0x87 with
//! `vpclmulqdq`, folded in). Units of 64, 128, 256 or 512 bytes (512: VeraCrypt's) are
//! packed, several to a step; other units run step by step, and the last step of fewer
//! than 64 blocks runs through a zeroed 1 KiB buffer on the stack, wiped afterwards.
//!
//! ## Constant time
//! No table lookups, no branch on data or keys: the S-boxes are GFNI instructions, the
//! keys are read at offsets that depend on the round number only.
//!
//! Calling contract: [`ecb`] and [`xts`] check that the CPU has the backend's features and
//! panic otherwise, which is what makes the `unsafe` calls of the `#[target_feature]`
//! functions sound.
#![allow(unsafe_code)]

use super::keys::{Affine, Wide, POST, POST2, POST3, PRE, PRE4};
use super::CamelliaBackend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Groups of 64 blocks run side by side in one step.
const GROUPS: usize = 1;
/// zmm registers of one group (64 blocks).
const GROUP_REGS: usize = 16;
/// Blocks in one step.
const BLOCKS: usize = 64 * GROUPS;
/// Bytes of one step.
const STEP: usize = 16 * BLOCKS;
/// zmm registers of data (or tweaks) in one step.
const REGS: usize = GROUP_REGS * GROUPS;

/// `vpternlogq` immediate of `A ^ B ^ C` (truth table over the index 4A + 2B + C).
const XOR3: i32 = 0x96;
/// `vpternlogq` immediate of `A ^ (B | C)`.
const XOR_OR: i32 = 0x1e;

/// Moves the top bit of each byte to its bottom bit (the rest zero): the carry of a
/// rotation by one from one byte into the next.
const TOP_BIT: Affine = Affine {
    rows: [0x80, 0, 0, 0, 0, 0, 0, 0],
    c: 0,
};

/// Eight bytes of one half of the state (D1 or D2) of 64 blocks, `t1` first.
type Half = [__m512i; 8];

/// The GFNI matrices, broadcast once per call.
struct Matrices {
    pre: __m512i,
    pre4: __m512i,
    post: __m512i,
    post2: __m512i,
    post3: __m512i,
    top_bit: __m512i,
}

#[inline]
#[target_feature(enable = "avx512f")]
fn matrices() -> Matrices {
    Matrices {
        pre: _mm512_set1_epi64(PRE.matrix() as i64),
        pre4: _mm512_set1_epi64(PRE4.matrix() as i64),
        post: _mm512_set1_epi64(POST.matrix() as i64),
        post2: _mm512_set1_epi64(POST2.matrix() as i64),
        post3: _mm512_set1_epi64(POST3.matrix() as i64),
        top_bit: _mm512_set1_epi64(TOP_BIT.matrix() as i64),
    }
}

/// A byte of a key, repeated in a 32-bit word, in every byte of a register.
#[inline]
#[target_feature(enable = "avx512f")]
fn splat(k: u32) -> __m512i {
    _mm512_set1_epi32(k as i32)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
    _mm512_ternarylogic_epi64::<XOR3>(a, b, c)
}

/// `s1` (and `s4` when given the matrix `pre4`) of every byte.
#[inline]
#[target_feature(enable = "avx512f,gfni")]
fn s1(x: __m512i, pre: __m512i, m: &Matrices) -> __m512i {
    let y = _mm512_gf2p8affine_epi64_epi8::<{ PRE.c as i32 }>(x, pre);
    _mm512_gf2p8affineinv_epi64_epi8::<{ POST.c as i32 }>(y, m.post)
}

/// `s2` of every byte.
#[inline]
#[target_feature(enable = "avx512f,gfni")]
fn s2(x: __m512i, m: &Matrices) -> __m512i {
    let y = _mm512_gf2p8affine_epi64_epi8::<{ PRE.c as i32 }>(x, m.pre);
    _mm512_gf2p8affineinv_epi64_epi8::<{ POST2.c as i32 }>(y, m.post2)
}

/// `s3` of every byte.
#[inline]
#[target_feature(enable = "avx512f,gfni")]
fn s3(x: __m512i, m: &Matrices) -> __m512i {
    let y = _mm512_gf2p8affine_epi64_epi8::<{ PRE.c as i32 }>(x, m.pre);
    _mm512_gf2p8affineinv_epi64_epi8::<{ POST3.c as i32 }>(y, m.post3)
}

/// One round: `acc ^= F(x, k)`.
#[inline]
#[target_feature(enable = "avx512f,gfni")]
fn round(x: &Half, acc: &mut Half, k: &[u32; 8], m: &Matrices) {
    let t0 = s1(_mm512_xor_si512(x[0], splat(k[0])), m.pre, m);
    let t1 = s2(_mm512_xor_si512(x[1], splat(k[1])), m);
    let t2 = s3(_mm512_xor_si512(x[2], splat(k[2])), m);
    let t3 = s1(_mm512_xor_si512(x[3], splat(k[3])), m.pre4, m);
    let t4 = s2(_mm512_xor_si512(x[4], splat(k[4])), m);
    let t5 = s3(_mm512_xor_si512(x[5], splat(k[5])), m);
    let t6 = s1(_mm512_xor_si512(x[6], splat(k[6])), m.pre4, m);
    let t7 = s1(_mm512_xor_si512(x[7], splat(k[7])), m.pre, m);
    // T = t1 ^ ... ^ t8 (two levels deep); each byte of P is T with two or three of them
    // cancelled.
    let total = xor3(xor3(t0, t1, t2), xor3(t3, t4, t5), _mm512_xor_si512(t6, t7));
    acc[0] = _mm512_xor_si512(xor3(acc[0], t1, t4), total); // y1 = T ^ t2 ^ t5
    acc[1] = _mm512_xor_si512(xor3(acc[1], t2, t5), total); // y2 = T ^ t3 ^ t6
    acc[2] = _mm512_xor_si512(xor3(acc[2], t3, t6), total); // y3 = T ^ t4 ^ t7
    acc[3] = _mm512_xor_si512(xor3(acc[3], t0, t7), total); // y4 = T ^ t1 ^ t8
    acc[4] = xor3(xor3(acc[4], t2, t3), t4, total); // y5 = T ^ t3 ^ t4 ^ t5
    acc[5] = xor3(xor3(acc[5], t0, t3), t5, total); // y6 = T ^ t1 ^ t4 ^ t6
    acc[6] = xor3(xor3(acc[6], t0, t1), t6, total); // y7 = T ^ t1 ^ t2 ^ t7
    acc[7] = xor3(xor3(acc[7], t1, t2), t7, total); // y8 = T ^ t2 ^ t3 ^ t8
}

/// `lo ^= (hi & k1) <<< 1` on the 32-bit words whose bytes (most significant first) are
/// `hi` and `lo`, with `k1` a key word byte by byte.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,gfni")]
fn xor_rotated_and(hi: &[__m512i; 4], lo: &mut [__m512i; 4], k1: &[u32], m: &Matrices) {
    let mut a = [_mm512_setzero_si512(); 4];
    for j in 0..4 {
        a[j] = _mm512_and_si512(hi[j], splat(k1[j]));
    }
    for j in 0..4 {
        // Byte j of the rotation: this byte shifted left, and the top bit of the next
        // less significant byte (byte 3 takes byte 0's: the rotation wraps).
        let carry = _mm512_gf2p8affine_epi64_epi8::<0>(a[(j + 1) % 4], m.top_bit);
        lo[j] = xor3(lo[j], _mm512_add_epi8(a[j], a[j]), carry);
    }
}

/// `hi ^= lo | k2`, byte by byte.
#[inline]
#[target_feature(enable = "avx512f")]
fn xor_or(hi: &mut [__m512i; 4], lo: &[__m512i; 4], k2: &[u32]) {
    for j in 0..4 {
        hi[j] = _mm512_ternarylogic_epi64::<XOR_OR>(hi[j], lo[j], splat(k2[j]));
    }
}

/// The two 32-bit halves of a half of the state.
#[inline]
#[target_feature(enable = "avx512f")]
fn split(x: &Half) -> ([__m512i; 4], [__m512i; 4]) {
    ([x[0], x[1], x[2], x[3]], [x[4], x[5], x[6], x[7]])
}

#[inline]
#[target_feature(enable = "avx512f")]
fn join(hi: [__m512i; 4], lo: [__m512i; 4]) -> Half {
    [hi[0], hi[1], hi[2], hi[3], lo[0], lo[1], lo[2], lo[3]]
}

/// FL (RFC 3713 section 2.4.2): `x2 ^= (x1 & k1) <<< 1; x1 ^= x2 | k2`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,gfni")]
fn fl(x: &mut Half, k: &[u32; 8], m: &Matrices) {
    let (mut x1, mut x2) = split(x);
    xor_rotated_and(&x1, &mut x2, &k[..4], m);
    xor_or(&mut x1, &x2, &k[4..]);
    *x = join(x1, x2);
}

/// FL^-1: `y1 ^= y2 | k2; y2 ^= (y1 & k1) <<< 1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,gfni")]
fn fl_inv(y: &mut Half, k: &[u32; 8], m: &Matrices) {
    let (mut y1, mut y2) = split(y);
    xor_or(&mut y1, &y2, &k[4..]);
    xor_rotated_and(&y1, &mut y2, &k[..4], m);
    *y = join(y1, y2);
}

/// One round of the transpose: register `i` paired with `i + 8` byte by byte, the low
/// halves of each lane into register `2i`, the high halves into `2i + 1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn interleave(v: &[__m512i; GROUP_REGS]) -> [__m512i; GROUP_REGS] {
    let lo = _mm512_unpacklo_epi8;
    let hi = _mm512_unpackhi_epi8;
    [
        lo(v[0], v[8]),
        hi(v[0], v[8]),
        lo(v[1], v[9]),
        hi(v[1], v[9]),
        lo(v[2], v[10]),
        hi(v[2], v[10]),
        lo(v[3], v[11]),
        hi(v[3], v[11]),
        lo(v[4], v[12]),
        hi(v[4], v[12]),
        lo(v[5], v[13]),
        hi(v[5], v[13]),
        lo(v[6], v[14]),
        hi(v[6], v[14]),
        lo(v[7], v[15]),
        hi(v[7], v[15]),
    ]
}

/// The 16x16 byte transpose inside each 128-bit lane (its own inverse): four rounds of
/// [`interleave`], each rotating the 8-bit address (register, byte) of every byte left by
/// one bit.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn transpose(v: &[__m512i; GROUP_REGS]) -> [__m512i; GROUP_REGS] {
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
#[target_feature(enable = "avx512f,avx512bw,gfni")]
fn step(w: &Wide, m: &Matrices, tw: &[__m512i; REGS], buf: &mut [u8; STEP]) {
    let w_in = lanes(&w.w_in);
    let mut v = [_mm512_setzero_si512(); REGS];
    for (r, x) in v.iter_mut().enumerate() {
        // SAFETY: bytes 64r..64r+64 are inside the STEP-byte array; unaligned load.
        let d = unsafe { _mm512_loadu_si512(buf.as_ptr().add(64 * r).cast()) };
        *x = xor3(d, tw[r], w_in);
    }
    let mut d1 = [[_mm512_setzero_si512(); 8]; GROUPS];
    let mut d2 = [[_mm512_setzero_si512(); 8]; GROUPS];
    for g in 0..GROUPS {
        let mut x = [_mm512_setzero_si512(); GROUP_REGS];
        x.copy_from_slice(&v[GROUP_REGS * g..GROUP_REGS * (g + 1)]);
        let s = transpose(&x);
        d1[g].copy_from_slice(&s[..8]);
        d2[g].copy_from_slice(&s[8..]);
    }
    // Written out, so that the state stays in registers and every key offset is a
    // constant; the groups alternate round by round, one's chain of dependent
    // instructions filling the other's latency.
    macro_rules! rounds {
        ($r:expr) => {
            for g in 0..GROUPS {
                round(&d1[g], &mut d2[g], &w.k[$r], m);
            }
            for g in 0..GROUPS {
                round(&d2[g], &mut d1[g], &w.k[$r + 1], m);
            }
        };
    }
    macro_rules! fl_layer {
        ($l:literal) => {
            for g in 0..GROUPS {
                fl(&mut d1[g], &w.fl[$l][0], m);
                fl_inv(&mut d2[g], &w.fl[$l][1], m);
            }
        };
    }
    rounds!(0);
    rounds!(2);
    rounds!(4);
    fl_layer!(0);
    rounds!(6);
    rounds!(8);
    rounds!(10);
    fl_layer!(1);
    rounds!(12);
    rounds!(14);
    rounds!(16);
    fl_layer!(2);
    rounds!(18);
    rounds!(20);
    rounds!(22);
    let w_out = lanes(&w.w_out);
    for g in 0..GROUPS {
        // The output block is D2 || D1.
        let (a, b) = (&d2[g], &d1[g]);
        let out = transpose(&[
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1], b[2], b[3], b[4], b[5],
            b[6], b[7],
        ]);
        for (j, x) in out.iter().enumerate() {
            let r = GROUP_REGS * g + j;
            let o = xor3(*x, tw[r], w_out);
            // SAFETY: bytes 64r..64r+64 are inside the STEP-byte array; unaligned store.
            unsafe { _mm512_storeu_si512(buf.as_mut_ptr().add(64 * r).cast(), o) };
        }
    }
}

/// [`step`] on a piece of fewer than 64 blocks, through a zeroed buffer wiped afterwards.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,gfni")]
fn short_step(w: &Wide, m: &Matrices, tw: &[__m512i; REGS], piece: &mut [u8]) {
    let mut buf = [0u8; STEP];
    buf[..piece.len()].copy_from_slice(piece);
    step(w, m, tw, &mut buf);
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
    for r in 0..out.len() {
        out[r] = if r < GROUP_REGS {
            mul_x_pow(base, _mm512_set1_epi64(4 * r as i64))
        } else {
            mul_x64(out[r - GROUP_REGS])
        };
    }
}

/// The tweaks of a unit's next step: every register times `x^(4 REGS)`, one `x^64` at a
/// time. A register `GROUP_REGS` on is `x^64` ahead, so each takes that one's old value
/// times `x^64`; the last group takes the first group's new value (with one group, its
/// own old value).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq")]
fn next_tweaks(tw: &mut [__m512i; REGS]) {
    for r in 0..REGS {
        tw[r] = if r + GROUP_REGS < REGS {
            mul_x64(tw[r + GROUP_REGS])
        } else {
            mul_x64(tw[r + GROUP_REGS - REGS])
        };
    }
}

/// XTS over the units of `data` (`unit` bytes each, a multiple of 16), unit `i` under the
/// encrypted tweak `tweaks[i]`.
#[target_feature(enable = "avx512f,avx512bw,gfni,vpclmulqdq")]
fn xts_units(w: &Wide, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    let m = matrices();
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
                Ok(full) => step(w, &m, &tw, full),
                Err(_) => short_step(w, &m, &tw, group),
            }
        }
    } else {
        for (u, t) in data.chunks_exact_mut(unit).zip(tweaks) {
            first_tweaks(t, &mut tw);
            let mut steps = u.chunks_exact_mut(STEP);
            for s in &mut steps {
                step(w, &m, &tw, s.try_into().expect("a whole step"));
                next_tweaks(&mut tw);
            }
            let rest = steps.into_remainder();
            if !rest.is_empty() {
                short_step(w, &m, &tw, rest);
            }
        }
    }
}

/// ECB over the whole blocks of `data`.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
fn ecb_blocks(w: &Wide, data: &mut [u8]) {
    let m = matrices();
    let zero = [_mm512_setzero_si512(); REGS];
    let mut steps = data.chunks_exact_mut(STEP);
    for s in &mut steps {
        step(w, &m, &zero, s.try_into().expect("a whole step"));
    }
    let rest = steps.into_remainder();
    if !rest.is_empty() {
        short_step(w, &m, &zero, rest);
    }
}

/// Panics unless this CPU runs the backend: what makes the calls below sound.
fn check() {
    assert!(
        CamelliaBackend::Avx512.check_cpu().is_ok(),
        "camellia avx512 kernel called on a cpu without avx512f, avx512bw, gfni and vpclmulqdq"
    );
}

/// The whole blocks of `data` in place through the pass `w` (ECB).
pub(super) fn ecb(w: &Wide, data: &mut [u8]) {
    check();
    let len = data.len() / 16 * 16;
    // SAFETY: the CPU has AVX-512 F/BW and GFNI (checked above).
    unsafe { ecb_blocks(w, &mut data[..len]) }
}

/// XTS through the pass `w` over `tweaks.len()` units of `unit` bytes (a multiple of 16)
/// at the start of `data`, unit `i` under the encrypted tweak `tweaks[i]`.
pub(super) fn xts(w: &Wide, tweaks: &[[u8; 16]], unit: usize, data: &mut [u8]) {
    check();
    assert!(unit > 0 && unit.is_multiple_of(16) && data.len() >= unit * tweaks.len());
    let data = &mut data[..unit * tweaks.len()];
    // SAFETY: the CPU has AVX-512 F/BW, GFNI and VPCLMULQDQ (checked above).
    unsafe { xts_units(w, tweaks, unit, data) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` when the CPU has the backend's features; otherwise prints why not.
    fn on_cpu(f: impl FnOnce()) {
        match CamelliaBackend::Avx512.check_cpu() {
            Ok(()) => f(),
            Err(e) => eprintln!("skipped: camellia avx512: {e}"),
        }
    }

    /// The zmm tweaks of a unit's first steps against the scalar multiply by alpha, from
    /// tweaks whose top bits exercise every reduction.
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
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
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
