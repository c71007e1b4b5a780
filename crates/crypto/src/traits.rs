//! Two small traits over the concrete mode types, so that a caller holding "some cipher"
//! (a command-line tool, a benchmark table) needs no per-type branches:
//! - [`Mode`]: a block or stream mode over a whole message with an IV (or none): AES ECB,
//!   CBC, CTR, XTS; GOST 28147-89 ECB, CNT, CFB, CBC; Magma ECB, CTR, CTR-ACPKM, OFB, CBC,
//!   CFB;
//! - [`Aead`]: authenticated encryption with associated data: AES-GCM and Magma-MGM.
//!
//! The traits take the IV as a slice and check its length (an [`InputError::IvLength`]
//! otherwise); each type's own methods, which take fixed-size arrays where the mode has a
//! fixed IV, stay the precise interface. Streaming types, MACs and sector ciphers have
//! interfaces of their own and are not covered.

use crate::error::InputError;
use crate::{aes, gost89, magma, Error};

/// A block or stream mode over one whole message.
pub trait Mode {
    /// The IV (or counter block, or XTS tweak) this mode takes.
    fn iv_len(&self) -> IvLen;
    /// Encrypts `buf` in place.
    fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error>;
    /// Decrypts `buf` in place.
    fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error>;
    /// Encrypts `src` into `dst` (same length).
    fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error>;
    /// Decrypts `src` into `dst` (same length).
    fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error>;

    /// Encrypts (`encrypt == true`) or decrypts `buf` in place.
    fn apply(&self, encrypt: bool, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        if encrypt {
            self.encrypt(iv, buf)
        } else {
            self.decrypt(iv, buf)
        }
    }
}

/// Authenticated encryption with associated data.
pub trait Aead {
    /// The nonce length in bytes, when the mode has one fixed length (GCM takes any
    /// non-zero length and reports 12, its recommended one).
    fn nonce_len(&self) -> usize;
    /// The full tag length in bytes.
    fn tag_len(&self) -> usize;
    /// Encrypts `buf` in place and writes the tag (its first `tag.len()` bytes, within the
    /// lengths the mode accepts) to `tag`.
    fn seal(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<(), Error>;
    /// Decrypts `buf` in place if `tag` verifies; otherwise
    /// [`Error::AuthenticationFailed`] and nothing unauthenticated is released (GCM zeroes
    /// `buf`; MGM checks the tag before decrypting and zeroes `buf`).
    fn open(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), Error>;
}

/// The IV a [`Mode`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IvLen {
    /// No IV (ECB): the IV must be empty.
    None,
    /// Exactly this many bytes.
    Exactly(usize),
    /// A non-zero multiple of this many bytes (Magma's OFB, CBC and CFB take a register
    /// of z blocks).
    Blocks(usize),
}

impl IvLen {
    /// What the rule accepts, in words (for messages).
    pub fn describe(self) -> &'static str {
        match self {
            IvLen::None => "none",
            IvLen::Exactly(4) => "4 bytes",
            IvLen::Exactly(8) => "8 bytes",
            IvLen::Exactly(16) => "16 bytes",
            IvLen::Exactly(_) => "a fixed length",
            IvLen::Blocks(_) => "a non-zero multiple of the block size",
        }
    }

    /// `Ok` when `len` bytes satisfy the rule.
    pub fn check(self, len: usize) -> Result<(), Error> {
        let ok = match self {
            IvLen::None => len == 0,
            IvLen::Exactly(n) => len == n,
            IvLen::Blocks(n) => len > 0 && len.is_multiple_of(n),
        };
        if ok {
            Ok(())
        } else {
            Err(InputError::IvLength {
                got: len,
                expected: self.describe(),
            }
            .into())
        }
    }
}

/// The signatures of the types' own methods, which the macros below call.
type InPlace<T> = fn(&T, &mut [u8]) -> Result<(), Error>;
type OutOfPlace<T> = fn(&T, &[u8], &mut [u8]) -> Result<(), Error>;
type InPlaceIv<T, const N: usize> = fn(&T, &[u8; N], &mut [u8]) -> Result<(), Error>;
type OutOfPlaceIv<T, const N: usize> = fn(&T, &[u8; N], &[u8], &mut [u8]) -> Result<(), Error>;

/// `iv` as a fixed-size array, or the error of [`IvLen::check`].
fn fixed<const N: usize>(iv: &[u8]) -> Result<&[u8; N], Error> {
    IvLen::Exactly(N).check(iv.len())?;
    Ok(iv.try_into().expect("length checked"))
}

/// [`Mode`] for a type whose methods take no IV.
///
/// The calls name the type's own methods through function pointers of their exact
/// signatures: were a type to lack one, the name would resolve to the trait's method (which
/// has another signature) and fail to compile, instead of recursing at run time.
macro_rules! mode_without_iv {
    ($($ty:ty),+) => {$(
        impl Mode for $ty {
            fn iv_len(&self) -> IvLen {
                IvLen::None
            }
            fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
                IvLen::None.check(iv.len())?;
                let own: InPlace<$ty> = <$ty>::encrypt;
                own(self, buf)
            }
            fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
                IvLen::None.check(iv.len())?;
                let own: InPlace<$ty> = <$ty>::decrypt;
                own(self, buf)
            }
            fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
                IvLen::None.check(iv.len())?;
                let own: OutOfPlace<$ty> = <$ty>::encrypt_to;
                own(self, src, dst)
            }
            fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
                IvLen::None.check(iv.len())?;
                let own: OutOfPlace<$ty> = <$ty>::decrypt_to;
                own(self, src, dst)
            }
        }
    )+};
}

/// [`Mode`] for a type whose methods take an IV of `$n` bytes as an array.
macro_rules! mode_with_fixed_iv {
    ($n:literal: $($ty:ty),+) => {$(
        impl Mode for $ty {
            fn iv_len(&self) -> IvLen {
                IvLen::Exactly($n)
            }
            fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
                let own: InPlaceIv<$ty, $n> = <$ty>::encrypt;
                own(self, fixed::<$n>(iv)?, buf)
            }
            fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
                let own: InPlaceIv<$ty, $n> = <$ty>::decrypt;
                own(self, fixed::<$n>(iv)?, buf)
            }
            fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
                let own: OutOfPlaceIv<$ty, $n> = <$ty>::encrypt_to;
                own(self, fixed::<$n>(iv)?, src, dst)
            }
            fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
                let own: OutOfPlaceIv<$ty, $n> = <$ty>::decrypt_to;
                own(self, fixed::<$n>(iv)?, src, dst)
            }
        }
    )+};
}

/// [`Mode`] for a type whose methods take a register of whole blocks as a slice (they
/// check it themselves). Their signatures equal the trait's, so the function-pointer check
/// of the other macros cannot tell them apart; the round-trip test below covers each type.
macro_rules! mode_with_register_iv {
    ($($ty:ty),+) => {$(
        impl Mode for $ty {
            fn iv_len(&self) -> IvLen {
                IvLen::Blocks(magma::BLOCK)
            }
            fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
                <$ty>::encrypt(self, iv, buf)
            }
            fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
                <$ty>::decrypt(self, iv, buf)
            }
            fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
                <$ty>::encrypt_to(self, iv, src, dst)
            }
            fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
                <$ty>::decrypt_to(self, iv, src, dst)
            }
        }
    )+};
}

mode_without_iv!(aes::Ecb, gost89::Ecb, magma::Ecb);
mode_with_fixed_iv!(16: aes::Cbc, aes::Xts);
mode_with_fixed_iv!(8: gost89::Cnt, gost89::Cfb, gost89::Cbc);
mode_with_fixed_iv!(4: magma::Ctr, magma::CtrAcpkm);
mode_with_register_iv!(magma::Ofb, magma::Cbc, magma::Cfb);

/// CTR encryption and decryption are the same keystream XOR, from the IV's first block.
impl Mode for aes::Ctr {
    fn iv_len(&self) -> IvLen {
        IvLen::Exactly(aes::BLOCK)
    }
    fn encrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        self.apply_keystream(fixed::<16>(iv)?, 0, buf);
        Ok(())
    }
    fn decrypt(&self, iv: &[u8], buf: &mut [u8]) -> Result<(), Error> {
        Mode::encrypt(self, iv, buf)
    }
    fn encrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        self.apply_keystream_to(fixed::<16>(iv)?, 0, src, dst)
    }
    fn decrypt_to(&self, iv: &[u8], src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        Mode::encrypt_to(self, iv, src, dst)
    }
}

impl Aead for aes::Gcm {
    fn nonce_len(&self) -> usize {
        12
    }
    fn tag_len(&self) -> usize {
        16
    }
    /// `tag`: 12 to 16 bytes (shorter tags only through [`aes::Gcm::seal_short_tag`]).
    fn seal(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<(), Error> {
        if !(12..=16).contains(&tag.len()) {
            return Err(InputError::TagLength {
                got: tag.len(),
                expected: "12 to 16 bytes",
            }
            .into());
        }
        let full = aes::Gcm::seal(self, nonce, aad, buf)?;
        tag.copy_from_slice(&full[..tag.len()]);
        Ok(())
    }
    fn open(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        aes::Gcm::open(self, nonce, aad, buf, tag)
    }
}

impl Aead for magma::Mgm {
    fn nonce_len(&self) -> usize {
        magma::BLOCK
    }
    fn tag_len(&self) -> usize {
        magma::BLOCK
    }
    fn seal(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<(), Error> {
        magma::Mgm::seal(self, fixed::<8>(nonce)?, aad, buf, tag)
    }
    fn open(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        magma::Mgm::open(self, fixed::<8>(nonce)?, aad, buf, tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mode through `dyn Mode` equals its own methods, round-trips, and refuses an
    /// IV of the wrong length without touching the buffer.
    #[test]
    fn modes_through_the_trait_equal_their_own_methods() {
        let key: Vec<u8> = (0..64u8).collect();
        let gost_key = &key[..32];
        let sbox = gost89::Sbox::CryptoProA;
        let modes: Vec<(Box<dyn Mode>, Vec<u8>)> = vec![
            (Box::new(aes::Ecb::new(&key[..16]).unwrap()), vec![]),
            (Box::new(aes::Cbc::new(&key[..24]).unwrap()), vec![3; 16]),
            (Box::new(aes::Ctr::new(&key[..32]).unwrap()), vec![4; 16]),
            (Box::new(aes::Xts::new(&key[..64]).unwrap()), vec![5; 16]),
            (
                Box::new(gost89::Ecb::new(gost_key, sbox, false).unwrap()),
                vec![],
            ),
            (
                Box::new(gost89::Cnt::new(gost_key, sbox, true).unwrap()),
                vec![6; 8],
            ),
            (
                Box::new(gost89::Cfb::new(gost_key, sbox, true).unwrap()),
                vec![7; 8],
            ),
            (
                Box::new(gost89::Cbc::new(gost_key, sbox, false).unwrap()),
                vec![8; 8],
            ),
            (Box::new(magma::Ecb::new(gost_key).unwrap()), vec![]),
            (Box::new(magma::Ctr::new(gost_key).unwrap()), vec![9; 4]),
            (
                Box::new(magma::CtrAcpkm::new(gost_key, 16).unwrap()),
                vec![10; 4],
            ),
            (Box::new(magma::Ofb::new(gost_key).unwrap()), vec![11; 16]),
            (Box::new(magma::Cbc::new(gost_key).unwrap()), vec![12; 16]),
            (Box::new(magma::Cfb::new(gost_key).unwrap()), vec![13; 8]),
        ];
        let plain: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        for (i, (m, iv)) in modes.iter().enumerate() {
            m.iv_len().check(iv.len()).unwrap();
            let mut buf = plain.clone();
            m.apply(true, iv, &mut buf).unwrap();
            assert_ne!(buf, plain, "mode {i} changed nothing");
            let mut out = vec![0u8; plain.len()];
            m.encrypt_to(iv, &plain, &mut out).unwrap();
            assert_eq!(out, buf, "mode {i}: in place and out of place differ");
            let mut back = vec![0u8; plain.len()];
            m.decrypt_to(iv, &buf, &mut back).unwrap();
            assert_eq!(back, plain, "mode {i}: decrypt_to");
            m.apply(false, iv, &mut buf).unwrap();
            assert_eq!(buf, plain, "mode {i}: decrypt");
            let bad = [0u8; 5];
            let mut untouched = plain.clone();
            assert!(
                matches!(
                    m.encrypt(&bad, &mut untouched),
                    Err(Error::Input(InputError::IvLength { got: 5, .. }))
                ),
                "mode {i} took a 5-byte iv"
            );
            assert_eq!(untouched, plain);
        }
        // The trait calls the types' own methods: one case checked against them directly.
        let cbc = aes::Cbc::new(&key[..16]).unwrap();
        let (mut a, mut b) = (plain.clone(), plain.clone());
        cbc.encrypt(&[3; 16], &mut a).unwrap();
        Mode::encrypt(&cbc, &[3; 16], &mut b).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn aeads_through_the_trait_seal_open_and_refuse_a_bad_tag() {
        let key = [0x42u8; 32];
        let aeads: Vec<Box<dyn Aead>> = vec![
            Box::new(aes::Gcm::new(&key).unwrap()),
            Box::new(magma::Mgm::new(&key).unwrap()),
        ];
        for a in &aeads {
            let nonce = vec![0x11; a.nonce_len()];
            let plain = b"sectors and their tags".to_vec();
            let mut buf = plain.clone();
            let mut tag = vec![0u8; a.tag_len()];
            a.seal(&nonce, b"aad", &mut buf, &mut tag).unwrap();
            assert_ne!(buf, plain);
            let sealed = buf.clone();
            a.open(&nonce, b"aad", &mut buf, &tag).unwrap();
            assert_eq!(buf, plain);
            let mut forged = sealed.clone();
            tag[0] ^= 1;
            assert_eq!(
                a.open(&nonce, b"aad", &mut forged, &tag),
                Err(Error::AuthenticationFailed)
            );
            assert_ne!(forged, plain, "unauthenticated plaintext released");
        }
        // GCM through the trait equals its own seal.
        let gcm = aes::Gcm::new(&key).unwrap();
        let (mut a, mut b) = (vec![1u8; 40], vec![1u8; 40]);
        let want = gcm.seal(&[2; 12], b"", &mut a).unwrap();
        let mut got = [0u8; 16];
        Aead::seal(&gcm, &[2; 12], b"", &mut b, &mut got).unwrap();
        assert_eq!((a, want), (b, got));
    }
}
