//! GOST 28147-89 with the little-endian conventions of its libraries (CryptoPro,
//! gost-engine, libgcrypt): ECB, CNT (gamming), CFB (gamming with feedback), CBC and the
//! MAC (imitovstavka), each with optional CryptoPro key meshing (RFC 4357 section 2.3:
//! every 1024 bytes the key becomes `D_K(C)`, and a feedback or counter register is
//! re-encrypted under the new key; the MAC changes only its key).
//!
//! The streaming types ([`CntStream`], [`CfbStream`], [`MacState`]) carry the state across
//! calls, for inputs that do not fit in memory; the one-shot methods use them. CBC and CFB
//! are the chains shared with Magma (one register). Work on independent blocks (ECB, the
//! CNT keystream, CBC and CFB decryption, the sector-interleaved encryption) goes to the
//! key's block kernel in pieces of up to 4 KiB; with key meshing a piece never crosses a
//! 1024-byte boundary, so one piece has one key.

use super::chain::{encrypt_sectors, Chain, Feedback};
use super::keystream::{xor_at, Counter, CHUNK};
use super::mesh::{MeshChain, MESH_BLOCKS, MESH_BYTES};
use super::soft::SideJob;
use super::{mac_len, same_len, whole_blocks, Core, Dir, GostBackend, Order};
use crate::buf::InOut;
use crate::Error;
use std::sync::Arc;
use zeroize::{Zeroize, ZeroizeOnDrop};

pub use super::Sbox;

/// The block size in bytes.
pub const BLOCK: usize = super::BLOCK;

/// A GOST 28147-89 key with its key-meshing chain (`None` without key meshing).
#[derive(Debug, Clone)]
struct Key {
    core: Core,
    mesh: Option<Arc<MeshChain>>,
}

impl Key {
    fn new(
        key: &[u8],
        sbox: Sbox,
        key_meshing: bool,
        backend: Option<GostBackend>,
    ) -> Result<Key, Error> {
        let core = Core::new(key, sbox, Order::Gost89, backend, "gost28147-89")?;
        let mesh = key_meshing.then(|| Arc::new(MeshChain::new(&core)));
        Ok(Key { core, mesh })
    }

    fn backend(&self) -> GostBackend {
        self.core.backend
    }
}

mode_types! {
    Key = Key::new,
    (sbox: Sbox, key_meshing: bool),
    "A 32-byte key with the S-box set `sbox` on the selected backend; `key_meshing` turns \
     on CryptoPro key meshing (RFC 4357) every 1024 bytes.";
    /// GOST 28147-89 ECB (simple replacement) over whole 8-byte blocks. With key meshing
    /// the key changes every 1024 bytes.
    Ecb;
    /// GOST 28147-89 CNT (gamming): `S = E(IV)`; per block `N3 += C2 mod 2^32`,
    /// `N4 += C1 mod 2^32 - 1`, gamma `= E(N3 || N4)`. Any length; encryption and
    /// decryption are the same operation.
    Cnt;
    /// GOST 28147-89 CFB (gamming with feedback), 64-bit feedback, any length.
    Cfb;
    /// GOST 28147-89 CBC over whole blocks (no padding). With key meshing the chaining
    /// value is re-encrypted under the new key at each 1024-byte boundary, as for CFB.
    Cbc;
    /// The GOST 28147-89 MAC (imitovstavka): `S = E16(S xor P_i)` over zero-padded blocks;
    /// a message of at most 8 bytes gets one extra all-zero block (CryptoPro, gost-engine,
    /// libgcrypt); the empty message gives all zeros. The MAC is the first bytes of `S` (4
    /// by default). With key meshing the key changes every 1024 bytes (the state does not).
    Mac;
}

impl Ecb {
    in_out_methods!();

    fn run(&self, dir: Dir, mut io: InOut<'_>) -> Result<(), Error> {
        whole_blocks(io.len())?;
        let mut c = self.key.core.clone();
        // With meshing one piece is one meshing period (piece i uses key i).
        let len = io.len();
        let step = if self.key.mesh.is_some() {
            MESH_BYTES
        } else {
            CHUNK
        };
        for (i, off) in (0..len).step_by(step).enumerate() {
            if let Some(m) = self.key.mesh.as_deref().filter(|_| i > 0) {
                m.apply(i as u64, &mut c);
            }
            c.ecb(dir, io.slice(off, len.min(off + step)));
        }
        Ok(())
    }
}

impl Cnt {
    in_out_methods!(iv: &[u8; 8]);

    /// Encryption and decryption: the same keystream XOR.
    fn run(&self, _: Dir, iv: &[u8; 8], io: InOut<'_>) -> Result<(), Error> {
        self.stream(iv).apply_io(io);
        Ok(())
    }

    /// A keystream that continues across calls (for inputs that do not fit in memory).
    pub fn stream(&self, iv: &[u8; 8]) -> CntStream {
        let s = self.key.core.enc(Order::Gost89.load(iv));
        CntStream {
            key: self.key.clone(),
            n3: s as u32,
            n4: (s >> 32) as u32,
            blocks: 0,
            left: [0; 8],
            left_len: 0,
            premeshed: None,
        }
    }
}

/// The running state of a [`Cnt`] keystream. Zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct CntStream {
    #[zeroize(skip)]
    key: Key,
    n3: u32,
    n4: u32,
    /// Gamma blocks produced so far.
    blocks: u64,
    /// Unused keystream of the last partial block.
    left: [u8; 8],
    left_len: usize,
    /// The counter register re-encrypted for the next meshing boundary, with that
    /// boundary's key (computed alongside the previous piece).
    premeshed: Option<Premeshed>,
}

/// The counter register and key of the next meshing boundary.
#[derive(Zeroize)]
struct Premeshed {
    reg: u64,
    key: [u32; 8],
}

impl CntStream {
    /// The counter register `N4 || N3`.
    fn reg(&self) -> u64 {
        ((self.n4 as u64) << 32) | self.n3 as u64
    }

    fn set_reg(&mut self, s: u64) {
        self.n3 = s as u32;
        self.n4 = (s >> 32) as u32;
    }

    /// XORs the next gamma blocks into `io` (whole blocks, not crossing a meshing
    /// boundary): on the backend's counter kernel where it has one, otherwise the counter
    /// blocks are written to `ks` (scratch of at least `io.len()` bytes), encrypted there
    /// and XORed in.
    ///
    /// When `io` ends exactly at a meshing boundary, the counter register there is known
    /// before the gamma is made, and so is the next key: its re-encryption under that key
    /// runs as a side job among the block kernel's rounds (on the scalar units, while the
    /// vector units encrypt the gamma) and is kept for [`Self::maybe_mesh`].
    fn gamma(&mut self, mut io: InOut<'_>, ks: &mut [u8]) {
        let nb = io.len() / BLOCK;
        let start = Counter::Cnt(self.n3, self.n4);
        let Counter::Cnt(n3, n4) = start.advance(nb as u64) else {
            unreachable!("a cnt counter stays one")
        };
        let end = self.blocks + nb as u64;
        let core = &self.key.core;
        let mut side = match &self.key.mesh {
            Some(m) if end.is_multiple_of(MESH_BLOCKS) && nb >= 2 => {
                let mut next = core.clone();
                m.apply(end / MESH_BLOCKS, &mut next);
                let reg = ((n4 as u64) << 32) | n3 as u64;
                Some((SideJob::new(next.s.clone(), reg), next.s.k))
            }
            _ => None,
        };
        if core.ctr_kernel(start, io.reborrow(), side.as_mut().map(|(j, _)| j)) == 0 {
            let ks = &mut ks[..nb * BLOCK];
            let mut c = start;
            for b in ks.chunks_exact_mut(BLOCK) {
                b.copy_from_slice(&Order::Gost89.store(c.next_block()));
            }
            let job = side.as_mut().map(|(j, _)| j);
            core.ecb_with_side(Dir::Encrypt, InOut::InPlace(ks), job);
            xor_at(&mut io, 0, ks);
        }
        if let Some((mut job, key)) = side {
            self.premeshed = Some(Premeshed {
                reg: job.finish(),
                key,
            });
        }
        (self.n3, self.n4) = (n3, n4);
        self.blocks = end;
    }

    /// Before the gamma block `self.blocks`: mesh when a 1024-byte boundary is reached.
    fn maybe_mesh(&mut self) {
        let Some(m) = &self.key.mesh else { return };
        let Some(section) = MeshChain::boundary(self.blocks) else {
            return;
        };
        if let Some(mut p) = self.premeshed.take() {
            self.key.core.s.k = p.key;
            self.set_reg(p.reg);
            p.zeroize();
            return;
        }
        m.apply(section, &mut self.key.core);
        let s = self.key.core.enc(self.reg());
        self.set_reg(s);
    }

    /// XORs the next `buf.len()` keystream bytes into `buf`.
    pub fn apply(&mut self, buf: &mut [u8]) {
        self.apply_io(InOut::InPlace(buf));
    }

    fn apply_io(&mut self, mut io: InOut<'_>) {
        let len = io.len();
        let mut off = 0;
        // Leftover keystream of a partial block.
        if self.left_len > 0 {
            let n = self.left_len.min(len);
            let from = BLOCK - self.left_len;
            xor_at(&mut io, 0, &self.left[from..from + n]);
            self.left_len -= n;
            off = n;
        }
        let mut ks = [0u8; CHUNK];
        while len - off >= BLOCK {
            self.maybe_mesh();
            let to_boundary = match self.key.mesh {
                Some(_) => MeshChain::to_boundary(self.blocks),
                None => CHUNK,
            };
            let n = ((len - off) / BLOCK * BLOCK).min(to_boundary).min(CHUNK);
            self.gamma(io.slice(off, off + n), &mut ks);
            off += n;
        }
        if off < len {
            self.maybe_mesh();
            let mut g = [0u8; BLOCK];
            self.gamma(InOut::InPlace(&mut g), &mut ks);
            xor_at(&mut io, off, &g[..len - off]);
            self.left = g;
            self.left_len = BLOCK - (len - off);
            g.zeroize();
        }
        ks.zeroize();
    }
}

impl Cfb {
    in_out_methods!(iv: &[u8; 8]);

    fn run(&self, dir: Dir, iv: &[u8; 8], io: InOut<'_>) -> Result<(), Error> {
        self.stream(iv).run(dir, io)
    }

    /// A CFB state that continues across calls; every call but the last must be a whole
    /// number of blocks.
    pub fn stream(&self, iv: &[u8; 8]) -> CfbStream {
        CfbStream {
            key: self.key.clone(),
            reg: Order::Gost89.load(iv),
            blocks: 0,
            done: false,
        }
    }

    /// Encrypts many independent sectors in place, `ivs[i]` for sector `i` (all sectors
    /// the same size, a multiple of 8 bytes): the same as one [`Cfb::encrypt`] per sector,
    /// with up to 128 sectors interleaved so the parallel backend runs them together.
    pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
        let mesh = self.key.mesh.as_deref();
        encrypt_sectors(&self.key.core, mesh, Feedback::Cfb, ivs, data)
    }
}

/// The running state of [`Cfb`]. Zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct CfbStream {
    #[zeroize(skip)]
    key: Key,
    reg: u64,
    blocks: u64,
    done: bool,
}

impl CfbStream {
    fn run(&mut self, dir: Dir, io: InOut<'_>) -> Result<(), Error> {
        if self.done {
            return Err(crate::error::InputError::Length {
                got: io.len(),
                why: "cfb stream already ended with a partial block",
            }
            .into());
        }
        self.done = !io.len().is_multiple_of(BLOCK);
        Chain {
            core: &mut self.key.core,
            mesh: self.key.mesh.as_deref(),
            regs: core::slice::from_mut(&mut self.reg),
            blocks: &mut self.blocks,
        }
        .run(Feedback::Cfb, dir, io);
        Ok(())
    }

    /// Encrypts the next part of the message in place (sequential: one block at a time).
    pub fn encrypt(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.run(Dir::Encrypt, InOut::InPlace(buf))
    }

    /// Decrypts the next part of the message in place: the gamma of a piece is the
    /// encryption of its ciphertext shifted by one block, so whole pieces go to the
    /// parallel kernel.
    pub fn decrypt(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.run(Dir::Decrypt, InOut::InPlace(buf))
    }
}

impl Cbc {
    in_out_methods!(iv: &[u8; 8]);

    /// Encryption is sequential; decryption goes through the block kernel a piece at a
    /// time.
    fn run(&self, dir: Dir, iv: &[u8; 8], io: InOut<'_>) -> Result<(), Error> {
        whole_blocks(io.len())?;
        let mut core = self.key.core.clone();
        let mut reg = Order::Gost89.load(iv);
        Chain {
            core: &mut core,
            mesh: self.key.mesh.as_deref(),
            regs: core::slice::from_mut(&mut reg),
            blocks: &mut 0,
        }
        .run(Feedback::Cbc, dir, io);
        reg.zeroize();
        Ok(())
    }

    /// Encrypts many independent sectors in place, `ivs[i]` for sector `i` (all sectors
    /// the same size, a multiple of 8 bytes): the same as one [`Cbc::encrypt`] per sector,
    /// with up to 128 sectors interleaved so the parallel backend runs them together.
    pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
        let mesh = self.key.mesh.as_deref();
        encrypt_sectors(&self.key.core, mesh, Feedback::Cbc, ivs, data)
    }
}

impl Mac {
    /// The standard 32-bit MAC of `data`.
    pub fn mac(&self, data: &[u8]) -> [u8; 4] {
        let mut out = [0u8; 4];
        self.mac_to(data, &mut out)
            .expect("a 4-byte mac is always allowed");
        out
    }

    /// The first `out.len()` (1 to 8) bytes of the final state.
    pub fn mac_to(&self, data: &[u8], out: &mut [u8]) -> Result<(), Error> {
        let mut st = self.start();
        st.update(data);
        st.finish_to(out)
    }

    /// A MAC computation that continues across calls.
    pub fn start(&self) -> MacState {
        MacState {
            key: self.key.clone(),
            s: 0,
            buf: [0; 8],
            buf_len: 0,
            total: 0,
            blocks: 0,
        }
    }
}

/// The running state of [`Mac`]. Zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct MacState {
    #[zeroize(skip)]
    key: Key,
    s: u64,
    buf: [u8; 8],
    buf_len: usize,
    total: u64,
    blocks: u64,
}

impl MacState {
    fn block(&mut self, b: &[u8]) {
        if let Some(m) = &self.key.mesh {
            if let Some(section) = MeshChain::boundary(self.blocks) {
                m.apply(section, &mut self.key.core);
            }
        }
        self.s = self.key.core.s.mac16(self.s ^ Order::Gost89.load(b));
        self.blocks += 1;
    }

    /// Adds `data` to the message.
    pub fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.buf_len > 0 {
            let n = (BLOCK - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + n].copy_from_slice(&data[..n]);
            self.buf_len += n;
            data = &data[n..];
            // Keep a full block buffered until more data arrives (it may be the last).
            if self.buf_len < BLOCK || data.is_empty() {
                return;
            }
            let b = self.buf;
            self.block(&b);
            self.buf_len = 0;
        }
        // Process all but the last (possibly full) block.
        while data.len() > BLOCK {
            self.block(&data[..BLOCK]);
            data = &data[BLOCK..];
        }
        self.buf[..data.len()].copy_from_slice(data);
        self.buf_len = data.len();
    }

    /// The first `out.len()` (1 to 8) bytes of the final state.
    pub fn finish_to(mut self, out: &mut [u8]) -> Result<(), Error> {
        mac_len(out.len())?;
        if self.total > 0 {
            let mut last = [0u8; BLOCK];
            last[..self.buf_len].copy_from_slice(&self.buf[..self.buf_len]);
            self.block(&last);
            if self.total <= BLOCK as u64 {
                self.block(&[0u8; BLOCK]);
            }
        }
        out.copy_from_slice(&Order::Gost89.store(self.s)[..out.len()]);
        Ok(())
    }
}

debug_state!(CntStream, CfbStream, MacState);
