//! ECB, CBC and CTR over one message.

use super::{split, whole_blocks, AesKey, Direction};
use crate::buf::InOut;
use crate::{Backend, Error};

/// Generates the four entry points (in place / out of place, encrypt / decrypt) of a mode
/// whose work is `self.run(extra args, InOut, Direction)`.
macro_rules! entry_points {
    ($($arg:ident: $ty:ty),*) => {
        /// Encrypts `buf` in place.
        pub fn encrypt(&self, $($arg: $ty,)* buf: &mut [u8]) -> Result<(), Error> {
            self.run($($arg,)* InOut::InPlace(buf), Direction::Encrypt)
        }
        /// Encrypts `src` into `dst` (same length).
        pub fn encrypt_to(&self, $($arg: $ty,)* src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
            self.run($($arg,)* split(src, dst)?, Direction::Encrypt)
        }
        /// Decrypts `buf` in place.
        pub fn decrypt(&self, $($arg: $ty,)* buf: &mut [u8]) -> Result<(), Error> {
            self.run($($arg,)* InOut::InPlace(buf), Direction::Decrypt)
        }
        /// Decrypts `src` into `dst` (same length).
        pub fn decrypt_to(&self, $($arg: $ty,)* src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
            self.run($($arg,)* split(src, dst)?, Direction::Decrypt)
        }
    };
}
pub(crate) use entry_points;

/// Defines a mode type over one AES key: the struct, `new` (the selected backend),
/// `with_backend` and `backend`.
macro_rules! one_key_mode {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            key: AesKey,
        }

        impl $name {
            /// A 16-, 24- or 32-byte key on the selected backend.
            pub fn new(key: &[u8]) -> Result<$name, Error> {
                Ok($name {
                    key: AesKey::new(key, None)?,
                })
            }

            /// A key on a named backend (tests and benchmarks).
            pub fn with_backend(key: &[u8], backend: Backend) -> Result<$name, Error> {
                Ok($name {
                    key: AesKey::new(key, Some(backend))?,
                })
            }

            /// The backend this key runs on.
            pub fn backend(&self) -> Backend {
                self.key.backend()
            }
        }
    };
}

one_key_mode! {
    /// AES in ECB mode (whole blocks). Only for building other modes and for interop: ECB leaks
    /// equal plaintext blocks.
    Ecb
}

impl Ecb {
    fn run(&self, data: InOut<'_>, dir: Direction) -> Result<(), Error> {
        whole_blocks(data.len())?;
        match dir {
            Direction::Encrypt => self.key.k().ecb_encrypt(data),
            Direction::Decrypt => self.key.k().ecb_decrypt(data),
        }
        Ok(())
    }

    entry_points!();
}

one_key_mode! {
    /// AES in CBC mode over one message of whole blocks (no padding).
    Cbc
}

impl Cbc {
    fn run(&self, iv: &[u8; 16], data: InOut<'_>, dir: Direction) -> Result<(), Error> {
        whole_blocks(data.len())?;
        let mut chain = *iv;
        match dir {
            Direction::Encrypt => self.key.k().cbc_encrypt(&mut chain, data),
            Direction::Decrypt => self.key.k().cbc_decrypt(&mut chain, data),
        }
        Ok(())
    }

    entry_points!(iv: &[u8; 16]);
}

one_key_mode! {
    /// AES in CTR mode: a 128-bit big-endian counter starting at the IV, wrapping at 2^128, any
    /// length, with random access into the keystream at a byte offset.
    Ctr
}

impl Ctr {
    /// XORs `buf` with the keystream that starts `offset` bytes after the IV's first block.
    pub fn apply_keystream(&self, iv: &[u8; 16], offset: u64, buf: &mut [u8]) {
        self.apply(iv, offset, InOut::InPlace(buf));
    }

    /// XORs `src` with the keystream at `offset` into `dst` (same length).
    pub fn apply_keystream_to(
        &self,
        iv: &[u8; 16],
        offset: u64,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), Error> {
        self.apply(iv, offset, split(src, dst)?);
        Ok(())
    }

    fn apply(&self, iv: &[u8; 16], offset: u64, data: InOut<'_>) {
        let k = self.key.k();
        let mut counter = u128::from_be_bytes(*iv).wrapping_add((offset / 16) as u128);
        let skip = (offset % 16) as usize;
        let mut rest = data;
        if skip != 0 {
            // A partial first block: one keystream block, of which the tail is used.
            let n = (16 - skip).min(rest.len());
            let (mut first, tail) = rest.split_at(n);
            let mut block = [0u8; 16];
            first.load(0, &mut block[skip..skip + n]);
            k.ctr(&mut counter, InOut::InPlace(&mut block));
            first.store(0, &block[skip..skip + n]);
            rest = tail;
        }
        let whole = rest.len() / 16 * 16;
        let (body, mut tail) = rest.split_at(whole);
        k.ctr(&mut counter, body);
        if !tail.is_empty() {
            let n = tail.len();
            let mut block = [0u8; 16];
            tail.load(0, &mut block[..n]);
            k.ctr(&mut counter, InOut::InPlace(&mut block));
            tail.store(0, &block[..n]);
        }
    }
}
