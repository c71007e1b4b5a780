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
//! material is written (and synced) before the header that enables it. `layout.rs` holds
//! the keyslot layout checks a header must pass to be used (cryptsetup's) and the repair
//! of inactive keyslots that break them.

mod layout;

use super::af;
use super::fields::{align_up, be16, be32, cstr, put_cstr};
use super::keyslot::{cipher_spec, digest_matches, seal_material, try_keyslots, Material};
use super::magic::Magic;
use crate::error::{Error, HeaderError, KeyslotError, Result};
use crate::format::dump::{Field, Item, Report, Section};
use crate::format::{
    no_keyslot, Detected, Driver, Format, NewKeyslot, Piece, Probe, Unlocked, VolumeInfo,
};
use crate::hash::HashAlg;
use crate::kdf::{Kdf, KdfKind};
use crate::layout::IvRule;
use crate::store::{self, Store};
use std::any::Any;
use zeroize::Zeroizing;

/// Header length.
pub const HEADER_LEN: usize = 592;
/// Keyslots in a LUKS1 header.
pub const KEYSLOTS: usize = 8;
const ACTIVE: u32 = 0x00AC_71F3;
const DISABLED: u32 = 0x0000_DEAD;
pub(crate) const DIGEST_LEN: usize = 20;

/// One LUKS1 keyslot.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// Enabled.
    pub active: bool,
    /// The state field as read (enabled, disabled, or anything else).
    state: u32,
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
    /// cryptsetup's magic, or librbd's layered-clone magic (kept on every write).
    pub magic: Magic,
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
    /// What rebuilding the header changed (written by [`Format::repair`]).
    repairs: Vec<String>,
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
    /// Parses the header in `first` (the image's first bytes) and checks it.
    pub fn parse(first: &[u8]) -> Result<Luks1> {
        let h = Luks1::parse_fields(first)?;
        h.check()?;
        Ok(h)
    }

    /// Reads the header's fields, unchecked beyond its magic and its text fields.
    fn parse_fields(first: &[u8]) -> Result<Luks1> {
        if first.len() < HEADER_LEN {
            return Err(Error::truncated("the image is shorter than a luks1 header"));
        }
        let magic = match Magic::of(first, false) {
            Some(m) if be16(first, 6) == 1 => m,
            _ => return Err(HeaderError::Unrecognised("no luks1 magic".into()).into()),
        };
        let raw: [u8; HEADER_LEN] = first[..HEADER_LEN].try_into().expect("592 bytes");
        let slots = std::array::from_fn(|i| {
            let at = 208 + 48 * i;
            let state = be32(&raw, at);
            Slot {
                active: state == ACTIVE,
                state,
                iterations: be32(&raw, at + 4),
                salt: raw[at + 8..at + 40].try_into().expect("32 bytes"),
                key_offset: be32(&raw, at + 40),
                stripes: be32(&raw, at + 44),
            }
        });
        Ok(Luks1 {
            raw,
            magic,
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
            repairs: Vec::new(),
        })
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
    /// luksHeaderBackup of a LUKS1 volume). Every slot counts, active or not: all were
    /// checked to lie between the header and the data.
    pub fn metadata_size(&self) -> u64 {
        let end = (0..KEYSLOTS).map(|i| self.slot_end(i)).max();
        align_up(end.unwrap_or(0).max(HEADER_LEN as u64), 4096)
    }

    /// End of slot `i`'s material. Cannot overflow: a u32 of sectors plus at most
    /// 64 * 4000 bytes.
    fn slot_end(&self, i: usize) -> u64 {
        self.slots[i].key_offset as u64 * 512 + self.material_len()
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
        raw[..6].copy_from_slice(Magic::Luks.primary());
        raw[6..8].copy_from_slice(&1u16.to_be_bytes());
        let mut mk_salt = [0u8; 32];
        crate::random(&mut mk_salt)?;
        let mut mk_digest = [0u8; DIGEST_LEN];
        hash.pbkdf2(key, &mk_salt, digest_iterations, &mut mk_digest);
        let km = material_sectors(key.len() as u32);
        let mut slots = [Slot {
            active: false,
            state: DISABLED,
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
            magic: Magic::Luks,
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
            repairs: Vec::new(),
        })
    }

    fn serialize(&self) -> Result<[u8; HEADER_LEN]> {
        let mut b = self.raw;
        b[..6].copy_from_slice(self.magic.primary());
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
            b[at..at + 4].copy_from_slice(&s.state.to_be_bytes());
            b[at + 4..at + 8].copy_from_slice(&s.iterations.to_be_bytes());
            b[at + 8..at + 40].copy_from_slice(&s.salt);
            b[at + 40..at + 44].copy_from_slice(&s.key_offset.to_be_bytes());
            b[at + 44..at + 48].copy_from_slice(&s.stripes.to_be_bytes());
        }
        Ok(b)
    }

    /// Writes the header (one write, then a sync).
    pub fn write(&mut self, store: &dyn Store) -> Result<()> {
        let b = self.serialize()?;
        store::write_all(store, &b, 0, "luks1 header")?;
        store::sync(store)?;
        self.raw = b;
        Ok(())
    }

    /// Writes key material for `new` into a free slot (or `new.slot`) and enables it.
    /// Returns the slot.
    fn write_keyslot(&mut self, store: &dyn Store, new: &NewKeyslot<'_>) -> Result<usize> {
        if let Some(why) = new.kdf.kind.refusal(NAME, KDF_KINDS) {
            return Err(Error::invalid(why));
        }
        let key = new.key;
        let hash = self.hash()?;
        let i = match new.slot {
            Some(n) if n >= KEYSLOTS => {
                return Err(Error::invalid(format!(
                    "keyslot {n} is out of range (0 to {})",
                    KEYSLOTS - 1
                )))
            }
            Some(n) if self.slots[n].active => {
                return Err(KeyslotError::NoFree(format!("keyslot {n} is in use")).into())
            }
            Some(n) => n,
            None => (0..KEYSLOTS)
                .find(|&n| !self.slots[n].active)
                .ok_or_else(|| {
                    KeyslotError::NoFree(format!("all {KEYSLOTS} keyslots are in use"))
                })?,
        };
        let cipher = self.cipher();
        let mut o = *new.kdf;
        o.hash = hash;
        let kdf = o.resolve(key.len())?;
        let Kdf::Pbkdf2 { iterations, .. } = kdf else {
            unreachable!("pbkdf2 asked for")
        };
        let (salt, material) = seal_material(new.passphrase, key, &kdf, &cipher, key.len(), hash)?;
        // Every slot's area was checked to lie between the header and the data, and the
        // image to hold them all.
        let offset = self.slots[i].key_offset as u64 * 512;
        let image = store::size(store)?;
        if offset + material.len() as u64 > self.slot_end(i).min(image) {
            return Err(Error::truncated(format!(
                "luks1 keyslot {i} material {offset}+{} lies beyond its area or the image \
                 ({image} bytes)",
                material.len()
            )));
        }
        store::write_all(store, &material, offset, "keyslot area")?;
        store::sync(store)?;
        let s = &mut self.slots[i];
        s.stripes = af::STRIPES as u32;
        s.active = true;
        s.state = ACTIVE;
        s.iterations = iterations;
        s.salt.copy_from_slice(&salt);
        self.write(store)?;
        Ok(i)
    }

    /// Disables keyslots (`None`: all), writes the header, then wipes their material.
    fn disable_keyslots(&mut self, store: &dyn Store, which: Option<usize>) -> Result<()> {
        let ids: Vec<usize> = match which {
            Some(n) if n >= KEYSLOTS || !self.slots[n].active => {
                return Err(KeyslotError::NotActive(n).into())
            }
            Some(n) => vec![n],
            None => (0..KEYSLOTS).collect(),
        };
        for &i in &ids {
            let s = &mut self.slots[i];
            s.active = false;
            s.state = DISABLED;
            s.iterations = 0;
            s.salt = [0; 32];
        }
        self.write(store)?;
        let image = store::size(store)?;
        for &i in &ids {
            let off = self.slots[i].key_offset as u64 * 512;
            // Never past the end of the image (the image was checked to hold every slot).
            let end = self.slot_end(i).min(image);
            if off < end {
                store::wipe(store, off, end - off, true)?;
            }
        }
        store::sync(store)
    }

    /// Moves every active keyslot whose material overlaps `ranges` ((offset, length)
    /// pairs) into an inactive slot whose area lies outside them and outside every active
    /// slot's: the material is copied and synced, then one header write enables the new
    /// slot and disables the old one. The old areas are left as they are. Nothing is
    /// written when there are not enough such slots. Only slots' places are reused, and
    /// the header was checked when read (every slot, active or not, lies between the
    /// header and the data, inside the image, apart from the others), so the header
    /// written passes the same checks.
    fn move_keyslots(&mut self, store: &dyn Store, ranges: &[(u64, u64)]) -> Result<()> {
        let span = |i: usize| (self.slots[i].key_offset as u64 * 512, self.slot_end(i));
        let hits =
            |(a, b): (u64, u64), list: &[(u64, u64)]| list.iter().any(|&(s, e)| a < e && s < b);
        let ranges: Vec<(u64, u64)> = ranges
            .iter()
            .map(|&(off, len)| (off, off.saturating_add(len)))
            .collect();
        let mut taken: Vec<(u64, u64)> = (0..KEYSLOTS)
            .filter(|&i| self.slots[i].active)
            .map(span)
            .collect();
        let mut moves = Vec::new();
        for i in (0..KEYSLOTS).filter(|&i| self.slots[i].active && hits(span(i), &ranges)) {
            let j = (0..KEYSLOTS)
                .find(|&j| {
                    !self.slots[j].active
                        && !moves.iter().any(|&(_, t)| t == j)
                        && !hits(span(j), &ranges)
                        && !hits(span(j), &taken)
                })
                .ok_or_else(|| {
                    KeyslotError::NoFree(format!(
                        "no free keyslot outside the areas to vacate for keyslot {i}"
                    ))
                })?;
            taken.push(span(j));
            moves.push((i, j));
        }
        if moves.is_empty() {
            return Ok(());
        }
        for &(i, j) in &moves {
            let (from, end) = span(i);
            store::copy(store, from, store, span(j).0, end - from, "keyslot area")?;
        }
        store::sync(store)?;
        for &(i, j) in &moves {
            self.slots[j] = Slot {
                key_offset: self.slots[j].key_offset,
                ..self.slots[i]
            };
            let s = &mut self.slots[i];
            s.active = false;
            s.state = DISABLED;
            s.iterations = 0;
            s.salt = [0; 32];
        }
        self.write(store)
    }

    /// The volume key digest and its salt (for a conversion to LUKS2).
    pub(crate) fn mk_digest(&self) -> (&[u8; DIGEST_LEN], &[u8; 32]) {
        (&self.mk_digest, &self.mk_salt)
    }

    /// A header of the given fields, every keyslot disabled at offset 0 (a conversion
    /// from LUKS2 fills them with [`Luks1::set_slot`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        cipher: &str,
        hash_spec: &str,
        payload_offset: u32,
        key_bytes: u32,
        mk_digest: [u8; DIGEST_LEN],
        mk_salt: [u8; 32],
        mk_iterations: u32,
        uuid: &str,
    ) -> Result<Luks1> {
        let (name, mode) = cipher.split_once('-').unwrap_or((cipher, ""));
        let mut raw = [0u8; HEADER_LEN];
        raw[..6].copy_from_slice(Magic::Luks.primary());
        let slot = Slot {
            active: false,
            state: DISABLED,
            iterations: 0,
            salt: [0; 32],
            key_offset: 0,
            stripes: af::STRIPES as u32,
        };
        Ok(Luks1 {
            raw,
            magic: Magic::Luks,
            cipher_name: name.to_string(),
            cipher_mode: mode.to_string(),
            hash_spec: hash_spec.to_string(),
            payload_offset,
            key_bytes,
            mk_digest,
            mk_salt,
            mk_iterations,
            uuid: uuid.to_string(),
            slots: [slot; KEYSLOTS],
            repairs: Vec::new(),
        })
    }

    /// Sets keyslot `i`: its material offset (sectors) and, when enabled, its PBKDF2
    /// iterations and salt.
    pub(crate) fn set_slot(&mut self, i: usize, key_offset: u32, enabled: Option<(u32, [u8; 32])>) {
        let s = &mut self.slots[i];
        s.key_offset = key_offset;
        s.stripes = af::STRIPES as u32;
        match enabled {
            Some((iterations, salt)) => {
                s.active = true;
                s.state = ACTIVE;
                s.iterations = iterations;
                s.salt = salt;
            }
            None => {
                s.active = false;
                s.state = DISABLED;
                s.iterations = 0;
                s.salt = [0; 32];
            }
        }
    }

    /// Moves keyslot `i`'s material offset (sectors), nothing else.
    pub(crate) fn set_slot_offset(&mut self, i: usize, key_offset: u32) {
        self.slots[i].key_offset = key_offset;
    }

    /// The layout checks a header must pass to be used (cryptsetup's).
    pub(crate) fn check_layout(&self) -> Result<()> {
        self.check()
    }

    /// The 592 header bytes as [`Luks1::write`] writes them.
    pub(crate) fn bytes(&self) -> Result<[u8; HEADER_LEN]> {
        self.serialize()
    }

    /// Bytes of one keyslot's material, in whole sectors (not aligned to 4 KiB).
    pub(crate) fn slot_material_len(&self) -> u64 {
        self.material_len()
    }

    /// Reads the first bytes of an image and parses them.
    pub fn read(store: &dyn Store) -> Result<Luks1> {
        let mut b = [0u8; HEADER_LEN];
        store::read_exact(store, &mut b, 0, "luks1 header")?;
        Luks1::parse(&b)
    }
}

/// The format's name.
pub const NAME: &str = "luks1";

/// LUKS1 keyslots take PBKDF2 only.
pub(crate) const KDF_KINDS: &[KdfKind] = &[KdfKind::Pbkdf2];

/// Whether the store starts with the LUKS magic and version 1.
fn is_luks1(head: &[u8]) -> bool {
    head.len() >= 8 && Magic::of(head, false).is_some() && head[6..8] == [0, 1]
}

/// Recognises a LUKS1 header: the LUKS magic with version 1.
fn detect(p: &Probe<'_>) -> Detected {
    if !is_luks1(p.head) {
        return None;
    }
    let h = Luks1::parse(p.head).and_then(|h| {
        h.check_size(p.size)?;
        Ok(h)
    });
    Some(h.map(|l| Box::new(l) as Box<dyn Format>))
}

/// The registration of LUKS1 in [`crate::formats::FORMATS`].
pub(crate) const DRIVER: Driver = Driver {
    name: NAME,
    detect,
    salvage: layout::salvage,
};

impl Format for Luks1 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn uuid(&self) -> Option<&str> {
        Some(&self.uuid)
    }

    fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok((0..KEYSLOTS).filter(|&i| self.slots[i].active).collect())
    }

    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        match self.slots.get(slot) {
            Some(s) if s.active => Ok(Kdf::Pbkdf2 {
                hash: self.hash()?,
                iterations: s.iterations,
            }),
            _ => Err(KeyslotError::NotActive(slot).into()),
        }
    }

    fn kdf_kinds(&self) -> &'static [KdfKind] {
        KDF_KINDS
    }

    fn keyslot_area(&self, slot: usize) -> Option<(u64, u64)> {
        let s = self.slots.get(slot)?;
        Some((s.key_offset as u64 * 512, self.material_len()))
    }

    fn needs_repair(&self) -> bool {
        !self.repairs.is_empty()
    }

    /// Writes a header `layout` rebuilt (one write and a sync); a header read as it is
    /// needs nothing.
    fn repair(&mut self, store: &dyn Store) -> Result<Vec<String>> {
        if self.repairs.is_empty() {
            return Ok(Vec::new());
        }
        self.write(store)?;
        Ok(std::mem::take(&mut self.repairs))
    }

    /// Tries the active keyslots in order; returns the volume key and the slot.
    fn unlock_key(
        &self,
        store: &dyn Store,
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
            return Err(no_keyslot(only));
        }
        let candidates = active.into_iter().map(|i| {
            let s = &self.slots[i];
            let material = Material {
                kdf: Kdf::Pbkdf2 {
                    hash,
                    iterations: s.iterations,
                },
                salt: &s.salt,
                area_offset: s.key_offset as u64 * 512,
                area_encryption: &cipher,
                area_key_size: self.key_bytes as usize,
                key_size: self.key_bytes as usize,
                stripes: s.stripes as usize,
                af_hash: hash,
            };
            (i, material)
        });
        try_keyslots(store, passphrase, candidates, |key| self.verify_key(key))
    }

    /// What an open volume looks like for the sector engine.
    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        super::unlocked(self, store, key, keyslot)
    }

    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        let image = store::size(store)?;
        let offset = self.payload_offset as u64 * 512;
        if image < offset {
            return Err(Error::truncated(format!(
                "the data area starts at {offset} but the image has {image} bytes"
            )));
        }
        Ok(VolumeInfo {
            cipher: self.cipher(),
            sector_size: 512,
            iv: IvRule::Units512 { first: 0 },
            data_offset: offset,
            data_size: (image - offset) / 512 * 512,
        })
    }

    /// Whether `key` matches the volume key digest.
    fn verify_key(&self, key: &[u8]) -> Result<bool> {
        let (salt, digest) = (&self.mk_salt, &self.mk_digest);
        Ok(digest_matches(
            self.hash()?,
            key,
            salt,
            self.mk_iterations,
            digest,
        ))
    }

    fn add_keyslot(&mut self, store: &dyn Store, new: &NewKeyslot<'_>) -> Result<usize> {
        self.write_keyslot(store, new)
    }

    /// Moves to a free slot when there is one, like cryptsetup: the new slot is written
    /// before the old one is disabled. With every slot in use, the old slot is disabled
    /// and rewritten in place.
    fn change_keyslot(
        &mut self,
        store: &dyn Store,
        old: usize,
        new: &NewKeyslot<'_>,
    ) -> Result<usize> {
        if (0..KEYSLOTS).any(|i| !self.slots[i].active) {
            let n = self.write_keyslot(store, new)?;
            self.disable_keyslots(store, Some(old))?;
            Ok(n)
        } else {
            self.disable_keyslots(store, Some(old))?;
            let in_place = NewKeyslot {
                slot: Some(old),
                ..*new
            };
            self.write_keyslot(store, &in_place)
        }
    }

    fn remove_keyslots(&mut self, store: &dyn Store, slot: Option<usize>) -> Result<()> {
        self.disable_keyslots(store, slot)
    }

    /// Keyslot areas first (no header points at them yet), then the one header.
    fn backup_pieces(&self, _image_size: u64) -> Vec<Piece> {
        let len = self.metadata_size();
        let hl = HEADER_LEN as u64;
        Piece::in_place(&[(hl, len - hl), (0, hl)])
    }

    /// The material of the active slots.
    fn keyslot_areas(&self) -> Vec<(u64, u64)> {
        (0..KEYSLOTS)
            .filter(|&i| self.slots[i].active)
            .map(|i| {
                let off = self.slots[i].key_offset as u64 * 512;
                (off, self.slot_end(i) - off)
            })
            .collect()
    }

    fn vacate(&mut self, store: &dyn Store, ranges: &[(u64, u64)]) -> Result<()> {
        self.move_keyslots(store, ranges)
    }

    fn report(&self) -> Report {
        let slots = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, k)| Item {
                id: i.to_string(),
                kind: if k.active { "ENABLED" } else { "DISABLED" }.into(),
                fields: if k.active {
                    vec![
                        Field::new("Iterations", k.iterations),
                        Field::new("Key material offset", k.key_offset),
                        Field::new("AF stripes", k.stripes),
                    ]
                } else {
                    Vec::new()
                },
            })
            .collect();
        let mut fields = vec![Field::new("Version", 1)];
        if self.magic != Magic::Luks {
            fields.insert(0, Field::new("Magic", self.magic.describe()));
        }
        Report {
            title: "LUKS header information",
            blank_after_title: true,
            value_column: 16,
            fields: [
                fields,
                vec![
                    Field::new("Cipher name", &self.cipher_name),
                    Field::new("Cipher mode", &self.cipher_mode),
                    Field::new("Hash spec", &self.hash_spec),
                    Field::new("Payload offset", self.payload_offset),
                    Field::new("MK bits", u64::from(self.key_bytes) * 8),
                    Field::new("MK iterations", self.mk_iterations),
                    Field::new("UUID", &self.uuid),
                ],
            ]
            .concat(),
            blank_after_fields: true,
            sections: vec![Section {
                title: None,
                blank_before: false,
                item_prefix: "Key Slot ",
                value_column: 21,
                items: slots,
            }],
        }
    }

    /// A description of the header (LUKS1 has no JSON of its own).
    fn to_json(&self) -> serde_json::Value {
        let slots: Vec<serde_json::Value> = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                serde_json::json!({
                    "slot": i, "active": s.active, "iterations": s.iterations,
                    "key_material_offset": s.key_offset, "stripes": s.stripes,
                })
            })
            .collect();
        serde_json::json!({
            "version": 1, "cipher_name": self.cipher_name, "cipher_mode": self.cipher_mode,
            "hash_spec": self.hash_spec, "payload_offset": self.payload_offset,
            "key_bytes": self.key_bytes, "mk_digest_iterations": self.mk_iterations,
            "uuid": self.uuid, "keyslots": slots,
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
