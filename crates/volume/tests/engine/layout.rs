//! Layouts beyond one key and 512-byte IV units: keys per zone of sectors (tiny zones here,
//! so requests, chunks and edges cross them), the three IV rules, each checked sector by
//! sector against OpenSSL with an independent computation of the zone key and the IV;
//! the zone key cache; layouts the engine refuses.

use crate::fixture::*;
use rand::{Rng, SeedableRng};
use sectorcrypt_volume::engine::Volume;
use sectorcrypt_volume::layout::{KeySource, SectorMetadata, ZONE_CACHE};
use sectorcrypt_volume::{Error, Geometry, IvRule, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use zeroize::Zeroizing;

/// Zone `zone`'s key: the first `len` bytes of SHA-512(seed || le64(zone)).
fn zone_key(seed: u8, len: usize, zone: u64) -> Vec<u8> {
    let mut input = vec![seed];
    input.extend_from_slice(&zone.to_le_bytes());
    openssl::sha::sha512(&input)[..len].to_vec()
}

/// A key source over [`zone_key`] that counts the keys it makes.
#[derive(Debug)]
struct TestKeys {
    seed: u8,
    len: usize,
    made: Arc<AtomicUsize>,
}

impl KeySource for TestKeys {
    fn zone_key(&self, zone: u64) -> sectorcrypt_volume::Result<Zeroizing<Vec<u8>>> {
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(Zeroizing::new(zone_key(self.seed, self.len, zone)))
    }
}

/// The IV number of sector `s`, written out for each rule (not through `IvRule::number`).
fn iv_number(rule: IvRule, s: u64, sector: usize) -> u64 {
    match rule {
        IvRule::Units512 { first } => first + s * (sector as u64 / 512),
        IvRule::Sectors { first } => first + s,
        IvRule::ByteOffset => s * sector as u64,
    }
}

struct Zoned {
    fx: Fixture,
    rule: IvRule,
    zone_sectors: u64,
    made: Arc<AtomicUsize>,
}

impl Zoned {
    fn new(cfg: Config, rule: IvRule, zone_sectors: u64, seed: u64) -> Zoned {
        Zoned {
            fx: Fixture::new(cfg, seed),
            rule,
            zone_sectors,
            made: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn open(&self, threads: usize) -> Volume {
        let cfg = self.fx.cfg;
        let geometry = Geometry {
            sector_size: cfg.sector,
            data_offset: cfg.data_offset,
            size: cfg.size(),
            iv: self.rule,
            metadata: None,
        };
        let keys = TestKeys {
            seed: cfg.sectors as u8,
            len: cfg.key_len,
            made: Arc::clone(&self.made),
        };
        let spec = cfg.spec.parse().unwrap();
        let layout = Layout::zoned(geometry, spec, self.zone_sectors, Box::new(keys)).unwrap();
        // Chunks of 4 sectors: chunk boundaries fall inside zones of 3.
        let opts = engine(threads, Some(4 * cfg.sector));
        Volume::new(store(&self.fx.path, true), layout, opts).unwrap()
    }

    /// The data area decrypted by OpenSSL, sector by sector, each with its zone's key
    /// and its IV number.
    fn plaintext_openssl(&self) -> Vec<u8> {
        let cfg = self.fx.cfg;
        let raw = self.fx.raw();
        let area = &raw[cfg.data_offset as usize..][..cfg.size() as usize];
        let mut out = Vec::with_capacity(area.len());
        for (s, sector) in area.chunks(cfg.sector).enumerate() {
            let s = s as u64;
            let key = zone_key(cfg.sectors as u8, cfg.key_len, s / self.zone_sectors);
            let number = iv_number(self.rule, s, cfg.sector);
            out.extend(openssl_decrypt_sector(cfg.spec, &key, number, sector));
        }
        out
    }
}

/// Writes the whole volume, then unaligned pieces (edges in different zones), and checks
/// the file against OpenSSL and the reads against the model.
fn check_zoned(cfg: Config, rule: IvRule, seed: u64) {
    let z = Zoned::new(cfg, rule, 3, seed);
    let what = format!("{} sector {} {rule:?}", cfg.spec, cfg.sector);
    let vol = z.open(2);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = random_bytes(&mut rng, cfg.size() as usize);
    vol.write_at(&model, 0).unwrap();
    for _ in 0..20 {
        let off = rng.gen_range(0..cfg.size());
        let len = rng.gen_range(0..=((cfg.size() - off) as usize).min(5 * cfg.sector));
        let data = random_bytes(&mut rng, len);
        vol.write_at(&data, off).unwrap();
        model[off as usize..][..len].copy_from_slice(&data);
    }
    vol.flush().unwrap();
    assert!(z.plaintext_openssl() == model, "openssl reference, {what}");
    let mut all = vec![0; cfg.size() as usize];
    vol.read_at(&mut all, 0).unwrap();
    assert!(all == model, "read back, {what}");
    // The zones really have keys of their own: sector 3 (zone 1) under zone 0's key is
    // not the plaintext.
    let raw = z.fx.raw();
    let sector3 = &raw[cfg.data_offset as usize + 3 * cfg.sector..][..cfg.sector];
    let key0 = zone_key(cfg.sectors as u8, cfg.key_len, 0);
    let wrong = openssl_decrypt_sector(cfg.spec, &key0, iv_number(rule, 3, cfg.sector), sector3);
    assert!(wrong != model[3 * cfg.sector..][..cfg.sector], "{what}");
}

#[test]
fn zoned_keys_and_every_iv_rule_match_openssl_sector_by_sector() {
    let mut seed = 200;
    for (spec, key_len) in [("aes-xts-plain64", 64), ("aes-cbc-plain64", 32)] {
        for sector in [512, 4096] {
            for rule in [
                IvRule::Units512 { first: 7 },
                IvRule::Sectors { first: 7 },
                IvRule::ByteOffset,
            ] {
                let cfg = Config {
                    spec,
                    key_len,
                    data_offset: 1536,
                    ..Config::xts(sector, 20)
                };
                check_zoned(cfg, rule, seed);
                seed += 1;
            }
        }
    }
}

/// The byte-offset rule with one key: the XTS tweak of sector `s` is le64(s * 4096).
#[test]
fn byte_offset_rule_is_the_xts_tweak_of_the_byte_offset() {
    let cfg = Config::xts(4096, 9);
    let fx = Fixture::new(cfg, 300);
    let geometry = Geometry {
        sector_size: 4096,
        data_offset: 0,
        size: cfg.size(),
        iv: IvRule::ByteOffset,
        metadata: None,
    };
    let layout = Layout::single(geometry, cfg.spec.parse().unwrap(), &fx.key).unwrap();
    let vol = Volume::new(store(&fx.path, true), layout, engine(1, None)).unwrap();
    let plain = random_bytes(&mut rand::rngs::StdRng::seed_from_u64(301), 9 * 4096);
    vol.write_at(&plain, 0).unwrap();
    let raw = fx.raw();
    for s in 0..9 {
        let sector = &raw[s * 4096..][..4096];
        let got = openssl_decrypt_sector(cfg.spec, &fx.key, s as u64 * 4096, sector);
        assert!(got == plain[s * 4096..][..4096], "sector {s}");
    }
}

/// Each zone's key is made once while it stays in the cache ([`ZONE_CACHE`] zones); the
/// least recently used zone is evicted by a newer one and made again.
#[test]
fn zone_keys_are_made_once_while_cached() {
    let z = Zoned::new(Config::xts(512, 8 * 3), IvRule::ByteOffset, 3, 400);
    let vol = z.open(1);
    // Zone 0 is made when the layout is built.
    assert_eq!(z.made.load(Ordering::Relaxed), 1);
    let mut all = vec![0; 24 * 512];
    vol.read_at(&mut all, 0).unwrap();
    vol.write_at(&all, 0).unwrap();
    vol.read_at(&mut all, 0).unwrap();
    assert_eq!(z.made.load(Ordering::Relaxed), 8, "one key per zone");
    // One more zone than the cache holds, one sector each.
    let zones = ZONE_CACHE as u64 + 1;
    let z = Zoned::new(Config::xts(512, zones), IvRule::ByteOffset, 1, 401);
    let vol = z.open(1);
    let mut sector = vec![0; 512];
    // Zone 0 is used last among the first ZONE_CACHE zones: zone 1 is the oldest.
    for s in (1..zones - 1).chain([0, zones - 1]) {
        vol.read_at(&mut sector, s * 512).unwrap();
    }
    assert_eq!(z.made.load(Ordering::Relaxed), zones as usize);
    vol.read_at(&mut sector, 0).unwrap();
    assert_eq!(
        z.made.load(Ordering::Relaxed),
        zones as usize,
        "zone 0 kept"
    );
    // Zone 1 was evicted by the last zone: made again.
    vol.read_at(&mut sector, 512).unwrap();
    assert_eq!(z.made.load(Ordering::Relaxed), zones as usize + 1);
}

/// Random I/O over more zones than a handful (a GELI provider of 512-byte sectors has a
/// zone every 512 MiB: 64 zones in 32 GiB) makes each zone's key once, not once per
/// request: the cache holds as many zones as GELI's kernel does.
#[test]
fn random_io_over_many_zones_makes_each_key_once() {
    let zones: u64 = 64;
    let z = Zoned::new(Config::xts(512, zones), IvRule::ByteOffset, 1, 402);
    let vol = z.open(1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(402);
    let mut sector = vec![0; 512];
    for _ in 0..4 * zones {
        let s = rng.gen_range(0..zones);
        vol.read_at(&mut sector, s * 512).unwrap();
    }
    let made = z.made.load(Ordering::Relaxed);
    assert!(
        made as u64 <= zones,
        "{made} zone keys made for {zones} zones"
    );
}

/// A geometry with sector tags needs an authenticated layout (a plain one would ignore
/// the tags), and an authenticated layout cannot be used as a plain one. Zones of no
/// sector are refused by the layout.
#[test]
fn tagged_and_zoneless_layouts_are_refused() {
    let fx = Fixture::small(500);
    let geometry = Geometry {
        sector_size: 512,
        data_offset: 0,
        size: 8 * 512,
        iv: IvRule::ByteOffset,
        metadata: Some(SectorMetadata {
            unit_len: 512,
            mac: sectorcrypt_crypto::mac::MacAlgorithm::HmacSha256,
        }),
    };
    let spec = fx.cfg.spec.parse().unwrap();
    let e = Layout::single(geometry, spec, &fx.key).unwrap_err();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("authenticated")),
        "{e}"
    );
    let keys = sectorcrypt_volume::UnitKeys::Single(spec, &fx.key);
    let tagged = Layout::authenticated(geometry, keys, &[7; 64]).unwrap();
    assert_eq!(tagged.stored_sector_len(), 1024);
    let mut buf = vec![0u8; 512];
    assert!(tagged.encrypt(0, &mut buf).is_err());
    let vol = Volume::new(store(&fx.path, true), tagged, engine(1, None)).unwrap();
    assert_eq!(vol.size(), 8 * 512);
    let keys = TestKeys {
        seed: 0,
        len: 64,
        made: Arc::default(),
    };
    let geometry = Geometry {
        metadata: None,
        ..geometry
    };
    let e = Layout::zoned(geometry, fx.cfg.spec.parse().unwrap(), 0, Box::new(keys)).unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e}");
}
