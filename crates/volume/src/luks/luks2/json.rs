//! The LUKS2 JSON metadata: typed access to its fields and typed views of the parts
//! sectorcrypt interprets ([`Segment`], [`Keyslot`], [`Digest`]).
//!
//! The document is kept as a [`serde_json::Value`] and edited in place, so tokens, flags
//! and fields sectorcrypt does not interpret survive a rewrite; the views are read from it
//! when needed, from a document that passed [`validate`](super::validate). The views
//! bound every size (keys, stripes, KDF costs) before anything is allocated, and a
//! keyslot that cannot be used here (an unknown KDF or hash, absurd costs) is refused on
//! its own: the other keyslots still open the volume.

use super::Luks2;
use crate::error::{Error, KeyslotError, Result};
use crate::hash::HashAlg;
use crate::kdf::{Kdf, KdfKind, ARGON2_MAX_MEMORY_KIB, ARGON2_MIN_MEMORY_KIB};
use crate::luks::af;
use crate::luks::fields::align_up;
use crate::luks::keyslot::{digest_matches, MAX_KEY_BYTES};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{Map, Value};

/// LUKS2 keyslots are numbered 0..32.
pub const MAX_KEYSLOTS: usize = 32;
/// The largest keyslots area cryptsetup accepts (LUKS2_MAX_KEYSLOTS_SIZE, 128 MiB); it
/// also writes no larger one whatever the data offset.
pub const MAX_KEYSLOTS_SIZE: u64 = 128 << 20;
/// Keyslot areas are aligned to 4096 bytes, as cryptsetup does.
pub(super) const AREA_ALIGN: u64 = 4096;

/// The data segment that holds the volume.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Its id in `segments`.
    pub id: String,
    /// Byte offset of the data in the image.
    pub offset: u64,
    /// Size in bytes, or `None` for "dynamic" (up to the end of the image).
    pub size: Option<u64>,
    /// The IV number of the first sector, in 512-byte units.
    pub iv_tweak: u64,
    /// The cipher string.
    pub encryption: String,
    /// Encryption sector size.
    pub sector_size: usize,
}

/// A `luks2` keyslot.
#[derive(Debug, Clone)]
pub struct Keyslot {
    /// Keyslot number.
    pub id: usize,
    /// Length of the volume key it holds.
    pub key_size: usize,
    /// The AF splitter's hash and stripes.
    pub af_hash: HashAlg,
    /// AF stripes.
    pub stripes: usize,
    /// The area holding the encrypted AF material.
    pub area_offset: u64,
    /// Size of that area.
    pub area_size: u64,
    /// Cipher of the area.
    pub area_encryption: String,
    /// Key length of the area cipher (= the KDF output length).
    pub area_key_size: usize,
    /// The KDF and its costs.
    pub kdf: Kdf,
    /// The KDF salt.
    pub salt: Vec<u8>,
    /// 0 ignore, 1 normal, 2 high.
    pub priority: i64,
}

/// A `pbkdf2` digest of the volume key.
#[derive(Debug, Clone)]
pub struct Digest {
    /// Its id in `digests`.
    pub id: String,
    /// Keyslots it covers.
    pub keyslots: Vec<usize>,
    /// Segments it covers.
    pub segments: Vec<String>,
    hash: HashAlg,
    iterations: u32,
    salt: Vec<u8>,
    digest: Vec<u8>,
}

impl Digest {
    /// Whether `key` is the volume key this digest was made of.
    pub fn verify(&self, key: &[u8]) -> bool {
        // cryptsetup compares as many bytes as are stored: a volume converted from LUKS1
        // keeps LUKS1's 20-byte digest whatever the hash.
        digest_matches(self.hash, key, &self.salt, self.iterations, &self.digest)
    }
}

pub(super) fn corrupt(msg: impl Into<String>) -> Error {
    Error::corrupt(msg)
}

pub(super) fn obj<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a Map<String, Value>> {
    v.get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not an object")))
}

pub(super) fn str_of<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not a string")))
}

/// A u64 the specification stores as a decimal string.
pub(super) fn u64_str(v: &Value, key: &str, path: &str) -> Result<u64> {
    str_of(v, key, path)?
        .parse()
        .map_err(|_| corrupt(format!("json: {path}{key} is not a decimal number")))
}

pub(super) fn int_of(v: &Value, key: &str, path: &str) -> Result<u64> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not a number")))
}

pub(super) fn b64_of(v: &Value, key: &str, path: &str) -> Result<Vec<u8>> {
    B64.decode(str_of(v, key, path)?)
        .map_err(|_| corrupt(format!("json: {path}{key} is not base64")))
}

pub(super) fn id_list(v: &Value, key: &str, path: &str) -> Result<Vec<String>> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not an array")))?
        .iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .ok_or_else(|| corrupt(format!("json: {path}{key} holds a non-string")))
        })
        .collect()
}

pub(super) fn kdf_of(ks: &Value, path: &str) -> Result<(Kdf, Vec<u8>)> {
    let kdf = ks
        .get("kdf")
        .ok_or_else(|| corrupt(format!("json: {path}kdf is missing")))?;
    let p = format!("{path}kdf.");
    let kind = str_of(kdf, "type", &p)?;
    let salt = b64_of(kdf, "salt", &p)?;
    if salt.is_empty() {
        return Err(corrupt(format!("json: {p}salt is empty")));
    }
    let k = match kind {
        "pbkdf2" => Kdf::Pbkdf2 {
            hash: HashAlg::parse(str_of(kdf, "hash", &p)?)?,
            iterations: int_of(kdf, "iterations", &p)?
                .try_into()
                .ok()
                .filter(|&i: &u32| i >= 1)
                .ok_or_else(|| corrupt(format!("json: {p}iterations is out of range")))?,
        },
        "argon2i" | "argon2id" => {
            let num = |key: &str| -> Result<u32> {
                int_of(kdf, key, &p)?
                    .try_into()
                    .map_err(|_| corrupt(format!("json: {p}{key} is out of range")))
            };
            let (time, memory_kib, parallel) = (num("time")?, num("memory")?, num("cpus")?);
            // The bounds cryptsetup enforces: a header cannot make us allocate more.
            if time == 0
                || !(ARGON2_MIN_MEMORY_KIB..=ARGON2_MAX_MEMORY_KIB).contains(&memory_kib)
                || !(1..=16).contains(&parallel)
            {
                return Err(corrupt(format!(
                    "json: {p}: argon2 costs out of range (time {time}, memory {memory_kib} KiB, \
                     cpus {parallel})"
                )));
            }
            Kdf::Argon2 {
                kind: KdfKind::parse(kind)?,
                time,
                memory_kib,
                parallel,
            }
        }
        other => {
            return Err(Error::unsupported(format!(
                "keyslot kdf {other:?} (supported: {})",
                KdfKind::names(&KdfKind::ALL)
            )))
        }
    };
    Ok((k, salt))
}

/// The KDF of the keyslot JSON `ks` (keyslot `slot`).
pub(super) fn keyslot_kdf(ks: &Value, slot: usize) -> Result<Kdf> {
    if ks.is_null() {
        return Err(KeyslotError::NotActive(slot).into());
    }
    Ok(kdf_of(ks, &format!("keyslots.{slot}."))?.0)
}

/// `["0", "1"]` as `0 1` (for `dump`).
pub(super) fn id_list_text(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

pub(super) fn kdf_json(kdf: &Kdf, salt: &[u8]) -> Value {
    let mut v = kdf.to_json();
    v["salt"] = Value::String(B64.encode(salt));
    v
}

/// The typed view of keyslot `id`, or why it cannot be used here.
pub(super) fn keyslot(id: &str, ks: &Value) -> Result<Keyslot> {
    let path = format!("keyslots.{id}.");
    let kind = str_of(ks, "type", &path)?;
    if kind != "luks2" {
        return Err(Error::unsupported(format!("keyslot {id}: type {kind:?}")));
    }
    let af = ks
        .get("af")
        .ok_or_else(|| corrupt(format!("json: {path}af is missing")))?;
    let afp = format!("{path}af.");
    if str_of(af, "type", &afp)? != "luks1" {
        return Err(Error::unsupported(format!(
            "keyslot {id}: anti-forensic splitter {:?}",
            af["type"]
        )));
    }
    let area = &ks["area"];
    let ap = format!("{path}area.");
    if str_of(area, "type", &ap)? != "raw" {
        return Err(Error::unsupported(format!(
            "keyslot {id}: area type {:?}",
            area["type"]
        )));
    }
    let (kdf, salt) = kdf_of(ks, &path)?;
    let key_size = int_of(ks, "key_size", &path)?;
    let area_key_size = int_of(area, "key_size", &ap)?;
    let stripes = int_of(af, "stripes", &afp)?;
    let area_size = u64_str(area, "size", &ap)?;
    // Bounds before anything is allocated: AES keys are at most 64 bytes (XTS-256),
    // the area key is the volume key's size, and cryptsetup writes and reads 4000
    // stripes only.
    if !(1..=MAX_KEY_BYTES).contains(&key_size) || area_key_size != key_size {
        return Err(corrupt(format!(
            "json: keyslot {id}: key size {key_size} / area key size {area_key_size} \
                 (must be equal, 1 to {MAX_KEY_BYTES} bytes)"
        )));
    }
    if stripes != af::STRIPES as u64 {
        return Err(corrupt(format!(
            "json: keyslot {id}: {stripes} anti-forensic stripes (must be {})",
            af::STRIPES
        )));
    }
    if key_size
        .checked_mul(stripes)
        .is_none_or(|n| align_up(n, 512) > area_size)
    {
        return Err(corrupt(format!(
            "json: keyslot {id}: {stripes} stripes of {key_size} bytes do not fit its area"
        )));
    }
    let (key_size, stripes, area_key_size) =
        (key_size as usize, stripes as usize, area_key_size as usize);
    // Validation refuses other ids, but a refused header's keyslots are still described.
    let id = id
        .parse()
        .map_err(|_| corrupt(format!("json: keyslot id {id:?} is not a number")))?;
    Ok(Keyslot {
        id,
        key_size,
        af_hash: HashAlg::parse(str_of(af, "hash", &afp)?)?,
        stripes,
        area_offset: u64_str(area, "offset", &ap)?,
        area_size,
        area_encryption: str_of(area, "encryption", &ap)?.to_string(),
        area_key_size,
        kdf,
        salt,
        priority: ks.get("priority").and_then(Value::as_i64).unwrap_or(1),
    })
}

/// The shortest volume key digest accepted: LUKS1's, which conversions keep.
const MIN_DIGEST: usize = 20;

impl Luks2 {
    /// Size of the keyslots area.
    pub fn keyslots_size(&self) -> u64 {
        u64_str(&self.json["config"], "keyslots_size", "config.")
            .unwrap_or(0)
            .min(MAX_KEYSLOTS_SIZE)
    }

    /// The one data segment.
    pub fn segment(&self) -> Result<Segment> {
        let segs = obj(&self.json, "segments", "")?;
        if segs.len() != 1 {
            return Err(Error::unsupported(format!(
                "{} data segments (sectorcrypt opens volumes with exactly one; an unfinished \
                 reencryption leaves several)",
                segs.len()
            )));
        }
        let (id, seg) = segs.iter().next().expect("one segment");
        segment_of(id, seg)
    }

    /// The `luks2` keyslots, by id; an error if any of them cannot be used here.
    pub fn keyslots(&self) -> Result<Vec<Keyslot>> {
        self.keyslot_states().into_iter().map(|(_, k)| k).collect()
    }

    /// Every `luks2` keyslot by id (ascending), with its typed view or why it cannot be
    /// used here.
    pub fn keyslot_states(&self) -> Vec<(usize, Result<Keyslot>)> {
        let Some(keyslots) = self.json["keyslots"].as_object() else {
            return Vec::new();
        };
        let mut out: Vec<(usize, Result<Keyslot>)> = keyslots
            .iter()
            .filter(|(_, ks)| ks["type"].as_str() == Some("luks2"))
            .filter_map(|(id, ks)| Some((id.parse().ok()?, keyslot(id, ks))))
            .collect();
        out.sort_by_key(|(id, _)| *id);
        out
    }

    /// The digests.
    pub fn digests(&self) -> Result<Vec<Digest>> {
        let mut out = Vec::new();
        for (id, d) in obj(&self.json, "digests", "")? {
            let path = format!("digests.{id}.");
            let kind = str_of(d, "type", &path)?;
            if kind != "pbkdf2" {
                return Err(Error::unsupported(format!("digest type {kind:?}")));
            }
            let hash = HashAlg::parse(str_of(d, "hash", &path)?)?;
            let iterations: u32 = int_of(d, "iterations", &path)?
                .try_into()
                .map_err(|_| corrupt(format!("json: {path}iterations is out of range")))?;
            let salt = b64_of(d, "salt", &path)?;
            let digest = b64_of(d, "digest", &path)?;
            // A short digest would match too many keys: at least LUKS1's 20 bytes, which a
            // volume cryptsetup converted from LUKS1 keeps whatever the hash; at most
            // what one PBKDF2 block of the hash gives.
            if digest.len() < MIN_DIGEST || digest.len() > hash.output_len() {
                return Err(corrupt(format!(
                    "json: {path}digest has {} bytes; {} makes {MIN_DIGEST} to {}",
                    digest.len(),
                    hash.name(),
                    hash.output_len()
                )));
            }
            if salt.is_empty() || iterations == 0 {
                return Err(corrupt(format!("json: {path}: empty salt or 0 iterations")));
            }
            out.push(Digest {
                id: id.clone(),
                keyslots: id_list(d, "keyslots", &path)?
                    .iter()
                    .filter_map(|s| s.parse().ok())
                    .collect(),
                segments: id_list(d, "segments", &path)?,
                hash,
                iterations,
                salt,
                digest,
            });
        }
        Ok(out)
    }

    pub(super) fn segment_digest(&self, seg: &Segment) -> Result<Digest> {
        self.digests()?
            .into_iter()
            .find(|d| d.segments.contains(&seg.id))
            .ok_or_else(|| corrupt(format!("json: no digest covers segment {}", seg.id)))
    }
}

/// The typed view of segment `id` (a `crypt` segment without integrity protection).
pub(super) fn segment_of(id: &str, seg: &Value) -> Result<Segment> {
    let path = format!("segments.{id}.");
    let kind = str_of(seg, "type", &path)?;
    if kind == "linear" {
        return Err(Error::unsupported(
            "the data segment is linear (plaintext): this header encrypts nothing, as a \
             finished decryption (cryptsetup reencrypt --decrypt) leaves it; the data is \
             readable as it is",
        ));
    }
    if kind != "crypt" {
        return Err(Error::unsupported(format!(
            "segment type {kind:?} (only \"crypt\" is supported)"
        )));
    }
    if seg.get("integrity").is_some() {
        return Err(Error::unsupported(
            "the segment has integrity protection (dm-integrity / authenticated \
             encryption), which sectorcrypt does not implement",
        ));
    }
    let size = str_of(seg, "size", &path)?;
    let sector_size = int_of(seg, "sector_size", &path)? as usize;
    if !super::SECTOR_SIZES.contains(&sector_size) {
        return Err(corrupt(format!(
            "json: segment {id} sector size {sector_size} (must be one of {:?})",
            super::SECTOR_SIZES
        )));
    }
    Ok(Segment {
        id: id.to_string(),
        offset: u64_str(seg, "offset", &path)?,
        size: if size == "dynamic" {
            None
        } else {
            Some(size.parse().map_err(|_| corrupt("json: segment size"))?)
        },
        iv_tweak: u64_str(seg, "iv_tweak", &path)?,
        encryption: str_of(seg, "encryption", &path)?.to_string(),
        sector_size,
    })
}
