//! Authenticated GELI sectors through the library: the tags against known answers of the
//! independent model (`crates/cli/tests/geli_ref.py vectors`, stored in
//! `crates/cli/tests/data/geli/model_vectors.json`), tampering and torn writes detected
//! and named, nothing of a bad sector released, partial writes that keep their
//! neighbours, and refusals of what cannot be opened.

use super::store;
use sectorcrypt_crypto::mac::MacAlgorithm;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::geli::init::{init, InitOptions};
use sectorcrypt_volume::geli::keys::{self, ZoneKeys, ZONE_SHIFT};
use sectorcrypt_volume::geli::metadata::algo;
use sectorcrypt_volume::{
    Error, FileStore, Geometry, Header, IvRule, Layout, SectorMetadata, UnitKeys,
};
use std::io::ErrorKind;

/// The model's master key of its vectors: bytes 0..128 (IV key || data key).
fn mkey() -> Vec<u8> {
    (0..128).collect()
}

/// A version 7 AES-XTS-128 provider of `sector`-byte sectors on 512-byte units with
/// `mac`, keyed by the model's master key.
fn layout(sector: usize, mac: MacAlgorithm, sectors: u64) -> Layout {
    let geometry = Geometry {
        sector_size: sector,
        data_offset: 0,
        size: sectors * sector as u64,
        iv: IvRule::ByteOffset,
        metadata: Some(SectorMetadata { unit_len: 512, mac }),
    };
    let keys = UnitKeys::Zoned {
        spec: "aes-xts-plain64".parse().unwrap(),
        zone_units: 1 << ZONE_SHIFT,
        source: Box::new(ZoneKeys::authenticated(7, &mkey(), 32, false)),
    };
    Layout::authenticated(geometry, keys, &keys::auth_key(&mkey())[..]).unwrap()
}

#[test]
fn tags_match_the_models_known_answers() {
    // geli_ref.py vectors: "auth_sha256_sector0_layout" and "auth_sha256_sector0_tags".
    let l = layout(512, MacAlgorithm::HmacSha256, 4);
    assert_eq!(l.stored_sector_len(), 1024);
    let mut stored = vec![0xaa; 1024];
    l.seal(0, &[0u8; 512], &mut stored).unwrap();
    assert_eq!(
        hex::encode(&stored[..32]),
        "ce3f03ef10eff9d949d491695fcb1e006500a93829f73f8af582971e82db07fd"
    );
    assert_eq!(
        hex::encode(&stored[512..544]),
        "b566ec2501b768676e87da16995f4fa808b75dbed95ffa7afddf1aaee1c31e98"
    );
    // The second unit holds 512 - 480 = 32 bytes of data, then zeroed padding.
    assert!(stored[512 + 32 + 32..].iter().all(|&b| b == 0));
    let mut plain = vec![1u8; 512];
    l.open(0, &stored, &mut plain).unwrap();
    assert_eq!(plain, [0u8; 512]);
}

#[test]
fn a_run_equals_its_sectors_one_by_one_and_a_bad_tag_releases_nothing() {
    for mac in [MacAlgorithm::HmacSha1, MacAlgorithm::HmacSha512] {
        let l = layout(4096, mac, 8);
        let n = l.stored_sector_len();
        let plain: Vec<u8> = (0..5 * 4096u32).map(|i| (i * 13 % 251) as u8).collect();
        let mut run = vec![0u8; 5 * n];
        l.seal(2, &plain, &mut run).unwrap();
        for k in 0..5 {
            let mut one = vec![0u8; n];
            l.seal(2 + k as u64, &plain[k * 4096..(k + 1) * 4096], &mut one)
                .unwrap();
            assert_eq!(one, run[k * n..(k + 1) * n], "{mac:?} sector {k}");
        }
        // The same bytes elsewhere do not verify: tags and IVs depend on the position.
        let mut out = vec![7u8; plain.len()];
        assert!(l.open(3, &run, &mut out).is_err());
        // A flipped bit in the ciphertext of sector 2 + 3, then in a tag of 2 + 1: the
        // first bad sector is named, the caller's buffer is untouched.
        for (at, sector) in [(3 * n + 5 * 512 + 100, 5), (n + 512 + 3, 3)] {
            run[at] ^= 4;
            match l.open(2, &run, &mut out) {
                Err(Error::Authentication(f)) => assert_eq!(f.sector, sector, "{mac:?}"),
                other => panic!("{mac:?}: {other:?}"),
            }
            assert!(out.iter().all(|&b| b == 7), "{mac:?}: bytes released");
        }
    }
}

/// An engine over a new authenticated provider of `size` bytes (all sectors sealed).
fn provider(size: u64, ealgo: u16, aalgo: u16) -> (tempfile::NamedTempFile, Volume) {
    let (f, st) = store(size);
    let opts = InitOptions {
        ealgo,
        aalgo,
        sectorsize: 4096,
        iterations: Some(0),
        ..InitOptions::default()
    };
    let (_, u) = init(&st, &opts, &[], b"pass").unwrap();
    let small_chunks = EngineOptions {
        chunk_bytes: Some(3 * 4096),
        ..EngineOptions::default()
    };
    let vol = u
        .engine(
            Box::new(FileStore::new(f.reopen().unwrap(), "data")),
            small_chunks,
        )
        .unwrap();
    vol.write_zeroes(0, vol.size()).unwrap();
    (f, vol)
}

#[test]
fn partial_writes_round_trip_and_keep_their_neighbours() {
    for ealgo in [algo::AES_XTS, algo::AES_CBC, algo::NULL_CBC] {
        let (_f, vol) = provider(1 << 20, ealgo, algo::HMAC_SHA256);
        let mut model = vec![0u8; vol.size() as usize];
        let mut x = 0x1234_5678u32;
        for _ in 0..40 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let len = 1 + (x % 20_000) as usize;
            let off = (x >> 7) as usize % (model.len() - len);
            let data: Vec<u8> = (0..len).map(|i| (i as u32 ^ x) as u8).collect();
            vol.write_at(&data, off as u64).unwrap();
            model[off..off + len].copy_from_slice(&data);
        }
        let mut back = vec![0u8; model.len()];
        vol.read_at(&mut back, 0).unwrap();
        assert!(back == model, "ealgo {ealgo}");
        let mut piece = vec![0u8; 777];
        vol.read_at(&mut piece, 4095).unwrap();
        assert_eq!(piece, model[4095..4095 + 777], "ealgo {ealgo}");
    }
}

/// Tampering and a unit torn by a crash fail that sector only, with `InvalidData` naming
/// it; a partial write into such a sector fails and changes nothing.
#[test]
fn tampering_and_torn_writes_fail_that_sector_only() {
    let (f, vol) = provider(1 << 20, algo::AES_XTS, algo::HMAC_SHA256);
    let stored = 9 * 512u64;
    vol.write_at(&vec![1u8; 4 * 4096], 0).unwrap();
    let file = f.reopen().unwrap();
    use std::os::unix::fs::FileExt;
    // A torn write: sector 1's third unit half from the write above (its tag and the
    // start of its ciphertext), half from a new one.
    let mut old_unit = [0u8; 512];
    file.read_exact_at(&mut old_unit, stored + 2 * 512).unwrap();
    vol.write_at(&vec![2u8; 4096], 4096).unwrap();
    file.write_all_at(&old_unit[..256], stored + 2 * 512)
        .unwrap();
    // Each unit carries its own tag and nothing binds a sector's units together (FreeBSD
    // g_eli_integrity.c): a tear *between* units, an older whole unit beside newer ones,
    // verifies, as under geli. Sector 2 mixes its first unit of 1s with a new write of 2s.
    let mut unit0 = [0u8; 512];
    file.read_exact_at(&mut unit0, 2 * stored).unwrap();
    vol.write_at(&vec![2u8; 4096], 2 * 4096).unwrap();
    file.write_all_at(&unit0, 2 * stored).unwrap();
    let mut mixed = vec![0u8; 4096];
    vol.read_at(&mut mixed, 2 * 4096).unwrap();
    assert!(mixed[..480].iter().all(|&b| b == 1) && mixed[480..].iter().all(|&b| b == 2));
    // A flipped bit in a tag of sector 3.
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, 3 * stored + 7 * 512 + 5)
        .unwrap();
    file.write_all_at(&[b[0] ^ 1], 3 * stored + 7 * 512 + 5)
        .unwrap();
    let mut buf = vec![9u8; 4096];
    for (sector, bad) in [(0u64, false), (1, true), (2, false), (3, true), (4, false)] {
        let r = vol.read_at(&mut buf, sector * 4096);
        match (r, bad) {
            (Ok(()), false) => {}
            (Err(e), true) => {
                assert_eq!(e.kind(), ErrorKind::InvalidData);
                assert_eq!(
                    e.to_string(),
                    format!("authentication failed for sector {sector}")
                );
            }
            (r, _) => panic!("sector {sector}: {r:?}"),
        }
    }
    // Reads spanning a bad sector fail; a partial write into one fails and leaves it.
    let mut wide = vec![0u8; 3 * 4096 + 10];
    assert!(vol.read_at(&mut wide, 100).is_err());
    let before = std::fs::read(f.path()).unwrap();
    let e = vol.write_at(b"patch", 3 * 4096 + 10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData);
    assert!(std::fs::read(f.path()).unwrap() == before);
    // A whole-sector write replaces it.
    vol.write_at(&vec![3u8; 4096], 3 * 4096).unwrap();
    vol.read_at(&mut buf, 3 * 4096).unwrap();
    assert!(buf.iter().all(|&b| b == 3));
}

#[test]
fn a_provider_opens_again_and_refuses_what_it_cannot_open() {
    let (f, st) = store(1 << 20);
    let opts = InitOptions {
        aalgo: algo::HMAC_RIPEMD160,
        iterations: Some(0),
        ..InitOptions::default()
    };
    init(&st, &opts, &[], b"pass").unwrap();
    let h = Header::read(&st).unwrap();
    assert!(
        h.dump().contains("aalgo:      HMAC/RIPEMD160"),
        "{}",
        h.dump()
    );
    let u = h.unlock(&st, b"pass").unwrap();
    // 2047 provider sectors less the metadata's, two units per 512-byte sector.
    assert_eq!(u.data_size, (2047 / 2) * 512);
    drop(f);
    for (ealgo, aalgo, keylen, why) in [
        (
            algo::NULL_CBC,
            0,
            0,
            "NULL encryption is allowed only with authentication",
        ),
        (
            algo::AES_XTS,
            algo::HMAC_MD5,
            0,
            "HMAC/MD5 is not supported",
        ),
        (
            algo::AES_XTS,
            99,
            0,
            "authentication algorithm 99 is unknown",
        ),
        (algo::NULL_CBC, algo::HMAC_SHA1, 1024, "not valid for NULL"),
    ] {
        let (_f, st) = store(1 << 20);
        let opts = InitOptions {
            ealgo,
            aalgo,
            keylen,
            iterations: Some(0),
            ..InitOptions::default()
        };
        let e = init(&st, &opts, &[], b"pass").unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
        assert!(Header::read(&st).is_err(), "{why}: something was written");
    }
}
