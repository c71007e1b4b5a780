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

    /// How many of the `left` bytes go to the block kernel in one piece: at most
    /// [`CHUNK`], and not past a meshing boundary.
    fn span(&self, left: usize) -> usize {
        let n = left.min(CHUNK);
        match self.mesh {
            Some(_) => n.min(MeshChain::to_boundary(*self.blocks)),
            None => n,
        }
    }

    /// The register of the next block.
    fn first_reg(&self) -> usize {
        (*self.blocks % self.regs.len() as u64) as usize
    }

    /// The register after `r`.
    #[inline(always)]
    fn next_reg(&self, r: usize) -> usize {
        if r + 1 == self.regs.len() {
            0
        } else {
            r + 1
        }
    }

    /// Encrypts or decrypts the next part of the message with `mode` (whole blocks for
    /// CBC).
    pub(crate) fn run(&mut self, mode: Feedback, dir: Dir, io: InOut<'_>) {
        match (mode, dir) {
            (Feedback::Cbc, Dir::Encrypt) => self.cbc_encrypt(io),
            (Feedback::Cbc, Dir::Decrypt) => self.cbc_decrypt(io),
            (Feedback::Cfb, Dir::Encrypt) => self.cfb_encrypt(io),
            (Feedback::Cfb, Dir::Decrypt) => self.cfb_decrypt(io),
        }
    }

    /// CBC encryption of whole blocks: `C_i = E(P_i ^ R)`, then `R = C_i`.
    fn cbc_encrypt(&mut self, mut io: InOut<'_>) {
        let o = self.core.order;
        let mut r = self.first_reg();
        let mut b = [0u8; BLOCK];
        for off in (0..io.len()).step_by(BLOCK) {
            self.maybe_mesh();
            io.load(off, &mut b);
            let c = self.core.enc(o.load(&b) ^ self.regs[r]);
            self.regs[r] = c;
            io.store(off, &o.store(c));
            *self.blocks += 1;
            r = self.next_reg(r);
        }
        b.zeroize();
    }

    /// CBC decryption of whole blocks, a piece at a time through the block kernel: each
    /// piece is copied aside (it may be decrypted in place), decrypted into the output and
    /// XORed with the ciphertext `z` blocks back (the registers for the first `z`).
    fn cbc_decrypt(&mut self, mut io: InOut<'_>) {
        let o = self.core.order;
        let z = self.regs.len();
        let mut r = self.first_reg();
        let mut saved = [0u8; CHUNK];
        let (len, mut off) = (io.len(), 0);
        while off < len {
            self.maybe_mesh();
            let n = self.span(len - off);
            let nb = n / BLOCK;
            let saved = &mut saved[..n];
            io.load(off, saved);
            let out = &mut output(&mut io)[off..off + n];
            self.core.ecb(Dir::Decrypt, InOut::split(saved, out));
            let head = z.min(nb);
            for j in 0..head {
                let p = &mut out[BLOCK * j..BLOCK * (j + 1)];
                let v = o.load(p) ^ self.regs[(r + j) % z];
                p.copy_from_slice(&o.store(v));
            }
            for (d, c) in out[BLOCK * head..]
                .iter_mut()
                .zip(&saved[..n - BLOCK * head])
            {
                *d ^= c;
            }
            for j in nb - head..nb {
                self.regs[(r + j) % z] = o.load(&saved[BLOCK * j..]);
            }
            r = (r + nb) % z;
            *self.blocks += nb as u64;
            off += n;
        }
        saved.zeroize();
    }

    /// CFB encryption, any length: `C_i = P_i ^ E(R)`, then `R = C_i` (zero-padded when
    /// the last block is partial).
    fn cfb_encrypt(&mut self, mut io: InOut<'_>) {
        let o = self.core.order;
        let mut r = self.first_reg();
        let len = io.len();
        let mut b = [0u8; BLOCK];
        for off in (0..len).step_by(BLOCK) {
            self.maybe_mesh();
            let n = BLOCK.min(len - off);
            b = [0; BLOCK];
            io.load(off, &mut b[..n]);
            let g = o.store(self.core.enc(self.regs[r]));
            for (x, k) in b[..n].iter_mut().zip(&g) {
                *x ^= k;
            }
            io.store(off, &b[..n]);
            self.regs[r] = o.load(&b);
            *self.blocks += 1;
            r = self.next_reg(r);
        }
        b.zeroize();
    }

    /// CFB decryption, any length, a piece at a time through the block kernel: the gamma
    /// of block `i` is the encryption of the ciphertext `z` blocks back (the registers for
    /// the first `z`), all known before the piece is decrypted.
    fn cfb_decrypt(&mut self, mut io: InOut<'_>) {
        let o = self.core.order;
        let z = self.regs.len();
        let mut r = self.first_reg();
        let mut ks = [0u8; CHUNK];
        let (len, mut off) = (io.len(), 0);
        while off < len {
            self.maybe_mesh();
            let n = self.span(len - off);
            let nb = n.div_ceil(BLOCK);
            let head = z.min(nb);
            for j in 0..head {
                ks[BLOCK * j..BLOCK * (j + 1)].copy_from_slice(&o.store(self.regs[(r + j) % z]));
            }
            io.load(off, &mut ks[BLOCK * head..BLOCK * nb]);
            // Every whole block of the piece feeds its chain; a partial one ends the message.
            let mut c = [0u8; BLOCK];
            for j in nb - head..n / BLOCK {
                io.load(off + BLOCK * j, &mut c);
                self.regs[(r + j) % z] = o.load(&c);
            }
            self.core
                .ecb(Dir::Encrypt, InOut::InPlace(&mut ks[..BLOCK * nb]));
            xor_at(&mut io, off, &ks[..n]);
            r = (r + nb) % z;
            *self.blocks += nb as u64;
            off += n;
        }
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
