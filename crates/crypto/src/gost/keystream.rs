//! Keystreams through the block kernel: scalar code writes counter blocks into a buffer of
//! up to [`CHUNK`] bytes, the key's backend encrypts them as independent blocks, and the
//! result is XORed from the source into the destination of an [`InOut`] (the same bytes
//! when in place). Magma CTR, CTR-ACPKM and MGM use all of it; GOST 28147-89 CNT makes its
//! own counter blocks (key meshing, a side job) and uses [`xor_at`].

use super::{Core, Dir, BLOCK};
use crate::buf::InOut;
use zeroize::Zeroize;

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
