//! Converting a LUKS1 header to LUKS2 and back, in place, as `cryptsetup convert` does
//! (cryptsetup 2.6, `lib/luks2/luks2_luks1_convert.c`): the same rules, the same refusals
//! and the same resulting header, so that both tools open the result. No passphrase is
//! needed: keyslot material is moved, never decrypted (it is encrypted with IVs counted
//! from the start of its own area, so it may lie anywhere).
//!
//! **Layouts.** LUKS1 keeps its 592-byte header at 0 and its keyslot material from 4 KiB;
//! LUKS2 keeps two 16 KiB header copies and its keyslot areas from 32 KiB. A conversion
//! moves every keyslot by the difference, 28 KiB ([`SHIFT`]): up to LUKS2, down to LUKS1.
//!
//! - To LUKS2 (`plan_luks2` holds the rules): LUKS1's keyslots must start at 4 KiB
//!   and the data must leave room for the shift; the result has one `crypt` segment of
//!   512-byte sectors, one PBKDF2 digest (LUKS1's 20-byte digest, whatever the hash), a
//!   PBKDF2 `luks2` keyslot per active LUKS1 keyslot (same number, salt and iterations),
//!   no tokens, no flags, 16 KiB copies with sequence id 2, and the keyslots area up to
//!   the data.
//! - To LUKS1 (`plan_luks1`): 512-byte sectors, one PBKDF2 digest, one segment,
//!   no tokens, no requirements, keyslots 0 to 7 only, each PBKDF2 with the digest's hash,
//!   4000 stripes, the data cipher and an area of LUKS1's size. Inactive LUKS1 keyslots
//!   get the first free gaps of the keyslots area, as cryptsetup's placeholders do.
//!
//! **Crash safety.** cryptsetup shifts the whole keyslots area in one overlapping copy,
//! then writes the new header: a crash in between leaves keyslots that no header
//! describes (its manual says to take a header backup first). Here each keyslot moves on
//! its own, to a place that overlaps no material still in use, and a LUKS1 header naming
//! the new place (one write, then a sync) follows each copy (and its sync). A keyslot
//! whose target overlaps its own material goes to a free place first. So at every point
//! one valid header names intact material for every keyslot, with the old passphrases.
//! The switch of format is ordered so that one format only is valid after each write:
//! - to LUKS2, once every keyslot is at its LUKS2 place: the secondary copy without its
//!   magic, the primary's JSON area, the primary's first 4 KiB (where the LUKS1 header
//!   was: LUKS2 from here on, by its primary copy), then the secondary's magic;
//! - to LUKS1: the secondary copy's magic is zeroed (LUKS2 by its primary copy alone),
//!   then the first 4 KiB become a LUKS1 header naming the keyslots where they are (LUKS1
//!   from here on), and the keyslots move down to their LUKS1 places.
//!
//! While the header is LUKS1 and keyslots are away from their places, a record at 2 KiB
//! (LUKS1 leaves it unused, LUKS2 pads it with zeros; checksummed) says where the
//! conversion goes: running the same `convert` again after a crash completes it (to
//! LUKS2: from the LUKS1 header it started from; to LUKS1: to the LUKS1 header it ends
//! with). To LUKS1, the record is written in the same 4 KiB block as the LUKS1 header and
//! cleared last.
//!
//! A 4 KiB write is taken to land whole or not at all (the crash harness's default). The
//! copies of material left behind are zeroed once the final header is in place. When no
//! free room is left for a keyslot to move through (every keyslot in use, the data right
//! after them), the conversion is refused before anything is written.

use super::af;
use super::fields::align_up;
use super::keyslot::cipher_spec;
use super::luks1::{Luks1, DIGEST_LEN, KEYSLOTS};
use super::luks2::{Luks2, HDR_SIZES};
use super::magic::Magic;
use super::Version;
use crate::error::{Error, Result};
use crate::format::Header;
use crate::hash::HashAlg;
use crate::store::{self, Store};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Map, Value};

/// How far keyslots move: two 16 KiB LUKS2 copies less LUKS1's 4 KiB before its first
/// keyslot.
pub const SHIFT: u64 = 2 * LUKS2_HDR - LUKS1_KEYSLOTS;
/// Sectors of 512 bytes: the unit of LUKS1 offsets.
const SECTOR: u64 = 512;
/// The size of a LUKS2 header copy a conversion writes (and expects back).
const LUKS2_HDR: u64 = 16384;
/// Where LUKS1 keyslots start.
const LUKS1_KEYSLOTS: u64 = 4096;
/// What luksmeta writes after a LUKS1 header's keyslots (cryptsetup refuses it).
const LUKSMETA_MAGIC: &[u8; 8] = b"LUKSMETA";

/// A conversion that cannot be made, in cryptsetup's words where it has some.
fn refused(why: impl Into<String>) -> Error {
    Error::unsupported(why.into())
}

/// Bytes of a keyslot area for a key of `key_bytes`: 4000 stripes, aligned to 4 KiB.
fn area_len(key_bytes: u64) -> u64 {
    align_up(key_bytes * af::STRIPES as u64, 4096)
}

/// Converts the LUKS header `header` of `store` to `to`. Nothing is written when the
/// header is already of that version (an error) or a rule refuses the conversion. Read
/// the header again afterwards.
pub fn convert(store: &dyn Store, header: &Header, to: Version) -> Result<()> {
    match which(store, header, to)? {
        Source::Luks1(h, mark) => to_luks2(store, h, mark),
        Source::Luks2(h) => to_luks1(store, h),
        Source::HalfLuks1(h, mark) => resume_luks1(store, h, mark),
    }
}

/// Why `header` cannot become `to` (the first rule it breaks), or `None`: the checks of
/// [`convert`] without its writes.
pub fn refusal(store: &dyn Store, header: &Header, to: Version) -> Option<Error> {
    match which(store, header, to) {
        Ok(Source::Luks1(h, mark)) => refusal_to_luks2(store, h, mark).err(),
        Ok(Source::Luks2(h)) => refusal_to_luks1(h).err(),
        Ok(Source::HalfLuks1(h, mark)) => moves_to_marked(h, &mark)
            .and_then(|(_, moves)| {
                let steps = moves.plan().ok_or_else(no_room)?;
                step_headers(h, &steps).map(drop)
            })
            .err(),
        Err(e) => Some(e),
    }
}

/// The header a conversion to `to` starts from.
enum Source<'a> {
    /// LUKS1 to LUKS2, anew or (with its record) resumed.
    Luks1(&'a Luks1, Option<Mark>),
    /// LUKS2 to LUKS1.
    Luks2(&'a Luks2),
    /// LUKS2 to LUKS1 resumed: the LUKS1 header written, keyslots still moving.
    HalfLuks1(&'a Luks1, Mark),
}

/// The header to convert: LUKS1 to LUKS2 or LUKS2 to LUKS1, with cryptsetup's magic
/// (cryptsetup does not know librbd's layered-clone magic, and librbd would no longer
/// know the volume after a conversion).
fn which<'a>(store: &dyn Store, header: &'a Header, to: Version) -> Result<Source<'a>> {
    let (l1, l2) = (
        header.downcast_ref::<Luks1>(),
        header.downcast_ref::<Luks2>(),
    );
    let magic = l1.map(|h| h.magic).or(l2.map(Luks2::magic));
    if magic.is_some_and(|m| m != Magic::Luks) {
        return Err(refused(
            "the header has librbd's layered-clone magic: a clone's encryption header is \
             librbd's to change, not convert's",
        ));
    }
    let mark = match l1 {
        Some(_) => Mark::read(store),
        None => None,
    };
    match (l1, l2, to) {
        (Some(h), _, Version::Luks2) => match mark {
            Some(m) if m.to == Version::Luks1 => Err(refused(
                "a conversion of this volume to LUKS1 was interrupted: run `convert --type \
                 luks1` to complete it first",
            )),
            _ => Ok(Source::Luks1(h, mark)),
        },
        (Some(h), _, Version::Luks1) if mark.is_some_and(|m| m.to == Version::Luks1) => {
            Ok(Source::HalfLuks1(h, mark.expect("a record")))
        }
        (_, Some(h), Version::Luks1) => Ok(Source::Luks2(h)),
        (Some(_), _, Version::Luks1) | (_, Some(_), Version::Luks2) => Err(Error::invalid(
            format!("the volume is already {}", to.name()),
        )),
        _ => Err(Error::invalid(format!(
            "only LUKS volumes convert; this is {}",
            header.name()
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// The record of a conversion in progress.

/// Where a conversion records itself while the header is LUKS1 and keyslots are away from
/// their places: 512 bytes at 2 KiB, which LUKS1 leaves unused and LUKS2's primary binary
/// header pads with zeros (so the LUKS2 header written at the end erases it).
const MARK_AT: u64 = 2048;
const MARK_LEN: usize = 512;
const MARK_MAGIC: &[u8; 16] = b"sectorcrypt-conv";
/// Magic, version, padding, eight places: what the checksum covers.
const MARK_BODY: usize = 20 + 8 * KEYSLOTS;

/// A conversion in progress, so that running it again completes it: the version it goes
/// to and the LUKS1 places that define it (to LUKS2: the keyslots' places in the LUKS1
/// header it started from, which LUKS2's follow; to LUKS1: their places in the LUKS1
/// header it ends with). Written with a checksum: a torn record is no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    to: Version,
    places: [u64; KEYSLOTS],
}

impl Mark {
    fn bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; MARK_LEN];
        b[..16].copy_from_slice(MARK_MAGIC);
        b[16] = match self.to {
            Version::Luks1 => 1,
            Version::Luks2 => 2,
        };
        for (i, p) in self.places.iter().enumerate() {
            b[20 + 8 * i..28 + 8 * i].copy_from_slice(&p.to_be_bytes());
        }
        let sum = HashAlg::Sha256.digest(&[&b[..MARK_BODY]]);
        b[MARK_BODY..MARK_BODY + sum.len()].copy_from_slice(&sum);
        b
    }

    fn parse(b: &[u8]) -> Option<Mark> {
        let sum = HashAlg::Sha256.digest(&[&b[..MARK_BODY]]);
        if &b[..16] != MARK_MAGIC || b[MARK_BODY..MARK_BODY + sum.len()] != sum[..] {
            return None;
        }
        let to = match b[16] {
            1 => Version::Luks1,
            2 => Version::Luks2,
            _ => return None,
        };
        let places = std::array::from_fn(|i| {
            u64::from_be_bytes(b[20 + 8 * i..28 + 8 * i].try_into().expect("8 bytes"))
        });
        Some(Mark { to, places })
    }

    /// The record on `store`, if there is a sound one.
    fn read(store: &dyn Store) -> Option<Mark> {
        let mut b = vec![0u8; MARK_LEN];
        store::read_exact(store, &mut b, MARK_AT, "conversion record").ok()?;
        Mark::parse(&b)
    }

    fn write(&self, store: &dyn Store) -> Result<()> {
        store::write_all(store, &self.bytes(), MARK_AT, "conversion record")?;
        store::sync(store)
    }

    fn clear(store: &dyn Store) -> Result<()> {
        store::write_all(store, &[0; MARK_LEN], MARK_AT, "conversion record")?;
        store::sync(store)
    }
}

/// Places of every keyslot of `h`, in sectors.
fn places_of(h: &Luks1) -> [u64; KEYSLOTS] {
    std::array::from_fn(|i| h.slots[i].key_offset as u64)
}

// ---------------------------------------------------------------------------------------
// Moving keyslots.

/// One keyslot moved, and every keyslot's place afterwards (sectors).
#[derive(Debug, Clone)]
struct Step {
    slot: usize,
    from: u64,
    to: u64,
    places: [u64; KEYSLOTS],
}

/// The keyslots as they are and as they must end (in sectors), which are active, the
/// length of one keyslot's area, and the bounds every area must lie in.
struct Moves {
    start: [u64; KEYSLOTS],
    target: [u64; KEYSLOTS],
    active: [bool; KEYSLOTS],
    len: u64,
    lo: u64,
    hi: u64,
}

impl Moves {
    fn overlap(&self, a: u64, b: u64) -> bool {
        a < b + self.len && b < a + self.len
    }

    /// Places where an area may go, 4 KiB aligned, from the highest down.
    fn spots(&self) -> impl Iterator<Item = u64> + '_ {
        let top = self.hi.saturating_sub(self.len) / 8 * 8;
        let lo = self.lo.div_ceil(8) * 8;
        (0..=top.saturating_sub(lo) / 8)
            .map(move |k| top - 8 * k)
            .filter(move |&a| a >= lo && top >= lo)
    }

    /// Places for the inactive keyslots beside the active ones at `cur`: each at its
    /// target, or where it was, or the highest free place.
    fn place_inactive(
        &self,
        cur: &[u64; KEYSLOTS],
        prev: &[u64; KEYSLOTS],
    ) -> Option<[u64; KEYSLOTS]> {
        let mut out = *cur;
        let mut taken: Vec<u64> = (0..KEYSLOTS)
            .filter(|&i| self.active[i])
            .map(|i| cur[i])
            .collect();
        for j in (0..KEYSLOTS).filter(|&j| !self.active[j]) {
            let fits = |a: u64| {
                a >= self.lo
                    && a + self.len <= self.hi
                    && taken.iter().all(|&t| !self.overlap(a, t))
            };
            let at = [self.target[j], prev[j]]
                .into_iter()
                .chain(self.spots())
                .find(|&a| fits(a))?;
            out[j] = at;
            taken.push(at);
        }
        Some(out)
    }

    /// The moves that bring every active keyslot to its target, each to a place that
    /// overlaps no active keyslot's material (its own included); `None` when there is no
    /// room for them.
    fn plan(&self) -> Option<Vec<Step>> {
        let mut cur = self.start;
        let mut prev = self.start;
        let mut steps = Vec::new();
        for _ in 0..4 * KEYSLOTS {
            let mut pending: Vec<usize> = (0..KEYSLOTS)
                .filter(|&i| self.active[i] && cur[i] != self.target[i])
                .collect();
            let Some(&first) = pending.first() else {
                return Some(steps);
            };
            // Moving up, the highest keyslot first; moving down, the lowest.
            pending.sort_by_key(|&i| self.target[i]);
            if self.target[first] > cur[first] {
                pending.reverse();
            }
            let live = |at: u64| (0..KEYSLOTS).any(|j| self.active[j] && self.overlap(cur[j], at));
            let direct = pending.iter().copied().find(|&i| !live(self.target[i]));
            let (slot, to) = match direct {
                Some(i) => (i, self.target[i]),
                None => {
                    let i = pending[0];
                    let others: Vec<u64> = pending[1..].iter().map(|&j| self.target[j]).collect();
                    let ok = |a: u64, strict: bool| {
                        !live(a)
                            && !self.overlap(a, self.target[i])
                            && (!strict || others.iter().all(|&t| !self.overlap(a, t)))
                    };
                    let at = self
                        .spots()
                        .find(|&a| ok(a, true))
                        .or_else(|| self.spots().find(|&a| ok(a, false)))?;
                    (i, at)
                }
            };
            let from = cur[slot];
            cur[slot] = to;
            let places = self.place_inactive(&cur, &prev)?;
            prev = places;
            steps.push(Step {
                slot,
                from,
                to,
                places,
            });
        }
        None
    }
}

/// The LUKS1 header `h` with its keyslots at `places` (sectors), checked.
fn with_places(h: &Luks1, places: &[u64; KEYSLOTS]) -> Result<Luks1> {
    let mut h = h.clone();
    for (i, &p) in places.iter().enumerate() {
        let p = u32::try_from(p)
            .map_err(|_| refused(format!("keyslot {i} would lie beyond 2^32 sectors")))?;
        h.set_slot_offset(i, p);
    }
    h.check_layout()?;
    Ok(h)
}

/// The LUKS1 headers each step of `steps` writes, built and checked before anything is.
fn step_headers(h: &Luks1, steps: &[Step]) -> Result<Vec<Luks1>> {
    steps.iter().map(|s| with_places(h, &s.places)).collect()
}

/// Copies each step's keyslot and syncs, then writes its header (one write and a sync).
fn run_steps(store: &dyn Store, steps: &[Step], headers: &mut [Luks1], len: u64) -> Result<()> {
    for (s, h) in steps.iter().zip(headers.iter_mut()) {
        let what = format!("keyslot {} material", s.slot);
        store::copy(
            store,
            s.from * SECTOR,
            store,
            s.to * SECTOR,
            len * SECTOR,
            &what,
        )?;
        store::sync(store)?;
        h.write(store)?;
    }
    Ok(())
}

/// Zeroes `[from, to)` except the `keep` areas (offset, length in bytes), then syncs.
fn zero_except(store: &dyn Store, from: u64, to: u64, keep: &[(u64, u64)]) -> Result<()> {
    let mut keep = keep.to_vec();
    keep.sort();
    let mut at = from;
    for (off, len) in keep.into_iter().chain([(to, 0)]) {
        let end = off.min(to);
        if end > at {
            store::wipe(store, at, end - at, false)?;
        }
        at = at.max(off + len);
    }
    store::sync(store)
}

// ---------------------------------------------------------------------------------------
// LUKS1 to LUKS2.

/// What a LUKS1 to LUKS2 conversion of `h` writes: the LUKS2 header and the keyslots'
/// LUKS2 places (sectors, every keyslot).
struct ToLuks2 {
    luks2: Luks2,
    target: [u64; KEYSLOTS],
    data_offset: u64,
}

/// cryptsetup's rules for LUKS1 to LUKS2 (the first one broken is the error), and the
/// header it makes.
fn plan_luks2(store: &dyn Store, h: &Luks1) -> Result<ToLuks2> {
    let data_offset = h.payload_offset as u64 * SECTOR;
    if data_offset == 0 {
        return Err(refused(
            "the LUKS1 header is detached (its data offset is 0): sectorcrypt converts \
             attached headers only; use `cryptsetup convert --header`",
        ));
    }
    let material = h.slot_material_len();
    let first = h
        .slots
        .iter()
        .map(|s| s.key_offset as u64)
        .min()
        .unwrap_or(0);
    if first * SECTOR != LUKS1_KEYSLOTS {
        return Err(refused(format!(
            "Cannot convert to LUKS2 format - unaligned keyslot offset: the keyslots start at \
             sector {first}; cryptsetup converts LUKS1 headers whose keyslots start at sector 8 only"
        )));
    }
    let key_bytes = h.key_bytes as u64;
    let cipher = h.cipher();
    if cipher_spec(&cipher, h.key_bytes as usize).is_err() {
        return Err(refused(format!(
            "Unable to use cipher specification {cipher} for LUKS2."
        )));
    }
    let end = h
        .slots
        .iter()
        .map(|s| s.key_offset as u64 * SECTOR + material)
        .max()
        .unwrap_or(0);
    let luks1_size = align_up(end, 4096);
    let mut magic = [0u8; 8];
    if store::size(store)? >= luks1_size + 8 {
        store::read_exact(store, &mut magic, luks1_size, "after the keyslots")?;
        if &magic == LUKSMETA_MAGIC {
            return Err(refused(
                "Unable to convert header with LUKSMETA additional metadata.",
            ));
        }
    }
    if data_offset < luks1_size + SHIFT {
        return Err(refused(format!(
            "Unable to move keyslot area. Not enough space: the keyslots end at {luks1_size} \
             and move by {SHIFT} bytes, but the data starts at {data_offset}"
        )));
    }
    let keyslots_size = (data_offset - 2 * LUKS2_HDR) / 4096 * 4096;
    let hash = &h.hash_spec;
    let mut keyslots = Map::new();
    let mut ids = Vec::new();
    for (i, s) in h.slots.iter().enumerate().filter(|(_, s)| s.active) {
        keyslots.insert(
            i.to_string(),
            json!({
                "type": "luks2",
                "key_size": key_bytes,
                "kdf": {"type": "pbkdf2", "hash": hash, "iterations": s.iterations,
                        "salt": B64.encode(s.salt)},
                "af": {"type": "luks1", "hash": hash, "stripes": af::STRIPES},
                "area": {"type": "raw", "encryption": cipher, "key_size": key_bytes,
                         "offset": (s.key_offset as u64 * SECTOR + SHIFT).to_string(),
                         "size": align_up(material, 4096).to_string()},
            }),
        );
        ids.push(Value::from(i.to_string()));
    }
    let (digest, salt) = h.mk_digest();
    let meta = json!({
        "keyslots": keyslots,
        "tokens": {},
        "segments": {"0": {
            "type": "crypt", "offset": data_offset.to_string(), "iv_tweak": "0",
            "size": "dynamic", "encryption": cipher, "sector_size": 512,
        }},
        "digests": {"0": {
            "type": "pbkdf2", "keyslots": ids, "segments": ["0"], "hash": hash,
            "salt": B64.encode(salt), "digest": B64.encode(digest),
            "iterations": h.mk_iterations,
        }},
        "config": {
            "json_size": (LUKS2_HDR - super::luks2::BIN_SIZE as u64).to_string(),
            "keyslots_size": keyslots_size.to_string(),
        },
    });
    debug_assert_eq!(HDR_SIZES[0], LUKS2_HDR);
    let luks2 = Luks2::from_json(meta, &h.uuid, 2)?;
    let target = std::array::from_fn(|i| h.slots[i].key_offset as u64 + SHIFT / SECTOR);
    Ok(ToLuks2 {
        luks2,
        target,
        data_offset,
    })
}

/// The moves of a LUKS1 to LUKS2 conversion.
fn moves_to_luks2(h: &Luks1, p: &ToLuks2) -> Moves {
    Moves {
        start: std::array::from_fn(|i| h.slots[i].key_offset as u64),
        target: p.target,
        active: std::array::from_fn(|i| h.slots[i].active),
        len: align_up(h.slot_material_len(), 4096) / SECTOR,
        lo: LUKS1_KEYSLOTS / SECTOR,
        hi: h.payload_offset as u64,
    }
}

/// Every rule of LUKS1 to LUKS2 that `h` breaks, the first as the error: cryptsetup's,
/// then the room to move the keyslots one by one.
fn refusal_to_luks2(store: &dyn Store, h: &Luks1, mark: Option<Mark>) -> Result<()> {
    let orig = started_from(h, mark)?;
    let p = plan_luks2(store, &orig)?;
    p.luks2.new_copies().map_err(|e| {
        refused(format!(
            "Cannot convert to LUKS2 format - invalid metadata: {e}"
        ))
    })?;
    let moves = moves_to_luks2(h, &p);
    let steps = moves.plan().ok_or_else(no_room)?;
    step_headers(h, &steps)?;
    Ok(())
}

fn no_room() -> Error {
    refused(
        "no free room to move the keyslots through one at a time (every keyslot is in use \
         and the data follows them): remove a keyslot first (remove-key), or convert with \
         `cryptsetup convert` after a header backup (it shifts all keyslots at once, which \
         a crash in the middle destroys)",
    )
}

/// The LUKS1 header a conversion to LUKS2 started from: `h`, or when one was interrupted,
/// `h` with the keyslots where its record says they were.
fn started_from(h: &Luks1, mark: Option<Mark>) -> Result<Luks1> {
    match mark {
        Some(m) => with_places(h, &m.places),
        None => Ok(h.clone()),
    }
}

fn to_luks2(store: &dyn Store, h: &Luks1, mark: Option<Mark>) -> Result<()> {
    let orig = started_from(h, mark)?;
    let p = plan_luks2(store, &orig)?;
    let copies = p.luks2.new_copies().map_err(|e| {
        refused(format!(
            "Cannot convert to LUKS2 format - invalid metadata: {e}"
        ))
    })?;
    let moves = moves_to_luks2(h, &p);
    let steps = moves.plan().ok_or_else(no_room)?;
    let mut headers = step_headers(h, &steps)?;
    if mark.is_none() {
        let m = Mark {
            to: Version::Luks2,
            places: places_of(h),
        };
        m.write(store)?;
    }
    run_steps(store, &steps, &mut headers, moves.len)?;
    // Every keyslot is above both LUKS2 copies now; the LUKS1 header stays the valid
    // one until the primary's first 4 KiB replace it.
    let hs = LUKS2_HDR as usize;
    let [primary, mut secondary] = copies;
    let magic: Vec<u8> = secondary[..6].to_vec();
    secondary[..6].fill(0);
    store::write_all(store, &secondary, LUKS2_HDR, "luks2 secondary header")?;
    store::sync(store)?;
    store::write_all(store, &primary[4096..hs], 4096, "luks2 primary header")?;
    store::sync(store)?;
    store::write_all(store, &primary[..4096], 0, "luks2 primary header")?;
    store::sync(store)?;
    store::write_all(store, &magic, LUKS2_HDR, "luks2 secondary header")?;
    store::sync(store)?;
    let keep: Vec<(u64, u64)> = (0..KEYSLOTS)
        .filter(|&i| moves.active[i])
        .map(|i| (p.target[i] * SECTOR, moves.len * SECTOR))
        .collect();
    zero_except(store, 2 * LUKS2_HDR, p.data_offset, &keep)
}

// ---------------------------------------------------------------------------------------
// LUKS2 to LUKS1.

/// A string field.
fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A number given as a JSON number or a decimal string.
fn number(v: &Value, key: &str) -> Option<u64> {
    match v.get(key)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The LUKS1 header a LUKS2 to LUKS1 conversion of `h` makes (its keyslots at their
/// LUKS1 places), after cryptsetup's rules, the first broken being the error.
fn plan_luks1(h: &Luks2) -> Result<Luks1> {
    let j = h.json();
    let cannot = |why: String| refused(format!("Cannot convert to LUKS1 format - {why}."));
    let reqs = &j["config"]["requirements"]["mandatory"];
    if reqs.as_array().is_some_and(|a| !a.is_empty()) {
        return Err(refused(format!(
            "the LUKS2 header has the requirements {reqs} (an unfinished reencryption, or a \
             feature cryptsetup adds): cryptsetup refuses to convert it; finish the reencryption first"
        )));
    }
    let digest = j["digests"]
        .get("0")
        .ok_or_else(|| cannot("no digest 0".into()))?;
    let segs = j["segments"].as_object().cloned().unwrap_or_default();
    let seg = segs.get("0").ok_or_else(|| cannot("no segment 0".into()))?;
    if number(seg, "sector_size") != Some(512) {
        return Err(cannot(
            "default segment encryption sector size is not 512 bytes".into(),
        ));
    }
    let digests = j["digests"].as_object().map_or(0, Map::len);
    if text(digest, "type") != "pbkdf2" || digests != 1 {
        return Err(cannot("key slot digests are not LUKS1 compatible".into()));
    }
    let hash = text(digest, "hash");
    let cipher = text(seg, "encryption");
    let name = cipher.split('-').next().unwrap_or("");
    if name.starts_with("paes") || cipher.contains("(paes)") {
        return Err(cannot(format!("device uses wrapped key cipher {name}")));
    }
    let backup = |s: &Value| {
        s["flags"].as_array().is_some_and(|f| {
            f.iter()
                .any(|x| x.as_str().is_some_and(|x| x.starts_with("backup-")))
        })
    };
    if segs.values().filter(|s| !backup(s)).count() != 1 {
        return Err(cannot("device uses more segments".into()));
    }
    let tokens = j["tokens"].as_object().map_or(0, Map::len);
    if tokens > 0 {
        return Err(cannot(format!("LUKS2 header contains {tokens} token(s)")));
    }
    let in_digest: Vec<String> = digest["keyslots"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let keyslots = j["keyslots"].as_object().cloned().unwrap_or_default();
    let key_size = in_digest
        .iter()
        .find_map(|id| keyslots.get(id).and_then(|k| number(k, "key_size")))
        .ok_or_else(|| cannot("no keyslot gives the volume key size".into()))?;
    let area = area_len(key_size);
    let mut ids: Vec<(usize, &Value)> = keyslots
        .iter()
        .filter_map(|(id, k)| id.parse().ok().map(|n| (n, k)))
        .collect();
    ids.sort_by_key(|&(n, _)| n);
    for &(i, ks) in &ids {
        if !in_digest.contains(&i.to_string()) {
            return Err(cannot(format!("keyslot {i} is in invalid state")));
        }
        if i >= KEYSLOTS {
            return Err(cannot(format!(
                "slot {i} (over maximum slots) is still active"
            )));
        }
        let kdf = &ks["kdf"];
        let compatible = text(ks, "type") == "luks2"
            && text(kdf, "type") == "pbkdf2"
            && text(kdf, "hash") == hash
            && number(&ks["af"], "stripes") == Some(af::STRIPES as u64)
            && text(&ks["af"], "hash") == hash
            && HashAlg::parse(hash).is_ok()
            && text(&ks["area"], "encryption") == cipher
            && number(&ks["area"], "key_size") == Some(key_size)
            && number(&ks["area"], "size") == Some(area);
        if !compatible {
            return Err(cannot(format!("keyslot {i} is not LUKS1 compatible")));
        }
    }
    // Places: the keyslots' areas, and for each inactive LUKS1 keyslot the first gap of
    // the keyslots area that fits one (cryptsetup's placeholders), in keyslot order.
    let min = 2 * h.hdr_size();
    let max = h.metadata_size();
    let mut used: Vec<(u64, u64)> = ids
        .iter()
        .filter_map(|(_, k)| Some((number(&k["area"], "offset")?, number(&k["area"], "size")?)))
        .collect();
    let mut offsets = [0u64; KEYSLOTS];
    for (i, o) in offsets.iter_mut().enumerate() {
        if let Some(&(_, k)) = ids.iter().find(|&&(n, _)| n == i) {
            *o = number(&k["area"], "offset")
                .ok_or_else(|| cannot(format!("keyslot {i} has no area")))?;
            continue;
        }
        used.sort();
        let mut at = min;
        for &(off, len) in &used {
            if at + area <= off {
                break;
            }
            at = at.max(off + len);
        }
        if at + area > max {
            return Err(cannot(format!(
                "no room in the keyslots area for keyslot {i}'s placeholder"
            )));
        }
        *o = at;
        used.push((at, area));
    }
    let digest_bytes = B64
        .decode(text(digest, "digest"))
        .map_err(|_| cannot("the digest is not base64".into()))?;
    let salt = B64
        .decode(text(digest, "salt"))
        .map_err(|_| cannot("the digest salt is not base64".into()))?;
    if digest_bytes.len() < DIGEST_LEN || salt.len() != 32 {
        return Err(cannot("the digest or its salt has the wrong length".into()));
    }
    let iterations = number(digest, "iterations")
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| cannot("the digest iterations do not fit".into()))?;
    let payload = number(seg, "offset").unwrap_or(0) / SECTOR;
    let payload =
        u32::try_from(payload).map_err(|_| cannot("the data offset does not fit".into()))?;
    let mut out = Luks1::from_parts(
        cipher,
        hash,
        payload,
        key_size as u32,
        digest_bytes[..DIGEST_LEN].try_into().expect("20 bytes"),
        salt[..].try_into().expect("32 bytes"),
        iterations,
        h.uuid(),
    )?;
    for (i, &o) in offsets.iter().enumerate() {
        let sectors = (o / SECTOR)
            .checked_sub(SHIFT / SECTOR)
            .and_then(|s| u32::try_from(s).ok())
            .ok_or_else(|| cannot(format!("keyslot {i} lies below the keyslots area")))?;
        let enabled = match ids.iter().find(|&&(n, _)| n == i) {
            Some(&(_, k)) => {
                let s = B64
                    .decode(text(&k["kdf"], "salt"))
                    .ok()
                    .filter(|s| s.len() == 32)
                    .ok_or_else(|| cannot(format!("keyslot {i}'s salt is not 32 bytes")))?;
                let it = number(&k["kdf"], "iterations")
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| cannot(format!("keyslot {i}'s iterations do not fit")))?;
                Some((it, s[..].try_into().expect("32 bytes")))
            }
            None => None,
        };
        out.set_slot(i, sectors, enabled);
    }
    Ok(out)
}

/// The LUKS1 header and the moves of a LUKS2 to LUKS1 conversion: from the LUKS2 areas
/// (the header written first names them) to the LUKS1 places.
fn moves_to_luks1(h: &Luks2) -> Result<(Luks1, Luks1, Moves)> {
    // The secondary copy goes first; the primary must be the one to trust meanwhile.
    if !h.primary_current() {
        return Err(refused(
            "the primary LUKS2 header copy is damaged or stale: run `sectorcrypt repair` first",
        ));
    }
    let fin = plan_luks1(h)?;
    fin.check_layout()?;
    let target: [u64; KEYSLOTS] = std::array::from_fn(|i| fin.slots[i].key_offset as u64);
    let start: [u64; KEYSLOTS] = std::array::from_fn(|i| target[i] + SHIFT / SECTOR);
    let first = with_places(&fin, &start)?;
    let moves = Moves {
        start,
        target,
        active: std::array::from_fn(|i| fin.slots[i].active),
        len: align_up(fin.slot_material_len(), 4096) / SECTOR,
        lo: LUKS1_KEYSLOTS / SECTOR,
        hi: fin.payload_offset as u64,
    };
    Ok((first, fin, moves))
}

/// Every rule of LUKS2 to LUKS1 that `h` breaks, the first as the error: cryptsetup's,
/// then the room to move the keyslots one by one.
fn refusal_to_luks1(h: &Luks2) -> Result<()> {
    let (first, _, moves) = moves_to_luks1(h)?;
    let steps = moves.plan().ok_or_else(no_room)?;
    step_headers(&first, &steps)?;
    Ok(())
}

fn to_luks1(store: &dyn Store, h: &Luks2) -> Result<()> {
    let (first, fin, moves) = moves_to_luks1(h)?;
    let steps = moves.plan().ok_or_else(no_room)?;
    let headers = step_headers(&first, &steps)?;
    // LUKS2 by its primary copy alone, then LUKS1 by the first 4 KiB: the LUKS1 header
    // naming the keyslots where LUKS2 put them, and the record of where they go.
    store::write_all(store, &[0; 6], h.hdr_size(), "luks2 secondary magic")?;
    store::sync(store)?;
    let mark = Mark {
        to: Version::Luks1,
        places: places_of(&fin),
    };
    let mut block = vec![0u8; LUKS1_KEYSLOTS as usize];
    block[..super::luks1::HEADER_LEN].copy_from_slice(&first.bytes()?);
    block[MARK_AT as usize..MARK_AT as usize + MARK_LEN].copy_from_slice(&mark.bytes());
    store::write_all(store, &block, 0, "luks1 header")?;
    store::sync(store)?;
    finish_luks1(store, &first, fin, &moves, &steps, headers)
}

/// The final LUKS1 header a recorded conversion to LUKS1 ends with, and the moves from
/// where the keyslots of `h` are now.
fn moves_to_marked(h: &Luks1, mark: &Mark) -> Result<(Luks1, Moves)> {
    let fin = with_places(h, &mark.places)?;
    let moves = Moves {
        start: places_of(h),
        target: mark.places,
        active: std::array::from_fn(|i| h.slots[i].active),
        len: align_up(h.slot_material_len(), 4096) / SECTOR,
        lo: LUKS1_KEYSLOTS / SECTOR,
        hi: h.payload_offset as u64,
    };
    Ok((fin, moves))
}

/// A conversion to LUKS1 that was interrupted after the LUKS1 header was written:
/// the keyslots still to move, then the rest.
fn resume_luks1(store: &dyn Store, h: &Luks1, mark: Mark) -> Result<()> {
    let (fin, moves) = moves_to_marked(h, &mark)?;
    let steps = moves.plan().ok_or_else(no_room)?;
    let headers = step_headers(h, &steps)?;
    finish_luks1(store, h, fin, &moves, &steps, headers)
}

/// Moves the keyslots to their LUKS1 places, writes the final header (cryptsetup's,
/// inactive keyslots included), zeroes what is left of old material, then the record.
fn finish_luks1(
    store: &dyn Store,
    now: &Luks1,
    mut fin: Luks1,
    moves: &Moves,
    steps: &[Step],
    mut headers: Vec<Luks1>,
) -> Result<()> {
    run_steps(store, steps, &mut headers, moves.len)?;
    let last = headers.last().unwrap_or(now).bytes()?;
    if last != fin.bytes()? {
        fin.write(store)?;
    }
    let keep: Vec<(u64, u64)> = (0..KEYSLOTS)
        .filter(|&i| moves.active[i])
        .map(|i| (moves.target[i] * SECTOR, moves.len * SECTOR))
        .collect();
    zero_except(store, LUKS1_KEYSLOTS, moves.hi * SECTOR, &keep)?;
    Mark::clear(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moves(active: [bool; KEYSLOTS], hi: u64, up: bool) -> Moves {
        let g: [u64; KEYSLOTS] = std::array::from_fn(|i| 8 + 504 * i as u64);
        let h: [u64; KEYSLOTS] = std::array::from_fn(|i| g[i] + 56);
        let (start, target) = if up { (g, h) } else { (h, g) };
        Moves {
            start,
            target,
            active,
            len: 504,
            lo: 8,
            hi,
        }
    }

    /// Replays `steps`: every copy lands on a place no active keyslot occupies, and every
    /// active keyslot ends at its target.
    fn replay(m: &Moves, steps: &[Step]) {
        let mut cur = m.start;
        for s in steps {
            assert_eq!(cur[s.slot], s.from);
            for j in (0..KEYSLOTS).filter(|&j| m.active[j]) {
                assert!(!m.overlap(cur[j], s.to), "{s:?} lands on keyslot {j}");
            }
            cur[s.slot] = s.to;
            assert_eq!(cur[s.slot], s.places[s.slot]);
        }
        for i in (0..KEYSLOTS).filter(|&i| m.active[i]) {
            assert_eq!(cur[i], m.target[i]);
        }
    }

    #[test]
    fn one_keyslot_parks_then_lands_both_ways() {
        let mut active = [false; KEYSLOTS];
        active[0] = true;
        for up in [true, false] {
            let m = moves(active, 4096, up);
            let steps = m.plan().expect("room");
            assert_eq!(steps.len(), 2, "{steps:?}");
            replay(&m, &steps);
            assert_eq!(steps.last().unwrap().places, m.target);
        }
    }

    #[test]
    fn seven_keyslots_move_through_the_free_one() {
        for free in 0..KEYSLOTS {
            let mut active = [true; KEYSLOTS];
            active[free] = false;
            for up in [true, false] {
                let m = moves(active, 4096, up);
                let steps = m.plan().unwrap_or_else(|| panic!("free {free} up {up}"));
                replay(&m, &steps);
                assert_eq!(steps.last().unwrap().places, m.target);
            }
        }
    }

    #[test]
    fn eight_keyslots_without_room_are_refused() {
        let m = moves([true; KEYSLOTS], 4096, true);
        assert!(m.plan().is_none());
    }
}
