//! The hashes volume metadata names (`sha1`, `sha256`, `sha512`, and `whirlpool`,
//! `ripemd160` and `streebog512` as cryptsetup writes them for LUKS volumes made with the
//! kernel's or a crypto library's hashes), over the RustCrypto crates: plain digests
//! (anti-forensic diffusion, LUKS2 header checksums) and PBKDF2-HMAC. The last three run
//! on the crypto crate's PBKDF2 (the one VeraCrypt headers use), always optimised.

use crate::error::{Error, Result};
use sectorcrypt_crypto::pbkdf::Prf;
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
    /// Whirlpool.
    Whirlpool,
    /// RIPEMD-160.
    Ripemd160,
    /// Streebog-512 (GOST R 34.11-2012); cryptsetup's libgcrypt backend calls it
    /// `stribog512`, which is read too.
    Streebog512,
}

impl HashAlg {
    /// Every supported hash.
    pub const ALL: [HashAlg; 6] = [
        HashAlg::Sha1,
        HashAlg::Sha256,
        HashAlg::Sha512,
        HashAlg::Whirlpool,
        HashAlg::Ripemd160,
        HashAlg::Streebog512,
    ];

    /// Parses a name as cryptsetup writes it (case-insensitive).
    pub fn parse(name: &str) -> Result<HashAlg> {
        let lower = name.to_ascii_lowercase();
        let lower = if lower == "stribog512" {
            "streebog512".to_string()
        } else {
            lower
        };
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
            HashAlg::Whirlpool => "whirlpool",
            HashAlg::Ripemd160 => "ripemd160",
            HashAlg::Streebog512 => "streebog512",
        }
    }

    /// Digest length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            HashAlg::Sha1 | HashAlg::Ripemd160 => 20,
            HashAlg::Sha256 => 32,
            HashAlg::Sha512 | HashAlg::Whirlpool | HashAlg::Streebog512 => 64,
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
        let library = |prf: Prf| {
            let mut out = vec![0u8; prf.output_len()];
            prf.digest_into(parts, &mut out);
            out
        };
        match self {
            HashAlg::Sha1 => run::<Sha1>(parts),
            HashAlg::Sha256 => run::<Sha256>(parts),
            HashAlg::Sha512 => run::<Sha512>(parts),
            HashAlg::Whirlpool => library(Prf::Whirlpool),
            HashAlg::Ripemd160 => library(Prf::Ripemd160),
            HashAlg::Streebog512 => library(Prf::Streebog512),
        }
    }

    /// The digest of `data` into `out` (of [`HashAlg::output_len`] bytes), allocating
    /// nothing: for many small blocks.
    pub fn digest_into(self, data: &[u8], out: &mut [u8]) {
        match self {
            HashAlg::Whirlpool => Prf::Whirlpool.digest_into(&[data], out),
            HashAlg::Ripemd160 => Prf::Ripemd160.digest_into(&[data], out),
            HashAlg::Streebog512 => Prf::Streebog512.digest_into(&[data], out),
            HashAlg::Sha1 => out.copy_from_slice(&Sha1::digest(data)),
            HashAlg::Sha256 => out.copy_from_slice(&Sha256::digest(data)),
            HashAlg::Sha512 => out.copy_from_slice(&Sha512::digest(data)),
        }
    }

    /// PBKDF2-HMAC (RFC 8018) with this hash, filling `out`.
    pub fn pbkdf2(self, password: &[u8], salt: &[u8], iterations: u32, out: &mut [u8]) {
        match self {
            HashAlg::Whirlpool => Prf::Whirlpool.pbkdf2(password, salt, iterations, out),
            HashAlg::Ripemd160 => Prf::Ripemd160.pbkdf2(password, salt, iterations, out),
            HashAlg::Streebog512 => Prf::Streebog512.pbkdf2(password, salt, iterations, out),
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

    /// The added hashes against their published vectors: Whirlpool of "abc" (the NESSIE
    /// vector set), RIPEMD-160 of "abc" (the designers' page), Streebog-512 of GOST R
    /// 34.11-2012's example M1 (its digest, written in the standard as the reversed
    /// byte string); and the names, `stribog512` read as `streebog512`.
    #[test]
    fn library_hashes_match_their_vectors() {
        assert_eq!(
            hex::encode(HashAlg::Whirlpool.digest(&[b"ab", b"c"])),
            "4e2448a4c6f486bb16b6562c73b4020bf3043e3a731bce721ae1b303d97e6d4c\
             7181eebdb6c57e277d0e34957114cbd6c797fc9d95d8b582d225292076d4eef5"
        );
        let mut out = [0u8; 20];
        HashAlg::Ripemd160.digest_into(b"abc", &mut out);
        assert_eq!(hex::encode(out), "8eb208f7e05d987a9b044a8e98c6b087f15a0bfc");
        let m1 = b"012345678901234567890123456789012345678901234567890123456789012";
        let mut want = hex::decode(
            "486f64c1917879417fef082b3381a4e211c324f074654c38823a7b76f830ad00\
             fa1fbae42b1285c0352f227524bc9ab16254288dd6863dccd5b9f54a1ad0541b",
        )
        .unwrap();
        want.reverse();
        assert_eq!(HashAlg::Streebog512.digest(&[m1]), want);
        for (name, h) in [
            ("whirlpool", HashAlg::Whirlpool),
            ("RIPEMD160", HashAlg::Ripemd160),
            ("streebog512", HashAlg::Streebog512),
            ("stribog512", HashAlg::Streebog512),
        ] {
            assert_eq!(HashAlg::parse(name).unwrap(), h, "{name}");
        }
        assert_eq!(HashAlg::Streebog512.name(), "streebog512");
        let err = HashAlg::parse("md5").unwrap_err().to_string();
        assert!(err.contains("whirlpool, ripemd160, streebog512"), "{err}");
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
