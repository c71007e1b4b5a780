//! Re-keying a LUKS2 volume in place (cryptsetup's `reencrypt` mode, forward): a new
//! volume key, and the same or another cipher, key size and sector size, hotzone by
//! hotzone, with cryptsetup's metadata and order of writes, so that either tool resumes
//! or recovers what the other left. A re-key that moves the data (`--reduce-device-size`,
//! [`Resilience::DataShift`]) runs backward with hotzones no longer than the shift, each
//! read at the old data offset and written at the new one; its end also wipes the old
//! ciphertext left before the new data offset.
//!
//! - **Init** ([`Luks2::reencrypt_init`]): each keyslot the passphrase opens gets a twin
//!   holding the new key (material written and synced first); then one header write adds
//!   the `reencrypt` keyslot (its resilience area: the largest free gap of the keyslots
//!   area), the backup segments `backup-previous` (the old layout) and `backup-final`
//!   (the new one), the new key's digest, the reencryption digest, and the
//!   `online-reencrypt-v2` requirement.
//! - **A hotzone** ([`Luks2::reencrypt_run`]), by resilience:
//!   - `checksum`: the hash of every block of the old ciphertext goes to the area, then
//!     the header with the hot segments (the hotzone flagged `in-reencryption`); the
//!     hotzone is decrypted, encrypted under the new key and written; a data sync; the
//!     header with the progress moved on;
//!   - `journal`: the same with a copy of the old ciphertext in the area;
//!   - `none`: the data only; the header is written when the run stops or ends (a crash
//!     loses the hotzone in progress, as with cryptsetup).
//! - **Recovery** of a crash inside a hotzone ([`Luks2::reencrypt_recover`], what
//!   `cryptsetup repair` does): with `checksum`, every block whose hash is the stored one
//!   is still old and is rewritten; with `journal`, the hotzone is rewritten from the
//!   copy.
//! - **The end**: one header write drops the old keyslots and the metadata of the
//!   reencryption (one segment under the new key stays; the keyslots area grows to the
//!   data offset), then the old keyslots' areas and the resilience area are wiped.
//!
//! The hotzone's bytes are read, re-encrypted and written in chunks on every core.

use super::super::json::{corrupt, obj, str_of, u64_str, AREA_ALIGN, MAX_KEYSLOTS_SIZE};
use super::super::{Luks2, SECTOR_SIZES};
use super::segments;
use super::{layout, plan, requirement_version, state, verification_data, KeyOf, Plan, State};
use crate::error::{Error, Result};
use crate::hash::HashAlg;
use crate::kdf::KdfOptions;
use crate::layout::{Geometry, IvRule, Layout};
use crate::luks::fields::align_up;
use crate::luks::keyslot::cipher_spec;
use crate::store::{self, Placement, Store};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use sectorcrypt_crypto::secret::SecretBytes;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use zeroize::Zeroizing;

/// A volume key.
type Key = Zeroizing<Vec<u8>>;

/// The requirement a re-key writes.
pub(super) const REQUIREMENT: &str = "online-reencrypt-v2";
/// cryptsetup's hotzone without resilience data (`LUKS2_DEFAULT_NONE_REENCRYPTION_LENGTH`).
const NONE_HOTZONE: u64 = 20 << 20;
/// cryptsetup's largest hotzone (`LUKS2_REENCRYPT_MAX_HOTZONE_LENGTH`).
const MAX_HOTZONE: u64 = 1 << 30;
/// The unit of the parallel data passes: small enough that a thread's buffer stays in its
/// core's L2 cache between the read, the two ciphers (or the hash) and the write (4 MiB
/// chunks made a 1 GiB re-key without resilience data 1.3x slower on tmpfs).
const CHUNK: u64 = 512 << 10;
/// The block size of a file system or device: the least alignment of a hotzone.
pub(super) const BLOCK: u64 = 4096;
/// The area of a `datashift` reencrypt keyslot (cryptsetup's: one 4096-byte unit; nothing
/// is stored in it).
const SHIFT_AREA: u64 = 4096;

/// How a hotzone is protected against a crash while it is rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resilience {
    /// Nothing is stored: a crash loses the hotzone in progress.
    None,
    /// The hash of each block of the old data (cryptsetup's default, with sha256).
    Checksum(HashAlg),
    /// A copy of the old data.
    Journal,
    /// Nothing is stored: the data moves this many bytes toward the end as it is
    /// re-keyed (cryptsetup's `reencrypt --reduce-device-size`), so the old data of a
    /// hotzone (never longer than the shift) is still where it was after a crash.
    DataShift(u64),
}

impl Resilience {
    /// The resilience named `name` (`none`, `checksum`, `journal`), with `hash` for
    /// `checksum`.
    pub fn parse(name: &str, hash: HashAlg) -> Result<Resilience> {
        match name {
            "none" => Ok(Resilience::None),
            "checksum" => Ok(Resilience::Checksum(hash)),
            "journal" => Ok(Resilience::Journal),
            "datashift" | "datashift-checksum" | "datashift-journal" => {
                Err(Error::invalid(format!(
                    "resilience {name:?} comes with a data shift: give --reduce-device-size \
                     (a re-key or an encryption), or --decrypt with a new --header"
                )))
            }
            other => Err(Error::invalid(format!(
                "resilience {other:?}: choose none, checksum or journal"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Resilience::None => "none",
            Resilience::Checksum(_) => "checksum",
            Resilience::Journal => "journal",
            Resilience::DataShift(_) => "datashift",
        }
    }
}

/// What [`Luks2::reencrypt_init`] needs.
#[derive(Debug)]
pub struct InitOptions<'a> {
    /// The new cipher (the old one when `None`).
    pub cipher: Option<&'a str>,
    /// The new key size in bytes (the old one when `None`).
    pub key_bytes: Option<usize>,
    /// The new encryption sector size (the old one when `None`).
    pub sector_size: Option<usize>,
    /// The resilience of the hotzones.
    pub resilience: Resilience,
    /// The KDF of the new keyslots; `None`: each at the KDF and cost of the keyslot it
    /// replaces.
    pub kdf: Option<&'a KdfOptions>,
    /// Only this keyslot is carried over (the others are removed at the end); `None`:
    /// every keyslot, each of which the passphrase must open.
    pub key_slot: Option<usize>,
}

/// The two volume keys of a reencryption.
pub struct Keys {
    /// `None` when the old layout is plaintext (an encryption).
    old: Option<SecretBytes>,
    /// `None` when the new layout is plaintext (a decryption).
    new: Option<SecretBytes>,
}

impl Keys {
    /// The keys of a reencryption: the old volume key, the new one.
    pub(super) fn from_parts(old: Option<&[u8]>, new: Option<&[u8]>) -> Keys {
        Keys {
            old: old.map(SecretBytes::from_slice),
            new: new.map(SecretBytes::from_slice),
        }
    }

    pub(super) fn old(&self) -> Option<&[u8]> {
        self.old.as_deref()
    }

    pub(super) fn new_key(&self) -> Option<&[u8]> {
        self.new.as_deref()
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").finish_non_exhaustive()
    }
}

/// How [`Luks2::reencrypt_run`] runs.
pub struct RunOptions<'a> {
    /// The largest hotzone in bytes (a multiple of the alignment); `None`: cryptsetup's.
    pub hotzone: Option<u64>,
    /// Another resilience than the metadata's (`none`, `checksum` and `journal` may be
    /// switched between runs, as cryptsetup allows).
    pub resilience: Option<Resilience>,
    /// Threads of the data passes.
    pub threads: usize,
    /// Called before each hotzone with (bytes done, bytes in all); `false` stops the run
    /// cleanly there.
    pub progress: &'a mut dyn FnMut(u64, u64) -> bool,
    /// The progress line of an engine serving the volume meanwhile: held for each
    /// hotzone, moved after it (see `online.rs`).
    pub line: Option<std::sync::Arc<super::line::Line>>,
}

impl std::fmt::Debug for RunOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("hotzone", &self.hotzone)
            .field("resilience", &self.resilience)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The volume is under the new key alone; the reencryption metadata is gone.
    Finished,
    /// Stopped between two hotzones (a clean state any tool resumes).
    Stopped {
        /// Bytes under the new key.
        done: u64,
        /// Bytes of the data area.
        total: u64,
    },
}

impl Luks2 {
    /// Starts re-keying: the new keyslots and the reencryption metadata are written;
    /// the data is not touched. Returns both keys for [`Luks2::reencrypt_run`].
    pub fn reencrypt_init(
        &mut self,
        store: &dyn Store,
        data: &dyn Store,
        passphrase: &[u8],
        o: &InitOptions<'_>,
    ) -> Result<Keys> {
        if state(&self.json)? != State::None {
            return Err(Error::invalid(
                "a reencryption is already in progress: resume it (sectorcrypt reencrypt \
                 --resume-only) instead of starting another",
            ));
        }
        self.check_supported()?;
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?;
        let (old_key, first) = self.unlock_digest(store, passphrase, &digest, o.key_slot)?;
        let mut slots = vec![first];
        if o.key_slot.is_none() {
            for &id in &digest.keyslots {
                if id == first {
                    continue;
                }
                match self.unlock_digest(store, passphrase, &digest, Some(id)) {
                    Ok(_) => slots.push(id),
                    Err(e) => {
                        return Err(Error::invalid(format!(
                            "keyslot {id} does not open with this passphrase ({e}): a re-key \
                             replaces every keyslot, and keyslot {id}'s passphrase would be \
                             lost. Give --key-slot {first} to carry over keyslot {first} \
                             alone (the others are removed at the end), or remove keyslot \
                             {id} first"
                        )))
                    }
                }
            }
        }
        slots.sort_unstable();
        let cipher = o.cipher.unwrap_or(&seg.encryption).to_string();
        let key_bytes = o.key_bytes.unwrap_or(old_key.len());
        let sector_size = o.sector_size.unwrap_or(seg.sector_size);
        if !SECTOR_SIZES.contains(&sector_size) {
            return Err(Error::invalid(format!(
                "sector size {sector_size}: LUKS2 takes 512, 1024, 2048 or 4096"
            )));
        }
        let mut total = data_length(data, seg.offset, seg.size)?;
        if let Resilience::DataShift(shift) = o.resilience {
            total = shifted_total(total, shift, &seg, sector_size)?;
        }
        if total % sector_size as u64 != 0 || total == 0 {
            return Err(Error::invalid(format!(
                "the data area has {total} bytes, not a whole number of {sector_size}-byte \
                 sectors"
            )));
        }
        let spec = cipher_spec(&cipher, key_bytes)?;
        let mut new_key = Zeroizing::new(vec![0u8; key_bytes]);
        crate::random(&mut new_key)?;
        // Refuses a key the cipher cannot take (XTS with equal halves) before anything.
        let geometry = Geometry {
            sector_size,
            data_offset: seg.offset,
            size: total,
            iv: IvRule::Units512 {
                first: seg.iv_tweak,
            },
            metadata: None,
        };
        Layout::single(geometry, spec, &new_key)?;

        let saved = self.json.clone();
        let built = self.build_init(
            store,
            passphrase,
            o,
            &old_key,
            &new_key,
            &slots,
            &cipher,
            sector_size,
        );
        let sealed = match built {
            Ok(s) => s,
            Err(e) => {
                self.json = saved;
                return Err(e);
            }
        };
        for s in &sealed {
            store::write_all(store, &s.material, s.offset, "keyslot area")?;
        }
        store::sync(store)?;
        if let Err(e) = self.write(store) {
            self.json = saved;
            return Err(e);
        }
        Ok(Keys::from_parts(Some(&old_key), Some(&new_key)))
    }

    /// The metadata of a new re-key, in `self.json`; returns the new keyslots' material.
    #[allow(clippy::too_many_arguments)]
    fn build_init(
        &mut self,
        store: &dyn Store,
        passphrase: &[u8],
        o: &InitOptions<'_>,
        old_key: &[u8],
        new_key: &[u8],
        slots: &[usize],
        cipher: &str,
        sector_size: usize,
    ) -> Result<Vec<super::super::areas::Sealed>> {
        let seg = self.segment()?;
        let old_digest = self.segment_digest(&seg)?.id;
        let mut sealed = Vec::new();
        let mut new_ids = Vec::new();
        for &old_slot in slots {
            let id = self.new_keyslot_id(None, None)?;
            let same;
            let kdf = match o.kdf {
                Some(k) => k,
                None => {
                    let ks = self.keyslots()?.into_iter().find(|k| k.id == old_slot);
                    let ks = ks.ok_or_else(|| corrupt(format!("json: keyslot {old_slot}")))?;
                    same = KdfOptions::same_as(&ks.kdf, ks.af_hash);
                    &same
                }
            };
            let s = self.seal_keyslot(store, new_key, passphrase, kdf, cipher, &[])?;
            self.json["keyslots"][id.to_string()] = s.json.clone();
            new_ids.push(id);
            sealed.push(s);
        }
        let align = [BLOCK, seg.sector_size as u64, sector_size as u64]
            .into_iter()
            .max()
            .expect("three");
        // A data shift goes from the end backward: each hotzone moves onto data already
        // moved (cryptsetup's direction for it too).
        let (direction, shift) = match o.resilience {
            Resilience::DataShift(shift) => ("backward", shift),
            _ => ("forward", 0),
        };
        let reenc_id = self.add_reencrypt_keyslot("reencrypt", direction, o.resilience, align)?;
        let old = self.json["segments"][&seg.id].clone();
        let mut previous = old.clone();
        previous["flags"] = json!(["backup-previous"]);
        let mut last = old.clone();
        last["offset"] = Value::String((seg.offset + shift).to_string());
        last["encryption"] = Value::String(cipher.into());
        last["sector_size"] = json!(sector_size);
        last["flags"] = json!(["backup-final"]);
        self.json["segments"] = json!({"0": old, "1": previous, "2": last});
        let (hash, iterations) = self.digest_cost(&old_digest)?;
        let used = obj(&self.json, "digests", "")?;
        let new_digest = (0u32..)
            .find(|n| !used.contains_key(&n.to_string()))
            .expect("a free id");
        self.json["digests"][&old_digest]["segments"] = json!(["0", "1"]);
        self.json["digests"][new_digest.to_string()] = pbkdf2_digest(
            new_key,
            hash,
            iterations,
            new_ids.iter().map(|i| i.to_string()).collect(),
            vec!["2".into()],
        )?;
        self.json["config"]["requirements"] = json!({"mandatory": [REQUIREMENT]});
        self.seal_reencryption(reenc_id, hash, iterations, Some(old_key), Some(new_key))?;
        self.check_fits(&self.json)?;
        Ok(sealed)
    }

    /// The largest gap of the keyslots area no keyslot names (cryptsetup's area of a
    /// reencrypt keyslot), aligned to 4096 bytes.
    fn largest_gap(&self) -> Result<(u64, u64)> {
        let mut used = self.areas()?;
        used.sort();
        let start = 2 * self.bin.hdr_size;
        let end = start + self.keyslots_size();
        let mut best = (start, 0);
        let mut pos = start;
        for (off, size) in used.into_iter().chain([(end, 0)]) {
            if off > pos && off - pos > best.1 {
                best = (pos, off - pos);
            }
            pos = pos.max(align_up(off + size, AREA_ALIGN));
        }
        Ok(best)
    }

    /// The two volume keys of the reencryption in progress, from the keyslots `passphrase`
    /// opens, checked against the reencryption digest.
    pub fn reencrypt_keys(&self, store: &dyn Store, passphrase: &[u8]) -> Result<Keys> {
        self.rekey_plan()?;
        let (old, new) = self.bound_keys(store, passphrase)?;
        let (old, new) = (
            old.as_deref().map(|k| &k[..]),
            new.as_deref().map(|k| &k[..]),
        );
        super::verify_digest(&self.json, old, new)?;
        Ok(Keys::from_parts(old, new))
    }

    /// Refuses a mandatory requirement besides the re-encryption's: one this code does
    /// not know stays unmet whatever a re-encryption or a repair does.
    pub(super) fn only_known_requirements(&self) -> Result<()> {
        let unknown: Vec<&str> = self.json["config"]["requirements"]["mandatory"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|r| {
                !matches!(
                    *r,
                    "online-reencrypt" | "online-reencrypt-v2" | "online-reencrypt-v3"
                )
            })
            .collect();
        if !unknown.is_empty() {
            return Err(Error::unsupported(format!(
                "the volume also requires {}, which sectorcrypt does not implement",
                unknown.join(", ")
            )));
        }
        Ok(())
    }

    /// The volume keys the reencryption metadata binds, from the keyslots `passphrase`
    /// opens: (old, new), each `None` when that layout has no key (plaintext).
    pub(super) fn bound_keys(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
    ) -> Result<(Option<Key>, Option<Key>)> {
        let mut out: [Option<Key>; 2] = [None, None];
        let digests = self.digests()?;
        for (i, flag) in ["backup-previous", "backup-final"].into_iter().enumerate() {
            let (id, _) = super::flagged_segment(&self.json, flag)?
                .ok_or_else(|| corrupt(format!("json: no segment is flagged {flag}")))?;
            if let Some(d) = digests.iter().find(|d| d.segments.iter().any(|s| s == id)) {
                // The new key of an encryption is the old one's digest too: unlocked once.
                if i == 1 {
                    if let Some(old) = &out[0] {
                        if d.verify(old) {
                            break;
                        }
                    }
                }
                out[i] = Some(self.unlock_digest(store, passphrase, d, None)?.0);
            }
        }
        let [old, new] = out;
        Ok((old, new))
    }

    /// The plan of a re-key in progress; refuses what this code does not run yet.
    fn rekey_plan(&self) -> Result<Plan> {
        match requirement_version(&self.json)? {
            None => return Err(Error::invalid("no reencryption is in progress")),
            Some(1) => {
                return Err(Error::unsupported(
                    "the reencryption metadata has no digest (written before cryptsetup \
                     2.3.7): run `cryptsetup repair` on it first",
                ))
            }
            Some(_) => {}
        }
        self.only_known_requirements()?;
        let p = plan(&self.json)?;
        if p.shift.is_some()
            && !p.is_shift_encrypt()
            && !p.is_shift_decrypt()
            && !p.is_shift_rekey()
        {
            return Err(Error::unsupported(format!(
                "a reencryption in mode {} that moves the data (resilience {}): \
                 sectorcrypt does not move data yet; finish it with `cryptsetup reencrypt \
                 --resume-only --force-offline-reencrypt --disable-locks --disable-keyring \
                 IMAGE`",
                p.mode, p.resilience
            )));
        }
        Ok(p)
    }

    /// Where the reencryption stands: the data offset, bytes under the new key, bytes in
    /// all, and both layouts.
    pub(super) fn rekey_state(&self, data: &dyn Store, keys: &Keys) -> Result<Progress> {
        let backward = plan(&self.json)?.direction == "backward";
        // Forward: the new layout's spans, then the old's; backward: the other way round.
        // `first` bytes lie before the change of key (`None`: to the end).
        let (before, after) = if backward {
            (KeyOf::Old, KeyOf::New)
        } else {
            (KeyOf::New, KeyOf::Old)
        };
        let mut first = Some(0u64);
        let mut crossed = false;
        for s in layout(&self.json)? {
            match s.key {
                KeyOf::Hot => {
                    return Err(Error::invalid(
                        "the reencryption was interrupted inside a hotzone: recover it first \
                         (sectorcrypt repair IMAGE, or cryptsetup repair)",
                    ))
                }
                k if k == before && !crossed => {
                    first = first.and_then(|f| s.size.map(|n| f + n));
                }
                k if k == after => crossed = true,
                _ => {
                    return Err(corrupt(format!(
                        "json: {} data after {} data in a {} reencryption",
                        if backward { "old" } else { "new" },
                        if backward { "new" } else { "old" },
                        if backward { "backward" } else { "forward" },
                    )))
                }
            }
        }
        let part = |flag: &str| -> Result<(u64, Option<super::super::Segment>)> {
            let (id, seg) = super::flagged_segment(&self.json, flag)?
                .ok_or_else(|| corrupt(format!("json: no segment is flagged {flag}")))?;
            let offset = u64_str(seg, "offset", "segments.backup.")?;
            if seg["type"].as_str() == Some("linear") {
                return Ok((offset, None));
            }
            Ok((offset, Some(super::super::json::segment_of(id, seg)?)))
        };
        let ((old_offset, old), (new_offset, new)) =
            (part("backup-previous")?, part("backup-final")?);
        if old.is_none() && new.is_none() {
            return Err(corrupt(
                "json: both layouts of the reencryption are plaintext",
            ));
        }
        self.check_regular_segments()?;
        let p = plan(&self.json)?;
        let moved = match p.shift {
            Some(shift) if p.is_shift_rekey() => shift,
            _ => 0,
        };
        if old_offset.checked_add(moved) != Some(new_offset) {
            return Err(corrupt(format!(
                "json: the new layout's data offset {new_offset} is not the old one's \
                 {old_offset} moved by the data shift {moved}"
            )));
        }
        let (_, total) = self.final_extent(data)?;
        let sector_of = |s: &Option<super::super::Segment>| s.as_ref().map(|s| s.sector_size);
        let old_sector = sector_of(&old).or(sector_of(&new)).expect("one is crypt");
        let new_sector = sector_of(&new).unwrap_or(old_sector);
        let sector = old_sector.max(new_sector) as u64;
        if total % sector != 0 || total == 0 {
            return Err(Error::truncated(format!(
                "the data area has {total} bytes, not a whole number of {sector}-byte \
                 sectors: the image changed size during the re-encryption (did it shrink?)"
            )));
        }
        let done = match (crossed, first) {
            // One layout alone: all done forward, nothing done backward.
            (false, _) if backward => 0,
            (false, _) => total,
            (true, None) => return Err(corrupt("json: a dynamic segment before the last")),
            (true, Some(f)) if backward => total.checked_sub(f).ok_or_else(|| {
                corrupt(format!(
                    "json: {f} bytes of old data in a {total}-byte data area (did the image \
                     shrink?)"
                ))
            })?,
            (true, Some(f)) => f,
        };
        if done > total {
            return Err(corrupt(format!(
                "json: {done} bytes reencrypted of a {total}-byte data area (did the image \
                 shrink?)"
            )));
        }
        let make = |seg: &super::super::Segment, key: &[u8]| -> Result<Layout> {
            let geometry = Geometry {
                sector_size: seg.sector_size,
                data_offset: seg.offset,
                size: total - total % seg.sector_size as u64,
                iv: IvRule::Units512 {
                    first: seg.iv_tweak,
                },
                metadata: None,
            };
            Layout::single(geometry, cipher_spec(&seg.encryption, key.len())?, key)
        };
        let align = BLOCK.max(sector);
        let side = |seg: &Option<super::super::Segment>, key: Option<&[u8]>, which| match (seg, key)
        {
            (None, _) => Ok(Side::Plain(sector as usize)),
            (Some(seg), Some(key)) => Ok(Side::Crypt(Box::new(make(seg, key)?))),
            (Some(_), None) => Err(Error::invalid(format!("the {which} volume key is missing"))),
        };
        Ok(Progress {
            offset: new_offset,
            source: old_offset,
            done,
            total,
            align,
            backward,
            old: side(&old, keys.old(), "old")?,
            new: side(&new, keys.new_key(), "new")?,
        })
    }

    /// Where the new layout's data starts and how many bytes it has (the
    /// `backup-final` segment's, `crypt` or `linear`).
    fn final_extent(&self, data: &dyn Store) -> Result<(u64, u64)> {
        let (_, seg) = super::flagged_segment(&self.json, "backup-final")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
        let path = "segments.backup-final.";
        let offset = u64_str(seg, "offset", path)?;
        let size = match seg["size"].as_str() {
            Some("dynamic") => None,
            _ => Some(u64_str(seg, "size", path)?),
        };
        Ok((offset, data_length(data, offset, size)?))
    }

    /// Refuses regular segments whose type, cipher or sector size is not their layout's
    /// (the backup segment of their key; the hotzone's: the new one): the digest does not
    /// bind them, so they are checked against the backups it binds. Their IVs and flags
    /// are not (cryptsetup takes the IVs from the backups too, and ignores unknown
    /// flags).
    pub(super) fn check_regular_segments(&self) -> Result<()> {
        let (_, old) = super::flagged_segment(&self.json, "backup-previous")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
        let (_, new) = super::flagged_segment(&self.json, "backup-final")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
        let new_base = u64_str(new, "offset", "segments.backup-final.")?;
        // A re-key that moves the data keeps the old layout's segments at its own offset;
        // every other run measures all from the new layout's (a data-moving decryption's
        // old segments may lie before the old layout's start).
        let old_base = if plan(&self.json)?.is_shift_rekey() {
            u64_str(old, "offset", "segments.backup-previous.")?
        } else {
            new_base
        };
        for (id, seg) in obj(&self.json, "segments", "")? {
            let flags: Vec<&str> = seg["flags"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if flags.iter().any(|f| f.starts_with("backup-")) {
                continue;
            }
            let path = format!("segments.{id}.");
            let hot = flags.contains(&"in-reencryption");
            let under_new = hot || {
                let (final_id, _) =
                    super::flagged_segment(&self.json, "backup-final")?.expect("found above");
                super::digest_of_segment(&self.json, id)?
                    == super::digest_of_segment(&self.json, final_id)?
            };
            let base = if under_new { new_base } else { old_base };
            let at = u64_str(seg, "offset", &path)?
                .checked_sub(base)
                .ok_or_else(|| corrupt(format!("json: {path}offset is before the data")))?;
            let len = match seg["size"].as_str() {
                Some("dynamic") => None,
                _ => Some(u64_str(seg, "size", &path)?),
            };
            let want = segments::cut(if under_new { new } else { old }, at, len)?;
            for key in ["type", "encryption", "sector_size"] {
                if seg.get(key) != want.get(key) {
                    return Err(corrupt(format!(
                        "json: {path}{key} does not match the {} layout's backup segment",
                        if under_new { "new" } else { "old" }
                    )));
                }
            }
        }
        Ok(())
    }

    /// Runs the reencryption in progress (state clean) from where it stands to the end,
    /// or until `o.progress` says stop.
    pub fn reencrypt_run(
        &mut self,
        at: Placement<'_>,
        keys: &Keys,
        o: &mut RunOptions<'_>,
    ) -> Result<Outcome> {
        let (header, data) = (at.header(), at.data());
        let mut p = self.rekey_plan()?;
        if p.shift.is_some() {
            // The data-moving runs keep the resilience they started with, and run offline
            // only.
            if o.line.is_some() {
                return Err(Error::unsupported(format!(
                    "serving a volume while its data is moved: run the {} offline",
                    p.mode
                )));
            }
            if o.resilience.is_some() {
                return Err(Error::invalid(format!(
                    "a run that moves the data keeps the resilience it started with ({}): \
                     give no --resilience",
                    p.resilience
                )));
            }
            if p.is_shift_encrypt() {
                return self.shift_run(at, keys, o);
            }
            if p.is_shift_decrypt() {
                return self.back_run(at, keys, o);
            }
        }
        let mut prog = self.rekey_state(data, keys)?;
        if let Some(r) = o.resilience {
            if r.name() != p.resilience
                || matches!(r, Resilience::Checksum(h) if p.checksum.as_ref().map(|c| c.0.as_str()) != Some(h.name()))
            {
                self.switch_resilience(header, keys, &p, r, prog.align)?;
                p = self.rekey_plan()?;
            }
        }
        let resilience = match p.resilience.as_str() {
            "checksum" => {
                let (hash, _) = p.checksum.clone().expect("checksum plan");
                Resilience::Checksum(HashAlg::parse(&hash)?)
            }
            "datashift" => Resilience::DataShift(p.shift.expect("datashift plan")),
            other => Resilience::parse(other, HashAlg::Sha256)?,
        };
        if o.line.is_some() && resilience == Resilience::None {
            // Without resilience data the progress is recorded only at the end: a crash
            // of the server would lose every hotzone done and the writes into them.
            return Err(Error::unsupported(
                "serving a volume while it is re-encrypted without resilience data: give \
                 --resilience checksum or journal (serve --reencrypt --resilience checksum)",
            ));
        }
        let len = hotzone_len(&p, resilience, prog.align, o.hotzone)?;
        let pass = Pass {
            data,
            old: &prog.old,
            new: &prog.new,
            source: prog.source,
            offset: prog.offset,
            threads: o.threads.max(1),
        };
        let mut unsaved = false;
        while prog.done < prog.total {
            if !(o.progress)(prog.done, prog.total) {
                if unsaved {
                    self.set_progress(prog.done, 0, prog.total)?;
                    self.write(header)?;
                }
                return Ok(Outcome::Stopped {
                    done: prog.done,
                    total: prog.total,
                });
            }
            let hot = len.min(prog.total - prog.done);
            let mut held = o.line.as_ref().map(|l| l.hold());
            let step = self.hotzone(header, &pass, &p, resilience, prog.done, hot, prog.total);
            if let (Some(line), Ok(())) = (held.as_mut(), &step) {
                **line = prog.done + hot;
            }
            if let (Some(line), Err(_)) = (&o.line, &step) {
                // The zone may be half rewritten: requests fail from now on (the held
                // lock keeps them out until then).
                line.fail();
            }
            drop(held);
            if let Err(e) = step {
                if unsaved {
                    // Without resilience data the hotzone that failed may be half
                    // rewritten; the progress before it is recorded.
                    let _ = self
                        .set_progress(prog.done, 0, prog.total)
                        .and_then(|_| self.write(header));
                }
                return Err(e);
            }
            unsaved = resilience == Resilience::None;
            prog.done += hot;
        }
        (o.progress)(prog.done, prog.total);
        if unsaved {
            store::sync(data)?;
        }
        self.rekey_finish(at)?;
        Ok(Outcome::Finished)
    }

    /// One hotzone `[done, done + hot)` of a data area of `total` bytes.
    #[allow(clippy::too_many_arguments)]
    fn hotzone(
        &mut self,
        header: &dyn Store,
        pass: &Pass<'_>,
        p: &Plan,
        resilience: Resilience,
        done: u64,
        hot: u64,
        total: u64,
    ) -> Result<()> {
        let at = zone_start(p, done, hot, total);
        match resilience {
            Resilience::None => pass.rewrite(at, hot),
            Resilience::DataShift(_) => {
                // The hotzone's old data stays where it was (the hotzone is no longer than
                // the shift): the header says which, and a recovery reads it again.
                self.set_progress(done, hot, total)?;
                self.write(header)?;
                pass.rewrite(at, hot)?;
                store::sync(pass.data)?;
                self.step_done(header, done + hot, total)
            }
            Resilience::Checksum(hash) => {
                let block = p.checksum.as_ref().expect("checksum plan").1 as u64;
                let sums = pass.hashes(at, hot, hash, block)?;
                store::write_all(header, &sums, p.area.0, "reencryption checksums")?;
                // A sync of its own: a header that says "hotzone in flight" must never
                // land without the checksums it names (cryptsetup writes both under one
                // sync, which a crash may reorder).
                store::sync(header)?;
                self.set_progress(done, hot, total)?;
                self.write(header)?;
                pass.rewrite(at, hot)?;
                store::sync(pass.data)?;
                self.step_done(header, done + hot, total)
            }
            Resilience::Journal => {
                let mut buf = Zeroizing::new(vec![0u8; hot as usize]);
                store::read_exact(pass.data, &mut buf, pass.source + at, "hotzone")?;
                store::write_all(header, &buf, p.area.0, "reencryption journal")?;
                store::sync(header)?;
                self.set_progress(done, hot, total)?;
                self.write(header)?;
                pass.rewrite_from(at, &mut buf)?;
                store::sync(pass.data)?;
                self.step_done(header, done + hot, total)
            }
        }
    }

    /// Records the progress after a hotzone: `done` bytes under the new key. After the
    /// last one nothing is written here: the end's header write follows. cryptsetup
    /// 2.6.1 writes a state of one segment under the new key first, and a resume of that
    /// state (after a crash before its end) starts again at offset 0 and re-encrypts the
    /// new data as if it were old (`_offset_forward` takes one segment for no progress):
    /// sectorcrypt leaves the hotzone's state until the end instead, which both tools
    /// recover.
    fn step_done(&mut self, header: &dyn Store, done: u64, total: u64) -> Result<()> {
        if done >= total {
            return Ok(());
        }
        self.set_progress(done, 0, total)?;
        self.write(header)
    }

    /// Sets the regular segments for `done` bytes under the new key and a hotzone of
    /// `hot` bytes next to them (0: none): after them forward, before them backward.
    fn set_progress(&mut self, done: u64, hot: u64, total: u64) -> Result<()> {
        let regular = if plan(&self.json)?.direction == "backward" {
            segments::backward(&self.json, done, hot, total)?
        } else {
            segments::forward(&self.json, done, hot, total)?
        };
        segments::install(&mut self.json, regular)
    }

    /// Rewrites the resilience of the reencrypt keyslot (and so the reencryption digest).
    fn switch_resilience(
        &mut self,
        header: &dyn Store,
        keys: &Keys,
        p: &Plan,
        r: Resilience,
        align: u64,
    ) -> Result<()> {
        let saved = self.json.clone();
        let area = &mut self.json["keyslots"][p.slot.to_string()]["area"];
        let (offset, size) = (area["offset"].clone(), area["size"].clone());
        let mut new = json!({"type": r.name(), "offset": offset, "size": size});
        if let Resilience::Checksum(h) = r {
            new["hash"] = Value::String(h.name().into());
            new["sector_size"] = json!(align);
        }
        *area = new;
        let result = self.redigest(keys).and_then(|_| self.write(header));
        if result.is_err() {
            self.json = saved;
        }
        result
    }

    /// Recomputes the reencryption digest (a new salt) after its inputs changed.
    fn redigest(&mut self, keys: &Keys) -> Result<()> {
        let p = plan(&self.json)?;
        let slot = p.slot.to_string();
        let id = obj(&self.json, "digests", "")?
            .iter()
            .find(|(_, d)| {
                d["keyslots"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|k| k.as_str() == Some(&slot)))
            })
            .map(|(id, _)| id.clone())
            .ok_or_else(|| corrupt("json: no digest lists the reencrypt keyslot"))?;
        let (hash, iterations) = self.digest_cost(&id)?;
        let data = verification_data(&self.json, keys.old(), keys.new_key())?;
        self.json["digests"][&id] = pbkdf2_digest(&data, hash, iterations, vec![slot], vec![])?;
        Ok(())
    }

    /// Recovers a crash inside a hotzone (state crash) from the resilience data: the
    /// hotzone ends up under the new key and the progress moves past it. The run may then
    /// be resumed.
    pub fn reencrypt_recover(&mut self, at: Placement<'_>, keys: &Keys) -> Result<()> {
        let (header, data) = (at.header(), at.data());
        let p = self.rekey_plan()?;
        if p.is_shift_encrypt() {
            return self.shift_recover(at, keys);
        }
        if p.is_shift_decrypt() {
            return self.back_recover(at, keys);
        }
        let (_, hot_seg) = super::flagged_segment(&self.json, "in-reencryption")?
            .ok_or_else(|| Error::invalid("no hotzone to recover: the state is clean"))?;
        let hot_offset = u64_str(hot_seg, "offset", "segments.hot.")?;
        let hot_len = u64_str(hot_seg, "size", "segments.hot.")?;
        // The progress as if the hotzone were done, to build the layouts.
        let (offset, total) = self.final_extent(data)?;
        let start = hot_offset
            .checked_sub(offset)
            .filter(|d| d + hot_len <= total)
            .ok_or_else(|| corrupt("json: the hotzone lies outside the data area"))?;
        let done = if p.direction == "backward" {
            total - start - hot_len
        } else {
            start
        };
        let saved = self.json.clone();
        self.set_progress(done, 0, total)?;
        let prog = self.rekey_state(data, keys);
        self.json = saved;
        let prog = prog?;
        let pass = Pass {
            data,
            old: &prog.old,
            new: &prog.new,
            source: prog.source,
            offset,
            threads: 1,
        };
        match p.resilience.as_str() {
            // The old data of a hotzone no longer than the shift is untouched: done again.
            "datashift" if p.shift.is_some_and(|s| hot_len <= s) => pass.rewrite(start, hot_len)?,
            "datashift" => {
                return Err(corrupt(format!(
                    "json: the hotzone ({hot_len} bytes) is longer than the data shift: its \
                     old data may be written over"
                )))
            }
            "checksum" => {
                let (hash, block) = p.checksum.clone().expect("checksum plan");
                let hash = HashAlg::parse(&hash)?;
                let block = block as u64;
                let n = hot_len.div_ceil(block);
                let mut sums = vec![0u8; n as usize * hash.output_len()];
                store::read_exact(header, &mut sums, p.area.0, "reencryption checksums")?;
                let mut buf = Zeroizing::new(vec![0u8; block as usize]);
                for (i, want) in sums.chunks(hash.output_len()).enumerate() {
                    let from = start + i as u64 * block;
                    let len = block.min(start + hot_len - from) as usize;
                    store::read_exact(data, &mut buf[..len], offset + from, "hotzone")?;
                    if hash.digest(&[&buf[..len]]) == want {
                        pass.rewrite_from(from, &mut buf[..len])?;
                    }
                }
            }
            "journal" => {
                let mut buf = Zeroizing::new(vec![0u8; hot_len as usize]);
                store::read_exact(header, &mut buf, p.area.0, "reencryption journal")?;
                pass.rewrite_from(start, &mut buf)?;
            }
            other => {
                return Err(Error::invalid(format!(
                    "a hotzone interrupted with resilience {other:?} cannot be recovered"
                )))
            }
        }
        store::sync(data)?;
        if done + hot_len == total {
            return self.rekey_finish(at);
        }
        self.set_progress(done + hot_len, 0, total)?;
        self.write(header)
    }

    /// Ends a re-key whose data is all under the new key, in one header write: the old
    /// keyslots, the old key's digest, the backup segments, the reencrypt keyslot, its
    /// digest and the requirement go; one segment (the whole new layout) stays, and an
    /// attached header's keyslots area grows to the data offset, as cryptsetup's does.
    /// Then the old keyslots' areas and the resilience area are wiped.
    ///
    /// cryptsetup wipes first and writes twice; a crash between its writes leaves
    /// metadata whose old keyslots are wiped (which [`Luks2::reencrypt_finish_done`]
    /// still ends). Writing first leaves no such state; a crash before the wipes leaves
    /// the old keyslots' material in free space, wiped by nobody: the window is one sync.
    pub(super) fn rekey_finish(&mut self, at: Placement<'_>) -> Result<()> {
        let header = at.header();
        let p = plan(&self.json)?;
        let (prev_id, prev_seg) = super::flagged_segment(&self.json, "backup-previous")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
        let (final_id, final_seg) = super::flagged_segment(&self.json, "backup-final")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
        let final_seg = final_seg.clone();
        // A re-key that moved the data leaves the old ciphertext of the data's first
        // `shift` bytes before the new data offset: wiped too (cryptsetup leaves it).
        let moved_from = match p.shift {
            Some(shift) if p.is_shift_rekey() => Some((
                u64_str(prev_seg, "offset", "segments.backup-previous.")?,
                shift,
            )),
            _ => None,
        };
        let old_digest = super::digest_of_segment(&self.json, prev_id)?;
        // None in a decryption: the new layout is plaintext.
        let new_digest = super::digest_of_segment(&self.json, final_id)?;
        let old_slots: Vec<String> = match &old_digest {
            Some(d) => self.json["digests"][d]["keyslots"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let mut wipe = vec![p.area];
        let mut json = self.json.clone();
        let slot = p.slot.to_string();
        for id in old_slots.iter().chain([&slot]) {
            if let Some(area) = json["keyslots"].get(id).and_then(|k| k.get("area")) {
                wipe.push((
                    u64_str(area, "offset", "area.")?,
                    u64_str(area, "size", "area.")?,
                ));
            }
            if let Some(k) = json["keyslots"].as_object_mut() {
                k.remove(id);
            }
            if let Some(t) = json.get_mut("tokens").and_then(Value::as_object_mut) {
                for token in t.values_mut() {
                    if let Some(list) = token.get_mut("keyslots").and_then(Value::as_array_mut) {
                        list.retain(|v| v.as_str() != Some(id));
                    }
                }
            }
        }
        let digests = json["digests"]
            .as_object_mut()
            .ok_or_else(|| corrupt("json: digests is not an object"))?;
        digests.retain(|id, d| {
            let lists_slot = d["keyslots"]
                .as_array()
                .is_some_and(|a| a.iter().any(|k| k.as_str() == Some(&slot)));
            !lists_slot && Some(id) != old_digest.as_ref()
        });
        let seg = segments::cut(&final_seg, 0, None)?;
        json["segments"] = json!({"0": seg});
        if let Some(d) = &new_digest {
            json["digests"][d]["segments"] = json!(["0"]);
        }
        // The re-encryption's flag goes; the requirements object with it when it is
        // left empty (as cryptsetup does).
        if let Some(list) = json["config"]["requirements"]["mandatory"].as_array_mut() {
            list.retain(|f| {
                !f.as_str()
                    .is_some_and(|f| f.starts_with("online-reencrypt"))
            });
        }
        let empty = json["config"]["requirements"]["mandatory"]
            .as_array()
            .is_none_or(Vec::is_empty);
        if empty {
            if let Some(config) = json["config"].as_object_mut() {
                config.remove("requirements");
            }
        }
        if let Placement::Attached(_) = at {
            let offset = u64_str(&final_seg, "offset", "segments.final.")?;
            let grown = offset
                .saturating_sub(2 * self.bin.hdr_size)
                .min(MAX_KEYSLOTS_SIZE);
            if grown > self.keyslots_size() {
                json["config"]["keyslots_size"] = Value::String(grown.to_string());
            }
        }
        self.json = json;
        self.write(header)?;
        for (off, size) in wipe {
            store::wipe(header, off, size, true)?;
        }
        if let Some((off, size)) = moved_from {
            store::wipe(at.data(), off, size, true)?;
            store::sync(at.data())?;
        }
        store::sync(header)
    }

    /// Ends a re-key whose data is all under the new key and whose old keyslots are
    /// already gone (cryptsetup's end, interrupted between its writes): no key is needed,
    /// the data is not touched. `false` (nothing written) in any other state.
    pub fn reencrypt_finish_done(&mut self, at: Placement<'_>) -> Result<bool> {
        if state(&self.json)? != State::Clean {
            return Ok(false);
        }
        match self.rekey_plan() {
            Err(_) => return Ok(false),
            // Its end wipes the copy of the plaintext's start, which only a run holding
            // the verified key does (the run ends it).
            Ok(p) if p.is_shift_encrypt() => return Ok(false),
            Ok(p) if p.is_shift_decrypt() => {
                let (prev_id, _) = super::flagged_segment(&self.json, "backup-previous")?
                    .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
                let slots = match super::digest_of_segment(&self.json, prev_id)? {
                    Some(d) => self.json["digests"][&d]["keyslots"]
                        .as_array()
                        .map_or(0, Vec::len),
                    None => 0,
                };
                if slots != 0 || !self.back_done(at.data())? {
                    return Ok(false);
                }
                // No key to check the metadata against: the data is not touched (the
                // tail's old ciphertext stays; its key is gone).
                self.back_finish(at, false)?;
                return Ok(true);
            }
            Ok(_) => {}
        }
        let all_new = layout(&self.json)?.iter().all(|s| s.key == KeyOf::New);
        let (prev_id, _) = super::flagged_segment(&self.json, "backup-previous")?
            .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
        let Some(old_digest) = super::digest_of_segment(&self.json, prev_id)? else {
            return Ok(false);
        };
        let old_slots = self.json["digests"][&old_digest]["keyslots"]
            .as_array()
            .map_or(0, Vec::len);
        if !all_new || old_slots != 0 {
            return Ok(false);
        }
        self.rekey_finish(at)?;
        Ok(true)
    }
}

impl Luks2 {
    /// Ends a re-key whose data is all under the new key when `passphrase` opens the new
    /// key but no longer the old one: cryptsetup's end, interrupted after it wiped an old
    /// keyslot's area and before it wrote the metadata without that keyslot (cryptsetup
    /// 2.6.1 can neither repair nor resume that state). The new key is checked against
    /// its digest; the old one cannot be, so the reencryption digest is not either (as in
    /// [`Luks2::reencrypt_finish_done`], which ends the state a step later without any
    /// key). `false`, with nothing written, in any other state.
    pub fn reencrypt_finish_without_old_key(
        &mut self,
        at: Placement<'_>,
        passphrase: &[u8],
    ) -> Result<bool> {
        if state(&self.json)? != State::Clean {
            return Ok(false);
        }
        match self.rekey_plan() {
            Ok(p) if p.mode == "reencrypt" => {}
            _ => return Ok(false),
        }
        if !layout(&self.json)?.iter().all(|s| s.key == KeyOf::New) {
            return Ok(false);
        }
        let digest_of = |flag: &str| -> Result<Option<String>> {
            let (id, _) = super::flagged_segment(&self.json, flag)?
                .ok_or_else(|| corrupt(format!("json: no segment is flagged {flag}")))?;
            super::digest_of_segment(&self.json, id)
        };
        let (Some(old), Some(new)) = (digest_of("backup-previous")?, digest_of("backup-final")?)
        else {
            return Ok(false);
        };
        let digests = self.digests()?;
        let find = |id: &str| digests.iter().find(|d| d.id == id);
        let (Some(old), Some(new)) = (find(&old), find(&new)) else {
            return Ok(false);
        };
        if self
            .unlock_digest(at.header(), passphrase, old, None)
            .is_ok()
        {
            // Both keys open: the run ends it, with the reencryption digest checked.
            return Ok(false);
        }
        self.unlock_digest(at.header(), passphrase, new, None)?;
        self.rekey_finish(at)?;
        Ok(true)
    }
}

/// Where the hotzone after `done` bytes of progress starts in the data area: right after
/// them forward, right before the last `done` bytes backward.
fn zone_start(p: &Plan, done: u64, hot: u64, total: u64) -> u64 {
    if p.direction == "backward" {
        total - done - hot
    } else {
        done
    }
}

/// The bytes of data left after a re-key moves a data area of `total` bytes (the old
/// segment `seg`) `shift` bytes on, into sectors of `sector` bytes: its last `shift` bytes
/// are dropped (cryptsetup's `--reduce-device-size`: the file system on it was shrunk).
fn shifted_total(
    total: u64,
    shift: u64,
    seg: &super::super::Segment,
    sector: usize,
) -> Result<u64> {
    let align = (seg.sector_size.max(sector) as u64).max(512);
    if shift == 0 || !shift.is_multiple_of(align) || shift > MAX_HOTZONE {
        return Err(Error::invalid(format!(
            "--reduce-device-size {shift}: a multiple of {align} bytes (the sector size), at \
             most 1 GiB"
        )));
    }
    if seg.size.is_some() {
        return Err(Error::unsupported(
            "moving a data segment of a fixed size (cryptsetup's --device-size): only a \
             segment to the end of the device moves",
        ));
    }
    total
        .checked_sub(shift)
        .filter(|&left| left >= shift)
        .ok_or_else(|| {
            Error::invalid(format!(
                "the data area has {total} bytes: reduced by {shift} it must keep at least \
                 {shift}"
            ))
        })
}

/// Bytes of the data area: the segment's size, or what the store holds past `offset`.
fn data_length(data: &dyn Store, offset: u64, size: Option<u64>) -> Result<u64> {
    let image = store::size(data)?;
    match size {
        Some(s) if offset.checked_add(s).is_some_and(|end| end <= image) => Ok(s),
        Some(s) => Err(Error::truncated(format!(
            "the data segment {offset}+{s} ends past the image's {image} bytes"
        ))),
        None => image.checked_sub(offset).ok_or_else(|| {
            Error::truncated(format!(
                "the data area starts at {offset} but the image has {image} bytes"
            ))
        }),
    }
}

/// A `pbkdf2` digest of `secret`.
pub(super) fn pbkdf2_digest(
    secret: &[u8],
    hash: HashAlg,
    iterations: u32,
    keyslots: Vec<String>,
    segments: Vec<String>,
) -> Result<Value> {
    let mut salt = [0u8; 32];
    crate::random(&mut salt)?;
    let mut out = vec![0u8; hash.output_len()];
    hash.pbkdf2(secret, &salt, iterations, &mut out);
    Ok(json!({
        "type": "pbkdf2",
        "keyslots": keyslots,
        "segments": segments,
        "hash": hash.name(),
        "iterations": iterations,
        "salt": B64.encode(salt),
        "digest": B64.encode(out),
    }))
}

/// The hotzone length: cryptsetup's for the resilience (what the area holds; 20 MiB
/// without resilience data), at most 1 GiB and a quarter of the memory, at most `asked`,
/// in whole `align` units.
fn hotzone_len(p: &Plan, r: Resilience, align: u64, asked: Option<u64>) -> Result<u64> {
    let base = match r {
        Resilience::None => NONE_HOTZONE,
        // Never over old data not yet read.
        Resilience::DataShift(shift) => shift,
        Resilience::Journal => p.area.1,
        Resilience::Checksum(h) => {
            let block = p.checksum.as_ref().map_or(align, |c| c.1 as u64);
            if !block.is_multiple_of(align) {
                return Err(corrupt(format!(
                    "json: the checksum block size {block} is not a multiple of the \
                     alignment {align}"
                )));
            }
            p.area.1 / h.output_len() as u64 * block
        }
    };
    let mut len = base.min(MAX_HOTZONE);
    if let Some(mem) = memory_bytes() {
        len = len.min(mem / 4);
    }
    if let Some(a) = asked {
        if a == 0 || a % align != 0 {
            return Err(Error::invalid(format!(
                "the hotzone size {a} is not a multiple of the alignment {align} bytes"
            )));
        }
        if r == Resilience::None {
            len = a.min(MAX_HOTZONE);
        } else {
            len = len.min(a);
        }
    }
    len -= len % align;
    if len == 0 {
        return Err(Error::invalid(format!(
            "the resilience area ({} bytes) holds less than one {align}-byte hotzone",
            p.area.1
        )));
    }
    Ok(len)
}

/// The machine's memory in bytes (`/proc/meminfo`), when known.
fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Where a run stands.
pub(super) struct Progress {
    /// The data offset (the new layout's).
    pub(super) offset: u64,
    /// The old layout's data offset: the same but in a re-key that moves the data.
    pub(super) source: u64,
    /// The hotzones go from the end to the start (`done` bytes are at the end).
    pub(super) backward: bool,
    pub(super) done: u64,
    pub(super) total: u64,
    pub(super) align: u64,
    pub(super) old: Side,
    pub(super) new: Side,
}

/// One side of a re-encryption: a layout, or plaintext (the old side of an encryption)
/// in sectors of the given size.
pub(super) enum Side {
    Crypt(Box<Layout>),
    Plain(usize),
}

impl Side {
    fn sector_size(&self) -> usize {
        match self {
            Side::Crypt(l) => l.sector_size(),
            Side::Plain(n) => *n,
        }
    }

    fn decrypt(&self, first: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            Side::Crypt(l) => l.decrypt(first, buf),
            Side::Plain(_) => Ok(()),
        }
    }

    fn encrypt(&self, first: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            Side::Crypt(l) => l.encrypt(first, buf),
            Side::Plain(_) => Ok(()),
        }
    }

    /// The layout, for an engine that serves the volume meanwhile: plaintext
    /// ([`Layout::plaintext`]) over the `total` bytes at `offset` for the plain side.
    pub(super) fn layout(self, offset: u64, total: u64) -> Result<Layout> {
        match self {
            Side::Crypt(l) => Ok(*l),
            Side::Plain(n) => Layout::plaintext(Geometry {
                sector_size: n,
                data_offset: offset,
                size: total - total % n as u64,
                iv: IvRule::Units512 { first: 0 },
                metadata: None,
            }),
        }
    }
}

/// Runs `f(chunk start, chunk buffer)` over the chunks of `[from, from + len)` on the
/// threads, each thread with one buffer of its own (wiped when done: it holds
/// plaintext for a moment); the first error wins.
pub(super) fn in_chunks(
    threads: usize,
    from: u64,
    len: u64,
    f: impl Fn(u64, &mut [u8]) -> Result<()> + Sync,
) -> Result<()> {
    let n = len.div_ceil(CHUNK) as usize;
    let next = AtomicUsize::new(0);
    let failed = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(n) {
            s.spawn(|| {
                let mut buf = Zeroizing::new(vec![0u8; CHUNK.min(len) as usize]);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || failed.lock().expect("no panic").is_some() {
                        break;
                    }
                    let at = from + i as u64 * CHUNK;
                    let l = CHUNK.min(from + len - at) as usize;
                    if let Err(e) = f(at, &mut buf[..l]) {
                        failed.lock().expect("no panic").get_or_insert(e);
                        break;
                    }
                }
            });
        }
    });
    match failed.into_inner().expect("no panic") {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The data passes over part of the data area: `[from, from + len)` in bytes of the data
/// area, in chunks on several threads.
pub(super) struct Pass<'a> {
    pub(super) data: &'a dyn Store,
    pub(super) old: &'a Side,
    pub(super) new: &'a Side,
    /// Where the old data is read from (the old layout's data offset).
    pub(super) source: u64,
    /// Where the new data is written (the new layout's data offset).
    pub(super) offset: u64,
    pub(super) threads: usize,
}

impl Pass<'_> {
    fn chunks(
        &self,
        from: u64,
        len: u64,
        f: impl Fn(u64, &mut [u8]) -> Result<()> + Sync,
    ) -> Result<()> {
        in_chunks(self.threads, from, len, f)
    }

    /// Reads, re-encrypts and writes `[from, from + len)`.
    pub(super) fn rewrite(&self, from: u64, len: u64) -> Result<()> {
        self.chunks(from, len, |at, buf| {
            store::read_exact(self.data, buf, self.source + at, "data")?;
            self.rewrite_from(at, buf)
        })
    }

    /// Re-encrypts `buf`, the old ciphertext of the data at `from`, and writes it there.
    pub(super) fn rewrite_from(&self, from: u64, buf: &mut [u8]) -> Result<()> {
        let (os, ns) = (self.old.sector_size() as u64, self.new.sector_size() as u64);
        self.old.decrypt(from / os, buf)?;
        self.new.encrypt(from / ns, buf)?;
        store::write_all(self.data, buf, self.offset + from, "data")
    }

    /// The hashes of the `block`-byte blocks of `[from, from + len)` as stored (the last
    /// may be shorter), in order.
    pub(super) fn hashes(&self, from: u64, len: u64, hash: HashAlg, block: u64) -> Result<Vec<u8>> {
        let hl = hash.output_len();
        let n = len.div_ceil(block) as usize;
        let out = Mutex::new(vec![0u8; n * hl]);
        self.chunks(from, len, |at, buf| {
            store::read_exact(self.data, buf, self.source + at, "data")?;
            let first = ((at - from) / block) as usize;
            let mut sums = vec![0u8; buf.len().div_ceil(block as usize) * hl];
            if hash == HashAlg::Sha256 {
                // Many blocks side by side on the SIMD lanes (the GELI tags' kernels).
                let blocks: Vec<&[u8]> = buf.chunks(block as usize).collect();
                let mut out = vec![[0u8; 32]; blocks.len()];
                sectorcrypt_crypto::mac::sha256_many(&blocks, &mut out)?;
                for (o, sum) in out.iter().zip(sums.chunks_mut(hl)) {
                    sum.copy_from_slice(o);
                }
            } else {
                for (b, sum) in buf.chunks(block as usize).zip(sums.chunks_mut(hl)) {
                    hash.digest_into(b, sum);
                }
            }
            out.lock().expect("no panic")[first * hl..first * hl + sums.len()]
                .copy_from_slice(&sums);
            Ok(())
        })?;
        Ok(out.into_inner().expect("no panic"))
    }
}

impl Luks2 {
    /// Turns a header just made for the data it will encrypt (one `crypt` segment, one
    /// digest, a keyslot; detached, data offset 0) into the start of an encryption in
    /// place, as `cryptsetup reencrypt --encrypt --header` leaves it: the data a `linear`
    /// segment, `backup-previous` that one, `backup-final` the crypt segment, the
    /// `reencrypt` keyslot in mode `encrypt`, the reencryption digest, the requirement.
    /// One header write.
    pub fn encrypt_init(
        &mut self,
        header: &dyn Store,
        key: &[u8],
        resilience: Resilience,
    ) -> Result<Keys> {
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?;
        let saved = self.json.clone();
        let result = self.build_encrypt(&seg, &digest.id, key, resilience);
        if let Err(e) = result.and_then(|_| self.write(header)) {
            self.json = saved;
            return Err(e);
        }
        Ok(Keys::from_parts(None, Some(key)))
    }

    fn build_encrypt(
        &mut self,
        seg: &super::super::Segment,
        digest: &str,
        key: &[u8],
        resilience: Resilience,
    ) -> Result<()> {
        let crypt = self.json["segments"][&seg.id].clone();
        let linear = json!({"type": "linear", "offset": seg.offset.to_string(), "size": "dynamic"});
        let mut previous = linear.clone();
        previous["flags"] = json!(["backup-previous"]);
        let mut last = crypt;
        last["flags"] = json!(["backup-final"]);
        self.json["segments"] = json!({"0": linear, "1": previous, "2": last});
        self.json["digests"][digest]["segments"] = json!(["2"]);
        let align = BLOCK.max(seg.sector_size as u64);
        let reenc_id = self.add_reencrypt_keyslot("encrypt", "forward", resilience, align)?;
        self.json["config"]["requirements"] = json!({"mandatory": [REQUIREMENT]});
        let (hash, iterations) = self.digest_cost(digest)?;
        self.seal_reencryption(reenc_id, hash, iterations, None, Some(key))?;
        self.check_fits(&self.json)
    }

    /// Starts decrypting a volume whose header is detached and whose data starts at
    /// offset 0, in place, as `cryptsetup reencrypt --decrypt --header HDR` does: the
    /// hotzones go backward from the end, each rewritten as plaintext; at the end the
    /// header has no keyslot and one `linear` segment, and the data device holds the
    /// plaintext alone. One header write; the data is not touched yet.
    pub fn decrypt_init(
        &mut self,
        at: Placement<'_>,
        passphrase: &[u8],
        resilience: Resilience,
        key_slot: Option<usize>,
    ) -> Result<Keys> {
        if state(&self.json)? != State::None {
            return Err(Error::invalid(
                "a reencryption is already in progress: resume it instead of starting a \
                 decryption",
            ));
        }
        self.check_supported()?;
        let seg = self.segment()?;
        if !matches!(at, Placement::Detached { .. }) || seg.offset != 0 {
            return Err(Error::unsupported(
                "decryption in place takes a detached header whose data starts at offset 0 \
                 (as cryptsetup's): the plaintext would otherwise be left behind the header \
                 in the image. Copy the plaintext out instead (sectorcrypt read IMAGE -o \
                 FILE)",
            ));
        }
        let digest = self.segment_digest(&seg)?;
        let (old_key, _) = self.unlock_digest(at.header(), passphrase, &digest, key_slot)?;
        let saved = self.json.clone();
        let result = self.build_decrypt(&seg, &digest.id, &old_key, resilience);
        if let Err(e) = result.and_then(|_| self.write(at.header())) {
            self.json = saved;
            return Err(e);
        }
        Ok(Keys::from_parts(Some(&old_key), None))
    }

    fn build_decrypt(
        &mut self,
        seg: &super::super::Segment,
        digest: &str,
        key: &[u8],
        resilience: Resilience,
    ) -> Result<()> {
        let crypt = self.json["segments"][&seg.id].clone();
        let mut previous = crypt.clone();
        previous["flags"] = json!(["backup-previous"]);
        let last = json!({
            "type": "linear",
            "offset": seg.offset.to_string(),
            "size": "dynamic",
            "flags": ["backup-final"],
        });
        self.json["segments"] = json!({"0": crypt, "1": previous, "2": last});
        self.json["digests"][digest]["segments"] = json!(["0", "1"]);
        let align = BLOCK.max(seg.sector_size as u64);
        let reenc_id = self.add_reencrypt_keyslot("decrypt", "backward", resilience, align)?;
        self.json["config"]["requirements"] = json!({"mandatory": [REQUIREMENT]});
        let (hash, iterations) = self.digest_cost(digest)?;
        self.seal_reencryption(reenc_id, hash, iterations, Some(key), None)?;
        self.check_fits(&self.json)
    }

    /// Adds the `reencrypt` keyslot (its area: the largest free gap of the keyslots
    /// area) and returns its id.
    pub(super) fn add_reencrypt_keyslot(
        &mut self,
        mode: &str,
        direction: &str,
        resilience: Resilience,
        align: u64,
    ) -> Result<usize> {
        let id = self.new_keyslot_id(None, None)?;
        let (offset, size) = match resilience {
            // Nothing is stored in a data shift's area: cryptsetup's one unit, in the first
            // gap.
            Resilience::DataShift(_) => (self.first_gap(SHIFT_AREA)?, SHIFT_AREA),
            _ => self.largest_gap()?,
        };
        let mut area = json!({
            "type": resilience.name(),
            "offset": offset.to_string(),
            "size": size.to_string(),
        });
        let least = match resilience {
            Resilience::DataShift(shift) => {
                area["shift_size"] = Value::String(shift.to_string());
                0
            }
            Resilience::Checksum(h) => {
                area["hash"] = Value::String(h.name().into());
                area["sector_size"] = json!(align);
                h.output_len() as u64
            }
            Resilience::Journal => align,
            Resilience::None => 0,
        };
        if size < least.max(1) {
            return Err(Error::invalid(format!(
                "the keyslots area has no free gap for the {} resilience data (the largest \
                 is {size} bytes): remove a keyslot, or use --resilience none",
                resilience.name()
            )));
        }
        self.json["keyslots"][id.to_string()] = json!({
            "type": "reencrypt",
            "key_size": 1,
            "mode": mode,
            "direction": direction,
            "area": area,
            "priority": 0,
        });
        Ok(id)
    }

    /// The first 4096-aligned gap of `len` bytes in the keyslots area (cryptsetup's
    /// `LUKS2_find_area_gap`).
    pub(super) fn first_gap(&self, len: u64) -> Result<u64> {
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

    /// The hash and iterations of digest `id` (those of the reencryption digest).
    pub(super) fn digest_cost(&self, id: &str) -> Result<(HashAlg, u32)> {
        let d = &self.json["digests"][id];
        let hash = HashAlg::parse(str_of(d, "hash", "digests.")?)?;
        let iterations = d["iterations"]
            .as_u64()
            .unwrap_or(1000)
            .min(u32::MAX as u64) as u32;
        Ok((hash, iterations))
    }

    /// Adds the reencryption digest of keyslot `slot` over the metadata as it stands
    /// (which must be final) and the keys.
    pub(super) fn seal_reencryption(
        &mut self,
        slot: usize,
        hash: HashAlg,
        iterations: u32,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<()> {
        let id = (0u32..)
            .map(|n| n.to_string())
            .find(|n| {
                !self.json["digests"]
                    .as_object()
                    .is_some_and(|m| m.contains_key(n))
            })
            .expect("a free id");
        let slot = slot.to_string();
        // A placeholder first, so that the input sees the final structure.
        self.json["digests"][&id] = json!({"type": "pbkdf2", "keyslots": [&slot], "segments": []});
        let data = verification_data(&self.json, old, new)?;
        self.json["digests"][&id] = pbkdf2_digest(&data, hash, iterations, vec![slot], vec![])?;
        Ok(())
    }
}
