//! LUKS2 (cryptsetup's "LUKS2 On-Disk Format Specification", version 1.1.x).
//!
//! The metadata is two copies of (a 4096-byte binary header + a JSON area), at offset 0
//! and at `hdr_size`, each with a sequence id and a checksum (here sha256, or whatever
//! `csum_alg` names) over the whole copy with the checksum field zeroed. Reading takes the
//! valid copy with the higher sequence id; a missing or damaged copy is rewritten on the
//! next metadata write. Writes go to the stale copy first (the primary when both are
//! good), each followed by `fdatasync`, so a crash at any point leaves one valid copy: the
//! old metadata or the new.
//!
//! The JSON document is kept as a [`serde_json::Value`] and edited in place, so tokens,
//! flags and fields sectorcrypt does not interpret survive a rewrite. Typed views
//! ([`Segment`], [`Keyslot`], [`Digest`]) are read from it when needed.
//!
//! Binary header layout (all integers big-endian):
//! ```text
//!   0 magic[6]  "LUKS\xba\xbe" (primary) / "SKUL\xba\xbe" (secondary)
//!   6 version   u16 = 2
//!   8 hdr_size  u64 (binary header + json area: 16 KiB .. 4 MiB, a power of two)
//!  16 seqid     u64
//!  24 label[48]   72 csum_alg[32]   104 salt[64]   168 uuid[40]   208 subsystem[48]
//! 256 hdr_offset u64   264 padding[184]   448 csum[64]   512 padding[3584]
//! ```

use super::error::{Error, Result};
use super::hash::HashAlg;
use super::io::{align_up, be16, be64, cstr, put_cstr, read_exact_at, sync, write_all_at};
use super::kdf::{Kdf, KdfKind, KdfOptions};
use super::{af, ct_eq, random, Unlocked};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher, SectorLayout};
use serde_json::{json, Map, Value};
use std::fs::File;
use zeroize::Zeroizing;

/// Size of the binary part of each header copy.
pub const BIN_SIZE: usize = 4096;
const MAGIC_PRIMARY: &[u8; 6] = b"LUKS\xba\xbe";
const MAGIC_SECONDARY: &[u8; 6] = b"SKUL\xba\xbe";
/// The header sizes the specification allows (binary header + JSON area).
pub const HDR_SIZES: [u64; 9] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
];
/// LUKS2 keyslots are numbered 0..32.
pub const MAX_KEYSLOTS: usize = 32;
/// The largest key any supported cipher takes (AES-256-XTS: 64 bytes).
pub const MAX_KEY_BYTES: u64 = 64;
/// The largest keyslots area cryptsetup accepts (LUKS2_MAX_KEYSLOTS_SIZE, 128 MiB); it
/// also writes no larger one whatever the data offset.
pub const MAX_KEYSLOTS_SIZE: u64 = 128 << 20;
/// Keyslot areas are aligned to 4096 bytes, as cryptsetup does.
const AREA_ALIGN: u64 = 4096;

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
        if self.digest.is_empty() || self.digest.len() != self.hash.output_len() {
            return false;
        }
        let mut out = Zeroizing::new(vec![0u8; self.digest.len()]);
        self.hash.pbkdf2(key, &self.salt, self.iterations, &mut out);
        ct_eq(&out, &self.digest)
    }
}

/// A parsed LUKS2 header (both copies' state and the metadata of the newer valid one).
#[derive(Clone)]
pub struct Luks2 {
    hdr_size: u64,
    seqid: u64,
    label: String,
    subsystem: String,
    csum_alg: String,
    uuid: String,
    salts: [[u8; 64]; 2],
    json: Value,
    /// Whether each copy (primary, secondary) is valid and current.
    current: [bool; 2],
    /// Why a copy was not used, for `dump`.
    damage: Vec<String>,
}

impl std::fmt::Debug for Luks2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Luks2")
            .field("uuid", &self.uuid)
            .field("seqid", &self.seqid)
            .field("hdr_size", &self.hdr_size)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

struct Copy {
    hdr_size: u64,
    seqid: u64,
    label: String,
    subsystem: String,
    csum_alg: String,
    uuid: String,
    salt: [u8; 64],
    json: Value,
}

fn checksum(alg: &str, copy: &[u8]) -> Result<Vec<u8>> {
    let hash = HashAlg::parse(alg)
        .map_err(|_| Error::Unsupported(format!("header checksum algorithm {alg:?}")))?;
    let mut zeroed = copy.to_vec();
    zeroed[448..512].fill(0);
    Ok(hash.digest(&[&zeroed]))
}

/// Parses and checks one header copy of `buf.len()` bytes found at `at`.
fn parse_copy(buf: &[u8], at: u64) -> Result<Copy> {
    let magic = if at == 0 {
        MAGIC_PRIMARY
    } else {
        MAGIC_SECONDARY
    };
    if &buf[..6] != magic {
        return Err(Error::Corrupt(format!("no header magic at offset {at}")));
    }
    let version = be16(buf, 6);
    if version != 2 {
        return Err(Error::Corrupt(format!(
            "header at offset {at} has version {version}, expected 2"
        )));
    }
    let hdr_size = be64(buf, 8);
    if !HDR_SIZES.contains(&hdr_size) || hdr_size != buf.len() as u64 {
        return Err(Error::Corrupt(format!(
            "header at offset {at} has an invalid size {hdr_size}"
        )));
    }
    let hdr_offset = be64(buf, 256);
    if hdr_offset != at {
        return Err(Error::Corrupt(format!(
            "header at offset {at} says it lives at offset {hdr_offset}"
        )));
    }
    let csum_alg = cstr(&buf[72..104], "checksum algorithm")?;
    let want = checksum(&csum_alg, buf)?;
    if !ct_eq(&want, &buf[448..448 + want.len()]) {
        return Err(Error::Corrupt(format!(
            "header at offset {at}: checksum mismatch"
        )));
    }
    let area = &buf[BIN_SIZE..];
    let end = area.iter().position(|&c| c == 0).ok_or_else(|| {
        Error::Corrupt(format!(
            "header at offset {at}: json area is not terminated"
        ))
    })?;
    let json: Value = serde_json::from_slice(&area[..end])
        .map_err(|e| Error::Corrupt(format!("header at offset {at}: invalid json: {e}")))?;
    validate(&json, hdr_size).map_err(|e| match e {
        Error::Corrupt(m) => Error::Corrupt(format!("header at offset {at}: {m}")),
        e => e,
    })?;
    Ok(Copy {
        hdr_size,
        seqid: be64(buf, 16),
        label: cstr(&buf[24..72], "label")?,
        csum_alg,
        salt: buf[104..168].try_into().expect("64 bytes"),
        uuid: cstr(&buf[168..208], "uuid")?,
        subsystem: cstr(&buf[208..256], "subsystem")?,
        json,
    })
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::Corrupt(msg.into())
}

fn obj<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a Map<String, Value>> {
    v.get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not an object")))
}

fn str_of<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not a string")))
}

/// A u64 the specification stores as a decimal string.
fn u64_str(v: &Value, key: &str, path: &str) -> Result<u64> {
    str_of(v, key, path)?
        .parse()
        .map_err(|_| corrupt(format!("json: {path}{key} is not a decimal number")))
}

fn int_of(v: &Value, key: &str, path: &str) -> Result<u64> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| corrupt(format!("json: {path}{key} is missing or not a number")))
}

fn b64_of(v: &Value, key: &str, path: &str) -> Result<Vec<u8>> {
    B64.decode(str_of(v, key, path)?)
        .map_err(|_| corrupt(format!("json: {path}{key} is not base64")))
}

fn id_list(v: &Value, key: &str, path: &str) -> Result<Vec<String>> {
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

/// The structural checks cryptsetup also makes, enough that the typed views cannot fail
/// on a header that passed them for the fields sectorcrypt uses.
fn validate(json: &Value, hdr_size: u64) -> Result<()> {
    if !json.is_object() {
        return Err(corrupt("json: metadata is not an object"));
    }
    for key in ["keyslots", "segments", "digests", "config"] {
        obj(json, key, "")?;
    }
    let config = &json["config"];
    let json_size = u64_str(config, "json_size", "config.")?;
    if json_size != hdr_size - BIN_SIZE as u64 {
        return Err(corrupt(format!(
            "json: config.json_size {json_size} does not match the header size {hdr_size}"
        )));
    }
    let keyslots_size = u64_str(config, "keyslots_size", "config.")?;
    if keyslots_size > MAX_KEYSLOTS_SIZE || !keyslots_size.is_multiple_of(AREA_ALIGN) {
        return Err(corrupt(format!(
            "json: config.keyslots_size {keyslots_size} (at most {MAX_KEYSLOTS_SIZE}, a \
             multiple of {AREA_ALIGN})"
        )));
    }
    // hdr_size is at most 4 MiB and keyslots_size 128 MiB: no overflow.
    let area_end = 2 * hdr_size + keyslots_size;
    for (id, ks) in obj(json, "keyslots", "")? {
        let n: usize = id
            .parse()
            .map_err(|_| corrupt(format!("json: keyslot id {id:?} is not a number")))?;
        if n >= MAX_KEYSLOTS {
            return Err(corrupt(format!("json: keyslot id {n} is out of range")));
        }
        let path = format!("keyslots.{id}.");
        str_of(ks, "type", &path)?;
        if let Some(area) = ks.get("area") {
            let p = format!("{path}area.");
            let off = u64_str(area, "offset", &p)?;
            let size = u64_str(area, "size", &p)?;
            if off < 2 * hdr_size || off.checked_add(size).is_none_or(|e| e > area_end) {
                return Err(corrupt(format!(
                    "json: keyslot {id} area {off}+{size} lies outside the keyslots area"
                )));
            }
        }
    }
    for (id, seg) in obj(json, "segments", "")? {
        id.parse::<u64>()
            .map_err(|_| corrupt(format!("json: segment id {id:?} is not a number")))?;
        let path = format!("segments.{id}.");
        str_of(seg, "type", &path)?;
        let off = u64_str(seg, "offset", &path)?;
        if off < area_end && off != 0 {
            // Offset 0 is a detached header (data on another device).
            return Err(corrupt(format!(
                "json: segment {id} at {off} overlaps the metadata and keyslots ({area_end} bytes)"
            )));
        }
        let size = str_of(seg, "size", &path)?;
        if size != "dynamic" && size.parse::<u64>().is_err() {
            return Err(corrupt(format!(
                "json: segment {id} size {size:?} is invalid"
            )));
        }
    }
    for (id, d) in obj(json, "digests", "")? {
        let path = format!("digests.{id}.");
        str_of(d, "type", &path)?;
        id_list(d, "keyslots", &path)?;
        id_list(d, "segments", &path)?;
    }
    Ok(())
}

fn kdf_of(ks: &Value, path: &str) -> Result<(Kdf, Vec<u8>)> {
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
                || !(super::kdf::ARGON2_MIN_MEMORY_KIB..=super::kdf::ARGON2_MAX_MEMORY_KIB)
                    .contains(&memory_kib)
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
            return Err(Error::Unsupported(format!(
                "keyslot kdf {other:?} (supported: pbkdf2, argon2i, argon2id)"
            )))
        }
    };
    Ok((k, salt))
}

fn kdf_json(kdf: &Kdf, salt: &[u8]) -> Value {
    match *kdf {
        Kdf::Pbkdf2 { hash, iterations } => json!({
            "type": "pbkdf2", "hash": hash.name(), "iterations": iterations,
            "salt": B64.encode(salt),
        }),
        Kdf::Argon2 {
            kind,
            time,
            memory_kib,
            parallel,
        } => json!({
            "type": kind.name(), "time": time, "memory": memory_kib, "cpus": parallel,
            "salt": B64.encode(salt),
        }),
    }
}

/// Maps a cipher string of a segment or keyslot area onto the crypto core, checking the
/// key length.
pub fn cipher_spec(encryption: &str, key_len: usize) -> Result<CipherSpec> {
    let spec: CipherSpec = match encryption.parse() {
        Ok(s) if encryption != "aes-ecb" => s,
        _ => {
            return Err(Error::Unsupported(format!(
                "cipher {encryption:?} (supported: aes-xts-plain64, aes-xts-plain, \
                 aes-cbc-plain64, aes-cbc-plain, aes-cbc-essiv:sha256)"
            )))
        }
    };
    if !spec.key_lengths().contains(&key_len) {
        return Err(Error::Unsupported(format!(
            "cipher {encryption} with a {}-bit key",
            key_len * 8
        )));
    }
    Ok(spec)
}

/// Encrypts or decrypts keyslot material: the area's cipher, 512-byte sectors, IVs
/// counted from 0 at the start of the area (cryptsetup's keyslot encryption).
pub fn crypt_area(encryption: &str, key: &[u8], data: &mut [u8], encrypt: bool) -> Result<()> {
    let spec = cipher_spec(encryption, key.len())?;
    let cipher = SectorCipher::new(spec, key, SectorLayout::new(512, false)?)?;
    if encrypt {
        cipher.encrypt(0, data)?;
    } else {
        cipher.decrypt(0, data)?;
    }
    Ok(())
}

/// Where and how a keyslot's material is stored (LUKS1 and LUKS2 alike).
pub(crate) struct Material<'a> {
    pub(crate) kdf: &'a Kdf,
    pub(crate) salt: &'a [u8],
    pub(crate) area_offset: u64,
    pub(crate) area_encryption: &'a str,
    pub(crate) area_key_size: usize,
    pub(crate) key_size: usize,
    pub(crate) stripes: usize,
    pub(crate) af_hash: HashAlg,
}

/// Unlocks keyslot material: derive, read, decrypt, merge. Returns the candidate key.
pub(crate) fn open_material(
    file: &File,
    passphrase: &[u8],
    m: &Material<'_>,
) -> Result<Zeroizing<Vec<u8>>> {
    if m.area_key_size == 0
        || m.area_key_size as u64 > MAX_KEY_BYTES
        || m.key_size == 0
        || m.key_size as u64 > MAX_KEY_BYTES
        || m.stripes != af::STRIPES
    {
        return Err(Error::Corrupt(format!(
            "keyslot: key size {}, area key size {}, {} stripes",
            m.key_size, m.area_key_size, m.stripes
        )));
    }
    // At most 64 * 4000 bytes, after the checks above.
    let len = align_up((m.key_size * m.stripes) as u64, 512);
    let image = super::io::image_size(file)?;
    let end = m.area_offset.checked_add(len);
    if end.is_none_or(|e| e > image) {
        return Err(Error::Truncated(format!(
            "the keyslot area {}+{len} lies beyond the end of the image ({image} bytes)",
            m.area_offset
        )));
    }
    let len = len as usize;
    let mut derived = Zeroizing::new(vec![0u8; m.area_key_size]);
    m.kdf.derive(passphrase, m.salt, &mut derived)?;
    let mut material = Zeroizing::new(vec![0u8; len]);
    read_exact_at(file, &mut material, m.area_offset, "keyslot area")?;
    crypt_area(m.area_encryption, &derived, &mut material, false)?;
    Ok(af::merge(&material, m.key_size, m.stripes, m.af_hash))
}

/// Builds keyslot material for `key` under `passphrase`: returns (salt, encrypted area).
pub fn seal_material(
    passphrase: &[u8],
    key: &[u8],
    kdf: &Kdf,
    area_encryption: &str,
    area_key_size: usize,
    af_hash: HashAlg,
) -> Result<(Vec<u8>, Zeroizing<Vec<u8>>)> {
    let mut salt = vec![0u8; 32];
    random(&mut salt)?;
    let mut derived = Zeroizing::new(vec![0u8; area_key_size]);
    kdf.derive(passphrase, &salt, &mut derived)?;
    let split = af::split(key, af::STRIPES, af_hash)?;
    let len = align_up(split.len() as u64, 512) as usize;
    let mut material = Zeroizing::new(vec![0u8; len]);
    material[..split.len()].copy_from_slice(&split);
    crypt_area(area_encryption, &derived, &mut material, true)?;
    Ok((salt, material))
}

/// What [`Luks2::format`] needs.
pub(crate) struct FormatParams<'a> {
    pub(crate) cipher: &'a str,
    pub(crate) volume_key: &'a [u8],
    pub(crate) sector_size: usize,
    pub(crate) label: &'a str,
    pub(crate) uuid: &'a str,
    pub(crate) data_offset: u64,
    pub(crate) digest_iterations: u32,
    pub(crate) hash: HashAlg,
}

impl Luks2 {
    /// Reads the header copies; `first` holds the first 4096 bytes of the image.
    pub fn read(file: &File, first: &[u8]) -> Result<Luks2> {
        let mut damage = Vec::new();
        let mut primary = None;
        let mut hinted = None;
        if &first[..6] == MAGIC_PRIMARY {
            let size = be64(first, 8);
            if HDR_SIZES.contains(&size) {
                hinted = Some(size);
                let mut buf = vec![0u8; size as usize];
                match read_exact_at(file, &mut buf, 0, "primary luks2 header")
                    .and_then(|_| parse_copy(&buf, 0))
                {
                    Ok(c) => primary = Some(c),
                    Err(e) => damage.push(format!("primary header: {e}")),
                }
            } else {
                damage.push(format!("primary header: invalid header size {size}"));
            }
        } else {
            damage.push("primary header: no luks magic".into());
        }
        // The secondary copy sits at hdr_size; with a damaged primary, try every size.
        let mut secondary = None;
        let mut offsets: Vec<u64> = hinted.into_iter().collect();
        offsets.extend(HDR_SIZES.iter().filter(|&&s| Some(s) != hinted));
        let mut found_magic = false;
        let mut sec_err = None;
        for at in offsets {
            let mut bin = [0u8; BIN_SIZE];
            if read_exact_at(file, &mut bin, at, "secondary luks2 header").is_err() {
                continue;
            }
            if &bin[..6] != MAGIC_SECONDARY {
                continue;
            }
            found_magic = true;
            let size = be64(&bin, 8);
            if size != at {
                sec_err = Some(format!("invalid header size {size} at offset {at}"));
                continue;
            }
            let mut buf = vec![0u8; size as usize];
            match read_exact_at(file, &mut buf, at, "secondary luks2 header")
                .and_then(|_| parse_copy(&buf, at))
            {
                Ok(c) => {
                    secondary = Some(c);
                    break;
                }
                Err(e) => sec_err = Some(e.to_string()),
            }
        }
        if secondary.is_none() {
            damage.push(format!(
                "secondary header: {}",
                sec_err.unwrap_or_else(|| if found_magic {
                    "damaged".into()
                } else {
                    "not found".into()
                })
            ));
        }
        let primary_magic = &first[..6] == MAGIC_PRIMARY;
        let (chosen, current) = match (primary, secondary) {
            (None, None) if !primary_magic && !found_magic => {
                return Err(Error::NotLuks(
                    "no luks header (no magic at the start, no secondary luks2 header)".into(),
                ))
            }
            (None, None) => {
                return Err(Error::Corrupt(format!(
                    "both luks2 header copies are damaged ({})",
                    damage.join("; ")
                )))
            }
            (Some(p), None) => (p, [true, false]),
            (None, Some(s)) => (s, [false, true]),
            (Some(p), Some(s)) => {
                if p.hdr_size != s.hdr_size {
                    damage.push("the copies disagree on the header size".into());
                }
                if s.seqid > p.seqid {
                    damage.push(format!(
                        "primary header is older (seqid {} < {})",
                        p.seqid, s.seqid
                    ));
                    (s, [false, true])
                } else if p.seqid > s.seqid {
                    damage.push(format!(
                        "secondary header is older (seqid {} < {})",
                        s.seqid, p.seqid
                    ));
                    (p, [true, false])
                } else {
                    let same = p.json == s.json && p.hdr_size == s.hdr_size;
                    (p, [true, same])
                }
            }
        };
        Ok(Luks2 {
            hdr_size: chosen.hdr_size,
            seqid: chosen.seqid,
            label: chosen.label,
            subsystem: chosen.subsystem,
            csum_alg: chosen.csum_alg,
            uuid: chosen.uuid,
            salts: [chosen.salt, chosen.salt],
            json: chosen.json,
            current,
            damage,
        })
    }

    /// A new header in memory (nothing written): one crypt segment, one digest, no keyslot.
    pub(crate) fn format(p: &FormatParams<'_>) -> Result<Luks2> {
        let hdr_size = HDR_SIZES[0];
        let keyslots_size = p
            .data_offset
            .checked_sub(2 * hdr_size)
            .ok_or_else(|| {
                Error::Invalid("the data offset leaves no room for the metadata".into())
            })?
            .min(MAX_KEYSLOTS_SIZE);
        let mut salt = vec![0u8; 32];
        random(&mut salt)?;
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
        random(&mut salts[0])?;
        random(&mut salts[1])?;
        // The label field is 48 bytes, NUL-terminated.
        if p.label.len() > 47 || p.label.contains('\0') {
            return Err(Error::Invalid(format!(
                "the label is {} bytes; at most 47 bytes, without NUL characters",
                p.label.len()
            )));
        }
        Ok(Luks2 {
            hdr_size,
            seqid: 0,
            label: p.label.to_string(),
            subsystem: String::new(),
            csum_alg: "sha256".into(),
            uuid: p.uuid.to_string(),
            salts,
            json,
            current: [false, false],
            damage: Vec::new(),
        })
    }

    /// The metadata JSON.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// Volume UUID.
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Subsystem.
    pub fn subsystem(&self) -> &str {
        &self.subsystem
    }

    /// The sequence id (cryptsetup's "epoch").
    pub fn seqid(&self) -> u64 {
        self.seqid
    }

    /// Size of one header copy.
    pub fn hdr_size(&self) -> u64 {
        self.hdr_size
    }

    /// Size of the keyslots area.
    pub fn keyslots_size(&self) -> u64 {
        u64_str(&self.json["config"], "keyslots_size", "config.")
            .unwrap_or(0)
            .min(MAX_KEYSLOTS_SIZE)
    }

    /// Bytes of metadata and keyslot areas at the start of the image (what a header
    /// backup holds).
    pub fn metadata_size(&self) -> u64 {
        2 * self.hdr_size + self.keyslots_size()
    }

    /// Whether one copy is damaged or stale (it is rewritten on the next metadata write).
    pub fn needs_repair(&self) -> bool {
        !(self.current[0] && self.current[1])
    }

    /// Problems found while reading.
    pub fn damage(&self) -> &[String] {
        &self.damage
    }

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
                let hint = if mandatory.iter().any(|m| m.contains("reencrypt")) {
                    " (a reencryption is in progress: finish it with cryptsetup first)"
                } else {
                    ""
                };
                return Err(Error::Unsupported(format!(
                    "the volume requires {}, which sectorcrypt does not implement{hint}",
                    mandatory.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// The one data segment.
    pub fn segment(&self) -> Result<Segment> {
        let segs = obj(&self.json, "segments", "")?;
        if segs.len() != 1 {
            return Err(Error::Unsupported(format!(
                "{} data segments (sectorcrypt opens volumes with exactly one; an unfinished \
                 reencryption leaves several)",
                segs.len()
            )));
        }
        let (id, seg) = segs.iter().next().expect("one segment");
        let path = format!("segments.{id}.");
        let kind = str_of(seg, "type", &path)?;
        if kind != "crypt" {
            return Err(Error::Unsupported(format!(
                "segment type {kind:?} (only \"crypt\" is supported)"
            )));
        }
        if seg.get("integrity").is_some() {
            return Err(Error::Unsupported(
                "the segment has integrity protection (dm-integrity / authenticated \
                 encryption), which sectorcrypt does not implement"
                    .into(),
            ));
        }
        let size = str_of(seg, "size", &path)?;
        let sector_size = int_of(seg, "sector_size", &path)? as usize;
        if !(512..=4096).contains(&sector_size) || !sector_size.is_power_of_two() {
            return Err(corrupt(format!(
                "json: segment {id} sector size {sector_size} (must be 512 to 4096, a power of two)"
            )));
        }
        Ok(Segment {
            id: id.clone(),
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

    /// The `luks2` keyslots, by id.
    pub fn keyslots(&self) -> Result<Vec<Keyslot>> {
        let mut out = Vec::new();
        for (id, ks) in obj(&self.json, "keyslots", "")? {
            let path = format!("keyslots.{id}.");
            if str_of(ks, "type", &path)? != "luks2" {
                continue;
            }
            let af = ks
                .get("af")
                .ok_or_else(|| corrupt(format!("json: {path}af is missing")))?;
            let afp = format!("{path}af.");
            if str_of(af, "type", &afp)? != "luks1" {
                return Err(Error::Unsupported(format!(
                    "keyslot {id}: anti-forensic splitter {:?}",
                    af["type"]
                )));
            }
            let area = &ks["area"];
            let ap = format!("{path}area.");
            if str_of(area, "type", &ap)? != "raw" {
                return Err(Error::Unsupported(format!(
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
            out.push(Keyslot {
                id: id.parse().expect("validated"),
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
            });
        }
        out.sort_by_key(|k| k.id);
        Ok(out)
    }

    /// The digests.
    pub fn digests(&self) -> Result<Vec<Digest>> {
        let mut out = Vec::new();
        for (id, d) in obj(&self.json, "digests", "")? {
            let path = format!("digests.{id}.");
            let kind = str_of(d, "type", &path)?;
            if kind != "pbkdf2" {
                return Err(Error::Unsupported(format!("digest type {kind:?}")));
            }
            let hash = HashAlg::parse(str_of(d, "hash", &path)?)?;
            let iterations: u32 = int_of(d, "iterations", &path)?
                .try_into()
                .map_err(|_| corrupt(format!("json: {path}iterations is out of range")))?;
            let salt = b64_of(d, "salt", &path)?;
            let digest = b64_of(d, "digest", &path)?;
            // An empty or short digest would match any key: refuse it.
            if digest.len() != hash.output_len() {
                return Err(corrupt(format!(
                    "json: {path}digest has {} bytes, {} makes {}",
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

    fn segment_digest(&self, seg: &Segment) -> Result<Digest> {
        self.digests()?
            .into_iter()
            .find(|d| d.segments.contains(&seg.id))
            .ok_or_else(|| corrupt(format!("json: no digest covers segment {}", seg.id)))
    }

    /// Tries the keyslots (priority high, then normal; `ignore` ones only when asked for by
    /// number) and returns the volume key and the keyslot that opened.
    pub fn unlock(
        &self,
        file: &File,
        passphrase: &[u8],
        only: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        self.check_supported()?;
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?;
        let mut slots: Vec<Keyslot> = self
            .keyslots()?
            .into_iter()
            .filter(|k| digest.keyslots.contains(&k.id))
            .filter(|k| match only {
                Some(n) => k.id == n,
                None => k.priority > 0,
            })
            .collect();
        if let Some(n) = only {
            if slots.is_empty() {
                return Err(Error::KeyslotNotActive(n));
            }
        }
        if slots.is_empty() {
            return Err(Error::NoKeyslot);
        }
        slots.sort_by_key(|k| (-k.priority, k.id));
        let mut last_err = None;
        for ks in &slots {
            let r = open_material(
                file,
                passphrase,
                &Material {
                    kdf: &ks.kdf,
                    salt: &ks.salt,
                    area_offset: ks.area_offset,
                    area_encryption: &ks.area_encryption,
                    area_key_size: ks.area_key_size,
                    key_size: ks.key_size,
                    stripes: ks.stripes,
                    af_hash: ks.af_hash,
                },
            );
            match r {
                Ok(key) if digest.verify(&key) => return Ok((key, ks.id)),
                Ok(_) => {}
                Err(e @ (Error::Truncated(_) | Error::Io(_))) => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or(Error::WrongPassphrase))
    }

    /// What an open volume looks like for the sector engine.
    pub fn unlocked(
        &self,
        file: &File,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        let seg = self.segment()?;
        let spec = cipher_spec(&seg.encryption, key.len())?;
        let layout = SectorLayout::new(seg.sector_size, false)?;
        let image = super::io::image_size(file)?;
        let data_size = match seg.size {
            Some(s) => match seg.offset.checked_add(s) {
                Some(end) if end <= image => s,
                end => {
                    return Err(Error::Truncated(format!(
                        "the data segment {}+{s} ends at {} but the image has {image} bytes",
                        seg.offset,
                        end.map_or("beyond 2^64".to_string(), |e| e.to_string())
                    )))
                }
            },
            None => {
                if image < seg.offset {
                    return Err(Error::Truncated(format!(
                        "the data area starts at {} but the image has {image} bytes",
                        seg.offset
                    )));
                }
                image - seg.offset
            }
        };
        let data_size = data_size / seg.sector_size as u64 * seg.sector_size as u64;
        Ok(Unlocked {
            volume_key: key,
            cipher: seg.encryption.clone(),
            spec,
            layout,
            data_offset: seg.offset,
            data_size,
            iv_offset: seg.iv_tweak,
            keyslot,
        })
    }

    /// Whether `key` matches the volume key digest.
    pub fn verify_key(&self, key: &[u8]) -> Result<bool> {
        let seg = self.segment()?;
        Ok(self.segment_digest(&seg)?.verify(key))
    }

    /// The first gap of `need` bytes in the keyslots area (areas of every keyslot, the one
    /// being replaced included, are in use until the header no longer names them).
    fn free_area(&self, need: u64) -> Result<u64> {
        let mut used: Vec<(u64, u64)> = Vec::new();
        for ks in obj(&self.json, "keyslots", "")?.values() {
            if let Some(area) = ks.get("area") {
                used.push((
                    u64_str(area, "offset", "area.")?,
                    u64_str(area, "size", "area.")?,
                ));
            }
        }
        used.sort();
        let start = 2 * self.hdr_size;
        let end = start + self.keyslots_size();
        let mut pos = start;
        for (off, size) in used {
            if pos + need <= off {
                break;
            }
            pos = pos.max(align_up(off + size, AREA_ALIGN));
        }
        if pos + need > end {
            return Err(Error::NoFreeKeyslot(
                "the keyslots area has no room for another keyslot".into(),
            ));
        }
        Ok(pos)
    }

    /// Writes a new keyslot holding `key` (already verified) and records it. With
    /// `replace`, that keyslot id is taken over (change-key) and its old area wiped after
    /// the header write. Returns the keyslot id.
    pub fn add_keyslot(
        &mut self,
        file: &File,
        key: &[u8],
        passphrase: &[u8],
        opts: &KdfOptions,
        slot: Option<usize>,
        replace: Option<usize>,
    ) -> Result<usize> {
        self.check_supported()?;
        let seg = self.segment()?;
        let digest = self.segment_digest(&seg)?;
        let taken: Vec<usize> = obj(&self.json, "keyslots", "")?
            .keys()
            .filter_map(|k| k.parse().ok())
            .collect();
        let id = match (replace, slot) {
            (Some(r), _) => r,
            (None, Some(n)) if n >= MAX_KEYSLOTS => {
                return Err(Error::Invalid(format!(
                    "keyslot {n} is out of range (0 to {})",
                    MAX_KEYSLOTS - 1
                )))
            }
            (None, Some(n)) if taken.contains(&n) => {
                return Err(Error::NoFreeKeyslot(format!("keyslot {n} is in use")))
            }
            (None, Some(n)) => n,
            (None, None) => (0..MAX_KEYSLOTS)
                .find(|n| !taken.contains(n))
                .ok_or_else(|| Error::NoFreeKeyslot("all 32 keyslots are in use".into()))?,
        };
        let old_area = match replace {
            Some(r) => {
                let ks = &self.json["keyslots"][r.to_string()]["area"];
                Some((
                    u64_str(ks, "offset", "area.")?,
                    u64_str(ks, "size", "area.")?,
                ))
            }
            None => None,
        };
        let area_key_size = key.len();
        cipher_spec(&seg.encryption, area_key_size)?;
        let need = align_up((key.len() * af::STRIPES) as u64, AREA_ALIGN);
        let offset = self.free_area(need)?;
        let image = super::io::image_size(file)?;
        if offset + need > image {
            return Err(Error::Truncated(format!(
                "the new keyslot area {offset}+{need} lies beyond the end of the image \
                 ({image} bytes)"
            )));
        }
        let kdf = opts.resolve(area_key_size)?;
        let (salt, material) = seal_material(
            passphrase,
            key,
            &kdf,
            &seg.encryption,
            area_key_size,
            opts.hash,
        )?;
        let mut json = self.json.clone();
        json["keyslots"][id.to_string()] = json!({
            "type": "luks2",
            "key_size": key.len(),
            "af": {"type": "luks1", "stripes": af::STRIPES, "hash": opts.hash.name()},
            "area": {
                "type": "raw",
                "offset": offset.to_string(),
                "size": need.to_string(),
                "encryption": seg.encryption,
                "key_size": area_key_size,
            },
            "kdf": kdf_json(&kdf, &salt),
        });
        let list = json["digests"][&digest.id]["keyslots"]
            .as_array_mut()
            .expect("validated");
        if !list.iter().any(|v| v.as_str() == Some(&id.to_string())) {
            list.push(Value::String(id.to_string()));
        }
        self.check_fits(&json)?;
        // The material first, in an area no keyslot uses; then the metadata that points
        // at it.
        write_all_at(file, &material, offset)?;
        sync(file)?;
        self.json = json;
        self.write(file)?;
        if let Some((off, size)) = old_area {
            super::io::wipe(file, off, size, true)?;
            sync(file)?;
        }
        Ok(id)
    }

    /// Removes keyslots (`None`: all of them) from the metadata, writes it, then wipes
    /// their areas (`all`: the whole keyslots area).
    pub fn remove_keyslots(&mut self, file: &File, which: Option<usize>) -> Result<()> {
        self.check_supported()?;
        let ids: Vec<String> = match which {
            Some(n) => {
                if self.json["keyslots"].get(n.to_string()).is_none() {
                    return Err(Error::KeyslotNotActive(n));
                }
                vec![n.to_string()]
            }
            None => obj(&self.json, "keyslots", "")?.keys().cloned().collect(),
        };
        let mut areas = Vec::new();
        let mut json = self.json.clone();
        for id in &ids {
            if let Some(area) = json["keyslots"][id].get("area") {
                areas.push((
                    u64_str(area, "offset", "area.")?,
                    u64_str(area, "size", "area.")?,
                ));
            }
            json["keyslots"]
                .as_object_mut()
                .expect("validated")
                .remove(id);
            for section in ["digests", "tokens"] {
                if let Some(m) = json.get_mut(section).and_then(Value::as_object_mut) {
                    for (_, entry) in m.iter_mut() {
                        if let Some(list) = entry.get_mut("keyslots").and_then(Value::as_array_mut)
                        {
                            list.retain(|v| v.as_str() != Some(id));
                        }
                    }
                }
            }
        }
        self.json = json;
        self.write(file)?;
        if which.is_none() {
            areas = vec![(2 * self.hdr_size, self.keyslots_size())];
        }
        for (off, size) in areas {
            super::io::wipe(file, off, size, true)?;
        }
        sync(file)
    }

    fn check_fits(&self, json: &Value) -> Result<()> {
        let text = serde_json::to_vec(json).map_err(|e| Error::Invalid(e.to_string()))?;
        if text.len() >= (self.hdr_size as usize - BIN_SIZE) {
            return Err(Error::NoFreeKeyslot(format!(
                "the metadata would take {} bytes; the json area holds {}",
                text.len(),
                self.hdr_size as usize - BIN_SIZE - 1
            )));
        }
        Ok(())
    }

    fn copy_bytes(&self, which: usize, text: &[u8]) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.hdr_size as usize];
        buf[..6].copy_from_slice(if which == 0 {
            MAGIC_PRIMARY
        } else {
            MAGIC_SECONDARY
        });
        buf[6..8].copy_from_slice(&2u16.to_be_bytes());
        buf[8..16].copy_from_slice(&self.hdr_size.to_be_bytes());
        buf[16..24].copy_from_slice(&self.seqid.to_be_bytes());
        put_cstr(&mut buf[24..72], &self.label, "label")?;
        put_cstr(&mut buf[72..104], &self.csum_alg, "checksum algorithm")?;
        buf[104..168].copy_from_slice(&self.salts[which]);
        put_cstr(&mut buf[168..208], &self.uuid, "uuid")?;
        put_cstr(&mut buf[208..256], &self.subsystem, "subsystem")?;
        let at = if which == 0 { 0 } else { self.hdr_size };
        buf[256..264].copy_from_slice(&at.to_be_bytes());
        buf[BIN_SIZE..BIN_SIZE + text.len()].copy_from_slice(text);
        let sum = checksum(&self.csum_alg, &buf)?;
        buf[448..448 + sum.len()].copy_from_slice(&sum);
        Ok(buf)
    }

    fn write_copy(&self, file: &File, which: usize, text: &[u8]) -> Result<()> {
        let buf = self.copy_bytes(which, text)?;
        let at = if which == 0 { 0 } else { self.hdr_size };
        write_all_at(file, &buf, at)?;
        sync(file)
    }

    /// Writes both copies with the next sequence id: the stale copy first, each followed
    /// by `fdatasync`.
    pub fn write(&mut self, file: &File) -> Result<()> {
        let text = serde_json::to_vec(&self.json).map_err(|e| Error::Invalid(e.to_string()))?;
        self.check_fits(&self.json)?;
        validate(&self.json, self.hdr_size)?;
        self.seqid += 1;
        let order = if self.current[0] && !self.current[1] {
            [1, 0]
        } else {
            [0, 1]
        };
        let [first, second] = order;
        // Until both are written, only the copy just written is current.
        self.current[first] = false;
        self.write_copy(file, first, &text)?;
        self.current = [false, false];
        self.current[first] = true;
        self.write_copy(file, second, &text)?;
        self.current[second] = true;
        self.damage.clear();
        Ok(())
    }
}
