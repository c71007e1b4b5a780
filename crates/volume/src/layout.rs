//! The sector map: what the engine needs to know of a volume's data area, and nothing of
//! its format. For each logical sector it says
//! - **where it lives**: sector `s` is stored at byte `data_offset + s * stored_len` of the
//!   store ([`Layout::position`]); `stored_len` is the sector size, or more for sectors
//!   stored with tags;
//! - **which key encrypts it**: one key for the whole volume ([`Layout::single`]), or one
//!   key per zone of `zone_sectors` sectors ([`Layout::zoned`]; GELI changes keys every
//!   2^20 sectors), each made on first use by a [`KeySource`] and kept in a cache of up
//!   to [`ZONE_CACHE`] zones, least recently used out first;
//! - **which IV rule applies** ([`IvRule`]): the sector number counted in 512-byte units
//!   (LUKS, dm-crypt's default), in sectors (dm-crypt's `iv_large_sectors`), or the
//!   sector's byte offset (GELI's XTS tweak);
//! - **per-sector tags** ([`SectorMetadata`], [`Layout::authenticated`]): each sector is
//!   stored as several units of `tag | ciphertext | padding`, each unit encrypted on its
//!   own (its IV and zone from the unit's own position) and tagged by the crypto core's
//!   [`SectorMac`](sectorcrypt_crypto::mac::SectorMac) (encrypt-then-MAC). [`Layout::seal`] and [`Layout::open`] take runs of
//!   whole sectors; `open` checks every tag of the run before it decrypts anything
//!   (`layout/auth.rs`).
//!
//! [`Layout::encrypt`], [`Layout::decrypt`] and [`Layout::encrypt_to`] take a run of whole
//! sectors and cut it into the fewest cipher calls the keys allow: one call for a single
//! key (the hot path: the crypto core prepares the IVs of many sectors and runs one kernel
//! over all of them, whatever the IV rule, since its [`SectorLayout`] advances the IV
//! number by the rule's step), one call per zone for zoned keys. Nothing is allocated; a
//! zoned layout takes a lock and clones an `Arc` once per zone of a run.

mod auth;

pub use crate::error::AuthenticationFailed;

use crate::error::{Error, Result};
use crate::lock;
use sectorcrypt_crypto::dmcrypt::{CipherSpec, IvStep, SectorCipher, SectorLayout};
use sectorcrypt_crypto::mac::MacAlgorithm;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use zeroize::Zeroizing;

/// How a sector's IV number is formed (the crypto core turns the number into the IV or
/// tweak with the cipher's own generator: `plain64`, `plain`, `essiv:sha256`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IvRule {
    /// `first + s * sector_size / 512`: 512-byte units, whatever the sector size (LUKS1,
    /// LUKS2 whose metadata has no large-IV flag, dm-crypt's default).
    Units512 {
        /// IV number of sector 0 (LUKS2's `iv_tweak`).
        first: u64,
    },
    /// `first + s`: one per sector (dm-crypt's `iv_large_sectors`).
    Sectors {
        /// IV number of sector 0.
        first: u64,
    },
    /// `s * sector_size`: the sector's byte offset in the data area (GELI's XTS tweak and
    /// CBC IV input).
    ByteOffset,
}

impl IvRule {
    /// The IV number of sector `sector` of `sector_size` bytes (wrapping, as dm-crypt).
    pub fn number(self, sector: u64, sector_size: usize) -> u64 {
        let ss = sector_size as u64;
        match self {
            IvRule::Units512 { first } => first.wrapping_add(sector.wrapping_mul(ss / 512)),
            IvRule::Sectors { first } => first.wrapping_add(sector),
            IvRule::ByteOffset => sector.wrapping_mul(ss),
        }
    }

    /// The crypto core's sector layout for a cipher serving this rule: the same IV step,
    /// so that a call given sector `s`'s IV number derives every following sector's.
    pub(crate) fn cipher_layout(self, sector_size: usize) -> Result<SectorLayout> {
        let step = match self {
            IvRule::Units512 { .. } => IvStep::Units512,
            IvRule::Sectors { .. } => IvStep::Sector,
            IvRule::ByteOffset => IvStep::Bytes,
        };
        Ok(SectorLayout::with_step(sector_size, step)?)
    }
}

/// Sectors stored with authentication tags: each sector takes
/// [`SectorMetadata::units_per_sector`] units of `unit_len` bytes, each unit holding a tag,
/// then up to [`SectorMetadata::data_per_unit`] bytes of the sector's ciphertext, then
/// padding (GELI's authenticated providers, FreeBSD `g_eli_integrity.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectorMetadata {
    /// Bytes per stored unit (the underlying device's sector: 512 or 4096).
    pub unit_len: usize,
    /// The tag of each unit.
    pub mac: MacAlgorithm,
}

impl SectorMetadata {
    /// Ciphertext bytes a unit holds: what its tag leaves, rounded down to 16 (whole
    /// cipher blocks).
    pub fn data_per_unit(&self) -> usize {
        let left = self.unit_len.saturating_sub(self.mac.tag_len());
        left - left % 16
    }

    /// Units per sector of `sector_size` bytes (the last unit holds the rest).
    pub fn units_per_sector(&self, sector_size: usize) -> usize {
        sector_size.div_ceil(self.data_per_unit().max(1))
    }

    /// Bytes a sector of `sector_size` bytes takes in the store.
    pub fn stored_sector_len(&self, sector_size: usize) -> usize {
        self.units_per_sector(sector_size) * self.unit_len
    }

    /// Plaintext bytes that fit in `bytes` of store, in whole sectors of `sector_size`.
    pub fn data_size(&self, bytes: u64, sector_size: usize) -> u64 {
        bytes / self.stored_sector_len(sector_size) as u64 * sector_size as u64
    }
}

/// Where the data area is and how its sectors are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per sector, as the crypto core's [`SectorLayout`] takes them: a multiple of
    /// 16 up to 65536, of 512 with [`IvRule::Units512`].
    pub sector_size: usize,
    /// Byte offset of sector 0 in the store.
    pub data_offset: u64,
    /// Bytes of plaintext: a whole number of sectors.
    pub size: u64,
    /// The IV rule.
    pub iv: IvRule,
    /// Tags stored with each sector, if any (only in [`Layout::authenticated`] layouts).
    pub metadata: Option<SectorMetadata>,
}

/// Makes the key of a zone (GELI derives each zone's key from the master key). Its
/// `Debug` must not show key material.
pub trait KeySource: fmt::Debug + Send + Sync {
    /// The key of zone `zone` (sectors `zone * zone_sectors ..`). Zeroized on drop.
    fn zone_key(&self, zone: u64) -> Result<Zeroizing<Vec<u8>>>;
}

impl<T: KeySource + ?Sized> KeySource for Arc<T> {
    fn zone_key(&self, zone: u64) -> Result<Zeroizing<Vec<u8>>> {
        (**self).zone_key(zone)
    }
}

type CryptoResult = std::result::Result<(), sectorcrypt_crypto::Error>;

/// Zone ciphers kept after first use: GELI's kernel keeps 8192 zone keys
/// (`kern.geom.eli.key_cache_limit`), enough that random I/O over a provider of 512-byte
/// sectors up to 4 TiB makes each zone's key once.
pub const ZONE_CACHE: usize = 8192;

/// The ciphers one key makes: the sector cipher (in an authenticated layout, the cipher of
/// a unit's full share of ciphertext) and, in an authenticated layout, the cipher of a
/// sector's last unit, whose share is shorter.
struct KeyCiphers {
    main: SectorCipher,
    last: Option<SectorCipher>,
}

/// The sector layouts the ciphers of one key are made for (see [`KeyCiphers`]).
#[derive(Debug, Clone, Copy)]
struct CipherLayouts {
    main: SectorLayout,
    last: Option<SectorLayout>,
}

impl CipherLayouts {
    fn make(&self, spec: CipherSpec, key: &[u8]) -> Result<KeyCiphers> {
        Ok(KeyCiphers {
            main: SectorCipher::new(spec, key, self.main)?,
            last: self
                .last
                .map(|l| SectorCipher::new(spec, key, l))
                .transpose()?,
        })
    }
}

/// The zone ciphers made so far, each with the tick of its last use.
#[derive(Default)]
struct ZoneCache {
    entries: HashMap<u64, (Arc<KeyCiphers>, u64)>,
    tick: u64,
}

impl ZoneCache {
    /// The ciphers of `zone` if cached, marked as just used.
    fn get(&mut self, zone: u64) -> Option<Arc<KeyCiphers>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(&zone).map(|(c, used)| {
            *used = tick;
            Arc::clone(c)
        })
    }

    /// Keeps `ciphers` for `zone` (or returns the ones another thread kept meanwhile),
    /// evicting the least recently used zone when full.
    fn insert(&mut self, zone: u64, ciphers: Arc<KeyCiphers>) -> Arc<KeyCiphers> {
        if let Some(made) = self.get(zone) {
            return made;
        }
        if self.entries.len() >= ZONE_CACHE {
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used);
            if let Some(&z) = oldest.map(|(z, _)| z) {
                self.entries.remove(&z);
            }
        }
        self.entries.insert(zone, (Arc::clone(&ciphers), self.tick));
        ciphers
    }
}

enum Keys {
    Single(KeyCiphers),
    Zoned {
        zone_sectors: u64,
        spec: CipherSpec,
        source: Box<dyn KeySource>,
        cache: Mutex<ZoneCache>,
    },
    /// No encryption: in an authenticated layout the tags still protect the data; without
    /// tags, the plaintext side of a volume encrypted or decrypted while it is served
    /// ([`Layout::plaintext`]).
    Plaintext,
}

/// How the units of an authenticated layout are encrypted ([`Layout::authenticated`]).
pub enum UnitKeys<'a> {
    /// Not at all: units hold the plaintext, still tagged (GELI's NULL encryption).
    Plaintext,
    /// One key for every unit.
    Single(CipherSpec, &'a [u8]),
    /// One key per zone of `zone_units` units (not sectors: a unit's zone comes from its
    /// own position, as GELI's `g_eli_key_hold` takes it), from `source`.
    Zoned {
        /// The cipher.
        spec: CipherSpec,
        /// Units per zone.
        zone_units: u64,
        /// The keys.
        source: Box<dyn KeySource>,
    },
}

impl fmt::Debug for UnitKeys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitKeys::Plaintext => f.write_str("Plaintext"),
            UnitKeys::Single(spec, _) => write!(f, "Single({spec})"),
            UnitKeys::Zoned {
                spec, zone_units, ..
            } => write!(f, "Zoned({spec}, {zone_units} units per zone)"),
        }
    }
}

/// A data area's sector map with its keys: see the module documentation.
pub struct Layout {
    geometry: Geometry,
    /// Bytes a sector takes in the store.
    stored: u64,
    ciphers: CipherLayouts,
    keys: Keys,
    auth: Option<auth::Auth>,
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Layout");
        d.field("geometry", &self.geometry);
        match &self.keys {
            Keys::Single(c) => d.field("cipher", &c.main),
            Keys::Zoned {
                zone_sectors, spec, ..
            } => d
                .field("spec", &spec.to_string())
                .field("zone_sectors", zone_sectors),
            Keys::Plaintext => d.field("cipher", &"none"),
        };
        d.finish_non_exhaustive()
    }
}

impl Layout {
    /// One key for every sector.
    pub fn single(geometry: Geometry, spec: CipherSpec, key: &[u8]) -> Result<Layout> {
        let main = check(&geometry)?;
        let ciphers = CipherLayouts { main, last: None };
        let keys = Keys::Single(ciphers.make(spec, key)?);
        Ok(Layout::assemble(geometry, ciphers, keys, None))
    }

    /// No encryption and no tags: sectors are stored as they are. Only for the plaintext
    /// side of a LUKS2 encryption or decryption in place while the volume is served (the
    /// engine keeps the old layout, plaintext in an encryption); never a volume's own.
    pub fn plaintext(geometry: Geometry) -> Result<Layout> {
        let main = check(&geometry)?;
        let ciphers = CipherLayouts { main, last: None };
        Ok(Layout::assemble(geometry, ciphers, Keys::Plaintext, None))
    }

    /// One key per zone of `zone_sectors` sectors, from `source`. The first zone's key is
    /// made now, so a bad key source fails here rather than at the first request.
    pub fn zoned(
        geometry: Geometry,
        spec: CipherSpec,
        zone_sectors: u64,
        source: Box<dyn KeySource>,
    ) -> Result<Layout> {
        let main = check(&geometry)?;
        let ciphers = CipherLayouts { main, last: None };
        Layout::with_zones(geometry, ciphers, spec, zone_sectors, source, None)
    }

    /// Sectors stored as tagged units (`geometry.metadata` says how), encrypted as `keys`
    /// says, tagged under the 64-byte authentication key `auth_key`. Each unit is
    /// encrypted alone: its IV number is [`IvRule::number`] of the unit's index with the
    /// unit's size (with [`IvRule::ByteOffset`]: the unit's byte offset in the data area),
    /// and its tag key comes from the same offset (see
    /// [`sectorcrypt_crypto::mac::SectorMac`]).
    pub fn authenticated(
        geometry: Geometry,
        keys: UnitKeys<'_>,
        auth_key: &[u8],
    ) -> Result<Layout> {
        let (auth, ciphers) = auth::Auth::new(&geometry, auth_key)?;
        match keys {
            UnitKeys::Plaintext => Ok(Layout::assemble(
                geometry,
                ciphers,
                Keys::Plaintext,
                Some(auth),
            )),
            UnitKeys::Single(spec, key) => {
                let keys = Keys::Single(ciphers.make(spec, key)?);
                Ok(Layout::assemble(geometry, ciphers, keys, Some(auth)))
            }
            UnitKeys::Zoned {
                spec,
                zone_units,
                source,
            } => Layout::with_zones(geometry, ciphers, spec, zone_units, source, Some(auth)),
        }
    }

    fn assemble(
        geometry: Geometry,
        ciphers: CipherLayouts,
        keys: Keys,
        auth: Option<auth::Auth>,
    ) -> Layout {
        let stored =
            auth.as_ref()
                .map_or(geometry.sector_size, auth::Auth::stored_sector_len) as u64;
        Layout {
            geometry,
            stored,
            ciphers,
            keys,
            auth,
        }
    }

    fn with_zones(
        geometry: Geometry,
        ciphers: CipherLayouts,
        spec: CipherSpec,
        zone_sectors: u64,
        source: Box<dyn KeySource>,
        auth: Option<auth::Auth>,
    ) -> Result<Layout> {
        if zone_sectors == 0 {
            return Err(Error::invalid("a key zone must hold at least one sector"));
        }
        let keys = Keys::Zoned {
            zone_sectors,
            spec,
            source,
            cache: Mutex::new(ZoneCache::default()),
        };
        let layout = Layout::assemble(geometry, ciphers, keys, auth);
        layout.zone_cipher(0)?;
        Ok(layout)
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Bytes per sector.
    pub fn sector_size(&self) -> usize {
        self.geometry.sector_size
    }

    /// Bytes of plaintext.
    pub fn size(&self) -> u64 {
        self.geometry.size
    }

    /// Sectors per key zone, for a zoned layout (units per zone when authenticated).
    pub fn zone_sectors(&self) -> Option<u64> {
        match &self.keys {
            Keys::Single(_) | Keys::Plaintext => None,
            Keys::Zoned { zone_sectors, .. } => Some(*zone_sectors),
        }
    }

    /// Whether sectors are stored with tags ([`Layout::seal`] and [`Layout::open`] then
    /// replace [`Layout::encrypt`] and [`Layout::decrypt`]).
    pub fn is_authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// Bytes a sector takes in the store: the sector size, or its units when
    /// authenticated.
    pub fn stored_sector_len(&self) -> usize {
        self.stored as usize
    }

    /// The byte position in the store of sector `sector` (sectors are contiguous: a run of
    /// sectors is one contiguous range of the store).
    pub fn position(&self, sector: u64) -> u64 {
        self.geometry.data_offset + sector * self.stored
    }

    /// Where the data area ends in the store.
    pub fn end(&self) -> u64 {
        self.position(self.geometry.size / self.geometry.sector_size as u64)
    }

    /// Encrypts whole sectors in place, the first being sector `first`.
    pub fn encrypt(&self, first: u64, buf: &mut [u8]) -> Result<()> {
        self.runs(first, buf.len(), |c, iv, r| c.encrypt(iv, &mut buf[r]))
    }

    /// Decrypts whole sectors in place, the first being sector `first`.
    pub fn decrypt(&self, first: u64, buf: &mut [u8]) -> Result<()> {
        self.runs(first, buf.len(), |c, iv, r| c.decrypt(iv, &mut buf[r]))
    }

    /// Encrypts whole sectors `src` into `dst` (same length), the first being `first`.
    pub fn encrypt_to(&self, first: u64, src: &[u8], dst: &mut [u8]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::invalid(format!(
                "{} bytes to encrypt into {}",
                src.len(),
                dst.len()
            )));
        }
        if self.is_plaintext() {
            self.whole_sectors(src.len())?;
            dst.copy_from_slice(src);
            return Ok(());
        }
        self.runs(first, src.len(), |c, iv, r| {
            c.encrypt_to(iv, &src[r.clone()], &mut dst[r])
        })
    }

    /// Cuts `len` bytes of whole sectors from sector `first` into runs that one cipher call
    /// can take (see the module documentation) and calls `f(cipher, first IV number, byte
    /// range)` for each, in order.
    fn runs(
        &self,
        first: u64,
        len: usize,
        mut f: impl FnMut(&SectorCipher, u64, Range<usize>) -> CryptoResult,
    ) -> Result<()> {
        let ss = self.geometry.sector_size;
        let rule = self.geometry.iv;
        match &self.keys {
            // The hot path: one call (the cipher checks for whole sectors itself).
            Keys::Single(c) if self.auth.is_none() => f(&c.main, rule.number(first, ss), 0..len)?,
            Keys::Plaintext if self.auth.is_none() => self.whole_sectors(len)?,
            Keys::Zoned { zone_sectors, .. } if self.auth.is_none() => {
                self.whole_sectors(len)?;
                let mut done = 0;
                while done < len {
                    let s = first + (done / ss) as u64;
                    let zone = s / zone_sectors;
                    let in_zone = (zone + 1) * zone_sectors - s;
                    let n = in_zone.min(((len - done) / ss) as u64) as usize * ss;
                    let cipher = self.zone_cipher(zone)?;
                    f(&cipher.main, rule.number(s, ss), done..done + n)?;
                    done += n;
                }
            }
            _ => {
                return Err(Error::invalid(
                    "this layout stores sectors with tags: seal and open them",
                ))
            }
        }
        Ok(())
    }

    /// A layout without encryption and without tags ([`Layout::plaintext`]).
    fn is_plaintext(&self) -> bool {
        matches!(self.keys, Keys::Plaintext) && self.auth.is_none()
    }

    /// Refuses `len` bytes that are not whole sectors.
    fn whole_sectors(&self, len: usize) -> Result<()> {
        let ss = self.geometry.sector_size;
        if !len.is_multiple_of(ss) {
            return Err(Error::invalid(format!(
                "{len} bytes is not a whole number of {ss}-byte sectors"
            )));
        }
        Ok(())
    }

    /// The ciphers of zone `zone`, from the cache or made by the key source.
    fn zone_cipher(&self, zone: u64) -> Result<Arc<KeyCiphers>> {
        let Keys::Zoned {
            spec,
            source,
            cache,
            ..
        } = &self.keys
        else {
            unreachable!("zone ciphers exist only in zoned layouts")
        };
        if let Some(cipher) = lock(cache).get(zone) {
            return Ok(cipher);
        }
        // Made outside the lock: other zones stay available meanwhile.
        let key = source.zone_key(zone)?;
        let ciphers = Arc::new(self.ciphers.make(*spec, &key)?);
        // Another thread may have made the same zone meanwhile: keep one entry.
        Ok(lock(cache).insert(zone, ciphers))
    }
}

/// Checks a geometry without tags; returns the crypto core's layout for its ciphers.
fn check(g: &Geometry) -> Result<SectorLayout> {
    if g.metadata.is_some() {
        return Err(Error::invalid(
            "a geometry with sector tags needs an authenticated layout",
        ));
    }
    let cipher_layout = g.iv.cipher_layout(g.sector_size)?;
    check_extent(g, g.sector_size as u64)?;
    Ok(cipher_layout)
}

/// Checks that the size is whole sectors and the data area, of `stored` bytes per sector
/// in the store, ends inside the 64-bit range.
fn check_extent(g: &Geometry, stored: u64) -> Result<()> {
    let ss = g.sector_size as u64;
    if ss == 0 || !g.size.is_multiple_of(ss) {
        return Err(Error::invalid(format!(
            "volume size {} is not a whole number of {ss}-byte sectors",
            g.size
        )));
    }
    if (g.size / ss)
        .checked_mul(stored)
        .and_then(|n| n.checked_add(g.data_offset))
        .is_none()
    {
        return Err(Error::invalid(format!(
            "data offset {} + size {} overflows",
            g.data_offset, g.size
        )));
    }
    Ok(())
}
