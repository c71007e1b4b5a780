//! Authentication tags of storage units: GELI's authenticated sectors
//! (FreeBSD sys/geom/eli/g_eli_integrity.c).
//!
//! An authenticated GELI provider stores each unit (one sector of the underlying provider,
//! usually 512 bytes) as `tag | message | padding`: the message is that unit's share of
//! the ciphertext of a decrypted sector, and the tag is an HMAC over it
//! (encrypt-then-MAC). Every unit has its own HMAC key,
//!
//! ```text
//! unit key = SHA-256(akey || le64(byte offset of the unit in the provider))
//! tag      = HMAC-<algorithm>(unit key, message)
//! ```
//!
//! where `akey` is the provider's 64-byte authentication key (HMAC-SHA512(data key,
//! 0x11)). A decrypted sector spans several units: all but the last carry
//! [`UnitShape::msg_len`] bytes, the last the rest ([`UnitShape::last_msg_len`]).
//!
//! [`SectorMac::sign`] and [`SectorMac::verify`] take a whole run of units at once, so
//! that the independent units can be hashed side by side.

use crate::error::{InputError, KeyError};
use crate::Error;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// The tag algorithms of GELI's `-a` (`geli init -a hmac/sha256`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacAlgorithm {
    /// HMAC-SHA1 (20-byte tags).
    HmacSha1,
    /// HMAC-RIPEMD160 (20-byte tags).
    HmacRipemd160,
    /// HMAC-SHA256 (32-byte tags).
    HmacSha256,
    /// HMAC-SHA384 (48-byte tags).
    HmacSha384,
    /// HMAC-SHA512 (64-byte tags).
    HmacSha512,
}

impl MacAlgorithm {
    /// Bytes of a tag.
    pub fn tag_len(self) -> usize {
        match self {
            MacAlgorithm::HmacSha1 | MacAlgorithm::HmacRipemd160 => 20,
            MacAlgorithm::HmacSha256 => 32,
            MacAlgorithm::HmacSha384 => 48,
            MacAlgorithm::HmacSha512 => 64,
        }
    }
}

/// Bytes of the authentication key a [`SectorMac`] takes.
pub const AUTH_KEY_LEN: usize = 64;

/// How a run of units is cut: units of `unit_len` bytes grouped by decrypted sector,
/// `units_per_group` units per sector; each unit holds its tag first, then its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitShape {
    /// Bytes per unit (the underlying sector size).
    pub unit_len: usize,
    /// Units per decrypted sector.
    pub units_per_group: usize,
    /// Message bytes of every unit but the last of a group.
    pub msg_len: usize,
    /// Message bytes of the last unit of a group.
    pub last_msg_len: usize,
}

impl UnitShape {
    /// Message bytes of unit `i` of a run starting at a group boundary.
    pub fn msg_len_of(&self, i: usize) -> usize {
        if (i + 1).is_multiple_of(self.units_per_group) {
            self.last_msg_len
        } else {
            self.msg_len
        }
    }

    fn check(&self, alg: MacAlgorithm, len: usize) -> Result<usize, Error> {
        let tag = alg.tag_len();
        let fits = |m: usize| tag.checked_add(m).is_some_and(|e| e <= self.unit_len);
        if self.unit_len == 0
            || self.units_per_group == 0
            || !fits(self.msg_len)
            || !fits(self.last_msg_len)
        {
            return Err(InputError::Length {
                got: self.unit_len,
                why: "a unit must hold its tag and its message",
            }
            .into());
        }
        let group = self.unit_len * self.units_per_group;
        if !len.is_multiple_of(group) {
            return Err(InputError::Length {
                got: len,
                why: "a run of units must be a whole number of groups",
            }
            .into());
        }
        Ok(len / self.unit_len)
    }
}

/// The tag maker of one provider: see the module documentation. Its key is zeroized on
/// drop and never shown by `Debug`.
pub struct SectorMac {
    alg: MacAlgorithm,
    akey: Zeroizing<[u8; AUTH_KEY_LEN]>,
}

impl std::fmt::Debug for SectorMac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SectorMac")
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl SectorMac {
    /// The tag maker for `alg` under the 64-byte authentication key `akey`.
    pub fn new(alg: MacAlgorithm, akey: &[u8]) -> Result<SectorMac, Error> {
        let akey: [u8; AUTH_KEY_LEN] = akey.try_into().map_err(|_| KeyError::Length {
            what: "a sector authentication key",
            got: akey.len(),
            expected: "64",
        })?;
        Ok(SectorMac {
            alg,
            akey: Zeroizing::new(akey),
        })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> MacAlgorithm {
        self.alg
    }

    /// Bytes of a tag.
    pub fn tag_len(&self) -> usize {
        self.alg.tag_len()
    }

    /// Writes the tag of every unit of `units` into its tag field. `units` is a whole
    /// number of groups of `shape`; unit `i` lies at byte `first_offset + i * unit_len` of
    /// the provider.
    pub fn sign(&self, units: &mut [u8], shape: UnitShape, first_offset: u64) -> Result<(), Error> {
        let n = shape.check(self.alg, units.len())?;
        let t = self.tag_len();
        for i in 0..n {
            let unit = &mut units[i * shape.unit_len..(i + 1) * shape.unit_len];
            let (tag, rest) = unit.split_at_mut(t);
            let offset = first_offset + (i * shape.unit_len) as u64;
            self.tag_into(offset, &rest[..shape.msg_len_of(i)], tag);
        }
        Ok(())
    }

    /// Checks the tag of every unit of `units` (as for [`SectorMac::sign`]). `Ok(None)`
    /// when all verify, `Ok(Some(i))` with the first unit `i` whose tag does not. Tags are
    /// compared in constant time.
    pub fn verify(
        &self,
        units: &[u8],
        shape: UnitShape,
        first_offset: u64,
    ) -> Result<Option<usize>, Error> {
        use subtle::ConstantTimeEq;
        let n = shape.check(self.alg, units.len())?;
        let t = self.tag_len();
        let mut expected = [0u8; 64];
        for i in 0..n {
            let unit = &units[i * shape.unit_len..(i + 1) * shape.unit_len];
            let (tag, rest) = unit.split_at(t);
            let offset = first_offset + (i * shape.unit_len) as u64;
            self.tag_into(offset, &rest[..shape.msg_len_of(i)], &mut expected[..t]);
            if !bool::from(expected[..t].ct_eq(tag)) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// The tag of one unit at `offset` over `msg` (the portable reference path).
    fn tag_into(&self, offset: u64, msg: &[u8], tag: &mut [u8]) {
        let mut h = Sha256::new();
        h.update(&self.akey[..]);
        h.update(offset.to_le_bytes());
        let unit_key = Zeroizing::new(<[u8; 32]>::from(h.finalize()));
        fn hmac<M: Mac + hmac::digest::KeyInit>(key: &[u8], msg: &[u8], tag: &mut [u8]) {
            let mut m = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            m.update(msg);
            tag.copy_from_slice(&m.finalize().into_bytes());
        }
        match self.alg {
            MacAlgorithm::HmacSha1 => hmac::<Hmac<sha1::Sha1>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacRipemd160 => hmac::<Hmac<ripemd::Ripemd160>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacSha256 => hmac::<Hmac<Sha256>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacSha384 => hmac::<Hmac<sha2::Sha384>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacSha512 => hmac::<Hmac<sha2::Sha512>>(&unit_key[..], msg, tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: UnitShape = UnitShape {
        unit_len: 512,
        units_per_group: 9,
        msg_len: 480,
        last_msg_len: 256,
    };

    #[test]
    fn a_signed_run_verifies_and_a_flipped_bit_names_its_unit() {
        let mac = SectorMac::new(MacAlgorithm::HmacSha256, &[7u8; 64]).unwrap();
        let mut units: Vec<u8> = (0..2 * 9 * 512).map(|i| (i * 31 % 251) as u8).collect();
        mac.sign(&mut units, SHAPE, 1 << 20).unwrap();
        assert_eq!(mac.verify(&units, SHAPE, 1 << 20).unwrap(), None);
        // The padding after the last unit's message is not covered.
        units[8 * 512 + 32 + 256] ^= 1;
        assert_eq!(mac.verify(&units, SHAPE, 1 << 20).unwrap(), None);
        units[12 * 512 + 40] ^= 1;
        assert_eq!(mac.verify(&units, SHAPE, 1 << 20).unwrap(), Some(12));
        // The same bytes at another offset have other tags.
        units[12 * 512 + 40] ^= 1;
        assert_eq!(mac.verify(&units, SHAPE, 0).unwrap(), Some(0));
    }

    #[test]
    fn bad_shapes_and_keys_are_refused() {
        assert!(SectorMac::new(MacAlgorithm::HmacSha1, &[0; 32]).is_err());
        let mac = SectorMac::new(MacAlgorithm::HmacSha512, &[0; 64]).unwrap();
        let mut units = vec![0u8; 9 * 512];
        assert!(mac.sign(&mut units, SHAPE, 0).is_err(), "480 + 64 > 512");
        let shape = UnitShape {
            msg_len: 448,
            last_msg_len: 64,
            units_per_group: 10,
            ..SHAPE
        };
        assert!(mac.sign(&mut units, shape, 0).is_err(), "not whole groups");
        let mut units = vec![0u8; 10 * 512];
        mac.sign(&mut units, shape, 0).unwrap();
        assert_eq!(mac.verify(&units, shape, 0).unwrap(), None);
    }
}
