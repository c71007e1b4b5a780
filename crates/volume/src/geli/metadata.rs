//! GELI's on-disk metadata: the 511 bytes at the start of the provider's last sector,
//! little-endian, ending in an MD5 of the bytes before it. Decoding checks the magic, the
//! version and the MD5 only; what the fields mean for the data (algorithms, key lengths)
//! is judged where they are used, so that `dump` still shows an unusual header.
//!
//! The layout and the decoders are FreeBSD's `sys/geom/eli/g_eli.h`
//! (`struct g_eli_metadata`, `eli_metadata_encode`, `eli_metadata_decode_v0`,
//! `eli_metadata_decode_v1v2v3v4v5v6v7`); version 0 lacks the `md_aalgo` field.

use crate::error::{Error, Result};
use md5::{Digest, Md5};

/// `G_ELI_MAGIC`, a C string in a 16-byte field.
pub const MAGIC: &[u8; 9] = b"GEOM::ELI";
/// `G_ELI_VERSION`: the newest version, the one new providers get.
pub const VERSION: u32 = 7;
/// `G_ELI_SALTLEN`.
pub const SALT_LEN: usize = 64;
/// `G_ELI_MKEYLEN`: IV key (64) || data key (64) || HMAC-SHA512 (64).
pub const MKEY_LEN: usize = 192;
/// `G_ELI_MAXMKEYS`.
pub const MAX_MKEYS: usize = 2;
/// Bytes the encoded metadata takes (the MD5 included): the rest of its sector is zero.
pub const ENCODED_LEN: usize = 511;

/// On-disk flags (`g_eli.h`, `G_ELI_FLAG_*`).
pub mod flags {
    /// `ONETIME`: random keys, no metadata kept.
    pub const ONETIME: u32 = 0x1;
    /// `BOOT`: ask for the passphrase before mounting root (`geli init -b`).
    pub const BOOT: u32 = 0x2;
    /// `WO_DETACH`: detach on last close after writing.
    pub const WO_DETACH: u32 = 0x4;
    /// `RW_DETACH`: detach on last close (`geli attach -d`).
    pub const RW_DETACH: u32 = 0x8;
    /// `AUTH`: data authentication (`geli init -a`).
    pub const AUTH: u32 = 0x10;
    /// `RO`: read-only provider.
    pub const RO: u32 = 0x20;
    /// `NODELETE`: BIO_DELETE is not passed down (`geli init -T`).
    pub const NODELETE: u32 = 0x40;
    /// `GELIBOOT`: the loader may attach it (`geli init -g`).
    pub const GELIBOOT: u32 = 0x80;
    /// `GELIDISPLAYPASS`: the loader shows the passphrase length (`geli configure -d`).
    pub const GELIDISPLAYPASS: u32 = 0x100;
    /// `AUTORESIZE`: metadata follows provider growth (set by `geli init` unless `-R`).
    pub const AUTORESIZE: u32 = 0x200;
    /// Names of the flags, for `dump`.
    pub const NAMES: [(u32, &str); 10] = [
        (ONETIME, "ONETIME"),
        (BOOT, "BOOT"),
        (WO_DETACH, "W-DETACH"),
        (RW_DETACH, "RW-DETACH"),
        (AUTH, "AUTH"),
        (RO, "READ-ONLY"),
        (NODELETE, "NODELETE"),
        (GELIBOOT, "GELIBOOT"),
        (GELIDISPLAYPASS, "GELIDISPLAYPASS"),
        (AUTORESIZE, "AUTORESIZE"),
    ];
}

/// Algorithm numbers (FreeBSD `sys/opencrypto/cryptodev.h`, `CRYPTO_*`; GRUB's
/// `grub-core/disk/geli.c` lists the same numbers).
pub mod algo {
    /// `CRYPTO_3DES_CBC`.
    pub const DES3_CBC: u16 = 2;
    /// `CRYPTO_BLF_CBC`.
    pub const BLOWFISH_CBC: u16 = 3;
    /// `CRYPTO_MD5_HMAC`.
    pub const HMAC_MD5: u16 = 6;
    /// `CRYPTO_SHA1_HMAC`.
    pub const HMAC_SHA1: u16 = 7;
    /// `CRYPTO_RIPEMD160_HMAC`.
    pub const HMAC_RIPEMD160: u16 = 8;
    /// `CRYPTO_AES_CBC`.
    pub const AES_CBC: u16 = 11;
    /// `CRYPTO_NULL_CBC`.
    pub const NULL_CBC: u16 = 16;
    /// `CRYPTO_SHA2_256_HMAC`.
    pub const HMAC_SHA256: u16 = 18;
    /// `CRYPTO_SHA2_384_HMAC`.
    pub const HMAC_SHA384: u16 = 19;
    /// `CRYPTO_SHA2_512_HMAC`.
    pub const HMAC_SHA512: u16 = 20;
    /// `CRYPTO_CAMELLIA_CBC`.
    pub const CAMELLIA_CBC: u16 = 21;
    /// `CRYPTO_AES_XTS`.
    pub const AES_XTS: u16 = 22;

    /// The encryption algorithms implemented here, by the names [`encryption_by_name`]
    /// takes.
    pub const ENCRYPTION_NAMES: &str = "aes-xts, aes-cbc, camellia-cbc, null";

    /// The authentication algorithms implemented here, by the names
    /// [`authentication_by_name`] takes.
    pub const AUTHENTICATION_NAMES: &str =
        "hmac-sha256, hmac-sha1, hmac-ripemd160, hmac-sha384, hmac-sha512";

    /// The implemented encryption algorithm `name` stands for: geli's names
    /// (`g_eli_str2ealgo`, any case) and the cipher strings that mean the same here
    /// (`aes-xts-plain64`); `None` for any other name.
    pub fn encryption_by_name(name: &str) -> Option<u16> {
        match name.to_ascii_lowercase().as_str() {
            "aes" | "aes-xts" | "aes-xts-plain64" => Some(AES_XTS),
            "aes-cbc" => Some(AES_CBC),
            "camellia-cbc" | "camellia" => Some(CAMELLIA_CBC),
            "null" | "null-cbc" => Some(NULL_CBC),
            _ => None,
        }
    }

    /// The implemented authentication algorithm `name` stands for: `hmac-sha256` or
    /// geli's own `HMAC/SHA256` (`g_eli_str2aalgo`), any case; `None` for any other name.
    pub fn authentication_by_name(name: &str) -> Option<u16> {
        let lower = name.to_ascii_lowercase();
        let hash = lower
            .strip_prefix("hmac-")
            .or_else(|| lower.strip_prefix("hmac/"))?;
        match hash {
            "sha1" => Some(HMAC_SHA1),
            "ripemd160" => Some(HMAC_RIPEMD160),
            "sha256" => Some(HMAC_SHA256),
            "sha384" => Some(HMAC_SHA384),
            "sha512" => Some(HMAC_SHA512),
            _ => None,
        }
    }

    /// geli's own name of an algorithm (`g_eli_algo2str`).
    pub fn name(a: u16) -> &'static str {
        match a {
            NULL_CBC => "NULL",
            AES_CBC => "AES-CBC",
            AES_XTS => "AES-XTS",
            BLOWFISH_CBC => "Blowfish-CBC",
            CAMELLIA_CBC => "CAMELLIA-CBC",
            DES3_CBC => "3DES-CBC",
            HMAC_MD5 => "HMAC/MD5",
            HMAC_SHA1 => "HMAC/SHA1",
            HMAC_RIPEMD160 => "HMAC/RIPEMD160",
            HMAC_SHA256 => "HMAC/SHA256",
            HMAC_SHA384 => "HMAC/SHA384",
            HMAC_SHA512 => "HMAC/SHA512",
            _ => "unknown",
        }
    }
}

/// The decoded metadata (`struct g_eli_metadata`). `Debug` leaves out the encrypted
/// master keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Metadata {
    /// `md_version`.
    pub version: u32,
    /// `md_flags`.
    pub flags: u32,
    /// `md_ealgo`.
    pub ealgo: u16,
    /// `md_keylen`, in bits.
    pub keylen: u16,
    /// `md_aalgo` (0 in version 0, which has no such field).
    pub aalgo: u16,
    /// `md_provsize`: bytes of the provider.
    pub provsize: u64,
    /// `md_sectorsize`: bytes per sector of the decrypted provider.
    pub sectorsize: u32,
    /// `md_keys`: bit `n` set when master-key slot `n` is in use.
    pub keys: u8,
    /// `md_iterations`: PBKDF2 iterations, 0 for salt || passphrase, -1 for keyfiles only.
    pub iterations: i32,
    /// `md_salt`.
    pub salt: [u8; SALT_LEN],
    /// `md_mkeys`: the encrypted master-key slots.
    pub mkeys: [[u8; MKEY_LEN]; MAX_MKEYS],
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metadata")
            .field("version", &self.version)
            .field("flags", &self.flags)
            .field("ealgo", &self.ealgo)
            .field("keylen", &self.keylen)
            .field("aalgo", &self.aalgo)
            .field("provsize", &self.provsize)
            .field("sectorsize", &self.sectorsize)
            .field("keys", &self.keys)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Whether `sector` starts with GELI's magic (the C string and its NUL).
pub fn has_magic(sector: &[u8]) -> bool {
    sector.len() >= ENCODED_LEN && &sector[..MAGIC.len()] == MAGIC && sector[MAGIC.len()] == 0
}

/// A little-endian reader over the metadata bytes.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.b[self.at..self.at + N]);
        self.at += N;
        out
    }
}

impl Metadata {
    /// Decodes the metadata at the start of `sector` (at least [`ENCODED_LEN`] bytes that
    /// start with the magic: see [`has_magic`]). Refuses a version this code does not know
    /// and an MD5 that does not match.
    pub fn decode(sector: &[u8]) -> Result<Metadata> {
        if !has_magic(sector) {
            return Err(Error::corrupt("no GELI magic in the last sector"));
        }
        let mut r = Reader { b: sector, at: 16 };
        let version = u32::from_le_bytes(r.take());
        if version > VERSION {
            return Err(Error::unsupported(format!(
                "GELI metadata version {version} is unknown (known: 0 to {VERSION})"
            )));
        }
        let flags = u32::from_le_bytes(r.take());
        let ealgo = u16::from_le_bytes(r.take());
        let keylen = u16::from_le_bytes(r.take());
        let aalgo = if version == 0 {
            0
        } else {
            u16::from_le_bytes(r.take())
        };
        let provsize = u64::from_le_bytes(r.take());
        let sectorsize = u32::from_le_bytes(r.take());
        let keys = r.take::<1>()[0];
        let iterations = i32::from_le_bytes(r.take());
        let salt = r.take::<SALT_LEN>();
        let mkeys = [r.take::<MKEY_LEN>(), r.take::<MKEY_LEN>()];
        let end = r.at;
        let stored = r.take::<16>();
        let computed = Md5::digest(&sector[..end]);
        if computed.as_slice() != stored {
            return Err(Error::corrupt(format!(
                "GELI metadata MD5 mismatch: stored {}, computed {}",
                hex(&stored),
                hex(&computed)
            )));
        }
        Ok(Metadata {
            version,
            flags,
            ealgo,
            keylen,
            aalgo,
            provsize,
            sectorsize,
            keys,
            iterations,
            salt,
            mkeys,
        })
    }

    /// The metadata as stored (`eli_metadata_encode`; version 0 without `md_aalgo`):
    /// [`ENCODED_LEN`] bytes, the MD5 last.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(ENCODED_LEN);
        let mut magic = [0u8; 16];
        magic[..MAGIC.len()].copy_from_slice(MAGIC);
        b.extend_from_slice(&magic);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&self.flags.to_le_bytes());
        b.extend_from_slice(&self.ealgo.to_le_bytes());
        b.extend_from_slice(&self.keylen.to_le_bytes());
        if self.version != 0 {
            b.extend_from_slice(&self.aalgo.to_le_bytes());
        }
        b.extend_from_slice(&self.provsize.to_le_bytes());
        b.extend_from_slice(&self.sectorsize.to_le_bytes());
        b.push(self.keys);
        b.extend_from_slice(&self.iterations.to_le_bytes());
        b.extend_from_slice(&self.salt);
        for m in &self.mkeys {
            b.extend_from_slice(m);
        }
        let md5 = Md5::digest(&b);
        b.extend_from_slice(&md5);
        b.resize(ENCODED_LEN, 0);
        b
    }

    /// The flags' names, `NONE` when there is none (as `geli dump` prints them).
    pub fn flag_names(&self) -> String {
        let names: Vec<&str> = flags::NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|&(_, n)| n)
            .collect();
        if names.is_empty() {
            "NONE".into()
        } else {
            names.join(", ")
        }
    }
}

/// Lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::algo::*;

    #[test]
    fn algorithm_names_parse_in_both_spellings_and_only_implemented_ones() {
        for a in [AES_XTS, AES_CBC, CAMELLIA_CBC, NULL_CBC] {
            // geli's own spelling (`geli list` prints it) and any case.
            assert_eq!(encryption_by_name(name(a)), Some(a), "{}", name(a));
            assert_eq!(encryption_by_name(&name(a).to_lowercase()), Some(a));
        }
        assert_eq!(encryption_by_name("aes-xts-plain64"), Some(AES_XTS));
        assert_eq!(encryption_by_name("AES"), Some(AES_XTS));
        for unimplemented in [BLOWFISH_CBC, DES3_CBC] {
            assert_eq!(encryption_by_name(name(unimplemented)), None);
        }
        for a in [
            HMAC_SHA1,
            HMAC_RIPEMD160,
            HMAC_SHA256,
            HMAC_SHA384,
            HMAC_SHA512,
        ] {
            assert_eq!(authentication_by_name(name(a)), Some(a), "{}", name(a));
            let dashed = name(a).to_lowercase().replace('/', "-");
            assert_eq!(authentication_by_name(&dashed), Some(a));
            assert!(AUTHENTICATION_NAMES.contains(&dashed), "{dashed} listed");
        }
        assert_eq!(authentication_by_name(name(HMAC_MD5)), None);
        assert_eq!(authentication_by_name("sha256"), None);
        for listed in ENCRYPTION_NAMES.split(", ") {
            assert!(encryption_by_name(listed).is_some(), "{listed}");
        }
    }

    /// The signature wiper (a leaf module that names no format) knows GELI's magic and
    /// places as GELI itself does.
    #[test]
    fn the_signature_wiper_knows_gelis_magic_and_provider_sectors() {
        assert_eq!(crate::signatures::GELI_MAGIC, &super::MAGIC[..]);
        assert_eq!(
            crate::signatures::GELI_PROVIDER_SECTORS,
            crate::geli::PROVIDER_SECTORS
        );
    }
}
