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

use super::{same_len, whole_blocks, Core, Dir, GostBackend, Order, Sbox, MESH_BYTES};
use crate::Error;
use zeroize::Zeroize;

/// Blocks between two key meshings.
const MESH_BLOCKS: u64 = (MESH_BYTES / 8) as u64;
/// Bytes of keystream (or blocks) produced per call into the block kernel.
const CHUNK: usize = MESH_BYTES;

/// CNT's C2, added to N3 modulo 2^32 (GOST 28147-89 section 3.1).
const C2: u32 = 0x0101_0101;
/// CNT's C1, added to N4 modulo 2^32 - 1.
const C1: u32 = 0x0101_0104;

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
                Ok($t {
                    core: core(key, sbox, None)?,
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
                Ok($t {
                    core: core(key, sbox, Some(backend))?,
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
    meshing: bool,
}
constructors!(Gost89Ecb);

impl Gost89Ecb {
    fn run(&self, buf: &mut [u8], dir: Dir) -> Result<(), Error> {
        whole_blocks(buf.len())?;
        let mut c = self.core.clone();
        for (i, chunk) in buf.chunks_mut(CHUNK).enumerate() {
            if self.meshing && i > 0 {
                c.mesh();
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
            meshing: self.meshing,
            n3: s as u32,
            n4: (s >> 32) as u32,
            blocks: 0,
            left: [0; 8],
            left_len: 0,
        }
    }
}

/// The running state of a [`Gost89Cnt`] keystream. Zeroized on drop.
#[derive(Debug)]
pub struct Gost89CntStream {
    core: Core,
    meshing: bool,
    n3: u32,
    n4: u32,
    /// Gamma blocks produced so far.
    blocks: u64,
    /// Unused keystream of the last partial block.
    left: [u8; 8],
    left_len: usize,
}

impl Drop for Gost89CntStream {
    fn drop(&mut self) {
        self.n3.zeroize();
        self.n4.zeroize();
        self.left.zeroize();
    }
}

impl Gost89CntStream {
    /// Fills `out` (whole blocks, not crossing a meshing boundary) with gamma blocks.
    fn gamma(&mut self, out: &mut [u8]) {
        for b in out.chunks_exact_mut(8) {
            self.n3 = self.n3.wrapping_add(C2);
            self.n4 = add_mod_2_32_minus_1(self.n4, C1);
            b[..4].copy_from_slice(&self.n3.to_le_bytes());
            b[4..].copy_from_slice(&self.n4.to_le_bytes());
        }
        self.core.ecb(Dir::Encrypt, out);
        self.blocks += (out.len() / 8) as u64;
    }

    /// Before the gamma block `self.blocks`: mesh when a 1024-byte boundary is reached.
    fn maybe_mesh(&mut self) {
        if self.meshing && self.blocks > 0 && self.blocks.is_multiple_of(MESH_BLOCKS) {
            self.core.mesh();
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
            meshing: self.meshing,
            reg: Order::Gost89.load(iv),
            blocks: 0,
            done: false,
        }
    }
}

/// The running state of [`Gost89Cfb`]. Zeroized on drop.
#[derive(Debug)]
pub struct Gost89CfbStream {
    core: Core,
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
            return Err(Error::Length {
                got: len,
                why: "cfb stream already ended with a partial block",
            });
        }
        if !len.is_multiple_of(8) {
            self.done = true;
        }
        Ok(())
    }

    /// Before block `self.blocks`: mesh at a 1024-byte boundary.
    fn maybe_mesh(&mut self) {
        if self.meshing && self.blocks > 0 && self.blocks.is_multiple_of(MESH_BLOCKS) {
            self.core.mesh();
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
                c.mesh();
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
        for (i, chunk) in buf.chunks_mut(CHUNK).enumerate() {
            if self.meshing && i > 0 {
                c.mesh();
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
#[derive(Debug)]
pub struct Gost89MacState {
    core: Core,
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
            self.core.mesh();
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
            return Err(Error::TagLength {
                got: out.len(),
                expected: "1 to 8 bytes",
            });
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
