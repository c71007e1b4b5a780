//! GELI through the library: providers of 4096-byte sectors (metadata in the last 4 KiB),
//! metadata laid out by hand at the offsets of FreeBSD's `struct g_eli_metadata`
//! (`sys/geom/eli/g_eli.h`; version 0 without `md_aalgo`), and mangled metadata that must
//! give errors, never panics.

mod auth;

use rand::{Rng, SeedableRng};
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::geli::init::{init, InitOptions};
use sectorcrypt_volume::geli::metadata::{Metadata, ENCODED_LEN};
use sectorcrypt_volume::geli::{self, Geli};
use sectorcrypt_volume::{FileStore, Header, Store};

fn store(len: u64) -> (tempfile::NamedTempFile, FileStore) {
    let f = tempfile::NamedTempFile::new().unwrap();
    f.as_file().set_len(len).unwrap();
    let s = FileStore::new(f.reopen().unwrap(), "test image");
    (f, s)
}

#[test]
fn a_provider_of_4096_byte_sectors_keeps_its_metadata_in_the_last_4_kib() {
    let (f, st) = store(1 << 20);
    let opts = InitOptions {
        provider_sector: 4096,
        iterations: Some(0),
        ..InitOptions::default()
    };
    let (made, _) = init(&st, &opts, &[], b"pass").unwrap();
    assert_eq!(made.metadata().sectorsize, 4096);
    let bytes = std::fs::read(f.path()).unwrap();
    let at = bytes.len() - 4096;
    assert_eq!(&bytes[at..at + 9], b"GEOM::ELI");
    assert!(bytes[at + ENCODED_LEN..].iter().all(|&b| b == 0));
    let h = Header::read(&st).unwrap();
    let g = h.downcast_ref::<Geli>().unwrap();
    assert_eq!(g.provider_sector(), 4096);
    assert_eq!(h.backup_len(1 << 20), 4096);
    let u = h.unlock(&st, b"pass").unwrap();
    assert_eq!(u.data_size, (1 << 20) - 4096);
    let vol = u
        .engine(
            Box::new(FileStore::new(f.reopen().unwrap(), "data")),
            EngineOptions::default(),
        )
        .unwrap();
    let data: Vec<u8> = (0..12288u32).map(|i| (i * 7) as u8).collect();
    vol.write_at(&data, 4096).unwrap();
    let mut back = vec![0u8; data.len()];
    vol.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, data);
    assert!(h.unlock(&st, b"Pass").is_err());
}

/// A metadata sector laid out by hand: the fields at their `g_eli.h` offsets, then MD5.
fn hand_made(version: u32) -> Vec<u8> {
    let mut b = vec![0u8; 512];
    b[..9].copy_from_slice(b"GEOM::ELI");
    b[16..20].copy_from_slice(&version.to_le_bytes());
    b[20..24].copy_from_slice(&0x82u32.to_le_bytes()); // BOOT | GELIBOOT
    b[24..26].copy_from_slice(&11u16.to_le_bytes()); // CRYPTO_AES_CBC
    b[26..28].copy_from_slice(&192u16.to_le_bytes());
    let mut p = 28;
    if version > 0 {
        b[28..30].copy_from_slice(&18u16.to_le_bytes()); // md_aalgo
        p = 30;
    }
    b[p..p + 8].copy_from_slice(&(1u64 << 30).to_le_bytes());
    b[p + 8..p + 12].copy_from_slice(&4096u32.to_le_bytes());
    b[p + 12] = 2;
    b[p + 13..p + 17].copy_from_slice(&(-1i32).to_le_bytes());
    for i in 0..64 + 384 {
        b[p + 17 + i] = i as u8;
    }
    let end = p + 17 + 64 + 384;
    let md5 = openssl::hash::hash(openssl::hash::MessageDigest::md5(), &b[..end]).unwrap();
    b[end..end + 16].copy_from_slice(&md5);
    b
}

#[test]
fn hand_made_metadata_of_versions_0_and_7_decode_and_encode_back() {
    for version in [0, 7] {
        let b = hand_made(version);
        let md = Metadata::decode(&b).unwrap();
        assert_eq!(md.version, version);
        assert_eq!(md.flags, 0x82);
        assert_eq!((md.ealgo, md.keylen), (11, 192));
        assert_eq!(md.aalgo, if version == 0 { 0 } else { 18 });
        assert_eq!((md.provsize, md.sectorsize, md.keys), (1 << 30, 4096, 2));
        assert_eq!(md.iterations, -1);
        assert_eq!(md.salt[63], 63);
        assert_eq!(md.mkeys[1][191], (64 + 383) as u8);
        assert_eq!(md.encode(), &b[..ENCODED_LEN]);
        assert!(md.flag_names().contains("BOOT"));
    }
}

#[test]
fn mangled_metadata_gives_errors_never_panics() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let (_f, st) = store(64 * 1024);
    init(
        &st,
        &InitOptions {
            iterations: Some(0),
            ..InitOptions::default()
        },
        &[],
        b"p",
    )
    .unwrap();
    let mut good = vec![0u8; 512];
    st.read_at(&mut good, 64 * 1024 - 512).unwrap();
    for round in 0..2000 {
        let mut m = good.clone();
        for _ in 0..rng.gen_range(1..6) {
            let i = rng.gen_range(16..111);
            m[i] = rng.gen();
        }
        if round % 2 == 0 {
            let md5 = openssl::hash::hash(openssl::hash::MessageDigest::md5(), &m[..495]).unwrap();
            m[495..511].copy_from_slice(&md5);
        }
        st.write_at(&m, 64 * 1024 - 512).unwrap();
        if let Ok(h) = Header::read(&st) {
            let _ = h.dump();
            let _ = h.to_json();
            // Unlocking runs the KDF: only where the mangled count is small.
            let g = h.downcast_ref::<Geli>().unwrap();
            if g.metadata().iterations <= 100 {
                let _ = h.unlock(&st, b"p");
            }
        }
        let _ = geli::locate(&st, 64 * 1024);
    }
}
