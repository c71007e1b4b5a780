//! LUKS2 and LUKS1, compatible with cryptsetup (and, for LUKS1, qemu and nbdkit).
//!
//! - [`luks1`], [`luks2`]: each header, behind [`crate::format::Format`] and registered in
//!   [`crate::formats::FORMATS`];
//! - `keyslot.rs`: the keyslot material both versions share (key derivation, area
//!   encryption, the volume key digest, trying keyslots), `af.rs` the anti-forensic
//!   splitter, `fields.rs` binary field access;
//! - [`Magic`] (`magic.rs`): cryptsetup's magic, or librbd's layered-clone magic, which
//!   both versions read, keep on every write, and leave out of their checksums;
//! - [`Rule`] (`rules.rs`): the named rules a header must keep to be used;
//! - [`convert`]: LUKS1 to LUKS2 and back in place, as `cryptsetup convert`;
//! - this file: creating volumes ([`format()`], and [`format_at`] for a detached
//!   header, whose data offset is 0 as cryptsetup's `luksFormat --header` makes it), and
//!   [`Format::unlocked`] of both versions.
//!
//! Every change writes keyslot material before the metadata that points at it and syncs
//! after each step, so a crash leaves a volume that opens with the old passphrases (and
//! the new one once its metadata write completed).
//!
//! The IV rule of both versions is [`IvRule::Units512`](crate::IvRule::Units512): data
//! sector `n` (of `sector_size` bytes) is encrypted with IV number `iv_offset + n *
//! sector_size / 512`.

mod af;
pub mod convert;
mod fields;
mod keyslot;
pub mod luks1;
pub mod luks2;
mod magic;
mod rules;

pub use keyslot::{cipher_spec, ciphers, crypt_area, seal_material};
pub use luks1::Luks1;
pub use luks2::Luks2;
pub use magic::Magic;
pub use rules::Rule;

use crate::error::{Error, Result};
use crate::format::{Format, Header, NewKeyslot, Unlocked};
use crate::hash::HashAlg;
use crate::kdf::{Kdf, KdfKind, KdfOptions};
use crate::store::{self, Placement, Store};
use fields::align_up;
use sectorcrypt_crypto::dmcrypt::{SectorCipher, SectorLayout};
use zeroize::Zeroizing;

/// A random (version 4) UUID in the lowercase text form cryptsetup writes.
pub fn new_uuid() -> Result<String> {
    let mut b = [0u8; 16];
    crate::random(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// The LUKS version to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// LUKS1.
    Luks1,
    /// LUKS2.
    Luks2,
}

impl Version {
    /// `luks1` or `luks2`.
    pub fn name(self) -> &'static str {
        match self {
            Version::Luks1 => luks1::NAME,
            Version::Luks2 => luks2::NAME,
        }
    }

    /// The KDFs its keyslots may use, the default first.
    pub fn kdf_kinds(self) -> &'static [KdfKind] {
        match self {
            Version::Luks1 => luks1::KDF_KINDS,
            Version::Luks2 => luks2::KDF_KINDS,
        }
    }
}

/// What [`format()`] creates. Defaults are cryptsetup 2.6's: LUKS2, aes-xts-plain64, a
/// 512-bit key, Argon2id calibrated to 2 s, 16 MiB of metadata and keyslots.
#[derive(Debug, Clone)]
pub struct FormatOptions {
    /// LUKS1 or LUKS2.
    pub version: Version,
    /// Segment cipher.
    pub cipher: String,
    /// Volume key length in bytes.
    pub key_bytes: usize,
    /// Encryption sector size (LUKS2; LUKS1 is always 512).
    pub sector_size: usize,
    /// KDF of the first keyslot.
    pub kdf: KdfOptions,
    /// LUKS2 label.
    pub label: String,
    /// LUKS2 data offset in bytes (default 16 MiB).
    pub data_offset: Option<u64>,
    /// Aligns the data offset (of an attached header) to this many bytes, a power of two
    /// from 4096, as cryptsetup's `--align-payload` and librbd (which asks for its image's
    /// object size) do: LUKS1's payload starts at the first multiple after the keyslots,
    /// LUKS2's data at the first multiple from 16 MiB (the keyslots area keeps its size).
    /// `None`: the data store's [`Store::object_size`] when it has one, else cryptsetup's
    /// 1 MiB.
    pub data_alignment: Option<u64>,
    /// A UUID to use instead of a random one.
    pub uuid: Option<String>,
    /// LUKS2: the bytes of the two header copies and the keyslots area together (what
    /// cryptsetup's `--luks2-metadata-size` and `--luks2-keyslots-size` add up to), a
    /// multiple of 4096. `None`: 16 MiB for a detached header, up to the data offset for
    /// an attached one.
    pub metadata_size: Option<u64>,
}

impl Default for FormatOptions {
    fn default() -> FormatOptions {
        FormatOptions {
            version: Version::Luks2,
            cipher: "aes-xts-plain64".into(),
            key_bytes: 64,
            sector_size: 512,
            kdf: KdfOptions::default(),
            label: String::new(),
            data_offset: None,
            data_alignment: None,
            uuid: None,
            metadata_size: None,
        }
    }
}

/// The default LUKS2 data offset (metadata + keyslots), as cryptsetup.
pub const LUKS2_DEFAULT_DATA_OFFSET: u64 = 16 << 20;

/// The sector size of a new `version` volume placed as `at` when none is asked for, as
/// cryptsetup 2.6 picks for files: LUKS1 512; LUKS2 4096 when the data area (the data
/// store less the default metadata, or all of it under a detached header) is a whole
/// number of 4096-byte sectors, else 512.
pub fn default_sector_size(version: Version, at: Placement<'_>) -> Result<usize> {
    if version == Version::Luks1 {
        return Ok(512);
    }
    let reserved = if at.is_detached() {
        0
    } else {
        LUKS2_DEFAULT_DATA_OFFSET
    };
    let data = store::size(at.data())?.saturating_sub(reserved);
    Ok(if data > 0 && data.is_multiple_of(4096) {
        4096
    } else {
        512
    })
}

/// Iterations for the volume key digest: PBKDF2 calibrated to 125 ms (cryptsetup's
/// LUKS_MKD_ITERATIONS_MS), at least 1000; 1000 when the keyslot cost is forced (tests).
fn digest_iterations(hash: HashAlg, key_len: usize, forced: bool) -> Result<u32> {
    if forced {
        return Ok(crate::kdf::PBKDF2_MIN_ITERATIONS);
    }
    let mut o = KdfOptions::pbkdf2(hash);
    o.iter_time_ms = 125;
    match o.resolve(key_len)? {
        Kdf::Pbkdf2 { iterations, .. } => Ok(iterations),
        Kdf::Argon2 { .. } => unreachable!("pbkdf2 asked for"),
    }
}

/// A new header in memory: the header, the bytes of its metadata and keyslots, its data
/// offset, its sector size.
type NewHeader = (Box<dyn Format>, u64, u64, u64);

/// A new header of `opts.version` in memory for `key`. A `detached` header keeps the
/// default metadata size and puts the data at offset 0 of the data device (LUKS2: at
/// `opts.data_offset` when given), as cryptsetup does. An attached header's data is
/// aligned to `align` bytes when given (see [`FormatOptions::data_alignment`]).
fn new_header(
    opts: &FormatOptions,
    key: &[u8],
    uuid: &str,
    detached: bool,
    align: Option<u64>,
) -> Result<NewHeader> {
    let forced = opts.kdf.force_iterations.is_some();
    let align = if detached { None } else { align };
    if let Some(a) = align {
        if !a.is_power_of_two() || a < 4096 {
            return Err(Error::invalid(format!(
                "data alignment {a}: it must be a power of two of at least 4096 bytes"
            )));
        }
    }
    match opts.version {
        Version::Luks2 => {
            if !luks2::SECTOR_SIZES.contains(&opts.sector_size) {
                let sizes: Vec<String> =
                    luks2::SECTOR_SIZES.iter().map(|n| n.to_string()).collect();
                return Err(Error::invalid(format!(
                    "sector size {} (must be one of {})",
                    opts.sector_size,
                    sizes.join(", ")
                )));
            }
            let data_offset = match (opts.data_offset, detached) {
                (Some(o), _) => o,
                (None, false) => align_up(LUKS2_DEFAULT_DATA_OFFSET, align.unwrap_or(1)),
                (None, true) => 0,
            };
            let metadata_size = match opts.metadata_size {
                Some(m) if !m.is_multiple_of(4096) || (!detached && m > data_offset) => {
                    return Err(Error::invalid(format!(
                        "a metadata size of {m} bytes: a multiple of 4096, at most the data \
                         offset"
                    )))
                }
                Some(m) => m,
                None if detached || opts.data_offset.is_none() => LUKS2_DEFAULT_DATA_OFFSET,
                None => data_offset,
            };
            if !data_offset.is_multiple_of(4096) {
                return Err(Error::invalid("the data offset must be a multiple of 4096"));
            }
            let h = Luks2::format(&luks2::FormatParams {
                cipher: &opts.cipher,
                volume_key: key,
                sector_size: opts.sector_size,
                label: &opts.label,
                uuid,
                data_offset,
                metadata_size,
                // The volume key's digest under the keyslots' hash, as cryptsetup makes it
                // (`--hash`, sha256 by default).
                digest_iterations: digest_iterations(opts.kdf.hash, key.len(), forced)?,
                hash: opts.kdf.hash,
            })?;
            let meta = h.metadata_size();
            Ok((Box::new(h), meta, data_offset, opts.sector_size as u64))
        }
        Version::Luks1 => {
            if opts.sector_size != 512 {
                return Err(Error::invalid("luks1 has 512-byte sectors only"));
            }
            if !opts.label.is_empty() {
                return Err(Error::invalid("luks1 has no label"));
            }
            if opts.data_offset.is_some() {
                return Err(Error::invalid("luks1 data offset is fixed here"));
            }
            let hash = opts.kdf.hash;
            let iterations = digest_iterations(hash, key.len(), forced)?;
            let mut h = Luks1::format(&opts.cipher, key, hash, uuid, iterations)?;
            if let Some(a) = align {
                h.payload_offset = (align_up(h.metadata_size(), a) / 512) as u32;
            }
            let mut meta = h.payload_offset as u64 * 512;
            if detached {
                // The keyslot areas (all eight, measured while the payload still bounds
                // them) end the header file; the payload starts the data device.
                meta = h.metadata_size();
                h.payload_offset = 0;
            }
            let data_offset = h.payload_offset as u64 * 512;
            Ok((Box::new(h), meta, data_offset, 512))
        }
    }
}

/// [`Format::unlocked`] of both LUKS versions: the data where the header's
/// [`Format::volume_info`] puts it, encrypted with its cipher string mapped onto the
/// crypto core ([`cipher_spec`], which also checks the key length).
fn unlocked(
    header: &dyn Format,
    store: &dyn Store,
    key: Zeroizing<Vec<u8>>,
    keyslot: usize,
) -> Result<Unlocked> {
    let info = header.volume_info(store)?;
    let spec = cipher_spec(&info.cipher, key.len())?;
    Ok(Unlocked::new(info, spec, key, keyslot))
}

/// Formats `store` (which must already be large enough: metadata plus at least one sector
/// of data) and adds keyslot 0 for `passphrase`. `volume_key`: a key to use instead of a
/// random one. Everything up to the data offset is zeroed first, and the signature of
/// every other format known ([`crate::signatures::wipe_signatures`]: GELI metadata in the
/// last sector, a LUKS2 secondary header past the new metadata); the rest of the data
/// area is left as it is.
pub fn format(
    store: &dyn Store,
    opts: &FormatOptions,
    passphrase: &[u8],
    volume_key: Option<&[u8]>,
) -> Result<(Header, Unlocked)> {
    format_at(Placement::Attached(store), opts, passphrase, volume_key)
}

/// [`format()`] of a volume placed as `at`. A detached header's store gets the metadata and
/// keyslots only (zeroed first; a file grows to their size) and the data's store is
/// left as it is: its whole size, from the data offset on, is data.
pub fn format_at(
    at: Placement<'_>,
    opts: &FormatOptions,
    passphrase: &[u8],
    volume_key: Option<&[u8]>,
) -> Result<(Header, Unlocked)> {
    let spec = cipher_spec(&opts.cipher, opts.key_bytes)?;
    let mut key = Zeroizing::new(vec![0u8; opts.key_bytes]);
    match volume_key {
        Some(k) if k.len() != opts.key_bytes => {
            return Err(Error::invalid(format!(
                "the volume key has {} bytes, the key size asks for {}",
                k.len(),
                opts.key_bytes
            )))
        }
        Some(k) => key.copy_from_slice(k),
        None => crate::random(&mut key)?,
    }
    if let Some(why) = opts
        .kdf
        .kind
        .refusal(opts.version.name(), opts.version.kdf_kinds())
    {
        return Err(Error::invalid(why));
    }
    // Reject a bad XTS key (equal halves) now rather than at the first write.
    SectorCipher::new(spec, &key, SectorLayout::new(512, false)?)?;
    let uuid = match &opts.uuid {
        Some(u) => u.clone(),
        None => new_uuid()?,
    };
    let image = store::size(at.data())?;
    let align = opts.data_alignment.or_else(|| at.data().object_size());
    let (mut header, meta, offset, sector) =
        new_header(opts, &key, &uuid, at.is_detached(), align)?;
    if image < offset + sector {
        return Err(Error::invalid(format!(
            "the image has {image} bytes; a {} volume needs at least {} ({offset} of \
             metadata and one sector of data)",
            opts.version.name(),
            offset + sector
        )));
    }
    if !(image - offset).is_multiple_of(sector) {
        return Err(Error::invalid(format!(
            "the data area ({} bytes) is not a multiple of the {sector}-byte sector size",
            image - offset
        )));
    }
    let store = at.header();
    if at.is_detached() {
        // The last byte first: a header device too small fails here, before anything of
        // it is overwritten; a file grows to the header's size.
        store::write_all(store, &[0], meta - 1, "end of the header area")?;
    }
    // Every known format's signature goes (a GELI provider's metadata in the last sector
    // would still be tasted by FreeBSD), on the data's store too when detached.
    crate::signatures::wipe_signatures(store)?;
    if at.is_detached() {
        crate::signatures::wipe_signatures(at.data())?;
    }
    store::wipe(store, 0, meta, false)?;
    store::sync(store)?;
    let first = NewKeyslot {
        key: &key,
        passphrase,
        kdf: &opts.kdf,
        slot: Some(0),
    };
    let slot = header.add_keyslot(store, &first)?;
    let unlocked = header.unlocked(at.data(), key, slot)?;
    Ok((Header::new(header), unlocked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Piece;
    use crate::store::FileStore;

    fn image(version: Version) -> (tempfile::TempDir, FileStore) {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("v.img"))
            .unwrap();
        f.set_len(20 << 20).unwrap();
        let store = FileStore::new(f, "v.img");
        let opts = FormatOptions {
            version,
            kdf: KdfOptions {
                force_iterations: Some(1000),
                ..KdfOptions::pbkdf2(HashAlg::Sha256)
            },
            ..FormatOptions::default()
        };
        format(&store, &opts, b"pass", None).unwrap();
        (dir, store)
    }

    fn pieces(h: &Header) -> Vec<(u64, u64)> {
        h.format()
            .backup_pieces(20 << 20)
            .iter()
            .map(|&Piece { image, backup, len }| {
                assert_eq!(image, backup);
                (image, len)
            })
            .collect()
    }

    /// Restore writes keyslot areas, then (LUKS2) the secondary copy, then the primary,
    /// covering the metadata exactly once.
    #[test]
    fn restore_writes_keyslots_then_secondary_then_primary() {
        let (_d, f) = image(Version::Luks2);
        let h = Header::read(&f).unwrap();
        let len = h.backup_len(20 << 20);
        assert_eq!(
            pieces(&h),
            vec![(32768, len - 32768), (16384, 16384), (0, 16384)]
        );
        let (_d, f) = image(Version::Luks1);
        let h = Header::read(&f).unwrap();
        let len = h.backup_len(20 << 20);
        assert_eq!(pieces(&h), vec![(592, len - 592), (0, 592)]);
    }
}
