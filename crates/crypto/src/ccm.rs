//! AES-CCM (NIST SP 800-38C, RFC 3610): counter mode with a CBC-MAC, the key wrap of
//! BitLocker's metadata (12-byte nonces, 16-byte tags) and of other formats.
//!
//! - Keys of 16, 24 or 32 bytes; nonces of 7 to 13 bytes (the length field then has
//!   `L = 15 - nonce length` bytes and bounds the message to `2^(8L) - 1` bytes); tags of
//!   4, 6, 8, 10, 12, 14 or 16 bytes; associated data of any length.
//! - Built on this crate's ECB (the CBC-MAC, one block at a time: CCM's MAC is serial) and
//!   CTR (the keystream). CCM's counter is the low `L` bytes of the counter block; the
//!   length bound keeps it from ever carrying into the nonce, so the 128-bit CTR kernel
//!   gives the same keystream.
//! - [`Ccm::open`] authenticates before it releases anything: when the tag is wrong the
//!   buffer is zeroed and [`Error::AuthenticationFailed`] returned. Tags are compared in
//!   constant time.
//!
//! CCM is serial in its MAC and meant for short messages here (keys of a few dozen bytes);
//! it is not on any data path.

use crate::block::BLOCK;
use crate::error::InputError;
use crate::modes::{Ctr, Ecb};
use crate::Error;
use zeroize::Zeroize;

/// AES-CCM under one key.
#[derive(Debug)]
pub struct Ccm {
    ecb: Ecb,
    ctr: Ctr,
}

/// The lengths CCM allows for the tag.
const TAG_LENGTHS: [usize; 7] = [4, 6, 8, 10, 12, 14, 16];

impl Ccm {
    /// A 16-, 24- or 32-byte AES key.
    pub fn new(key: &[u8]) -> Result<Ccm, Error> {
        Ok(Ccm {
            ecb: Ecb::new(key)?,
            ctr: Ctr::new(key)?,
        })
    }

    /// Encrypts `buf` in place and returns its tag of `tag_len` bytes.
    pub fn seal(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag_len: usize,
    ) -> Result<Vec<u8>, Error> {
        check(nonce, buf.len(), tag_len)?;
        let mac = self.cbc_mac(nonce, aad, buf, tag_len)?;
        let mut tag = self.keystream_block(nonce)?;
        for (t, m) in tag.iter_mut().zip(mac) {
            *t ^= m;
        }
        self.ctr.apply_keystream(&counter(nonce, 1), 0, buf);
        Ok(tag[..tag_len].to_vec())
    }

    /// Decrypts `buf` in place when `tag` authenticates it with `nonce` and `aad`;
    /// otherwise zeroes `buf` and returns [`Error::AuthenticationFailed`].
    pub fn open(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        check(nonce, buf.len(), tag.len())?;
        self.ctr.apply_keystream(&counter(nonce, 1), 0, buf);
        let mac = self.cbc_mac(nonce, aad, buf, tag.len())?;
        let mut expected = self.keystream_block(nonce)?;
        for (e, m) in expected.iter_mut().zip(mac) {
            *e ^= m;
        }
        use subtle::ConstantTimeEq as _;
        let good = bool::from(expected[..tag.len()].ct_eq(tag));
        expected.zeroize();
        if !good {
            buf.zeroize();
            return Err(Error::AuthenticationFailed);
        }
        Ok(())
    }

    /// `S_0 = E(A_0)`, the block that masks the tag.
    fn keystream_block(&self, nonce: &[u8]) -> Result<[u8; BLOCK], Error> {
        let mut s0 = counter(nonce, 0);
        self.ecb.encrypt(&mut s0)?;
        Ok(s0)
    }

    /// The CBC-MAC of `B_0 || encoded aad || plaintext`, each part padded with zeros to
    /// whole blocks (SP 800-38C, A.2).
    fn cbc_mac(
        &self,
        nonce: &[u8],
        aad: &[u8],
        plain: &[u8],
        tag_len: usize,
    ) -> Result<[u8; BLOCK], Error> {
        let l = 15 - nonce.len();
        let mut x = [0u8; BLOCK];
        x[0] = (u8::from(!aad.is_empty()) << 6) | (((tag_len - 2) / 2) as u8) << 3 | (l - 1) as u8;
        x[1..1 + nonce.len()].copy_from_slice(nonce);
        let len = (plain.len() as u64).to_be_bytes();
        x[1 + nonce.len()..].copy_from_slice(&len[8 - l..]);
        self.ecb.encrypt(&mut x)?;
        if !aad.is_empty() {
            let mut encoded = Vec::with_capacity(10 + aad.len());
            let a = aad.len() as u64;
            if a < (1 << 16) - (1 << 8) {
                encoded.extend_from_slice(&(a as u16).to_be_bytes());
            } else if a < 1 << 32 {
                encoded.extend_from_slice(&[0xff, 0xfe]);
                encoded.extend_from_slice(&(a as u32).to_be_bytes());
            } else {
                encoded.extend_from_slice(&[0xff, 0xff]);
                encoded.extend_from_slice(&a.to_be_bytes());
            }
            encoded.extend_from_slice(aad);
            self.absorb(&mut x, &encoded)?;
        }
        self.absorb(&mut x, plain)?;
        Ok(x)
    }

    /// Chains `data`, zero-padded to whole blocks, into the CBC-MAC state `x`.
    fn absorb(&self, x: &mut [u8; BLOCK], data: &[u8]) -> Result<(), Error> {
        for chunk in data.chunks(BLOCK) {
            for (xi, d) in x.iter_mut().zip(chunk) {
                *xi ^= d;
            }
            self.ecb.encrypt(x)?;
        }
        Ok(())
    }
}

/// Counter block `A_i`: flags `L - 1`, the nonce, `i` in the last `L` bytes.
fn counter(nonce: &[u8], i: u64) -> [u8; BLOCK] {
    let l = 15 - nonce.len();
    let mut a = [0u8; BLOCK];
    a[0] = (l - 1) as u8;
    a[1..1 + nonce.len()].copy_from_slice(nonce);
    // L is 2 to 8 bytes: the counter fits in the u64's low L bytes.
    a[BLOCK - l..].copy_from_slice(&i.to_be_bytes()[8 - l..]);
    a
}

/// Refuses a nonce, message or tag length CCM does not allow.
fn check(nonce: &[u8], len: usize, tag_len: usize) -> Result<(), Error> {
    if !(7..=13).contains(&nonce.len()) {
        return Err(InputError::IvLength {
            got: nonce.len(),
            expected: "7 to 13 (ccm nonce)",
        }
        .into());
    }
    if !TAG_LENGTHS.contains(&tag_len) {
        return Err(InputError::TagLength {
            got: tag_len,
            expected: "4, 6, 8, 10, 12, 14 or 16 (ccm)",
        }
        .into());
    }
    let l = 15 - nonce.len();
    if l < 8 && (len as u64) >> (8 * l) != 0 {
        return Err(InputError::TooLong {
            what: "ccm message with this nonce length",
            limit: (1u64 << (8 * l)) - 1,
        }
        .into());
    }
    Ok(())
}
