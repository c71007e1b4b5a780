//! The signatures of every on-disk format known here, found by their magic alone, and
//! wiping them before a format writes its own header (see [`crate::formats`] for why).
//!
//! A leaf module (besides the store and errors it imports only `crc`, a leaf too): the
//! formats (`luks`, `geli`) call [`wipe_signatures`] when they create a header, and the
//! registry ([`crate::formats`]) names the formats, so this knows each format's magic and
//! places itself instead of asking the formats.

use crate::error::Result;
use crate::store::{self, Store};

/// The signature of a format found in a store by [`signatures`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// What it is: `LUKS header`, `LUKS2 secondary header`, `GELI metadata`.
    pub what: &'static str,
    /// Its offset in the store.
    pub offset: u64,
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {:#x}", self.what, self.offset)
    }
}

/// The LUKS magic, at the start of a LUKS1 or LUKS2 header.
const LUKS_MAGIC: &[u8] = b"LUKS\xba\xbe";
/// The magic of a LUKS2 secondary header.
const LUKS2_SECONDARY_MAGIC: &[u8] = b"SKUL\xba\xbe";
/// Where a LUKS2 secondary header may be: after a primary of 16 KiB to 4 MiB (the
/// offsets cryptsetup and blkid probe).
const LUKS2_SECONDARY_OFFSETS: [u64; 9] = [
    0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x200000, 0x400000,
];
/// The GELI metadata magic (`geli::metadata::MAGIC`; a test of `geli` checks they agree).
pub const GELI_MAGIC: &[u8] = b"GEOM::ELI";
/// The provider sector sizes whose last sector may hold GELI metadata
/// (`geli::PROVIDER_SECTORS`; a test of `geli` checks they agree).
pub const GELI_PROVIDER_SECTORS: [u64; 2] = [512, 4096];
/// The CoreStorage signature at byte 88 of a FileVault 2 volume header, counted only with
/// the header's CRC-32C right (two bytes alone would match random data too often, and
/// wiping them would destroy data that is not a header).
const CORESTORAGE_MAGIC: &[u8] = b"CS";
/// The size of a CoreStorage volume header.
const CORESTORAGE_HEADER: usize = 512;
/// How much of a signature's sector [`wipe_signatures`] zeroes: the magic, and the rest
/// of the fixed header after it (LUKS's UUID and checksum, GELI's whole metadata).
const WIPE_BYTES: usize = 512;

/// The signatures of the formats known here in `store`: a LUKS header at 0, a LUKS2
/// secondary header at any offset where one may be, GELI metadata in the last 512-byte or
/// 4096-byte sector (where FreeBSD tastes it), a FileVault 2 (CoreStorage) volume header
/// at 0. Only the magic is looked at (a signature with a bad checksum counts: other tools
/// would still find it), except for CoreStorage's two-byte magic, which counts only with
/// its header's checksum right. Never writes.
pub fn signatures(store: &dyn Store) -> Result<Vec<Signature>> {
    let size = store::size(store)?;
    let has = |offset: u64, magic: &[u8]| -> Result<bool> {
        if offset + magic.len() as u64 > size {
            return Ok(false);
        }
        let mut buf = vec![0u8; magic.len()];
        store::read_exact(store, &mut buf, offset, "a format signature")?;
        Ok(buf == magic)
    };
    let mut found = Vec::new();
    let mut places = vec![(0, LUKS_MAGIC, "LUKS header")];
    for offset in LUKS2_SECONDARY_OFFSETS {
        places.push((offset, LUKS2_SECONDARY_MAGIC, "LUKS2 secondary header"));
    }
    for prov in GELI_PROVIDER_SECTORS {
        if size >= prov {
            let at = (size / prov) * prov - prov;
            places.push((at, GELI_MAGIC, "GELI metadata"));
        }
    }
    for (offset, magic, what) in places {
        if !found.iter().any(|s: &Signature| s.offset == offset) && has(offset, magic)? {
            found.push(Signature { what, offset });
        }
    }
    if found.iter().all(|s| s.offset != 0) && corestorage_header(store, size)? {
        found.insert(
            0,
            Signature {
                what: "CoreStorage (FileVault 2) volume header",
                offset: 0,
            },
        );
    }
    Ok(found)
}

/// Whether `store` starts with a CoreStorage volume header: `CS` at byte 88 and a CRC-32C
/// of bytes 8..512 at 0 that matches, stored with the seed `0xffffffff` at 4.
fn corestorage_header(store: &dyn Store, size: u64) -> Result<bool> {
    if size < CORESTORAGE_HEADER as u64 {
        return Ok(false);
    }
    let mut h = [0u8; CORESTORAGE_HEADER];
    store::read_exact(store, &mut h, 0, "a format signature")?;
    let le = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    Ok(&h[88..90] == CORESTORAGE_MAGIC
        && le(4) == 0xffff_ffff
        && crate::crc::crc32c(0xffff_ffff, &h[8..]) == le(0))
}

/// Zeroes every signature [`signatures`] finds in `store` (up to 512 bytes from each
/// signature's start, within the store) and syncs: what a format calls before it writes
/// its own header, so that no other format's header stays live beside it. Returns what
/// was wiped.
pub fn wipe_signatures(store: &dyn Store) -> Result<Vec<Signature>> {
    let found = signatures(store)?;
    if found.is_empty() {
        return Ok(found);
    }
    let size = store::size(store)?;
    for sig in &found {
        let len = (size - sig.offset).min(WIPE_BYTES as u64) as usize;
        store::write_all(store, &vec![0u8; len], sig.offset, "a format signature")?;
    }
    store::sync(store)?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FileStore;

    /// Every place a signature may be is found and zeroed, and nothing else is touched.
    #[test]
    fn signatures_at_every_probed_place_are_found_and_wiped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let size = 8 << 20;
        let mut raw = vec![0x5au8; size];
        raw[..6].copy_from_slice(LUKS_MAGIC);
        raw[0x400000..0x400006].copy_from_slice(LUKS2_SECONDARY_MAGIC);
        raw[size - 4096..size - 4096 + 9].copy_from_slice(GELI_MAGIC);
        std::fs::write(&path, &raw).unwrap();
        let store = FileStore::open(&path, true).unwrap();
        let want = |offset, what| Signature { what, offset };
        let found = signatures(&store).unwrap();
        assert_eq!(
            found,
            vec![
                want(0, "LUKS header"),
                want(0x400000, "LUKS2 secondary header"),
                want(size as u64 - 4096, "GELI metadata"),
            ]
        );
        assert_eq!(wipe_signatures(&store).unwrap(), found);
        assert!(signatures(&store).unwrap().is_empty());
        let after = std::fs::read(&path).unwrap();
        for at in [0, 0x400000, size - 4096] {
            assert!(after[at..at + WIPE_BYTES].iter().all(|&b| b == 0));
            raw[at..at + WIPE_BYTES].fill(0);
        }
        assert!(after == raw, "bytes outside the signatures changed");
    }

    /// A CoreStorage volume header counts only with its checksum right, and is wiped
    /// whole; `CS` at byte 88 of other data is left alone.
    #[test]
    fn a_corestorage_header_counts_only_with_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let mut raw = vec![0x5au8; 1 << 20];
        raw[88..90].copy_from_slice(CORESTORAGE_MAGIC);
        raw[4..8].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
        std::fs::write(&path, &raw).unwrap();
        let store = FileStore::open(&path, true).unwrap();
        assert!(signatures(&store).unwrap().is_empty());
        assert!(wipe_signatures(&store).unwrap().is_empty());
        assert!(std::fs::read(&path).unwrap() == raw);
        let crc = crate::crc::crc32c(0xffff_ffff, &raw[8..512]);
        raw[..4].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, &raw).unwrap();
        let found = signatures(&store).unwrap();
        assert_eq!(
            found,
            vec![Signature {
                what: "CoreStorage (FileVault 2) volume header",
                offset: 0
            }]
        );
        assert_eq!(wipe_signatures(&store).unwrap(), found);
        let after = std::fs::read(&path).unwrap();
        raw[..WIPE_BYTES].fill(0);
        assert!(after == raw, "not the header alone was wiped");
    }
}
