//! LUKS1 ("LUKS On-Disk Format Specification", version 1.2.3).
//!
//! One 592-byte header at offset 0 (big-endian integers), eight keyslots of PBKDF2 +
//! AF-split material encrypted with the volume's own cipher (512-byte sectors, IV from 0
//! at the start of each slot's material), and a PBKDF2 digest of the volume key (20
//! bytes):
//! ```text
//!   0 magic[6] "LUKS\xba\xbe"   6 version u16 = 1   8 cipher_name[32]   40 cipher_mode[32]
//!  72 hash_spec[32]  104 payload_offset u32 (sectors)  108 key_bytes u32
//! 112 mk_digest[20]  132 mk_digest_salt[32]  164 mk_digest_iterations u32  168 uuid[40]
//! 208 + 48*i keyslot i: active u32, iterations u32, salt[32], key_material_offset u32
//!     (sectors), stripes u32
//! ```
//! There is one header copy, so a header write is a single 592-byte write: new keyslot
//! material is written (and synced) before the header that enables it.

use super::error::{Error, Result};
use super::hash::HashAlg;
use super::io::{align_up, be16, be32, cstr, put_cstr, read_exact_at, sync, write_all_at};
use super::kdf::{Kdf, KdfKind, KdfOptions};
use super::luks2::{cipher_spec, open_material, seal_material, Material};
use super::{af, ct_eq, random, Unlocked};
use sectorcrypt_crypto::dmcrypt::SectorLayout;
use std::fs::File;
use zeroize::Zeroizing;

/// Header length.
pub const HEADER_LEN: usize = 592;
/// Keyslots in a LUKS1 header.
pub const KEYSLOTS: usize = 8;
const MAGIC: &[u8; 6] = b"LUKS\xba\xbe";
const ACTIVE: u32 = 0x00AC_71F3;
const DISABLED: u32 = 0x0000_DEAD;
const DIGEST_LEN: usize = 20;

/// One LUKS1 keyslot.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// Enabled.
    pub active: bool,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// PBKDF2 salt.
    pub salt: [u8; 32],
    /// Start of the key material in 512-byte sectors.
    pub key_offset: u32,
    /// AF stripes.
    pub stripes: u32,
}

/// A parsed LUKS1 header.
#[derive(Clone)]
pub struct Luks1 {
    raw: [u8; HEADER_LEN],
    /// Cipher name, e.g. "aes".
    pub cipher_name: String,
    /// Cipher mode, e.g. "xts-plain64".
    pub cipher_mode: String,
    /// Hash for PBKDF2, the AF splitter and the digest.
    pub hash_spec: String,
    /// Data start in 512-byte sectors.
    pub payload_offset: u32,
    /// Volume key length.
    pub key_bytes: u32,
    mk_digest: [u8; DIGEST_LEN],
    mk_salt: [u8; 32],
    /// Digest iterations.
    pub mk_iterations: u32,
    /// UUID.
    pub uuid: String,
    /// The keyslots.
    pub slots: [Slot; KEYSLOTS],
}

impl std::fmt::Debug for Luks1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Luks1")
            .field("uuid", &self.uuid)
            .field("cipher", &self.cipher())
            .finish_non_exhaustive()
    }
}

/// Sectors of key material for a key of `key_bytes` with 4000 stripes, aligned to 4 KiB.
fn material_sectors(key_bytes: u32) -> u32 {
    align_up((key_bytes as u64 * af::STRIPES as u64).div_ceil(512), 8) as u32
}

impl Luks1 {
    /// Parses the header in `first` (the image's first bytes).
    pub fn parse(first: &[u8]) -> Result<Luks1> {
        if first.len() < HEADER_LEN {
            return Err(Error::Truncated(
                "the image is shorter than a luks1 header".into(),
            ));
        }
        if &first[..6] != MAGIC || be16(first, 6) != 1 {
            return Err(Error::NotLuks("no luks1 magic".into()));
        }
        let raw: [u8; HEADER_LEN] = first[..HEADER_LEN].try_into().expect("592 bytes");
        let mut slots = [Slot {
            active: false,
            iterations: 0,
            salt: [0; 32],
            key_offset: 0,
            stripes: 0,
        }; KEYSLOTS];
        for (i, s) in slots.iter_mut().enumerate() {
            let at = 208 + 48 * i;
            let state = be32(&raw, at);
            s.active = match state {
                ACTIVE => true,
                DISABLED => false,
                x => {
                    return Err(Error::Corrupt(format!(
                        "luks1 keyslot {i} has an invalid state {x:#010x}"
                    )))
                }
            };
            s.iterations = be32(&raw, at + 4);
            s.salt.copy_from_slice(&raw[at + 8..at + 40]);
            s.key_offset = be32(&raw, at + 40);
            s.stripes = be32(&raw, at + 44);
            if s.active && (s.stripes as usize != af::STRIPES || s.iterations == 0) {
                return Err(Error::Corrupt(format!(
                    "luks1 keyslot {i} is active with {} stripes (must be {}) or 0 iterations",
                    s.stripes,
                    af::STRIPES
                )));
            }
        }
        let h = Luks1 {
            raw,
            cipher_name: cstr(&raw[8..40], "cipher name")?,
            cipher_mode: cstr(&raw[40..72], "cipher mode")?,
            hash_spec: cstr(&raw[72..104], "hash spec")?,
            payload_offset: be32(&raw, 104),
            key_bytes: be32(&raw, 108),
            mk_digest: raw[112..132].try_into().expect("20"),
            mk_salt: raw[132..164].try_into().expect("32"),
            mk_iterations: be32(&raw, 164),
            uuid: cstr(&raw[168..208], "uuid")?,
            slots,
        };
        if h.mk_iterations == 0 {
            return Err(Error::Corrupt(
                "luks1 volume key digest has 0 iterations".into(),
            ));
        }
        if h.key_bytes == 0 || h.key_bytes as u64 > super::luks2::MAX_KEY_BYTES {
            return Err(Error::Corrupt(format!(
                "luks1 key length {} bytes",
                h.key_bytes
            )));
        }
        for (i, s) in h.slots.iter().enumerate().filter(|(_, s)| s.active) {
            // Without a data offset the bound is the image size, checked when the slot is
            // read or written.
            if !h.area_ok(s.key_offset as u64 * 512, u64::MAX) {
                return Err(Error::Corrupt(format!(
                    "luks1 keyslot {i} material overlaps the header or the data"
                )));
            }
        }
        Ok(h)
    }

    /// The cipher string, e.g. `aes-xts-plain64`.
    pub fn cipher(&self) -> String {
        format!("{}-{}", self.cipher_name, self.cipher_mode)
    }

    fn hash(&self) -> Result<HashAlg> {
        HashAlg::parse(&self.hash_spec)
    }

    /// Bytes from the start of the image to the end of the last keyslot's material, aligned
    /// to 4 KiB: what a header backup holds (the same length as cryptsetup's
    /// luksHeaderBackup of a LUKS1 volume).
    ///
    /// Active slots count (their areas were checked when parsing), and inactive ones only
    /// when their area lies between the header and the data: an inactive slot's offset is
    /// not otherwise validated.
    pub fn metadata_size(&self) -> u64 {
        let end = (0..KEYSLOTS)
            .filter(|&i| {
                let s = &self.slots[i];
                s.active || (self.payload_offset != 0 && self.area_ok(s.key_offset as u64 * 512, 0))
            })
            .map(|i| self.slot_end(i))
            .max()
            .unwrap_or(HEADER_LEN as u64);
        align_up(end.max(HEADER_LEN as u64), 4096)
    }

    /// End of slot `i`'s material (4000 stripes of the key, whole sectors). Cannot
    /// overflow: a u32 of sectors plus at most 64 * 4000 bytes.
    fn slot_end(&self, i: usize) -> u64 {
        self.slots[i].key_offset as u64 * 512
            + align_up(self.key_bytes as u64 * af::STRIPES as u64, 512)
    }

    /// Whether material at `off` (of the slot starting there) lies after the header and
    /// before the data, or before the end of an `image` of that size when the header
    /// names no data offset.
    fn area_ok(&self, off: u64, image: u64) -> bool {
        let end = off + align_up(self.key_bytes as u64 * af::STRIPES as u64, 512);
        let limit = if self.payload_offset != 0 {
            self.payload_offset as u64 * 512
        } else {
            image
        };
        off >= HEADER_LEN as u64 && end <= limit
    }

    /// Whether `key` matches the volume key digest.
    pub fn verify_key(&self, key: &[u8]) -> Result<bool> {
        let mut d = [0u8; DIGEST_LEN];
        self.hash()?
            .pbkdf2(key, &self.mk_salt, self.mk_iterations, &mut d);
        Ok(ct_eq(&d, &self.mk_digest))
    }

    /// Tries the active keyslots in order; returns the volume key and the slot.
    pub fn unlock(
        &self,
        file: &File,
        passphrase: &[u8],
        only: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        let cipher = self.cipher();
        cipher_spec(&cipher, self.key_bytes as usize)?;
        let hash = self.hash()?;
        let active: Vec<usize> = (0..KEYSLOTS)
            .filter(|&i| self.slots[i].active && only.is_none_or(|n| n == i))
            .collect();
        if active.is_empty() {
            return Err(match only {
                Some(n) => Error::KeyslotNotActive(n),
                None => Error::NoKeyslot,
            });
        }
        let mut last_err = None;
        for i in active {
            let s = &self.slots[i];
            let kdf = Kdf::Pbkdf2 {
                hash,
                iterations: s.iterations,
            };
            let r = open_material(
                file,
                passphrase,
                &Material {
                    kdf: &kdf,
                    salt: &s.salt,
                    area_offset: s.key_offset as u64 * 512,
                    area_encryption: &cipher,
                    area_key_size: self.key_bytes as usize,
                    key_size: self.key_bytes as usize,
                    stripes: s.stripes as usize,
                    af_hash: hash,
                },
            );
            match r {
                Ok(key) if self.verify_key(&key)? => return Ok((key, i)),
                Ok(_) => {}
                Err(e @ (Error::Truncated(_) | Error::Io(_))) => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or(Error::WrongPassphrase))
    }

    /// What an open volume looks like for the sector engine.
    pub fn unlocked(
        &self,
        file: &File,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        let cipher = self.cipher();
        let spec = cipher_spec(&cipher, key.len())?;
        let image = super::io::image_size(file)?;
        let offset = self.payload_offset as u64 * 512;
        if image < offset {
            return Err(Error::Truncated(format!(
                "the data area starts at {offset} but the image has {image} bytes"
            )));
        }
        Ok(Unlocked {
            volume_key: key,
            cipher,
            spec,
            layout: SectorLayout::new(512, false)?,
            data_offset: offset,
            data_size: (image - offset) / 512 * 512,
            iv_offset: 0,
            keyslot,
        })
    }

    /// A new header in memory, cryptsetup's layout: keyslot material from sector 8, each
    /// slot's material aligned to 4 KiB, the data aligned to 1 MiB.
    pub fn format(
        cipher: &str,
        key: &[u8],
        hash: HashAlg,
        uuid: &str,
        digest_iterations: u32,
    ) -> Result<Luks1> {
        cipher_spec(cipher, key.len())?;
        let (name, mode) = cipher.split_once('-').expect("validated cipher string");
        let mut raw = [0u8; HEADER_LEN];
        raw[..6].copy_from_slice(MAGIC);
        raw[6..8].copy_from_slice(&1u16.to_be_bytes());
        let mut mk_salt = [0u8; 32];
        random(&mut mk_salt)?;
        let mut mk_digest = [0u8; DIGEST_LEN];
        hash.pbkdf2(key, &mk_salt, digest_iterations, &mut mk_digest);
        let km = material_sectors(key.len() as u32);
        let mut slots = [Slot {
            active: false,
            iterations: 0,
            salt: [0; 32],
            key_offset: 0,
            stripes: af::STRIPES as u32,
        }; KEYSLOTS];
        for (i, s) in slots.iter_mut().enumerate() {
            s.key_offset = 8 + i as u32 * km;
        }
        let payload = align_up(8 + KEYSLOTS as u64 * km as u64, 2048) as u32;
        Ok(Luks1 {
            raw,
            cipher_name: name.to_string(),
            cipher_mode: mode.to_string(),
            hash_spec: hash.name().to_string(),
            payload_offset: payload,
            key_bytes: key.len() as u32,
            mk_digest,
            mk_salt,
            mk_iterations: digest_iterations,
            uuid: uuid.to_string(),
            slots,
        })
    }

    fn serialize(&self) -> Result<[u8; HEADER_LEN]> {
        let mut b = self.raw;
        b[..6].copy_from_slice(MAGIC);
        b[6..8].copy_from_slice(&1u16.to_be_bytes());
        put_cstr(&mut b[8..40], &self.cipher_name, "cipher name")?;
        put_cstr(&mut b[40..72], &self.cipher_mode, "cipher mode")?;
        put_cstr(&mut b[72..104], &self.hash_spec, "hash spec")?;
        b[104..108].copy_from_slice(&self.payload_offset.to_be_bytes());
        b[108..112].copy_from_slice(&self.key_bytes.to_be_bytes());
        b[112..132].copy_from_slice(&self.mk_digest);
        b[132..164].copy_from_slice(&self.mk_salt);
        b[164..168].copy_from_slice(&self.mk_iterations.to_be_bytes());
        put_cstr(&mut b[168..208], &self.uuid, "uuid")?;
        for (i, s) in self.slots.iter().enumerate() {
            let at = 208 + 48 * i;
            b[at..at + 4]
                .copy_from_slice(&(if s.active { ACTIVE } else { DISABLED }).to_be_bytes());
            b[at + 4..at + 8].copy_from_slice(&s.iterations.to_be_bytes());
            b[at + 8..at + 40].copy_from_slice(&s.salt);
            b[at + 40..at + 44].copy_from_slice(&s.key_offset.to_be_bytes());
            b[at + 44..at + 48].copy_from_slice(&s.stripes.to_be_bytes());
        }
        Ok(b)
    }

    /// Writes the header (one write, then `fdatasync`).
    pub fn write(&mut self, file: &File) -> Result<()> {
        let b = self.serialize()?;
        write_all_at(file, &b, 0)?;
        sync(file)?;
        self.raw = b;
        Ok(())
    }

    /// Writes key material for `key` into a free slot and enables it. Returns the slot.
    pub fn add_keyslot(
        &mut self,
        file: &File,
        key: &[u8],
        passphrase: &[u8],
        opts: &KdfOptions,
        slot: Option<usize>,
    ) -> Result<usize> {
        if opts.kind != KdfKind::Pbkdf2 {
            return Err(Error::Invalid(
                "luks1 keyslots use pbkdf2 only (--pbkdf pbkdf2)".into(),
            ));
        }
        let hash = self.hash()?;
        let i = match slot {
            Some(n) if n >= KEYSLOTS => {
                return Err(Error::Invalid(format!(
                    "keyslot {n} is out of range (0 to 7)"
                )))
            }
            Some(n) if self.slots[n].active => {
                return Err(Error::NoFreeKeyslot(format!("keyslot {n} is in use")))
            }
            Some(n) => n,
            None => (0..KEYSLOTS)
                .find(|&n| !self.slots[n].active)
                .ok_or_else(|| Error::NoFreeKeyslot("all 8 keyslots are in use".into()))?,
        };
        let cipher = self.cipher();
        let mut o = *opts;
        o.hash = hash;
        let kdf = o.resolve(key.len())?;
        let Kdf::Pbkdf2 { iterations, .. } = kdf else {
            unreachable!("pbkdf2 asked for")
        };
        let (salt, material) = seal_material(passphrase, key, &kdf, &cipher, key.len(), hash)?;
        // The slot's offset comes from the header (unchecked for an inactive slot): its
        // material must lie between the header and the data (or the image end).
        let offset = self.slots[i].key_offset as u64 * 512;
        let image = super::io::image_size(file)?;
        if !self.area_ok(offset, image) || offset + material.len() as u64 > self.slot_end(i) {
            return Err(Error::Corrupt(format!(
                "luks1 keyslot {i} material offset is outside the keyslot area"
            )));
        }
        write_all_at(file, &material, offset)?;
        sync(file)?;
        let s = &mut self.slots[i];
        s.stripes = af::STRIPES as u32;
        s.active = true;
        s.iterations = iterations;
        s.salt.copy_from_slice(&salt);
        self.write(file)?;
        Ok(i)
    }

    /// Disables keyslots (`None`: all), writes the header, then wipes their material.
    pub fn remove_keyslots(&mut self, file: &File, which: Option<usize>) -> Result<()> {
        let ids: Vec<usize> = match which {
            Some(n) if n >= KEYSLOTS || !self.slots[n].active => {
                return Err(Error::KeyslotNotActive(n))
            }
            Some(n) => vec![n],
            None => (0..KEYSLOTS).collect(),
        };
        for &i in &ids {
            let s = &mut self.slots[i];
            s.active = false;
            s.iterations = 0;
            s.salt = [0; 32];
        }
        self.write(file)?;
        let image = super::io::image_size(file)?;
        for &i in &ids {
            let off = self.slots[i].key_offset as u64 * 512;
            // Only areas inside the keyslot area: an inactive slot's offset is unchecked.
            if self.area_ok(off, image) {
                super::io::wipe(file, off, self.slot_end(i) - off, true)?;
            }
        }
        sync(file)
    }

    /// Reads the first bytes of an image and parses them.
    pub fn read(file: &File) -> Result<Luks1> {
        let mut b = [0u8; HEADER_LEN];
        read_exact_at(file, &mut b, 0, "luks1 header")?;
        Luks1::parse(&b)
    }
}
