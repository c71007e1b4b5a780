//! The CBC and CFB chains of both families, written once.
//!
//! GOST 28147-89 and Magma differ here in three ways, all carried by [`Chain`]: the byte
//! order (the key's [`Order`](super::Order)); the feedback register (Magma's CBC and CFB
//! take m = z * 64 bits, z chains interleaved, block `i` chaining to block `i - z`; GOST
//! 28147-89's is one block, z = 1); and CryptoPro key meshing (GOST 28147-89 only: at each
//! 1024-byte boundary the key moves on and the register is re-encrypted under the new key).
//!
//! Encryption is sequential, one block after another on the portable code. Decryption of
//! either mode needs only the ciphertext, so pieces of up to 4 KiB, never crossing a
//! meshing boundary, go to the key's block kernel at once. [`encrypt_sectors`] encrypts
//! many independent messages with their chains interleaved, so that encryption too runs on
//! the block kernel.

use super::keystream::{output, xor_at, CHUNK};
use super::mesh::{MeshChain, MESH_BLOCKS};
use super::{Core, Dir, BLOCK};
use crate::buf::InOut;
use crate::error::InputError;
use crate::Error;
use zeroize::Zeroize;

/// A CBC or CFB message in progress. The caller owns the state, so that a stream can carry
/// it from one call to the next.
pub(crate) struct Chain<'a> {
    /// The key, moved along the meshing chain as the message goes on.
    pub(crate) core: &'a mut Core,
    /// The key's meshing chain, when it meshes.
    pub(crate) mesh: Option<&'a MeshChain>,
    /// The z >= 1 feedback registers; block `i` of the message uses register `i mod z`.
    pub(crate) regs: &'a mut [u64],
    /// Blocks of the message before this call.
    pub(crate) blocks: &'a mut u64,
}

impl Chain<'_> {
    /// Before a block: at a meshing boundary the key moves on and the registers are
    /// re-encrypted under the new key.
    #[inline(always)]
    fn maybe_mesh(&mut self) {
        if let Some(m) = self.mesh {
            if let Some(section) = MeshChain::boundary(*self.blocks) {
                m.apply(section, self.core);
                for r in self.regs.iter_mut() {
                    *r = self.core.enc(*r);
                }
            }
        }
    }

    /// Walks the `len` bytes of this call, meshing at the boundaries: `step(self, off, n,
    /// r)` handles the `n` bytes at `off`, whose first block uses register `r` (block `j`
    /// of the step uses register `(r + j) mod z`). With `pieces`, a step is a piece for the
    /// block kernel (at most [`CHUNK`] bytes, never past a meshing boundary); otherwise it
    /// is one block (the last may be partial).
    #[inline(always)]
    fn walk(
        &mut self,
        len: usize,
        pieces: bool,
        mut step: impl FnMut(&mut Self, usize, usize, usize),
    ) {
        let z = self.regs.len();
        let mut r = (*self.blocks % z as u64) as usize;
        let mut off = 0;
        while off < len {
            self.maybe_mesh();
            let mut n = (len - off).min(if pieces { CHUNK } else { BLOCK });
            if pieces && self.mesh.is_some() {
                n = n.min(MeshChain::to_boundary(*self.blocks));
            }
            step(self, off, n, r);
            let nb = n.div_ceil(BLOCK);
            // No division for a step of one block (the sequential paths).
            r += nb;
            if r >= z {
                r = if r - z < z { r - z } else { r % z };
            }
            *self.blocks += nb as u64;
            off += n;
        }
    }

    /// Encrypts or decrypts the next part of the message with `mode` (whole blocks for
    /// CBC). Encryption is sequential, one block at a time on the portable code;
    /// decryption goes to the block kernel a piece at a time.
    pub(crate) fn run(&mut self, mode: Feedback, dir: Dir, mut io: InOut<'_>) {
        let o = self.core.order;
        let len = io.len();
        match (mode, dir) {
            // C_i = E(P_i ^ R), then R = C_i.
            (Feedback::Cbc, Dir::Encrypt) => self.walk(len, false, |ch, off, _, r| {
                let mut b = [0u8; BLOCK];
                io.load(off, &mut b);
                ch.regs[r] = ch.core.enc(o.load(&b) ^ ch.regs[r]);
                io.store(off, &o.store(ch.regs[r]));
            }),
            // C_i = P_i ^ E(R), then R = C_i (zero-padded when the last block is partial).
            (Feedback::Cfb, Dir::Encrypt) => self.walk(len, false, |ch, off, n, r| {
                let g = ch.core.enc(ch.regs[r]);
                let mut b = [0u8; BLOCK];
                if n == BLOCK {
                    // A whole block as one word: fixed-size copies, no byte loop.
                    io.load(off, &mut b);
                    ch.regs[r] = o.load(&b) ^ g;
                    io.store(off, &o.store(ch.regs[r]));
                    return;
                }
                io.load(off, &mut b[..n]);
                for (x, k) in b[..n].iter_mut().zip(&o.store(g)) {
                    *x ^= k;
                }
                io.store(off, &b[..n]);
                ch.regs[r] = o.load(&b);
            }),
            (Feedback::Cbc, Dir::Decrypt) => self.cbc_decrypt(io),
            (Feedback::Cfb, Dir::Decrypt) => self.cfb_decrypt(io),
        }
    }

    /// CBC decryption of whole blocks, a piece at a time: the piece is copied aside (it
    /// may be decrypted in place), decrypted into the output by the block kernel and
    /// XORed with the ciphertext `z` blocks back (the registers for the first `z`).
    fn cbc_decrypt(&mut self, mut io: InOut<'_>) {
        let o = self.core.order;
        let z = self.regs.len();
        let mut saved = [0u8; CHUNK];
        self.walk(io.len(), true, |ch, off, n, r| {
            let (nb, head) = (n / BLOCK, z.min(n / BLOCK));
            let saved = &mut saved[..n];
            io.load(off, saved);
            let out = &mut output(&mut io)[off..off + n];
            ch.core.ecb(Dir::Decrypt, InOut::split(saved, out));
            for (j, p) in out.chunks_exact_mut(BLOCK).take(head).enumerate() {
                let v = o.load(p) ^ ch.regs[(r + j) % z];
                p.copy_from_slice(&o.store(v));
            }
            for (d, c) in out[BLOCK * head..]
                .iter_mut()
                .zip(&saved[..n - BLOCK * head])
            {
                *d ^= c;
            }
            for j in nb - head..nb {
                ch.regs[(r + j) % z] = o.load(&saved[BLOCK * j..]);
            }
        });
        saved.zeroize();
    }

    /// CFB decryption, any length, a piece at a time: the gamma of block `i` is the
    /// encryption of the ciphertext `z` blocks back (the registers for the first `z`), all
    /// known before the piece is decrypted, so the block kernel makes the piece's gamma.
    fn cfb_decrypt(&mut self, mut io: InOut<'_>) {
        let o = self.core.order;
        let z = self.regs.len();
        let mut ks = [0u8; CHUNK];
        self.walk(io.len(), true, |ch, off, n, r| {
            let nb = n.div_ceil(BLOCK);
            let head = z.min(nb);
            for (j, k) in ks.chunks_exact_mut(BLOCK).take(head).enumerate() {
                k.copy_from_slice(&o.store(ch.regs[(r + j) % z]));
            }
            io.load(off, &mut ks[BLOCK * head..BLOCK * nb]);
            // Each whole block of the last z feeds its chain; a partial one ends the message.
            let mut c = [0u8; BLOCK];
            for j in nb - head..n / BLOCK {
                io.load(off + BLOCK * j, &mut c);
                ch.regs[(r + j) % z] = o.load(&c);
            }
            ch.core
                .ecb(Dir::Encrypt, InOut::InPlace(&mut ks[..BLOCK * nb]));
            xor_at(&mut io, off, &ks[..n]);
        });
        ks.zeroize();
    }
}

/// Which chain: how one step combines data and register.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feedback {
    /// CBC encryption: `C = E(P ^ R)`, `R = C`.
    Cbc,
    /// CFB encryption: `C = P ^ E(R)`, `R = C`.
    Cfb,
}

/// Sectors per interleaved batch: 128 chains = one 1 KiB call of the block kernel.
const SECTOR_BATCH: usize = 128;

/// Encrypts independent equal-size sectors (one message each, `ivs[i]` for sector `i`,
/// z = 1) with a sequential chain mode, block `j` of every sector of a batch in one call of
/// the block kernel: the chains are serial, the sectors are not. With `mesh`, key meshing
/// applies per sector at its 1024-byte boundaries, where every register of the batch is
/// re-encrypted in one call. Blocks use `core`'s byte convention.
pub(crate) fn encrypt_sectors(
    core: &Core,
    mesh: Option<&MeshChain>,
    mode: Feedback,
    ivs: &[[u8; 8]],
    data: &mut [u8],
) -> Result<(), Error> {
    if ivs.is_empty() {
        return if data.is_empty() {
            Ok(())
        } else {
            Err(Error::Input(InputError::Length {
                got: data.len(),
                why: "no ivs given for a non-empty buffer",
            }))
        };
    }
    let sector = data.len() / ivs.len();
    if sector * ivs.len() != data.len() || sector == 0 || !sector.is_multiple_of(BLOCK) {
        return Err(Error::Input(InputError::Length {
            got: data.len(),
            why: "must be one non-empty whole number of 8-byte blocks per iv",
        }));
    }
    let o = core.order;
    let mut buf = [0u8; BLOCK * SECTOR_BATCH];
    for (batch, ivs) in data
        .chunks_mut(sector * SECTOR_BATCH)
        .zip(ivs.chunks(SECTOR_BATCH))
    {
        let mut c = core.clone();
        let regs = &mut buf[..BLOCK * ivs.len()];
        for (r, iv) in regs.chunks_exact_mut(BLOCK).zip(ivs) {
            r.copy_from_slice(iv);
        }
        for j in 0..sector / BLOCK {
            if let Some(m) = mesh.filter(|_| j > 0 && (j as u64).is_multiple_of(MESH_BLOCKS)) {
                m.apply(j as u64 / MESH_BLOCKS, &mut c);
                c.ecb(Dir::Encrypt, InOut::InPlace(regs));
            }
            let at = |i: usize| i * sector + BLOCK * j..i * sector + BLOCK * (j + 1);
            if mode == Feedback::Cbc {
                for (i, r) in regs.chunks_exact_mut(BLOCK).enumerate() {
                    let v = o.load(&batch[at(i)]) ^ o.load(r);
                    r.copy_from_slice(&o.store(v));
                }
            }
            c.ecb(Dir::Encrypt, InOut::InPlace(regs));
            for (i, r) in regs.chunks_exact_mut(BLOCK).enumerate() {
                let p = &mut batch[at(i)];
                if mode == Feedback::Cfb {
                    let v = o.load(p) ^ o.load(r);
                    r.copy_from_slice(&o.store(v));
                }
                p.copy_from_slice(r);
            }
        }
    }
    buf.zeroize();
    Ok(())
}
