//! The sector map: what the engine needs to know of a volume's data area, and nothing of
//! its format. For each logical sector it says
//! - **where it lives**: sector `s` is stored at byte `data_offset + s * sector_size` of the
//!   store ([`Layout::position`]);
//! - **which key encrypts it**: one key for the whole volume ([`Layout::single`]), or one
//!   key per zone of `zone_sectors` sectors ([`Layout::zoned`]; GELI changes keys every
//!   2^20 sectors), each made on first use by a [`KeySource`] and kept in a cache of up
//!   to [`ZONE_CACHE`] zones, least recently used out first;
//! - **which IV rule applies** ([`IvRule`]): the sector number counted in 512-byte units
//!   (LUKS, dm-crypt's default), in sectors (dm-crypt's `iv_large_sectors`), or the
//!   sector's byte offset (GELI's XTS tweak);
//! - **per-sector metadata** stored beside each sector ([`SectorMetadata`]: GELI's
//!   authentication tags). A layout can describe it, but the engine refuses such a layout
//!   with [`Error::Unsupported`] until a format implements it: nothing reads or checks tags
//!   yet.
//!
//! [`Layout::encrypt`], [`Layout::decrypt`] and [`Layout::encrypt_to`] take a run of whole
//! sectors and cut it into the fewest cipher calls the keys allow: one call for a single
//! key (the hot path: the crypto core prepares the IVs of many sectors and runs one kernel
//! over all of them, whatever the IV rule, since its [`SectorLayout`] advances the IV
//! number by the rule's step), one call per zone for zoned keys. Nothing is allocated; a
//! zoned layout takes a lock and clones an `Arc` once per zone of a run.

use crate::error::{Error, Result};
use crate::lock;
use sectorcrypt_crypto::dmcrypt::{CipherSpec, IvStep, SectorCipher, SectorLayout};
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

/// Per-sector metadata stored beside each sector (authentication tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectorMetadata {
    /// Bytes of metadata per sector.
    pub bytes_per_sector: usize,
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
    /// Metadata stored beside each sector, if any (refused by the engine for now).
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

/// The zone ciphers made so far, each with the tick of its last use.
#[derive(Default)]
struct ZoneCache {
    entries: HashMap<u64, (Arc<SectorCipher>, u64)>,
    tick: u64,
}

impl ZoneCache {
    /// The cipher of `zone` if cached, marked as just used.
    fn get(&mut self, zone: u64) -> Option<Arc<SectorCipher>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(&zone).map(|(c, used)| {
            *used = tick;
            Arc::clone(c)
        })
    }

    /// Keeps `cipher` for `zone` (or returns the one another thread kept meanwhile),
    /// evicting the least recently used zone when full.
    fn insert(&mut self, zone: u64, cipher: Arc<SectorCipher>) -> Arc<SectorCipher> {
        if let Some(made) = self.get(zone) {
            return made;
        }
        if self.entries.len() >= ZONE_CACHE {
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used);
            if let Some(&z) = oldest.map(|(z, _)| z) {
                self.entries.remove(&z);
            }
        }
        self.entries.insert(zone, (Arc::clone(&cipher), self.tick));
        cipher
    }
}

enum Keys {
    Single(SectorCipher),
    Zoned {
        zone_sectors: u64,
        spec: CipherSpec,
        source: Box<dyn KeySource>,
        cache: Mutex<ZoneCache>,
    },
}

/// A data area's sector map with its keys: see the module documentation.
pub struct Layout {
    geometry: Geometry,
    cipher_layout: SectorLayout,
    keys: Keys,
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Layout");
        d.field("geometry", &self.geometry);
        match &self.keys {
            Keys::Single(c) => d.field("cipher", c),
            Keys::Zoned {
                zone_sectors, spec, ..
            } => d
                .field("spec", &spec.to_string())
                .field("zone_sectors", zone_sectors),
        };
        d.finish_non_exhaustive()
    }
}

impl Layout {
    /// One key for every sector.
    pub fn single(geometry: Geometry, spec: CipherSpec, key: &[u8]) -> Result<Layout> {
        let cipher_layout = check(&geometry)?;
        let cipher = SectorCipher::new(spec, key, cipher_layout)?;
        Ok(Layout {
            geometry,
            cipher_layout,
            keys: Keys::Single(cipher),
        })
    }

    /// One key per zone of `zone_sectors` sectors, from `source`. The first zone's key is
    /// made now, so a bad key source fails here rather than at the first request.
    pub fn zoned(
        geometry: Geometry,
        spec: CipherSpec,
        zone_sectors: u64,
        source: Box<dyn KeySource>,
    ) -> Result<Layout> {
        let cipher_layout = check(&geometry)?;
        if zone_sectors == 0 {
            return Err(Error::invalid("a key zone must hold at least one sector"));
        }
        let layout = Layout {
            geometry,
            cipher_layout,
            keys: Keys::Zoned {
                zone_sectors,
                spec,
                source,
                cache: Mutex::new(ZoneCache::default()),
            },
        };
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

    /// Sectors per key zone, for a zoned layout.
    pub fn zone_sectors(&self) -> Option<u64> {
        match &self.keys {
            Keys::Single(_) => None,
            Keys::Zoned { zone_sectors, .. } => Some(*zone_sectors),
        }
    }

    /// The byte position in the store of sector `sector` (sectors are contiguous: a run of
    /// sectors is one contiguous range of the store).
    pub fn position(&self, sector: u64) -> u64 {
        self.geometry.data_offset + sector * self.geometry.sector_size as u64
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
            Keys::Single(cipher) => f(cipher, rule.number(first, ss), 0..len)?,
            Keys::Zoned { zone_sectors, .. } => {
                if !len.is_multiple_of(ss) {
                    return Err(Error::invalid(format!(
                        "{len} bytes is not a whole number of {ss}-byte sectors"
                    )));
                }
                let mut done = 0;
                while done < len {
                    let s = first + (done / ss) as u64;
                    let zone = s / zone_sectors;
                    let in_zone = (zone + 1) * zone_sectors - s;
                    let n = in_zone.min(((len - done) / ss) as u64) as usize * ss;
                    let cipher = self.zone_cipher(zone)?;
                    f(&cipher, rule.number(s, ss), done..done + n)?;
                    done += n;
                }
            }
        }
        Ok(())
    }

    /// The cipher of zone `zone`, from the cache or made by the key source.
    fn zone_cipher(&self, zone: u64) -> Result<Arc<SectorCipher>> {
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
        let cipher = Arc::new(SectorCipher::new(*spec, &key, self.cipher_layout)?);
        // Another thread may have made the same zone meanwhile: keep one entry.
        Ok(lock(cache).insert(zone, cipher))
    }
}

/// Checks a geometry; returns the crypto core's layout for its ciphers.
fn check(g: &Geometry) -> Result<SectorLayout> {
    let cipher_layout = g.iv.cipher_layout(g.sector_size)?;
    let ss = g.sector_size as u64;
    if !g.size.is_multiple_of(ss) {
        return Err(Error::invalid(format!(
            "volume size {} is not a whole number of {ss}-byte sectors",
            g.size
        )));
    }
    if g.data_offset.checked_add(g.size).is_none() {
        return Err(Error::invalid(format!(
            "data offset {} + size {} overflows",
            g.data_offset, g.size
        )));
    }
    if g.metadata.is_some_and(|m| m.bytes_per_sector == 0) {
        return Err(Error::invalid("sector metadata of 0 bytes"));
    }
    Ok(cipher_layout)
}
