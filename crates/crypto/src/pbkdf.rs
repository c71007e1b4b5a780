//! PBKDF2-HMAC (RFC 8018) over the hashes VeraCrypt and TrueCrypt headers use: SHA-512,
//! SHA-256, Whirlpool, RIPEMD-160, Streebog-512, BLAKE2s-256 and (TrueCrypt 4.3 and
//! older) SHA-1 (the RustCrypto crates).
//!
//! It lives in this crate, which is always built optimised, because a VeraCrypt header
//! search runs PBKDF2 for hundreds of thousands of iterations per hash: the generic HMAC
//! and PBKDF2 code is compiled where it is instantiated, and unoptimised it is several
//! times slower.

use blake2::Blake2s256;
use hmac::{Hmac, SimpleHmac};
use ripemd::Ripemd160;
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use streebog::Streebog512;
use whirlpool::Whirlpool;

/// A PBKDF2 hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prf {
    /// SHA-512.
    Sha512,
    /// SHA-256.
    Sha256,
    /// Whirlpool.
    Whirlpool,
    /// RIPEMD-160.
    Ripemd160,
    /// Streebog-512 (GOST R 34.11-2012).
    Streebog512,
    /// BLAKE2s-256.
    Blake2s256,
    /// SHA-1 (TrueCrypt 4.3 and older only).
    Sha1,
}

impl Prf {
    /// The name cryptsetup prints (`sha512`, `stribog512`, `blake2s-256`).
    pub fn name(self) -> &'static str {
        match self {
            Prf::Sha512 => "sha512",
            Prf::Sha256 => "sha256",
            Prf::Whirlpool => "whirlpool",
            Prf::Ripemd160 => "ripemd160",
            Prf::Streebog512 => "stribog512",
            Prf::Blake2s256 => "blake2s-256",
            Prf::Sha1 => "sha1",
        }
    }

    /// Bytes of this hash's digest.
    pub fn output_len(self) -> usize {
        match self {
            Prf::Sha512 | Prf::Whirlpool | Prf::Streebog512 => 64,
            Prf::Sha256 | Prf::Blake2s256 => 32,
            Prf::Ripemd160 | Prf::Sha1 => 20,
        }
    }

    /// The plain digest of the concatenation of `parts` into `out` (of
    /// [`Prf::output_len`] bytes): the anti-forensic diffusion of LUKS volumes made with
    /// these hashes.
    pub fn digest_into(self, parts: &[&[u8]], out: &mut [u8]) {
        fn run<D: sha2::Digest>(parts: &[&[u8]], out: &mut [u8]) {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            out.copy_from_slice(&d.finalize());
        }
        match self {
            Prf::Sha512 => run::<Sha512>(parts, out),
            Prf::Sha256 => run::<Sha256>(parts, out),
            Prf::Whirlpool => run::<Whirlpool>(parts, out),
            Prf::Ripemd160 => run::<Ripemd160>(parts, out),
            Prf::Streebog512 => run::<Streebog512>(parts, out),
            Prf::Blake2s256 => run::<Blake2s256>(parts, out),
            Prf::Sha1 => run::<Sha1>(parts, out),
        }
    }

    /// PBKDF2-HMAC with this hash: fills `out` from `password`, `salt` and `rounds`
    /// iterations.
    pub fn pbkdf2(self, password: &[u8], salt: &[u8], rounds: u32, out: &mut [u8]) {
        use pbkdf2::pbkdf2;
        // HMAC takes keys of any length, so these cannot fail.
        let r = match self {
            Prf::Sha512 => pbkdf2::<Hmac<Sha512>>(password, salt, rounds, out),
            Prf::Sha256 => pbkdf2::<Hmac<Sha256>>(password, salt, rounds, out),
            Prf::Whirlpool => pbkdf2::<Hmac<Whirlpool>>(password, salt, rounds, out),
            Prf::Ripemd160 => pbkdf2::<Hmac<Ripemd160>>(password, salt, rounds, out),
            Prf::Streebog512 => pbkdf2::<SimpleHmac<Streebog512>>(password, salt, rounds, out),
            Prf::Blake2s256 => pbkdf2::<SimpleHmac<Blake2s256>>(password, salt, rounds, out),
            Prf::Sha1 => pbkdf2::<Hmac<Sha1>>(password, salt, rounds, out),
        };
        debug_assert!(r.is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7914 section 11: PBKDF2-HMAC-SHA-256, "passwd" / "salt", 1 iteration.
    #[test]
    fn sha256_matches_rfc7914() {
        let mut out = [0u8; 16];
        Prf::Sha256.pbkdf2(b"passwd", b"salt", 1, &mut out);
        assert_eq!(hex::encode(out), "55ac046e56e3089fec1691c22544b605");
    }

    /// RFC 6070 section 2: PBKDF2-HMAC-SHA1, "password" / "salt", 2 iterations.
    #[test]
    fn sha1_matches_rfc6070() {
        let mut out = [0u8; 20];
        Prf::Sha1.pbkdf2(b"password", b"salt", 2, &mut out);
        assert_eq!(hex::encode(out), "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957");
    }
}
