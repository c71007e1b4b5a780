//! The per-message state of GCM's streaming path (and of one-shot messages the stitched
//! kernels do not take whole), and the two-pass bulk: CTR with GCM's 32-bit counter, then
//! GHASH, chunk by chunk in cache.

#![forbid(unsafe_code)]

use super::{check_message_len, Gcm, CHUNK, TOO_LONG};
use crate::aes_core::AesKernels;
use crate::block::{Block, BLOCK};
use crate::buf::{Direction, InOut};
use crate::Error;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// The per-message state of the one-shot and streaming paths: O(1), at most one partial
/// block. Its secrets (the hash state, E_K(J0), keystream and data of the partial block)
/// are zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub(super) struct Stream {
    /// The counter block of the next keystream block not yet generated.
    #[zeroize(skip)]
    ctr: u128,
    /// The GHASH state.
    y: u128,
    /// J0 until `ek_done`, then E_K(J0): the block is encrypted by the first stitched bulk
    /// call (alongside the data) or, failing that, by [`Stream::tag`].
    ek_j0: Block,
    #[zeroize(skip)]
    ek_done: bool,
    #[zeroize(skip)]
    aad_len: u64,
    /// Message bytes processed so far.
    #[zeroize(skip)]
    pub(super) len: u64,
    /// Keystream of the current partial block (valid when `pos > 0`).
    ks: Block,
    /// Ciphertext bytes `[0, pos)` of the current partial block.
    partial: Block,
    /// Bytes used of the current partial block; 0 at a block boundary.
    #[zeroize(skip)]
    pos: usize,
}

impl Stream {
    pub(super) fn new(j0: u128, y: u128, aad_len: usize) -> Stream {
        Stream {
            ctr: inc32(j0),
            y,
            ek_j0: j0.to_be_bytes(),
            ek_done: false,
            aad_len: aad_len as u64,
            len: 0,
            ks: [0; BLOCK],
            partial: [0; BLOCK],
            pos: 0,
        }
    }

    pub(super) fn update(
        &mut self,
        gcm: &Gcm,
        mut data: InOut<'_>,
        dir: Direction,
    ) -> Result<(), Error> {
        let total = self.len.checked_add(data.len() as u64).ok_or(TOO_LONG)?;
        check_message_len(total)?;
        self.len = total;
        let len = data.len();
        let mut off = 0;
        // 1. Finish a partial block left by the previous call.
        if self.pos > 0 {
            let n = (BLOCK - self.pos).min(len);
            self.crypt_partial(data.slice(0, n), dir);
            off = n;
            if self.pos == BLOCK {
                gcm.pair.ghash(&mut self.y, &self.partial);
                self.pos = 0;
            }
        }
        // 2. Whole blocks, chunk by chunk: CTR then GHASH (encrypt) or GHASH then CTR.
        let whole_end = off + (len - off) / BLOCK * BLOCK;
        // 2a. The backend's stitched CTR + GHASH loop, where it has one.
        let done = gcm.pair.stitched(
            &mut self.ctr,
            &mut self.y,
            data.slice(off, whole_end),
            dir == Direction::Decrypt,
            (!self.ek_done).then_some(&mut self.ek_j0),
        );
        self.ek_done |= done > 0;
        off += done;
        while off < whole_end {
            let end = (off + CHUNK).min(whole_end);
            let mut part = data.slice(off, end);
            match dir {
                Direction::Encrypt => {
                    ctr32(gcm.pair.aes(), &mut self.ctr, part.reborrow());
                    gcm.pair.ghash(&mut self.y, output(&part));
                }
                Direction::Decrypt => {
                    gcm.pair.ghash(&mut self.y, input(&part));
                    ctr32(gcm.pair.aes(), &mut self.ctr, part);
                }
            }
            off = end;
        }
        // 3. Start a new partial block with what is left.
        if off < len {
            self.ks = self.next_keystream(gcm);
            self.crypt_partial(data.slice(off, len), dir);
        }
        Ok(())
    }

    /// XORs `data` (no longer than what is left of the partial block) with the keystream
    /// and collects its ciphertext.
    fn crypt_partial(&mut self, mut data: InOut<'_>, dir: Direction) {
        let n = data.len();
        let mut b = [0u8; BLOCK];
        data.load(0, &mut b[..n]);
        if dir == Direction::Decrypt {
            self.partial[self.pos..self.pos + n].copy_from_slice(&b[..n]);
        }
        xor_in(&mut b[..n], &self.ks[self.pos..self.pos + n]);
        if dir == Direction::Encrypt {
            self.partial[self.pos..self.pos + n].copy_from_slice(&b[..n]);
        }
        data.store(0, &b[..n]);
        b.zeroize();
        self.pos += n;
    }

    /// E_K(ctr), then `ctr = inc32(ctr)`.
    fn next_keystream(&mut self, gcm: &Gcm) -> Block {
        let mut ks = [0u8; BLOCK];
        ctr32(gcm.pair.aes(), &mut self.ctr, InOut::InPlace(&mut ks));
        ks
    }

    /// Hashes the pending partial block and the length block; the full 16-byte tag.
    pub(super) fn tag(&mut self, gcm: &Gcm) -> [u8; 16] {
        if self.pos > 0 {
            self.partial[self.pos..].fill(0);
            gcm.pair.ghash(&mut self.y, &self.partial);
            self.pos = 0;
        }
        if !self.ek_done {
            gcm.pair.aes().encrypt_block(&mut self.ek_j0);
            self.ek_done = true;
        }
        let lens = ((self.aad_len as u128 * 8) << 64) | (self.len as u128 * 8);
        gcm.pair.ghash(&mut self.y, &lens.to_be_bytes());
        let mut tag = self.y.to_be_bytes();
        xor_in(&mut tag, &self.ek_j0);
        tag
    }
}

/// `inc32`: adds one to the low 32 bits only.
pub(super) fn inc32(c: u128) -> u128 {
    (c & !0xffff_ffff) | ((c as u32).wrapping_add(1) as u128)
}

/// CTR with GCM's `inc32` counter over whole blocks: the 128-bit CTR kernel, split where
/// the low 32 bits wrap. `ctr` ends at the counter of the next block.
fn ctr32(k: &dyn AesKernels, ctr: &mut u128, mut data: InOut<'_>) {
    let mut blocks = (data.len() / BLOCK) as u64;
    let mut off = 0;
    while blocks > 0 {
        let low = *ctr as u32;
        let take = blocks.min((1u64 << 32) - low as u64);
        let bytes = take as usize * BLOCK;
        let mut c = *ctr;
        k.ctr(&mut c, data.slice(off, off + bytes));
        *ctr = (*ctr & !0xffff_ffff) | (low.wrapping_add(take as u32) as u128);
        off += bytes;
        blocks -= take;
    }
}

/// GHASH over `data`, the last partial block padded with zeros.
#[inline]
pub(super) fn hash_padded(gcm: &Gcm, y: &mut u128, data: &[u8]) {
    let whole = data.len() / BLOCK * BLOCK;
    gcm.pair.ghash(y, &data[..whole]);
    if whole < data.len() {
        let mut b = [0u8; BLOCK];
        b[..data.len() - whole].copy_from_slice(&data[whole..]);
        gcm.pair.ghash(y, &b);
        b.zeroize();
    }
}

fn xor_in(a: &mut [u8], b: &[u8]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
}

fn input<'b>(d: &'b InOut<'_>) -> &'b [u8] {
    match d {
        InOut::InPlace(b) => b,
        InOut::Split { src, .. } => src,
    }
}

fn output<'b>(d: &'b InOut<'_>) -> &'b [u8] {
    match d {
        InOut::InPlace(b) => b,
        InOut::Split { dst, .. } => dst,
    }
}
