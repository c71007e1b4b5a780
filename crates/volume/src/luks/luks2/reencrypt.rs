//! The metadata of a LUKS2 reencryption in progress, as cryptsetup (2.3.7 and later)
//! writes it: the `online-reencrypt-vN` requirement and the reencryption digest.
//!
//! The reencryption digest binds the `reencrypt` keyslot (mode, direction, area) and the
//! backup segments to the volume keys, so that metadata edited by someone without a key
//! is refused. Its input ("verification data") is the concatenation, with no separators:
//! `'v'`, `'0' + N` (N from the requirement), the old volume key if `backup-previous` has
//! a digest, the new volume key if `backup-final` has another digest, the keyslot's
//! `mode`, `direction`, `area.type`, `area.offset` and `area.size` (u64 big-endian), the
//! area's `hash` and `sector_size` (u32 BE) for `checksum`, its `shift_size` (u64 BE) for
//! the `datashift` kinds, then the segments `backup-previous`, `backup-final` and
//! `backup-moved-segment` (if any), each as `type`, `offset`, `size` (u64 BE, or the
//! bytes `dynamic`) and, for `crypt`, `iv_tweak` (u64 BE), `encryption` and `sector_size`
//! (u32 BE). Strings are raw bytes of at most 64. The digest is the usual `pbkdf2` digest
//! of that input, listed with the reencrypt keyslot and no segment.
//!
//! The runs are in the submodules: `rekey` (re-key, also moving the data with
//! `--reduce-device-size`, encryption with a detached header, decryption; the hotzone
//! loop, recovery and the end), `shift` (encryption that moves the data,
//! `--reduce-device-size`, and decryption that moves it), `segments` (the segment
//! layouts of a run), `online` (a run beside an engine serving the volume), `repair`.
//! Opening a volume in this state is refused (`Luks2::check_supported` says what to run
//! next).

mod line;
mod online;
mod rekey;
mod repair;
mod segments;
mod shift;

pub use line::Line;
pub use online::Translated;
pub use rekey::{InitOptions, Keys, Outcome, Resilience, RunOptions};
pub use repair::Repaired;

use super::json::{b64_of, corrupt, id_list, int_of, obj, str_of, u64_str};
use super::Luks2;
use crate::error::{Error, Result};
use crate::hash::HashAlg;
use crate::luks::keyslot::digest_matches;
use serde_json::Value;
use zeroize::Zeroizing;

/// The longest string field the digest input takes (cryptsetup's limit).
const MAX_FIELD: usize = 64;

/// The reencryption requirement versions this code knows how to check.
const KNOWN_VERSIONS: [u8; 2] = [2, 3];

/// The version N of the `online-reencrypt-vN` requirement, `Some(1)` for the unversioned
/// `online-reencrypt` (no digest: `repair` needed), `None` without one. Refuses two flags
/// and versions other than 2 and 3.
pub fn requirement_version(json: &Value) -> Result<Option<u8>> {
    let flags: Vec<&str> = json["config"]["requirements"]["mandatory"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut found = None;
    for f in flags {
        let version = if f == "online-reencrypt" {
            1
        } else if let Some(v) = f.strip_prefix("online-reencrypt-v") {
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            match v.parse::<u8>() {
                Ok(n) if KNOWN_VERSIONS.contains(&n) => n,
                _ => {
                    return Err(Error::unsupported(format!(
                        "reencryption requirement {f:?} is of an unknown version \
                         (sectorcrypt knows online-reencrypt-v2 and -v3)"
                    )))
                }
            }
        } else {
            continue;
        };
        if found.is_some() {
            return Err(corrupt("config.requirements lists two reencryption flags"));
        }
        found = Some(version);
    }
    Ok(found)
}

/// Where a reencryption stands, derived (as cryptsetup derives it) from the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No reencryption requirement.
    None,
    /// A reencryption stopped between two hotzones: it can be resumed as it is.
    Clean,
    /// A segment is still flagged `in-reencryption`: the process stopped inside a
    /// hotzone, which must be recovered from the resilience area first.
    Crash,
}

/// The [`State`] of the metadata.
pub fn state(json: &Value) -> Result<State> {
    if requirement_version(json)?.is_none() {
        return Ok(State::None);
    }
    Ok(if flagged_segment(json, "in-reencryption")?.is_some() {
        State::Crash
    } else {
        State::Clean
    })
}

/// What the `reencrypt` keyslot says of the reencryption (the structure is checked when
/// the header is read; this is the typed view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Its keyslot id.
    pub slot: usize,
    /// `reencrypt`, `encrypt` or `decrypt`.
    pub mode: String,
    /// `forward` or `backward`.
    pub direction: String,
    /// The resilience: `none`, `checksum`, `journal`, `datashift`, `datashift-checksum`
    /// or `datashift-journal`.
    pub resilience: String,
    /// The area in the keyslots area that holds the resilience data: offset, size.
    pub area: (u64, u64),
    /// The checksum hash and block size, for the checksum kinds.
    pub checksum: Option<(String, u32)>,
    /// The data shift in bytes, for the datashift kinds.
    pub shift: Option<u64>,
}

impl Plan {
    /// Whether this is a data-shift encryption (cryptsetup's `--encrypt
    /// --reduce-device-size`: mode `encrypt`, backward, resilience `datashift`).
    pub fn is_shift_encrypt(&self) -> bool {
        self.mode == "encrypt" && self.direction == "backward" && self.resilience == "datashift"
    }

    /// Whether this is a re-key that moves the data toward the end (cryptsetup's
    /// `reencrypt --reduce-device-size` of a volume: mode `reencrypt`, backward,
    /// resilience `datashift`): the new layout starts `shift` bytes after the old one.
    pub fn is_shift_rekey(&self) -> bool {
        self.mode == "reencrypt" && self.direction == "backward" && self.resilience == "datashift"
    }

    /// Whether this is a decryption that moves the data over the header (cryptsetup's
    /// `--decrypt --header NEW` of a volume whose header is in the image:
    /// `online-reencrypt-v3`, forward, `datashift-checksum` or `datashift-journal`).
    pub fn is_shift_decrypt(&self) -> bool {
        self.mode == "decrypt"
            && self.direction == "forward"
            && matches!(
                self.resilience.as_str(),
                "datashift-checksum" | "datashift-journal"
            )
    }
}

/// The [`Plan`] of the one `reencrypt` keyslot.
pub fn plan(json: &Value) -> Result<Plan> {
    let (slot, ks) = reencrypt_keyslot(json)?;
    let path = format!("keyslots.{slot}.");
    let area = &ks["area"];
    let apath = format!("{path}area.");
    let resilience = str_of(area, "type", &apath)?.to_string();
    let checksum = if resilience.ends_with("checksum") {
        let size: u32 = int_of(area, "sector_size", &apath)?
            .try_into()
            .map_err(|_| corrupt(format!("json: {apath}sector_size is out of range")))?;
        Some((str_of(area, "hash", &apath)?.to_string(), size))
    } else {
        None
    };
    let shift = if resilience.starts_with("datashift") {
        Some(u64_str(area, "shift_size", &apath)?)
    } else {
        None
    };
    Ok(Plan {
        slot,
        mode: str_of(ks, "mode", &path)?.to_string(),
        direction: str_of(ks, "direction", &path)?.to_string(),
        area: (
            u64_str(area, "offset", &apath)?,
            u64_str(area, "size", &apath)?,
        ),
        resilience,
        checksum,
        shift,
    })
}

/// Which key a span of the data is under during a reencryption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOf {
    /// The old volume key (the layout of `backup-previous`).
    Old,
    /// The new volume key (the layout of `backup-final`).
    New,
    /// The hotzone of a crash (`in-reencryption`): partly old, partly new, to be
    /// recovered from the resilience area.
    Hot,
}

/// A regular (not backup) segment during a reencryption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Byte offset in the image.
    pub offset: u64,
    /// Length in bytes; `None` for `dynamic` (to the end of the image).
    pub size: Option<u64>,
    /// Its key.
    pub key: KeyOf,
}

/// The regular segments in order of the data they hold, each with its key: where the
/// progress line is. Refuses a segment that belongs to neither layout, overlapping or
/// non-adjacent segments, and a `dynamic` one before the last. In a re-key that moves the
/// data the old layout's segments lie the shift before the data they hold in the new one:
/// they are placed (and checked for adjacency) where the new layout holds their data.
pub fn layout(json: &Value) -> Result<Vec<Span>> {
    let digest_of = |flag| -> Result<Option<String>> {
        match flagged_segment(json, flag)? {
            Some((id, _)) => digest_of_segment(json, id),
            None => Ok(None),
        }
    };
    let (old, new) = (digest_of("backup-previous")?, digest_of("backup-final")?);
    let mut spans = Vec::new();
    for (id, seg) in obj(json, "segments", "")? {
        let flags: Vec<&str> = seg["flags"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if flags.iter().any(|f| f.starts_with("backup-")) {
            continue;
        }
        let path = format!("segments.{id}.");
        let key = if flags.contains(&"in-reencryption") {
            KeyOf::Hot
        } else {
            let d = digest_of_segment(json, id)?;
            // In encrypt and decrypt modes one layout is plaintext (`linear`, no digest).
            if d.is_some() && d == new {
                KeyOf::New
            } else if d.is_some() && d == old {
                KeyOf::Old
            } else if d.is_none() && (new.is_none() || old.is_none()) {
                if new.is_none() {
                    KeyOf::New
                } else {
                    KeyOf::Old
                }
            } else {
                return Err(corrupt(format!(
                    "json: {path} is under neither the old nor the new volume key"
                )));
            }
        };
        let size = match seg["size"].as_str() {
            Some("dynamic") => None,
            _ => Some(u64_str(seg, "size", &path)?),
        };
        spans.push(Span {
            offset: u64_str(seg, "offset", &path)?,
            size,
            key,
        });
    }
    let moved = match plan(json) {
        Ok(p) if p.is_shift_rekey() => p.shift.unwrap_or(0),
        _ => 0,
    };
    let place = |s: &Span| -> Result<u64> {
        match s.key {
            KeyOf::Old => s.offset.checked_add(moved),
            _ => Some(s.offset),
        }
        .ok_or_else(|| corrupt("json: a segment offset out of range"))
    };
    let mut placed = spans
        .into_iter()
        .map(|s| Ok((place(&s)?, s)))
        .collect::<Result<Vec<_>>>()?;
    placed.sort_by_key(|(at, _)| *at);
    for pair in placed.windows(2) {
        let ((at, first), (next, _)) = (&pair[0], &pair[1]);
        let end = first
            .size
            .and_then(|n| at.checked_add(n))
            .ok_or_else(|| corrupt("json: a dynamic or oversized segment before the last"))?;
        if end != *next {
            return Err(corrupt(format!(
                "json: segments at {} and {} are not adjacent",
                at, next
            )));
        }
    }
    Ok(placed.into_iter().map(|(_, s)| s).collect())
}

/// The id of the one `reencrypt` keyslot and its JSON.
fn reencrypt_keyslot(json: &Value) -> Result<(usize, &Value)> {
    let mut found = None;
    for (id, ks) in obj(json, "keyslots", "")? {
        if ks["type"].as_str() == Some("reencrypt") {
            if found.is_some() {
                return Err(corrupt("json: more than one reencrypt keyslot"));
            }
            let n: usize = id
                .parse()
                .map_err(|_| corrupt(format!("json: keyslot id {id:?} is not a number")))?;
            found = Some((n, ks));
        }
    }
    found.ok_or_else(|| corrupt("json: a reencryption requirement without a reencrypt keyslot"))
}

/// The segment with `flag` among its flags: its id and JSON.
fn flagged_segment<'a>(json: &'a Value, flag: &str) -> Result<Option<(&'a str, &'a Value)>> {
    let mut found = None;
    for (id, seg) in obj(json, "segments", "")? {
        let has = seg["flags"]
            .as_array()
            .is_some_and(|a| a.iter().any(|f| f.as_str() == Some(flag)));
        if has {
            if found.is_some() {
                return Err(corrupt(format!("json: two segments flagged {flag}")));
            }
            found = Some((id.as_str(), seg));
        }
    }
    Ok(found)
}

/// The id of the digest that lists segment `id`.
fn digest_of_segment(json: &Value, id: &str) -> Result<Option<String>> {
    for (did, d) in obj(json, "digests", "")? {
        if id_list(d, "segments", &format!("digests.{did}."))?
            .iter()
            .any(|s| s == id)
        {
            return Ok(Some(did.clone()));
        }
    }
    Ok(None)
}

fn put_str(out: &mut Vec<u8>, v: &Value, key: &str, path: &str) -> Result<()> {
    let s = str_of(v, key, path)?;
    if s.is_empty() || s.len() > MAX_FIELD {
        return Err(corrupt(format!(
            "json: {path}{key} is empty or longer than {MAX_FIELD} bytes"
        )));
    }
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_u32(out: &mut Vec<u8>, v: &Value, key: &str, path: &str) -> Result<()> {
    let n: u32 = int_of(v, key, path)?
        .try_into()
        .map_err(|_| corrupt(format!("json: {path}{key} is out of range")))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

fn put_segment(out: &mut Vec<u8>, seg: &Value, path: &str) -> Result<()> {
    put_str(out, seg, "type", path)?;
    out.extend_from_slice(&u64_str(seg, "offset", path)?.to_be_bytes());
    if seg["size"].as_str() == Some("dynamic") {
        out.extend_from_slice(b"dynamic");
    } else {
        out.extend_from_slice(&u64_str(seg, "size", path)?.to_be_bytes());
    }
    match str_of(seg, "type", path)? {
        "linear" => {}
        "crypt" => {
            out.extend_from_slice(&u64_str(seg, "iv_tweak", path)?.to_be_bytes());
            put_str(out, seg, "encryption", path)?;
            put_u32(out, seg, "sector_size", path)?;
        }
        other => {
            return Err(corrupt(format!(
                "json: {path}type {other:?} is not linear or crypt"
            )))
        }
    }
    Ok(())
}

/// Which volume keys the verification data takes: (old, new).
pub fn keys_bound(json: &Value) -> Result<(bool, bool)> {
    let digest = |flag| -> Result<Option<String>> {
        match flagged_segment(json, flag)? {
            Some((id, _)) => digest_of_segment(json, id),
            None => Ok(None),
        }
    };
    let old = digest("backup-previous")?;
    let new = digest("backup-final")?;
    let new_differs = new.is_some() && new != old;
    Ok((old.is_some(), new_differs))
}

/// The input of the reencryption digest. `old_key` and `new_key` must be given exactly
/// when [`keys_bound`] says the metadata binds them.
pub fn verification_data(
    json: &Value,
    old_key: Option<&[u8]>,
    new_key: Option<&[u8]>,
) -> Result<Zeroizing<Vec<u8>>> {
    let version =
        match requirement_version(json)? {
            Some(1) => return Err(corrupt(
                "the reencryption metadata has no digest (online-reencrypt without a version): \
                 it needs `cryptsetup repair`",
            )),
            Some(n) => n,
            None => return Err(corrupt("the volume has no reencryption requirement")),
        };
    let (want_old, want_new) = keys_bound(json)?;
    let mut out = Zeroizing::new(Vec::with_capacity(512));
    out.extend_from_slice(&[b'v', b'0' + version]);
    for (want, key, which) in [(want_old, old_key, "old"), (want_new, new_key, "new")] {
        match (want, key) {
            (true, Some(k)) => out.extend_from_slice(k),
            (false, None) => {}
            (true, None) => {
                return Err(Error::invalid(format!(
                    "the reencryption digest needs the {which} volume key"
                )))
            }
            (false, Some(_)) => {
                return Err(Error::invalid(format!(
                    "the reencryption digest does not bind an {which} volume key"
                )))
            }
        }
    }
    let (slot, ks) = reencrypt_keyslot(json)?;
    let path = format!("keyslots.{slot}.");
    put_str(&mut out, ks, "mode", &path)?;
    put_str(&mut out, ks, "direction", &path)?;
    let area = ks
        .get("area")
        .filter(|a| a.is_object())
        .ok_or_else(|| corrupt(format!("json: {path}area is missing or not an object")))?;
    let apath = format!("{path}area.");
    put_str(&mut out, area, "type", &apath)?;
    out.extend_from_slice(&u64_str(area, "offset", &apath)?.to_be_bytes());
    out.extend_from_slice(&u64_str(area, "size", &apath)?.to_be_bytes());
    match str_of(area, "type", &apath)? {
        "none" | "journal" => {}
        "checksum" => {
            put_str(&mut out, area, "hash", &apath)?;
            put_u32(&mut out, area, "sector_size", &apath)?;
        }
        "datashift" | "datashift-journal" => {
            out.extend_from_slice(&u64_str(area, "shift_size", &apath)?.to_be_bytes());
        }
        "datashift-checksum" => {
            put_str(&mut out, area, "hash", &apath)?;
            put_u32(&mut out, area, "sector_size", &apath)?;
            out.extend_from_slice(&u64_str(area, "shift_size", &apath)?.to_be_bytes());
        }
        other => return Err(corrupt(format!("json: {apath}type {other:?} is unknown"))),
    }
    for (flag, required) in [
        ("backup-previous", true),
        ("backup-final", true),
        ("backup-moved-segment", false),
    ] {
        match flagged_segment(json, flag)? {
            Some((id, seg)) => put_segment(&mut out, seg, &format!("segments.{id}."))?,
            None if required => return Err(corrupt(format!("json: no segment is flagged {flag}"))),
            None => {}
        }
    }
    Ok(out)
}

/// Checks the reencryption digest of `json` against the volume keys (see the module
/// docs): an error unless the metadata of the reencryption in progress is what the
/// holder of those keys wrote.
pub fn verify_digest(json: &Value, old_key: Option<&[u8]>, new_key: Option<&[u8]>) -> Result<()> {
    let data = verification_data(json, old_key, new_key)?;
    let (slot, _) = reencrypt_keyslot(json)?;
    let slot_id = slot.to_string();
    let mut found = None;
    for (id, d) in obj(json, "digests", "")? {
        if id_list(d, "keyslots", &format!("digests.{id}."))?.contains(&slot_id) {
            found = Some((id, d));
        }
    }
    let (id, d) = found.ok_or_else(|| {
        corrupt(format!(
            "json: no digest lists the reencrypt keyslot {slot}"
        ))
    })?;
    let path = format!("digests.{id}.");
    if str_of(d, "type", &path)? != "pbkdf2" {
        return Err(corrupt(format!("json: {path}type is not pbkdf2")));
    }
    let hash = HashAlg::parse(str_of(d, "hash", &path)?)?;
    let iterations: u32 = int_of(d, "iterations", &path)?
        .try_into()
        .map_err(|_| corrupt(format!("json: {path}iterations is out of range")))?;
    let salt = b64_of(d, "salt", &path)?;
    let digest = b64_of(d, "digest", &path)?;
    if salt.is_empty() || iterations == 0 || digest.len() != hash.output_len() {
        return Err(corrupt(format!(
            "json: {path} has an empty salt, 0 iterations or a short digest"
        )));
    }
    if digest_matches(hash, &data, &salt, iterations, &digest) {
        Ok(())
    } else {
        Err(corrupt(
            "the reencryption digest does not match: the reencryption metadata was changed \
             by someone without the volume key, or the key is wrong",
        ))
    }
}

impl Luks2 {
    /// Refuses volumes whose metadata lists requirements this implementation lacks.
    pub fn check_supported(&self) -> Result<()> {
        if let Some(req) = self.json["config"].get("requirements") {
            let mandatory: Vec<String> = req
                .get("mandatory")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|x| x.as_str().unwrap_or("?").to_string())
                        .collect()
                })
                .unwrap_or_default();
            if !mandatory.is_empty() {
                let hint = match state(&self.json) {
                    Ok(State::Clean) => {
                        " (a re-encryption is in progress, stopped between two hotzones: \
                         finish it with `sectorcrypt reencrypt IMAGE`, or serve the volume \
                         while it goes on with `sectorcrypt serve --reencrypt`; or with \
                         `cryptsetup reencrypt --resume-only --force-offline-reencrypt \
                         --disable-locks --disable-keyring IMAGE`)"
                    }
                    Ok(State::Crash) => {
                        " (a re-encryption was interrupted inside a hotzone: run \
                         `sectorcrypt repair IMAGE` (or `cryptsetup repair --disable-locks \
                         --disable-keyring IMAGE`), then `sectorcrypt reencrypt IMAGE`)"
                    }
                    _ if mandatory.iter().any(|m| m.contains("reencrypt")) => {
                        " (a reencryption sectorcrypt cannot read is in progress: \
                         see `cryptsetup luksDump`)"
                    }
                    _ => "",
                };
                let reencrypting = matches!(state(&self.json), Ok(State::Clean | State::Crash));
                return Err(Error::unsupported(if reencrypting {
                    format!(
                        "the volume is being re-encrypted ({}): it opens once that is \
                         finished{hint}",
                        mandatory.join(", ")
                    )
                } else {
                    format!(
                        "the volume requires {}, which sectorcrypt does not implement{hint}",
                        mandatory.join(", ")
                    )
                }));
            }
        }
        Ok(())
    }

    /// [`verify_digest`] of this header's metadata.
    pub fn verify_reencrypt_digest(
        &self,
        old_key: Option<&[u8]>,
        new_key: Option<&[u8]>,
    ) -> Result<()> {
        verify_digest(self.json(), old_key, new_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata `cryptsetup reencrypt --init-only` (2.6.1) wrote on a file, with the two
    /// volume keys it was given (`--volume-key-file`).
    fn fixture() -> (Value, Vec<u8>, Vec<u8>) {
        let json = serde_json::from_str(include_str!("testdata/reencrypt_init.json")).unwrap();
        let keys: Vec<Vec<u8>> = include_str!("testdata/reencrypt_init.keys")
            .lines()
            .map(|l| hex::decode(l).unwrap())
            .collect();
        (json, keys[0].clone(), keys[1].clone())
    }

    fn err(r: Result<()>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn cryptsetup_digest_verifies_with_both_keys() {
        let (json, old, new) = fixture();
        assert_eq!(requirement_version(&json).unwrap(), Some(2));
        assert_eq!(keys_bound(&json).unwrap(), (true, true));
        verify_digest(&json, Some(&old), Some(&new)).unwrap();
    }

    #[test]
    fn plan_and_state_of_cryptsetup_init() {
        let (mut json, _, _) = fixture();
        let p = plan(&json).unwrap();
        assert_eq!(
            p,
            Plan {
                slot: 2,
                mode: "reencrypt".into(),
                direction: "forward".into(),
                resilience: "checksum".into(),
                area: (548864, 16228352),
                checksum: Some(("sha256".into(), 4096)),
                shift: None,
            }
        );
        assert_eq!(state(&json).unwrap(), State::Clean);
        json["segments"]["0"]["flags"] = serde_json::json!(["in-reencryption"]);
        assert_eq!(state(&json).unwrap(), State::Crash);
        json["config"]
            .as_object_mut()
            .unwrap()
            .remove("requirements");
        assert_eq!(state(&json).unwrap(), State::None);
    }

    #[test]
    fn layout_of_cryptsetup_init_and_hostile_layouts() {
        let (json, _, _) = fixture();
        let all_old = Span {
            offset: 16 << 20,
            size: None,
            key: KeyOf::Old,
        };
        assert_eq!(layout(&json).unwrap(), [all_old]);
        // A regular segment listed by no digest.
        let mut j = json.clone();
        j["digests"]["0"]["segments"] = serde_json::json!(["1"]);
        let e = layout(&j).unwrap_err().to_string();
        assert!(e.contains("neither the old nor the new"), "{e}");
        // Two regular segments with a gap between them.
        let mut j = json;
        j["segments"]["0"]["size"] = "1048576".into();
        j["segments"]["3"] = j["segments"]["0"].clone();
        j["segments"]["3"]["offset"] = "18874368".into();
        j["digests"]["0"]["segments"] = serde_json::json!(["0", "1", "3"]);
        let e = layout(&j).unwrap_err().to_string();
        assert!(e.contains("not adjacent"), "{e}");
    }

    #[test]
    fn wrong_or_swapped_keys_fail() {
        let (json, old, new) = fixture();
        assert!(err(verify_digest(&json, Some(&new), Some(&old))).contains("does not match"));
        let mut bad = old.clone();
        bad[0] ^= 1;
        assert!(err(verify_digest(&json, Some(&bad), Some(&new))).contains("does not match"));
        assert!(err(verify_digest(&json, Some(&old), None)).contains("needs the new volume key"));
    }

    /// Each field the digest binds, changed, makes the digest fail (as cryptsetup's
    /// mangle test expects of mode, direction, area and segments).
    #[test]
    fn tampered_bound_fields_fail() {
        let (json, old, new) = fixture();
        type Edit = (&'static str, fn(&mut Value));
        let edits: [Edit; 8] = [
            ("mode", |j| j["keyslots"]["2"]["mode"] = "encrypt".into()),
            ("direction", |j| {
                j["keyslots"]["2"]["direction"] = "backward".into()
            }),
            ("area type", |j| {
                j["keyslots"]["2"]["area"]["type"] = "journal".into()
            }),
            ("area offset", |j| {
                j["keyslots"]["2"]["area"]["offset"] = "552960".into()
            }),
            ("area sector_size", |j| {
                j["keyslots"]["2"]["area"]["sector_size"] = 512.into()
            }),
            ("backup-previous offset", |j| {
                j["segments"]["1"]["offset"] = "16781312".into()
            }),
            ("backup-final cipher", |j| {
                j["segments"]["2"]["encryption"] = "aes-cbc-essiv:sha256".into()
            }),
            ("requirement version", |j| {
                j["config"]["requirements"]["mandatory"][0] = "online-reencrypt-v3".into()
            }),
        ];
        for (what, edit) in edits {
            let mut j = json.clone();
            edit(&mut j);
            let e = err(verify_digest(&j, Some(&old), Some(&new)));
            assert!(e.contains("does not match"), "{what}: {e}");
        }
    }

    #[test]
    fn unbound_fields_do_not_matter() {
        // The hot segments and the priority are outside the digest.
        let (mut json, old, new) = fixture();
        json["segments"]["0"]["size"] = "1048576".into();
        json["keyslots"]["2"]
            .as_object_mut()
            .unwrap()
            .remove("priority");
        verify_digest(&json, Some(&old), Some(&new)).unwrap();
    }

    #[test]
    fn hostile_requirements_are_refused() {
        let (json, old, new) = fixture();
        let mut j = json.clone();
        j["config"]["requirements"]["mandatory"][0] = "online-reencrypt-v999".into();
        assert!(err(verify_digest(&j, Some(&old), Some(&new))).contains("unknown version"));
        let mut j = json.clone();
        j["config"]["requirements"]["mandatory"] =
            serde_json::json!(["online-reencrypt-v2", "online-reencrypt-v2"]);
        assert!(err(verify_digest(&j, Some(&old), Some(&new))).contains("two reencryption flags"));
        let mut j = json.clone();
        j["config"]["requirements"]["mandatory"][0] = "online-reencrypt".into();
        assert!(err(verify_digest(&j, Some(&old), Some(&new))).contains("cryptsetup repair"));
        let mut j = json;
        j["keyslots"]["2"]["area"]["hash"] = "x".repeat(65).into();
        assert!(err(verify_digest(&j, Some(&old), Some(&new))).contains("longer than 64"));
    }
}
