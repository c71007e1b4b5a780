//! The Magma modes of GOST R 34.13-2015 (big-endian convention, S-box
//! id-tc26-gost-28147-param-Z): ECB, CTR, OFB, CBC, CFB, the MAC, CTR-ACPKM (RFC 8645) and
//! the MGM AEAD (RFC 9058).
//!
//! OFB, CBC and CFB take an IV of m = z * 64 bits (z >= 1): the standard's shift register
//! of z blocks, i.e. z chains interleaved (block i chains to block i - z). With s = n = 64
//! (the only segment size offered), OFB and CFB accept any length, CBC whole blocks.

use super::{same_len, whole_blocks, Core, Dir, GostBackend, Order, Sbox};
use crate::error::InputError;
use crate::Error;
use zeroize::Zeroize;

/// The Magma block size in bytes.
pub const MAGMA_BLOCK: usize = 8;

/// Bytes per call into the block kernel.
const CHUNK: usize = 4096;

fn core(key: &[u8], backend: Option<GostBackend>) -> Result<Core, Error> {
    Core::new(key, Sbox::Tc26Z, Order::Magma, backend, "magma")
}

macro_rules! constructors {
    ($t:ident) => {
        impl $t {
            /// A 32-byte key on the selected backend.
            pub fn new(key: &[u8]) -> Result<$t, Error> {
                Ok($t {
                    core: core(key, None)?,
                })
            }
            /// A 32-byte key on a named backend (tests and benchmarks).
            pub fn with_backend(key: &[u8], backend: GostBackend) -> Result<$t, Error> {
                Ok($t {
                    core: core(key, Some(backend))?,
                })
            }
            /// The backend this key runs on.
            pub fn backend(&self) -> GostBackend {
                self.core.backend
            }
        }
    };
}

/// Copies `src` to `dst` after the length checks of an out-of-place call.
fn prepare_to(src: &[u8], dst: &mut [u8], whole: bool) -> Result<(), Error> {
    same_len(src, dst)?;
    if whole {
        whole_blocks(src.len())?;
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// Magma ECB over whole blocks.
#[derive(Debug)]
pub struct MagmaEcb {
    core: Core,
}
constructors!(MagmaEcb);

impl MagmaEcb {
    /// Encrypts `buf` in place.
    pub fn encrypt(&self, buf: &mut [u8]) -> Result<(), Error> {
        whole_blocks(buf.len())?;
        self.core.ecb(Dir::Encrypt, buf);
        Ok(())
    }
    /// Decrypts `buf` in place.
    pub fn decrypt(&self, buf: &mut [u8]) -> Result<(), Error> {
        whole_blocks(buf.len())?;
        self.core.ecb(Dir::Decrypt, buf);
        Ok(())
    }
    /// Encrypts `src` into `dst` (same length).
    pub fn encrypt_to(&self, src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        prepare_to(src, dst, true)?;
        self.encrypt(dst)
    }
    /// Decrypts `src` into `dst` (same length).
    pub fn decrypt_to(&self, src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        prepare_to(src, dst, true)?;
        self.decrypt(dst)
    }
}

/// XORs the CTR keystream of the 64-bit counter `ctr` (incremented per block, wrapping at
/// 2^64) into `data`, skipping the first `skip` (< 8) keystream bytes.
fn ctr_xor(core: &Core, ctr: &mut u64, skip: usize, data: &mut [u8]) {
    let mut ks = [0u8; CHUNK];
    let mut rest = data;
    let mut skip = skip;
    while !rest.is_empty() {
        let n = (rest.len() + skip).min(CHUNK);
        let nb = n.div_ceil(8);
        for b in ks[..nb * 8].chunks_exact_mut(8) {
            b.copy_from_slice(&ctr.to_be_bytes());
            *ctr = ctr.wrapping_add(1);
        }
        core.ecb(Dir::Encrypt, &mut ks[..nb * 8]);
        let used = n - skip;
        let (now, later) = rest.split_at_mut(used);
        for (d, k) in now.iter_mut().zip(&ks[skip..n]) {
            *d ^= k;
        }
        skip = 0;
        rest = later;
    }
    ks.zeroize();
}

/// Magma CTR (GOST R 34.13-2015 section 5.2): a 32-bit IV, counter `IV || 0^32`
/// incremented as a 64-bit big-endian integer; any length; random access by byte offset.
#[derive(Debug)]
pub struct MagmaCtr {
    core: Core,
}
constructors!(MagmaCtr);

impl MagmaCtr {
    /// XORs `buf` with the keystream that starts `offset` bytes into the message.
    pub fn apply_keystream(&self, iv: &[u8; 4], offset: u64, buf: &mut [u8]) {
        let mut ctr = ((u32::from_be_bytes(*iv) as u64) << 32).wrapping_add(offset / 8);
        ctr_xor(&self.core, &mut ctr, (offset % 8) as usize, buf);
    }
    /// Encrypts (or decrypts) `buf` in place.
    pub fn encrypt(&self, iv: &[u8; 4], buf: &mut [u8]) -> Result<(), Error> {
        self.apply_keystream(iv, 0, buf);
        Ok(())
    }
    /// Decrypts `buf` in place (the same operation).
    pub fn decrypt(&self, iv: &[u8; 4], buf: &mut [u8]) -> Result<(), Error> {
        self.encrypt(iv, buf)
    }
    /// Encrypts `src` into `dst` (same length).
    pub fn encrypt_to(&self, iv: &[u8; 4], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        prepare_to(src, dst, false)?;
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst` (same length).
    pub fn decrypt_to(&self, iv: &[u8; 4], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        self.encrypt_to(iv, src, dst)
    }
}

/// Magma CTR-ACPKM (RFC 8645, R 1323565.1.017): CTR whose key is replaced every
/// `section` bytes by `ACPKM(K) = E_K(D_1 || ... || D_4)`, D = 80 81 ... 9f; the counter
/// runs on.
#[derive(Debug)]
pub struct MagmaCtrAcpkm {
    core: Core,
    section: usize,
}

/// The ACPKM constant D (RFC 8645 section 6.2.1).
const ACPKM_D: [u8; 32] = [
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
];

impl MagmaCtrAcpkm {
    /// A 32-byte key and a section size in bytes (a non-zero multiple of 8), on the
    /// selected backend.
    pub fn new(key: &[u8], section: usize) -> Result<MagmaCtrAcpkm, Error> {
        Self::build(key, section, None)
    }
    /// The same on a named backend.
    pub fn with_backend(
        key: &[u8],
        section: usize,
        backend: GostBackend,
    ) -> Result<MagmaCtrAcpkm, Error> {
        Self::build(key, section, Some(backend))
    }
    fn build(
        key: &[u8],
        section: usize,
        backend: Option<GostBackend>,
    ) -> Result<MagmaCtrAcpkm, Error> {
        if section == 0 || !section.is_multiple_of(8) {
            return Err(Error::Input(InputError::Length {
                got: section,
                why: "the acpkm section size must be a non-zero multiple of 8 bytes",
            }));
        }
        Ok(MagmaCtrAcpkm {
            core: core(key, backend)?,
            section,
        })
    }
    /// The backend this key runs on.
    pub fn backend(&self) -> GostBackend {
        self.core.backend
    }
    /// Encrypts (or decrypts) `buf` in place with the 4-byte IV.
    pub fn encrypt(&self, iv: &[u8; 4], buf: &mut [u8]) -> Result<(), Error> {
        let mut c = self.core.clone();
        let mut ctr = (u32::from_be_bytes(*iv) as u64) << 32;
        for (i, section) in buf.chunks_mut(self.section).enumerate() {
            if i > 0 {
                let mut k = ACPKM_D;
                c.ecb(Dir::Encrypt, &mut k);
                for (j, w) in c.s.k.iter_mut().enumerate() {
                    *w = u32::from_be_bytes(k[4 * j..4 * j + 4].try_into().expect("4 bytes"));
                }
                k.zeroize();
            }
            ctr_xor(&c, &mut ctr, 0, section);
        }
        Ok(())
    }
    /// Decrypts `buf` in place (the same operation).
    pub fn decrypt(&self, iv: &[u8; 4], buf: &mut [u8]) -> Result<(), Error> {
        self.encrypt(iv, buf)
    }
    /// Encrypts `src` into `dst`.
    pub fn encrypt_to(&self, iv: &[u8; 4], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        prepare_to(src, dst, false)?;
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst`.
    pub fn decrypt_to(&self, iv: &[u8; 4], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        self.encrypt_to(iv, src, dst)
    }
}

/// The z registers of an m = z*64-bit IV.
fn registers(iv: &[u8]) -> Result<Vec<u64>, Error> {
    if iv.is_empty() || !iv.len().is_multiple_of(8) {
        return Err(Error::Input(InputError::IvLength {
            got: iv.len(),
            expected: "a non-zero multiple of 8 bytes",
        }));
    }
    Ok(iv.chunks_exact(8).map(|b| Order::Magma.load(b)).collect())
}

/// Magma OFB with an m = z*64-bit IV (z chains), s = 64; any length.
#[derive(Debug)]
pub struct MagmaOfb {
    core: Core,
}
constructors!(MagmaOfb);

impl MagmaOfb {
    /// Encrypts (or decrypts) `buf` in place; `iv` is z >= 1 blocks.
    pub fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        let mut r = registers(iv)?;
        let z = r.len();
        for (i, b) in buf.chunks_mut(8).enumerate() {
            let g = self.core.enc(r[i % z]);
            r[i % z] = g;
            let gb = Order::Magma.store(g);
            for (d, k) in b.iter_mut().zip(&gb) {
                *d ^= k;
            }
        }
        r.zeroize();
        Ok(())
    }
    /// Decrypts `buf` in place (the same operation).
    pub fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        self.encrypt(iv, buf)
    }
    /// Encrypts `src` into `dst`.
    pub fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        prepare_to(src, dst, false)?;
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst`.
    pub fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        self.encrypt_to(iv, src, dst)
    }
}

/// Magma CBC with an m = z*64-bit IV (z chains), whole blocks, no padding.
#[derive(Debug)]
pub struct MagmaCbc {
    core: Core,
}
constructors!(MagmaCbc);

impl MagmaCbc {
    /// Encrypts `buf` in place; `iv` is z >= 1 blocks.
    pub fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        let mut r = registers(iv)?;
        whole_blocks(buf.len())?;
        let z = r.len();
        for (i, b) in buf.chunks_exact_mut(8).enumerate() {
            let c = self.core.enc(Order::Magma.load(b) ^ r[i % z]);
            r[i % z] = c;
            b.copy_from_slice(&Order::Magma.store(c));
        }
        r.zeroize();
        Ok(())
    }
    /// Decrypts `buf` in place (chunks of blocks in parallel).
    pub fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        let mut r = registers(iv)?;
        whole_blocks(buf.len())?;
        let z = r.len();
        let mut saved = [0u8; CHUNK];
        let mut i = 0usize;
        for chunk in buf.chunks_mut(CHUNK) {
            let n = chunk.len();
            saved[..n].copy_from_slice(chunk);
            self.core.ecb(Dir::Decrypt, chunk);
            for (p, c) in chunk.chunks_exact_mut(8).zip(saved[..n].chunks_exact(8)) {
                let v = Order::Magma.load(p) ^ r[i % z];
                p.copy_from_slice(&Order::Magma.store(v));
                r[i % z] = Order::Magma.load(c);
                i += 1;
            }
        }
        saved.zeroize();
        r.zeroize();
        Ok(())
    }
    /// Encrypts `src` into `dst`.
    pub fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        registers(iv)?;
        prepare_to(src, dst, true)?;
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst`.
    pub fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        registers(iv)?;
        prepare_to(src, dst, true)?;
        self.decrypt(iv, dst)
    }
}

impl MagmaCbc {
    /// Encrypts many independent sectors in place, one 8-byte IV each (z = 1; all sectors
    /// the same size, a multiple of 8 bytes): the same as one [`MagmaCbc::encrypt`] per
    /// sector, up to 128 sectors interleaved through the parallel backend.
    pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
        super::gost89::encrypt_sectors(&self.core, None, super::gost89::Chain::Cbc, ivs, data)
    }
}

impl MagmaCfb {
    /// Encrypts many independent sectors in place, one 8-byte IV each (z = 1; all sectors
    /// the same size, a multiple of 8 bytes): the same as one [`MagmaCfb::encrypt`] per
    /// sector, up to 128 sectors interleaved through the parallel backend.
    pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
        super::gost89::encrypt_sectors(&self.core, None, super::gost89::Chain::Cfb, ivs, data)
    }
}

/// Magma CFB with an m = z*64-bit IV (z chains), s = 64; any length.
#[derive(Debug)]
pub struct MagmaCfb {
    core: Core,
}
constructors!(MagmaCfb);

impl MagmaCfb {
    /// Encrypts `buf` in place; `iv` is z >= 1 blocks.
    pub fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        let mut r = registers(iv)?;
        let z = r.len();
        for (i, b) in buf.chunks_mut(8).enumerate() {
            let g = Order::Magma.store(self.core.enc(r[i % z]));
            let mut c = [0u8; 8];
            for (x, k) in b.iter_mut().zip(&g) {
                *x ^= k;
            }
            c[..b.len()].copy_from_slice(b);
            r[i % z] = Order::Magma.load(&c);
        }
        r.zeroize();
        Ok(())
    }
    /// Decrypts `buf` in place (chunks of blocks in parallel).
    pub fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        let mut r = registers(iv)?;
        let z = r.len();
        let mut ks = [0u8; CHUNK];
        let mut i = 0usize;
        for chunk in buf.chunks_mut(CHUNK) {
            let nb = chunk.len().div_ceil(8);
            for (k, c) in ks[..nb * 8].chunks_exact_mut(8).zip(chunk.chunks(8)) {
                k.copy_from_slice(&Order::Magma.store(r[i % z]));
                if c.len() == 8 {
                    r[i % z] = Order::Magma.load(c);
                }
                i += 1;
            }
            self.core.ecb(Dir::Encrypt, &mut ks[..nb * 8]);
            for (d, k) in chunk.iter_mut().zip(&ks) {
                *d ^= k;
            }
        }
        ks.zeroize();
        r.zeroize();
        Ok(())
    }
    /// Encrypts `src` into `dst`.
    pub fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        registers(iv)?;
        prepare_to(src, dst, false)?;
        self.encrypt(iv, dst)
    }
    /// Decrypts `src` into `dst`.
    pub fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        registers(iv)?;
        prepare_to(src, dst, false)?;
        self.decrypt(iv, dst)
    }
}

/// Doubling in GF(2^64) with the reduction of GOST R 34.13-2015 section 5.6 (B64 = 0x1b),
/// branch-free.
#[inline(always)]
fn dbl(x: u64) -> u64 {
    (x << 1) ^ (0x1b & 0u64.wrapping_sub(x >> 63))
}

/// The Magma MAC of GOST R 34.13-2015 section 5.6 (CMAC-like, B = 0x1b). The full MAC is
/// 8 bytes; the standard's examples truncate to the first 4.
#[derive(Debug)]
pub struct MagmaMac {
    core: Core,
}
constructors!(MagmaMac);

impl MagmaMac {
    /// The 8-byte MAC of `data`.
    pub fn mac(&self, data: &[u8]) -> [u8; 8] {
        let k1 = dbl(self.core.enc(0));
        let k2 = dbl(k1);
        let mut s = 0u64;
        let full = if data.is_empty() {
            0
        } else {
            (data.len() - 1) / 8
        };
        for b in data[..full * 8].chunks_exact(8) {
            s = self.core.enc(s ^ Order::Magma.load(b));
        }
        let tail = &data[full * 8..];
        let mut last = [0u8; 8];
        last[..tail.len()].copy_from_slice(tail);
        let k = if tail.len() == 8 {
            k1
        } else {
            last[tail.len()] = 0x80;
            k2
        };
        let t = self.core.enc(s ^ Order::Magma.load(&last) ^ k);
        Order::Magma.store(t)
    }

    /// The first `out.len()` (1 to 8) bytes of the MAC.
    pub fn mac_to(&self, data: &[u8], out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() || out.len() > 8 {
            return Err(Error::Input(InputError::TagLength {
                got: out.len(),
                expected: "1 to 8 bytes",
            }));
        }
        let m = self.mac(data);
        out.copy_from_slice(&m[..out.len()]);
        Ok(())
    }
}

/// Multiplication in GF(2^64) modulo x^64 + x^4 + x^3 + x + 1 (RFC 9058 section 4.2),
/// blocks as big-endian integers; branch-free and without tables.
#[inline(always)]
pub(crate) fn gf64_mul(a: u64, b: u64) -> u64 {
    let mut r = 0u64;
    let mut a = a;
    for i in 0..64 {
        r ^= a & 0u64.wrapping_sub((b >> i) & 1);
        a = dbl(a);
    }
    r
}

/// MGM (RFC 9058) over Magma: an AEAD with a 64-bit nonce whose top bit is 0, a tag of 4
/// to 8 bytes (8 by default).
#[derive(Debug)]
pub struct MagmaMgm {
    core: Core,
}
constructors!(MagmaMgm);

/// The most AAD or plaintext MGM-Magma takes: lengths are 32-bit bit counts.
const MGM_MAX_BYTES: u64 = (1 << 29) - 1;

impl MagmaMgm {
    fn check(nonce: &[u8; 8], aad: &[u8], data: &[u8], tag_len: usize) -> Result<(), Error> {
        if nonce[0] & 0x80 != 0 {
            return Err(Error::Input(InputError::Nonce(
                "mgm nonce: the most significant bit must be 0 (rfc 9058)",
            )));
        }
        if !(4..=8).contains(&tag_len) {
            return Err(Error::Input(InputError::TagLength {
                got: tag_len,
                expected: "4 to 8 bytes",
            }));
        }
        for (what, len) in [("mgm aad", aad.len()), ("mgm plaintext", data.len())] {
            if len as u64 > MGM_MAX_BYTES {
                return Err(Error::Input(InputError::TooLong {
                    what,
                    limit: MGM_MAX_BYTES,
                }));
            }
        }
        Ok(())
    }

    /// The tag over `aad` and the ciphertext `ct`, with `z` = E(1 || nonce).
    fn tag(&self, z1: u64, aad: &[u8], ct: &[u8]) -> [u8; 8] {
        let mut z = z1;
        let mut acc = 0u64;
        let mut hs = [0u8; CHUNK];
        // Feeds the zero-padded blocks of `data` into the sum, H_i computed in chunks.
        let mut feed = |data: &[u8], z: &mut u64, acc: &mut u64| {
            for part in data.chunks(CHUNK) {
                let nb = part.len().div_ceil(8);
                for h in hs[..nb * 8].chunks_exact_mut(8) {
                    h.copy_from_slice(&z.to_be_bytes());
                    *z = z.wrapping_add(1 << 32);
                }
                self.core.ecb(Dir::Encrypt, &mut hs[..nb * 8]);
                for (h, b) in hs[..nb * 8].chunks_exact(8).zip(part.chunks(8)) {
                    let mut blk = [0u8; 8];
                    blk[..b.len()].copy_from_slice(b);
                    *acc ^= gf64_mul(Order::Magma.load(h), u64::from_be_bytes(blk));
                }
            }
        };
        feed(aad, &mut z, &mut acc);
        feed(ct, &mut z, &mut acc);
        let h = self.core.enc(z);
        let lens = ((aad.len() as u64 * 8) << 32) | (ct.len() as u64 * 8);
        acc ^= gf64_mul(h, lens);
        hs.zeroize();
        Order::Magma.store(self.core.enc(acc))
    }

    /// Encrypts `data` in place and writes the tag (4 to 8 bytes) to `tag`.
    pub fn seal(
        &self,
        nonce: &[u8; 8],
        aad: &[u8],
        data: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        Self::check(nonce, aad, data, tag.len())?;
        let n = u64::from_be_bytes(*nonce);
        let mut y = self.core.enc(n);
        let z1 = self.core.enc(n | (1 << 63));
        let mut ks = [0u8; CHUNK];
        for part in data.chunks_mut(CHUNK) {
            let nb = part.len().div_ceil(8);
            for k in ks[..nb * 8].chunks_exact_mut(8) {
                k.copy_from_slice(&y.to_be_bytes());
                y = (y & 0xffff_ffff_0000_0000) | (y as u32).wrapping_add(1) as u64;
            }
            self.core.ecb(Dir::Encrypt, &mut ks[..nb * 8]);
            for (d, k) in part.iter_mut().zip(&ks) {
                *d ^= k;
            }
        }
        ks.zeroize();
        let t = self.tag(z1, aad, data);
        tag.copy_from_slice(&t[..tag.len()]);
        Ok(())
    }

    /// Checks the tag, then decrypts `data` in place. On a wrong tag nothing is
    /// decrypted and `data` is zeroed.
    pub fn open(
        &self,
        nonce: &[u8; 8],
        aad: &[u8],
        data: &mut [u8],
        tag: &[u8],
    ) -> Result<(), Error> {
        Self::check(nonce, aad, data, tag.len())?;
        let n = u64::from_be_bytes(*nonce);
        let z1 = self.core.enc(n | (1 << 63));
        let t = self.tag(z1, aad, data);
        use subtle::ConstantTimeEq;
        if !bool::from(t[..tag.len()].ct_eq(tag)) {
            data.zeroize();
            return Err(Error::AuthenticationFailed);
        }
        let mut y = self.core.enc(n);
        let mut ks = [0u8; CHUNK];
        for part in data.chunks_mut(CHUNK) {
            let nb = part.len().div_ceil(8);
            for k in ks[..nb * 8].chunks_exact_mut(8) {
                k.copy_from_slice(&y.to_be_bytes());
                y = (y & 0xffff_ffff_0000_0000) | (y as u32).wrapping_add(1) as u64;
            }
            self.core.ecb(Dir::Encrypt, &mut ks[..nb * 8]);
            for (d, k) in part.iter_mut().zip(&ks) {
                *d ^= k;
            }
        }
        ks.zeroize();
        Ok(())
    }

    /// Encrypts `src` into `dst` and writes the tag.
    pub fn seal_to(
        &self,
        nonce: &[u8; 8],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        Self::check(nonce, aad, src, tag.len())?;
        prepare_to(src, dst, false)?;
        self.seal(nonce, aad, dst, tag)
    }

    /// Checks the tag over `src`, then decrypts into `dst` (untouched on failure).
    pub fn open_to(
        &self,
        nonce: &[u8; 8],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
        tag: &[u8],
    ) -> Result<(), Error> {
        Self::check(nonce, aad, src, tag.len())?;
        same_len(src, dst)?;
        let mut tmp = src.to_vec();
        self.open(nonce, aad, &mut tmp, tag)?;
        dst.copy_from_slice(&tmp);
        tmp.zeroize();
        Ok(())
    }
}
