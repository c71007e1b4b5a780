//! Keystreams through the block kernel: scalar code writes counter blocks into a buffer of
//! up to [`CHUNK`] bytes, the key's backend encrypts them as independent blocks, and the
//! result is XORed from the source into the destination of an [`InOut`] (the same bytes
//! when in place). Magma CTR, CTR-ACPKM and MGM use all of it; GOST 28147-89 CNT makes its
//! own counter blocks (key meshing, a side job) and uses [`xor_at`].
//!
//! The two counters that are arithmetic progressions ([`Counter`]: Magma CTR's 64-bit
//! count, GOST 28147-89 CNT's pair of sums) go instead to the backend's counter kernel
//! where it has one (`avx512`), which makes the counter blocks in registers and XORs the
//! keystream into the data as it goes ([`Core::ctr_kernel`]).

use super::{Core, Dir, BLOCK};
use crate::buf::InOut;
use zeroize::Zeroize;

/// CNT's C2, added to N3 modulo 2^32 (GOST 28147-89 section 3.1).
pub(crate) const C2: u32 = 0x0101_0101;
/// CNT's C1, added to N4 modulo 2^32 - 1.
pub(crate) const C1: u32 = 0x0101_0104;

/// `a + b mod 2^32 - 1` the way every GOST 28147-89 implementation does it: a carry out
/// of bit 31 is added back in (end-around carry). Branch-free.
#[inline(always)]
pub(crate) fn add_mod_2_32_minus_1(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s.wrapping_add(carry as u32)
}

/// A counter that is an arithmetic progression, by its state before the next block.
///
/// `Cnt`: one end-around addition of `d = n C1 mod 2^32 - 1` gives the same word as `n`
/// single steps of `C1`, for every `n >= 1` below the order of `C1` (which is
/// `2^32 - 1`: `C1` is prime to it): a step's result is the representative in
/// `[1, 2^32 - 1]` of its residue (a sum below 2^32 is at least `C1`; a sum from 2^32 up
/// becomes at least 1 and at most `C1`), and so is the end-around sum `x + d` for `d != 0`
/// (below 2^32 it is at least `d >= 1`; from 2^32 up it is `x + d - (2^32 - 1)` in
/// `[1, 2^32 - 2]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    /// Magma CTR: block `i` (from 0) is the 64-bit integer `c + i mod 2^64`.
    Add64(u64),
    /// GOST 28147-89 CNT with its registers `(N3, N4)`: block `i` (from 1) is
    /// `N3 + i C2 mod 2^32` (low word) and `N4 + i C1 mod 2^32 - 1` (high word).
    Cnt(u32, u32),
}

impl Counter {
    /// The counter after `n` blocks (`n` below 2^32 - 1).
    #[inline(always)]
    pub(crate) fn advance(self, n: u64) -> Counter {
        match self {
            Counter::Add64(c) => Counter::Add64(c.wrapping_add(n)),
            Counter::Cnt(n3, n4) if n > 0 => Counter::Cnt(
                n3.wrapping_add(C2.wrapping_mul(n as u32)),
                add_mod_2_32_minus_1(n4, ((C1 as u64 * n) % 0xffff_ffff) as u32),
            ),
            cnt => cnt,
        }
    }

    /// The next block, the counter advanced past it.
    #[inline(always)]
    pub(crate) fn next_block(&mut self) -> u64 {
        match self {
            Counter::Add64(c) => {
                let v = *c;
                *c = c.wrapping_add(1);
                v
            }
            Counter::Cnt(n3, n4) => {
                *n3 = n3.wrapping_add(C2);
                *n4 = add_mod_2_32_minus_1(*n4, C1);
                ((*n4 as u64) << 32) | *n3 as u64
            }
        }
    }
}

impl Zeroize for Counter {
    fn zeroize(&mut self) {
        match self {
            Counter::Add64(c) => c.zeroize(),
            Counter::Cnt(a, b) => {
                a.zeroize();
                b.zeroize();
            }
        }
    }
}

/// Bytes per call into the block kernel.
pub(crate) const CHUNK: usize = 4096;

/// The bytes `io` reads.
pub(crate) fn input<'b>(io: &'b InOut<'_>) -> &'b [u8] {
    match io {
        InOut::InPlace(b) => b,
        InOut::Split { src, .. } => src,
    }
}

/// The bytes `io` writes.
pub(crate) fn output<'b>(io: &'b mut InOut<'_>) -> &'b mut [u8] {
    match io {
        InOut::InPlace(b) => b,
        InOut::Split { dst, .. } => dst,
    }
}

/// Writes input XOR `ks` to the output bytes `[off, off + ks.len())` of `io`.
#[inline]
pub(crate) fn xor_at(io: &mut InOut<'_>, off: usize, ks: &[u8]) {
    let end = off + ks.len();
    match io {
        InOut::InPlace(b) => {
            for (d, k) in b[off..end].iter_mut().zip(ks) {
                *d ^= k;
            }
        }
        InOut::Split { src, dst } => {
            for ((d, s), k) in dst[off..end].iter_mut().zip(&src[off..end]).zip(ks) {
                *d = s ^ k;
            }
        }
    }
}

/// Fills `ks` (whole blocks) with the blocks `next` gives, in the key's byte order, and
/// encrypts them on the key's backend.
#[inline]
pub(crate) fn counter_blocks(core: &Core, ks: &mut [u8], mut next: impl FnMut() -> u64) {
    for b in ks.chunks_exact_mut(BLOCK) {
        b.copy_from_slice(&core.order.store(next()));
    }
    core.ecb(Dir::Encrypt, InOut::InPlace(ks));
}

/// XORs into `io` the keystream of the counter blocks `next` gives, starting `skip` (< 8)
/// bytes into the first block.
pub(crate) fn ctr_xor(core: &Core, mut io: InOut<'_>, skip: usize, mut next: impl FnMut() -> u64) {
    let mut ks = [0u8; CHUNK];
    let len = io.len();
    let (mut off, mut skip) = (0, skip);
    while off < len {
        let n = (len - off + skip).min(CHUNK);
        counter_blocks(core, &mut ks[..n.div_ceil(BLOCK) * BLOCK], &mut next);
        xor_at(&mut io, off, &ks[skip..n]);
        off += n - skip;
        skip = 0;
    }
    ks.zeroize();
}

/// XORs into `io` the keystream of `ctr` starting `skip` (< 8) bytes into its first block,
/// and advances `ctr` past the blocks used (a partial last block counts). The whole blocks
/// go to the backend's counter kernel where it has one.
pub(crate) fn progression_xor(core: &Core, mut io: InOut<'_>, skip: usize, ctr: &mut Counter) {
    let len = io.len();
    let mut off = 0;
    if skip > 0 {
        off = (BLOCK - skip).min(len);
        ctr_xor(core, io.slice(0, off), skip, || ctr.next_block());
    }
    let whole = (len - off) / BLOCK * BLOCK;
    let done = core.ctr_kernel(*ctr, io.slice(off, off + whole), None);
    *ctr = ctr.advance((done / BLOCK) as u64);
    off += done;
    if off < len {
        ctr_xor(core, io.slice(off, len), 0, || ctr.next_block());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `advance(n)` equals `n` single steps, from the words where the sums wrap: N3 near
    /// 2^32, N4 at 0, 1, near and at 2^32 - 1 (both representations of zero); and the
    /// 64-bit count across its carry and its wrap.
    #[test]
    fn advance_equals_single_steps() {
        let starts = [
            Counter::Cnt(0, 0),
            Counter::Cnt(0xffff_fff0, 0xffff_ffff),
            Counter::Cnt(0xfefe_feff, 0xfefe_fefb),
            Counter::Cnt(1, 0xffff_fffe),
            Counter::Cnt(0x8000_0000, 1),
            Counter::Cnt(0xdead_beef, 0xfefe_fefc),
            Counter::Add64(0xffff_fff0),
            Counter::Add64(u64::MAX - 3),
        ];
        for start in starts {
            let mut stepped = start;
            for n in 0..=600u64 {
                assert_eq!(start.advance(n), stepped, "{start:?} n {n}");
                stepped.next_block();
            }
        }
    }

    /// CNT's words after a step never take the value 0 (the mod 2^32 - 1 zero is 2^32 - 1),
    /// so the end-around addition of a nonzero multiple of C1 stays exact (the doc of
    /// [`Counter`]); the wrap of N4 from 2^32 - 1 gives C1 - 0 = C1.
    #[test]
    fn cnt_word_wraps_like_the_standard() {
        let mut c = Counter::Cnt(0, 0xffff_ffff);
        c.next_block();
        assert_eq!(c, Counter::Cnt(C2, C1));
        let mut c = Counter::Cnt(0, 0xffff_ffff - C1);
        c.next_block();
        assert_eq!(c, Counter::Cnt(C2, 0xffff_ffff));
    }
}
