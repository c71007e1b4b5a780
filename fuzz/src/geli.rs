//! The GELI target: the bytes are the end of a provider, its metadata sector last (the
//! last 512 bytes, or the start of the last 4096-byte block for a provider of 4 KiB
//! sectors). They go through the metadata decoder directly (decode, then encode back to
//! the same bytes), then through what reads a provider ([`Header::read`]: every format's
//! detection, GELI's search of the last sectors, its structural checks), `dump`, the JSON
//! rendering, the volume's geometry, and unlocking: every master-key slot is tried with
//! [`GELI_PASSPHRASE`], then with it and [`GELI_KEYFILE`] (the keyfile alone for metadata
//! of keyfiles only), when the iteration count is small. An opened provider has its first
//! and last sectors decrypted through the engine, and `geli setkey`, `delkey` and
//! `configure` run on copies of it: each changes what it should and nothing else of the
//! metadata, the master key stays the same, and one refused writes nothing.
//!
//! Each input stands for two providers: itself whole, and (when its metadata names a
//! larger size) a provider of the size its metadata names, ending with the input, so that
//! both the size check and what comes after it are reached. The metadata's MD5 is
//! recomputed before the providers are read (the decoder is given the bytes as they came
//! first), so mutated fields reach the checks behind the MD5 instead of stopping at it.
//!
//! The seeds (`scripts/fuzz.sh seeds`) are the metadata sectors of providers made by
//! FreeBSD's geli (the images of `crates/cli/tests/data/geli/`), metadata rebuilt from
//! the key fields of John the Ripper's `$geli$` vectors (also FreeBSD-made), and
//! providers made here by `sectorcrypt geli init` in the variants no public FreeBSD image
//! has (AES-CBC, keyfiles, 4 KiB sectors, authentication, versions 1 to 6).

use crate::luks::Reached;
use crate::store::MemStore;
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::geli::metadata::{flags, Metadata, ENCODED_LEN, MAGIC, MAX_MKEYS, VERSION};
use sectorcrypt_volume::geli::{Geli, PROVIDER_SECTORS};
use sectorcrypt_volume::kdf::{Kdf, KdfKind, KdfOptions};
use sectorcrypt_volume::{Header, Unlocked};
use zeroize::Zeroizing;

/// The passphrase of the seed providers (that of the FreeBSD-made images).
pub const GELI_PASSPHRASE: &[u8] = b"password";

/// The keyfile of the seed providers made with keyfiles only (`geli init -P -K`).
pub const GELI_KEYFILE: &[u8] = b"fuzz keyfile\n";

/// PBKDF2-SHA512 iterations tried at most (the seeds have 0 to 512).
const MAX_ITERATIONS: u32 = 1024;

/// The largest provider an input stands for: the engine reads its last sector, and the
/// store holds only the input, so any size costs the same.
const MAX_PROVIDER: u64 = 1 << 62;

/// The GELI target.
pub fn geli(data: &[u8]) {
    geli_reached(data);
}

/// How far `data` got (the furthest of the providers it stands for).
pub fn geli_reached(data: &[u8]) -> Reached {
    for at in candidates(data) {
        decode_round_trip(&data[at..]);
    }
    let fixed = fix_md5(data);
    let mut reached = provider(&fixed, fixed.len() as u64);
    if let Some(size) = named_size(&fixed) {
        reached = reached.max(provider(&fixed, size));
    }
    reached
}

/// Where in `data` a metadata sector would be: the start of its last 512 bytes and of
/// its last 4096 bytes (relative to a provider that ends with `data`).
fn candidates(data: &[u8]) -> Vec<usize> {
    let mut v: Vec<usize> = PROVIDER_SECTORS
        .iter()
        .filter_map(|&s| data.len().checked_sub(s as usize))
        .collect();
    v.dedup();
    v
}

/// Where the MD5 ends in the metadata of `version` (version 0 lacks `md_aalgo`).
fn md5_end(version: u32) -> usize {
    if version == 0 {
        ENCODED_LEN - 2
    } else {
        ENCODED_LEN
    }
}

fn version_of(sector: &[u8]) -> u32 {
    u32::from_le_bytes(sector[16..20].try_into().expect("4 bytes"))
}

/// Decoding `sector`: an error, or metadata that encodes back to the same bytes.
fn decode_round_trip(sector: &[u8]) {
    match Metadata::decode(sector) {
        Ok(md) => {
            let _ = format!("{md:?} {}", md.flag_names());
            let end = md5_end(md.version);
            assert_eq!(
                &md.encode()[..end],
                &sector[..end],
                "decoded metadata encodes to other bytes"
            );
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// `data` with the MD5 of each metadata candidate of a known version recomputed.
fn fix_md5(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    for at in candidates(data) {
        let sector = &mut out[at..];
        if sector.len() < ENCODED_LEN || &sector[..MAGIC.len()] != MAGIC || sector[9] != 0 {
            continue;
        }
        let version = version_of(sector);
        if version > VERSION {
            continue;
        }
        let end = md5_end(version);
        use md5::Digest as _;
        let sum = md5::Md5::digest(&sector[..end - 16]);
        sector[end - 16..end].copy_from_slice(&sum);
    }
    out
}

/// The provider size the metadata in `data` names (`md_provsize`), when it is larger
/// than `data` and not absurd.
fn named_size(data: &[u8]) -> Option<u64> {
    candidates(data).into_iter().find_map(|at| {
        let sector = &data[at..];
        if sector.len() < ENCODED_LEN || &sector[..MAGIC.len()] != MAGIC {
            return None;
        }
        let p = if version_of(sector) == 0 { 28 } else { 30 };
        let size = u64::from_le_bytes(sector[p..p + 8].try_into().expect("8 bytes"));
        (size > data.len() as u64 && size <= MAX_PROVIDER).then_some(size)
    })
}

/// Reads the provider of `size` bytes that ends with `data`, renders it, and unlocks it.
fn provider(data: &[u8], size: u64) -> Reached {
    let store = MemStore::ending_with(data.to_vec(), size);
    let mut header = match Header::read(&store) {
        Ok(h) => h,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return Reached::Refused;
        }
    };
    let _ = header.dump();
    let _ = header.to_json().to_string();
    let _ = (header.name(), header.uuid(), header.needs_repair());
    let _ = header.backup_len(size);
    let _ = header.volume_info(&store);
    let Ok(slots) = header.active_keyslots() else {
        return Reached::Read;
    };
    let mut reached = Reached::Read;
    // The passphrase alone, then with the keyfile (after it, the keyfile alone for
    // metadata of keyfiles only).
    for keyfiles in [vec![], vec![Zeroizing::new(GELI_KEYFILE.to_vec())]] {
        header
            .set_keyfiles(keyfiles.clone())
            .expect("GELI takes keyfiles");
        for &slot in &slots {
            match header.keyslot_kdf(slot) {
                Ok(Kdf::Pbkdf2 { iterations, .. }) if iterations <= MAX_ITERATIONS => {}
                _ => continue,
            }
            if let Ok(unlocked) = header.unlock_slot(&store, GELI_PASSPHRASE, Some(slot)) {
                use_unlocked(data, size, &unlocked);
                rewrite(data, size, &keyfiles, slot, unlocked.volume_key());
                reached = Reached::Unlocked;
            }
        }
        if reached == Reached::Unlocked {
            break;
        }
    }
    reached
}

/// The geometry of an opened provider, and its first and last sectors read through the
/// engine (zeros where the input holds nothing: they decrypt to noise, or fail their tag).
fn use_unlocked(data: &[u8], size: u64, u: &Unlocked) {
    let _ = format!("{u:?}");
    let _ = (u.layout(), u.geometry(), u.sector_cipher());
    let opts = EngineOptions {
        threads: Some(1),
        read_only: true,
        chunk_bytes: None,
    };
    let store = MemStore::ending_with(data.to_vec(), size);
    let Ok(vol) = u.engine(Box::new(store), opts) else {
        return;
    };
    let sector = vol.sector_size() as u64;
    let mut buf = vec![0u8; sector as usize];
    if vol.size() >= sector {
        let _ = vol.read_at(&mut buf, 0);
        let _ = vol.read_at(&mut buf, vol.size() / sector * sector - sector);
    }
}

/// The passphrase [`rewrite`] gives a slot.
const NEW_PASSPHRASE: &[u8] = b"new passphrase";

/// `geli setkey`, `delkey` and `configure`, each on a writable copy of the provider
/// opened in `slot` (with `keyfiles`, giving the master key `key`): what each changes is
/// what it should, and nothing else of the metadata; the master key stays the same; an
/// operation refused writes nothing.
fn rewrite(data: &[u8], size: u64, keyfiles: &[Zeroizing<Vec<u8>>], slot: usize, key: &[u8]) {
    let copy = || MemStore::writable_ending_with(data.to_vec(), size);
    let read = |store: &MemStore| {
        let mut h = Header::read(store).expect("the provider reads again after a change");
        h.set_keyfiles(keyfiles.to_vec())
            .expect("GELI takes keyfiles");
        h
    };
    let md = |h: &Header| h.downcast_ref::<Geli>().expect("GELI").metadata().clone();
    let refused = |store: &MemStore, what: &str| {
        assert_eq!(store.written(), 0, "{what} was refused after writing");
    };
    let before = md(&read(&copy()));
    // The other slot, as it was.
    let others = |m: &Metadata| {
        (0..MAX_MKEYS)
            .filter(|&n| n != slot)
            .map(|n| (m.keys & 1 << n, m.mkeys[n]))
            .collect::<Vec<_>>()
    };
    // setkey (the iteration count kept: keyfiles-only metadata would calibrate one).
    if before.iterations >= 0 {
        let store = copy();
        let mut h = read(&store);
        let kdf = KdfOptions {
            kind: KdfKind::Pbkdf2,
            ..KdfOptions::default()
        };
        match h.change_key(&store, GELI_PASSPHRASE, NEW_PASSPHRASE, &kdf, Some(slot)) {
            Ok(n) => {
                let again = read(&store);
                let after = md(&again);
                let u = again
                    .unlock_slot(&store, NEW_PASSPHRASE, Some(n))
                    .expect("the new passphrase opens its slot");
                assert_eq!(u.volume_key(), key, "setkey changed the master key");
                assert_eq!(
                    others(&after),
                    others(&before),
                    "setkey changed another slot"
                );
                let mut expect = before.clone();
                expect.keys |= 1 << n;
                expect.mkeys[n] = after.mkeys[n];
                assert_eq!(after, expect, "setkey changed other fields");
            }
            Err(_) => refused(&store, "setkey"),
        }
    }
    // delkey.
    let store = copy();
    let mut h = read(&store);
    match h.remove_key(&store, slot) {
        Ok(()) => {
            let after = md(&read(&store));
            assert_eq!(after.keys & 1 << slot, 0, "delkey left the slot in use");
            assert_eq!(
                others(&after),
                others(&before),
                "delkey changed another slot"
            );
        }
        Err(_) => refused(&store, "delkey"),
    }
    // configure: NODELETE flipped.
    let store = copy();
    let mut h = read(&store);
    let flipped = before.flags ^ flags::NODELETE;
    let g = h.downcast_mut::<Geli>().expect("GELI");
    match g.set_flags(&store, flipped) {
        Ok(_) => {
            let mut expect = before.clone();
            expect.flags = flipped;
            assert_eq!(
                md(&read(&store)),
                expect,
                "configure changed more than the flags"
            );
        }
        Err(_) => refused(&store, "configure"),
    }
}
