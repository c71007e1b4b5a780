//! The GOST 28147-89 modes (little-endian convention): ECB, CNT (gamming), CFB (gamming with
//! feedback), CBC and the MAC (imitovstavka), each with optional CryptoPro key meshing
//! (RFC 4357 section 2.3: every 1024 bytes the key becomes `D_K(C)`, and a feedback or
//! counter register is re-encrypted under the new key; the MAC changes only its key).
//!
//! The streaming types ([`Gost89CntStream`], [`Gost89CfbStream`], [`Gost89MacState`]) carry
//! the state across calls, for inputs that do not fit in memory; the one-shot methods use
//! them. Work on independent blocks (the CNT keystream, CFB and CBC decryption, ECB) goes
//! through [`Core::ecb`] in chunks of up to 1024 bytes, i.e. to the `avx2` kernel when the
//! key is on that backend.

use super::soft::SideJob;
use super::{same_len, whole_blocks, Core, Dir, GostBackend, Order, Sbox, MESH_BYTES};
use crate::error::InputError;
use crate::Error;
use std::sync::{Arc, Mutex};
use zeroize::Zeroize;

/// Blocks between two key meshings.
const MESH_BLOCKS: u64 = (MESH_BYTES / 8) as u64;
/// Meshed keys cached per key (256 KiB of data, 8 KiB of keys).
const MESH_CACHE: u64 = 256;
/// Bytes of keystream (or blocks) produced per call into the block kernel (whole meshing
/// periods, so a meshed key applies to whole calls).
const CHUNK: usize = 4 * MESH_BYTES;

/// CNT's C2, added to N3 modulo 2^32 (GOST 28147-89 section 3.1).
const C2: u32 = 0x0101_0101;
/// CNT's C1, added to N4 modulo 2^32 - 1.
const C1: u32 = 0x0101_0104;

/// The CryptoPro key meshing chain of one key: `keys[i]` is the key of bytes
/// `1024 i .. 1024 (i + 1)`. The chain depends on the key only (not on the IV or the data),
/// so it is computed once, on demand, and shared by every message and stream of the key:
/// a meshing step then costs a lookup instead of four block decryptions. Zeroized on drop.
pub(crate) struct MeshChain {
    keys: Mutex<Vec<[u32; 8]>>,
}

impl std::fmt::Debug for MeshChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MeshChain { .. }")
    }
}

impl Drop for MeshChain {
    fn drop(&mut self) {
        if let Ok(v) = self.keys.get_mut() {
            v.zeroize();
        }
    }
}

impl MeshChain {
    fn new(core: &Core) -> Arc<MeshChain> {
        Arc::new(MeshChain {
            keys: Mutex::new(vec![core.s.k]),
        })
    }

    /// Sets `core`'s key to the key of section `i`; callers visit sections in order, so
    /// `core` holds the key of section `i - 1`. Past `MESH_CACHE` sections (a stream of
    /// gigabytes) the key is meshed in place instead of cached, to bound the memory.
    fn apply(&self, i: u64, core: &mut Core) {
        if i >= MESH_CACHE {
            core.mesh();
            return;
        }
        let i = i as usize;
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        while keys.len() <= i {
            let mut c = core.clone();
            c.s.k = *keys.last().expect("the chain starts with the key");
            c.mesh();
            keys.push(c.s.k);
        }
        core.s.k = keys[i];
    }
}

fn core(key: &[u8], sbox: Sbox, backend: Option<GostBackend>) -> Result<Core, Error> {
    Core::new(key, sbox, Order::Gost89, backend, "gost28147-89")
}

/// `a + b mod 2^32 - 1` the way every GOST 28147-89 implementation does it: a carry out
/// of bit 31 is added back in (end-around carry). Branch-free.
#[inline(always)]
pub(crate) fn add_mod_2_32_minus_1(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s.wrapping_add(carry as u32)
}

macro_rules! constructors {
    ($t:ident) => {
        impl $t {
            /// A 32-byte key with the S-box set `sbox` on the selected backend;
            /// `key_meshing` turns on CryptoPro key meshing (RFC 4357) every 1024 bytes.
            pub fn new(key: &[u8], sbox: Sbox, key_meshing: bool) -> Result<$t, Error> {
                let core = core(key, sbox, None)?;
                Ok($t {
                    chain: MeshChain::new(&core),
                    core,
                    meshing: key_meshing,
                })
            }

            /// The same on a named backend (tests and benchmarks).
            pub fn with_backend(
                key: &[u8],
                sbox: Sbox,
                key_meshing: bool,
                backend: GostBackend,
            ) -> Result<$t, Error> {
                let core = core(key, sbox, Some(backend))?;
                Ok($t {
                    chain: MeshChain::new(&core),
                    core,
                    meshing: key_meshing,
                })
            }

            /// The backend this key runs on.
            pub fn backend(&self) -> GostBackend {
                self.core.backend
            }
        }
    };
}

/// GOST 28147-89 ECB (simple replacement) over whole 8-byte blocks. With key meshing the
/// key changes every 1024 bytes.
#[derive(Debug)]
pub struct Gost89Ecb {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
}
constructors!(Gost89Ecb);

impl Gost89Ecb {
    fn run(&self, buf: &mut [u8], dir: Dir) -> Result<(), Error> {
        whole_blocks(buf.len())?;
        let mut c = self.core.clone();
        // With meshing one chunk is one meshing period (chunk i uses key i).
        let step = if self.meshing { MESH_BYTES } else { CHUNK };
        for (i, chunk) in buf.chunks_mut(step).enumerate() {
            if self.meshing && i > 0 {
                self.chain.apply(i as u64, &mut c);
            }
            c.ecb(dir, chunk);
        }
        Ok(())
    }

    /// Encrypts `buf` in place.
    pub fn encrypt(&self, buf: &mut [u8]) -> Result<(), Error> {
        self.run(buf, Dir::Encrypt)
    }
    /// Decrypts `buf` in place.
    pub fn decrypt(&self, buf: &mut [u8]) -> Result<(), Error> {
        self.run(buf, Dir::Decrypt)
    }
    /// Encrypts `src` into `dst` (same length).
    pub fn encrypt_to(&self, src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        whole_blocks(src.len())?;
        dst.copy_from_slice(src);
        self.run(dst, Dir::Encrypt)
    }
    /// Decrypts `src` into `dst` (same length).
    pub fn decrypt_to(&self, src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        whole_blocks(src.len())?;
        dst.copy_from_slice(src);
        self.run(dst, Dir::Decrypt)
    }
}

/// GOST 28147-89 CNT (gamming): `S = E(IV)`; per block `N3 += C2 mod 2^32`,
/// `N4 += C1 mod 2^32 - 1`, gamma `= E(N3 || N4)`. Any length; encryption and decryption
/// are the same operation.
#[derive(Debug)]
pub struct Gost89Cnt {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
}
constructors!(Gost89Cnt);

impl Gost89Cnt {
    /// Encrypts (or decrypts) `buf` in place with the 8-byte IV.
    pub fn encrypt(&self, iv: &[u8; 8], buf: &mut [u8]) -> Result<(), Error> {
        self.stream(iv).apply(buf);
        Ok(())
    }
    /// Decrypts `buf` in place (the same as [`Gost89Cnt::encrypt`]).
    pub fn decrypt(&self, iv: &[u8; 8], buf: &mut [u8]) -> Result<(), Error> {
        self.encrypt(iv, buf)
    }
    /// Encrypts `src` into `dst` (same length).
    pub fn encrypt_to(&self, iv: &[u8; 8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        dst.copy_from_slice(src);
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst` (same length).
    pub fn decrypt_to(&self, iv: &[u8; 8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        self.encrypt_to(iv, src, dst)
    }
    /// A keystream that continues across calls (for inputs that do not fit in memory).
    pub fn stream(&self, iv: &[u8; 8]) -> Gost89CntStream {
        let s = self.core.enc(Order::Gost89.load(iv));
        Gost89CntStream {
            core: self.core.clone(),
            chain: self.chain.clone(),
            meshing: self.meshing,
            n3: s as u32,
            n4: (s >> 32) as u32,
            blocks: 0,
            left: [0; 8],
            left_len: 0,
            premeshed: None,
        }
    }
}

/// The running state of a [`Gost89Cnt`] keystream. Zeroized on drop.
pub struct Gost89CntStream {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
    n3: u32,
    n4: u32,
    /// Gamma blocks produced so far.
    blocks: u64,
    /// Unused keystream of the last partial block.
    left: [u8; 8],
    left_len: usize,
    /// The counter register re-encrypted for the next meshing boundary, with that
    /// boundary's key (computed alongside the previous chunk).
    premeshed: Option<(u64, [u32; 8])>,
}

impl Drop for Gost89CntStream {
    fn drop(&mut self) {
        if let Some((mut s, mut k)) = self.premeshed.take() {
            s.zeroize();
            k.zeroize();
        }
        self.n3.zeroize();
        self.n4.zeroize();
        self.left.zeroize();
    }
}

impl Gost89CntStream {
    /// Fills `out` (whole blocks, not crossing a meshing boundary) with gamma blocks.
    ///
    /// When `out` ends exactly at a meshing boundary, the counter register there is known
    /// once the counters are written, and so is the next key: its re-encryption under
    /// that key runs as a side job among the block kernel's rounds (on the scalar units,
    /// while the vector units encrypt the gamma) and is kept for [`Self::maybe_mesh`].
    fn gamma(&mut self, out: &mut [u8]) {
        for b in out.chunks_exact_mut(8) {
            self.n3 = self.n3.wrapping_add(C2);
            self.n4 = add_mod_2_32_minus_1(self.n4, C1);
            b.copy_from_slice(&(((self.n4 as u64) << 32) | self.n3 as u64).to_le_bytes());
        }
        let end = self.blocks + (out.len() / 8) as u64;
        if self.meshing && end.is_multiple_of(MESH_BLOCKS) && out.len() >= 16 {
            let mut next = self.core.clone();
            self.chain.apply(end / MESH_BLOCKS, &mut next);
            let reg = ((self.n4 as u64) << 32) | self.n3 as u64;
            let mut job = SideJob::new(next.s.clone(), reg);
            self.core.ecb_with_side(Dir::Encrypt, out, Some(&mut job));
            self.premeshed = Some((job.finish(), next.s.k));
        } else {
            self.core.ecb(Dir::Encrypt, out);
        }
        self.blocks = end;
    }

    /// Before the gamma block `self.blocks`: mesh when a 1024-byte boundary is reached.
    fn maybe_mesh(&mut self) {
        if self.meshing && self.blocks > 0 && self.blocks.is_multiple_of(MESH_BLOCKS) {
            if let Some((s, k)) = self.premeshed.take() {
                self.core.s.k = k;
                self.n3 = s as u32;
                self.n4 = (s >> 32) as u32;
                return;
            }
            self.chain.apply(self.blocks / MESH_BLOCKS, &mut self.core);
            let s = self.core.enc(((self.n4 as u64) << 32) | self.n3 as u64);
            self.n3 = s as u32;
            self.n4 = (s >> 32) as u32;
        }
    }

    /// XORs the next `buf.len()` keystream bytes into `buf`.
    pub fn apply(&mut self, buf: &mut [u8]) {
        let mut rest = buf;
        // Leftover keystream of a partial block.
        if self.left_len > 0 {
            let n = self.left_len.min(rest.len());
            let off = 8 - self.left_len;
            for (d, k) in rest[..n].iter_mut().zip(&self.left[off..off + n]) {
                *d ^= k;
            }
            self.left_len -= n;
            rest = &mut rest[n..];
        }
        let mut ks = [0u8; CHUNK];
        while rest.len() >= 8 {
            self.maybe_mesh();
            let to_boundary = if self.meshing {
                (MESH_BLOCKS - self.blocks % MESH_BLOCKS) as usize * 8
            } else {
                CHUNK
            };
            let n = (rest.len() / 8 * 8).min(to_boundary).min(CHUNK);
            self.gamma(&mut ks[..n]);
            let (now, later) = rest.split_at_mut(n);
            for (d, k) in now.iter_mut().zip(&ks[..n]) {
                *d ^= k;
            }
            rest = later;
        }
        if !rest.is_empty() {
            self.maybe_mesh();
            let mut g = [0u8; 8];
            self.gamma(&mut g);
            for (d, k) in rest.iter_mut().zip(&g) {
                *d ^= k;
            }
            self.left = g;
            self.left_len = 8 - rest.len();
            g.zeroize();
        }
        ks.zeroize();
    }
}

/// GOST 28147-89 CFB (gamming with feedback), 64-bit feedback, any length.
#[derive(Debug)]
pub struct Gost89Cfb {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
}
constructors!(Gost89Cfb);

impl Gost89Cfb {
    /// Encrypts `buf` in place.
    pub fn encrypt(&self, iv: &[u8; 8], buf: &mut [u8]) -> Result<(), Error> {
        self.stream(iv).encrypt(buf)
    }
    /// Decrypts `buf` in place.
    pub fn decrypt(&self, iv: &[u8; 8], buf: &mut [u8]) -> Result<(), Error> {
        self.stream(iv).decrypt(buf)
    }
    /// Encrypts `src` into `dst` (same length).
    pub fn encrypt_to(&self, iv: &[u8; 8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        dst.copy_from_slice(src);
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst` (same length).
    pub fn decrypt_to(&self, iv: &[u8; 8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        dst.copy_from_slice(src);
        self.decrypt(iv, dst)
    }
    /// A CFB state that continues across calls; every call but the last must be a whole
    /// number of blocks.
    pub fn stream(&self, iv: &[u8; 8]) -> Gost89CfbStream {
        Gost89CfbStream {
            core: self.core.clone(),
            chain: self.chain.clone(),
            meshing: self.meshing,
            reg: Order::Gost89.load(iv),
            blocks: 0,
            done: false,
        }
    }
}

/// The running state of [`Gost89Cfb`]. Zeroized on drop.
pub struct Gost89CfbStream {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
    reg: u64,
    blocks: u64,
    done: bool,
}

impl Drop for Gost89CfbStream {
    fn drop(&mut self) {
        self.reg.zeroize();
    }
}

impl Gost89CfbStream {
    fn check(&mut self, len: usize) -> Result<(), Error> {
        if self.done {
            return Err(Error::Input(InputError::Length {
                got: len,
                why: "cfb stream already ended with a partial block",
            }));
        }
        if !len.is_multiple_of(8) {
            self.done = true;
        }
        Ok(())
    }

    /// Before block `self.blocks`: mesh at a 1024-byte boundary.
    fn maybe_mesh(&mut self) {
        if self.meshing && self.blocks > 0 && self.blocks.is_multiple_of(MESH_BLOCKS) {
            self.chain.apply(self.blocks / MESH_BLOCKS, &mut self.core);
            self.reg = self.core.enc(self.reg);
        }
    }

    /// Encrypts the next part of the message in place (sequential: one block at a time).
    pub fn encrypt(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.check(buf.len())?;
        for b in buf.chunks_mut(8) {
            self.maybe_mesh();
            let g = Order::Gost89.store(self.core.enc(self.reg));
            let mut c = [0u8; 8];
            for (x, k) in b.iter_mut().zip(&g) {
                *x ^= k;
            }
            c[..b.len()].copy_from_slice(b);
            self.reg = Order::Gost89.load(&c);
            self.blocks += 1;
        }
        Ok(())
    }

    /// Decrypts the next part of the message in place: the gamma of a chunk is the
    /// encryption of its ciphertext shifted by one block, so whole chunks go to the
    /// parallel kernel.
    pub fn decrypt(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.check(buf.len())?;
        let mut ks = [0u8; CHUNK];
        let mut rest = buf;
        while !rest.is_empty() {
            self.maybe_mesh();
            let to_boundary = if self.meshing {
                (MESH_BLOCKS - self.blocks % MESH_BLOCKS) as usize * 8
            } else {
                CHUNK
            };
            let n = rest.len().min(to_boundary).min(CHUNK);
            let nb = n.div_ceil(8);
            let (now, later) = rest.split_at_mut(n);
            ks[..8].copy_from_slice(&Order::Gost89.store(self.reg));
            ks[8..nb * 8].copy_from_slice(&now[..(nb - 1) * 8]);
            let last_full = n.is_multiple_of(8);
            if last_full {
                self.reg = Order::Gost89.load(&now[n - 8..]);
            }
            self.core.ecb(Dir::Encrypt, &mut ks[..nb * 8]);
            for (d, k) in now.iter_mut().zip(&ks[..n]) {
                *d ^= k;
            }
            self.blocks += nb as u64;
            rest = later;
        }
        ks.zeroize();
        Ok(())
    }
}

/// GOST 28147-89 CBC over whole blocks (no padding). With key meshing the chaining value
/// is re-encrypted under the new key at each 1024-byte boundary, as for CFB.
#[derive(Debug)]
pub struct Gost89Cbc {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
}
constructors!(Gost89Cbc);

impl Gost89Cbc {
    /// Encrypts `buf` in place.
    pub fn encrypt(&self, iv: &[u8; 8], buf: &mut [u8]) -> Result<(), Error> {
        whole_blocks(buf.len())?;
        let mut c = self.core.clone();
        let mut reg = Order::Gost89.load(iv);
        for (i, b) in buf.chunks_exact_mut(8).enumerate() {
            if self.meshing && i > 0 && (i as u64).is_multiple_of(MESH_BLOCKS) {
                self.chain.apply(i as u64 / MESH_BLOCKS, &mut c);
                reg = c.enc(reg);
            }
            reg = c.enc(Order::Gost89.load(b) ^ reg);
            b.copy_from_slice(&Order::Gost89.store(reg));
        }
        reg.zeroize();
        Ok(())
    }

    /// Decrypts `buf` in place (whole chunks of blocks in parallel).
    pub fn decrypt(&self, iv: &[u8; 8], buf: &mut [u8]) -> Result<(), Error> {
        whole_blocks(buf.len())?;
        let mut c = self.core.clone();
        let mut reg = Order::Gost89.load(iv);
        let mut saved = [0u8; CHUNK];
        // With meshing one chunk is one meshing period (chunk i uses key i).
        let step = if self.meshing { MESH_BYTES } else { CHUNK };
        for (i, chunk) in buf.chunks_mut(step).enumerate() {
            if self.meshing && i > 0 {
                self.chain.apply(i as u64, &mut c);
                reg = c.enc(reg);
            }
            let n = chunk.len();
            saved[..n].copy_from_slice(chunk);
            c.ecb(Dir::Decrypt, chunk);
            let first = Order::Gost89.load(chunk) ^ reg;
            chunk[..8].copy_from_slice(&Order::Gost89.store(first));
            for (d, k) in chunk[8..].iter_mut().zip(&saved[..n - 8]) {
                *d ^= k;
            }
            reg = Order::Gost89.load(&saved[n - 8..n]);
        }
        saved.zeroize();
        Ok(())
    }

    /// Encrypts `src` into `dst` (same length).
    pub fn encrypt_to(&self, iv: &[u8; 8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        whole_blocks(src.len())?;
        dst.copy_from_slice(src);
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst` (same length).
    pub fn decrypt_to(&self, iv: &[u8; 8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        same_len(src, dst)?;
        whole_blocks(src.len())?;
        dst.copy_from_slice(src);
        self.decrypt(iv, dst)
    }
}

/// The GOST 28147-89 MAC (imitovstavka): `S = E16(S xor P_i)` over zero-padded blocks; a
/// message of at most 8 bytes gets one extra all-zero block (CryptoPro, gost-engine,
/// libgcrypt); the empty message gives all zeros. The MAC is the first bytes of `S` (4 by
/// default). With key meshing the key changes every 1024 bytes (the state does not).
#[derive(Debug)]
pub struct Gost89Mac {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
}
constructors!(Gost89Mac);

impl Gost89Mac {
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
    pub fn start(&self) -> Gost89MacState {
        Gost89MacState {
            core: self.core.clone(),
            chain: self.chain.clone(),
            meshing: self.meshing,
            s: 0,
            buf: [0; 8],
            buf_len: 0,
            total: 0,
            blocks: 0,
        }
    }
}

/// The running state of [`Gost89Mac`]. Zeroized on drop.
pub struct Gost89MacState {
    core: Core,
    chain: Arc<MeshChain>,
    meshing: bool,
    s: u64,
    buf: [u8; 8],
    buf_len: usize,
    total: u64,
    blocks: u64,
}

impl Drop for Gost89MacState {
    fn drop(&mut self) {
        self.s.zeroize();
        self.buf.zeroize();
    }
}

impl Gost89MacState {
    fn block(&mut self, b: &[u8]) {
        if self.meshing && self.blocks > 0 && self.blocks.is_multiple_of(MESH_BLOCKS) {
            self.chain.apply(self.blocks / MESH_BLOCKS, &mut self.core);
        }
        self.s = self.core.s.mac16(self.s ^ Order::Gost89.load(b));
        self.blocks += 1;
    }

    /// Adds `data` to the message.
    pub fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.buf_len > 0 {
            let n = (8 - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + n].copy_from_slice(&data[..n]);
            self.buf_len += n;
            data = &data[n..];
            if self.buf_len < 8 {
                return;
            }
            // Keep a full block buffered until more data arrives (it may be the last).
            if data.is_empty() {
                return;
            }
            let b = self.buf;
            self.block(&b);
            self.buf_len = 0;
        }
        // Process all but the last (possibly full) block.
        while data.len() > 8 {
            self.block(&data[..8]);
            data = &data[8..];
        }
        self.buf[..data.len()].copy_from_slice(data);
        self.buf_len = data.len();
    }

    /// The first `out.len()` (1 to 8) bytes of the final state.
    pub fn finish_to(mut self, out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() || out.len() > 8 {
            return Err(Error::Input(InputError::TagLength {
                got: out.len(),
                expected: "1 to 8 bytes",
            }));
        }
        if self.total > 0 {
            let mut last = [0u8; 8];
            last[..self.buf_len].copy_from_slice(&self.buf[..self.buf_len]);
            self.block(&last);
            if self.total <= 8 {
                self.block(&[0u8; 8]);
            }
        }
        out.copy_from_slice(&Order::Gost89.store(self.s)[..out.len()]);
        Ok(())
    }
}

/// How one step of an interleaved chain mode combines data and register.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chain {
    /// CBC encryption: `C = E(P ^ R)`, `R = C`.
    Cbc,
    /// CFB encryption: `C = P ^ E(R)`, `R = C`.
    Cfb,
}

/// Sectors per interleaved batch: 128 chains = one 1 KiB call of the block kernel.
const SECTOR_BATCH: usize = 128;

/// Encrypts independent equal-size sectors (one message each, `ivs[i]` for sector `i`)
/// with a sequential chain mode, block `j` of every sector of a batch in one call of the
/// block kernel: the chains are serial, the sectors are not. With a meshing `chain`, key
/// meshing applies per sector at its 1024-byte boundaries, where every register of the
/// batch is re-encrypted in one call. Blocks use `core`'s byte convention.
pub(crate) fn encrypt_sectors(
    core: &Core,
    chain: Option<&MeshChain>,
    mode: Chain,
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
    if sector * ivs.len() != data.len() || sector == 0 || !sector.is_multiple_of(8) {
        return Err(Error::Input(InputError::Length {
            got: data.len(),
            why: "must be one non-empty whole number of 8-byte blocks per iv",
        }));
    }
    let o = core.order;
    let mut buf = [0u8; 8 * SECTOR_BATCH];
    for (batch, ivs) in data
        .chunks_mut(sector * SECTOR_BATCH)
        .zip(ivs.chunks(SECTOR_BATCH))
    {
        let n = ivs.len();
        let mut c = core.clone();
        let regs = &mut buf[..8 * n];
        for (r, iv) in regs.chunks_exact_mut(8).zip(ivs) {
            r.copy_from_slice(iv);
        }
        for j in 0..sector / 8 {
            if let Some(chain) = chain.filter(|_| j > 0 && (j as u64).is_multiple_of(MESH_BLOCKS)) {
                chain.apply(j as u64 / MESH_BLOCKS, &mut c);
                c.ecb(Dir::Encrypt, regs);
            }
            match mode {
                Chain::Cbc => {
                    for (i, r) in regs.chunks_exact_mut(8).enumerate() {
                        let p = &batch[i * sector + 8 * j..i * sector + 8 * j + 8];
                        let v = o.load(p) ^ o.load(r);
                        r.copy_from_slice(&o.store(v));
                    }
                    c.ecb(Dir::Encrypt, regs);
                    for (i, r) in regs.chunks_exact(8).enumerate() {
                        batch[i * sector + 8 * j..i * sector + 8 * j + 8].copy_from_slice(r);
                    }
                }
                Chain::Cfb => {
                    c.ecb(Dir::Encrypt, regs);
                    for (i, r) in regs.chunks_exact_mut(8).enumerate() {
                        let p = &mut batch[i * sector + 8 * j..i * sector + 8 * j + 8];
                        let v = o.load(p) ^ o.load(r);
                        p.copy_from_slice(&o.store(v));
                        r.copy_from_slice(&o.store(v));
                    }
                }
            }
        }
    }
    buf.zeroize();
    Ok(())
}

impl Gost89Cbc {
    /// Encrypts many independent sectors in place, `ivs[i]` for sector `i` (all sectors
    /// the same size, a multiple of 8 bytes): the same as one [`Gost89Cbc::encrypt`] per
    /// sector, with up to 128 sectors interleaved so the parallel backend runs them
    /// together.
    pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
        let chain = self.meshing.then_some(&*self.chain);
        encrypt_sectors(&self.core, chain, Chain::Cbc, ivs, data)
    }
}

impl Gost89Cfb {
    /// Encrypts many independent sectors in place, `ivs[i]` for sector `i` (all sectors
    /// the same size, a multiple of 8 bytes): the same as one [`Gost89Cfb::encrypt`] per
    /// sector, with up to 128 sectors interleaved so the parallel backend runs them
    /// together.
    pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
        let chain = self.meshing.then_some(&*self.chain);
        encrypt_sectors(&self.core, chain, Chain::Cfb, ivs, data)
    }
}

impl std::fmt::Debug for Gost89CntStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gost89CntStream")
            .field("key", &self.core)
            .field("meshing", &self.meshing)
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Gost89CfbStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gost89CfbStream")
            .field("key", &self.core)
            .field("meshing", &self.meshing)
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Gost89MacState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gost89MacState")
            .field("key", &self.core)
            .field("meshing", &self.meshing)
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}
