//! Magma (GOST R 34.12-2015, RFC 8891), big-endian, S-box id-tc26-gost-28147-param-Z, with
//! the modes of GOST R 34.13-2015 (ECB, CTR, OFB, CBC, CFB, the MAC), CTR-ACPKM (RFC 8645)
//! and the MGM AEAD (RFC 9058).
//!
//! OFB, CBC and CFB take an IV of m = z * 64 bits (z >= 1): the standard's shift register
//! of z blocks, i.e. z chains interleaved (block i chains to block i - z). With s = n = 64
//! (the only segment size offered), OFB and CFB accept any length, CBC whole blocks. CBC
//! and CFB are the chains shared with GOST 28147-89; CTR, CTR-ACPKM and MGM's two counter
//! streams are keystreams through the key's block kernel.

use super::chain::{encrypt_sectors, Chain, Feedback};
use super::keystream::{
    counter_blocks, ctr_xor, input, output, progression_xor, xor_at, Counter, CHUNK,
};
use super::{mac_len, same_len, whole_blocks, Core, Dir, GostBackend, Order, Sbox};
use crate::buf::InOut;
use crate::error::InputError;
use crate::Error;
use zeroize::Zeroize;

/// The block size in bytes.
pub const BLOCK: usize = super::BLOCK;

fn core(key: &[u8], backend: Option<GostBackend>) -> Result<Core, Error> {
    Core::new(key, Sbox::Tc26Z, Order::Magma, backend, "magma")
}

mode_types! {
    Core = core,
    (),
    "A 32-byte key on the selected backend.";
    /// Magma ECB over whole blocks.
    Ecb;
    /// Magma CTR (GOST R 34.13-2015 section 5.2): a 32-bit IV, counter `IV || 0^32`
    /// incremented as a 64-bit big-endian integer; any length; random access by byte
    /// offset.
    Ctr;
    /// Magma OFB with an m = z*64-bit IV (z chains), s = 64; any length.
    Ofb;
    /// Magma CBC with an m = z*64-bit IV (z chains), whole blocks, no padding.
    Cbc;
    /// Magma CFB with an m = z*64-bit IV (z chains), s = 64; any length.
    Cfb;
    /// The Magma MAC of GOST R 34.13-2015 section 5.6 (CMAC-like, B = 0x1b). The full MAC
    /// is 8 bytes; the standard's examples truncate to the first 4.
    Mac;
    /// MGM (RFC 9058) over Magma: an AEAD with a 64-bit nonce whose top bit is 0, a tag of
    /// 4 to 8 bytes (8 by default).
    Mgm;
}

impl Ecb {
    in_out_methods!();

    fn run(&self, dir: Dir, io: InOut<'_>) -> Result<(), Error> {
        whole_blocks(io.len())?;
        self.key.ecb(dir, io);
        Ok(())
    }
}

impl Ctr {
    in_out_methods!(iv: &[u8; 4]);

    /// XORs `buf` with the keystream that starts `offset` bytes into the message.
    pub fn apply_keystream(&self, iv: &[u8; 4], offset: u64, buf: &mut [u8]) {
        self.keystream(iv, offset, InOut::InPlace(buf));
    }

    fn keystream(&self, iv: &[u8; 4], offset: u64, io: InOut<'_>) {
        let mut ctr =
            Counter::Add64(((u32::from_be_bytes(*iv) as u64) << 32).wrapping_add(offset / 8));
        progression_xor(&self.key, io, (offset % 8) as usize, &mut ctr);
    }

    /// Encryption and decryption: the same keystream XOR.
    fn run(&self, _: Dir, iv: &[u8; 4], io: InOut<'_>) -> Result<(), Error> {
        self.keystream(iv, 0, io);
        Ok(())
    }
}

/// Magma CTR-ACPKM (RFC 8645, R 1323565.1.017): CTR whose key is replaced every
/// `section` bytes by `ACPKM(K) = E_K(D_1 || ... || D_4)`, D = 80 81 ... 9f; the counter
/// runs on.
#[derive(Debug)]
pub struct CtrAcpkm {
    key: Core,
    section: usize,
}

/// The ACPKM constant D (RFC 8645 section 6.2.1).
const ACPKM_D: [u8; 32] = [
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
];

impl CtrAcpkm {
    /// A 32-byte key and a section size in bytes (a non-zero multiple of 8), on the
    /// selected backend.
    pub fn new(key: &[u8], section: usize) -> Result<CtrAcpkm, Error> {
        Self::build(key, section, None)
    }

    /// The same on a named backend.
    pub fn with_backend(
        key: &[u8],
        section: usize,
        backend: GostBackend,
    ) -> Result<CtrAcpkm, Error> {
        Self::build(key, section, Some(backend))
    }

    fn build(key: &[u8], section: usize, backend: Option<GostBackend>) -> Result<CtrAcpkm, Error> {
        if section == 0 || !section.is_multiple_of(BLOCK) {
            return Err(Error::Input(InputError::Length {
                got: section,
                why: "the acpkm section size must be a non-zero multiple of 8 bytes",
            }));
        }
        Ok(CtrAcpkm {
            key: core(key, backend)?,
            section,
        })
    }

    /// The backend this key runs on.
    pub fn backend(&self) -> GostBackend {
        self.key.backend
    }

    in_out_methods!(iv: &[u8; 4]);

    /// Encryption and decryption: the same keystream XOR, with the 4-byte IV.
    fn run(&self, _: Dir, iv: &[u8; 4], mut io: InOut<'_>) -> Result<(), Error> {
        let mut c = self.key.clone();
        let mut ctr = Counter::Add64((u32::from_be_bytes(*iv) as u64) << 32);
        let len = io.len();
        for (i, off) in (0..len).step_by(self.section).enumerate() {
            if i > 0 {
                let mut k = ACPKM_D;
                c.ecb(Dir::Encrypt, InOut::InPlace(&mut k));
                for (j, w) in c.s.k.iter_mut().enumerate() {
                    *w = u32::from_be_bytes(k[4 * j..4 * j + 4].try_into().expect("4 bytes"));
                }
                k.zeroize();
            }
            let section = io.slice(off, len.min(off + self.section));
            progression_xor(&c, section, 0, &mut ctr);
        }
        Ok(())
    }
}

/// The z registers of an m = z*64-bit IV.
fn registers(iv: &[u8]) -> Result<Vec<u64>, Error> {
    if iv.is_empty() || !iv.len().is_multiple_of(BLOCK) {
        return Err(Error::Input(InputError::IvLength {
            got: iv.len(),
            expected: "a non-zero multiple of 8 bytes",
        }));
    }
    Ok(iv
        .chunks_exact(BLOCK)
        .map(|b| Order::Magma.load(b))
        .collect())
}

impl Ofb {
    in_out_methods!(iv: &[u8]);

    /// Encryption and decryption: the same keystream XOR; `iv` is z >= 1 blocks. The
    /// keystream is sequential (each gamma block is the encryption of the one z back).
    fn run(&self, _: Dir, iv: &[u8], mut io: InOut<'_>) -> Result<(), Error> {
        let mut r = registers(iv)?;
        let (len, z) = (io.len(), r.len());
        let mut i = 0;
        for off in (0..len).step_by(BLOCK) {
            r[i] = self.key.enc(r[i]);
            xor_at(
                &mut io,
                off,
                &Order::Magma.store(r[i])[..BLOCK.min(len - off)],
            );
            i = if i + 1 == z { 0 } else { i + 1 };
        }
        r.zeroize();
        Ok(())
    }
}

/// Runs the shared CBC or CFB chain with the z registers of `iv`.
fn chained(core: &Core, mode: Feedback, dir: Dir, iv: &[u8], io: InOut<'_>) -> Result<(), Error> {
    let mut regs = registers(iv)?;
    if mode == Feedback::Cbc {
        whole_blocks(io.len())?;
    }
    Chain {
        core: &mut core.clone(),
        mesh: None,
        regs: &mut regs,
        blocks: &mut 0,
    }
    .run(mode, dir, io);
    regs.zeroize();
    Ok(())
}

/// CBC and CFB: the shared chains with the z registers of the IV.
macro_rules! chained_modes {
    ($($t:ident: $mode:expr;)+) => {$(
        impl $t {
            in_out_methods!(iv: &[u8]);

            /// `iv` is z >= 1 blocks. Encryption is sequential; decryption goes through the
            /// block kernel a piece at a time.
            fn run(&self, dir: Dir, iv: &[u8], io: InOut<'_>) -> Result<(), Error> {
                chained(&self.key, $mode, dir, iv, io)
            }

            /// Encrypts many independent sectors in place, one 8-byte IV each (z = 1; all
            /// sectors the same size, a multiple of 8 bytes): the same as one `encrypt` per
            /// sector, up to 128 sectors interleaved through the parallel backend.
            pub fn encrypt_sectors(&self, ivs: &[[u8; 8]], data: &mut [u8]) -> Result<(), Error> {
                encrypt_sectors(&self.key, None, $mode, ivs, data)
            }
        }
    )+};
}

chained_modes! {
    Cbc: Feedback::Cbc;
    Cfb: Feedback::Cfb;
}

/// Doubling in GF(2^64) with the reduction of GOST R 34.13-2015 section 5.6 (B64 = 0x1b),
/// branch-free.
#[inline(always)]
fn dbl(x: u64) -> u64 {
    (x << 1) ^ (0x1b & 0u64.wrapping_sub(x >> 63))
}

impl Mac {
    /// The 8-byte MAC of `data`.
    pub fn mac(&self, data: &[u8]) -> [u8; 8] {
        let k1 = dbl(self.key.enc(0));
        let k2 = dbl(k1);
        let mut s = 0u64;
        let full = data.len().saturating_sub(1) / BLOCK;
        for b in data[..full * BLOCK].chunks_exact(BLOCK) {
            s = self.key.enc(s ^ Order::Magma.load(b));
        }
        let tail = &data[full * BLOCK..];
        let mut last = [0u8; BLOCK];
        last[..tail.len()].copy_from_slice(tail);
        let k = if tail.len() == BLOCK {
            k1
        } else {
            last[tail.len()] = 0x80;
            k2
        };
        let t = self.key.enc(s ^ Order::Magma.load(&last) ^ k);
        Order::Magma.store(t)
    }

    /// The first `out.len()` (1 to 8) bytes of the MAC.
    pub fn mac_to(&self, data: &[u8], out: &mut [u8]) -> Result<(), Error> {
        mac_len(out.len())?;
        let m = self.mac(data);
        out.copy_from_slice(&m[..out.len()]);
        Ok(())
    }
}

/// Multiplication in GF(2^64) modulo x^64 + x^4 + x^3 + x + 1 (RFC 9058 section 4.2),
/// blocks as big-endian integers; branch-free and without tables.
#[inline(always)]
fn gf64_mul(a: u64, b: u64) -> u64 {
    let mut r = 0u64;
    let mut a = a;
    for i in 0..64 {
        r ^= a & 0u64.wrapping_sub((b >> i) & 1);
        a = dbl(a);
    }
    r
}

/// The most AAD or plaintext MGM-Magma takes: lengths are 32-bit bit counts.
const MGM_MAX_BYTES: u64 = (1 << 29) - 1;

impl Mgm {
    fn check(nonce: &[u8; 8], aad: &[u8], len: usize, tag_len: usize) -> Result<(), Error> {
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
        for (what, len) in [("mgm aad", aad.len()), ("mgm plaintext", len)] {
            if len as u64 > MGM_MAX_BYTES {
                return Err(Error::Input(InputError::TooLong {
                    what,
                    limit: MGM_MAX_BYTES,
                }));
            }
        }
        Ok(())
    }

    /// The encryption keystream: `Y_1 = E(0 || nonce)`, the low half counting modulo 2^32.
    fn crypt(&self, nonce: &[u8; 8], io: InOut<'_>) {
        let mut y = self.key.enc(u64::from_be_bytes(*nonce));
        ctr_xor(&self.key, io, 0, || {
            let v = y;
            y = (y & 0xffff_ffff_0000_0000) | (y as u32).wrapping_add(1) as u64;
            v
        });
    }

    /// The tag over `aad` and the ciphertext `ct`: `Z_1 = E(1 || nonce)`, the high half
    /// counting modulo 2^32, `H_i = E(Z_i)` in pieces through the block kernel.
    fn tag(&self, nonce: &[u8; 8], aad: &[u8], ct: &[u8]) -> [u8; 8] {
        let mut z = self.key.enc(u64::from_be_bytes(*nonce) | (1 << 63));
        let mut acc = 0u64;
        let mut hs = [0u8; CHUNK];
        for part in aad.chunks(CHUNK).chain(ct.chunks(CHUNK)) {
            let hs = &mut hs[..part.len().div_ceil(BLOCK) * BLOCK];
            counter_blocks(&self.key, hs, || {
                let v = z;
                z = z.wrapping_add(1 << 32);
                v
            });
            for (h, b) in hs.chunks_exact(BLOCK).zip(part.chunks(BLOCK)) {
                let mut blk = [0u8; BLOCK];
                blk[..b.len()].copy_from_slice(b);
                acc ^= gf64_mul(Order::Magma.load(h), u64::from_be_bytes(blk));
            }
        }
        let h = self.key.enc(z);
        let lens = ((aad.len() as u64 * 8) << 32) | (ct.len() as u64 * 8);
        acc ^= gf64_mul(h, lens);
        hs.zeroize();
        Order::Magma.store(self.key.enc(acc))
    }

    /// Checks the arguments, encrypts `io` and writes the tag over its output.
    fn seal_io(
        &self,
        nonce: &[u8; 8],
        aad: &[u8],
        mut io: InOut<'_>,
        tag: &mut [u8],
    ) -> Result<(), Error> {
        Self::check(nonce, aad, io.len(), tag.len())?;
        self.crypt(nonce, io.reborrow());
        let t = self.tag(nonce, aad, output(&mut io));
        tag.copy_from_slice(&t[..tag.len()]);
        Ok(())
    }

    /// Checks the arguments and the tag over the input of `io`, then decrypts. On a wrong
    /// tag nothing is decrypted, and an in-place buffer is zeroed (a separate destination
    /// is untouched).
    fn open_io(&self, nonce: &[u8; 8], aad: &[u8], io: InOut<'_>, tag: &[u8]) -> Result<(), Error> {
        use subtle::ConstantTimeEq;
        Self::check(nonce, aad, io.len(), tag.len())?;
        let t = self.tag(nonce, aad, input(&io));
        if !bool::from(t[..tag.len()].ct_eq(tag)) {
            if let InOut::InPlace(b) = io {
                b.zeroize();
            }
            return Err(Error::AuthenticationFailed);
        }
        self.crypt(nonce, io);
        Ok(())
    }

    /// Encrypts `data` in place and writes the tag (4 to 8 bytes) to `tag`.
    pub fn seal(
        &self,
        nonce: &[u8; 8],
        aad: &[u8],
        data: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        self.seal_io(nonce, aad, InOut::InPlace(data), tag)
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
        self.open_io(nonce, aad, InOut::InPlace(data), tag)
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
        Self::check(nonce, aad, src.len(), tag.len())?;
        same_len(src, dst)?;
        self.seal_io(nonce, aad, InOut::split(src, dst), tag)
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
        Self::check(nonce, aad, src.len(), tag.len())?;
        same_len(src, dst)?;
        self.open_io(nonce, aad, InOut::split(src, dst), tag)
    }
}
