//! The `avx2` GOST 28147-89 / Magma backend: ECB of many independent blocks, byte-sliced in
//! ymm registers, S-boxes held in registers as `vpshufb` tables, from a source to a
//! destination (the same bytes when in place). Every parallel mode (ECB, the
//! CNT/CTR/CTR-ACPKM keystreams, CBC and CFB decryption, the sector-interleaved CBC and CFB
//! encryption, MGM's two counter streams) is built on it by the mode layer.
//!
//! # Design
//! Target: any x86-64 CPU with AVX2 (Haswell and later, Zen 1 and later); tuned on Zen 4
//! (four 256-bit integer pipes, two of which shuffle). Nothing here uses AVX-512.
//!
//! ## Layout: byte-sliced, 32 blocks per group
//! A group is 32 blocks = 256 bytes = 8 ymm registers. It is transposed so that register
//! `A[j]` holds byte `j` (j = 0 least significant) of the half `N1` of all 32 blocks and
//! `B[j]` byte `j` of `N2`. Block order inside the group does not matter (every block is
//! independent), so the transposition is whatever is cheapest: one `vpshufb` per input
//! register that pairs the same byte position of its two blocks per lane into 16-bit words,
//! then a standard 8x8 transpose of 16-bit words (unpack 16/32/64: 24 ops), i.e. about one
//! op per block each way. The byte convention is folded into the first shuffle: GOST
//! 28147-89 takes byte position `k` from block byte `k`, Magma from block byte `7 - k`
//! (the two standards are the same cipher with reversed byte strings), so both run the same
//! kernel at the same speed.
//!
//! ## One round on 32 blocks: 55 ops, no memory lookups
//! - `a + K mod 2^32` across four byte registers: bytes are added with `vpaddb`; the carry
//!   out of each byte is known without a carry-in (`a_j > ~k_j` unsigned, i.e.
//!   `min(a_j, ~k_j) != a_j`: `vpminub` + `vpcmpeqb`) and a byte propagates a carry iff
//!   `a_j + k_j == 0xff`; the carries are combined like a carry-lookahead adder with
//!   `vpandn` and added back as 0 / -1 masks (`k_j + 1` is pre-added). 19 ops.
//! - `S` and `<<< 11` together: rotating by 8 is renaming registers; the remaining rotation
//!   by 3 moves bits across byte registers, which AVX2 cannot shift bytewise. It is folded
//!   into the tables instead: output byte `j` of `S(x) <<< 11` is
//!   `(s_{j-1} << 3 | s_{j-2} >> 5) & 0xff` where `s_m = L_m(lo_m) | H_m(hi_m) << 4`, so it
//!   is the OR of three nibble lookups, `L_{j-1}(lo) << 3`, `(H_{j-1}(hi) & 1) << 7` and
//!   `H_{j-2}(hi) >> 1`, each a 16-entry table: 12 `vpshufb` per round, indices from one
//!   `vpand` (low nibble) or `vpsrlw` + `vpand` (high nibble), results XORed straight into
//!   `B`. 36 ops.
//!
//! So a round costs ~55 simple ops per 32 blocks, ~1.7 per block; 32 rounds plus the
//! transposition are ~57 ops per block, i.e. an estimated ~14 cycles per block at four
//! vector ops per cycle. The 12 shuffles per round are a quarter of the ops, well
//! under the two shuffle ports.
//!
//! ## Many blocks in flight
//! One round of one group has a dependency chain of ~13 cycles (the carry lookahead, the
//! index extraction, the shuffle, the XOR chain) and rounds of a group are serial, so
//! groups are interleaved round by round: `INTERLEAVE` = 4 groups = 128 blocks = 1 KiB per
//! iteration (against 2 and 3, 4 was the fastest on Zen 4 despite spilling the 32 state
//! registers to the stack; spills cost loads and stores, not latency). 1 KiB is also the
//! CryptoPro key meshing period, so a meshed piece is exactly one iteration. Measured
//! throughput: `docs/PERFORMANCE.md`, section "GOST 28147-89 and Magma".
//!
//! ## Source and destination
//! The kernel reads a group from the source and writes it to the destination of an
//! [`InOut`] (the same pointer when in place): every group of an iteration is loaded
//! before any is stored, so in place is safe and out of place costs no copy.
//!
//! Register budget (16 ymm): 8 state registers per group; the tables (12) and shuffles live
//! in a per-process table, the 7 per-round key rows of each key word in an aligned stack
//! array rebuilt per call (key meshing changes the key every KiB); both are loaded at
//! offsets that depend only on the round number.
//!
//! ## Constant time
//! The S-box tables are loaded into registers from fixed addresses and "looked up" by
//! `vpshufb`, which selects bytes within a register; key rows are loaded from addresses
//! that depend on the (public) round order only; there is no branch on data. How this was
//! checked: `scripts/gost-ct-disasm.sh` disassembles the release build of [`ecb_groups`]
//! and lists every memory operand by addressing form and every conditional branch. All
//! operands are stack slots (`%rsp` + constant), the source and destination pointers plus
//! the group offset, the key-row base plus `rounds[r] * 224`, or the table base plus a
//! constant; the branches are the loop counters over the public group count.
//! `scripts/gost-ct-cachegrind.sh` runs the modes under cachegrind with three different
//! keys, IVs and data and requires identical instruction, data-access and L1-miss counts.
//! The differential tests check the kernel against the portable backend at every boundary.
//!
//! Left out: the sequential modes (CBC/CFB encryption of one message, OFB, the MACs) gain
//! nothing from 32 lanes on one message and use the portable code; a group shorter than 32
//! blocks is padded through a stack buffer (at most once per call), and a single block is
//! left to the portable code.
//!
//! Calling contract: [`ecb`] may only be called for keys on [`GostBackend::Avx2`], which
//! exists only after its CPU check; it re-checks and panics otherwise, which is what makes
//! the `unsafe` calls of the `#[target_feature]` functions sound.
#![allow(unsafe_code)]

use super::soft::SideJob;
use super::{GostBackend, Order, Sbox};
use crate::buf::InOut;
use core::arch::x86_64::*;
use std::sync::OnceLock;
use zeroize::Zeroize;

/// Blocks per group.
const BLOCKS: usize = 32;
/// Bytes per group.
const GROUP: usize = BLOCKS * 8;

/// The per-key rows: for each key word K1..K8, K0, ~K0, K1+1, ~K1, K2+1, ~K2, K3+1 (each
/// byte broadcast over 32 bytes). Built per call (key meshing changes the key every
/// 1024 bytes), on the stack, zeroized on drop.
/// Kept as `u64` words so the zeroization on drop is 224 word stores, not 1792 byte
/// stores (it runs once per call).
#[repr(C, align(32))]
struct KeyRows([[[u64; 4]; 7]; 8]);

impl Drop for KeyRows {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl KeyRows {
    fn new(k: &[u32; 8]) -> KeyRows {
        let mut rows = KeyRows([[[0; 4]; 7]; 8]);
        for (dst, &w) in rows.0.iter_mut().zip(k) {
            let kb = w.to_le_bytes();
            let v = [
                kb[0],
                !kb[0],
                kb[1].wrapping_add(1),
                !kb[1],
                kb[2].wrapping_add(1),
                !kb[2],
                kb[3].wrapping_add(1),
            ];
            for (d, x) in dst.iter_mut().zip(v) {
                *d = [u64::from_ne_bytes([x; 8]); 4];
            }
        }
        rows
    }
}

/// The S-box tables and byte shuffles of one (parameter set, byte convention): public,
/// built once per process.
#[repr(C, align(32))]
struct Tables {
    /// `L_m(x) << 3` for m = 0..3 (L_m = pi_{2m}), both lanes.
    tl3: [[u8; 32]; 4],
    /// `(H_m(x) & 1) << 7` (H_m = pi_{2m+1}).
    th7: [[u8; 32]; 4],
    /// `H_m(x) >> 1`.
    th1: [[u8; 32]; 4],
    /// Input shuffle: pairs byte position k of the two blocks of a lane into word k.
    shuf_in: [u8; 32],
    /// Its inverse.
    shuf_out: [u8; 32],
}

impl Tables {
    fn new(sbox: Sbox, order: Order) -> Tables {
        let rows = sbox.rows();
        let mut c = Tables {
            tl3: [[0; 32]; 4],
            th7: [[0; 32]; 4],
            th1: [[0; 32]; 4],
            shuf_in: [0; 32],
            shuf_out: [0; 32],
        };
        for m in 0..4 {
            for x in 0..16 {
                let l = rows[2 * m][x];
                let h = rows[2 * m + 1][x];
                for lane in [0, 16] {
                    c.tl3[m][lane + x] = l << 3;
                    c.th7[m][lane + x] = (h & 1) << 7;
                    c.th1[m][lane + x] = h >> 1;
                }
            }
        }
        for k in 0..8 {
            let src = match order {
                Order::Gost89 => k,
                Order::Magma => 7 - k,
            } as u8;
            for lane in [0, 16] {
                c.shuf_in[lane + 2 * k] = src;
                c.shuf_in[lane + 2 * k + 1] = 8 + src;
                c.shuf_out[lane + src as usize] = 2 * k as u8;
                c.shuf_out[lane + 8 + src as usize] = 2 * k as u8 + 1;
            }
        }
        c
    }

    /// The tables of `sbox` in `order`, built on first use.
    fn get(sbox: Sbox, order: Order) -> &'static Tables {
        static ALL: OnceLock<Vec<Tables>> = OnceLock::new();
        let all = ALL.get_or_init(|| {
            Sbox::ALL
                .iter()
                .flat_map(|&s| [Tables::new(s, Order::Gost89), Tables::new(s, Order::Magma)])
                .collect()
        });
        let i = Sbox::ALL.iter().position(|&s| s == sbox).unwrap_or(0);
        &all[2 * i + (order == Order::Magma) as usize]
    }
}

/// ECB over the whole blocks of `io` with key words `k` used in the round order `rounds`.
/// Returns the number of leading bytes done: everything, unless the buffer holds a single
/// block (left to the portable code).
pub(super) fn ecb(
    k: &[u32; 8],
    rounds: &[usize; 32],
    sbox: Sbox,
    order: Order,
    mut io: InOut<'_>,
    side: Option<&mut SideJob>,
) -> usize {
    assert!(
        GostBackend::Avx2.check_cpu().is_ok(),
        "gost avx2 kernel called on a cpu without avx2"
    );
    let blocks = io.len() / 8;
    if blocks < 2 {
        return 0;
    }
    let t = Tables::get(sbox, order);
    let keys = KeyRows::new(k);
    let mut side = side;
    let c = Ctx {
        t,
        keys: &keys,
        rounds,
    };
    let groups = blocks / BLOCKS;
    let (src, dst) = io.ptrs();
    // SAFETY: AVX2 and the ymm state are present (checked above); `src` and `dst` (equal
    // when in place) are valid for `io.len() >= groups * GROUP` bytes.
    unsafe { ecb_groups(&c, src, dst, groups, side.as_deref_mut()) };
    let tail = blocks % BLOCKS;
    if tail > 0 {
        let off = groups * GROUP;
        let n = tail * 8;
        let mut tmp = [0u8; GROUP];
        io.load(off, &mut tmp[..n]);
        let p = tmp.as_mut_ptr();
        // SAFETY: as above; `tmp` holds one whole group, transformed in place.
        unsafe { ecb_groups(&c, p, p, 1, side) };
        io.store(off, &tmp[..n]);
        tmp.zeroize();
    }
    blocks * 8
}

/// What the kernel reads besides the data.
struct Ctx<'a> {
    t: &'a Tables,
    keys: &'a KeyRows,
    rounds: &'a [usize; 32],
}

#[inline(always)]
unsafe fn ldk(p: &[u64; 4]) -> __m256i {
    // SAFETY: `p` is a 32-byte row of the 32-byte-aligned `KeyRows` at a 32-byte offset.
    unsafe { _mm256_load_si256(p.as_ptr() as *const __m256i) }
}

#[inline(always)]
unsafe fn ld(p: &[u8; 32]) -> __m256i {
    // SAFETY: `p` is a 32-byte array inside the 32-byte-aligned `Tables` or `KeyRows` at a
    // 32-byte offset, so the aligned load is in bounds and aligned.
    unsafe { _mm256_load_si256(p.as_ptr() as *const __m256i) }
}

/// The 8x8 transpose of 16-bit words within each 128-bit lane (an involution).
#[inline(always)]
unsafe fn transpose(r: &mut [__m256i; 8]) {
    // SAFETY (whole function): register-only AVX2 operations; the caller has AVX2.
    unsafe {
        let t0 = _mm256_unpacklo_epi16(r[0], r[1]);
        let t1 = _mm256_unpackhi_epi16(r[0], r[1]);
        let t2 = _mm256_unpacklo_epi16(r[2], r[3]);
        let t3 = _mm256_unpackhi_epi16(r[2], r[3]);
        let t4 = _mm256_unpacklo_epi16(r[4], r[5]);
        let t5 = _mm256_unpackhi_epi16(r[4], r[5]);
        let t6 = _mm256_unpacklo_epi16(r[6], r[7]);
        let t7 = _mm256_unpackhi_epi16(r[6], r[7]);
        let u0 = _mm256_unpacklo_epi32(t0, t2);
        let u1 = _mm256_unpackhi_epi32(t0, t2);
        let u2 = _mm256_unpacklo_epi32(t1, t3);
        let u3 = _mm256_unpackhi_epi32(t1, t3);
        let u4 = _mm256_unpacklo_epi32(t4, t6);
        let u5 = _mm256_unpackhi_epi32(t4, t6);
        let u6 = _mm256_unpacklo_epi32(t5, t7);
        let u7 = _mm256_unpackhi_epi32(t5, t7);
        r[0] = _mm256_unpacklo_epi64(u0, u4);
        r[1] = _mm256_unpackhi_epi64(u0, u4);
        r[2] = _mm256_unpacklo_epi64(u1, u5);
        r[3] = _mm256_unpackhi_epi64(u1, u5);
        r[4] = _mm256_unpacklo_epi64(u2, u6);
        r[5] = _mm256_unpackhi_epi64(u2, u6);
        r[6] = _mm256_unpacklo_epi64(u3, u7);
        r[7] = _mm256_unpackhi_epi64(u3, u7);
    }
}

/// Loads one group and transposes it: returns (A, B) = bytes 0..3 of N1 and of N2.
#[inline(always)]
unsafe fn load_group(c: &Ctx<'_>, p: *const u8) -> ([__m256i; 4], [__m256i; 4]) {
    // SAFETY: the caller guarantees GROUP readable bytes at `p`; loads are unaligned.
    unsafe {
        let shuf = ld(&c.t.shuf_in);
        let mut r = [_mm256_setzero_si256(); 8];
        for (i, x) in r.iter_mut().enumerate() {
            let v = _mm256_loadu_si256(p.add(32 * i) as *const __m256i);
            *x = _mm256_shuffle_epi8(v, shuf);
        }
        transpose(&mut r);
        ([r[0], r[1], r[2], r[3]], [r[4], r[5], r[6], r[7]])
    }
}

/// Transposes back and stores one group; `lo` becomes N1 and `hi` N2.
#[inline(always)]
unsafe fn store_group(c: &Ctx<'_>, p: *mut u8, lo: [__m256i; 4], hi: [__m256i; 4]) {
    // SAFETY: the caller guarantees GROUP writable bytes at `p`; stores are unaligned.
    unsafe {
        let mut r = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
        transpose(&mut r);
        let shuf = ld(&c.t.shuf_out);
        for (i, x) in r.iter().enumerate() {
            _mm256_storeu_si256(p.add(32 * i) as *mut __m256i, _mm256_shuffle_epi8(*x, shuf));
        }
    }
}

/// `b ^= S(a + k) <<< 11` for one group, with the round constants `k` (7 rows).
#[inline(always)]
unsafe fn round(c: &Ctx<'_>, k: &[[u64; 4]; 7], a: &[__m256i; 4], b: &mut [__m256i; 4]) {
    // SAFETY (whole function): register AVX2 operations and aligned loads from `Tables`
    // and `KeyRows`.
    unsafe {
        let zero = _mm256_setzero_si256();
        let m0f = _mm256_set1_epi8(0x0f);
        // a + k mod 2^32, byte-sliced (carry lookahead over four bytes).
        let s0 = _mm256_add_epi8(a[0], ldk(&k[0]));
        let ng0 = _mm256_cmpeq_epi8(_mm256_min_epu8(a[0], ldk(&k[1])), a[0]);
        let t1 = _mm256_add_epi8(a[1], ldk(&k[2]));
        let ng1 = _mm256_cmpeq_epi8(_mm256_min_epu8(a[1], ldk(&k[3])), a[1]);
        let p1 = _mm256_cmpeq_epi8(t1, zero);
        let t2 = _mm256_add_epi8(a[2], ldk(&k[4]));
        let ng2 = _mm256_cmpeq_epi8(_mm256_min_epu8(a[2], ldk(&k[5])), a[2]);
        let p2 = _mm256_cmpeq_epi8(t2, zero);
        let t3 = _mm256_add_epi8(a[3], ldk(&k[6]));
        let nc2 = _mm256_andnot_si256(_mm256_andnot_si256(ng0, p1), ng1);
        let nc3 = _mm256_andnot_si256(_mm256_andnot_si256(nc2, p2), ng2);
        let s = [
            s0,
            _mm256_add_epi8(t1, ng0),
            _mm256_add_epi8(t2, nc2),
            _mm256_add_epi8(t3, nc3),
        ];
        // Nibble indices.
        let lo: [__m256i; 4] = core::array::from_fn(|m| _mm256_and_si256(s[m], m0f));
        let hi: [__m256i; 4] =
            core::array::from_fn(|m| _mm256_and_si256(_mm256_srli_epi16(s[m], 4), m0f));
        // S and <<< 11: output byte j from s_{j-1} (both nibbles) and s_{j-2} (high).
        for j in 0..4 {
            let m1 = (j + 3) & 3;
            let m2 = (j + 2) & 3;
            let x = _mm256_shuffle_epi8(ld(&c.t.tl3[m1]), lo[m1]);
            let y = _mm256_shuffle_epi8(ld(&c.t.th7[m1]), hi[m1]);
            let z = _mm256_shuffle_epi8(ld(&c.t.th1[m2]), hi[m2]);
            b[j] = _mm256_xor_si256(b[j], _mm256_xor_si256(_mm256_xor_si256(x, y), z));
        }
    }
}

/// `G` groups from `src` to `dst`, interleaved round by round; every group is loaded
/// before any is stored, so `src == dst` (in place) is allowed.
///
/// # Safety
/// AVX2 must be present; `src` must be valid for reads and `dst` for writes of
/// `G * GROUP` bytes.
#[inline(always)]
unsafe fn run<const G: usize>(
    c: &Ctx<'_>,
    src: *const u8,
    dst: *mut u8,
    side: &mut Option<&mut SideJob>,
) {
    // SAFETY (whole function): the caller vouches for `G * GROUP` bytes at `src` and
    // `dst`, and for AVX2.
    unsafe {
        let mut a = [[_mm256_setzero_si256(); 4]; G];
        let mut b = [[_mm256_setzero_si256(); 4]; G];
        for g in 0..G {
            (a[g], b[g]) = load_group(c, src.add(g * GROUP));
        }
        for r in (0..32).step_by(2) {
            let k0 = &c.keys.0[c.rounds[r]];
            let k1 = &c.keys.0[c.rounds[r + 1]];
            // Two scalar rounds of the side job per two vector rounds: they run on the
            // integer units while the vector units work.
            if let Some(j) = side.as_deref_mut() {
                j.step();
                j.step();
            }
            for g in 0..G {
                round(c, k0, &a[g], &mut b[g]);
            }
            for g in 0..G {
                round(c, k1, &b[g], &mut a[g]);
            }
        }
        // After an even number of in-place rounds the output is N1 = b, N2 = a.
        for g in 0..G {
            store_group(c, dst.add(g * GROUP), b[g], a[g]);
        }
    }
}

/// Groups interleaved per iteration of the main loop.
const INTERLEAVE: usize = 4;

/// `groups` whole groups from `src` to `dst` (equal when in place), `INTERLEAVE` groups
/// per iteration.
///
/// # Safety
/// The CPU must have AVX2 (and the OS the ymm state); `src` must be valid for reads and
/// `dst` for writes of `groups * GROUP` bytes.
#[target_feature(enable = "avx2")]
unsafe fn ecb_groups(
    c: &Ctx<'_>,
    src: *const u8,
    dst: *mut u8,
    groups: usize,
    mut side: Option<&mut SideJob>,
) {
    let mut g = 0;
    // SAFETY (both loops): every pointer is `src` or `dst` plus a multiple of GROUP, with
    // the groups it covers below `groups`, the range the caller vouches for.
    while g + INTERLEAVE <= groups {
        unsafe { run::<INTERLEAVE>(c, src.add(g * GROUP), dst.add(g * GROUP), &mut side) };
        g += INTERLEAVE;
    }
    while g < groups {
        unsafe { run::<1>(c, src.add(g * GROUP), dst.add(g * GROUP), &mut side) };
        g += 1;
    }
}

/// Seconds per round per block of this kernel's rounds alone (no loads, stores or
/// transpositions): `INTERLEAVE` groups through 32 rounds, repeated, the best of five runs.
pub(super) fn round_seconds() -> f64 {
    assert!(
        GostBackend::Avx2.check_cpu().is_ok(),
        "gost avx2 probe called on a cpu without avx2"
    );
    let keys = KeyRows::new(&[0x1234_5678; 8]);
    let c = Ctx {
        t: Tables::get(Sbox::Tc26Z, Order::Magma),
        keys: &keys,
        rounds: &super::ENC_ORDER,
    };
    let reps = 100;
    super::best_seconds(reps * 32 * INTERLEAVE * BLOCKS, || {
        // SAFETY: AVX2 and the ymm state are present (checked above).
        unsafe { probe(&c, reps) }
    })
}

/// `reps` times 32 rounds on `INTERLEAVE` groups in registers.
///
/// # Safety
/// The CPU must have AVX2 (and the OS the ymm state).
#[target_feature(enable = "avx2")]
unsafe fn probe(c: &Ctx<'_>, reps: usize) {
    let mut a = [[_mm256_set1_epi8(7); 4]; INTERLEAVE];
    let mut b = [[_mm256_set1_epi8(9); 4]; INTERLEAVE];
    for _ in 0..reps {
        for r in (0..32).step_by(2) {
            let k0 = &c.keys.0[c.rounds[r]];
            let k1 = &c.keys.0[c.rounds[r + 1]];
            for g in 0..INTERLEAVE {
                // SAFETY: the caller has AVX2.
                unsafe { round(c, k0, &a[g], &mut b[g]) };
            }
            for g in 0..INTERLEAVE {
                // SAFETY: as above.
                unsafe { round(c, k1, &b[g], &mut a[g]) };
            }
        }
        a = std::hint::black_box(a);
    }
    std::hint::black_box((a, b));
}
