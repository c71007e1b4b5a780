//! The `bitlk` target: the bytes are the start of a BitLocker volume (zeros after them, up
//! to a 1 MiB image): the volume header, then the FVE metadata copies wherever the header
//! places them. The CRC-32 of every copy the header names inside the bytes is recomputed
//! first, so mutated metadata reaches the entry parser instead of stopping at the
//! checksum. The metadata is read (directly and through the format registry), dumped and
//! rendered as JSON; a clear key is tried (the password stretch costs a million SHA-256
//! rounds: too slow to fuzz), and when it opens, the first sectors of the view are read.
//!
//! Seeds (`fuzz/seeds.sh`): cryptsetup's Windows-made images, each cut down to its volume
//! header and its three FVE blocks moved next to it.

use crate::store::MemStore;
use sectorcrypt_volume::bitlk::metadata::{crc32, VolumeHeader};
use sectorcrypt_volume::bitlk::Bitlk;
use sectorcrypt_volume::format::{dump, Format};
use sectorcrypt_volume::Header;

/// The image an input stands for: at least this many bytes.
const IMAGE: u64 = 1 << 20;

/// Recomputes, in `data`, the CRC-32 of each FVE block the volume header names (where the
/// block and the validation after it lie inside `data`).
pub fn fix_bitlk_crcs(data: &mut [u8]) {
    let head = &data[..data.len().min(512)];
    let Some(Ok(header)) = VolumeHeader::detect(head) else {
        return;
    };
    for off in header.fve_offsets {
        let Ok(off) = usize::try_from(off) else {
            continue;
        };
        // Offsets come from the (mutated) header: near usize::MAX, any sum overflows.
        let at = off.checked_add(8).and_then(|a| Some(a..a.checked_add(2)?));
        let Some(len) = at.and_then(|r| data.get(r)) else {
            continue;
        };
        let block = usize::from(u16::from_le_bytes([len[0], len[1]])) << 4;
        let Some(end) = off.checked_add(block) else {
            continue;
        };
        if block < 112 || end.checked_add(8).is_none_or(|e| e > data.len()) {
            continue;
        }
        let crc = crc32(&data[off..end]);
        data[end + 4..end + 8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The harness.
pub fn bitlk(input: &[u8]) {
    let mut data = input.to_vec();
    fix_bitlk_crcs(&mut data);
    let store = MemStore::new(data, IMAGE);
    let _ = Header::read(&store).map(|h| (h.dump(), h.to_json()));
    let Ok(b) = Bitlk::read(&store) else {
        return;
    };
    let _ = dump::render(&b.report());
    let json = b.to_json();
    assert_eq!(
        json["vmks"].as_array().map(Vec::len),
        Some(b.metadata().vmks.len())
    );
    if let Ok((key, slot)) = b.unlock_key(&store, b"", None) {
        assert!(slot < b.metadata().vmks.len());
        if let Ok(view) = b.view(&store, &key) {
            let n = (view.sector_size() * 4).min(view.size() as usize);
            let mut buf = vec![0u8; n];
            let _ = view.read_at(&store, &mut buf, 0);
        }
    }
}
