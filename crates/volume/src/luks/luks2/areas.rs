//! LUKS2 keyslot areas: where new keyslot material goes and how keyslots are added and
//! removed.
//!
//! The keyslots area runs from the end of the two header copies to `2 * hdr_size +
//! keyslots_size`; each keyslot's material takes an area aligned to 4096 bytes, as
//! cryptsetup does. Adding a keyslot writes and syncs the material in an area no keyslot
//! names, then the metadata that names it; replacing one (change-key) keeps the keyslot
//! number, points it at the new area and wipes the old area only after the metadata
//! write. Removing a keyslot drops it from the metadata first, then wipes its area.
//! Moving keyslots (for a header restore) copies their material to free areas, syncs,
//! then writes the metadata that points at the copies.

use super::json::{kdf_json, obj, u64_str, AREA_ALIGN, MAX_KEYSLOTS};
use super::sizes::BIN_SIZE;
use super::Luks2;
use crate::error::{Error, KeyslotError, Result};
use crate::format::NewKeyslot;
use crate::kdf::KdfOptions;
use crate::luks::af;
use crate::luks::fields::align_up;
use crate::luks::keyslot::{cipher_spec, seal_material};
use crate::store::{self, Store};
use serde_json::{json, Value};
use zeroize::Zeroizing;

/// A keyslot sealed in memory ([`Luks2::seal_keyslot`]).
pub(super) struct Sealed {
    /// Its JSON.
    pub(super) json: Value,
    /// Its area.
    pub(super) offset: u64,
    /// The encrypted material for the area.
    pub(super) material: Zeroizing<Vec<u8>>,
}

/// The area (offset, size) a keyslot's JSON names.
fn area_of(keyslot: &Value) -> Result<Option<(u64, u64)>> {
    match keyslot.get("area") {
        Some(area) => Ok(Some((
            u64_str(area, "offset", "area.")?,
            u64_str(area, "size", "area.")?,
        ))),
        None => Ok(None),
    }
}

impl Luks2 {
    /// The areas (offset, size) the keyslots name.
    pub(super) fn areas(&self) -> Result<Vec<(u64, u64)>> {
        let mut used = Vec::new();
        for ks in obj(&self.json, "keyslots", "")?.values() {
            used.extend(area_of(ks)?);
        }
        Ok(used)
    }

    /// The first gap of `need` bytes in the keyslots area outside `avoid` ((offset, size)
    /// pairs) and the areas of every keyslot (the one being replaced included: areas are
    /// in use until the header no longer names them).
    fn free_area(&self, need: u64, avoid: &[(u64, u64)]) -> Result<u64> {
        let mut used = self.areas()?;
        used.extend_from_slice(avoid);
        used.sort();
        let start = 2 * self.bin.hdr_size;
        let end = start + self.keyslots_size();
        let mut pos = start;
        for (off, size) in used {
            if pos + need <= off {
                break;
            }
            pos = pos.max(align_up(off + size, AREA_ALIGN));
        }
        if pos + need > end {
            return Err(KeyslotError::NoFree(
                "the keyslots area has no room for another keyslot".into(),
            )
            .into());
        }
        Ok(pos)
    }

    /// The keyslot number a new keyslot takes: `replace`'s, `slot` when free, else the
    /// lowest free one.
    pub(super) fn new_keyslot_id(
        &self,
        slot: Option<usize>,
        replace: Option<usize>,
    ) -> Result<usize> {
        let taken: Vec<usize> = obj(&self.json, "keyslots", "")?
            .keys()
            .filter_map(|k| k.parse().ok())
            .collect();
        Ok(match (replace, slot) {
            (Some(r), _) => r,
            (None, Some(n)) if n >= MAX_KEYSLOTS => {
                return Err(Error::invalid(format!(
                    "keyslot {n} is out of range (0 to {})",
                    MAX_KEYSLOTS - 1
                )))
            }
            (None, Some(n)) if taken.contains(&n) => {
                return Err(KeyslotError::NoFree(format!("keyslot {n} is in use")).into())
            }
            (None, Some(n)) => n,
            (None, None) => (0..MAX_KEYSLOTS)
                .find(|n| !taken.contains(n))
                .ok_or_else(|| {
                    KeyslotError::NoFree(format!("all {MAX_KEYSLOTS} keyslots are in use"))
                })?,
        })
    }

    /// Writes the keyslot `new` (its key already verified) and records it. With
    /// `replace`, that keyslot id is taken over (change-key) and its old area wiped after
    /// the header write. Returns the keyslot id.
    pub(super) fn write_keyslot(
        &mut self,
        store: &dyn Store,
        new: &NewKeyslot<'_>,
        replace: Option<usize>,
    ) -> Result<usize> {
        self.check_supported()?;
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?;
        let id = self.new_keyslot_id(new.slot, replace)?;
        let (key, opts) = (new.key, new.kdf);
        let old_area = match replace {
            Some(r) => area_of(&self.json["keyslots"][r.to_string()])?,
            None => None,
        };
        let sealed = self.seal_keyslot(store, key, new.passphrase, opts, &seg.encryption, &[])?;
        let mut json = self.json.clone();
        json["keyslots"][id.to_string()] = sealed.json;
        let list = json["digests"][&digest.id]["keyslots"]
            .as_array_mut()
            .expect("validated");
        if !list.iter().any(|v| v.as_str() == Some(&id.to_string())) {
            list.push(Value::String(id.to_string()));
        }
        self.check_fits(&json)?;
        // The material first, in an area no keyslot uses; then the metadata that points
        // at it.
        store::write_all(store, &sealed.material, sealed.offset, "keyslot area")?;
        store::sync(store)?;
        self.json = json;
        self.write(store)?;
        if let Some((off, size)) = old_area {
            store::wipe(store, off, size, true)?;
            store::sync(store)?;
        }
        Ok(id)
    }

    /// A `luks2` keyslot holding `key` for `passphrase`, sealed in memory: its JSON and
    /// its material for the first free area (outside the keyslots' areas and `avoid`),
    /// with `encryption` as its area cipher. Nothing is written.
    pub(super) fn seal_keyslot(
        &self,
        store: &dyn Store,
        key: &[u8],
        passphrase: &[u8],
        opts: &KdfOptions,
        encryption: &str,
        avoid: &[(u64, u64)],
    ) -> Result<Sealed> {
        let area_key_size = key.len();
        cipher_spec(encryption, area_key_size)?;
        let need = align_up((key.len() * af::STRIPES) as u64, AREA_ALIGN);
        let offset = self.free_area(need, avoid)?;
        let image = store::size(store)?;
        if offset + need > image {
            return Err(Error::truncated(format!(
                "the new keyslot area {offset}+{need} lies beyond the end of the image \
                 ({image} bytes)"
            )));
        }
        let kdf = opts.resolve(area_key_size)?;
        let (salt, material) =
            seal_material(passphrase, key, &kdf, encryption, area_key_size, opts.hash)?;
        let json = json!({
            "type": "luks2",
            "key_size": key.len(),
            "af": {"type": "luks1", "stripes": af::STRIPES, "hash": opts.hash.name()},
            "area": {
                "type": "raw",
                "offset": offset.to_string(),
                "size": need.to_string(),
                "encryption": encryption,
                "key_size": area_key_size,
            },
            "kdf": kdf_json(&kdf, &salt),
        });
        Ok(Sealed {
            json,
            offset,
            material,
        })
    }

    /// Removes keyslots (`None`: all of them) from the metadata, writes it, then wipes
    /// their areas (all of them: the whole keyslots area).
    pub(super) fn drop_keyslots(&mut self, store: &dyn Store, which: Option<usize>) -> Result<()> {
        self.check_supported()?;
        let ids: Vec<String> = match which {
            Some(n) => {
                if self.json["keyslots"].get(n.to_string()).is_none() {
                    return Err(KeyslotError::NotActive(n).into());
                }
                vec![n.to_string()]
            }
            None => obj(&self.json, "keyslots", "")?.keys().cloned().collect(),
        };
        let mut areas = Vec::new();
        let mut json = self.json.clone();
        for id in &ids {
            areas.extend(area_of(&json["keyslots"][id])?);
            json["keyslots"]
                .as_object_mut()
                .expect("validated")
                .remove(id);
            for section in ["digests", "tokens"] {
                let Some(entries) = json.get_mut(section).and_then(Value::as_object_mut) else {
                    continue;
                };
                for entry in entries.values_mut() {
                    if let Some(list) = entry.get_mut("keyslots").and_then(Value::as_array_mut) {
                        list.retain(|v| v.as_str() != Some(id));
                    }
                }
            }
        }
        self.json = json;
        self.write(store)?;
        if which.is_none() {
            areas = vec![(2 * self.bin.hdr_size, self.keyslots_size())];
        }
        for (off, size) in areas {
            store::wipe(store, off, size, true)?;
        }
        store::sync(store)
    }

    /// Moves every keyslot whose area overlaps `ranges` ((offset, length) pairs) to a free
    /// area outside them: the material is copied and synced, then the metadata points at
    /// the copies. The old areas are left as they are. Nothing is written when there is
    /// no room for them all.
    pub(super) fn move_keyslots(&mut self, store: &dyn Store, ranges: &[(u64, u64)]) -> Result<()> {
        self.check_supported()?;
        let hits = |off: u64, size: u64| {
            ranges
                .iter()
                .any(|&(r, len)| off < r.saturating_add(len) && r < off.saturating_add(size))
        };
        let mut avoid = ranges.to_vec();
        let mut moves = Vec::new();
        for (id, ks) in obj(&self.json, "keyslots", "")? {
            let Some((from, size)) = area_of(ks)? else {
                continue;
            };
            if hits(from, size) {
                let to = self.free_area(size, &avoid)?;
                avoid.push((to, size));
                moves.push((id.clone(), from, to, size));
            }
        }
        if moves.is_empty() {
            return Ok(());
        }
        let image = store::size(store)?;
        let mut json = self.json.clone();
        for (id, _, to, size) in &moves {
            if to + size > image {
                return Err(Error::truncated(format!(
                    "the keyslot area {to}+{size} lies beyond the end of the image ({image} bytes)"
                )));
            }
            json["keyslots"][id]["area"]["offset"] = Value::String(to.to_string());
        }
        self.check_fits(&json)?;
        for (_, from, to, size) in &moves {
            store::copy(store, *from, store, *to, *size, "keyslot area")?;
        }
        store::sync(store)?;
        self.json = json;
        self.write(store)
    }

    /// Refuses metadata that would not fit the JSON area.
    pub(super) fn check_fits(&self, json: &Value) -> Result<()> {
        let text = serde_json::to_vec(json).map_err(|e| Error::invalid(e.to_string()))?;
        let room = self.bin.hdr_size as usize - BIN_SIZE;
        if text.len() >= room {
            return Err(KeyslotError::NoFree(format!(
                "the metadata would take {} bytes; the json area holds {}",
                text.len(),
                room - 1
            ))
            .into());
        }
        Ok(())
    }
}
