//! The on-disk formats behind one interface.
//!
//! Each format is a module (`luks::luks1`, `luks::luks2`, `geli`, `bitlk`) that implements
//! [`Format`] for its parsed header and offers one [`Driver`]: a name and a `detect`
//! function that looks at the first bytes and the size of a store and, when the store is
//! of its format, reads and validates the header. The registry
//! ([`crate::formats::FORMATS`], above this module and the formats, so that neither
//! imports the other) lists the drivers; [`Header::read`] asks them in order and the first
//! that recognises the store wins. Everything else the commands do goes through [`Header`]
//! (a `Box<dyn Format>` with the format-neutral steps around it, `header.rs`) and
//! [`Unlocked`], so a new format is a new module and one line in the registry: the CLI's
//! commands never name a format.
//!
//! A format without a signature (VeraCrypt/TrueCrypt, [`crate::tcrypt`]) has no detector:
//! it is read only when named, through [`crate::formats::read_as`].
//!
//! Why a trait object rather than an enum: a header is read once per command and used a
//! few times, so a virtual call costs nothing measurable, and a new format then touches no
//! `match` outside its own module. The data path never sees a format: an [`Unlocked`]
//! volume gives the engine a [`Layout`].
//!
//! The rules every format keeps:
//! - reading and validating never writes, and nothing is written through a header that
//!   failed validation: every operation refuses it, naming the rule it breaks; only
//!   `dump` shows what is left of it ([`Salvaged`]), and [`repair_header`](crate::formats::repair_header)
//!   rebuilds it where the format can do so without guessing;
//! - every change is crash-safe: new keyslot material is written and synced before the
//!   metadata that points at it, old material is wiped after the metadata that drops it;
//! - all I/O goes through the [`Store`]; allocations are bounded by what the input
//!   itself allows, never by a size a header claims;
//! - wrong passphrases are [`Error::WrongPassphrase`]; messages hold no secret.
//!
//! Header backups ([`backup_header`], [`restore_header`]) copy the pieces a format names
//! ([`Format::backup_pieces`]); a restore holds back the bytes under the current header's
//! keyslot areas until the backup's header is in place (`restore.rs` argues the order),
//! so that a crash leaves a volume that opens with the old header or the restored one.
//! [`Header::dump`] renders the format's [`dump::Report`].
//!
//! A volume's header and data share one store or, with a detached header, sit in two
//! ([`Placement`](crate::store::Placement)): [`Header::unlock_at`] and
//! [`restore_header_at`] take the placement, keyslots being read and written in the
//! header's store and the data measured in the data's. An attached header whose data
//! offset lies inside its own metadata (a detached header used on its own) opens its
//! keyslots but not its data ([`Unlocked::engine`] refuses it).

mod auth;
pub mod dump;
mod header;
mod restore;

pub use header::{backup_header, restore_header, restore_header_at, Header};

use crate::error::{Error, KeyslotError, Result};
use crate::kdf::{Kdf, KdfKind, KdfOptions};
use crate::layout::{Geometry, IvRule, KeySource, Layout};
use crate::store::Store;
use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher};
use sectorcrypt_crypto::secret::SecretBytes;
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use zeroize::Zeroizing;

/// A parsed, validated header of one format.
pub trait Format: fmt::Debug + Send + Sync + Any {
    /// The format's name as users write it: `luks1`, `luks2`.
    fn name(&self) -> &'static str;

    /// The volume's UUID, when the format has one.
    fn uuid(&self) -> Option<&str>;

    /// Numbers of the active keyslots.
    fn active_keyslots(&self) -> Result<Vec<usize>>;

    /// How keyslot `slot` turns a passphrase into its key.
    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf>;

    /// The KDFs new keyslots may use, the default first.
    fn kdf_kinds(&self) -> &'static [KdfKind];

    /// Tries the keyslots (only `slot` when given) with `passphrase`; returns the volume
    /// key and the keyslot that opened.
    fn unlock_key(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)>;

    /// The volume opened with its `key` (known to be right: from keyslot `keyslot`, or
    /// just made): where the data is and how it is encrypted. `store` is where the data is
    /// (the header's own store, or the data device of a detached header): its size bounds
    /// the data.
    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked>;

    /// Where the data is and how it is encrypted, as [`Format::unlocked`] opens it, read
    /// from the header alone (no key): what `dump` and scripts are shown.
    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo>;

    /// Whether `key` is this volume's key.
    fn verify_key(&self, key: &[u8]) -> Result<bool>;

    /// Why this format's metadata is never written here (a foreign format, read as it
    /// is), or `None`. When it is some, the keyslot changes and header restores below
    /// refuse with it by default.
    fn unchangeable(&self) -> Option<Error> {
        None
    }

    /// Writes the keyslot `new` (its key already verified); returns its number. The
    /// default: refused ([`Format::unchangeable`]).
    fn add_keyslot(&mut self, store: &dyn Store, new: &NewKeyslot<'_>) -> Result<usize> {
        let _ = (store, new);
        Err(self.refusal())
    }

    /// Replaces keyslot `old` (whose passphrase was checked) with `new`, crash-safe;
    /// returns the keyslot now holding the new passphrase. The default: refused.
    fn change_keyslot(
        &mut self,
        store: &dyn Store,
        old: usize,
        new: &NewKeyslot<'_>,
    ) -> Result<usize> {
        let _ = (store, old, new);
        Err(self.refusal())
    }

    /// Destroys keyslot `slot`, or every keyslot when `None` (metadata first, then the
    /// material). The default: refused.
    fn remove_keyslots(&mut self, store: &dyn Store, slot: Option<usize>) -> Result<()> {
        let _ = (store, slot);
        Err(self.refusal())
    }

    /// The refusal of a change to the metadata: [`Format::unchangeable`]'s reason, or
    /// that the format does not support it.
    fn refusal(&self) -> Error {
        self.unchangeable().unwrap_or_else(|| {
            Error::unsupported(format!("{} keyslots cannot be changed here", self.name()))
        })
    }

    /// Where keyslot `slot`'s material is (offset, length), when the format keeps it in
    /// an area of its own.
    fn keyslot_area(&self, slot: usize) -> Option<(u64, u64)> {
        let _ = slot;
        None
    }

    /// Whether a redundant copy of the header is damaged or stale.
    fn needs_repair(&self) -> bool {
        false
    }

    /// Rewrites damaged or stale copies from the good one; returns what was done.
    fn repair(&mut self, store: &dyn Store) -> Result<Vec<String>> {
        let _ = store;
        Ok(Vec::new())
    }

    /// The pieces a header backup holds, in the order a restore writes them, for an image
    /// of `image_size` bytes.
    fn backup_pieces(&self, image_size: u64) -> Vec<Piece>;

    /// Where the material of the keyslots this header names lies, as (offset, length)
    /// pairs in the image: what opening reads besides the header itself. The default:
    /// nowhere (keys held in the header).
    fn keyslot_areas(&self) -> Vec<(u64, u64)> {
        Vec::new()
    }

    /// Moves the material of every keyslot whose area overlaps `ranges` ((offset,
    /// length) pairs) to free space outside them, crash-safe: the copies are written and
    /// synced before the metadata that points at them, so every passphrase keeps opening
    /// at any point. The old areas are left as they are, for the caller to overwrite (a
    /// header restore). Writes nothing when it cannot move them all (no room: a
    /// [`KeyslotError::NoFree`]). The default: nothing to move (no keyslot areas).
    fn vacate(&mut self, store: &dyn Store, ranges: &[(u64, u64)]) -> Result<()> {
        let _ = (store, ranges);
        Ok(())
    }

    /// Whether this header (read from a backup) can be restored onto an image of
    /// `image_size` bytes. The default: refused when [`Format::unchangeable`], else the
    /// image must be larger than the end of the backup's pieces (room for data after the
    /// metadata).
    fn check_restore_target(&self, image_size: u64) -> Result<()> {
        if let Some(e) = self.unchangeable() {
            return Err(e);
        }
        let end = backup_extent(&self.backup_pieces(image_size));
        if image_size <= end {
            return Err(Error::invalid(format!(
                "the image has {image_size} bytes, too small for a header whose data starts \
                 at {end}"
            )));
        }
        Ok(())
    }

    /// Keyfiles that form the user key beside the passphrase (GELI's `-k`), in order.
    /// The default: refused (the format has no such key components).
    fn set_keyfiles(&mut self, files: Vec<Zeroizing<Vec<u8>>>) -> Result<()> {
        let _ = files;
        Err(Error::unsupported(format!(
            "{} volumes take no keyfile components",
            self.name()
        )))
    }

    /// Whether a passphrase is part of the key (GELI's `-p`: the keyfiles alone when
    /// not). The default: a passphrase is always part of it.
    fn set_passphrase_component(&mut self, used: bool) -> Result<()> {
        if used {
            return Ok(());
        }
        Err(Error::unsupported(format!(
            "{} volumes are always opened with a passphrase",
            self.name()
        )))
    }

    /// What `dump` shows.
    fn report(&self) -> dump::Report;

    /// The metadata as JSON (the format's own document where it has one).
    fn to_json(&self) -> serde_json::Value;

    /// For downcasting to the concrete type (tests, format-specific tools).
    fn as_any(&self) -> &dyn Any;
}

/// A keyslot to write: the volume key it holds (verified against the volume first), the
/// passphrase that will open it, how its KDF cost is chosen and, when asked for, its
/// number. `Debug` shows the number only.
pub struct NewKeyslot<'a> {
    /// The volume key.
    pub key: &'a [u8],
    /// The passphrase.
    pub passphrase: &'a [u8],
    /// The KDF and its cost.
    pub kdf: &'a KdfOptions,
    /// The keyslot number asked for (the first free one otherwise).
    pub slot: Option<usize>,
}

impl fmt::Debug for NewKeyslot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewKeyslot")
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

/// A range of a header backup: `len` bytes at `image` in the image, at `backup` in the
/// backup file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Offset in the image.
    pub image: u64,
    /// Offset in the backup file.
    pub backup: u64,
    /// Length.
    pub len: u64,
}

impl Piece {
    /// Pieces at the same offsets in the image and in the backup (a header at the start
    /// of the image), from (offset, length) pairs in restore order.
    pub fn in_place(ranges: &[(u64, u64)]) -> Vec<Piece> {
        ranges
            .iter()
            .map(|&(at, len)| Piece {
                image: at,
                backup: at,
                len,
            })
            .collect()
    }
}

/// What a store looks like to the detectors.
#[derive(Debug)]
pub struct Probe<'a> {
    /// The store.
    pub store: &'a dyn Store,
    /// Its first bytes (up to [`PROBE_BYTES`]; fewer when the store is shorter).
    pub head: &'a [u8],
    /// Its size.
    pub size: u64,
}

/// Bytes at the start of a store handed to every detector.
pub const PROBE_BYTES: usize = 4096;

/// What a detector says of a store: `None` when the store is not of its format;
/// otherwise the header read and validated, or why it cannot be (truncated, corrupt).
pub type Detected = Option<Result<Box<dyn Format>>>;

/// A registered format.
#[derive(Debug)]
pub struct Driver {
    /// The format's name.
    pub name: &'static str,
    /// Recognises the format and reads the header.
    pub detect: fn(&Probe<'_>) -> Detected,
    /// For a store of this format whose header `detect` refused: what is left of it.
    /// `None` when the store holds no header of this format.
    pub salvage: fn(&Probe<'_>) -> Option<Salvaged>,
}

/// What is left of a header that failed validation: what `dump` shows (the fields that
/// could be read and why the header cannot be used), the metadata as JSON when any was
/// readable, and the header rebuilt, when the format can rebuild it without guessing.
pub struct Salvaged {
    /// The report, with the problems.
    pub report: dump::Report,
    /// The metadata as found.
    pub json: Option<serde_json::Value>,
    /// A valid header made from the damaged one, whose [`Format::repair`] writes it.
    pub rebuilt: Option<Box<dyn Format>>,
}

impl fmt::Debug for Salvaged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Salvaged")
            .field("rebuilt", &self.rebuilt.is_some())
            .finish_non_exhaustive()
    }
}

/// The end of the furthest piece in a backup file: its length.
fn backup_extent(pieces: &[Piece]) -> u64 {
    pieces.iter().map(|p| p.backup + p.len).max().unwrap_or(0)
}

/// An unlocked volume: what the engine needs, and the volume key for keyslot changes. The
/// key is held in secret memory (locked, out of core dumps, wiped on drop) and never
/// printed.
pub struct Unlocked {
    volume_key: SecretBytes,
    /// The cipher string, e.g. `aes-xts-plain64`.
    pub cipher: String,
    /// The cipher, parsed.
    pub spec: CipherSpec,
    /// Bytes per sector.
    pub sector_size: usize,
    /// How each sector's IV number is formed.
    pub iv: IvRule,
    /// Byte offset of the data in the image.
    pub data_offset: u64,
    /// Bytes of data (whole sectors).
    pub data_size: u64,
    /// The keyslot that opened.
    pub keyslot: usize,
    /// Bytes at the start of the data's store that the header occupies (its metadata and
    /// keyslots when attached; 0 when detached or unknown).
    header_end: u64,
    /// Per-zone keys (sectors per zone, the source), when the volume key is not the data
    /// key itself (GELI).
    zones: Option<(u64, Arc<dyn KeySource>)>,
    /// Tags stored with each sector (`auth.rs`).
    auth: Option<auth::UnitAuth>,
    /// How the data's store is presented to the engine, when not as it is (see
    /// [`Unlocked::with_store_map`]).
    store_map: Option<StoreMap>,
    /// The key the engine's sectors are under, when not the volume key (the store map
    /// presents the data under it).
    engine_key: Option<SecretBytes>,
    /// Whether the format only reads this volume's data (FileVault 2).
    read_only: bool,
    /// Why, when the format says (the engine's write refusal says it).
    read_only_why: Option<&'static str>,
    /// What of the data writes may not touch (an outer VeraCrypt volume's protected
    /// hidden volume).
    fence: Option<crate::engine::WriteFence>,
}

/// Makes the store the engine reads a volume's data through from the data's own store
/// (BitLocker: the ciphertext of its relocated and zeroed regions translated).
pub type StoreMap = Arc<dyn Fn(Box<dyn Store>) -> Result<Box<dyn Store>> + Send + Sync>;

impl fmt::Debug for Unlocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unlocked")
            .field("cipher", &self.cipher)
            .field("key_bits", &(self.volume_key.len() * 8))
            .field("sector_size", &self.sector_size)
            .field("iv", &self.iv)
            .field("data_offset", &self.data_offset)
            .field("data_size", &self.data_size)
            .field("keyslot", &self.keyslot)
            .field("header_end", &self.header_end)
            .finish_non_exhaustive()
    }
}

/// What a format knows of an opened volume, for [`Unlocked::new`].
#[derive(Debug, Clone)]
pub struct VolumeInfo {
    /// The cipher string.
    pub cipher: String,
    /// Bytes per sector.
    pub sector_size: usize,
    /// The IV rule.
    pub iv: IvRule,
    /// Byte offset of the data.
    pub data_offset: u64,
    /// Bytes of data (whole sectors).
    pub data_size: u64,
}

impl Unlocked {
    /// An unlocked volume of one key for all its sectors.
    pub fn new(
        info: VolumeInfo,
        spec: CipherSpec,
        volume_key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Unlocked {
        Unlocked {
            volume_key: SecretBytes::from_slice(&volume_key),
            cipher: info.cipher,
            spec,
            sector_size: info.sector_size,
            iv: info.iv,
            data_offset: info.data_offset,
            data_size: info.data_size,
            keyslot,
            header_end: 0,
            zones: None,
            auth: None,
            store_map: None,
            engine_key: None,
            read_only: false,
            read_only_why: None,
            fence: None,
        }
    }

    /// The same volume, whose data the format only reads: its engine is always opened
    /// read-only ([`Unlocked::engine`]), so exports and mounts of it say so.
    pub fn with_read_only(mut self) -> Unlocked {
        self.read_only = true;
        self
    }

    /// [`Unlocked::with_read_only`], with the reason the engine's write refusal gives.
    pub fn with_read_only_because(mut self, why: &'static str) -> Unlocked {
        self.read_only = true;
        self.read_only_why = Some(why);
        self
    }

    /// The same volume whose engine refuses writes that touch `fence` (plaintext byte
    /// ranges of the data: a protected hidden volume inside an outer VeraCrypt volume).
    pub fn with_fence(mut self, fence: crate::engine::WriteFence) -> Unlocked {
        self.fence = Some(fence);
        self
    }

    /// The fence of [`Unlocked::with_fence`], if any.
    pub fn fence(&self) -> Option<&crate::engine::WriteFence> {
        self.fence.as_ref()
    }

    /// Whether the format only reads this volume's data ([`Unlocked::with_read_only`]).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The same volume whose engine works under `key` instead of the volume key: the
    /// store map presents the data encrypted under it (a format whose own sector cipher
    /// the engine does not have; the key lives as long as the `Unlocked`).
    pub fn with_engine_key(mut self, key: &[u8]) -> Unlocked {
        self.engine_key = Some(SecretBytes::from_slice(key));
        self
    }

    /// The key of the engine's sectors: the volume key, or the engine key.
    fn sector_key(&self) -> &[u8] {
        match &self.engine_key {
            Some(k) => k,
            None => &self.volume_key,
        }
    }

    /// The same volume whose data the engine reads and writes through the store `map`
    /// makes of the data's store.
    pub fn with_store_map(mut self, map: StoreMap) -> Unlocked {
        self.store_map = Some(map);
        self
    }

    /// The same volume with one key per zone of `zone_sectors` sectors, made by `source`
    /// (the volume key then only identifies the volume: keyslots hold it, the data does
    /// not use it directly).
    pub fn with_zones(mut self, zone_sectors: u64, source: Arc<dyn KeySource>) -> Unlocked {
        self.zones = Some((zone_sectors, source));
        self
    }

    /// Where the data would overlap the header that shares its store: `Some((data
    /// offset, end of the header's metadata and keyslots))` for an attached header whose
    /// data offset lies inside its own metadata (a detached header used on its own).
    pub fn data_inside_header(&self) -> Option<(u64, u64)> {
        // A volume whose data the engine reads through a store map (whose metadata lies
        // inside its data, read as the format shows it) has no data offset to speak of.
        (self.store_map.is_none() && self.data_offset < self.header_end)
            .then_some((self.data_offset, self.header_end))
    }

    /// Whether every sector carries an authentication tag that is checked when read (a
    /// GELI provider with the AUTH flag). For GELI the flag itself is not authenticated:
    /// metadata with AUTH cleared (and its MD5 recomputed) opens without tag checks.
    pub fn authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// The volume key.
    pub fn volume_key(&self) -> &[u8] {
        &self.volume_key
    }

    /// Where the data is and how its sectors are cut.
    pub fn geometry(&self) -> Geometry {
        Geometry {
            sector_size: self.sector_size,
            data_offset: self.data_offset,
            size: self.data_size,
            iv: self.iv,
            metadata: self.auth.as_ref().map(|a| a.metadata),
        }
    }

    /// The sector map of the data area, for the engine.
    pub fn layout(&self) -> Result<Layout> {
        if let Some(auth) = &self.auth {
            return auth.layout(self);
        }
        match &self.zones {
            None => Layout::single(self.geometry(), self.spec, self.sector_key()),
            Some((zone_sectors, source)) => Layout::zoned(
                self.geometry(),
                self.spec,
                *zone_sectors,
                Box::new(Arc::clone(source)),
            ),
        }
    }

    /// A sector cipher under the volume key whose IV step matches the IV rule (apply
    /// [`IvRule::number`] for a sector's first IV number): an independent path to the
    /// data, for tests and tools.
    pub fn sector_cipher(&self) -> Result<SectorCipher> {
        if self.zones.is_some() || self.auth.is_some() {
            return Err(Error::unsupported(
                "this volume has one key per zone or tagged sectors: use its layout",
            ));
        }
        let layout = self.iv.cipher_layout(self.sector_size)?;
        Ok(SectorCipher::new(self.spec, self.sector_key(), layout)?)
    }

    /// The engine over this volume's data area in `store` (the data's store it was
    /// unlocked with, opened read-write unless `opts.read_only` or the format only reads
    /// it, [`Unlocked::read_only`]), with the volume's write fence ([`Unlocked::with_fence`]).
    /// Refused when the data
    /// would overlap the header that shares the store ([`Unlocked::data_inside_header`]):
    /// writing it would destroy the header.
    pub fn engine(
        &self,
        store: Box<dyn Store>,
        opts: crate::engine::EngineOptions,
    ) -> Result<crate::engine::Volume> {
        if let Some((offset, end)) = self.data_inside_header() {
            return Err(Error::invalid(format!(
                "the data offset {offset} lies inside the header's {end} bytes of metadata \
                 and keyslots in {}: a reduced data offset is allowed only for a detached \
                 header, used beside its data device",
                store.name()
            )));
        }
        let store = match &self.store_map {
            None => store,
            Some(map) => map(store)?,
        };
        let opts = crate::engine::EngineOptions {
            read_only: opts.read_only || self.read_only,
            ..opts
        };
        let volume = crate::engine::Volume::new(store, self.layout()?, opts)?;
        let volume = match self.read_only_why {
            Some(why) => volume.with_read_only_reason(why),
            None => volume,
        };
        Ok(match &self.fence {
            Some(f) => volume.with_fence(f.clone()),
            None => volume,
        })
    }
}

/// [`KeyslotError::NotActive`] or, without a slot asked for, [`KeyslotError::NoneActive`].
pub(crate) fn no_keyslot(only: Option<usize>) -> Error {
    match only {
        Some(n) => KeyslotError::NotActive(n).into(),
        None => KeyslotError::NoneActive.into(),
    }
}
