//! The two copies of the LUKS2 header and their checksums.
//!
//! Each copy is a 4096-byte binary header followed by the JSON area, `hdr_size` bytes in
//! all; the primary is at offset 0, the secondary at `hdr_size`. The checksum (sha256, or
//! whatever `csum_alg` names) covers the whole copy with the checksum field zeroed.
//! Reading takes the valid copy with the higher sequence id and notes why the other was
//! not taken; writing goes to the stale copy first (the primary when both are good), each
//! followed by a sync, so a crash at any point leaves one valid copy: the old metadata or
//! the new.
//!
//! Binary header layout (all integers big-endian):
//! ```text
//!   0 magic[6]  "LUKS\xba\xbe" (primary) / "SKUL\xba\xbe" (secondary)
//!   6 version   u16 = 2
//!   8 hdr_size  u64 (binary header + json area: 16 KiB .. 4 MiB, a power of two)
//!  16 seqid     u64
//!  24 label[48]   72 csum_alg[32]   104 salt[64]   168 uuid[40]   208 subsystem[48]
//! 256 hdr_offset u64   264 padding[184]   448 csum[64]   512 padding[3584]
//! ```

use super::json::validate;
use super::Luks2;
use crate::error::{Error, HeaderError, Result};
use crate::hash::HashAlg;
use crate::luks::fields::{be16, be64, cstr, put_cstr};
use crate::store::{self, Store};
use serde_json::Value;

/// Size of the binary part of each header copy.
pub const BIN_SIZE: usize = 4096;
pub(super) const MAGIC_PRIMARY: &[u8; 6] = b"LUKS\xba\xbe";
const MAGIC_SECONDARY: &[u8; 6] = b"SKUL\xba\xbe";
/// The header sizes the specification allows (binary header + JSON area).
pub const HDR_SIZES: [u64; 9] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
];
/// Where the checksum lives in a copy.
const CSUM: std::ops::Range<usize> = 448..512;

/// The fields of the binary header that both copies share.
#[derive(Debug, Clone)]
pub(super) struct Binary {
    pub(super) hdr_size: u64,
    pub(super) seqid: u64,
    pub(super) label: String,
    pub(super) subsystem: String,
    pub(super) csum_alg: String,
    pub(super) uuid: String,
}

/// One valid copy.
pub(super) struct Copy {
    pub(super) bin: Binary,
    pub(super) salt: [u8; 64],
    pub(super) json: Value,
}

/// What reading both copies found.
pub(super) struct Found {
    /// The copy whose metadata is used.
    pub(super) chosen: Copy,
    /// Whether each copy (primary, secondary) is valid and current.
    pub(super) current: [bool; 2],
    /// Why a copy was not used.
    pub(super) damage: Vec<String>,
}

fn checksum(alg: &str, copy: &[u8]) -> Result<Vec<u8>> {
    let hash = HashAlg::parse(alg)
        .map_err(|_| Error::unsupported(format!("header checksum algorithm {alg:?}")))?;
    let mut zeroed = copy.to_vec();
    zeroed[CSUM].fill(0);
    Ok(hash.digest(&[&zeroed]))
}

/// Parses and checks one header copy of `buf.len()` bytes found at `at`.
fn parse_copy(buf: &[u8], at: u64) -> Result<Copy> {
    let magic = if at == 0 {
        MAGIC_PRIMARY
    } else {
        MAGIC_SECONDARY
    };
    let corrupt = |m: String| Error::corrupt(format!("header at offset {at}: {m}"));
    if &buf[..6] != magic {
        return Err(Error::corrupt(format!("no header magic at offset {at}")));
    }
    let version = be16(buf, 6);
    if version != 2 {
        return Err(Error::corrupt(format!(
            "header at offset {at} has version {version}, expected 2"
        )));
    }
    let hdr_size = be64(buf, 8);
    if !HDR_SIZES.contains(&hdr_size) || hdr_size != buf.len() as u64 {
        return Err(Error::corrupt(format!(
            "header at offset {at} has an invalid size {hdr_size}"
        )));
    }
    let hdr_offset = be64(buf, 256);
    if hdr_offset != at {
        return Err(Error::corrupt(format!(
            "header at offset {at} says it lives at offset {hdr_offset}"
        )));
    }
    let csum_alg = cstr(&buf[72..104], "checksum algorithm")?;
    let want = checksum(&csum_alg, buf)?;
    if !crate::ct_eq(&want, &buf[CSUM.start..CSUM.start + want.len()]) {
        return Err(corrupt("checksum mismatch".into()));
    }
    let area = &buf[BIN_SIZE..];
    let end = area
        .iter()
        .position(|&c| c == 0)
        .ok_or_else(|| corrupt("json area is not terminated".into()))?;
    let json: Value =
        serde_json::from_slice(&area[..end]).map_err(|e| corrupt(format!("invalid json: {e}")))?;
    validate(&json, hdr_size).map_err(|e| match e {
        Error::Header(HeaderError::Corrupt(m)) => corrupt(m),
        e => e,
    })?;
    Ok(Copy {
        bin: Binary {
            hdr_size,
            seqid: be64(buf, 16),
            label: cstr(&buf[24..72], "label")?,
            csum_alg,
            uuid: cstr(&buf[168..208], "uuid")?,
            subsystem: cstr(&buf[208..256], "subsystem")?,
        },
        salt: buf[104..168].try_into().expect("64 bytes"),
        json,
    })
}

/// Reads and checks the copy of `size` bytes at `at`.
fn read_copy(store: &dyn Store, at: u64, size: u64, what: &str) -> Result<Copy> {
    let mut buf = vec![0u8; size as usize];
    store::read_exact(store, &mut buf, at, what)?;
    parse_copy(&buf, at)
}

/// Reads both copies; `first` holds the first [`BIN_SIZE`] bytes of the store (zeros
/// beyond its end). `None` when neither copy has its magic: not a LUKS2 volume.
pub(super) fn read(store: &dyn Store, first: &[u8; BIN_SIZE]) -> Option<Result<Found>> {
    let mut damage = Vec::new();
    let mut primary = None;
    let mut hinted = None;
    let primary_magic = &first[..6] == MAGIC_PRIMARY;
    if primary_magic {
        let size = be64(first, 8);
        if HDR_SIZES.contains(&size) {
            hinted = Some(size);
            match read_copy(store, 0, size, "primary luks2 header") {
                Ok(c) => primary = Some(c),
                Err(e) => damage.push(format!("primary header: {e}")),
            }
        } else {
            damage.push(format!("primary header: invalid header size {size}"));
        }
    } else {
        damage.push("primary header: no luks magic".into());
    }
    // The secondary copy sits at hdr_size; with a damaged primary, try every size.
    let mut secondary = None;
    let mut offsets: Vec<u64> = hinted.into_iter().collect();
    offsets.extend(HDR_SIZES.iter().filter(|&&s| Some(s) != hinted));
    let mut found_magic = false;
    let mut sec_err = None;
    for at in offsets {
        let mut bin = [0u8; BIN_SIZE];
        if store::read_exact(store, &mut bin, at, "secondary luks2 header").is_err() {
            continue;
        }
        if &bin[..6] != MAGIC_SECONDARY {
            continue;
        }
        found_magic = true;
        let size = be64(&bin, 8);
        if size != at {
            sec_err = Some(format!("invalid header size {size} at offset {at}"));
            continue;
        }
        match read_copy(store, at, size, "secondary luks2 header") {
            Ok(c) => {
                secondary = Some(c);
                break;
            }
            Err(e) => sec_err = Some(e.to_string()),
        }
    }
    if secondary.is_none() {
        let why =
            sec_err.unwrap_or_else(|| if found_magic { "damaged" } else { "not found" }.into());
        damage.push(format!("secondary header: {why}"));
    }
    let (chosen, current) = match (primary, secondary) {
        (None, None) if !primary_magic && !found_magic => return None,
        (None, None) => {
            return Some(Err(Error::corrupt(format!(
                "both luks2 header copies are damaged ({})",
                damage.join("; ")
            ))))
        }
        (Some(p), None) => (p, [true, false]),
        (None, Some(s)) => (s, [false, true]),
        (Some(p), Some(s)) => newer(p, s, &mut damage),
    };
    Some(Ok(Found {
        chosen,
        current,
        damage,
    }))
}

/// Of two valid copies, the one with the higher sequence id (the primary on a tie), and
/// which copies are current.
fn newer(p: Copy, s: Copy, damage: &mut Vec<String>) -> (Copy, [bool; 2]) {
    if p.bin.hdr_size != s.bin.hdr_size {
        damage.push("the copies disagree on the header size".into());
    }
    let (ps, ss) = (p.bin.seqid, s.bin.seqid);
    if ss > ps {
        damage.push(format!("primary header is older (seqid {ps} < {ss})"));
        (s, [false, true])
    } else if ps > ss {
        damage.push(format!("secondary header is older (seqid {ss} < {ps})"));
        (p, [true, false])
    } else {
        let same = p.json == s.json && p.bin.hdr_size == s.bin.hdr_size;
        (p, [true, same])
    }
}

impl Luks2 {
    /// Copy `which` (0 primary, 1 secondary) as bytes, with its checksum.
    fn copy_bytes(&self, which: usize, text: &[u8]) -> Result<Vec<u8>> {
        let b = &self.bin;
        let mut buf = vec![0u8; b.hdr_size as usize];
        buf[..6].copy_from_slice(if which == 0 {
            MAGIC_PRIMARY
        } else {
            MAGIC_SECONDARY
        });
        buf[6..8].copy_from_slice(&2u16.to_be_bytes());
        buf[8..16].copy_from_slice(&b.hdr_size.to_be_bytes());
        buf[16..24].copy_from_slice(&b.seqid.to_be_bytes());
        put_cstr(&mut buf[24..72], &b.label, "label")?;
        put_cstr(&mut buf[72..104], &b.csum_alg, "checksum algorithm")?;
        buf[104..168].copy_from_slice(&self.salts[which]);
        put_cstr(&mut buf[168..208], &b.uuid, "uuid")?;
        put_cstr(&mut buf[208..256], &b.subsystem, "subsystem")?;
        buf[256..264].copy_from_slice(&self.copy_offset(which).to_be_bytes());
        buf[BIN_SIZE..BIN_SIZE + text.len()].copy_from_slice(text);
        let sum = checksum(&b.csum_alg, &buf)?;
        buf[CSUM.start..CSUM.start + sum.len()].copy_from_slice(&sum);
        Ok(buf)
    }

    /// Where copy `which` lives.
    fn copy_offset(&self, which: usize) -> u64 {
        if which == 0 {
            0
        } else {
            self.bin.hdr_size
        }
    }

    fn write_copy(&self, store: &dyn Store, which: usize, text: &[u8]) -> Result<()> {
        let buf = self.copy_bytes(which, text)?;
        store::write_all(store, &buf, self.copy_offset(which), "luks2 header")?;
        store::sync(store)
    }

    /// Writes both copies with the next sequence id: the stale copy first, each followed
    /// by a sync.
    pub fn write(&mut self, store: &dyn Store) -> Result<()> {
        let text = serde_json::to_vec(&self.json).map_err(|e| Error::invalid(e.to_string()))?;
        self.check_fits(&self.json)?;
        validate(&self.json, self.bin.hdr_size)?;
        self.bin.seqid += 1;
        let order = if self.current[0] && !self.current[1] {
            [1, 0]
        } else {
            [0, 1]
        };
        let [first, second] = order;
        // Until both are written, only the copy just written is current.
        self.current[first] = false;
        self.write_copy(store, first, &text)?;
        self.current = [false, false];
        self.current[first] = true;
        self.write_copy(store, second, &text)?;
        self.current[second] = true;
        self.damage.clear();
        Ok(())
    }
}
