//! The sector cipher behind a `sectorcrypt_cipher` handle, in safe Rust: dm-crypt's
//! sectors (`aes-xts-plain64`, `aes-cbc-essiv:sha256`, ...) through the crypto crate's
//! [`SectorCipher`], the sector size given with each call.
//!
//! A [`SectorCipher`] is built for one sector size, and building one expands the key, so
//! [`Cipher`] keeps one per sector size it has been asked for (in practice one or two),
//! and its own copy of the key, in the crypto crate's secret memory ([`SecretBytes`]:
//! locked or `memfd_secret` pages, out of core dumps, wiped when the handle is freed), the
//! same memory the Python binding keeps its keys in, to build the next. Calls on one
//! handle may run from many threads at once: the list is locked only to find or add a
//! cipher, never while data is transformed.

use crate::status::{Failure, Status};
use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher, SectorLayout};
use sectorcrypt_crypto::secret::SecretBytes;
use std::sync::{Arc, Mutex, PoisonError};

/// Whether to encrypt or decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Plaintext to ciphertext.
    Encrypt,
    /// Ciphertext to plaintext.
    Decrypt,
}

/// A cipher string with its key.
pub struct Cipher {
    spec: CipherSpec,
    /// In secret memory for the handle's life, never on the heap.
    key: SecretBytes,
    large_iv: bool,
    built: Mutex<Vec<Arc<SectorCipher>>>,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher")
            .field("spec", &self.spec.to_string())
            .field("large_iv", &self.large_iv)
            .finish_non_exhaustive()
    }
}

impl Cipher {
    /// The cipher `spec` (a dm-crypt cipher string) with `key`; with `large_iv` the IV
    /// number counts sectors rather than 512-byte units (dm-crypt's `iv_large_sectors`).
    /// The key is checked now (its length; XTS halves that differ), by building the
    /// cipher for 512-byte sectors.
    pub fn new(spec: &str, key: &[u8], large_iv: bool) -> Result<Cipher, Failure> {
        let spec: CipherSpec = spec.parse()?;
        spec.check_key(key)?;
        let first = SectorCipher::new(spec, key, SectorLayout::new(512, large_iv)?)?;
        Ok(Cipher {
            spec,
            key: SecretBytes::from_slice(key),
            large_iv,
            built: Mutex::new(vec![Arc::new(first)]),
        })
    }

    /// Transforms `buf`, a whole number of `sector_size`-byte sectors, in place; the first
    /// sector has the IV number `first_sector` (in 512-byte units unless the cipher was
    /// made with `large_iv`, as dm-crypt counts).
    pub fn apply(
        &self,
        dir: Direction,
        buf: &mut [u8],
        first_sector: u64,
        sector_size: usize,
    ) -> Result<(), Failure> {
        let cipher = self.for_size(sector_size)?;
        if !buf.len().is_multiple_of(sector_size) {
            return Err(Failure::new(
                Status::ERR_LENGTH,
                format!(
                    "a buffer of {} bytes is not a whole number of {sector_size}-byte sectors",
                    buf.len()
                ),
            ));
        }
        match dir {
            Direction::Encrypt => cipher.encrypt(first_sector, buf)?,
            Direction::Decrypt => cipher.decrypt(first_sector, buf)?,
        }
        Ok(())
    }

    /// The cipher for `sector_size`-byte sectors, built on first use.
    fn for_size(&self, sector_size: usize) -> Result<Arc<SectorCipher>, Failure> {
        let found = |list: &[Arc<SectorCipher>]| {
            list.iter()
                .find(|c| c.layout().sector_size() == sector_size)
                .cloned()
        };
        // The list guards no invariant a panicking holder could break.
        if let Some(c) = found(&self.built.lock().unwrap_or_else(PoisonError::into_inner)) {
            return Ok(c);
        }
        let layout = SectorLayout::new(sector_size, self.large_iv)
            .map_err(|e| Failure::invalid(format!("sector size {sector_size}: {e}")))?;
        let made = Arc::new(SectorCipher::new(self.spec, &self.key, layout)?);
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(found(&built).unwrap_or_else(|| {
            built.push(made.clone());
            made
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags (`VmFlags`) and name of the mapping that holds `addr`, from
    /// /proc/self/smaps.
    fn mapping(addr: usize) -> (Vec<String>, String) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut name = String::new();
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                    name = line
                        .split_whitespace()
                        .skip(5)
                        .collect::<Vec<_>>()
                        .join(" ");
                    continue;
                }
            }
            if let (true, Some(flags)) = (inside, line.strip_prefix("VmFlags:")) {
                return (flags.split_whitespace().map(String::from).collect(), name);
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn the_key_lives_in_locked_secret_memory_not_on_the_heap() {
        let key: Vec<u8> = (100..164).collect();
        let c = Cipher::new("aes-xts-plain64", &key, false).unwrap();
        assert_eq!(
            &c.key[..],
            &key[..],
            "the handle keeps the key to build more"
        );
        let (flags, name) = mapping(c.key.as_ptr() as usize);
        let has = |f: &str| flags.iter().any(|x| x == f);
        assert!(
            !name.contains("[heap]") && has("dd"),
            "the key is in ordinary memory ({name:?}, flags {flags:?}), not secret memory"
        );
        let unlocked = sectorcrypt_crypto::secret::protection()
            == Some(sectorcrypt_crypto::secret::Protection::Unlocked);
        assert!(
            has("lo") || unlocked,
            "secret memory that could be locked is not ({name:?}, flags {flags:?})"
        );
    }

    #[test]
    fn one_cipher_per_sector_size_and_bad_sizes_refused() {
        let key: Vec<u8> = (0..64).collect();
        let c = Cipher::new("aes-xts-plain64", &key, false).unwrap();
        let mut a = vec![7u8; 8192];
        c.apply(Direction::Encrypt, &mut a, 8, 4096).unwrap();
        c.apply(Direction::Encrypt, &mut vec![7u8; 1024], 0, 512)
            .unwrap();
        assert_eq!(c.built.lock().unwrap().len(), 2);
        c.apply(Direction::Decrypt, &mut a, 8, 4096).unwrap();
        assert!(a.iter().all(|&b| b == 7));
        let bad = c.apply(Direction::Encrypt, &mut a, 0, 1000).unwrap_err();
        assert_eq!(bad.status, Status::ERR_INVALID_ARGUMENT, "{}", bad.detail);
        let bad = c
            .apply(Direction::Encrypt, &mut a[..600], 0, 512)
            .unwrap_err();
        assert_eq!(bad.status, Status::ERR_LENGTH, "{}", bad.detail);
    }
}
