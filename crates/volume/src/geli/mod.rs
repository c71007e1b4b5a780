//! GELI, FreeBSD's disk encryption (`geli(8)`): the metadata in the provider's last
//! sector ([`metadata`]), its keys ([`keys`]), what the metadata means for the data
//! (cipher, tags, size: `data.rs`), the [`Format`] implementation and the creation of new
//! providers ([`init`]).
//!
//! A provider here is an image: its last 512-byte sector (or, when none is there, its
//! last 4096-byte sector: a provider of 4 KiB sectors) holds the metadata; the decrypted
//! provider is everything before that sector, rounded down to whole GELI sectors
//! (`sys/geom/eli/g_eli.h`, `eli_metadata_softc`). Each GELI sector's IV comes from its
//! byte offset in the decrypted provider
//! ([`IvRule::ByteOffset`](crate::layout::IvRule::ByteOffset)); the key changes every
//! 2^20 sectors ([`keys::ZoneKeys`]). Metadata of versions 0 to 7 is read; the
//! pre-version-4 rule "IV offset in the host's byte order" (`G_ELI_FLAG_NATIVE_BYTE_ORDER`)
//! is taken as little-endian (FreeBSD on x86 and arm64): the metadata is little-endian on
//! every CPU, so nothing in it tells a provider made on a big-endian machine apart, and
//! such a provider's data does not decrypt here. [`onetime`] is `geli onetime` (no
//! metadata on disk); [`clear`] is `geli clear`.
//!
//! Authenticated providers (`geli init -a`, FreeBSD `g_eli.c` `g_eli_create` and
//! `g_eli_integrity.c`) store each GELI sector as several provider sectors of `tag |
//! ciphertext | padding` ([`SectorMetadata`]): the decrypted provider is the provider less
//! its metadata sector, in whole stored sectors. Their units are encrypted under keys
//! derived from HMAC(data key, 0x10), tagged under HMAC(data key, 0x11), and before
//! version 6 every unit uses zone 0's key (`G_ELI_FLAG_FIRST_KEY`). NULL encryption is
//! opened with authentication only (its units are then in the clear, still tagged).
//! Camellia-CBC (128, 192 or 256 bits) is AES-CBC's construction over Camellia: the same
//! keys and IVs (`g_eli_crypto_ivgen`'s default case). Blowfish and 3DES encryption and
//! HMAC/MD5 tags are refused with a clear error.

mod data;
pub mod init;
pub mod keys;
pub mod metadata;
pub mod onetime;
pub mod resize;

pub use data::mac_algorithm;

use crate::error::{Error, KeyslotError, Result};
use crate::format::dump::{Field, Item, Report, Section};
use crate::format::VolumeInfo;
use crate::format::{no_keyslot, Detected, Driver, Format, NewKeyslot, Piece, Probe, Unlocked};
use crate::hash::HashAlg;
use crate::kdf::{Kdf, KdfKind};
use crate::layout::SectorMetadata;
use crate::store::{self, Store};
use metadata::{algo, flags, hex, Metadata, MAX_MKEYS};
use std::any::Any;
use zeroize::Zeroizing;

/// The format's name.
pub const NAME: &str = "geli";
/// Provider sector sizes whose last sector is searched for metadata, in order.
pub const PROVIDER_SECTORS: [u64; 2] = [512, 4096];
/// Times `kill` overwrites the metadata sector (`G_ELI_OVERWRITES`).
pub const OVERWRITES: usize = 5;

/// A GELI provider's metadata and where it was found.
#[derive(Debug, Clone)]
pub struct Geli {
    md: Metadata,
    /// Bytes per sector of the provider (512 or 4096).
    provider_sector: u64,
    /// Keyfiles (geli's `-k`), in order, for the user key.
    keyfiles: Vec<Zeroizing<Vec<u8>>>,
    /// Whether the passphrase is part of the user key (geli's `-p` clears it).
    passphrase: bool,
}

/// The user key of a master-key slot to write (`geli setkey`'s `-K`, `-J`, `-P`): its
/// keyfiles in order, and its passphrase, `None` for a key of keyfiles alone.
/// `Debug` shows how many keyfiles there are and whether a passphrase is given.
pub struct NewUserKey<'a> {
    /// The keyfiles' contents, in order.
    pub keyfiles: &'a [&'a [u8]],
    /// The passphrase; `None`: no passphrase component.
    pub passphrase: Option<&'a [u8]>,
}

impl std::fmt::Debug for NewUserKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewUserKey")
            .field("keyfiles", &self.keyfiles.len())
            .field("passphrase", &self.passphrase.is_some())
            .finish()
    }
}

impl Geli {
    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.md
    }

    /// Bytes per sector of the provider the metadata was found for (512 or 4096).
    pub fn provider_sector(&self) -> u64 {
        self.provider_sector
    }

    /// A header for metadata `md` on a provider of `provider_sector`-byte sectors.
    pub fn new(md: Metadata, provider_sector: u64) -> Geli {
        Geli {
            md,
            provider_sector,
            keyfiles: Vec::new(),
            passphrase: true,
        }
    }

    /// Where the metadata sector of an image of `size` bytes is.
    fn metadata_offset(&self, size: u64) -> u64 {
        ((size / self.provider_sector) * self.provider_sector).saturating_sub(self.provider_sector)
    }

    /// The provider's size as the metadata must name it, for an image of `size` bytes.
    fn provider_size(&self, size: u64) -> u64 {
        (size / self.provider_sector) * self.provider_sector
    }

    /// Refuses a provider whose size is not the one its metadata names (geli refuses to
    /// attach it too). With `backup_ok`, a store holding the metadata sector alone (a
    /// `header backup` file used as a detached header, `--header`) passes: its provider
    /// is the data's store, checked when the data is opened.
    fn check_provider(&self, store: &dyn Store, backup_ok: bool) -> Result<()> {
        let have = store::size(store)?;
        if backup_ok && have == self.provider_sector {
            return Ok(());
        }
        let size = self.provider_size(have);
        if size != self.md.provsize {
            return Err(Error::invalid(format!(
                "GELI provider size mismatch: the metadata names {} bytes, {} has {size}",
                self.md.provsize,
                store.name()
            )));
        }
        Ok(())
    }

    /// The master-key slots in use.
    fn slots(&self) -> Vec<usize> {
        (0..MAX_MKEYS)
            .filter(|&n| self.md.keys & (1 << n) != 0)
            .collect()
    }

    /// `geli setkey` through the format interface: `new.passphrase` with this header's
    /// keyfiles (see [`Geli::setkey`]).
    fn set_key(&mut self, store: &dyn Store, n: usize, new: &NewKeyslot<'_>) -> Result<usize> {
        let files: Vec<Zeroizing<Vec<u8>>> = self.keyfiles.clone();
        let files: Vec<&[u8]> = files.iter().map(|k| &k[..]).collect();
        let user = NewUserKey {
            keyfiles: &files,
            passphrase: Some(new.passphrase),
        };
        self.setkey(store, n, new.key, new.kdf, &user)
    }

    /// `geli setkey` (`lib/geom/eli/geom_eli.c`, `eli_setkey_detached`): seals the master
    /// key `mkey` into slot `n` for the user key `new`, the salt kept. The iteration count
    /// is kept unless `kdf` forces one; it is shared by both slots, so changing it needs
    /// the other slot unused, unless it was -1 (geli's rule); a provider that had
    /// keyfiles only (-1) gets a calibrated count when the new key has a passphrase. A key
    /// of keyfiles alone leaves the count as it is. Same key and count: the same bytes (a
    /// CBC slot under a zero IV).
    pub fn setkey(
        &mut self,
        store: &dyn Store,
        n: usize,
        mkey: &[u8],
        kdf: &crate::kdf::KdfOptions,
        new: &NewUserKey<'_>,
    ) -> Result<usize> {
        let cipher = self.cipher()?;
        self.check_provider(store, true)?;
        if n >= MAX_MKEYS {
            return Err(Error::invalid(format!(
                "GELI has master-key slots 0 and 1, not {n}"
            )));
        }
        let iterations = match kdf.force_iterations {
            Some(i) => i32::try_from(i)
                .map_err(|_| Error::invalid(format!("{i} PBKDF2 iterations is too many")))?,
            None if self.md.iterations >= 0 || new.passphrase.is_none() => self.md.iterations,
            None => match kdf.resolve(keys::KEY_LEN)? {
                Kdf::Pbkdf2 { iterations, .. } => i32::try_from(iterations).unwrap_or(i32::MAX),
                _ => unreachable!("GELI keys are derived with PBKDF2 only"),
            },
        };
        if iterations != self.md.iterations
            && self.md.iterations != -1
            && self.md.keys & !(1u8 << n) != 0
        {
            return Err(Error::invalid(format!(
                "changing the iteration count ({} to {iterations}) needs the other GELI master-key \
                 slot unused: both slots share it",
                self.md.iterations
            )));
        }
        let user = keys::user_key(new.keyfiles, new.passphrase, &self.md.salt, iterations)?;
        let mut md = self.md.clone();
        let camellia = cipher.slots_in_camellia();
        md.mkeys[n] = keys::seal_slot(mkey, &user[..], cipher.slot_key_bytes, camellia)?;
        md.keys |= 1 << n;
        md.iterations = iterations;
        let updated = Geli { md, ..self.clone() };
        updated.write(store)?;
        self.md = updated.md;
        Ok(n)
    }

    /// `geli configure`: the metadata with its flags word set to `flags` (the rest kept,
    /// the MD5 recomputed), written in place of the old. Returns whether anything changed
    /// (nothing is written otherwise, as geli writes nothing then).
    pub fn set_flags(&mut self, store: &dyn Store, flags: u32) -> Result<bool> {
        if flags == self.md.flags {
            return Ok(false);
        }
        let mut md = self.md.clone();
        md.flags = flags;
        let updated = Geli { md, ..self.clone() };
        updated.write(store)?;
        self.md = updated.md;
        Ok(true)
    }

    /// Writes the metadata sector of `store` (the rest of the sector zeroed) and syncs.
    fn write(&self, store: &dyn Store) -> Result<()> {
        let size = store::size(store)?;
        let mut sector = vec![0u8; self.provider_sector as usize];
        sector[..metadata::ENCODED_LEN].copy_from_slice(&self.md.encode());
        store::write_all(
            store,
            &sector,
            self.metadata_offset(size),
            "the GELI metadata",
        )?;
        store::sync(store)
    }
}

impl Format for Geli {
    fn name(&self) -> &'static str {
        NAME
    }

    fn uuid(&self) -> Option<&str> {
        None
    }

    fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok(self.slots())
    }

    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        if !self.slots().contains(&slot) {
            return Err(no_keyslot(Some(slot)));
        }
        Ok(Kdf::Pbkdf2 {
            hash: HashAlg::Sha512,
            iterations: self.md.iterations.max(0) as u32,
        })
    }

    fn kdf_kinds(&self) -> &'static [KdfKind] {
        &[KdfKind::Pbkdf2]
    }

    fn unlock_key(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        let cipher = self.cipher()?;
        self.check_provider(store, true)?;
        let candidates: Vec<usize> = self
            .slots()
            .into_iter()
            .filter(|&n| slot.is_none_or(|s| s == n))
            .collect();
        if candidates.is_empty() {
            return Err(no_keyslot(slot));
        }
        let files: Vec<&[u8]> = self.keyfiles.iter().map(|k| &k[..]).collect();
        let pass = self.passphrase.then_some(passphrase);
        let user = keys::user_key(&files, pass, &self.md.salt, self.md.iterations)?;
        for n in candidates {
            if let Some(mkey) = keys::open_slot(
                &self.md.mkeys[n],
                &user[..],
                cipher.slot_key_bytes,
                cipher.slots_in_camellia(),
            )? {
                return Ok((mkey, n));
            }
        }
        Err(Error::WrongPassphrase)
    }

    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        self.check_provider(store, false)?;
        self.open_data(key, keyslot, self.data_size())
    }

    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        self.check_provider(store, false)?;
        Ok(self.info_of(&self.cipher()?, self.data_size()))
    }

    fn verify_key(&self, key: &[u8]) -> Result<bool> {
        // A master key carries no digest of its own: slots check it against the user key.
        Ok(key.len() == 2 * keys::KEY_LEN)
    }

    fn add_keyslot(&mut self, store: &dyn Store, new: &NewKeyslot<'_>) -> Result<usize> {
        let free: Vec<usize> = (0..MAX_MKEYS)
            .filter(|&n| self.md.keys & (1 << n) == 0)
            .collect();
        let n = match new.slot {
            Some(n) if n >= MAX_MKEYS => {
                return Err(Error::invalid(format!(
                    "GELI has master-key slots 0 and 1, not {n}"
                )))
            }
            Some(n) => n,
            None => *free.first().ok_or_else(|| {
                KeyslotError::NoFree("both GELI master-key slots are in use".into())
            })?,
        };
        self.set_key(store, n, new)
    }

    fn change_keyslot(
        &mut self,
        store: &dyn Store,
        old: usize,
        new: &NewKeyslot<'_>,
    ) -> Result<usize> {
        self.set_key(store, old, new)
    }

    fn remove_keyslots(&mut self, store: &dyn Store, slot: Option<usize>) -> Result<()> {
        match slot {
            Some(n) => {
                if !self.slots().contains(&n) {
                    return Err(no_keyslot(Some(n)));
                }
                // geli delkey: the slot's bit cleared, its material replaced by random bytes.
                let mut md = self.md.clone();
                md.keys &= !(1u8 << n);
                crate::random(&mut md.mkeys[n])?;
                let updated = Geli { md, ..self.clone() };
                updated.write(store)?;
                self.md = updated.md;
                Ok(())
            }
            None => {
                // geli kill: the metadata sector overwritten G_ELI_OVERWRITES times.
                let size = store::size(store)?;
                let at = self.metadata_offset(size);
                let mut junk = vec![0u8; self.provider_sector as usize];
                for _ in 0..OVERWRITES {
                    crate::random(&mut junk)?;
                    store::write_all(store, &junk, at, "the GELI metadata")?;
                    store::sync(store)?;
                }
                self.md.keys = 0;
                Ok(())
            }
        }
    }

    fn set_keyfiles(&mut self, files: Vec<Zeroizing<Vec<u8>>>) -> Result<()> {
        self.keyfiles = files;
        Ok(())
    }

    fn set_passphrase_component(&mut self, used: bool) -> Result<()> {
        self.passphrase = used;
        Ok(())
    }

    fn backup_pieces(&self, image_size: u64) -> Vec<Piece> {
        vec![Piece {
            image: self.metadata_offset(image_size),
            backup: 0,
            len: self.provider_sector,
        }]
    }

    fn check_restore_target(&self, image_size: u64) -> Result<()> {
        let size = self.provider_size(image_size);
        if size != self.md.provsize {
            return Err(Error::invalid(format!(
                "GELI provider size mismatch: the backup names {} bytes, the image has {size}",
                self.md.provsize
            )));
        }
        Ok(())
    }

    fn report(&self) -> Report {
        let md = &self.md;
        let mut fields = vec![
            Field::new("magic", "GEOM::ELI"),
            Field::new("version", md.version),
            Field::new("flags", format!("0x{:x} ({})", md.flags, md.flag_names())),
            Field::new("ealgo", algo::name(md.ealgo)),
            Field::new("keylen", md.keylen),
        ];
        if md.flags & flags::AUTH != 0 {
            fields.push(Field::new("aalgo", algo::name(md.aalgo)));
        }
        fields.extend([
            Field::new("provsize", md.provsize),
            Field::new("sectorsize", md.sectorsize),
            Field::new("keys", format!("0x{:02x}", md.keys)),
            Field::new("iterations", md.iterations),
            Field::new("Salt", hex(&md.salt)),
        ]);
        let items = (0..MAX_MKEYS)
            .map(|n| Item {
                id: n.to_string(),
                kind: if md.keys & (1 << n) != 0 {
                    "ENABLED"
                } else {
                    "DISABLED"
                }
                .into(),
                fields: Vec::new(),
            })
            .collect();
        Report {
            title: "GELI metadata",
            blank_after_title: false,
            value_column: 12,
            fields,
            blank_after_fields: true,
            sections: vec![Section {
                title: Some("Master-key slots:"),
                blank_before: false,
                item_prefix: "  ",
                value_column: 12,
                items,
            }],
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let md = &self.md;
        serde_json::json!({
            "magic": "GEOM::ELI",
            "version": md.version,
            "flags": md.flags,
            "ealgo": algo::name(md.ealgo),
            "keylen": md.keylen,
            "aalgo": if md.flags & flags::AUTH != 0 { Some(algo::name(md.aalgo)) } else { None },
            "provsize": md.provsize,
            "sectorsize": md.sectorsize,
            "keys": md.keys,
            "iterations": md.iterations,
            "salt": hex(&md.salt),
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Finds and decodes the metadata of `store` (`size` bytes): `None` when neither the last
/// 512-byte nor the last 4096-byte sector starts with GELI's magic.
pub fn locate(store: &dyn Store, size: u64) -> Option<Result<Geli>> {
    for prov in PROVIDER_SECTORS {
        if size < prov {
            continue;
        }
        let at = (size / prov) * prov - prov;
        let mut sector = vec![0u8; metadata::ENCODED_LEN];
        if let Err(e) = store::read_exact(store, &mut sector, at, "the GELI metadata") {
            return Some(Err(e));
        }
        if metadata::has_magic(&sector) {
            return Some(Metadata::decode(&sector).and_then(|md| check(md, prov)));
        }
    }
    None
}

/// `geli clear` (`g_metadata_clear`): zeroes the sector holding GELI's magic, the last
/// 512-byte or 4096-byte one of `store`, once, without decoding it (metadata whose MD5
/// is wrong is cleared too). Returns where the cleared sector was; writes nothing when
/// neither sector starts with the magic.
pub fn clear(store: &dyn Store) -> Result<u64> {
    let size = store::size(store)?;
    for prov in PROVIDER_SECTORS {
        if size < prov {
            continue;
        }
        let at = (size / prov) * prov - prov;
        let mut sector = vec![0u8; metadata::ENCODED_LEN];
        store::read_exact(store, &mut sector, at, "the GELI metadata")?;
        if metadata::has_magic(&sector) {
            let zeros = vec![0u8; prov as usize];
            store::write_all(store, &zeros, at, "the GELI metadata")?;
            store::sync(store)?;
            return Ok(at);
        }
    }
    Err(Error::invalid(format!(
        "no GELI metadata in the last sector of {}",
        store.name()
    )))
}

/// The structural checks of decoded metadata: a sector size the data can be cut in.
fn check(md: Metadata, provider_sector: u64) -> Result<Geli> {
    let ss = u64::from(md.sectorsize);
    if !ss.is_power_of_two() || ss < provider_sector || ss > 65536 {
        return Err(Error::corrupt(format!(
            "GELI sector size {ss} is not a power of two from the provider's {provider_sector} \
             bytes to 65536"
        )));
    }
    if md.provsize < provider_sector {
        return Err(Error::corrupt(format!(
            "GELI provider size {} is smaller than one {provider_sector}-byte sector",
            md.provsize
        )));
    }
    Ok(Geli::new(md, provider_sector))
}

fn detect(p: &Probe<'_>) -> Detected {
    locate(p.store, p.size).map(|r| r.map(|g| Box::new(g) as Box<dyn Format>))
}

/// The registration of GELI in [`crate::formats::FORMATS`].
pub(crate) const DRIVER: Driver = Driver {
    name: NAME,
    detect,
    salvage: |_| None,
};
