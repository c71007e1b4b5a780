//! The checks a LUKS2 metadata document must pass before anything in it is used: the
//! structure cryptsetup's validation enforces, in the same order (requirements, tokens,
//! digests, segments, keyslots, config, keyslot areas, size, keyslot kinds), so that a
//! header is refused for the same reason cryptsetup would give. Each failure names its
//! [`Rule`].
//!
//! Before the checks, [`repair_kdf_leftovers`] drops the parameters a keyslot's KDF does
//! not take (an Argon2 keyslot's `iterations` and `hash`, a PBKDF2 keyslot's `time`,
//! `memory` and `cpus`), as cryptsetup does in memory: older versions left them behind
//! when a keyslot changed its KDF. Numbers stored as strings must be decimal and fit 64
//! bits; numbers stored as numbers must be integers.

use super::json::{AREA_ALIGN, MAX_KEYSLOTS, MAX_KEYSLOTS_SIZE};
use super::sizes::{BIN_SIZE, HDR_SIZES};
use crate::error::Result;
use crate::luks::rules::Rule;
use serde_json::{Map, Value};

/// How deep the JSON may nest (json-c's default, which cryptsetup parses with).
const MAX_DEPTH: usize = 32;
/// The fields each KDF takes.
const PBKDF2_FIELDS: [&str; 4] = ["type", "salt", "hash", "iterations"];
const ARGON2_FIELDS: [&str; 5] = ["type", "salt", "time", "memory", "cpus"];

/// `keyslots`, `tokens`... of the top-level object: an object, or [`Rule::Luks2Section`].
fn section<'a>(top: &'a Map<String, Value>, name: &str) -> Result<&'a Map<String, Value>> {
    top.get(name)
        .and_then(Value::as_object)
        .ok_or_else(|| Rule::Luks2Section.broken(format!("{name} is missing or not an object")))
}

/// `v.key` as a non-empty string, or `rule` broken.
fn string<'a>(v: &'a Value, key: &str, rule: Rule, path: &str) -> Result<&'a str> {
    match v.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(rule.broken(format!("{path}{key} is missing, empty or not a string"))),
    }
}

/// `v.key` as an array of strings, or `rule` broken.
fn strings<'a>(v: &'a Value, key: &str, rule: Rule, path: &str) -> Result<Vec<&'a str>> {
    let list = v
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| rule.broken(format!("{path}{key} is missing or not an array")))?;
    list.iter()
        .map(|x| {
            x.as_str()
                .ok_or_else(|| rule.broken(format!("{path}{key} holds a non-string {x}")))
        })
        .collect()
}

/// Whether `v.key` is an integer (of any size).
fn is_int(v: &Value, key: &str) -> bool {
    v.get(key)
        .and_then(Value::as_number)
        .is_some_and(|n| n.is_i64() || n.is_u64())
}

/// `v.key` as an integer from 0 to 2^32-1, or `rule` broken.
fn uint32(v: &Value, key: &str, rule: Rule, path: &str) -> Result<u32> {
    v.get(key)
        .and_then(Value::as_u64)
        .filter(|_| is_int(v, key))
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            rule.broken(format!(
                "{path}{key} is missing or not a 32-bit unsigned integer"
            ))
        })
}

/// A decimal u64 in a string, or [`Rule::Luks2Uint64`] broken.
fn decimal(s: &str, what: &str) -> Result<u64> {
    s.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| s.parse().ok())
        .flatten()
        .ok_or_else(|| {
            Rule::Luks2Uint64.broken(format!("{what} {s:?} is not a decimal 64-bit number"))
        })
}

/// A decimal id (`0`, `12`; no sign, no leading zero), or [`Rule::Luks2Id`] broken.
fn id(key: &str, what: &str) -> Result<u64> {
    let canonical = key == "0" || (!key.starts_with('0') && !key.is_empty());
    key.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| key.parse().ok())
        .flatten()
        .filter(|_| canonical)
        .ok_or_else(|| Rule::Luks2Id.broken(format!("{what} id {key:?} is not a decimal number")))
}

/// How deep `v` nests (a scalar is 0, `{}` 1).
fn depth(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Refuses JSON nested deeper than json-c (and so cryptsetup) parses.
pub(super) fn check_depth(v: &Value) -> Result<()> {
    if depth(v) > MAX_DEPTH {
        return Err(Rule::Luks2JsonSyntax.broken(format!("nested deeper than {MAX_DEPTH}")));
    }
    Ok(())
}

/// Drops the parameters a `luks2` keyslot's KDF does not take; returns the keyslots
/// changed.
pub(super) fn repair_kdf_leftovers(json: &mut Value) -> Vec<String> {
    let mut changed = Vec::new();
    let Some(keyslots) = json.get_mut("keyslots").and_then(Value::as_object_mut) else {
        return changed;
    };
    for (id, ks) in keyslots {
        if ks.get("type").and_then(Value::as_str) != Some("luks2") {
            continue;
        }
        let Some(kdf) = ks.get_mut("kdf").and_then(Value::as_object_mut) else {
            continue;
        };
        let keep: &[&str] = match kdf.get("type").and_then(Value::as_str) {
            Some("pbkdf2") => &PBKDF2_FIELDS,
            Some("argon2i" | "argon2id") => &ARGON2_FIELDS,
            _ => continue,
        };
        let before = kdf.len();
        kdf.retain(|k, _| keep.contains(&k.as_str()));
        if kdf.len() != before {
            changed.push(id.clone());
        }
    }
    changed
}

/// Checks the metadata `json` of a copy whose JSON area has `json_area` bytes.
pub(super) fn validate(json: &Value, json_area: u64) -> Result<()> {
    let top = json
        .as_object()
        .ok_or_else(|| Rule::Luks2JsonStart.broken("the metadata is not a json object"))?;
    requirements(top)?;
    tokens(top)?;
    digests(top)?;
    let regular = segments(top)?;
    keyslots(top)?;
    let (metadata, keyslots_size) = config(top, &regular)?;
    areas(top, metadata, keyslots_size)?;
    if metadata - BIN_SIZE as u64 != json_area {
        return Err(Rule::Luks2MetadataSize.broken(format!(
            "config.json_size {} does not match the binary header's {json_area}",
            metadata - BIN_SIZE as u64
        )));
    }
    let text = serde_json::to_vec(json).expect("a json value serialises");
    if text.len() as u64 > json_area {
        return Err(Rule::Luks2JsonSize.broken(format!(
            "the metadata takes {} bytes, the json area {json_area}",
            text.len()
        )));
    }
    keyslot_kinds(top)
}

/// The reencryption flags among the mandatory requirements.
fn reencrypt_flags(top: &Map<String, Value>) -> usize {
    let flag = |f: &str| {
        f == "online-reencrypt"
            || f.strip_prefix("online-reencrypt-v")
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()))
    };
    top.get("config")
        .and_then(|c| c.get("requirements"))
        .and_then(|r| r.get("mandatory"))
        .and_then(Value::as_array)
        .map_or(0, |m| {
            m.iter()
                .filter_map(Value::as_str)
                .filter(|f| flag(f))
                .count()
        })
}

fn requirements(top: &Map<String, Value>) -> Result<()> {
    let config = section(top, "config")?;
    let Some(req) = config.get("requirements") else {
        return Ok(());
    };
    if !req.is_object() {
        return Err(Rule::Luks2Requirements.broken("config.requirements is not an object"));
    }
    if req.get("mandatory").is_some() {
        strings(
            req,
            "mandatory",
            Rule::Luks2Requirements,
            "config.requirements.",
        )?;
    }
    if reencrypt_flags(top) > 1 {
        return Err(Rule::Luks2Requirements.broken("several online-reencryption requirements"));
    }
    Ok(())
}

/// Refuses a name in `list` (of `path`) that is no object of `section` in `top`.
fn references(top: &Map<String, Value>, section: &str, list: &[&str], path: &str) -> Result<()> {
    for name in list {
        if !top
            .get(section)
            .and_then(|s| s.get(*name))
            .is_some_and(Value::is_object)
        {
            return Err(Rule::Luks2Reference.broken(format!(
                "{path} names {section} {name:?}, which does not exist"
            )));
        }
    }
    Ok(())
}

fn tokens(top: &Map<String, Value>) -> Result<()> {
    for (key, t) in section(top, "tokens")? {
        id(key, "token")?;
        let path = format!("tokens.{key}.");
        string(t, "type", Rule::Luks2Token, &path)?;
        let slots = strings(t, "keyslots", Rule::Luks2Token, &path)?;
        references(top, "keyslots", &slots, &format!("token {key}"))?;
    }
    Ok(())
}

fn digests(top: &Map<String, Value>) -> Result<()> {
    let digests = section(top, "digests")?;
    section(top, "keyslots")?;
    section(top, "segments")?;
    for (key, d) in digests {
        id(key, "digest")?;
        let path = format!("digests.{key}.");
        string(d, "type", Rule::Luks2Digest, &path)?;
        let slots = strings(d, "keyslots", Rule::Luks2Digest, &path)?;
        let segs = strings(d, "segments", Rule::Luks2Digest, &path)?;
        references(top, "keyslots", &slots, &format!("digest {key}"))?;
        references(top, "segments", &segs, &format!("digest {key}"))?;
    }
    Ok(())
}

/// Whether a segment is a reencryption backup (a flag starting `backup-`).
fn is_backup(seg: &Value) -> bool {
    seg.get("flags").and_then(Value::as_array).is_some_and(|f| {
        f.iter()
            .any(|x| x.as_str().is_some_and(|s| s.starts_with("backup-")))
    })
}

/// A segment's offset and size (`None`: dynamic), its fields checked.
fn segment(top: &Map<String, Value>, key: &str, seg: &Value) -> Result<(u64, Option<u64>)> {
    let path = format!("segments.{key}.");
    let kind = string(seg, "type", Rule::Luks2Segment, &path)?;
    let offset = decimal(
        string(seg, "offset", Rule::Luks2Segment, &path)?,
        &format!("{path}offset"),
    )?;
    let size = match string(seg, "size", Rule::Luks2Segment, &path)? {
        "dynamic" => None,
        s => match decimal(s, &format!("{path}size"))? {
            0 => return Err(Rule::Luks2Segment.broken(format!("{path}size is 0"))),
            n => Some(n),
        },
    };
    if !offset.is_multiple_of(512) || !size.unwrap_or(0).is_multiple_of(512) {
        return Err(Rule::Luks2Alignment.broken(format!(
            "segment {key}: offset {offset} and size {size:?} must be multiples of 512"
        )));
    }
    if seg.get("flags").is_some() {
        strings(seg, "flags", Rule::Luks2Segment, &path)?;
    }
    if kind == "crypt" {
        crypt_segment(top, key, seg, size.unwrap_or(0))?;
    }
    Ok((offset, size))
}

fn crypt_segment(top: &Map<String, Value>, key: &str, seg: &Value, size: u64) -> Result<()> {
    let path = format!("segments.{key}.");
    let iv = string(seg, "iv_tweak", Rule::Luks2Segment, &path)?;
    string(seg, "encryption", Rule::Luks2Segment, &path)?;
    if !is_int(seg, "sector_size") {
        return Err(
            Rule::Luks2Segment.broken(format!("{path}sector_size is missing or not an integer"))
        );
    }
    if let Some(integrity) = seg.get("integrity") {
        for field in ["type", "journal_encryption", "journal_integrity"] {
            string(
                integrity,
                field,
                Rule::Luks2Segment,
                &format!("{path}integrity."),
            )?;
        }
    }
    let sector = uint32(seg, "sector_size", Rule::Luks2Segment, &path)? as u64;
    if sector == 0 || !sector.is_multiple_of(512) {
        return Err(Rule::Luks2Alignment.broken(format!(
            "segment {key}: sector size {sector} is not a multiple of 512"
        )));
    }
    decimal(iv, &format!("{path}iv_tweak"))?;
    if !size.is_multiple_of(sector) {
        return Err(Rule::Luks2Alignment.broken(format!(
            "segment {key}: size {size} is not a multiple of its {sector}-byte sectors"
        )));
    }
    let digested = section(top, "digests")?.values().any(|d| {
        d.get("segments")
            .and_then(Value::as_array)
            .is_some_and(|s| s.iter().any(|x| x.as_str() == Some(key)))
    });
    if !digested {
        return Err(Rule::Luks2SegmentDigest.broken(format!("crypt segment {key} has no digest")));
    }
    Ok(())
}

/// Checks the segments; returns the regular (non-backup) ones: (offset, size) by id.
fn segments(top: &Map<String, Value>) -> Result<Vec<(u64, Option<u64>)>> {
    let segs = section(top, "segments")?;
    if segs.is_empty() {
        return Err(Rule::Luks2Segment.broken("no segments"));
    }
    let order = |m: String| Rule::Luks2SegmentOrder.broken(m);
    let mut first_backup: Option<u64> = None;
    let mut parsed = std::collections::BTreeMap::new();
    for (key, seg) in segs {
        let n = id(key, "segment")?;
        parsed.insert(n, segment(top, key, seg)?);
        if is_backup(seg) {
            first_backup = Some(first_backup.map_or(n, |b| b.min(n)));
        } else if first_backup.is_some_and(|b| n >= b) {
            return Err(order(format!(
                "regular segment {n} follows a backup segment"
            )));
        }
    }
    let count = segs.len() as u64;
    let regular = match first_backup {
        Some(0) => return Err(order("no regular segment".into())),
        Some(b) if b >= count => return Err(order(format!("a gap before backup segment {b}"))),
        Some(b) => b,
        None => count,
    };
    // Ids run 0..count, so the regular segments are the first `regular`.
    if let Some(i) = (0..count).find(|i| !parsed.contains_key(i)) {
        return Err(order(format!("segment {i} is missing (a gap in the ids)")));
    }
    let intervals: Vec<(u64, Option<u64>)> =
        parsed.values().take(regular as usize).copied().collect();
    for (i, &(off, size)) in intervals.iter().enumerate() {
        if size.is_none() && i + 1 != intervals.len() {
            return Err(order(format!("segment {i} is dynamic but not the last")));
        }
        for (j, &(o2, s2)) in intervals.iter().enumerate().filter(|&(j, _)| j != i) {
            let end2 = match s2 {
                Some(s) => Some(o2.checked_add(s).ok_or_else(|| {
                    Rule::Luks2Uint64.broken(format!("segment {j}: {o2} + {s} overflows"))
                })?),
                None => None,
            };
            if off >= o2 && end2.is_none_or(|e| off < e) {
                return Err(Rule::Luks2SegmentOverlap.broken(format!(
                    "segment {i} at {off} lies inside segment {j} at {o2}"
                )));
            }
        }
    }
    reencrypt_segments(top, segs, regular, count)?;
    Ok(intervals)
}

/// An online reencryption keeps its two backup segments.
fn reencrypt_segments(
    top: &Map<String, Value>,
    segs: &Map<String, Value>,
    from: u64,
    to: u64,
) -> Result<()> {
    if reencrypt_flags(top) == 0 {
        return Ok(());
    }
    let has = |flag: &str| {
        (from..to).any(|i| {
            segs[&i.to_string()]["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(flag)))
        })
    };
    if !has("backup-final") || !has("backup-previous") {
        return Err(Rule::Luks2Reencrypt.broken("a reencryption backup segment is missing"));
    }
    Ok(())
}

fn keyslots(top: &Map<String, Value>) -> Result<()> {
    for (key, ks) in section(top, "keyslots")? {
        if id(key, "keyslot")? >= MAX_KEYSLOTS as u64 {
            return Err(Rule::Luks2Id.broken(format!("keyslot id {key} is {MAX_KEYSLOTS} or more")));
        }
        let path = format!("keyslots.{key}.");
        string(ks, "type", Rule::Luks2Keyslot, &path)?;
        if !is_int(ks, "key_size") {
            return Err(
                Rule::Luks2Keyslot.broken(format!("{path}key_size is missing or not an integer"))
            );
        }
        uint32(ks, "key_size", Rule::Luks2Keyslot, &path)?;
    }
    Ok(())
}

/// Checks `config`; returns the size of one header copy and of the keyslots area.
fn config(top: &Map<String, Value>, regular: &[(u64, Option<u64>)]) -> Result<(u64, u64)> {
    let config = &top["config"];
    let field = |name: &str| -> Result<u64> {
        let s = string(config, name, Rule::Luks2Config, "config.")?;
        decimal(s, &format!("config.{name}"))
    };
    let json_size = field("json_size")?;
    let keyslots_size = field("keyslots_size")?;
    let metadata = json_size
        .checked_add(BIN_SIZE as u64)
        .filter(|m| HDR_SIZES.contains(m))
        .ok_or_else(|| {
            Rule::Luks2MetadataSize.broken(format!(
                "config.json_size {json_size} plus the {BIN_SIZE}-byte binary header is no \
                 allowed header size (16 KiB, 32 KiB, ... 4 MiB)"
            ))
        })?;
    if !keyslots_size.is_multiple_of(AREA_ALIGN) || keyslots_size > MAX_KEYSLOTS_SIZE {
        return Err(Rule::Luks2KeyslotsSize.broken(format!(
            "config.keyslots_size {keyslots_size} (at most {MAX_KEYSLOTS_SIZE}, a multiple of \
             {AREA_ALIGN})"
        )));
    }
    // The data starts at the lowest regular segment; 0 is a detached header.
    let data = regular.iter().map(|&(off, _)| off).min().unwrap_or(0);
    if data != 0
        && data
            .checked_sub(keyslots_size)
            .is_none_or(|free| free < 2 * metadata)
    {
        return Err(Rule::Luks2KeyslotsSize.broken(format!(
            "config.keyslots_size {keyslots_size} after two {metadata}-byte header copies \
             reaches the data at {data}"
        )));
    }
    if config.get("flags").is_some() {
        strings(config, "flags", Rule::Luks2Config, "config.")?;
    }
    Ok((metadata, keyslots_size))
}

fn areas(top: &Map<String, Value>, metadata: u64, keyslots_size: u64) -> Result<()> {
    let end = 2 * metadata + keyslots_size;
    let mut areas: Vec<(&str, u64, u64)> = Vec::new();
    for (key, ks) in section(top, "keyslots")? {
        let path = format!("keyslots.{key}.area.");
        let area = ks.get("area").filter(|a| a.is_object()).ok_or_else(|| {
            Rule::Luks2Keyslot.broken(format!("keyslots.{key}.area is missing or not an object"))
        })?;
        string(area, "type", Rule::Luks2Keyslot, &path)?;
        let offset = decimal(
            string(area, "offset", Rule::Luks2Keyslot, &path)?,
            &format!("{path}offset"),
        )?;
        let size = decimal(
            string(area, "size", Rule::Luks2Keyslot, &path)?,
            &format!("{path}size"),
        )?;
        areas.push((key, offset, size));
    }
    for &(key, offset, size) in &areas {
        if offset < 2 * metadata {
            return Err(Rule::Luks2AreaInHeader.broken(format!(
                "keyslot {key} area at {offset} starts inside the two {metadata}-byte header copies"
            )));
        }
        match offset.checked_add(size) {
            _ if size == 0 => {
                return Err(Rule::Luks2AreaBounds.broken(format!("keyslot {key} area is empty")))
            }
            Some(e) if e <= end => {}
            _ => {
                return Err(Rule::Luks2AreaBounds.broken(format!(
                    "keyslot {key} area {offset}+{size} ends beyond the keyslots area (at {end})"
                )))
            }
        }
        for &(other, o2, s2) in areas.iter().filter(|a| a.0 != key) {
            if offset >= o2 && offset - o2 < s2 {
                return Err(Rule::Luks2AreaOverlap.broken(format!(
                    "keyslot {key} area {offset}+{size} overlaps keyslot {other} area {o2}+{s2}"
                )));
            }
        }
    }
    Ok(())
}

/// What each keyslot kind needs: `luks2` keyslots their KDF, splitter and area fields and
/// exactly one digest; at most one `reencrypt` keyslot, present exactly when an online
/// reencryption is required.
fn keyslot_kinds(top: &Map<String, Value>) -> Result<()> {
    let digests = section(top, "digests")?;
    let mut reencrypt = 0;
    for (key, ks) in section(top, "keyslots")? {
        match ks["type"].as_str() {
            Some("luks2") => {
                luks2_keyslot(key, ks)?;
                let n = digests
                    .values()
                    .filter(|d| {
                        d["keyslots"]
                            .as_array()
                            .is_some_and(|k| k.iter().any(|x| x.as_str() == Some(key)))
                    })
                    .count();
                if n != 1 {
                    return Err(Rule::Luks2KeyslotDigest.broken(format!(
                        "keyslot {key} belongs to {n} digests, not exactly one"
                    )));
                }
            }
            Some("reencrypt") => {
                reencrypt_keyslot(key, ks)?;
                reencrypt += 1;
            }
            _ => {}
        }
    }
    let required = reencrypt_flags(top) > 0;
    if reencrypt > 1 || (reencrypt == 1) != required {
        return Err(Rule::Luks2Reencrypt.broken(format!(
            "{reencrypt} reencryption keyslots with{} an online-reencryption requirement",
            if required { "" } else { "out" }
        )));
    }
    Ok(())
}

fn luks2_keyslot(key: &str, ks: &Value) -> Result<()> {
    let path = format!("keyslots.{key}.");
    let bad = |m: String| Rule::Luks2Keyslot.broken(m);
    for part in ["kdf", "af", "area"] {
        if !ks.get(part).is_some_and(Value::is_object) {
            return Err(bad(format!("{path}{part} is missing or not an object")));
        }
    }
    let (kdf, af, area) = (&ks["kdf"], &ks["af"], &ks["area"]);
    let kp = format!("{path}kdf.");
    let kind = string(kdf, "type", Rule::Luks2Keyslot, &kp)?;
    let count = kdf.as_object().map_or(0, Map::len);
    let (fields, ints, strs): (usize, &[&str], &[&str]) = match kind {
        "pbkdf2" => (4, &["iterations"], &["hash", "salt"]),
        "argon2i" | "argon2id" => (5, &["time", "memory", "cpus"], &["salt"]),
        _ => (count, &[], &[]),
    };
    if count != fields {
        return Err(bad(format!(
            "{kp}: a {kind} kdf has {fields} fields, this one {count}"
        )));
    }
    for f in ints {
        if !is_int(kdf, f) {
            return Err(bad(format!("{kp}{f} is missing or not an integer")));
        }
    }
    for f in strs {
        string(kdf, f, Rule::Luks2Keyslot, &kp)?;
    }
    let ap = format!("{path}af.");
    if string(af, "type", Rule::Luks2Keyslot, &ap)? != "luks1" {
        return Err(bad(format!("{ap}type is not luks1")));
    }
    string(af, "hash", Rule::Luks2Keyslot, &ap)?;
    if !is_int(af, "stripes") {
        return Err(bad(format!("{ap}stripes is missing or not an integer")));
    }
    let rp = format!("{path}area.");
    if string(area, "type", Rule::Luks2Keyslot, &rp)? != "raw" {
        return Err(bad(format!("{rp}type is not raw")));
    }
    for f in ["encryption", "offset", "size"] {
        string(area, f, Rule::Luks2Keyslot, &rp)?;
    }
    if !is_int(area, "key_size") {
        return Err(bad(format!("{rp}key_size is missing or not an integer")));
    }
    Ok(())
}

fn reencrypt_keyslot(key: &str, ks: &Value) -> Result<()> {
    let path = format!("keyslots.{key}.");
    let bad = |m: String| Rule::Luks2Reencrypt.broken(m);
    if uint32(ks, "key_size", Rule::Luks2Reencrypt, &path)? != 1 {
        return Err(bad(format!("{path}key_size must be 1")));
    }
    let mode = string(ks, "mode", Rule::Luks2Reencrypt, &path)?;
    let direction = string(ks, "direction", Rule::Luks2Reencrypt, &path)?;
    if !["reencrypt", "encrypt", "decrypt"].contains(&mode)
        || !["forward", "backward"].contains(&direction)
    {
        return Err(bad(format!(
            "{path}: mode {mode:?}, direction {direction:?}"
        )));
    }
    let area = &ks["area"];
    let ap = format!("{path}area.");
    let kind = area["type"].as_str().unwrap_or("");
    if kind == "checksum" || kind == "datashift-checksum" {
        string(area, "hash", Rule::Luks2Reencrypt, &ap)?;
        let s = uint32(area, "sector_size", Rule::Luks2Reencrypt, &ap)?;
        if s < 512 || !s.is_power_of_two() {
            return Err(bad(format!("{ap}sector_size {s}")));
        }
    } else if kind.starts_with("datashift") {
        let shift = decimal(
            string(area, "shift_size", Rule::Luks2Reencrypt, &ap)?,
            &format!("{ap}shift_size"),
        )?;
        if shift == 0 || !shift.is_multiple_of(512) {
            return Err(bad(format!("{ap}shift_size {shift}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_ids_and_leftovers() {
        assert_eq!(decimal("18446744073709551615", "x").unwrap(), u64::MAX);
        for bad in ["18446744073709551616", "-1", "+1", " 1", "", "0x10"] {
            assert!(decimal(bad, "x").is_err(), "{bad:?}");
        }
        assert!(id("0", "k").is_ok() && id("31", "k").is_ok());
        for bad in ["", "01", "-1", "a"] {
            assert!(id(bad, "k").is_err(), "{bad:?}");
        }
        let mut j = json!({"keyslots": {"3": {"type": "luks2", "kdf": {
            "type": "pbkdf2", "hash": "sha256", "iterations": 1000, "salt": "AA==",
            "time": 4, "memory": 32, "cpus": 1}}}});
        assert_eq!(repair_kdf_leftovers(&mut j), vec!["3".to_string()]);
        assert_eq!(j["keyslots"]["3"]["kdf"].as_object().unwrap().len(), 4);
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        assert!(check_depth(&deep).is_ok());
        assert!(check_depth(&json!([deep])).is_err());
    }
}
