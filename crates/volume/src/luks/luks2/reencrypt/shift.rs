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
use super::plan;
use super::rekey::{in_chunks, Keys, Outcome, Pass, RunOptions, Side, BLOCK, REQUIREMENT};
use super::segments::{self, Under};
use crate::error::{Error, Result};
use crate::layout::{Geometry, IvRule, Layout};
use crate::luks::keyslot::cipher_spec;
use crate::store::{self, Placement, Store};
use serde_json::{json, Value};

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
        let id = self.add_reencrypt_keyslot(
            "encrypt",
            "backward",
            super::Resilience::DataShift(shift),
            sector,
        )?;
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
        let regular = regular_segments(&self.json)?;
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
        match want {
            Some(Ok(w))
                if fits
                    && w.len() == regular.len()
                    && w.iter().zip(&regular).all(|((w, _), r)| same_segment(w, r)) =>
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

    /// The layout of the backup segment flagged `flag` (`backup-final`,
    /// `backup-previous`) over `total` bytes, under `key` (`which` names it in an error).
    fn backup_layout(
        &self,
        flag: &str,
        total: u64,
        key: Option<&[u8]>,
        which: &str,
    ) -> Result<Layout> {
        let (id, seg) = super::flagged_segment(&self.json, flag)?
            .ok_or_else(|| corrupt(format!("json: no segment is flagged {flag}")))?;
        let seg = super::super::json::segment_of(id, seg)?;
        let key =
            key.ok_or_else(|| Error::invalid(format!("the {which} volume key is missing")))?;
        let geometry = Geometry {
            sector_size: seg.sector_size,
            data_offset: seg.offset,
            size: total,
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
        let (header, data) = (at.header(), at.data());
        let m = self.moves(data)?;
        let (mut left, hot) = self.shift_progress(&m)?;
        if hot > 0 {
            return Err(Error::invalid(
                "the encryption was interrupted inside a hotzone: recover it first \
                 (sectorcrypt repair IMAGE, or cryptsetup repair)",
            ));
        }
        let new = self.backup_layout("backup-final", m.total, keys.new_key(), "new")?;
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
        let new = self.backup_layout("backup-final", m.total, keys.new_key(), "new")?;
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

/// What a data-moving decryption moves where, from its metadata: the ciphertext of
/// `[0, moved)` was copied to the image's start at the init and is decrypted there last;
/// the rest is decrypted from `shift + x` to `x`, `shift` bytes at a time.
#[derive(Debug, Clone, Copy)]
struct Back {
    /// The old data offset, and how far every byte moves back.
    shift: u64,
    /// Bytes of data.
    total: u64,
    /// Bytes of the data's start, copied to the image's start.
    moved: u64,
}

/// The requirement of a data-moving decryption.
const REQUIREMENT_V3: &str = "online-reencrypt-v3";

impl Luks2 {
    /// Turns the header of a volume whose data starts at `shift` (read from the new
    /// header file, a copy of the image's) into the start of a data-moving decryption
    /// (see [`super::Plan::is_shift_decrypt`]), as cryptsetup's init leaves it: segments `0` the copy of
    /// the data's first `moved` bytes at 0, `1` the rest where it is; backups
    /// `backup-moved-segment`, `backup-previous` (the volume's segment), `backup-final`
    /// (linear at 0); the reencrypt keyslot in mode `decrypt`, direction `forward`, the
    /// area `datashift-checksum` or `datashift-journal` with `shift_size` `shift`; the
    /// requirement `online-reencrypt-v3`. Nothing is written. The moved start is the
    /// whole data offset (`moved`, when given, must say so) and must fit the area.
    /// `header` holds the keyslots `passphrase` opens (`key_slot`, or any).
    #[allow(clippy::too_many_arguments)]
    pub fn decrypt_shift_build(
        &mut self,
        header: &dyn Store,
        passphrase: &[u8],
        key_slot: Option<usize>,
        image: u64,
        resilience: super::Resilience,
        moved: Option<u64>,
    ) -> Result<Keys> {
        if super::state(&self.json)? != super::State::None {
            return Err(Error::invalid(
                "a reencryption is already in progress: resume it instead of starting a \
                 decryption",
            ));
        }
        self.check_supported()?;
        let seg = self.segment()?;
        let found = self.segment_digest(&seg)?;
        let (key, _) = self.unlock_digest(header, passphrase, &found, key_slot)?;
        let key = &key[..];
        let digest = found.id;
        let shift = seg.offset;
        let sector = seg.sector_size as u64;
        let total = match seg.size {
            Some(n) => n,
            None => image.saturating_sub(shift),
        };
        if shift == 0 || total == 0 || seg.size.is_some() {
            return Err(Error::unsupported(
                "a decryption that moves the data takes a volume whose data starts past its \
                 header and runs to the image's end",
            ));
        }
        let align = BLOCK.max(sector);
        let (kind, r) = match resilience {
            super::Resilience::Checksum(h) => {
                ("datashift-checksum", super::Resilience::Checksum(h))
            }
            super::Resilience::Journal => ("datashift-journal", super::Resilience::Journal),
            super::Resilience::None | super::Resilience::DataShift(_) => {
                return Err(Error::invalid(
                    "a decryption that moves the data protects the data's start with \
                     checksum (the default) or journal resilience, not none",
                ))
            }
        };
        let id = self.add_reencrypt_keyslot("decrypt", "forward", r, align)?;
        let area = self.json["keyslots"][id.to_string()]["area"].clone();
        let area_size = u64_str(&area, "size", "area.")?;
        let protects = match r {
            super::Resilience::Checksum(h) => area_size / h.output_len() as u64 * align,
            _ => area_size,
        };
        // The whole data offset moves (or the whole data, when it is shorter): cryptsetup
        // takes at most 20 MiB or --hotzone-size, but its resume after the rest is done
        // takes the data offset for the moved start's length, which is right only then.
        let m = shift.min(total);
        if moved.is_some_and(|a| a != m) {
            return Err(Error::invalid(format!(
                "the data's start that moves over the header is the data offset ({m} bytes): \
                 give no --hotzone-size, or that size"
            )));
        }
        if m > protects || !m.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "the data's start that moves over the header ({m} bytes) must be whole \
                 {align}-byte blocks that the resilience area protects ({protects} bytes with \
                 {}): use checksum resilience (the default)",
                kind.trim_start_matches("datashift-")
            )));
        }
        let mut a = area;
        a["type"] = kind.into();
        a["shift_size"] = shift.to_string().into();
        self.json["keyslots"][id.to_string()]["area"] = a;
        let crypt = self.json["segments"][&seg.id].clone();
        let moved_seg = segments::cut(&crypt, 0, Some(m))?;
        let moved_seg = {
            let mut s = moved_seg;
            s["offset"] = "0".into();
            s
        };
        let mut regular = vec![moved_seg.clone()];
        if total > m {
            regular.push(segments::cut(&crypt, m, None)?);
        }
        let mut backup_moved = moved_seg;
        backup_moved["flags"] = json!(["backup-moved-segment"]);
        let mut previous = crypt;
        previous["flags"] = json!(["backup-previous"]);
        let last = json!({"type": "linear", "offset": "0", "size": "dynamic",
            "flags": ["backup-final"]});
        let mut segs = serde_json::Map::new();
        for s in regular.into_iter().chain([backup_moved, previous, last]) {
            segs.insert(segs.len().to_string(), s);
        }
        let old_ids: Vec<String> = (0..segs.len() - 1).map(|i| i.to_string()).collect();
        self.json["segments"] = Value::Object(segs);
        self.json["digests"][&digest]["segments"] = json!(old_ids);
        self.json["config"]["requirements"] = json!({"mandatory": [REQUIREMENT_V3]});
        let (hash, iterations) = self.digest_cost(&digest)?;
        self.seal_reencryption(id, hash, iterations, Some(key), None)?;
        self.check_fits(&self.json)?;
        Ok(Keys::from_parts(Some(key), None))
    }

    /// Places the decryption [`Luks2::decrypt_shift_build`] made: the ciphertext of the
    /// data's start is copied over the image's header and synced, then the header is
    /// written (to its own file). A crash before the header write leaves the volume
    /// as it was under that header (its data in place), the image's own header gone.
    pub fn decrypt_shift_place(&mut self, header: &dyn Store, data: &dyn Store) -> Result<()> {
        let b = self.back(data)?;
        store::copy(data, b.shift, data, 0, b.moved, "start of the data")?;
        store::sync(data)?;
        self.write(header)
    }

    /// The moves of the data-moving decryption in progress.
    fn back(&self, data: &dyn Store) -> Result<Back> {
        let p = plan(&self.json)?;
        let shift = p.shift.filter(|&s| s > 0).ok_or_else(|| {
            corrupt("json: the datashift area has no shift (shift_size 0 or missing)")
        })?;
        let flagged = |flag: &str| -> Result<Value> {
            super::flagged_segment(&self.json, flag)?
                .map(|(_, s)| s.clone())
                .ok_or_else(|| corrupt(format!("json: no segment is flagged {flag}")))
        };
        let (prev, moved, last) = (
            flagged("backup-previous")?,
            flagged("backup-moved-segment")?,
            flagged("backup-final")?,
        );
        let image = store::size(data)?;
        let m = u64_str(&moved, "size", "segments.backup-moved-segment.").unwrap_or(0);
        let sector = prev["sector_size"].as_u64().unwrap_or(512);
        let total = image.saturating_sub(shift);
        let sound = prev["type"] == "crypt"
            && moved["type"] == "crypt"
            && last["type"] == "linear"
            && prev["size"] == "dynamic"
            && last["offset"] == "0"
            && moved["offset"] == "0"
            && u64_str(&prev, "offset", "segments.").ok() == Some(shift)
            && moved["encryption"] == prev["encryption"]
            && moved["sector_size"] == prev["sector_size"]
            && moved["iv_tweak"] == prev["iv_tweak"]
            && m > 0
            && m <= shift
            && m <= total
            && m.is_multiple_of(sector)
            && total.is_multiple_of(sector);
        if !sound {
            return Err(corrupt(
                "json: the segments are not those of a decryption that moves the data \
                 (cryptsetup's --decrypt --header of a volume with its header inside)",
            ));
        }
        Ok(Back {
            shift,
            total,
            moved: m,
        })
    }

    /// The regular segments when `done` bytes after the moved start are plaintext and
    /// `hot` bytes after them are in flight (the moved start itself when `done` is all
    /// the rest and `hot` is the moved length; `done` past the rest: all plaintext).
    fn back_segments(&self, b: &Back, done: u64, hot: u64) -> Result<Vec<(Value, Under)>> {
        let prev = super::flagged_segment(&self.json, "backup-previous")?
            .map(|(_, s)| s.clone())
            .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
        let linear = |offset: u64, size: Option<u64>| {
            json!({"type": "linear", "offset": offset.to_string(),
                "size": size.map_or("dynamic".to_string(), |n| n.to_string())})
        };
        let rest = b.total - b.moved;
        if done > rest {
            return Ok(vec![(linear(0, None), Under::New)]);
        }
        if done == rest && hot == b.moved {
            let mut h = linear(0, Some(b.moved));
            h["flags"] = json!(["in-reencryption"]);
            let mut out = vec![(h, Under::Hot)];
            if rest > 0 {
                out.push((linear(b.moved, None), Under::New));
            }
            return Ok(out);
        }
        let mut moved = segments::cut(&prev, 0, Some(b.moved))?;
        moved["offset"] = "0".into();
        let mut out = vec![(moved, Under::Old)];
        let end = b.moved + done + hot;
        if done > 0 {
            let size = (hot > 0 || end < b.total).then_some(done);
            out.push((linear(b.moved, size), Under::New));
        }
        if hot > 0 {
            let mut h = linear(b.moved + done, Some(hot));
            h["flags"] = json!(["in-reencryption"]);
            out.push((h, Under::Hot));
        }
        if end < b.total {
            out.push((segments::cut(&prev, end, None)?, Under::Old));
        }
        Ok(out)
    }

    /// Where the decryption stands: bytes after the moved start that are plaintext (past
    /// the rest: all of it, the moved start too), and the hotzone of a crash (0: none).
    fn back_progress(&self, b: &Back) -> Result<(u64, u64)> {
        let regular = regular_segments(&self.json)?;
        let rest = b.total - b.moved;
        let flagged = |s: &Value| {
            s["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == "in-reencryption"))
        };
        let size = |s: &Value| u64_str(s, "size", "segments.").ok();
        let (done, hot) = match regular.as_slice() {
            [one] if one["type"] == "linear" && !flagged(one) => (rest + 1, 0),
            [h] | [h, _] if flagged(h) => (rest, b.moved),
            segs => {
                let mut done = 0;
                let mut hot = 0;
                for s in segs.iter().skip(1) {
                    match (s["type"].as_str(), flagged(s)) {
                        (Some("linear"), false) => {
                            done = size(s).unwrap_or(rest);
                        }
                        (Some("linear"), true) => hot = size(s).unwrap_or(0),
                        _ => {}
                    }
                }
                (done, hot)
            }
        };
        let zone_ok = hot == 0
            || (done == rest && hot == b.moved)
            || (done < rest && hot == b.shift.min(rest - done));
        let want = (done <= rest + 1 && zone_ok)
            .then(|| self.back_segments(b, done, hot))
            .transpose()?;
        match want {
            Some(w)
                if w.len() == regular.len()
                    && w.iter().zip(&regular).all(|((w, _), r)| same_segment(w, r)) =>
            {
                Ok((done, hot))
            }
            _ => Err(corrupt(
                "json: the regular segments are not those of a decryption that moves the \
                 data at any point of its progress",
            )),
        }
    }
}

/// The regular (not backup) segments in the order of their ids.
fn regular_segments(json: &Value) -> Result<Vec<&Value>> {
    let mut v: Vec<(u64, &Value)> = obj(json, "segments", "")?
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
    Ok(v.into_iter().map(|(_, s)| s).collect())
}

/// Whether two segments are the same for a run: type, place, IV, cipher, sector size,
/// and whether flagged.
fn same_segment(a: &Value, b: &Value) -> bool {
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
}

impl Luks2 {
    /// Records `done` bytes after the moved start decrypted and `hot` in flight.
    fn back_record(&mut self, header: &dyn Store, b: &Back, done: u64, hot: u64) -> Result<()> {
        let regular = self.back_segments(b, done, hot)?;
        segments::install(&mut self.json, regular)?;
        self.write(header)
    }

    /// Decrypts `[at, at + len)` of the data after the moved start: read at `shift + at`,
    /// written at `at`.
    fn back_zone(
        &self,
        data: &dyn Store,
        b: &Back,
        old: &Layout,
        at: u64,
        len: u64,
        threads: usize,
    ) -> Result<()> {
        let sector = old.sector_size() as u64;
        in_chunks(threads, at, len, |from, buf| {
            store::read_exact(data, buf, b.shift + from, "ciphertext")?;
            old.decrypt(from / sector, buf)?;
            store::write_all(data, buf, from, "plaintext")
        })
    }

    /// Runs the data-moving decryption in progress (state clean) to its end, or until
    /// `o.progress` says stop.
    pub(super) fn back_run(
        &mut self,
        at: Placement<'_>,
        keys: &Keys,
        o: &mut RunOptions<'_>,
    ) -> Result<Outcome> {
        let (header, data) = (at.header(), at.data());
        let b = self.back(data)?;
        let rest = b.total - b.moved;
        let old = self.backup_layout("backup-previous", b.total, keys.old(), "old")?;
        loop {
            let (done, hot) = self.back_progress(&b)?;
            if hot > 0 {
                return Err(Error::invalid(
                    "the decryption was interrupted inside a hotzone: recover it first \
                     (sectorcrypt repair IMAGE, or cryptsetup repair)",
                ));
            }
            if done > rest {
                break;
            }
            if !(o.progress)(done, b.total) {
                return Ok(Outcome::Stopped {
                    done,
                    total: b.total,
                });
            }
            if done == rest {
                self.back_moved_step(header, data, &b, keys)?;
                break;
            }
            let len = b.shift.min(rest - done);
            self.back_record(header, &b, done, len)?;
            self.back_zone(data, &b, &old, b.moved + done, len, o.threads.max(1))?;
            store::sync(data)?;
            self.back_record(header, &b, done + len, 0)?;
        }
        (o.progress)(b.total, b.total);
        self.back_finish(at, true)?;
        Ok(Outcome::Finished)
    }

    /// The last hotzone: the moved start decrypted in place, protected by the area as a
    /// `checksum` or `journal` hotzone.
    fn back_moved_step(
        &mut self,
        header: &dyn Store,
        data: &dyn Store,
        b: &Back,
        keys: &Keys,
    ) -> Result<()> {
        let p = plan(&self.json)?;
        let old = self.backup_layout("backup-previous", b.total, keys.old(), "old")?;
        let new_side = Side::Plain(old.sector_size());
        let old_side = Side::Crypt(Box::new(old));
        let pass = Pass {
            data,
            old: &old_side,
            new: &new_side,
            source: 0,
            offset: 0,
            threads: 1,
        };
        let rest = b.total - b.moved;
        match p.checksum.as_ref() {
            Some((hash, block)) => {
                let hash = crate::hash::HashAlg::parse(hash)?;
                let sums = pass.hashes(0, b.moved, hash, *block as u64)?;
                store::write_all(header, &sums, p.area.0, "reencryption checksums")?;
                store::sync(header)?;
                self.back_record(header, b, rest, b.moved)?;
                pass.rewrite(0, b.moved)?;
            }
            None => {
                let mut buf = zeroize::Zeroizing::new(vec![0u8; b.moved as usize]);
                store::read_exact(data, &mut buf, 0, "hotzone")?;
                store::write_all(header, &buf, p.area.0, "reencryption journal")?;
                store::sync(header)?;
                self.back_record(header, b, rest, b.moved)?;
                pass.rewrite_from(0, &mut buf)?;
            }
        }
        // No state "all plaintext, requirement kept" is written (cryptsetup 2.6.1's last
        // step writes one, and its resume of it decrypts the plaintext again): the end
        // follows the data sync.
        store::sync(data)
    }

    /// Recovers a crash inside a hotzone of a data-moving decryption: a hotzone after the
    /// moved start is decrypted again from its source; the moved start from the area (as a
    /// `checksum` or `journal` hotzone). Ends the run when it was the last.
    pub(super) fn back_recover(&mut self, at: Placement<'_>, keys: &Keys) -> Result<()> {
        let (header, data) = (at.header(), at.data());
        let b = self.back(data)?;
        let (done, hot) = self.back_progress(&b)?;
        if hot == 0 {
            return Err(Error::invalid("no hotzone to recover: the state is clean"));
        }
        let old = self.backup_layout("backup-previous", b.total, keys.old(), "old")?;
        let rest = b.total - b.moved;
        if done < rest {
            self.back_zone(data, &b, &old, b.moved + done, hot, 1)?;
            store::sync(data)?;
            return self.back_record(header, &b, done + hot, 0);
        }
        let p = plan(&self.json)?;
        let new_side = Side::Plain(old.sector_size());
        let old_side = Side::Crypt(Box::new(old));
        let pass = Pass {
            data,
            old: &old_side,
            new: &new_side,
            source: 0,
            offset: 0,
            threads: 1,
        };
        match p.checksum.as_ref() {
            Some((hash, block)) => {
                let hash = crate::hash::HashAlg::parse(hash)?;
                let block = *block as u64;
                let n = b.moved.div_ceil(block);
                let mut sums = vec![0u8; n as usize * hash.output_len()];
                store::read_exact(header, &mut sums, p.area.0, "reencryption checksums")?;
                let mut buf = zeroize::Zeroizing::new(vec![0u8; block as usize]);
                for (i, want) in sums.chunks(hash.output_len()).enumerate() {
                    let from = i as u64 * block;
                    let len = block.min(b.moved - from) as usize;
                    store::read_exact(data, &mut buf[..len], from, "hotzone")?;
                    if hash.digest(&[&buf[..len]]) == want {
                        pass.rewrite_from(from, &mut buf[..len])?;
                    }
                }
            }
            None => {
                let mut buf = zeroize::Zeroizing::new(vec![0u8; b.moved as usize]);
                store::read_exact(header, &mut buf, p.area.0, "reencryption journal")?;
                pass.rewrite_from(0, &mut buf)?;
            }
        }
        store::sync(data)?;
        self.back_finish(at, true)
    }

    /// Ends a data-moving decryption once everything is plaintext: the metadata of the
    /// run goes (as cryptsetup's end), then the image's last `shift` bytes (old
    /// ciphertext nothing reads any more) are wiped with random data. A crash between
    /// the two leaves that ciphertext, whose key is gone with the keyslots.
    /// Without `wipe` (no verified key) the data is not touched.
    pub(super) fn back_finish(&mut self, at: Placement<'_>, wipe: bool) -> Result<()> {
        let image = store::size(at.data())?;
        let b = self.back(at.data())?;
        self.rekey_finish(at)?;
        if !wipe {
            return Ok(());
        }
        store::wipe(at.data(), image - b.shift, b.shift, true)?;
        store::sync(at.data())
    }

    /// Whether the data-moving decryption in progress has decrypted everything.
    pub(super) fn back_done(&self, data: &dyn Store) -> Result<bool> {
        let b = self.back(data)?;
        Ok(self.back_progress(&b)?.0 > b.total - b.moved)
    }
}
