//! The hashes volume metadata names (`sha1`, `sha256`, `sha512`), over the RustCrypto
//! crates: plain digests (anti-forensic diffusion, LUKS2 header checksums) and PBKDF2-HMAC.

use crate::error::{Error, Result};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

/// A hash named in a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlg {
    /// SHA-1 (LUKS1 volumes of old cryptsetup versions; qemu-img's LUKS1 default).
    Sha1,
    /// SHA-256 (cryptsetup's default).
    Sha256,
    /// SHA-512.
    Sha512,
}

impl HashAlg {
    /// Every supported hash.
    pub const ALL: [HashAlg; 3] = [HashAlg::Sha1, HashAlg::Sha256, HashAlg::Sha512];

    /// Parses a name as cryptsetup writes it (case-insensitive).
    pub fn parse(name: &str) -> Result<HashAlg> {
        let lower = name.to_ascii_lowercase();
        HashAlg::ALL
            .into_iter()
            .find(|h| h.name() == lower)
            .ok_or_else(|| {
                let names: Vec<&str> = HashAlg::ALL.iter().map(|h| h.name()).collect();
                Error::unsupported(format!(
                    "hash {name:?} is not supported (supported: {})",
                    names.join(", ")
                ))
            })
    }

    /// The name cryptsetup writes.
    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Sha1 => "sha1",
            HashAlg::Sha256 => "sha256",
            HashAlg::Sha512 => "sha512",
        }
    }

    /// Digest length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            HashAlg::Sha1 => 20,
            HashAlg::Sha256 => 32,
            HashAlg::Sha512 => 64,
        }
    }

    /// The digest of the concatenation of `parts`.
    pub fn digest(self, parts: &[&[u8]]) -> Vec<u8> {
        fn run<D: Digest>(parts: &[&[u8]]) -> Vec<u8> {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            d.finalize().to_vec()
        }
        match self {
            HashAlg::Sha1 => run::<Sha1>(parts),
            HashAlg::Sha256 => run::<Sha256>(parts),
            HashAlg::Sha512 => run::<Sha512>(parts),
        }
    }

    /// The digest of `data` into `out` (of [`HashAlg::output_len`] bytes), allocating
    /// nothing: for many small blocks.
    pub fn digest_into(self, data: &[u8], out: &mut [u8]) {
        match self {
            HashAlg::Sha1 => out.copy_from_slice(&Sha1::digest(data)),
            HashAlg::Sha256 => out.copy_from_slice(&Sha256::digest(data)),
            HashAlg::Sha512 => out.copy_from_slice(&Sha512::digest(data)),
        }
    }

    /// PBKDF2-HMAC (RFC 8018) with this hash, filling `out`.
    pub fn pbkdf2(self, password: &[u8], salt: &[u8], iterations: u32, out: &mut [u8]) {
        match self {
            HashAlg::Sha1 => pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, out),
            HashAlg::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, out),
            HashAlg::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_sha1_matches_rfc6070() {
        // RFC 6070 test vector 2: "password" / "salt", 2 iterations, 20 bytes.
        let mut out = [0u8; 20];
        HashAlg::Sha1.pbkdf2(b"password", b"salt", 2, &mut out);
        assert_eq!(hex::encode(out), "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957");
    }

    #[test]
    fn sha256_of_abc() {
        // FIPS 180-2 appendix B.1.
        assert_eq!(
            hex::encode(HashAlg::Sha256.digest(&[b"a", b"bc"])),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
