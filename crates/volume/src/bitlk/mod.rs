//! BitLocker (BITLK), Windows' volume encryption, read from existing volumes: the volume
//! header and the three FVE metadata copies ([`metadata`]), the protectors that open the
//! volume master key and the FVEK it wraps ([`keys`]), and the decrypted view of the
//! data with its virtualised regions ([`data`]). Normal volumes and BitLocker To Go
//! volumes (a FAT discovery volume whose OEM name is `MSWIN4.1` and whose BitLocker GUID
//! sits at byte 424) are recognised.
//!
//! Sources of the facts (formats, constants; no code taken): cryptsetup's
//! `lib/bitlk/bitlk.c` (GitHub mirror mbroz/cryptsetup, commit `38f95b70`), libbde's
//! "BitLocker Drive Encryption (BDE) format" document, Ferguson's "AES-CBC + Elephant
//! diffuser" (Microsoft, 2006). The test images are cryptsetup's (`tests/bitlk-images.tar.xz`).
//!
//! **Unlocking** ([`Bitlk::unlock_key`], through [`Format::unlock_key`]): the passphrase
//! is tried as a password on every password VMK and, when it has the recovery password's
//! form (`NNNNNN-` x 8), on every recovery-password VMK; a startup key (`.BEK` file,
//! given as the one keyfile component, [`Format::set_keyfiles`]) opens the startup-key
//! VMK whose GUID it names; an empty passphrase (the CLI's `--no-passphrase`) opens a
//! clear-key VMK. The "keyslots" are
//! the VMK entries in metadata order. Once a VMK opens, the metadata's own validation
//! (the SHA-256 of the FVE block, wrapped under the VMK) must match the block that was
//! read, then the FVEK is unwrapped. The key returned is the data key in cryptsetup's
//! layout (what `bitlkDump --dump-volume-key` prints).
//!
//! **The data**: [`data::View`] ([`Bitlk::view`]) reads every method through the
//! library. The sector engine (read, write, serve, mount, open) reaches every method
//! through [`data::Translated`], a store that presents BitLocker's relocated boot sector
//! and zeroed metadata as the engine's `aes-xts-plain64` sectors, both ways (AES-CBC
//! volumes under a random XTS key of the process); writes into the metadata ranges are
//! refused.
//!
//! **Not supported**: creating BitLocker volumes and changing protectors (keyslot
//! changes are refused), Vista (BitLocker version 1) volumes, encrypt-on-write ("used
//! space only") and partially converted volumes (refused when the data is opened), TPM
//! and smart-card protectors.

pub mod data;
pub mod keys;
pub mod metadata;

use crate::error::{Error, Result};
use crate::format::dump::{Field, Item, Report, Section};
use crate::format::{Detected, Driver, Format, Piece, Probe, Unlocked, VolumeInfo};
use crate::kdf::{Kdf, KdfKind};
use crate::layout::IvRule;
use crate::store::{self, Store};
use data::{Map, Method, Translated, View};
use metadata::{guid_string, protection, Kind, Metadata, VolumeHeader, STATE_NORMAL};
use sectorcrypt_crypto::aes::Ccm;
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec, IvMode};
use std::any::Any;
use std::sync::Arc;
use zeroize::Zeroizing;

/// The format's name.
pub const NAME: &str = "bitlk";

/// A BitLocker volume's metadata, and the startup key given to open it. `Debug` shows
/// whether a startup key is set, never its bytes.
#[derive(Clone)]
pub struct Bitlk {
    md: Metadata,
    guid: String,
    startup_key: Option<Zeroizing<Vec<u8>>>,
}

impl std::fmt::Debug for Bitlk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bitlk")
            .field("md", &self.md)
            .field("guid", &self.guid)
            .field("startup_key", &self.startup_key.is_some())
            .finish()
    }
}

impl Bitlk {
    /// Reads and checks the metadata of `store`.
    pub fn read(store: &dyn Store) -> Result<Bitlk> {
        let mut head = vec![0u8; 512];
        let n = store::read_head(store, &mut head)?;
        head.truncate(n);
        match VolumeHeader::detect(&head) {
            None => Err(Error::Header(crate::HeaderError::Unrecognised(format!(
                "no BitLocker volume header in {}",
                store.name()
            )))),
            Some(h) => Bitlk::from_header(store, h?),
        }
    }

    fn from_header(store: &dyn Store, header: VolumeHeader) -> Result<Bitlk> {
        let md = Metadata::read(store, header)?;
        let guid = guid_string(&md.guid);
        Ok(Bitlk {
            md,
            guid,
            startup_key: None,
        })
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.md
    }

    /// The encryption method.
    pub fn method(&self) -> Result<Method> {
        Method::from_code(self.md.method)
    }

    /// Refuses volumes whose data cannot be read as a whole (conversion running,
    /// encrypt-on-write).
    fn check_data(&self) -> Result<()> {
        if self.md.state != (STATE_NORMAL, STATE_NORMAL) {
            return Err(Error::unsupported(format!(
                "this BitLocker volume is being converted (state {} to {}): only fully \
                 encrypted volumes are supported",
                self.md.state.0, self.md.state.1
            )));
        }
        match self.md.header.kind {
            Kind::Normal => Ok(()),
            Kind::EncryptOnWrite => Err(Error::unsupported(
                "BitLocker \"used space only\" (encrypt-on-write) volumes are not supported",
            )),
            Kind::Unknown => Err(Error::unsupported(
                "this BitLocker volume has an unknown BitLocker GUID in its header",
            )),
        }
    }

    /// The decrypted view of the volume in `store` under the data key `key` (from
    /// [`Format::unlock_key`]).
    pub fn view(&self, store: &dyn Store, key: &[u8]) -> Result<View> {
        self.check_data()?;
        let size = store::size(store)?;
        if size < self.md.volume_size {
            return Err(Error::truncated(format!(
                "{} has {size} bytes, the BitLocker volume {}",
                store.name(),
                self.md.volume_size
            )));
        }
        View::new(self.method()?, key, self.map(size)?)
    }

    /// Where the parts of a view of `size` bytes come from.
    fn map(&self, size: u64) -> Result<Map> {
        Map::new(
            self.md.header.sector_size as usize,
            size,
            self.md.volume_header,
            self.md.fve_offsets,
        )
    }

    /// Opens VMK `n` with whatever protects it and `passphrase`: the VMK, or `None` when
    /// the secret does not open it (or is not of its kind).
    fn open_vmk(&self, n: usize, passphrase: &[u8]) -> Result<Option<Zeroizing<Vec<u8>>>> {
        let vmk = &self.md.vmks[n];
        let salt = || {
            vmk.salt.ok_or_else(|| {
                Error::corrupt(format!(
                    "BitLocker VMK {} has no stretch key salt",
                    guid_string(&vmk.guid)
                ))
            })
        };
        match vmk.protection {
            protection::PASSWORD if !passphrase.is_empty() && self.startup_key.is_none() => {
                let key = match keys::password_key(passphrase, &salt()?) {
                    Ok(k) => k,
                    // Not text: no password opens with it.
                    Err(Error::Invalid(_)) => return Ok(None),
                    Err(e) => return Err(e),
                };
                keys::open_vmk(vmk, &key[..])
            }
            protection::RECOVERY_PASSWORD if self.startup_key.is_none() => {
                match keys::recovery_key(passphrase) {
                    Some(k16) => {
                        keys::open_vmk(vmk, &keys::recovery_password_key(&k16, &salt()?)[..])
                    }
                    None => Ok(None),
                }
            }
            protection::STARTUP_KEY => match &self.startup_key {
                Some(bek) => match keys::startup_key(bek, vmk)? {
                    Some(k) => keys::open_vmk(vmk, &k),
                    None => Ok(None),
                },
                None => Ok(None),
            },
            protection::CLEAR_KEY if passphrase.is_empty() && self.startup_key.is_none() => {
                match &vmk.clear_key {
                    Some(k) => keys::open_vmk(vmk, k),
                    None => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// Checks the FVE block against the hash wrapped under `vmk`, then unwraps the FVEK:
    /// the data key.
    fn data_key(&self, vmk: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
        if let Some(v) = &self.md.validation {
            let ccm = Ccm::new(vmk)?;
            let mut datum = Zeroizing::new(v.data.clone());
            ccm.open(&v.nonce, &[], &mut datum, &v.tag).map_err(|_| {
                Error::corrupt("the BitLocker metadata validation does not open under the VMK")
            })?;
            // size, role, type, flags, hash type (0x2005: SHA-256), unknown, hash.
            let hash_type = datum.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]]));
            if datum.len() < 44 || hash_type != Some(0x2005) {
                return Err(Error::unsupported(format!(
                    "BitLocker metadata validation of hash type {hash_type:x?} is not \
                     supported (0x2005, SHA-256)"
                )));
            }
            if datum[12..44] != self.md.sha256 {
                return Err(Error::corrupt(format!(
                    "the BitLocker FVE metadata (copy {}) fails its validation: its SHA-256 \
                     does not match the one sealed under the volume master key",
                    self.md.copy
                )));
            }
        }
        let wrapped = self
            .md
            .fvek
            .as_ref()
            .ok_or_else(|| Error::corrupt("the BitLocker metadata holds no FVEK"))?;
        let stored = keys::unwrap(vmk, wrapped)?.ok_or_else(|| {
            Error::corrupt("the BitLocker FVEK does not open under the volume master key")
        })?;
        self.method()?.data_key(&stored)
    }

    fn cipher_name(&self) -> String {
        match self.method() {
            Ok(m) => format!("aes-{}", m.mode_name()),
            Err(_) => format!("unknown (0x{:04x})", self.md.method),
        }
    }
}

impl Format for Bitlk {
    fn name(&self) -> &'static str {
        NAME
    }

    fn uuid(&self) -> Option<&str> {
        Some(&self.guid)
    }

    fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok((0..self.md.vmks.len()).collect())
    }

    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        let _ = slot;
        Err(Error::unsupported(
            "BitLocker protectors use BitLocker's own SHA-256 stretch, no PBKDF2 or Argon2",
        ))
    }

    fn kdf_kinds(&self) -> &'static [KdfKind] {
        &[]
    }

    fn unlock_key(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        let _ = store;
        self.method()?;
        let candidates: Vec<usize> = (0..self.md.vmks.len())
            .filter(|&n| slot.is_none_or(|s| s == n))
            .collect();
        if candidates.is_empty() {
            return Err(crate::format::no_keyslot(slot));
        }
        for n in candidates.iter().copied() {
            if let Some(vmk) = self.open_vmk(n, passphrase)? {
                return Ok((self.data_key(&vmk)?, n));
            }
        }
        let kinds: Vec<u16> = candidates
            .iter()
            .map(|&n| self.md.vmks[n].protection)
            .collect();
        let usable = |p: u16| match p {
            protection::PASSWORD | protection::RECOVERY_PASSWORD => {
                self.startup_key.is_none() && !passphrase.is_empty()
            }
            protection::STARTUP_KEY => self.startup_key.is_some(),
            protection::CLEAR_KEY => self.startup_key.is_none() && passphrase.is_empty(),
            _ => false,
        };
        if kinds.iter().any(|&p| usable(p)) {
            return Err(Error::WrongPassphrase);
        }
        let names: Vec<&str> = kinds.iter().map(|&p| protection::name(p)).collect();
        Err(Error::unsupported(format!(
            "none of this BitLocker volume's protectors ({}) opens with what was given \
             (a password or recovery password as the passphrase, a startup key file, or an \
             empty passphrase for a clear key); TPM and smart-card protectors are not \
             supported",
            names.join(", ")
        )))
    }

    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        let info = self.volume_info(store)?;
        let xts = CipherSpec::aes(CipherMode::Xts, IvMode::Plain64);
        let method = self.method()?;
        // Checks the data can be read before the engine is built.
        self.view(store, &key)?;
        let map = self.map(store::size(store)?)?;
        // XTS volumes: the engine works under the data key itself. AES-CBC volumes: under
        // a random XTS key of this process (see `Translated`).
        let engine_key = match method {
            Method::Xts(_) => key.clone(),
            _ => {
                let mut k = Zeroizing::new(vec![0u8; 64]);
                crate::random(&mut k)?;
                k
            }
        };
        let data_key = key.clone();
        let translated_key = engine_key.clone();
        Ok(Unlocked::new(info, xts, key, keyslot)
            .with_engine_key(&engine_key)
            .with_store_map(Arc::new(move |inner| -> Result<Box<dyn Store>> {
                Ok(Box::new(Translated::new(
                    inner,
                    method,
                    &data_key,
                    &translated_key,
                    map.clone(),
                )?))
            })))
    }

    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        let size = store::size(store)?;
        let ss = u64::from(self.md.header.sector_size);
        Ok(VolumeInfo {
            cipher: self.cipher_name(),
            sector_size: ss as usize,
            iv: IvRule::Sectors { first: 0 },
            data_offset: 0,
            data_size: size - size % ss,
        })
    }

    fn verify_key(&self, key: &[u8]) -> Result<bool> {
        Ok(key.len() == self.method()?.key_bits() / 8)
    }

    fn unchangeable(&self) -> Option<Error> {
        Some(not_changed())
    }

    fn set_keyfiles(&mut self, files: Vec<Zeroizing<Vec<u8>>>) -> Result<()> {
        match <[_; 1]>::try_from(files) {
            Ok([bek]) => {
                self.startup_key = Some(bek);
                Ok(())
            }
            Err(files) if files.is_empty() => {
                self.startup_key = None;
                Ok(())
            }
            Err(files) => Err(Error::invalid(format!(
                "a BitLocker volume takes one startup key file, not {}",
                files.len()
            ))),
        }
    }

    /// Without a passphrase (the CLI's `--no-passphrase`), only a clear key opens: the
    /// passphrase given is then empty, which is what selects the clear key.
    fn set_passphrase_component(&mut self, used: bool) -> Result<()> {
        let _ = used;
        Ok(())
    }

    fn backup_pieces(&self, image_size: u64) -> Vec<Piece> {
        let _ = image_size;
        let mut ranges = vec![(0, 512)];
        ranges.extend(self.md.fve_offsets.iter().map(|&o| (o, metadata::FVE_AREA)));
        Piece::in_place(&ranges)
    }

    fn report(&self) -> Report {
        let md = &self.md;
        let (cipher, mode, bits) = match self.method() {
            Ok(m) => ("aes".to_string(), m.mode_name().to_string(), m.key_bits()),
            Err(_) => (format!("unknown (0x{:04x})", md.method), "-".into(), 0),
        };
        let mut items: Vec<Item> = md
            .vmks
            .iter()
            .enumerate()
            .map(|(n, v)| {
                let mut fields = Vec::new();
                if let Some(name) = &v.name {
                    fields.push(Field::new("Name", name));
                }
                fields.push(Field::new("GUID", guid_string(&v.guid)));
                fields.push(Field::new("Protection", protection::describe(v.protection)));
                fields.push(Field::new("Salt", hex(&v.salt.unwrap_or([0; 16]))));
                Item {
                    id: n.to_string(),
                    kind: "VMK".into(),
                    fields,
                }
            })
            .collect();
        if let Some(f) = &md.fvek {
            items.push(Item {
                id: md.vmks.len().to_string(),
                kind: "FVEK".into(),
                fields: vec![Field::new(
                    "Key data size",
                    format!("{} [bytes]", f.data.len()),
                )],
            });
        }
        let mut segments: Vec<Item> = md
            .fve_offsets
            .iter()
            .enumerate()
            .map(|(n, o)| Item {
                id: n.to_string(),
                kind: "FVE metadata area".into(),
                fields: vec![
                    Field::new("Offset", format!("{o} [bytes]")),
                    Field::new("Size", format!("{} [bytes]", metadata::FVE_AREA)),
                ],
            })
            .collect();
        segments.push(Item {
            id: "3".into(),
            kind: "Volume header".into(),
            fields: vec![
                Field::new("Offset", format!("{} [bytes]", md.volume_header.0)),
                Field::new("Size", format!("{} [bytes]", md.volume_header.1)),
                Field::new("Cipher", format!("{cipher}-{mode}")),
            ],
        });
        let mut fields = vec![
            Field::new("Version", md.version),
            Field::new("GUID", &self.guid),
            Field::new("Sector size", format!("{} [bytes]", md.header.sector_size)),
            Field::new("Volume size", format!("{} [bytes]", md.volume_size)),
            Field::new("Created", filetime_iso(md.created)),
            Field::new("Description", md.description.clone().unwrap_or_default()),
            Field::new("Cipher name", cipher),
            Field::new("Cipher mode", mode),
            Field::new("Cipher key", format!("{bits} bits")),
        ];
        if md.header.togo {
            fields.push(Field::new("To Go", "yes"));
        }
        for (n, why) in &md.bad_copies {
            fields.push(Field::new("Skipped copy", format!("{n}: {why}")));
        }
        Report {
            title: "Info for BITLK device.",
            blank_after_title: false,
            value_column: 14,
            fields,
            blank_after_fields: true,
            sections: vec![
                Section {
                    title: Some("Keyslots:"),
                    blank_before: false,
                    item_prefix: " ",
                    value_column: 15,
                    items,
                },
                Section {
                    title: Some("Metadata segments:"),
                    blank_before: true,
                    item_prefix: " ",
                    value_column: 8,
                    items: segments,
                },
            ],
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let md = &self.md;
        let method = self.method().ok();
        serde_json::json!({
            "version": md.version,
            "guid": self.guid,
            "togo": md.header.togo,
            "type": match md.header.kind {
                Kind::Normal => "normal",
                Kind::EncryptOnWrite => "encrypt-on-write",
                Kind::Unknown => "unknown",
            },
            "state": [md.state.0, md.state.1],
            "sector_size": md.header.sector_size,
            "volume_size": md.volume_size,
            "created": filetime_iso(md.created),
            "description": md.description,
            "method": format!("0x{:04x}", md.method),
            "cipher": "aes",
            "cipher_mode": method.map(|m| m.mode_name()),
            "key_bits": method.map(|m| m.key_bits()),
            "vmks": md.vmks.iter().map(|v| serde_json::json!({
                "guid": guid_string(&v.guid),
                "name": v.name,
                "protection": protection::name(v.protection),
                "salt": v.salt.map(|s| hex(&s)),
            })).collect::<Vec<_>>(),
            "fvek_bytes": md.fvek.as_ref().map(|f| f.data.len()),
            "metadata_offsets": md.fve_offsets,
            "metadata_copy_used": md.copy,
            "skipped_copies": md.bad_copies.iter().map(|(n, why)| serde_json::json!({"copy": n, "why": why})).collect::<Vec<_>>(),
            "volume_header": {"offset": md.volume_header.0, "size": md.volume_header.1},
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn not_changed() -> Error {
    Error::unsupported(
        "BitLocker metadata is never changed here: creating volumes, adding, changing or \
         removing protectors and restoring headers are not supported",
    )
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A FILETIME (100 ns since 1601) as UTC `YYYY-MM-DD hh:mm:ss`.
fn filetime_iso(ft: u64) -> String {
    const EPOCH_DIFF: u64 = 11_644_473_600;
    let secs = (ft / 10_000_000).saturating_sub(EPOCH_DIFF);
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn detect(p: &Probe<'_>) -> Detected {
    let header = VolumeHeader::detect(p.head)?;
    Some(
        header.and_then(|h| Bitlk::from_header(p.store, h).map(|b| Box::new(b) as Box<dyn Format>)),
    )
}

/// The registration of BitLocker in [`crate::formats::FORMATS`].
pub(crate) const DRIVER: Driver = Driver {
    name: NAME,
    detect,
    salvage: |_| None,
};
