//! LUKS2 (cryptsetup's "LUKS2 On-Disk Format Specification", version 1.1.x).
//!
//! - `copies.rs`: the two binary header copies, their checksums, which copy wins, the
//!   ordered write of both, rebuilding a bad copy from the good one;
//! - `validate.rs`: the checks the metadata must pass (cryptsetup's, each a
//!   [`Rule`]);
//! - `json.rs`: typed views of the metadata ([`Segment`], [`Keyslot`], [`Digest`]);
//! - `areas.rs`: keyslot areas, adding and removing keyslots;
//! - `reencrypt.rs`: the metadata of a reencryption in progress (its requirement
//!   version and the reencryption digest, checked against the volume keys);
//! - `salvage.rs`: what `dump` still shows of a header that failed its checks;
//! - `sizes.rs`: the sizes of a header copy (a leaf the others share);
//! - this file: the header as a whole, unlocking, the [`Format`] interface and what
//!   `dump` shows.
//!
//! sectorcrypt opens volumes with one `crypt` segment and `luks2` keyslots (PBKDF2 or
//! Argon2, the `luks1` anti-forensic splitter); it refuses, with the reason, volumes whose
//! metadata lists mandatory requirements (an unfinished reencryption), integrity
//! protection or several segments. The IV rule is [`IvRule::Units512`] from the segment's
//! `iv_tweak`: LUKS2 metadata has no large-IV flag and cryptsetup never sets dm-crypt's
//! `iv_large_sectors` for LUKS2, so IVs count 512-byte units for 4096-byte sectors too
//! (checked against volumes cryptsetup encrypted, in the tests).

mod areas;
mod copies;
mod json;
pub mod reencrypt;
mod salvage;
mod sizes;
mod validate;

pub use json::{Digest, Keyslot, Segment, MAX_KEYSLOTS, MAX_KEYSLOTS_SIZE};
pub use sizes::{BIN_SIZE, HDR_SIZES};

use super::keyslot::{try_keyslots, Material};
use super::magic::Magic;
use super::rules::Rule;
use copies::{Binary, Found};
use json::{id_list_text, keyslot_kdf, obj};

use crate::error::{Error, Result};
use crate::format::dump::{Field, Item, Report, Section};
use crate::format::{
    no_keyslot, Detected, Driver, Format, NewKeyslot, Piece, Probe, Unlocked, VolumeInfo,
};
use crate::hash::HashAlg;
use crate::kdf::{Kdf, KdfKind};
use crate::layout::IvRule;
use crate::store::{self, Store};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};
use std::any::Any;
use zeroize::Zeroizing;

/// A parsed LUKS2 header (both copies' state and the metadata of the newer valid one).
pub struct Luks2 {
    bin: Binary,
    salts: [[u8; 64]; 2],
    json: Value,
    /// The JSON area of the copy the metadata came from, as it is on disk: what a bad
    /// copy is rebuilt from.
    area: Vec<u8>,
    /// Whether each copy (primary, secondary) is valid and current.
    current: [bool; 2],
    /// Why a copy was not used, for `dump`.
    damage: Vec<String>,
    /// Keyslots whose KDF leftovers were dropped when reading, for `dump`.
    fixed: Vec<String>,
    /// Why the header cannot be used at all (only in what `dump` salvages).
    problems: Vec<String>,
}

impl std::fmt::Debug for Luks2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Luks2")
            .field("uuid", &self.bin.uuid)
            .field("seqid", &self.bin.seqid)
            .field("hdr_size", &self.bin.hdr_size)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

/// What [`Luks2::format`] needs.
pub(crate) struct FormatParams<'a> {
    pub(crate) cipher: &'a str,
    pub(crate) volume_key: &'a [u8],
    pub(crate) sector_size: usize,
    pub(crate) label: &'a str,
    pub(crate) uuid: &'a str,
    pub(crate) data_offset: u64,
    /// Bytes of the two header copies and the keyslot area (the data offset, unless the
    /// header is detached).
    pub(crate) metadata_size: u64,
    pub(crate) digest_iterations: u32,
    pub(crate) hash: HashAlg,
}

/// The format's name.
pub const NAME: &str = "luks2";

/// The encryption sector sizes LUKS2 allows.
pub const SECTOR_SIZES: [usize; 4] = [512, 1024, 2048, 4096];

/// The KDFs of LUKS2 keyslots, cryptsetup's default first.
pub(crate) const KDF_KINDS: &[KdfKind] = &[KdfKind::Argon2id, KdfKind::Argon2i, KdfKind::Pbkdf2];

/// Recognises LUKS2: the LUKS magic at the start (any version but 1, which LUKS1 took) or a
/// secondary header copy at one of the allowed offsets.
fn detect(p: &Probe<'_>) -> Detected {
    let n = p.head.len();
    let prefix = |m: Magic| p.head == &m.primary()[..n];
    if n < 6 && n != 0 && (prefix(Magic::Luks) || prefix(Magic::RbdClone)) {
        return Some(Err(Error::truncated(
            "the image ends inside the luks header",
        )));
    }
    let copies = copies::read_both(p.store)?;
    Some(
        copies::choose(copies, p.size)
            .and_then(|found| Luks2::from_found(found, p.size))
            .map(|h| Box::new(h) as Box<dyn Format>),
    )
}

/// The registration of LUKS2 in [`crate::formats::FORMATS`].
pub(crate) const DRIVER: Driver = Driver {
    name: NAME,
    detect,
    salvage: salvage::salvage,
};

impl Luks2 {
    /// The header of the copy reading chose, once the image is known to hold its header
    /// copies and keyslots area (cryptsetup's "Device too small" otherwise).
    fn from_found(found: Found, image: u64) -> Result<Luks2> {
        let chosen = found.chosen;
        let h = Luks2 {
            bin: chosen.bin,
            salts: [chosen.salt; 2],
            json: chosen.json.expect("a valid copy has metadata"),
            area: chosen.area,
            current: found.current,
            damage: found.damage,
            fixed: chosen.fixed,
            problems: Vec::new(),
        };
        let need = h.metadata_size();
        if image < need {
            return Err(Rule::DeviceTooSmall.broken(format!(
                "the image has {image} bytes; its two {}-byte header copies and {}-byte \
                 keyslots area need {need}",
                h.bin.hdr_size,
                h.keyslots_size()
            )));
        }
        Ok(h)
    }

    /// A new header in memory (nothing written): one crypt segment, one digest, no keyslot.
    pub(crate) fn format(p: &FormatParams<'_>) -> Result<Luks2> {
        let hdr_size = HDR_SIZES[0];
        let keyslots_size = p
            .metadata_size
            .checked_sub(2 * hdr_size)
            .ok_or_else(|| Error::invalid("the data offset leaves no room for the metadata"))?
            .min(MAX_KEYSLOTS_SIZE);
        let mut salt = vec![0u8; 32];
        crate::random(&mut salt)?;
        let mut digest = vec![0u8; p.hash.output_len()];
        p.hash
            .pbkdf2(p.volume_key, &salt, p.digest_iterations, &mut digest);
        let json = json!({
            "keyslots": {},
            "tokens": {},
            "segments": {"0": {
                "type": "crypt",
                "offset": p.data_offset.to_string(),
                "size": "dynamic",
                "iv_tweak": "0",
                "encryption": p.cipher,
                "sector_size": p.sector_size,
            }},
            "digests": {"0": {
                "type": "pbkdf2",
                "keyslots": [],
                "segments": ["0"],
                "hash": p.hash.name(),
                "iterations": p.digest_iterations,
                "salt": B64.encode(&salt),
                "digest": B64.encode(&digest),
            }},
            "config": {
                "json_size": (hdr_size - BIN_SIZE as u64).to_string(),
                "keyslots_size": keyslots_size.to_string(),
            },
        });
        let mut salts = [[0u8; 64]; 2];
        crate::random(&mut salts[0])?;
        crate::random(&mut salts[1])?;
        // The label field is 48 bytes, NUL-terminated.
        if p.label.len() > 47 || p.label.contains('\0') {
            return Err(Error::invalid(format!(
                "the label is {} bytes; at most 47 bytes, without NUL characters",
                p.label.len()
            )));
        }
        Ok(Luks2 {
            bin: Binary {
                magic: Magic::Luks,
                hdr_size,
                seqid: 0,
                label: p.label.to_string(),
                subsystem: String::new(),
                csum_alg: "sha256".into(),
                uuid: p.uuid.to_string(),
            },
            salts,
            json,
            area: Vec::new(),
            current: [false, false],
            damage: Vec::new(),
            fixed: Vec::new(),
            problems: Vec::new(),
        })
    }

    /// Tries the keyslots bound to `digest` (priority high, then normal; `ignore` ones
    /// only when asked for by number): the volume key `digest` was made of and the
    /// keyslot that opened.
    pub(super) fn unlock_digest(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        digest: &Digest,
        only: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        let priority = |id: usize| {
            self.json["keyslots"][id.to_string()]["priority"]
                .as_i64()
                .unwrap_or(1)
        };
        let mut slots = Vec::new();
        let mut unusable = None;
        for (id, state) in self.keyslot_states() {
            let wanted = match only {
                Some(n) => id == n,
                None => priority(id) > 0,
            };
            if !wanted || !digest.keyslots.contains(&id) {
                continue;
            }
            match state {
                Ok(ks) => slots.push(ks),
                Err(e) => {
                    unusable.get_or_insert(e);
                }
            }
        }
        if slots.is_empty() {
            return Err(unusable.unwrap_or_else(|| no_keyslot(only)));
        }
        slots.sort_by_key(|k| (-k.priority, k.id));
        let candidates = slots.iter().map(|ks| {
            let material = Material {
                kdf: ks.kdf,
                salt: &ks.salt,
                area_offset: ks.area_offset,
                area_encryption: &ks.area_encryption,
                area_key_size: ks.area_key_size,
                key_size: ks.key_size,
                stripes: ks.stripes,
                af_hash: ks.af_hash,
            };
            (ks.id, material)
        });
        try_keyslots(store, passphrase, candidates, |key| Ok(digest.verify(key)))
    }

    /// A header of `json` (16 KiB copies, new salts, sequence id `seqid`, no label) in
    /// memory, for a conversion from LUKS1; [`Luks2::new_copies`] validates it.
    pub(crate) fn from_json(json: Value, uuid: &str, seqid: u64) -> Result<Luks2> {
        let mut salts = [[0u8; 64]; 2];
        crate::random(&mut salts[0])?;
        crate::random(&mut salts[1])?;
        Ok(Luks2 {
            bin: Binary {
                magic: Magic::Luks,
                hdr_size: HDR_SIZES[0],
                seqid,
                label: String::new(),
                subsystem: String::new(),
                csum_alg: "sha256".into(),
                uuid: uuid.to_string(),
            },
            salts,
            json,
            area: Vec::new(),
            current: [false, false],
            damage: Vec::new(),
            fixed: Vec::new(),
            problems: Vec::new(),
        })
    }

    /// The metadata JSON.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// Volume UUID.
    pub fn uuid(&self) -> &str {
        &self.bin.uuid
    }

    /// cryptsetup's magic, or librbd's layered-clone magic.
    pub fn magic(&self) -> Magic {
        self.bin.magic
    }

    /// Label.
    pub fn label(&self) -> &str {
        &self.bin.label
    }

    /// Subsystem.
    pub fn subsystem(&self) -> &str {
        &self.bin.subsystem
    }

    /// The sequence id (cryptsetup's "epoch").
    pub fn seqid(&self) -> u64 {
        self.bin.seqid
    }

    /// Size of one header copy.
    pub fn hdr_size(&self) -> u64 {
        self.bin.hdr_size
    }

    /// Bytes of metadata and keyslot areas at the start of the image (what a header
    /// backup holds).
    pub fn metadata_size(&self) -> u64 {
        2 * self.bin.hdr_size + self.keyslots_size()
    }

    /// Whether the primary copy is valid and the newer one (or as new as the secondary).
    pub(crate) fn primary_current(&self) -> bool {
        self.current[0]
    }

    /// Problems found while reading.
    pub fn damage(&self) -> &[String] {
        &self.damage
    }

    /// The keyslots section of `dump`.
    fn keyslot_items(&self) -> Vec<Item> {
        let Some(keyslots) = self.json["keyslots"].as_object() else {
            return Vec::new();
        };
        let mut items = Vec::new();
        for (id, ks) in keyslots {
            let kdf = &ks["kdf"];
            let priority = match ks["priority"].as_i64() {
                Some(0) => "ignore",
                Some(2) => "high",
                _ => "normal",
            };
            let area = |fields: &mut Vec<Field>| {
                fields.extend([
                    Field::new(
                        "Area offset",
                        format!("{} [bytes]", text(&ks["area"]["offset"])),
                    ),
                    Field::new(
                        "Area length",
                        format!("{} [bytes]", text(&ks["area"]["size"])),
                    ),
                ])
            };
            if ks["type"].as_str() == Some("reencrypt") {
                // No key, no KDF: what the re-encryption does and how it is protected
                // (cryptsetup's luksDump shows the same).
                let mut fields = vec![
                    Field::new(
                        "Key",
                        format!("{} bits", ks["key_size"].as_u64().unwrap_or(0) * 8),
                    ),
                    Field::new("Priority", "ignored"),
                    Field::new("Mode", text(&ks["mode"])),
                    Field::new("Direction", text(&ks["direction"])),
                    Field::new("Resilience", text(&ks["area"]["type"])),
                ];
                let a = &ks["area"];
                if a.get("hash").is_some() {
                    fields.push(Field::new("Hash", text(&a["hash"])));
                    fields.push(Field::new(
                        "Hash data",
                        format!("{} [bytes]", a["sector_size"]),
                    ));
                }
                if a.get("shift_size").is_some() {
                    fields.push(Field::new(
                        "Shift size",
                        format!("{} [bytes]", text(&a["shift_size"])),
                    ));
                }
                area(&mut fields);
                items.push(Item {
                    id: id.clone(),
                    kind: "reencrypt (unbound)".into(),
                    fields,
                });
                continue;
            }
            let mut fields = vec![
                Field::new(
                    "Key",
                    format!("{} bits", ks["key_size"].as_u64().unwrap_or(0) * 8),
                ),
                Field::new("Priority", priority),
                Field::new("Cipher", text(&ks["area"]["encryption"])),
                Field::new("PBKDF", text(&kdf["type"])),
            ];
            if kdf["type"].as_str() == Some("pbkdf2") {
                fields.push(Field::new("Hash", text(&kdf["hash"])));
                fields.push(Field::new("Iterations", &kdf["iterations"]));
            } else {
                fields.push(Field::new("Time cost", &kdf["time"]));
                fields.push(Field::new("Memory", &kdf["memory"]));
                fields.push(Field::new("Threads", &kdf["cpus"]));
            }
            fields.extend([
                Field::new("AF stripes", &ks["af"]["stripes"]),
                Field::new("AF hash", text(&ks["af"]["hash"])),
            ]);
            area(&mut fields);
            if ks["type"].as_str() == Some("luks2") {
                if let Err(e) = json::keyslot(id, ks) {
                    fields.push(Field::new("Unusable", e));
                }
            }
            items.push(Item {
                id: id.clone(),
                kind: text(&ks["type"]).into(),
                fields,
            });
        }
        items
    }

    /// The items of the JSON section `name` (segments, tokens, digests) for `dump`.
    fn section_items(&self, name: &str, fields: impl Fn(&Value) -> Vec<Field>) -> Vec<Item> {
        self.json[name]
            .as_object()
            .map(|entries| {
                entries
                    .iter()
                    .map(|(id, v)| Item {
                        id: id.clone(),
                        kind: text(&v["type"]).into(),
                        fields: fields(v),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A JSON string field for `dump`, `?` when absent.
fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}

/// A section of `dump`'s LUKS2 layout.
fn section(title: &'static str, blank_before: bool, items: Vec<Item>) -> Section {
    Section {
        title: Some(title),
        blank_before,
        item_prefix: "  ",
        value_column: 12,
        items,
    }
}

impl Format for Luks2 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn uuid(&self) -> Option<&str> {
        Some(&self.bin.uuid)
    }

    fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok(self.keyslot_states().iter().map(|(id, _)| *id).collect())
    }

    fn keyslot_area(&self, slot: usize) -> Option<(u64, u64)> {
        let area = &self.json["keyslots"][slot.to_string()]["area"];
        let num = |k: &str| area[k].as_str()?.parse().ok();
        Some((num("offset")?, num("size")?))
    }

    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        keyslot_kdf(&self.json["keyslots"][slot.to_string()], slot)
    }

    fn kdf_kinds(&self) -> &'static [KdfKind] {
        KDF_KINDS
    }

    /// Tries the keyslots (priority high, then normal; `ignore` ones only when asked for by
    /// number) and returns the volume key and the keyslot that opened. A keyslot that
    /// cannot be used here (an unknown KDF or hash, say) is passed over: the others are
    /// tried. When none could be tried, the first one's reason is the error.
    fn unlock_key(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        only: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        self.check_supported()?;
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?;
        self.unlock_digest(store, passphrase, &digest, only)
    }

    /// What an open volume looks like for the sector engine.
    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        super::unlocked(self, store, key, keyslot)
    }

    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        let seg = self.segment()?;
        let image = store::size(store)?;
        let data_size = match seg.size {
            Some(s) => match seg.offset.checked_add(s) {
                Some(end) if end <= image => s,
                end => {
                    return Err(Error::truncated(format!(
                        "the data segment {}+{s} ends at {} but the image has {image} bytes",
                        seg.offset,
                        end.map_or("beyond 2^64".to_string(), |e| e.to_string())
                    )))
                }
            },
            None => image.checked_sub(seg.offset).ok_or_else(|| {
                Error::truncated(format!(
                    "the data area starts at {} but the image has {image} bytes",
                    seg.offset
                ))
            })?,
        };
        Ok(VolumeInfo {
            cipher: seg.encryption.clone(),
            sector_size: seg.sector_size,
            iv: IvRule::Units512 {
                first: seg.iv_tweak,
            },
            data_offset: seg.offset,
            data_size: data_size / seg.sector_size as u64 * seg.sector_size as u64,
        })
    }

    /// Whether `key` matches the volume key digest.
    fn verify_key(&self, key: &[u8]) -> Result<bool> {
        let seg = self.segment()?;
        Ok(self.segment_digest(&seg)?.verify(key))
    }

    fn add_keyslot(&mut self, store: &dyn Store, new: &NewKeyslot<'_>) -> Result<usize> {
        self.write_keyslot(store, new, None)
    }

    /// Keeps the keyslot number: new material in a free area, then the metadata, then the
    /// old area is wiped.
    fn change_keyslot(
        &mut self,
        store: &dyn Store,
        old: usize,
        new: &NewKeyslot<'_>,
    ) -> Result<usize> {
        self.write_keyslot(store, new, Some(old))
    }

    fn remove_keyslots(&mut self, store: &dyn Store, slot: Option<usize>) -> Result<()> {
        self.drop_keyslots(store, slot)
    }

    fn needs_repair(&self) -> bool {
        !(self.current[0] && self.current[1])
    }

    /// Rebuilds the copies that are not current from the good one (never a guess: a
    /// header with no valid copy is not read at all).
    fn repair(&mut self, store: &dyn Store) -> Result<Vec<String>> {
        // The copies of a volume in re-encryption are rebuilt too (its metadata passed
        // the checks when read); other requirements are refused.
        if reencrypt::state(&self.json)? == reencrypt::State::None {
            self.check_supported()?;
        }
        self.rebuild_copies(store)
    }

    /// Keyslot areas first (no header points at them yet), then the secondary copy, then
    /// the primary: a crash leaves the old header, or a new copy with its keyslots in place.
    fn backup_pieces(&self, _image_size: u64) -> Vec<Piece> {
        let hs = self.bin.hdr_size;
        let len = self.metadata_size();
        Piece::in_place(&[(2 * hs, len - 2 * hs), (hs, hs), (0, hs)])
    }

    /// The areas every keyslot names (whatever its type: its material is there).
    fn keyslot_areas(&self) -> Vec<(u64, u64)> {
        self.areas().unwrap_or_default()
    }

    fn vacate(&mut self, store: &dyn Store, ranges: &[(u64, u64)]) -> Result<()> {
        self.move_keyslots(store, ranges)
    }

    fn report(&self) -> Report {
        let b = &self.bin;
        let config = &self.json["config"];
        let flags = id_list_text(&config["flags"]);
        let mut fields = vec![
            Field::new("Version", 2),
            Field::new("Epoch", b.seqid),
            Field::new("Metadata area", format!("{} [bytes]", b.hdr_size)),
            Field::new("Keyslots area", format!("{} [bytes]", self.keyslots_size())),
            Field::new("UUID", &b.uuid),
            Field::new(
                "Label",
                if b.label.is_empty() {
                    "(no label)"
                } else {
                    b.label.as_str()
                },
            ),
            Field::new(
                "Flags",
                if flags.is_empty() {
                    "(no flags)".into()
                } else {
                    flags
                },
            ),
        ];
        if b.magic != Magic::Luks {
            fields.insert(0, Field::new("Magic", b.magic.describe()));
        }
        if config["requirements"]["mandatory"].is_array() {
            let req = id_list_text(&config["requirements"]["mandatory"]);
            fields.push(Field::new("Requirements", req));
        }
        for d in &self.damage {
            fields.push(Field::new(
                "Warning",
                format!("{d} (rebuilt by repair or the next write)"),
            ));
        }
        for id in &self.fixed {
            fields.push(Field::new(
                "Warning",
                format!("keyslot {id}: fields its kdf does not take are ignored (dropped on the next write)"),
            ));
        }
        for p in &self.problems {
            fields.push(Field::new("Problem", p));
        }
        if let Err(e) = self.check_supported() {
            fields.push(Field::new("Warning", e));
        }
        let segments = self.section_items("segments", |seg| {
            let length = match seg["size"].as_str() {
                Some("dynamic") => "(whole device)".to_string(),
                Some(x) => format!("{x} [bytes]"),
                None => "?".into(),
            };
            let mut fields = vec![
                Field::new("offset", format!("{} [bytes]", text(&seg["offset"]))),
                Field::new("length", length),
            ];
            // A linear segment (plaintext, during an encryption or after a decryption)
            // has no cipher and no sector size; cryptsetup shows neither.
            if seg["type"] != "linear" {
                fields.push(Field::new("cipher", text(&seg["encryption"])));
                fields.push(Field::new(
                    "sector",
                    format!("{} [bytes]", seg["sector_size"]),
                ));
            }
            if let Some(flags) = seg["flags"].as_array().filter(|f| !f.is_empty()) {
                fields.push(Field::new(
                    "flags",
                    id_list_text(&Value::Array(flags.clone())),
                ));
            }
            fields
        });
        let tokens = self.section_items("tokens", |t| {
            vec![Field::new("Keyslots", id_list_text(&t["keyslots"]))]
        });
        let digests = self.section_items("digests", |d| {
            vec![
                Field::new("Hash", text(&d["hash"])),
                Field::new("Iterations", &d["iterations"]),
                Field::new("Keyslots", id_list_text(&d["keyslots"])),
                Field::new("Segments", id_list_text(&d["segments"])),
            ]
        });
        let mut sections = vec![
            Section {
                value_column: 8,
                ..section("Data segments:", true, segments)
            },
            section("Keyslots:", true, self.keyslot_items()),
            section("Tokens:", false, tokens),
        ];
        if obj(&self.json, "digests", "").is_ok() {
            sections.push(section("Digests:", false, digests));
        }
        Report {
            title: "LUKS header information",
            blank_after_title: false,
            value_column: 16,
            fields,
            blank_after_fields: false,
            sections,
        }
    }

    /// LUKS2's own JSON document.
    fn to_json(&self) -> Value {
        self.json.clone()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::json::u64_str;
    use super::*;

    #[test]
    fn keyslots_size_is_read_from_config() {
        let key = [7u8; 64];
        let h = Luks2::format(&FormatParams {
            cipher: "aes-xts-plain64",
            volume_key: &key,
            sector_size: 512,
            label: "",
            uuid: "u",
            data_offset: 1 << 20,
            metadata_size: 1 << 20,
            digest_iterations: 1000,
            hash: HashAlg::Sha256,
        })
        .unwrap();
        assert_eq!(h.keyslots_size(), (1 << 20) - 2 * HDR_SIZES[0]);
        assert_eq!(u64_str(&h.json["config"], "json_size", "").unwrap(), 12288);
    }
}
