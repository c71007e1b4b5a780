//! FileVault 2's CoreStorage metadata, read and checked: the physical volume header at
//! byte 0, the disk label block it points to, and the encrypted metadata blocks, with
//! the three blocks that hold what opening the volume needs (see the module doc of
//! [`crate::fvault2`] for the layout and its sources).
//!
//! Every block starts with a CRC-32C (Castagnoli, reflected, no final inversion) of the
//! rest of the block, stored after it the seed `0xffffffff` it starts from. Every offset
//! read from the metadata is bounded to the first GiB of the store before it is used,
//! as cryptsetup bounds it; every length inside a block is bounded by the block.

use crate::error::{Error, Result};
use crate::store::{self, Store};
use base64::Engine as _;
use sectorcrypt_crypto::aes::Xts;

/// Size of the physical volume header.
pub const HEADER_LEN: usize = 512;
/// Size of a metadata block (the disk label block and every encrypted metadata block).
pub const BLOCK_LEN: usize = 8192;
/// The CoreStorage signature at byte 88 of the volume header, `CS`.
pub const MAGIC: [u8; 2] = *b"CS";
/// The seed every CoreStorage checksum is stored with.
const CRC_SEED: u32 = 0xffff_ffff;
/// Metadata is looked for in the first GiB of the store only.
const MAX_OFFSET: u64 = 1 << 30;
/// Sizes of the decoded `PassphraseWrappedKEKStruct` and `KEKWrappedVolumeKeyStruct`.
const PWK_LEN: usize = 284;
const KWVK_LEN: usize = 256;
/// An RFC 3394 wrapped 128-bit key.
pub const WRAPPED_LEN: usize = 24;

pub use crate::crc::crc32c;

fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

fn u64le(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// Whether `block`'s stored checksum (bytes 0..4, seed at 4..8) matches the rest.
pub fn checksum_ok(block: &[u8]) -> bool {
    block.len() > 8
        && u32le(block, 4) == CRC_SEED
        && crc32c(CRC_SEED, &block[8..]) == u32le(block, 0)
}

/// A UUID's 16 bytes as text, in their stored order (`uuid_unparse`).
pub fn uuid_string(b: &[u8; 16]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A UUID in text (any case, with its dashes) as 16 bytes.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lens != [8, 4, 4, 4, 12] {
        return None;
    }
    let hex: String = groups.concat();
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The physical volume header (the fields used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeHeader {
    /// Size of the physical volume in bytes.
    pub size: u64,
    /// Bytes per CoreStorage block (offsets below count these).
    pub block_size: u32,
    /// Block number of the disk label block.
    pub disk_label_block: u64,
    /// The AES-128 key of the encrypted metadata (its first XTS half).
    pub metadata_key: [u8; 16],
    /// The physical volume's UUID (also the metadata key's second XTS half).
    pub uuid: [u8; 16],
}

impl VolumeHeader {
    /// The header in `head` (the first bytes of a store): `None` when it holds no
    /// CoreStorage volume header for certain (no `CS` at byte 88, or a checksum that
    /// does not match, or fewer than 512 bytes); otherwise the header, or why it cannot
    /// be used.
    pub fn detect(head: &[u8]) -> Option<Result<VolumeHeader>> {
        let h = head.get(..HEADER_LEN)?;
        (h[88..90] == MAGIC && checksum_ok(h)).then(|| VolumeHeader::parse(h))
    }

    /// Parses and checks a 512-byte volume header: signature, checksum, version, key size.
    pub fn parse(h: &[u8]) -> Result<VolumeHeader> {
        if h.len() < HEADER_LEN || h[88..90] != MAGIC {
            return Err(Error::Header(crate::HeaderError::Unrecognised(
                "no CoreStorage volume header (no \"CS\" at byte 88)".into(),
            )));
        }
        if !checksum_ok(&h[..HEADER_LEN]) {
            return Err(Error::corrupt(format!(
                "the CoreStorage volume header fails its checksum (CRC-32C {:08x} stored \
                 with seed {:08x}, {:08x} computed)",
                u32le(h, 0),
                u32le(h, 4),
                crc32c(CRC_SEED, &h[8..HEADER_LEN])
            )));
        }
        let version = u16le(h, 8);
        if version != 1 {
            return Err(Error::unsupported(format!(
                "CoreStorage volume header version {version} is not supported (1)"
            )));
        }
        let key_len = u32le(h, 168);
        if key_len != 16 {
            return Err(Error::unsupported(format!(
                "a FileVault 2 metadata key of {key_len} bytes is not supported (16, AES-128)"
            )));
        }
        let block_size = u32le(h, 96);
        if block_size == 0 {
            return Err(Error::corrupt("the CoreStorage block size is 0"));
        }
        let mut metadata_key = [0u8; 16];
        metadata_key.copy_from_slice(&h[176..192]);
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&h[304..320]);
        Ok(VolumeHeader {
            size: u64le(h, 64),
            block_size,
            disk_label_block: u64le(h, 104),
            metadata_key,
            uuid,
        })
    }

    /// Byte offset of block `n`, bounded to the first GiB.
    fn offset(&self, n: u64, what: &str) -> Result<u64> {
        n.checked_mul(u64::from(self.block_size))
            .filter(|&o| o <= MAX_OFFSET)
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "the {what} is at block {n} of {} bytes, past the first GiB where \
                     CoreStorage metadata is looked for",
                    self.block_size
                ))
            })
    }
}

/// What the metadata says (cryptsetup's `fvault2Dump` fields and what unlocking needs).
#[derive(Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The volume header.
    pub header: VolumeHeader,
    /// Byte offset of the first encrypted metadata block, and how many there are.
    pub encrypted_metadata: (u64, u64),
    /// PBKDF2-SHA256 iterations of the passphrase.
    pub iterations: u32,
    /// Its salt.
    pub salt: [u8; 16],
    /// The key-encrypting key, wrapped under the passphrase's key.
    pub wrapped_kek: [u8; WRAPPED_LEN],
    /// The volume key's first half, wrapped under the KEK.
    pub wrapped_volume_key: [u8; WRAPPED_LEN],
    /// The logical volume's family UUID.
    pub family_uuid: [u8; 16],
    /// Byte offset of the logical volume's data.
    pub data_offset: u64,
    /// Its size in bytes.
    pub data_size: u64,
}

impl std::fmt::Debug for Metadata {
    // The wrapped keys are safe to show but say nothing useful; kept out of logs anyway.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metadata")
            .field("header", &self.header)
            .field("encrypted_metadata", &self.encrypted_metadata)
            .field("iterations", &self.iterations)
            .field("family_uuid", &uuid_string(&self.family_uuid))
            .field("data_offset", &self.data_offset)
            .field("data_size", &self.data_size)
            .finish_non_exhaustive()
    }
}

/// Block type 0x0019's encryption context: the PBKDF2 salt and iterations, the wrapped
/// KEK and the wrapped volume key.
struct Context {
    salt: [u8; 16],
    iterations: u32,
    wrapped_kek: [u8; WRAPPED_LEN],
    wrapped_volume_key: [u8; WRAPPED_LEN],
}

/// The three encrypted metadata blocks' contents as they are found.
#[derive(Default)]
struct Found {
    keys: Option<Context>,
    volume: Option<(u64, [u8; 16])>,
    data_block: Option<u32>,
}

impl Metadata {
    /// Reads the disk label and the encrypted metadata of the volume whose `header` was
    /// read from `store`. Never writes.
    pub fn read(store: &dyn Store, header: VolumeHeader) -> Result<Metadata> {
        let (start, count) = disk_label(store, &header)?;
        let found = encrypted_metadata(store, &header, start, count)?;
        let missing = |what: &str| {
            Error::corrupt(format!(
                "the FileVault 2 encrypted metadata holds no {what} (searched {count} blocks \
                 at byte {start})"
            ))
        };
        let Context {
            salt,
            iterations,
            wrapped_kek,
            wrapped_volume_key,
        } = found
            .keys
            .ok_or_else(|| missing("encryption context (block type 0x0019)"))?;
        let (data_size, family_uuid) = found
            .volume
            .ok_or_else(|| missing("logical volume description (block type 0x001a)"))?;
        let block = found
            .data_block
            .ok_or_else(|| missing("logical volume map (block type 0x0305)"))?;
        let data_offset = u64::from(block) * u64::from(header.block_size);
        Ok(Metadata {
            header,
            encrypted_metadata: (start, count),
            iterations,
            salt,
            wrapped_kek,
            wrapped_volume_key,
            family_uuid,
            data_offset,
            data_size,
        })
    }
}

/// Reads the disk label block and the volume groups descriptor it points to: the byte
/// offset of the encrypted metadata and its number of blocks.
fn disk_label(store: &dyn Store, header: &VolumeHeader) -> Result<(u64, u64)> {
    let at = header.offset(header.disk_label_block, "CoreStorage disk label")?;
    let mut block = vec![0u8; BLOCK_LEN];
    store::read_exact(store, &mut block, at, "CoreStorage disk label block")?;
    if !checksum_ok(&block) {
        return Err(Error::corrupt(format!(
            "the CoreStorage disk label block at byte {at} fails its checksum"
        )));
    }
    let descriptor = at + u64::from(u32le(&block, 220));
    if descriptor > MAX_OFFSET {
        return Err(Error::corrupt(format!(
            "the CoreStorage volume groups descriptor is at byte {descriptor}, past the first \
             GiB"
        )));
    }
    let mut d = [0u8; 40];
    store::read_exact(
        store,
        &mut d,
        descriptor,
        "CoreStorage volume groups descriptor",
    )?;
    let count = u64le(&d, 8);
    let start = header.offset(u64le(&d, 32), "FileVault 2 encrypted metadata")?;
    Ok((start, count))
}

/// Decrypts and parses the encrypted metadata blocks: AES-XTS-128 under the header's
/// metadata key and the physical volume UUID, one 8 KiB data unit per block whose tweak
/// is the block's index (little-endian); an all-zero block ends them.
fn encrypted_metadata(
    store: &dyn Store,
    header: &VolumeHeader,
    start: u64,
    count: u64,
) -> Result<Found> {
    let mut key = zeroize::Zeroizing::new([0u8; 32]);
    key[..16].copy_from_slice(&header.metadata_key);
    key[16..].copy_from_slice(&header.uuid);
    let xts = Xts::new(&key[..])
        .map_err(|e| Error::corrupt(format!("the FileVault 2 metadata key cannot be used: {e}")))?;
    let mut found = Found::default();
    let mut block = vec![0u8; BLOCK_LEN];
    for i in 0..count {
        let at = start + i * BLOCK_LEN as u64;
        if at > MAX_OFFSET {
            return Err(Error::corrupt(format!(
                "the FileVault 2 encrypted metadata runs past the first GiB ({count} blocks \
                 at byte {start})"
            )));
        }
        store::read_exact(store, &mut block, at, "FileVault 2 encrypted metadata")?;
        if block.iter().all(|&b| b == 0) {
            break;
        }
        let mut tweak = [0u8; 16];
        tweak[..8].copy_from_slice(&i.to_le_bytes());
        xts.decrypt(&tweak, &mut block)
            .map_err(|e| Error::corrupt(format!("FileVault 2 metadata block {i}: {e}")))?;
        if !checksum_ok(&block) {
            return Err(Error::corrupt(format!(
                "FileVault 2 encrypted metadata block {i} (byte {at}) fails its checksum \
                 once decrypted"
            )));
        }
        let what = |t: &str| format!("FileVault 2 metadata block {i} (type {t})");
        match u16le(&block, 10) {
            0x0019 => {
                let xml = xml_of(&block, 112, &what("0x0019"))?;
                found.keys = Some(encryption_context(&xml, &what("0x0019"))?);
            }
            0x001a => {
                let xml = xml_of(&block, 128, &what("0x001a"))?;
                found.volume = Some(logical_volume(&xml, &what("0x001a"))?);
            }
            0x0305 => found.data_block = Some(u32le(&block, 104)),
            _ => {}
        }
    }
    Ok(found)
}

/// The XML whose offset and size (u32 each) are at `at` in `block`, bounded by it.
fn xml_of(block: &[u8], at: usize, what: &str) -> Result<String> {
    let (off, len) = (u32le(block, at) as usize, u32le(block, at + 4) as usize);
    let bytes = block
        .get(off..)
        .and_then(|rest| rest.get(..len))
        .filter(|_| off < BLOCK_LEN)
        .ok_or_else(|| {
            Error::corrupt(format!(
                "{what}: its XML ({len} bytes at {off}) lies outside the block"
            ))
        })?;
    // As C reads it: up to the first NUL.
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// The text of the first `<key>KEY</key><TYPE ...>text</TYPE>` in `xml` (cryptsetup's
/// regular expression: no space between the key and its value, a non-empty text).
pub fn plist_value<'a>(xml: &'a str, key: &str, kind: &str) -> Option<&'a str> {
    let marker = format!("<key>{key}</key><{kind}");
    let close = format!("</{kind}>");
    let mut from = 0;
    while let Some(pos) = xml[from..].find(&marker) {
        let after = from + pos + marker.len();
        from = after;
        let rest = &xml[after..];
        // `<TYPE`, anything but `>` (attributes), then `>`.
        let Some(gt) = rest.find('>') else { break };
        if rest[..gt].contains('<') {
            continue;
        }
        let value_and_more = &rest[gt + 1..];
        let Some(lt) = value_and_more.find('<') else {
            break;
        };
        if lt > 0 && value_and_more[lt..].starts_with(&close) {
            return Some(&value_and_more[..lt]);
        }
    }
    None
}

fn base64_of(xml: &str, key: &str, len: usize, what: &str) -> Result<Vec<u8>> {
    let text = plist_value(xml, key, "data")
        .ok_or_else(|| Error::corrupt(format!("{what}: no {key} in its XML")))?;
    let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(clean)
        .map_err(|e| Error::corrupt(format!("{what}: {key} is not base64: {e}")))?;
    if bytes.len() != len {
        return Err(Error::corrupt(format!(
            "{what}: {key} holds {} bytes, not {len}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Block type 0x0019's XML: the salt, the iterations and both wrapped keys.
fn encryption_context(xml: &str, what: &str) -> Result<Context> {
    let pwk = base64_of(xml, "PassphraseWrappedKEKStruct", PWK_LEN, what)?;
    let kwvk = base64_of(xml, "KEKWrappedVolumeKeyStruct", KWVK_LEN, what)?;
    let mut salt = [0u8; 16];
    salt.copy_from_slice(&pwk[8..24]);
    let mut kek = [0u8; WRAPPED_LEN];
    kek.copy_from_slice(&pwk[32..56]);
    let mut vk = [0u8; WRAPPED_LEN];
    vk.copy_from_slice(&kwvk[8..32]);
    let iterations = u32le(&pwk, 168);
    if iterations == 0 {
        return Err(Error::corrupt(format!("{what}: PBKDF2 with 0 iterations")));
    }
    Ok(Context {
        salt,
        iterations,
        wrapped_kek: kek,
        wrapped_volume_key: vk,
    })
}

/// Block type 0x001a's XML: the logical volume's size (hexadecimal) and family UUID.
fn logical_volume(xml: &str, what: &str) -> Result<(u64, [u8; 16])> {
    let size_text = plist_value(xml, "com.apple.corestorage.lv.size", "integer")
        .ok_or_else(|| Error::corrupt(format!("{what}: no logical volume size")))?;
    let digits = size_text.trim();
    let digits = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
        .unwrap_or(digits);
    let size = u64::from_str_radix(digits, 16)
        .ok()
        .filter(|&s| s != 0 && s != u64::MAX)
        .ok_or_else(|| {
            Error::corrupt(format!(
                "{what}: logical volume size {size_text:?} is not usable"
            ))
        })?;
    let uuid_text = plist_value(xml, "com.apple.corestorage.lv.familyUUID", "string")
        .ok_or_else(|| Error::corrupt(format!("{what}: no logical volume family UUID")))?;
    let uuid = parse_uuid(uuid_text.trim()).ok_or_else(|| {
        Error::corrupt(format!("{what}: family UUID {uuid_text:?} is not a UUID"))
    })?;
    Ok((size, uuid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plist_values_are_found_as_cryptsetup_finds_them() {
        let xml = "<dict><key>a</key><string>no</string><key>b</key><integer \
                   size=\"64\">0x10</integer><key>b</key><string>x</string></dict>";
        assert_eq!(plist_value(xml, "b", "integer"), Some("0x10"));
        assert_eq!(plist_value(xml, "b", "string"), Some("x"));
        assert_eq!(plist_value(xml, "a", "integer"), None);
        assert_eq!(plist_value(xml, "c", "string"), None);
        assert_eq!(
            plist_value("<key>b</key><integers>1</integers>", "b", "integer"),
            None
        );
        assert_eq!(
            plist_value("<key>b</key><integer></integer>", "b", "integer"),
            None
        );
    }

    #[test]
    fn uuids_round_trip() {
        let s = "fc52bfae-5a1f-4f9b-b3a6-f33303a0e401";
        assert_eq!(uuid_string(&parse_uuid(s).unwrap()), s);
        assert_eq!(parse_uuid(&s.to_uppercase()), parse_uuid(s));
        assert_eq!(parse_uuid("fc52bfae5a1f4f9bb3a6f33303a0e401"), None);
        assert_eq!(parse_uuid("zc52bfae-5a1f-4f9b-b3a6-f33303a0e401"), None);
    }
}
