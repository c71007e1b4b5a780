//! The `fvault2` target: the bytes are the start of a FileVault 2 physical volume (zeros
//! after them, up to a 256 MiB image) with its encrypted metadata blocks in *plaintext*:
//! before the store is read, the CRC-32C of the volume header, of the disk label block it
//! names and of every metadata block the volume groups descriptor names is recomputed,
//! and those metadata blocks are encrypted as CoreStorage stores them (AES-XTS under the
//! header's key and UUID, the block index as tweak). Mutations so reach the block parser,
//! the XML search and the base64 decoding instead of stopping at a checksum or at
//! ciphertext. The metadata is read (detected, and named), dumped and rendered as JSON;
//! when the PBKDF2 iteration count is small (the seeds': 1), [`PASSPHRASE`] is tried and,
//! when it opens, the first and last sectors of the logical volume are read through the
//! engine, which must refuse a write.
//!
//! Seeds (`fuzz/seeds.sh`): cryptsetup's test image, cut down to its volume header, disk
//! label and metadata blocks (decrypted) moved next to each other, the KEK wrapped again
//! under [`PASSPHRASE`] with one PBKDF2 iteration.

use crate::store::MemStore;
use sectorcrypt_crypto::aes::Xts;
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::format::{dump, Format};
use sectorcrypt_volume::formats::{read_as, Requested};
use sectorcrypt_volume::fvault2::metadata::{crc32c, VolumeHeader, BLOCK_LEN, HEADER_LEN};
use sectorcrypt_volume::fvault2::Fvault2;
use sectorcrypt_volume::Header;

/// The image an input stands for: at least this many bytes (the seeds' logical volume
/// ends at 224 MiB).
const IMAGE: u64 = 256 << 20;

/// The passphrase the seeds open with.
pub const FVAULT2_PASSPHRASE: &[u8] = b"fuzz";

/// Stores the CRC-32C of `block[8..]` with its seed in `block[..8]`.
fn set_crc(block: &mut [u8]) {
    let crc = crc32c(0xffff_ffff, &block[8..]);
    block[..4].copy_from_slice(&crc.to_le_bytes());
    block[4..8].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        data.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The range of `len` bytes at `at` when it lies inside `data`.
fn inside(data: &[u8], at: u64, len: usize) -> Option<std::ops::Range<usize>> {
    let at = usize::try_from(at).ok()?;
    let end = at.checked_add(len)?;
    (end <= data.len()).then_some(at..end)
}

/// Recomputes, in `data`, the checksums of the volume header, the disk label and the
/// metadata blocks, and encrypts those blocks (see the module doc). Blocks past the end
/// of `data`, and an all-zero block and those after it, are left as they are.
pub fn fix_fvault2(data: &mut [u8]) {
    if data.len() < HEADER_LEN {
        return;
    }
    set_crc(&mut data[..HEADER_LEN]);
    let Ok(h) = VolumeHeader::parse(&data[..HEADER_LEN]) else {
        return;
    };
    let bs = u64::from(h.block_size);
    let Some(label) = h
        .disk_label_block
        .checked_mul(bs)
        .and_then(|at| inside(data, at, BLOCK_LEN))
    else {
        return;
    };
    let descriptor = u32_at(data, label.start + 220)
        .and_then(|off| (label.start as u64).checked_add(u64::from(off)))
        .and_then(|at| inside(data, at, 40));
    set_crc(&mut data[label]);
    let Some(d) = descriptor else {
        return;
    };
    let (Some(count), Some(first)) = (u64_at(data, d.start + 8), u64_at(data, d.start + 32)) else {
        return;
    };
    let Some(start) = first.checked_mul(bs) else {
        return;
    };
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(&h.metadata_key);
    key[16..].copy_from_slice(&h.uuid);
    let Ok(xts) = Xts::new(&key) else {
        return;
    };
    for i in 0..count {
        let Some(r) = (i as u128 * BLOCK_LEN as u128)
            .checked_add(u128::from(start))
            .and_then(|at| u64::try_from(at).ok())
            .and_then(|at| inside(data, at, BLOCK_LEN))
        else {
            return;
        };
        let block = &mut data[r];
        if block.iter().all(|&b| b == 0) {
            return;
        }
        set_crc(block);
        let mut tweak = [0u8; 16];
        tweak[..8].copy_from_slice(&i.to_le_bytes());
        xts.encrypt(&tweak, block).expect("an 8 KiB data unit");
    }
}

/// The harness.
pub fn fvault2(input: &[u8]) {
    let mut data = input.to_vec();
    fix_fvault2(&mut data);
    let store = MemStore::new(data.clone(), IMAGE);
    let detected = Header::read(&store)
        .ok()
        .filter(|h| h.name() == "fvault2")
        .map(|h| (h.dump(), h.to_json()));
    let named = read_as(&store, Some(&Requested::Fvault2)).map(|h| h.dump());
    let Ok(f) = Fvault2::read(&store) else {
        return;
    };
    // Detected (no other format claiming the bytes too), the same header as named.
    if let (Some((d, _)), Ok(n)) = (&detected, &named) {
        assert_eq!(d, n);
    }
    let _ = dump::render(&f.report());
    let json = f.to_json();
    let md = f.metadata();
    assert!(md.data_size > 0 && md.iterations > 0);
    assert_eq!(json["pbkdf2"]["iterations"], md.iterations);
    if md.iterations > 16 {
        return;
    }
    let Ok((key, slot)) = f.unlock_key(&store, FVAULT2_PASSPHRASE, None) else {
        return;
    };
    assert_eq!((key.len(), slot), (32, 0));
    let Ok(u) = f.unlocked(&store, key, slot) else {
        return;
    };
    let opts = EngineOptions {
        threads: Some(1),
        read_only: false,
        chunk_bytes: None,
    };
    let Ok(vol) = u.engine(Box::new(MemStore::new(data, IMAGE)), opts) else {
        return;
    };
    let mut buf = vec![0u8; 512];
    if vol.size() >= 512 {
        let _ = vol.read_at(&mut buf, 0);
        let _ = vol.read_at(&mut buf, vol.size() / 512 * 512 - 512);
        assert!(
            vol.write_at(&buf, 0).is_err(),
            "a FileVault 2 write went through"
        );
    }
}
