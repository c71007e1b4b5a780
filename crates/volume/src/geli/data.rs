//! What a GELI provider's metadata means for its data: the cipher and key sizes its
//! algorithms name (refusing, before any KDF runs, what is not supported), the tags of an
//! authenticated provider, the size of the decrypted provider, and the data opened with a
//! master key (byte-offset IVs, the zone keys of the metadata's version).

use super::keys::{self, ZoneKeys};
use super::metadata::{algo, flags};
use super::Geli;
use crate::error::{Error, Result};
use crate::format::{Unlocked, VolumeInfo};
use crate::layout::{IvRule, SectorMetadata};
use sectorcrypt_crypto::cascade::Layer;
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec, IvMode};
use sectorcrypt_crypto::mac::MacAlgorithm;
use std::sync::Arc;
use zeroize::Zeroizing;

/// What the data of a provider needs: cipher, key bytes per zone key, tags.
pub(crate) struct Cipher {
    /// The cipher; unused when `encrypted` is false.
    spec: CipherSpec,
    /// Whether the data is encrypted (false: NULL encryption).
    encrypted: bool,
    /// Bytes of cipher key(s) taken from a zone key (two AES keys for XTS).
    key_bytes: usize,
    /// Bytes of the master-key slots' CBC key (`keylen / 8`; 0 for NULL, whose slots are
    /// not encrypted).
    pub(super) slot_key_bytes: usize,
    /// The tag of authenticated providers.
    mac: Option<MacAlgorithm>,
}

impl Cipher {
    /// Whether the master-key slots are Camellia-CBC (a Camellia-CBC provider) rather than
    /// AES-CBC.
    pub(super) fn slots_in_camellia(&self) -> bool {
        self.spec.cipher == Layer::Camellia
    }
}

/// The tag algorithm of GELI's `md_aalgo` (`g_eli_str2aalgo`'s names).
pub fn mac_algorithm(aalgo: u16) -> Result<MacAlgorithm> {
    match aalgo {
        algo::HMAC_SHA1 => Ok(MacAlgorithm::HmacSha1),
        algo::HMAC_RIPEMD160 => Ok(MacAlgorithm::HmacRipemd160),
        algo::HMAC_SHA256 => Ok(MacAlgorithm::HmacSha256),
        algo::HMAC_SHA384 => Ok(MacAlgorithm::HmacSha384),
        algo::HMAC_SHA512 => Ok(MacAlgorithm::HmacSha512),
        algo::HMAC_MD5 => Err(Error::unsupported(
            "GELI authentication HMAC/MD5 is not supported (supported: HMAC/SHA1, \
             HMAC/RIPEMD160, HMAC/SHA256, HMAC/SHA384, HMAC/SHA512)",
        )),
        a => Err(Error::unsupported(format!(
            "GELI authentication algorithm {a} is unknown (supported: HMAC/SHA1 = {}, \
             HMAC/RIPEMD160 = {}, HMAC/SHA256 = {}, HMAC/SHA384 = {}, HMAC/SHA512 = {})",
            algo::HMAC_SHA1,
            algo::HMAC_RIPEMD160,
            algo::HMAC_SHA256,
            algo::HMAC_SHA384,
            algo::HMAC_SHA512
        ))),
    }
}

impl Geli {
    /// Refuses what this implementation cannot decrypt, before any KDF runs.
    pub(crate) fn cipher(&self) -> Result<Cipher> {
        let md = &self.md;
        if md.flags & flags::ONETIME != 0 {
            return Err(Error::unsupported(
                "this GELI metadata has the ONETIME flag: a one-time provider keeps no keys",
            ));
        }
        let mac = if md.flags & flags::AUTH != 0 {
            Some(mac_algorithm(md.aalgo)?)
        } else {
            None
        };
        let bits = usize::from(md.keylen);
        let aes_cbc = CipherSpec::aes(CipherMode::Cbc, IvMode::GeliSha256);
        let (spec, allowed): (_, &[usize]) = match md.ealgo {
            algo::AES_XTS => (
                CipherSpec::aes(CipherMode::Xts, IvMode::Plain64),
                &[128, 256],
            ),
            algo::AES_CBC => (aes_cbc, &[128, 192, 256]),
            // The same IVs and keys as AES-CBC (g_eli_crypto_ivgen's default case).
            algo::CAMELLIA_CBC => (CipherSpec::geli_camellia(), &[128, 192, 256]),
            algo::NULL_CBC if mac.is_some() => {
                // g_eli_keylen: any length up to 512 bits; the key is never used.
                if bits > 512 {
                    return Err(Error::corrupt(format!(
                        "GELI key length {bits} bits is not valid for NULL (at most 512)"
                    )));
                }
                return Ok(Cipher {
                    spec: CipherSpec::aes(CipherMode::Xts, IvMode::Plain64),
                    encrypted: false,
                    key_bytes: 0,
                    slot_key_bytes: 0,
                    mac,
                });
            }
            algo::NULL_CBC => {
                return Err(Error::unsupported(
                    "GELI NULL encryption without authentication is not supported (NULL is \
                     allowed with -a only)",
                ))
            }
            algo::BLOWFISH_CBC | algo::DES3_CBC => {
                return Err(Error::unsupported(format!(
                    "GELI encryption {} is not supported (supported: AES-XTS, AES-CBC, \
                     CAMELLIA-CBC, NULL with authentication)",
                    algo::name(md.ealgo)
                )))
            }
            a => {
                return Err(Error::unsupported(format!(
                    "GELI encryption algorithm {a} is unknown (supported: AES-XTS = {}, \
                     AES-CBC = {}, CAMELLIA-CBC = {}, NULL = {})",
                    algo::AES_XTS,
                    algo::AES_CBC,
                    algo::CAMELLIA_CBC,
                    algo::NULL_CBC
                )))
            }
        };
        if !allowed.contains(&bits) {
            return Err(Error::corrupt(format!(
                "GELI key length {bits} bits is not valid for {} (valid: {allowed:?})",
                algo::name(md.ealgo)
            )));
        }
        let key_bytes = if spec.mode == CipherMode::Xts {
            bits / 4
        } else {
            bits / 8
        };
        Ok(Cipher {
            spec,
            encrypted: true,
            key_bytes,
            slot_key_bytes: bits / 8,
            mac,
        })
    }

    /// Bytes of decrypted data (`eli_metadata_softc`): the provider less its metadata
    /// sector, rounded down to whole GELI sectors (to whole stored sectors, for an
    /// authenticated provider).
    pub fn data_size(&self) -> u64 {
        let ss = u64::from(self.md.sectorsize);
        let size = self.md.provsize.saturating_sub(self.provider_sector);
        match self.sector_metadata() {
            Some(m) => m.data_size(size, ss as usize),
            None => size - size % ss,
        }
    }

    /// How an authenticated provider stores its sectors: units of the provider's sector
    /// size with the metadata's tag (`None` without the AUTH flag or for an unknown tag).
    pub fn sector_metadata(&self) -> Option<SectorMetadata> {
        if self.md.flags & flags::AUTH == 0 {
            return None;
        }
        Some(SectorMetadata {
            unit_len: self.provider_sector as usize,
            mac: mac_algorithm(self.md.aalgo).ok()?,
        })
    }

    /// The data of `data_size` bytes opened with the master key `key` (IV key || data
    /// key) from slot `keyslot`: the cipher, the byte-offset IVs and the zone keys of this
    /// metadata's version.
    pub(crate) fn open_data(
        &self,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
        size: u64,
    ) -> Result<Unlocked> {
        let cipher = self.cipher()?;
        let cbc = cipher.spec.mode == CipherMode::Cbc;
        let zones = if cipher.mac.is_some() {
            ZoneKeys::authenticated(self.md.version, &key, cipher.key_bytes, cbc)
        } else {
            ZoneKeys::new(self.md.version, &key, cipher.key_bytes, cbc)
        };
        // Before version 6 an authenticated provider's units all use zone 0's key
        // (G_ELI_FLAG_FIRST_KEY): one zone as large as the provider.
        let first_key = cipher.mac.is_some() && self.md.version < 6;
        let zone_sectors = if zones.single() || first_key {
            u64::MAX
        } else {
            1 << keys::ZONE_SHIFT
        };
        let info = self.info_of(&cipher, size);
        let auth_key = cipher.mac.map(|_| keys::auth_key(&key));
        let unlocked = Unlocked::new(info, cipher.spec, key, keyslot)
            .with_zones(zone_sectors, Arc::new(zones));
        Ok(match (auth_key, self.sector_metadata()) {
            (Some(akey), Some(md)) => unlocked.with_auth(md, &akey[..], cipher.encrypted),
            _ => unlocked,
        })
    }

    /// What the data of `size` bytes under `cipher` (this metadata's) looks like.
    pub(super) fn info_of(&self, cipher: &Cipher, size: u64) -> VolumeInfo {
        let mut name = match cipher.encrypted {
            true => format!(
                "{}-{}",
                algo::name(self.md.ealgo).to_lowercase(),
                self.md.keylen
            ),
            false => "null".to_string(),
        };
        if cipher.mac.is_some() {
            name = format!("{name} + {}", algo::name(self.md.aalgo).to_lowercase());
        }
        VolumeInfo {
            cipher: name,
            sector_size: self.md.sectorsize as usize,
            iv: IvRule::ByteOffset,
            data_offset: 0,
            data_size: size,
        }
    }
}
