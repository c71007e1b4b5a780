//! The LUKS1 and LUKS2 targets: an image's first bytes through header detection, parsing
//! and validation, `dump`, the JSON rendering, and unlocking where the KDFs are cheap; a
//! refused header through what `dump` still shows of it, and a header that needs repair
//! (or is refused) through `repair` on a copy, which must leave a header that reads
//! without needing repair, or refuse without writing.
//!
//! The seed images (`scripts/fuzz.sh seeds`) are made by cryptsetup and qemu-img with
//! [`PASSPHRASE`] and the cheapest KDF costs they accept, so a mutated header whose
//! keyslot still opens goes on into the sector layout and the data area's cipher.

use crate::store::MemStore;
use sectorcrypt_volume::format::dump;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::Kdf;
use sectorcrypt_volume::luks::luks2::HDR_SIZES;
use sectorcrypt_volume::luks::Magic;
use sectorcrypt_volume::{formats, Error, Header, Store};
use serde_json::Value;

/// The passphrase of the seed images.
pub const PASSPHRASE: &[u8] = b"fuzz";

/// The size of the image an input stands for (the bytes after the input read as zeros):
/// large enough for cryptsetup's default data offset (16 MiB).
const IMAGE_SIZE: u64 = 64 << 20;

/// Inputs shorter than this are whole images (cut short), not the start of one.
const WHOLE_BELOW: usize = 1024;

/// PBKDF2 iterations (keyslot or digest) tried at most: the seeds use 1000.
const MAX_ITERATIONS: u64 = 4000;

/// How far an input got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reached {
    /// The header was refused.
    Refused,
    /// The header was read; no keyslot opened with [`PASSPHRASE`].
    Read,
    /// A keyslot opened.
    Unlocked,
}

/// The LUKS1 target.
pub fn luks1(data: &[u8]) {
    open(data.to_vec());
}

/// The LUKS2 target: checksums fixed up first.
pub fn luks2(data: &[u8]) {
    open(fix_luks2_checksums(data));
}

/// What [`luks1`] (`fix: false`) or [`luks2`] (`fix: true`) reached with `data`.
pub fn reached(data: &[u8], fix: bool) -> Reached {
    open(if fix {
        fix_luks2_checksums(data)
    } else {
        data.to_vec()
    })
}

/// `data` with the checksum of every LUKS2 header copy in it recomputed: a copy is a
/// primary magic at 0 or a secondary magic at one of the header sizes (cryptsetup's, or
/// librbd's clone magic, whose checksum covers the real magic), with a valid
/// header size and a checksum algorithm sectorcrypt knows. The image is extended with
/// zeros to the end of each such copy, since the checksum covers the whole copy.
pub fn fix_luks2_checksums(data: &[u8]) -> Vec<u8> {
    let mut img = data.to_vec();
    let offsets = std::iter::once(0).chain(HDR_SIZES);
    for at in offsets {
        let at = at as usize;
        let Some(bin) = img.get(at..at + 512) else {
            continue;
        };
        // cryptsetup's magic, or librbd's clone magic (its checksum is the real one's).
        if Magic::of(bin, at != 0).is_none() || bin[6..8] != [0, 2] {
            continue;
        }
        let size = u64::from_be_bytes(bin[8..16].try_into().expect("8 bytes"));
        if !HDR_SIZES.contains(&size) {
            continue;
        }
        let alg = &bin[72..104];
        let alg = &alg[..alg.iter().position(|&c| c == 0).unwrap_or(alg.len())];
        let Some(hash) = std::str::from_utf8(alg)
            .ok()
            .and_then(|a| HashAlg::parse(a).ok())
        else {
            continue;
        };
        let end = at + size as usize;
        if img.len() < end {
            img.resize(end, 0);
        }
        let csum = at + 448..at + 512;
        img[csum.clone()].fill(0);
        let mut real = img[at..at + 6].to_vec();
        Magic::as_real(&mut real);
        let sum = hash.digest(&[&real, &img[at + 6..end]]);
        img[csum.start..csum.start + sum.len()].copy_from_slice(&sum);
    }
    img
}

/// Reads the header of the image starting with `image`, renders it, and tries the
/// passphrase on every cheap keyslot.
fn open(image: Vec<u8>) -> Reached {
    let size = if image.len() < WHOLE_BELOW {
        image.len() as u64
    } else {
        IMAGE_SIZE
    };
    let input_len = image.len() as u64;
    let store = MemStore::new(image.clone(), size);
    let header = match Header::read(&store) {
        Ok(h) => h,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if let Ok(Some(s)) = formats::salvage(&store) {
                let _ = dump::render(&s.report);
                let _ = s.json.map(|j| j.to_string());
            }
            repair(image, size);
            return Reached::Refused;
        }
    };
    if header.needs_repair() {
        repair(image, size);
    }
    let _ = header.dump();
    let json = header.to_json();
    let _ = json.to_string();
    let _ = (header.uuid(), header.needs_repair(), header.kdf_kinds());
    let _ = header.backup_len(size);
    let Ok(slots) = header.active_keyslots() else {
        return Reached::Read;
    };
    if digest_iterations(&json) > MAX_ITERATIONS {
        return Reached::Read;
    }
    let mut reached = Reached::Read;
    for slot in slots {
        match header.keyslot_kdf(slot) {
            Ok(kdf) if cheap(&kdf) => {}
            _ => continue,
        }
        // Material the input does not hold reads as zeros and can only fail, after the
        // whole derivation: the runs go to inputs that hold some.
        if material_offset(&json, slot).is_none_or(|at| at >= input_len) {
            continue;
        }
        if let Ok(unlocked) = header.unlock_slot(&store, PASSPHRASE, Some(slot)) {
            use_unlocked(&store, &unlocked);
            reached = Reached::Unlocked;
        }
    }
    reached
}

/// `repair` as the command runs it, on a writable copy of the image: a repair that did
/// something leaves a header that reads and needs no more repair; a header refused as
/// such (not an I/O error) is refused before anything is written.
fn repair(image: Vec<u8>, size: u64) {
    let store = MemStore::writable(image, size);
    match formats::repair_header(&store) {
        Ok(done) if !done.is_empty() => match Header::read(&store) {
            Ok(h) => assert!(
                !h.needs_repair(),
                "after repair ({done:?}) still needs repair"
            ),
            Err(e) => panic!("after repair ({done:?}) the header is refused: {e}"),
        },
        Ok(_) => {}
        Err(e @ Error::Header(_)) => assert_eq!(store.written(), 0, "refused ({e}) after writing"),
        Err(_) => {}
    }
}

/// The sector layout and cipher of an opened volume, and its first sector decrypted.
fn use_unlocked(store: &MemStore, u: &sectorcrypt_volume::Unlocked) {
    let _ = format!("{u:?}");
    let _ = u.layout();
    let Ok(cipher) = u.sector_cipher() else {
        return;
    };
    let mut sector = vec![0u8; u.sector_size];
    if u.data_size >= u.sector_size as u64 && store.read_at(&mut sector, u.data_offset).is_ok() {
        let _ = cipher.decrypt(u.iv.number(0, u.sector_size), &mut sector);
    }
}

/// Where keyslot `slot`'s material starts (LUKS1's `key_material_offset` in sectors,
/// LUKS2's `area.offset`).
fn material_offset(json: &Value, slot: usize) -> Option<u64> {
    let luks1 = json["keyslots"].as_array().and_then(|k| k.get(slot));
    if let Some(k) = luks1 {
        return k["key_material_offset"].as_u64().map(|s| s * 512);
    }
    json["keyslots"][slot.to_string()]["area"]["offset"]
        .as_str()?
        .parse()
        .ok()
}

/// The largest PBKDF2 iteration count of the volume key's digests (LUKS1's
/// `mk_digest_iterations`, LUKS2's `digests.*.iterations`).
fn digest_iterations(json: &Value) -> u64 {
    let luks1 = json["mk_digest_iterations"].as_u64();
    let luks2 = json["digests"]
        .as_object()
        .into_iter()
        .flat_map(|d| d.values())
        .map(|d| d["iterations"].as_u64().unwrap_or(u64::MAX));
    luks1.into_iter().chain(luks2).max().unwrap_or(0)
}

/// Whether a derivation costs about a millisecond or less.
fn cheap(kdf: &Kdf) -> bool {
    match *kdf {
        Kdf::Pbkdf2 { iterations, .. } => iterations as u64 <= MAX_ITERATIONS,
        Kdf::Argon2 {
            time,
            memory_kib,
            parallel,
            ..
        } => time <= 8 && memory_kib <= 1024 && parallel <= 4,
    }
}
