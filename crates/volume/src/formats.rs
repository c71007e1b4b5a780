//! The registry of on-disk formats: which drivers exist, in which order they are tried,
//! and [`Header::read`], which asks them. It sits above [`crate::format`] (the interface)
//! and the format modules (the implementations), so that neither of those imports the
//! other.
//!
//! **Two formats at once.** A store where two drivers find a valid header (a LUKS header
//! at the start and GELI metadata in the last sector, left by a format that did not wipe
//! the other) is refused, naming both: which one is current cannot be told, and opening
//! the wrong one would write under an old key. Formatting prevents it: every format
//! (LUKS1, LUKS2, GELI, from the command line or the libraries) first calls
//! [`wipe_signatures`], which zeroes the signature of every format known here wherever
//! blkid and the formats' own tools look for one ([`signatures`]), as cryptsetup's
//! `luksFormat` wipes other signatures with libblkid.

use crate::error::{Error, HeaderError, Result};
use crate::format::{Driver, Header, Probe, Salvaged, PROBE_BYTES};
use crate::store::{self, Store};

/// The formats, in the order they are tried.
pub const FORMATS: &[Driver] = &[
    crate::luks::luks1::DRIVER,
    crate::luks::luks2::DRIVER,
    crate::geli::DRIVER,
];

/// The names of [`FORMATS`], for messages: `luks1, luks2, geli`.
pub fn known_formats() -> String {
    let names: Vec<&str> = FORMATS.iter().map(|d| d.name).collect();
    names.join(", ")
}

/// The first bytes of `store` and its size, for the detectors.
fn probe_parts(store: &dyn Store) -> Result<(Vec<u8>, u64)> {
    let mut head = vec![0u8; PROBE_BYTES];
    let n = store::read_head(store, &mut head)?;
    head.truncate(n);
    Ok((head, store::size(store)?))
}

/// What is left of the header of `store` when [`Header::read`] refuses it: the first
/// format that recognises a header there says. Never writes.
pub fn salvage(store: &dyn Store) -> Result<Option<Salvaged>> {
    let (head, size) = probe_parts(store)?;
    let probe = Probe {
        store,
        head: &head,
        size,
    };
    Ok(FORMATS.iter().find_map(|d| (d.salvage)(&probe)))
}

/// Repairs the header of `store` as cryptsetup's `repair` does: a damaged or stale copy
/// is rebuilt from the good one, a header the format can rebuild without guessing (LUKS1:
/// inactive keyslots pointing outside the standard layout) is rewritten; a header with
/// nothing valid to rebuild from is refused with why. Returns what was done (nothing
/// when the header needs no repair).
pub fn repair_header(store: &dyn Store) -> Result<Vec<String>> {
    match Header::read(store) {
        Ok(mut h) if h.needs_repair() => h.repair(store),
        Ok(_) => Ok(Vec::new()),
        Err(e @ Error::Header(HeaderError::Corrupt(_))) => {
            match salvage(store)?.and_then(|s| s.rebuilt) {
                Some(mut rebuilt) => rebuilt.repair(store),
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

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
    for prov in crate::geli::PROVIDER_SECTORS {
        if size >= prov {
            let at = (size / prov) * prov - prov;
            places.push((at, &crate::geli::metadata::MAGIC[..], "GELI metadata"));
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

impl Header {
    /// Detects the format of `store` and reads its header. Never writes. A store where
    /// two formats find a valid header is refused, naming both (see the module doc).
    pub fn read(store: &dyn Store) -> Result<Header> {
        let (head, size) = probe_parts(store)?;
        let probe = Probe {
            store,
            head: &head,
            size,
        };
        for (i, driver) in FORMATS.iter().enumerate() {
            if let Some(found) = (driver.detect)(&probe) {
                let header = found.map(Header::new)?;
                let other = FORMATS[i + 1..]
                    .iter()
                    .find(|d| matches!((d.detect)(&probe), Some(Ok(_))));
                if let Some(other) = other {
                    return Err(HeaderError::Corrupt(format!(
                        "{} holds two formats at once, a valid {} header and a valid {} \
                         header (one left behind by a format that did not wipe it): \
                         refusing to guess which is current; keep the right one with \
                         `header backup` and `header restore`, or format it again",
                        store.name(),
                        driver.name,
                        other.name
                    ))
                    .into());
                }
                return Ok(header);
            }
        }
        Err(HeaderError::Unrecognised(format!(
            "none of {} is in {} ({} bytes)",
            known_formats(),
            store.name(),
            probe.size
        ))
        .into())
    }
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
        raw[size - 4096..size - 4096 + 9].copy_from_slice(crate::geli::metadata::MAGIC);
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
