//! The signatures of every on-disk format known here, found by their magic alone, and
//! wiping them before a format writes its own header (see [`crate::formats`] for why).
//!
//! A leaf module: the formats (`luks`, `geli`) call [`wipe_signatures`] when they create a
//! header, and the registry ([`crate::formats`]) names the formats, so this knows each
//! format's magic and places itself instead of asking the formats.

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
/// How much of a signature's sector [`wipe_signatures`] zeroes: the magic, and the rest
/// of the fixed header after it (LUKS's UUID and checksum, GELI's whole metadata).
const WIPE_BYTES: usize = 512;

/// The signatures of the formats known here in `store`: a LUKS header at 0, a LUKS2
/// secondary header at any offset where one may be, GELI metadata in the last 512-byte or
/// 4096-byte sector (where FreeBSD tastes it). Only the magic is looked at (a signature
/// with a bad checksum counts: other tools would still find it). Never writes.
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
    Ok(found)
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
}
