//! The two copies of the LUKS2 header, read and checked as cryptsetup reads them, and
//! written in an order that survives a crash.
//!
//! Each copy is a 4096-byte binary header followed by the JSON area, `hdr_size` bytes in
//! all; the primary is at offset 0, the secondary at `hdr_size`. The checksum (sha256, or
//! whatever `csum_alg` names) covers the whole copy with the checksum field zeroed.
//!
//! Reading a copy: the binary header (magic, version, its own offset, a size of 16 KiB to
//! 4 MiB), the checksum, then the JSON area: one JSON object from its first byte, then a
//! NUL, then only NULs, and metadata that passes [`validate`](super::validate). The
//! secondary copy is read where the primary's size puts it; only when the primary's
//! binary header or checksum is bad is it searched for at every allowed size, so a copy
//! planted at another offset is never looked at beside a sound primary. Of two valid
//! copies the one with the higher sequence id wins (the primary on a tie).
//!
//! Writing goes to the stale copy first (the primary when both are good), each followed
//! by a sync, so a crash at any point leaves one valid copy: the old metadata or the new.
//! [`Luks2::rebuild_copies`] rewrites only the copies that are not current, from the bytes
//! of the good one.
//!
//! Binary header layout (all integers big-endian):
//! ```text
//!   0 magic[6]  "LUKS\xba\xbe" (primary) / "SKUL\xba\xbe" (secondary), or librbd's
//!               clone magic "RBDL\xba\xbe" / "LDBR\xba\xbe" (checksummed as the real one)
//!   6 version   u16 = 2
//!   8 hdr_size  u64 (binary header + json area: 16 KiB .. 4 MiB, a power of two)
//!  16 seqid     u64
//!  24 label[48]   72 csum_alg[32]   104 salt[64]   168 uuid[40]   208 subsystem[48]
//! 256 hdr_offset u64   264 padding[184]   448 csum[64]   512 padding[3584]
//! ```

use super::sizes::{BIN_SIZE, HDR_SIZES};
use super::validate::{check_depth, repair_kdf_leftovers, validate};
use super::Luks2;
use crate::error::{Error, HeaderError, Result};
use crate::hash::HashAlg;
use crate::luks::fields::{be16, be64, cstr, put_cstr};
use crate::luks::magic::Magic;
use crate::luks::rules::{detail, Rule};
use crate::store::{self, Store};
use serde_json::Value;

/// Where the checksum lives in a copy.
const CSUM: std::ops::Range<usize> = 448..512;
/// The copies' names, by index.
pub(super) const COPY: [&str; 2] = ["primary", "secondary"];

/// The fields of the binary header that both copies share.
#[derive(Debug, Clone)]
pub(super) struct Binary {
    /// The magic of the copy read, written back on both copies.
    pub(super) magic: Magic,
    pub(super) hdr_size: u64,
    pub(super) seqid: u64,
    pub(super) label: String,
    pub(super) subsystem: String,
    pub(super) csum_alg: String,
    pub(super) uuid: String,
}

/// A copy whose binary header and checksum are sound.
pub(super) struct Sound {
    pub(super) bin: Binary,
    pub(super) salt: [u8; 64],
    /// The JSON area as read.
    pub(super) area: Vec<u8>,
    /// The metadata parsed (an object, KDF leftovers dropped), when it parses at all.
    pub(super) json: Option<Value>,
    /// Whether the metadata passed validation, and if not why.
    pub(super) verdict: Result<()>,
    /// Keyslots whose KDF leftovers were dropped.
    pub(super) fixed: Vec<String>,
}

impl Sound {
    fn valid(&self) -> bool {
        self.verdict.is_ok()
    }
}

/// What reading one copy found.
pub(super) enum Read {
    /// Binary header and checksum sound (the metadata may still be invalid).
    Sound(Box<Sound>),
    /// A copy with its magic, refused.
    Damaged(Error),
    /// No copy here (no magic, or nothing to read).
    Absent(Error),
}

/// What reading both copies found.
pub(super) struct Found {
    /// The copy whose metadata is used (valid).
    pub(super) chosen: Sound,
    /// Whether each copy (primary, secondary) is valid and current.
    pub(super) current: [bool; 2],
    /// Why a copy was not used.
    pub(super) damage: Vec<String>,
}

fn checksum(alg: &str, copy: &[u8]) -> Result<Vec<u8>> {
    let hash = HashAlg::parse(alg)
        .map_err(|_| Rule::Luks2Checksum.broken(format!("unknown checksum algorithm {alg:?}")))?;
    let mut zeroed = copy.to_vec();
    zeroed[CSUM].fill(0);
    Magic::as_real(&mut zeroed);
    Ok(hash.digest(&[&zeroed]))
}

/// The size a binary header found at `at` gives its copy, after its checks.
fn binary_size(bin: &[u8], at: u64, secondary: bool) -> Result<u64> {
    let version = be16(bin, 6);
    if version != 2 {
        return Err(Rule::Luks2Magic.broken(format!("version {version}, not 2")));
    }
    let hdr_offset = be64(bin, 256);
    if hdr_offset != at {
        return Err(
            Rule::Luks2HeaderOffset.broken(format!("the copy at {at} says it is at {hdr_offset}"))
        );
    }
    let size = be64(bin, 8);
    if size < HDR_SIZES[0] || size > HDR_SIZES[8] || (secondary && size != at) {
        return Err(Rule::Luks2HeaderSize.broken(format!(
            "size {size} (16 KiB to 4 MiB; a secondary copy's is its offset)"
        )));
    }
    Ok(size)
}

/// Parses and checks the JSON area of a copy: the metadata (when it parses as an object)
/// and the verdict on it.
pub(super) fn parse_area(area: &[u8]) -> (Option<Value>, Result<()>, Vec<String>) {
    let mut stream = serde_json::Deserializer::from_slice(area).into_iter::<Value>();
    let mut json = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return (None, Err(Rule::Luks2JsonSyntax.broken(e)), Vec::new()),
        None => {
            return (
                None,
                Err(Rule::Luks2JsonSyntax.broken("no json")),
                Vec::new(),
            )
        }
    };
    let end = stream.byte_offset();
    let verdict = if area.first() != Some(&b'{') {
        Err(Rule::Luks2JsonStart.broken("the json area does not start with '{'"))
    } else if end >= area.len() {
        Err(Rule::Luks2JsonTerminator.broken("no NUL follows the json in its area"))
    } else if let Some(i) = area[end..].iter().position(|&c| c != 0) {
        Err(Rule::Luks2JsonTrailing.broken(format!(
            "byte {:#04x} at {} of the json area, after the json",
            area[end + i],
            end + i
        )))
    } else {
        check_depth(&json)
    };
    if !json.is_object() {
        let v = verdict.and(Err(
            Rule::Luks2JsonStart.broken("the metadata is not an object")
        ));
        return (None, v, Vec::new());
    }
    let fixed = repair_kdf_leftovers(&mut json);
    let verdict = verdict.and_then(|()| validate(&json, area.len() as u64));
    (Some(json), verdict, fixed)
}

/// Reads the copy at `at`.
fn read_copy(store: &dyn Store, at: u64, secondary: bool) -> Read {
    let mut bin = vec![0u8; BIN_SIZE];
    if let Err(e) = store::read_exact(store, &mut bin, at, "luks2 header") {
        return match e {
            Error::Io { .. } => Read::Damaged(e),
            e => Read::Absent(e),
        };
    }
    let Some(magic) = Magic::of(&bin, secondary) else {
        return Read::Absent(Rule::Luks2Magic.broken(format!("no magic at {at}")));
    };
    let size = match binary_size(&bin, at, secondary) {
        Ok(s) => s,
        Err(e) => return Read::Damaged(e),
    };
    let mut copy = bin;
    copy.resize(size as usize, 0);
    if let Err(e) = store::read_exact(
        store,
        &mut copy[BIN_SIZE..],
        at + BIN_SIZE as u64,
        "luks2 json area",
    ) {
        return Read::Damaged(e);
    }
    let strings = || -> Result<Binary> {
        Ok(Binary {
            magic,
            hdr_size: size,
            seqid: be64(&copy, 16),
            label: cstr(&copy[24..72], "label")?,
            csum_alg: cstr(&copy[72..104], "checksum algorithm")?,
            uuid: cstr(&copy[168..208], "uuid")?,
            subsystem: cstr(&copy[208..256], "subsystem")?,
        })
    };
    let bin = match strings() {
        Ok(b) => b,
        Err(e) => return Read::Damaged(e),
    };
    match checksum(&bin.csum_alg, &copy) {
        Ok(want) if crate::ct_eq(&want, &copy[CSUM.start..CSUM.start + want.len()]) => {}
        Ok(_) => return Read::Damaged(Rule::Luks2Checksum.broken("checksum mismatch")),
        Err(e) => return Read::Damaged(e),
    }
    let area = copy.split_off(BIN_SIZE);
    let (json, verdict, fixed) = parse_area(&area);
    Read::Sound(Box::new(Sound {
        bin,
        salt: copy[104..168].try_into().expect("64 bytes"),
        area,
        json,
        verdict,
        fixed,
    }))
}

/// Reads both copies: the primary, then the secondary where the primary says, or, when
/// the primary's binary header or checksum is bad, at the first allowed offset where a
/// sound one is found. `None` when neither has its magic: not a LUKS2 volume.
pub(super) fn read_both(store: &dyn Store) -> Option<[Read; 2]> {
    let primary = read_copy(store, 0, false);
    let secondary = match &primary {
        Read::Sound(p) => read_copy(store, p.bin.hdr_size, true),
        _ => {
            let mut first_damage = None;
            let mut found = None;
            for at in HDR_SIZES {
                match read_copy(store, at, true) {
                    Read::Sound(s) => {
                        found = Some(Read::Sound(s));
                        break;
                    }
                    Read::Damaged(e) => {
                        first_damage.get_or_insert(e);
                    }
                    Read::Absent(_) => {}
                }
            }
            found.unwrap_or_else(|| match first_damage {
                Some(e) => Read::Damaged(e),
                None => {
                    Read::Absent(Rule::Luks2Magic.broken("no secondary copy at any allowed offset"))
                }
            })
        }
    };
    if matches!((&primary, &secondary), (Read::Absent(_), Read::Absent(_))) {
        return None;
    }
    Some([primary, secondary])
}

/// Why copy `which` cannot be used, for messages.
fn why(copy: &Read) -> String {
    match copy {
        Read::Sound(s) => s.verdict.as_ref().err().map(detail).unwrap_or_default(),
        Read::Damaged(e) | Read::Absent(e) => detail(e),
    }
}

/// The copy to use, from both as read from a store of `size` bytes.
pub(super) fn choose(copies: [Read; 2], size: u64) -> Result<Found> {
    let mut damage = Vec::new();
    let valid: Vec<bool> = copies
        .iter()
        .map(|c| matches!(c, Read::Sound(s) if s.valid()))
        .collect();
    for (i, c) in copies.iter().enumerate().filter(|&(i, _)| !valid[i]) {
        damage.push(format!("{} copy: {}", COPY[i], why(c)));
    }
    let [p, s] = copies;
    match (p, s) {
        (Read::Sound(p), Read::Sound(s)) if valid[0] && valid[1] => Ok(newer(*p, *s, damage)),
        (Read::Sound(p), _) if valid[0] => Ok(Found {
            chosen: *p,
            current: [true, false],
            damage,
        }),
        (_, Read::Sound(s)) if valid[1] => Ok(Found {
            chosen: *s,
            current: [false, true],
            damage,
        }),
        (p, _) => {
            if let Read::Damaged(e @ Error::Io { .. }) = p {
                return Err(e);
            }
            let msg = format!(
                "both luks2 header copies are invalid: {}",
                damage.join("; ")
            );
            let cut = matches!(&p, Read::Damaged(Error::Header(HeaderError::Truncated(_))));
            if cut || size < 2 * HDR_SIZES[0] {
                Err(Error::truncated(format!(
                    "the image has {size} bytes; {msg}"
                )))
            } else {
                Err(Error::corrupt(msg))
            }
        }
    }
}

/// Of two valid copies, the one with the higher sequence id (the primary on a tie), and
/// which copies are current.
fn newer(p: Sound, s: Sound, mut damage: Vec<String>) -> Found {
    let (ps, ss) = (p.bin.seqid, s.bin.seqid);
    let (chosen, current) = if ss > ps {
        damage.push(format!("primary copy is older (seqid {ps} < {ss})"));
        (s, [false, true])
    } else if ps > ss {
        damage.push(format!("secondary copy is older (seqid {ss} < {ps})"));
        (p, [true, false])
    } else {
        let same = p.json == s.json && p.bin.hdr_size == s.bin.hdr_size;
        if !same {
            damage.push("the copies differ at the same seqid".into());
        }
        (p, [true, same])
    };
    Found {
        chosen,
        current,
        damage,
    }
}

impl Luks2 {
    /// Copy `which` (0 primary, 1 secondary) as bytes, with `area` (the JSON, padded with
    /// NULs to the copy's size) and its checksum.
    fn copy_bytes(&self, which: usize, area: &[u8]) -> Result<Vec<u8>> {
        let b = &self.bin;
        let mut buf = vec![0u8; b.hdr_size as usize];
        buf[..6].copy_from_slice(if which == 0 {
            b.magic.primary()
        } else {
            b.magic.secondary()
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
        buf[BIN_SIZE..BIN_SIZE + area.len()].copy_from_slice(area);
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

    fn write_copy(&self, store: &dyn Store, which: usize, area: &[u8]) -> Result<()> {
        let buf = self.copy_bytes(which, area)?;
        store::write_all(store, &buf, self.copy_offset(which), "luks2 header")?;
        store::sync(store)
    }

    /// Writes both copies with the next sequence id: the stale copy first, each followed
    /// by a sync.
    pub fn write(&mut self, store: &dyn Store) -> Result<()> {
        let text = serde_json::to_vec(&self.json).map_err(|e| Error::invalid(e.to_string()))?;
        self.check_fits(&self.json)?;
        let area_len = self.bin.hdr_size - BIN_SIZE as u64;
        validate(&self.json, area_len)?;
        let mut area = text;
        area.resize(area_len as usize, 0);
        self.bin.seqid = self.bin.seqid.checked_add(1).ok_or_else(|| {
            Error::invalid("the header's sequence id is at its largest value: no update can follow")
        })?;
        let order = if self.current[0] && !self.current[1] {
            [1, 0]
        } else {
            [0, 1]
        };
        let [first, second] = order;
        // Until both are written, only the copy just written is current.
        self.current[first] = false;
        self.write_copy(store, first, &area)?;
        self.current = [false, false];
        self.current[first] = true;
        self.area = area;
        self.write_copy(store, second, &self.area)?;
        self.current[second] = true;
        self.damage.clear();
        Ok(())
    }

    /// Both copies as bytes with the sequence id as it is, the metadata validated first:
    /// for a header that takes another format's place (a conversion), whose caller
    /// writes them in its own order.
    pub(crate) fn new_copies(&self) -> Result<[Vec<u8>; 2]> {
        let text = serde_json::to_vec(&self.json).map_err(|e| Error::invalid(e.to_string()))?;
        self.check_fits(&self.json)?;
        let area_len = self.bin.hdr_size - BIN_SIZE as u64;
        validate(&self.json, area_len)?;
        if text.len() as u64 >= area_len {
            return Err(Error::invalid(format!(
                "the metadata takes {} bytes; the JSON area holds {area_len}",
                text.len()
            )));
        }
        let mut area = text;
        area.resize(area_len as usize, 0);
        Ok([self.copy_bytes(0, &area)?, self.copy_bytes(1, &area)?])
    }

    /// Rewrites each copy that is not current from the good one: its JSON area byte for
    /// byte, its sequence id, a new salt; one write and a sync each. The good copy is
    /// never written. Returns what was done.
    pub(super) fn rebuild_copies(&mut self, store: &dyn Store) -> Result<Vec<String>> {
        if !self.current.contains(&true) {
            return Err(Error::invalid(
                "no header copy is known good: nothing to rebuild from",
            ));
        }
        let mut done = Vec::new();
        for which in 0..2 {
            if self.current[which] {
                continue;
            }
            let good = COPY[1 - which];
            crate::random(&mut self.salts[which])?;
            self.write_copy(store, which, &self.area)?;
            self.current[which] = true;
            done.push(format!(
                "{} copy rebuilt from the {good} (seqid {}, {} bytes at offset {})",
                COPY[which],
                self.bin.seqid,
                self.bin.hdr_size,
                self.copy_offset(which)
            ));
        }
        self.damage.clear();
        Ok(done)
    }
}
