//! FileVault 2 (FVAULT2), macOS' volume encryption on CoreStorage, read from existing
//! volumes as cryptsetup 2.6 reads them: `dump`, `test-key`, `read`, and through the
//! engine `serve`, `mount` and `open`, all read-only.
//!
//! Sources of the facts (formats, constants; no code taken): cryptsetup's
//! `lib/fvault2/fvault2.c` (GitHub mirror mbroz/cryptsetup, commit `38f95b70`) and
//! libfvde's "FileVault Drive Encryption (FVDE)" format document (libyal/libfvde,
//! `documentation/`). The test image is cryptsetup's (`tests/fvault2-images.tar.xz`).
//!
//! **The metadata** ([`metadata`]), every integer little-endian:
//! - The physical volume header, 512 bytes at byte 0: a CRC-32C at 0 of bytes 8..512
//!   with its seed `0xffffffff` at 4, version 1 at 8, the physical volume size at 64, the
//!   signature `CS` at 88, the block size at 96, the disk label's block number at 104, the
//!   metadata key's size (16) at 168 and the key at 176, the physical volume UUID at 304.
//! - The disk label, one 8 KiB block (checksummed the same way) whose u32 at 220 is the
//!   offset of the volume groups descriptor from the block's start; that descriptor holds
//!   the number of encrypted metadata blocks at 8 and their first block number at 32.
//! - The encrypted metadata: 8 KiB blocks in AES-XTS-128 under the key metadata key ||
//!   physical volume UUID, block `i` (from 0) decrypted with the tweak `i`; an all-zero
//!   block ends them. Each decrypted block is checksummed and typed (u16 at 10). Type
//!   `0x0019` holds an XML plist (offset and size at 112 and 116) with the
//!   "encryption context": base64 `PassphraseWrappedKEKStruct` (284 bytes: the PBKDF2
//!   salt at 8, the wrapped KEK at 32, the iterations at 168) and
//!   `KEKWrappedVolumeKeyStruct` (256 bytes: the wrapped volume key at 8). Type `0x001a`
//!   holds a plist (offset and size at 128 and 132) with the logical volume's size
//!   (`com.apple.corestorage.lv.size`, hexadecimal) and family UUID
//!   (`com.apple.corestorage.lv.familyUUID`). Type `0x0305` has the logical volume's first
//!   block at 104.
//! - Offsets are bounded to the first GiB of the store, as cryptsetup bounds them.
//!
//! **Unlocking** ([`Format::unlock_key`]): PBKDF2-HMAC-SHA256 of the passphrase with the
//! salt and iterations gives a 16-byte key; AES key unwrap (RFC 3394) of the KEK under
//! it (a failing integrity check is a wrong passphrase), then of the volume key's first
//! 16 bytes under the KEK; the second 16 bytes are the first 16 of SHA-256(first half ||
//! family UUID). The 32 bytes are the `aes-xts-plain64` key cryptsetup's `fvault2Dump
//! --dump-volume-key` prints. There is one "keyslot", 0.
//!
//! **The data**: the logical volume, at its offset and of its size, in AES-XTS-128 with
//! 512-byte sectors numbered from the start of the logical volume (dm-crypt's `plain64`,
//! IV offset 0). The engine reads it as it is, always opened read-only
//! ([`Unlocked::with_read_only`]: `serve` exports it read-only, `mount` shows a read-only
//! file), and the store under it refuses writes too (cryptsetup opens FileVault 2
//! read-only as well).
//!
//! **Detection**: a store whose first 512 bytes carry `CS` at 88 *and* a matching
//! checksum is FileVault 2 for certain (a false match is a 2^-32 chance on top of the
//! signature) and is detected (the registry entry); a damaged header is then not detected, and
//! `--type fvault2` ([`crate::formats::Requested::Fvault2`]) reads it to say what is wrong.
//!
//! **Not supported**: writing, changing the passphrase, recovery keys and institutional
//! keys (cryptsetup has neither), CoreStorage volumes that are not encrypted, Fusion
//! drives (several physical volumes), APFS (FileVault on APFS is another format).

pub mod metadata;

use crate::error::{Error, Result};
use crate::format::dump::{Field, Report};
use crate::format::{Detected, Driver, Format, Piece, Probe, Unlocked, VolumeInfo};
use crate::hash::HashAlg;
use crate::kdf::{Kdf, KdfKind};
use crate::layout::IvRule;
use crate::store::{self, Store};
use metadata::{uuid_string, Metadata, VolumeHeader, BLOCK_LEN, HEADER_LEN};
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec, IvMode};
use sectorcrypt_crypto::pbkdf::Prf;
use sha2::{Digest, Sha256};
use std::any::Any;
use std::sync::Arc;
use zeroize::Zeroizing;

/// The format's name.
pub const NAME: &str = "fvault2";
/// Bytes per data sector.
const SECTOR: u64 = 512;
/// Bytes of the volume key (AES-XTS-128).
pub const KEY_LEN: usize = 32;

/// A FileVault 2 volume's metadata.
#[derive(Debug, Clone)]
pub struct Fvault2 {
    md: Metadata,
    uuid: String,
}

impl Fvault2 {
    /// Reads and checks the metadata of `store`, saying what is wrong when its volume
    /// header is damaged (what `--type fvault2` reads). Never writes.
    pub fn read(store: &dyn Store) -> Result<Fvault2> {
        let mut head = [0u8; HEADER_LEN];
        store::read_exact(store, &mut head, 0, "CoreStorage volume header")?;
        let header = VolumeHeader::parse(&head).map_err(|e| match e {
            Error::Header(crate::HeaderError::Unrecognised(why)) => {
                Error::Header(crate::HeaderError::Unrecognised(format!(
                    "{} is not a FileVault 2 volume: {why}",
                    store.name()
                )))
            }
            e => e,
        })?;
        Fvault2::from_header(store, header)
    }

    fn from_header(store: &dyn Store, header: VolumeHeader) -> Result<Fvault2> {
        let md = Metadata::read(store, header)?;
        let uuid = uuid_string(&md.family_uuid);
        Ok(Fvault2 { md, uuid })
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.md
    }

    /// The volume key from `passphrase`, or `None` when it is not the passphrase.
    fn volume_key(&self, passphrase: &[u8]) -> Result<Option<Zeroizing<Vec<u8>>>> {
        use sectorcrypt_crypto::aes::key_unwrap;
        use sectorcrypt_crypto::Error as CryptoError;
        let mut pk = Zeroizing::new([0u8; 16]);
        Prf::Sha256.pbkdf2(passphrase, &self.md.salt, self.md.iterations, &mut pk[..]);
        let kek = match key_unwrap(&pk[..], &self.md.wrapped_kek) {
            Ok(k) => k,
            Err(CryptoError::AuthenticationFailed) => return Ok(None),
            Err(e) => return Err(Error::corrupt(format!("the FileVault 2 KEK: {e}"))),
        };
        let half = key_unwrap(&kek, &self.md.wrapped_volume_key).map_err(|e| {
            Error::corrupt(format!(
                "the FileVault 2 volume key does not open under the key-encrypting key the \
                 passphrase opened ({e}): the encryption context is damaged"
            ))
        })?;
        let mut key = Zeroizing::new(Vec::with_capacity(KEY_LEN));
        key.extend_from_slice(&half);
        let mut h = Sha256::new();
        h.update(&half[..]);
        h.update(self.md.family_uuid);
        key.extend_from_slice(&h.finalize()[..16]);
        Ok(Some(key))
    }

    /// The data's byte range, checked against the size of `store`.
    fn data_range(&self, store: &dyn Store) -> Result<(u64, u64)> {
        let size = store::size(store)?;
        let (offset, len) = (
            self.md.data_offset,
            self.md.data_size - self.md.data_size % SECTOR,
        );
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::corrupt("the FileVault 2 logical volume ends past 2^64 bytes"))?;
        if size < end {
            return Err(Error::truncated(format!(
                "{} has {size} bytes; the FileVault 2 logical volume ends at byte {end}",
                store.name()
            )));
        }
        Ok((offset, len))
    }
}

impl Format for Fvault2 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn uuid(&self) -> Option<&str> {
        Some(&self.uuid)
    }

    fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok(vec![0])
    }

    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        if slot != 0 {
            return Err(crate::format::no_keyslot(Some(slot)));
        }
        Ok(Kdf::Pbkdf2 {
            hash: HashAlg::Sha256,
            iterations: self.md.iterations,
        })
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
        if slot.is_some_and(|s| s != 0) {
            return Err(crate::format::no_keyslot(slot));
        }
        match self.volume_key(passphrase)? {
            Some(k) => Ok((k, 0)),
            None => Err(Error::WrongPassphrase),
        }
    }

    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        let info = self.volume_info(store)?;
        let spec = CipherSpec::aes(CipherMode::Xts, IvMode::Plain64);
        // Read-only twice over: the engine refuses writes, and its store would too.
        Ok(Unlocked::new(info, spec, key, keyslot)
            .with_read_only()
            .with_store_map(Arc::new(|inner| {
                Ok(Box::new(ReadOnly(inner)) as Box<dyn Store>)
            })))
    }

    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        let (data_offset, data_size) = self.data_range(store)?;
        Ok(VolumeInfo {
            cipher: "aes-xts-plain64".into(),
            sector_size: SECTOR as usize,
            iv: IvRule::Units512 { first: 0 },
            data_offset,
            data_size,
        })
    }

    fn verify_key(&self, key: &[u8]) -> Result<bool> {
        // Nothing in the metadata is sealed under the volume key: only its length can be
        // checked.
        Ok(key.len() == KEY_LEN)
    }

    fn unchangeable(&self) -> Option<Error> {
        Some(read_only())
    }

    fn backup_pieces(&self, image_size: u64) -> Vec<Piece> {
        let _ = image_size;
        let h = &self.md.header;
        let label = h.disk_label_block * u64::from(h.block_size);
        let (start, count) = self.md.encrypted_metadata;
        Piece::in_place(&[
            (0, HEADER_LEN as u64),
            (label, BLOCK_LEN as u64),
            (start, count * BLOCK_LEN as u64),
        ])
    }

    fn report(&self) -> Report {
        let md = &self.md;
        let salt: Vec<String> = md.salt.iter().map(|b| format!("{b:02x}")).collect();
        Report {
            title: "Header information for FVAULT2 device.",
            blank_after_title: false,
            value_column: 23,
            fields: vec![
                Field::new("Physical volume UUID", uuid_string(&md.header.uuid)),
                Field::new("Family UUID", &self.uuid),
                Field::new(
                    "Logical volume offset",
                    format!("{} [bytes]", md.data_offset),
                ),
                Field::new("Logical volume size", format!("{} [bytes]", md.data_size)),
                Field::new("Cipher", "aes"),
                Field::new("Cipher mode", "xts-plain64"),
                Field::new("Cipher key", format!("{} bits", KEY_LEN * 8)),
                Field::new("PBKDF2 hash", "sha256"),
                Field::new("PBKDF2 iterations", md.iterations),
                Field::new("PBKDF2 salt", salt.join(" ")),
                Field::new("Block size", format!("{} [bytes]", md.header.block_size)),
                Field::new(
                    "Physical volume size",
                    format!("{} [bytes]", md.header.size),
                ),
            ],
            blank_after_fields: false,
            sections: Vec::new(),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let md = &self.md;
        let hex: String = md.salt.iter().map(|b| format!("{b:02x}")).collect();
        serde_json::json!({
            "physical_volume_uuid": uuid_string(&md.header.uuid),
            "physical_volume_size": md.header.size,
            "block_size": md.header.block_size,
            "family_uuid": self.uuid,
            "logical_volume": {"offset": md.data_offset, "size": md.data_size},
            "cipher": "aes",
            "cipher_mode": "xts-plain64",
            "key_bits": KEY_LEN * 8,
            "sector_size": SECTOR,
            "pbkdf2": {"hash": "sha256", "iterations": md.iterations, "salt": hex},
            "encrypted_metadata": {
                "offset": md.encrypted_metadata.0,
                "blocks": md.encrypted_metadata.1,
            },
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn read_only() -> Error {
    Error::unsupported(
        "FileVault 2 volumes are read-only here, as in cryptsetup: creating them, changing \
         their passphrase and restoring their metadata are not supported",
    )
}

/// The data's store under the engine: reads pass, writes are refused.
#[derive(Debug)]
struct ReadOnly(Box<dyn Store>);

impl Store for ReadOnly {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn size(&self) -> std::io::Result<u64> {
        self.0.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_at(buf, offset)
    }

    fn read_owned(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, std::io::Result<()>) {
        self.0.read_owned(buf, range, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let _ = (buf, offset);
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "FileVault 2 volumes are read-only (as in cryptsetup)",
        ))
    }

    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
}

fn detect(p: &Probe<'_>) -> Detected {
    let header = VolumeHeader::detect(p.head)?;
    Some(
        header
            .and_then(|h| Fvault2::from_header(p.store, h).map(|f| Box::new(f) as Box<dyn Format>)),
    )
}

/// The registration of FileVault 2 in [`crate::formats::FORMATS`].
pub(crate) const DRIVER: Driver = Driver {
    name: NAME,
    detect,
    salvage: |_| None,
};
