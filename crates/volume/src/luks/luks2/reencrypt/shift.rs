//! Encryption in place that moves the data: cryptsetup's `reencrypt --encrypt
//! --reduce-device-size R` on a device that is to hold its own header. The header takes
//! the first `s = R / 2` bytes, every byte of plaintext moves `s` bytes on as it is
//! encrypted, and the last `R` bytes of the device (free: the file system on it was shrunk
//! by `R` first) hold a copy of the plaintext's start meanwhile, then slack.
//!
//! A device of `S` bytes holds `L = S - 2s` bytes of plaintext:
//! - **Init** ([`Luks2::encrypt_shift_build`] on a header made in memory; the image
//!   crate moves the data and places it): the plaintext `[0, s)` is copied to `[S - s, S)`
//!   and synced, then the header (data offset `s`) is written over `[0, s)`. Segments:
//!   `0` linear at `S - s` (the copy of the start), `1` linear at `s` (the rest of the
//!   plaintext, where it always was); the backups `backup-moved-segment` (segment 0),
//!   `backup-previous` (linear at 0, `L` bytes) and `backup-final` (crypt at `s`,
//!   `dynamic`); the `reencrypt` keyslot in mode `encrypt`, direction `backward`,
//!   resilience `datashift` (4096 bytes of area in the first free gap, nothing stored
//!   there) with `shift_size` `s`.
//! - **Hotzones** of exactly `s` bytes from the end backward: `[L - s, L)`, `[L - 2s, L -
//!   s)`, ..., then `[s, r)` when `r - s` bytes are left (shorter than `s`), and last the
//!   start `[0, s)`, read from its copy (cryptsetup's `reencrypt_offset_backward_moved`).
//!   Each: the header with the hotzone flagged `in-reencryption`; its plaintext read,
//!   encrypted and written `s` bytes on, which is never over plaintext not yet encrypted;
//!   a data sync; the header with the progress. A crash inside a hotzone is recovered by
//!   doing it again ([`Luks2::reencrypt_recover`]): its source is untouched.
//! - **The end**: the header with one crypt segment (cryptsetup's last step writes it
//!   too), the copy of the start wiped with random data, then the metadata of the run goes
//!   in one header write, as at the end of every run.

use super::super::json::{corrupt, obj, u64_str};
use super::super::Luks2;
use super::rekey::{in_chunks, Keys, Outcome, RunOptions, REQUIREMENT};
use super::segments::{self, Under};
use super::{plan, Plan};
use crate::error::{Error, Result};
use crate::layout::{Geometry, IvRule, Layout};
use crate::luks::fields::align_up;
use crate::luks::keyslot::cipher_spec;
use crate::store::{self, Placement, Store};
use serde_json::{json, Value};

/// The area of a `datashift` reencrypt keyslot (cryptsetup's: one 4096-byte unit; nothing
/// is stored in it).
const SHIFT_AREA: u64 = 4096;

/// Whether the plan is a data-shift encryption, the one data-moving run sectorcrypt does.
pub(super) fn is_shift_encrypt(p: &Plan) -> bool {
    p.mode == "encrypt" && p.direction == "backward" && p.resilience == "datashift"
}

/// What a data-shift encryption moves where, from its metadata.
#[derive(Debug, Clone, Copy)]
struct Moves {
    /// The shift: the header's size, and how far every byte moves.
    shift: u64,
    /// Bytes of plaintext.
    total: u64,
    /// Where the copy of the plaintext's first `shift` bytes is.
    moved: u64,
}

/// The hotzone when the plaintext `[0, left)` is still to be encrypted: (start, length).
fn zone(left: u64, shift: u64) -> (u64, u64) {
    match left.saturating_sub(shift) {
        0 => (0, shift),
        rest if rest < shift => (shift, rest),
        rest => (rest, shift),
    }
}

impl Luks2 {
    /// Turns a header just made in memory for the plain data it will encrypt (one `crypt`
    /// segment at data offset `shift`, one digest, a keyslot) into the start of a
    /// data-shift encryption of a device of `device` bytes (see the module docs), as
    /// cryptsetup's init leaves it. Nothing is written: the caller moves the data, then
    /// writes the header to the device.
    pub fn encrypt_shift_build(&mut self, key: &[u8], device: u64, shift: u64) -> Result<Keys> {
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?.id;
        let sector = seg.sector_size as u64;
        if seg.offset != shift || shift == 0 || !shift.is_multiple_of(sector) {
            return Err(Error::invalid(format!(
                "the data shift {shift} must be the header's data offset and a multiple \
                 of the {sector}-byte sector size"
            )));
        }
        let total = device
            .checked_sub(2 * shift)
            .filter(|&l| l >= shift && l.is_multiple_of(sector))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "a device of {device} bytes reduced by {} leaves no room for the data \
                     (at least the shift, {shift} bytes, in whole {sector}-byte sectors)",
                    2 * shift
                ))
            })?;
        let moved = device - shift;
        let linear = |offset: u64, size: u64| json!({"type": "linear", "offset": offset.to_string(), "size": size.to_string()});
        let mut regular = vec![linear(moved, shift)];
        if total > shift {
            regular.push(linear(shift, total - shift));
        }
        let mut backup_moved = linear(moved, shift);
        backup_moved["flags"] = json!(["backup-moved-segment"]);
        let mut previous = linear(0, total);
        previous["flags"] = json!(["backup-previous"]);
        let mut last = self.json["segments"][&seg.id].clone();
        last["flags"] = json!(["backup-final"]);
        let mut segs = serde_json::Map::new();
        for s in regular.into_iter().chain([backup_moved, previous, last]) {
            segs.insert(segs.len().to_string(), s);
        }
        let final_id = (segs.len() - 1).to_string();
        self.json["segments"] = Value::Object(segs);
        self.json["digests"][&digest]["segments"] = json!([final_id]);
        let id = self.new_keyslot_id(None, None)?;
        let area = self.first_gap(SHIFT_AREA)?;
        self.json["keyslots"][id.to_string()] = json!({
            "type": "reencrypt",
            "key_size": 1,
            "mode": "encrypt",
            "direction": "backward",
            "area": {
                "type": "datashift",
                "offset": area.to_string(),
                "size": SHIFT_AREA.to_string(),
                "shift_size": shift.to_string(),
            },
            "priority": 0,
        });
        self.json["config"]["requirements"] = json!({"mandatory": [REQUIREMENT]});
        let (hash, iterations) = self.digest_cost(&digest)?;
        self.seal_reencryption(id, hash, iterations, None, Some(key))?;
        self.check_fits(&self.json)?;
        Ok(Keys::from_parts(None, Some(key)))
    }

    /// Places the header built by [`Luks2::encrypt_shift_build`] (in `mem`, the store it
    /// was made in, whose bytes are the image's first `shift`): the data's start is
    /// copied to the copy's place and made durable before the header goes over it. A
    /// crash before that leaves the plain image as it was (and a copy in its free end);
    /// one while the keyslots or the second header copy are written leaves the start in
    /// its copy alone, which no tool finds by itself (cryptsetup's header restore has the
    /// same window); after that, a header that either tool reads and recovers.
    pub fn encrypt_shift_place(&mut self, mem: &dyn Store, data: &dyn Store) -> Result<()> {
        self.write(mem)?;
        let m = self.moves(data)?;
        if store::size(mem)? != m.shift {
            return Err(Error::invalid(
                "the header was not made in a store of the shift's size",
            ));
        }
        store::copy(data, 0, data, m.moved, m.shift, "start of the data")?;
        store::sync(data)?;
        // The keyslots first, then the second header copy, then the first, each synced:
        // whenever a copy of the header reads, the keyslots it names are whole (and the
        // metadata says where the data's start is: its copy).
        let hdr = self.bin.hdr_size;
        let parts = [
            (2 * hdr, m.shift - 2 * hdr, "new keyslots"),
            (hdr, hdr, "new header's second copy"),
            (0, hdr, "new header"),
        ];
        for (at, len, what) in parts {
            store::copy(mem, at, data, at, len, what)?;
            store::sync(data)?;
        }
        Ok(())
    }

    /// The first 4096-aligned gap of `len` bytes in the keyslots area (cryptsetup's
    /// `LUKS2_find_area_gap`).
    fn first_gap(&self, len: u64) -> Result<u64> {
        let mut used = self.areas()?;
        used.sort();
        let end = 2 * self.bin.hdr_size + self.keyslots_size();
        let mut pos = 2 * self.bin.hdr_size;
        for (off, size) in used {
            if off >= pos + len {
                break;
            }
            pos = pos.max(align_up(off + size, 4096));
        }
        if pos + len > end {
            return Err(Error::invalid(
                "the keyslots area has no free 4096 bytes for the reencrypt keyslot",
            ));
        }
        Ok(pos)
    }

    /// The moves of the data-shift encryption in progress, checked against the image.
    fn moves(&self, data: &dyn Store) -> Result<Moves> {
        let p = plan(&self.json)?;
        let shift = p.shift.filter(|&s| s > 0).ok_or_else(|| {
            corrupt("json: the datashift area has no shift (shift_size 0 or missing)")
        })?;
        let backup = |flag: &str| -> Result<(u64, Option<u64>, Value)> {
            let (_, seg) = super::flagged_segment(&self.json, flag)?
                .ok_or_else(|| corrupt(format!("json: no segment is flagged {flag}")))?;
            let path = format!("segments.{flag}.");
            let size = match seg["size"].as_str() {
                Some("dynamic") => None,
                _ => Some(u64_str(seg, "size", &path)?),
            };
            Ok((u64_str(seg, "offset", &path)?, size, seg.clone()))
        };
        let (prev_at, total, prev) = backup("backup-previous")?;
        let (moved, moved_len, moved_seg) = backup("backup-moved-segment")?;
        let (final_at, _, last) = backup("backup-final")?;
        let total = total.unwrap_or(0);
        let image = store::size(data)?;
        let sector = last["sector_size"].as_u64().unwrap_or(512);
        let sound = prev["type"] == "linear"
            && moved_seg["type"] == "linear"
            && last["type"] == "crypt"
            && prev_at == 0
            && final_at == shift
            && moved_len == Some(shift)
            && total >= shift
            && total.is_multiple_of(sector)
            && shift.is_multiple_of(sector)
            && moved >= shift + total;
        if !sound {
            return Err(corrupt(
                "json: the segments are not those of an encryption that moves the data \
                 (cryptsetup's --reduce-device-size)",
            ));
        }
        if moved.checked_add(shift).is_none_or(|end| end > image) {
            return Err(Error::truncated(format!(
                "the copy of the data's start ({shift} bytes at {moved}) ends past the \
                 image's {image} bytes: did the image shrink?"
            )));
        }
        Ok(Moves {
            shift,
            total,
            moved,
        })
    }

    /// The regular segments when the plaintext `[0, left)` is still to be encrypted and
    /// the `hot` bytes after it are being encrypted (0: none), as cryptsetup writes them.
    fn shift_segments(&self, m: &Moves, left: u64, hot: u64) -> Result<Vec<(Value, Under)>> {
        let (_, last) = super::flagged_segment(&self.json, "backup-final")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
        if left == 0 && hot == 0 {
            return Ok(vec![(segments::cut(last, 0, None)?, Under::New)]);
        }
        let linear = |offset: u64, size: u64| json!({"type": "linear", "offset": offset.to_string(), "size": size.to_string()});
        let mut out = Vec::new();
        if left > 0 {
            out.push((linear(m.moved, m.shift), Under::Old));
            if left > m.shift {
                out.push((linear(m.shift, left - m.shift), Under::Old));
            }
        }
        if hot > 0 {
            let mut seg = segments::cut(last, left, Some(hot))?;
            seg["flags"] = json!(["in-reencryption"]);
            out.push((seg, Under::Hot));
        }
        let rest = m.total - left - hot;
        if rest > 0 {
            out.push((segments::cut(last, left + hot, Some(rest))?, Under::New));
        }
        Ok(out)
    }

    /// Where the run stands: the plaintext bytes left and the hotzone of a crash (0:
    /// none). The regular segments must be exactly those this code (and cryptsetup)
    /// writes there: the digest does not bind them.
    fn shift_progress(&self, m: &Moves) -> Result<(u64, u64)> {
        let (mut left, mut hot) = (0u64, 0u64);
        let regular: Vec<&Value> = {
            let mut v: Vec<(u64, &Value)> = obj(&self.json, "segments", "")?
                .iter()
                .filter(|(_, s)| {
                    !s["flags"].as_array().is_some_and(|f| {
                        f.iter()
                            .any(|f| f.as_str().is_some_and(|f| f.starts_with("backup-")))
                    })
                })
                .map(|(id, s)| (id.parse().unwrap_or(u64::MAX), s))
                .collect();
            v.sort_by_key(|(id, _)| *id);
            v.into_iter().map(|(_, s)| s).collect()
        };
        for seg in &regular {
            let size = u64_str(seg, "size", "segments.")
                .ok()
                .filter(|_| seg["size"] != "dynamic");
            let flagged = seg["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == "in-reencryption"));
            match (seg["type"].as_str(), flagged, size) {
                (Some("linear"), false, Some(n)) => left += n,
                (Some("crypt"), true, Some(n)) => hot += n,
                _ => {}
            }
        }
        let want = left
            .checked_add(hot)
            .filter(|&n| n <= m.total)
            .map(|_| self.shift_segments(m, left, hot));
        let fits = hot == 0 || zone(left + hot, m.shift) == (left, hot);
        let same = |a: &Value, b: &Value| {
            [
                "type",
                "offset",
                "size",
                "iv_tweak",
                "encryption",
                "sector_size",
            ]
            .iter()
            .all(|k| a.get(k) == b.get(k))
                && a["flags"].as_array().is_some_and(|f| !f.is_empty())
                    == b["flags"].as_array().is_some_and(|f| !f.is_empty())
        };
        match want {
            Some(Ok(w))
                if fits
                    && w.len() == regular.len()
                    && w.iter().zip(&regular).all(|((w, _), r)| same(w, r)) =>
            {
                Ok((left, hot))
            }
            Some(Err(e)) => Err(e),
            _ => Err(corrupt(
                "json: the regular segments are not those of an encryption that moves the \
                 data at any point of its progress",
            )),
        }
    }

    /// The new layout (the `backup-final` segment) of `m.total` bytes under `key`.
    fn shift_layout(&self, m: &Moves, keys: &Keys) -> Result<Layout> {
        let (id, seg) = super::flagged_segment(&self.json, "backup-final")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
        let seg = super::super::json::segment_of(id, seg)?;
        let key = keys
            .new_key()
            .ok_or_else(|| Error::invalid("the new volume key is missing"))?;
        let geometry = Geometry {
            sector_size: seg.sector_size,
            data_offset: seg.offset,
            size: m.total,
            iv: IvRule::Units512 {
                first: seg.iv_tweak,
            },
            metadata: None,
        };
        Layout::single(geometry, cipher_spec(&seg.encryption, key.len())?, key)
    }

    /// Encrypts the hotzone `[at, at + len)`: its plaintext (the copy for the start) is
    /// read, encrypted and written `shift` bytes on, in chunks on `threads` threads.
    fn shift_zone(
        &self,
        data: &dyn Store,
        m: &Moves,
        new: &Layout,
        at: u64,
        len: u64,
        threads: usize,
    ) -> Result<()> {
        let source = if at == 0 { m.moved } else { at };
        let sector = new.sector_size() as u64;
        in_chunks(threads, at, len, |from, buf| {
            store::read_exact(data, buf, source + (from - at), "plaintext")?;
            new.encrypt(from / sector, buf)?;
            store::write_all(data, buf, m.shift + from, "data")
        })
    }

    /// Records `left` bytes of plaintext left and `hot` bytes in flight, in the header.
    fn shift_record(&mut self, header: &dyn Store, m: &Moves, left: u64, hot: u64) -> Result<()> {
        let regular = self.shift_segments(m, left, hot)?;
        segments::install(&mut self.json, regular)?;
        self.write(header)
    }

    /// Runs the data-shift encryption in progress (state clean) to its end, or until
    /// `o.progress` says stop.
    pub(super) fn shift_run(
        &mut self,
        at: Placement<'_>,
        keys: &Keys,
        o: &mut RunOptions<'_>,
    ) -> Result<Outcome> {
        if o.line.is_some() {
            return Err(Error::unsupported(
                "serving a volume while its data is moved: run the encryption offline",
            ));
        }
        if o.resilience.is_some() {
            return Err(Error::invalid(
                "an encryption that moves the data keeps its resilience (datashift): give \
                 no --resilience",
            ));
        }
        let (header, data) = (at.header(), at.data());
        let m = self.moves(data)?;
        let (mut left, hot) = self.shift_progress(&m)?;
        if hot > 0 {
            return Err(Error::invalid(
                "the encryption was interrupted inside a hotzone: recover it first \
                 (sectorcrypt repair IMAGE, or cryptsetup repair)",
            ));
        }
        let new = self.shift_layout(&m, keys)?;
        while left > 0 {
            if !(o.progress)(m.total - left, m.total) {
                return Ok(Outcome::Stopped {
                    done: m.total - left,
                    total: m.total,
                });
            }
            let (start, len) = zone(left, m.shift);
            self.shift_record(header, &m, start, len)?;
            self.shift_zone(data, &m, &new, start, len, o.threads.max(1))?;
            store::sync(data)?;
            self.shift_record(header, &m, start, 0)?;
            left = start;
        }
        (o.progress)(m.total, m.total);
        self.shift_finish(at)?;
        Ok(Outcome::Finished)
    }

    /// Recovers a crash inside a hotzone by encrypting it again from its source, which
    /// the hotzone never overwrites; ends the run when it was the last.
    pub(super) fn shift_recover(&mut self, at: Placement<'_>, keys: &Keys) -> Result<()> {
        let (header, data) = (at.header(), at.data());
        let m = self.moves(data)?;
        let (left, hot) = self.shift_progress(&m)?;
        if hot == 0 {
            return Err(Error::invalid("no hotzone to recover: the state is clean"));
        }
        let new = self.shift_layout(&m, keys)?;
        self.shift_zone(data, &m, &new, left, hot, 1)?;
        store::sync(data)?;
        self.shift_record(header, &m, left, 0)?;
        if left == 0 {
            self.shift_finish(at)?;
        }
        Ok(())
    }

    /// Ends the run once every byte is encrypted: the copy of the data's start is wiped
    /// with random data (the state says no byte is read from it any more), then the
    /// metadata of the run goes.
    pub(super) fn shift_finish(&mut self, at: Placement<'_>) -> Result<()> {
        let m = self.moves(at.data())?;
        store::wipe(at.data(), m.moved, m.shift, true)?;
        store::sync(at.data())?;
        self.rekey_finish(at)
    }

    /// Whether the data-shift encryption in progress has encrypted everything (its last
    /// step written, its end not): then it only needs its end.
    pub(super) fn shift_done(&self, data: &dyn Store) -> Result<bool> {
        let m = self.moves(data)?;
        Ok(self.shift_progress(&m)? == (0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_go_backward_with_the_start_last() {
        let s = 16;
        let mut left = 5 * s + 4;
        let mut zones = Vec::new();
        while left > 0 {
            let z = zone(left, s);
            zones.push(z);
            left = z.0;
        }
        assert_eq!(
            zones,
            [
                (4 * s + 4, s),
                (3 * s + 4, s),
                (2 * s + 4, s),
                (s + 4, s),
                (s, 4),
                (0, s)
            ]
        );
        assert_eq!(zone(s, s), (0, s));
        assert_eq!(zone(2 * s, s), (s, s));
    }
}
