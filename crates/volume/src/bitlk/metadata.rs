//! BitLocker's on-disk metadata: the volume header (sector 0: signature, sector size, the
//! offsets of the three FVE metadata blocks) and one FVE metadata block (block header,
//! metadata header, entries, and the validation after the block), read, checked and
//! decoded. Nothing here holds a key in the clear: the protectors' material is kept
//! wrapped (AES-CCM) until [`super::keys`] opens it.
//!
//! Facts from cryptsetup's `lib/bitlk/bitlk.c` and libbde's format document (see the
//! module doc of [`super`]); all fields little-endian.
//!
//! Every copy is checked before it is used: signature `-FVE-FS-`, version 2, a block
//! size that fits its 64 KiB area, a validation header after it, and the CRC-32 of the
//! whole block that the validation holds. A copy that fails any check is skipped for the
//! next (the reason kept for `dump`); a copy whose recorded offsets do not name its own
//! position is refused, as cryptsetup refuses it. Allocations are bounded by the 64 KiB
//! of an area, whatever a size field claims.

use crate::error::{Error, HeaderError, Result};
use crate::store::{self, Store};
use sha2::{Digest as _, Sha256};

/// Bytes of each FVE metadata area (the three copies).
pub const FVE_AREA: u64 = 64 * 1024;
/// The signature at byte 3 of a BitLocker volume header and of each FVE block.
pub const SIGNATURE: &[u8; 8] = b"-FVE-FS-";
/// The OEM name at byte 3 of a BitLocker To Go volume (a FAT discovery volume).
pub const SIGNATURE_TOGO: &[u8; 8] = b"MSWIN4.1";
/// Boot code of Windows 7 and later volumes.
const BOOT_CODE_V2: [u8; 3] = [0xeb, 0x58, 0x90];
/// Boot code of Windows Vista volumes (BitLocker version 1, not supported).
const BOOT_CODE_V1: [u8; 3] = [0xeb, 0x52, 0x90];
/// Where the BitLocker GUID and the three FVE offsets are in the volume header.
const HEADER_GUID_AT: usize = 160;
/// The same, in a To Go volume header.
const HEADER_GUID_AT_TOGO: usize = 424;
/// The BitLocker GUID of a fully encrypted volume, as stored.
pub const GUID_NORMAL: [u8; 16] = [
    0x3b, 0xd6, 0x67, 0x49, 0x29, 0x2e, 0xd8, 0x4a, 0x83, 0x99, 0xf6, 0xa3, 0x39, 0xe3, 0xd0, 0x01,
];
/// The BitLocker GUID of a "used space only" (encrypt-on-write) volume, as stored.
pub const GUID_EOW: [u8; 16] = [
    0x3b, 0x4d, 0xa8, 0x92, 0x80, 0xdd, 0x0e, 0x4d, 0x9e, 0x4e, 0xb1, 0xe3, 0x28, 0x4e, 0xae, 0xd8,
];
/// Block header (64) plus metadata header (48): where the entries start.
const HEADERS_LEN: usize = 112;
/// Bytes of an entry's header (size, type, value type, version).
const ENTRY_HEADER: usize = 8;
/// Bytes of a VMK entry's own fields (GUID, modified time, unknown, protection).
const VMK_FIELDS: usize = 28;
/// Bytes of the validation read after a block: its header (8) and the nested AES-CCM
/// datum (8 + 72) holding the SHA-256 of the block.
const VALIDATION_LEN: usize = 88;
/// The BitLocker state "normal" (fully encrypted or fully decrypted, no conversion).
pub const STATE_NORMAL: u16 = 4;

/// Entry types.
mod entry {
    pub const PROPERTY: u16 = 0x0000;
    pub const VMK: u16 = 0x0002;
    pub const FVEK: u16 = 0x0003;
    pub const DESCRIPTION: u16 = 0x0007;
    pub const VOLUME_HEADER: u16 = 0x000f;
}

/// Entry value types.
mod value {
    pub const KEY: u16 = 0x0001;
    pub const STRING: u16 = 0x0002;
    pub const STRETCH_KEY: u16 = 0x0003;
    pub const AES_CCM: u16 = 0x0005;
    pub const VMK: u16 = 0x0008;
    pub const OFFSET_SIZE: u16 = 0x000f;
}

/// How a VMK is protected (the `protection` field of a VMK entry).
pub mod protection {
    /// The key stored in the clear (a volume being decrypted, or suspended protection).
    pub const CLEAR_KEY: u16 = 0x0000;
    /// TPM.
    pub const TPM: u16 = 0x0100;
    /// A startup key (`.BEK` file).
    pub const STARTUP_KEY: u16 = 0x0200;
    /// TPM and PIN.
    pub const TPM_PIN: u16 = 0x0500;
    /// The 48-digit recovery password.
    pub const RECOVERY_PASSWORD: u16 = 0x0800;
    /// A smart card.
    pub const SMART_CARD: u16 = 0x1000;
    /// A password.
    pub const PASSWORD: u16 = 0x2000;

    /// What cryptsetup's `bitlkDump` says of a protection.
    pub fn describe(p: u16) -> &'static str {
        match p {
            CLEAR_KEY => "VMK protected with clear key",
            TPM => "VMK protected with TPM",
            STARTUP_KEY => "VMK protected with startup key",
            TPM_PIN => "VMK protected with TPM and PIN",
            PASSWORD => "VMK protected with passphrase",
            RECOVERY_PASSWORD => "VMK protected with recovery passphrase",
            SMART_CARD => "VMK protected with smart card",
            _ => "VMK with unknown protection",
        }
    }

    /// A short name, for JSON and messages.
    pub fn name(p: u16) -> &'static str {
        match p {
            CLEAR_KEY => "clear-key",
            TPM => "tpm",
            STARTUP_KEY => "startup-key",
            TPM_PIN => "tpm-pin",
            PASSWORD => "password",
            RECOVERY_PASSWORD => "recovery-password",
            SMART_CARD => "smart-card",
            _ => "unknown",
        }
    }
}

/// What the BitLocker GUID of the volume header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A fully encrypted volume.
    Normal,
    /// "Used space only" (encrypt-on-write): not supported for data.
    EncryptOnWrite,
    /// A GUID not known.
    Unknown,
}

/// Sector 0 of a BitLocker volume.
#[derive(Debug, Clone)]
pub struct VolumeHeader {
    /// A To Go volume (FAT discovery volume).
    pub togo: bool,
    /// Bytes per sector (512 or 4096).
    pub sector_size: u32,
    /// The kind, from the BitLocker GUID.
    pub kind: Kind,
    /// Where the three FVE metadata blocks are.
    pub fve_offsets: [u64; 3],
}

/// An AES-CCM wrapped datum: nonce, tag, ciphertext.
#[derive(Clone)]
pub struct Wrapped {
    /// 8-byte FILETIME and 4-byte counter.
    pub nonce: [u8; 12],
    /// The CCM tag.
    pub tag: [u8; 16],
    /// The encrypted datum.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrapped")
            .field("len", &self.data.len())
            .finish_non_exhaustive()
    }
}

/// A volume master key entry: how it is protected and its wrapped material.
#[derive(Clone)]
pub struct Vmk {
    /// Its GUID, as stored.
    pub guid: [u8; 16],
    /// Its protection ([`protection`]).
    pub protection: u16,
    /// Its name, when it has one.
    pub name: Option<String>,
    /// The salt of its key stretch (passwords and recovery passwords).
    pub salt: Option<[u8; 16]>,
    /// The key held in the clear (clear-key protection).
    pub clear_key: Option<Vec<u8>>,
    /// Its AES-CCM wrapped keys (the VMK under the protector's key), in order.
    pub wrapped: Vec<Wrapped>,
}

impl std::fmt::Debug for Vmk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vmk")
            .field("guid", &guid_string(&self.guid))
            .field("protection", &protection::name(self.protection))
            .field("wrapped", &self.wrapped.len())
            .finish_non_exhaustive()
    }
}

/// One FVE metadata block, checked and decoded.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// The volume header it was found through.
    pub header: VolumeHeader,
    /// Which copy (0, 1, 2) was used.
    pub copy: usize,
    /// The copies skipped before it, with why.
    pub bad_copies: Vec<(usize, String)>,
    /// The block's version (2).
    pub version: u16,
    /// The encryption state now and next ([`STATE_NORMAL`] when no conversion runs).
    pub state: (u16, u16),
    /// The size of the encrypted volume, bytes.
    pub volume_size: u64,
    /// The three FVE blocks' offsets, as the block records them.
    pub fve_offsets: [u64; 3],
    /// The volume GUID, as stored.
    pub guid: [u8; 16],
    /// The encryption method (0x8000 to 0x8005).
    pub method: u16,
    /// Creation time, FILETIME.
    pub created: u64,
    /// The description (`DESKTOP-X H: 1/2/2020`).
    pub description: Option<String>,
    /// The VMKs, in order.
    pub vmks: Vec<Vmk>,
    /// The wrapped FVEK (the first FVEK entry).
    pub fvek: Option<Wrapped>,
    /// Where the original volume header (boot sector and what follows) is kept, and its
    /// size in bytes.
    pub volume_header: (u64, u64),
    /// The SHA-256 of the block, AES-CCM wrapped under the VMK, when the validation holds
    /// one.
    pub validation: Option<Wrapped>,
    /// The SHA-256 of the block as read.
    pub sha256: [u8; 32],
}

/// Little-endian readers over a slice whose bounds the caller checked.
fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A GUID as stored (first three fields little-endian) in its usual text form.
pub fn guid_string(g: &[u8; 16]) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{}",
        le32(g, 0),
        le16(g, 4),
        le16(g, 6),
        g[8],
        g[9],
        g[10..]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// UTF-16LE text, up to its first NUL.
fn utf16(b: &[u8]) -> String {
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0)
        .collect();
    String::from_utf16_lossy(&units)
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

impl VolumeHeader {
    /// Recognises a BitLocker volume header in `sector` (the first bytes of a store):
    /// `None` when it is not one; an error for a BitLocker header that cannot be used.
    pub fn detect(sector: &[u8]) -> Option<Result<VolumeHeader>> {
        if sector.len() < 11 {
            return None;
        }
        let sig = &sector[3..11];
        let togo = if sig == SIGNATURE {
            false
        } else if sig == SIGNATURE_TOGO {
            // Every FAT32 volume has this OEM name: only the BitLocker GUID at 424 makes
            // it a To Go volume.
            let g = sector.get(HEADER_GUID_AT_TOGO..HEADER_GUID_AT_TOGO + 16)?;
            if g != GUID_NORMAL && g != GUID_EOW {
                return None;
            }
            true
        } else {
            return None;
        };
        Some(VolumeHeader::decode(sector, togo))
    }

    fn decode(sector: &[u8], togo: bool) -> Result<VolumeHeader> {
        let at = if togo {
            HEADER_GUID_AT_TOGO
        } else {
            HEADER_GUID_AT
        };
        if sector.len() < at + 40 {
            return Err(Error::truncated(
                "the image ends inside the BitLocker volume header",
            ));
        }
        if sector[..3] == BOOT_CODE_V1 {
            return Err(Error::unsupported(
                "BitLocker version 1 (Windows Vista) volumes are not supported",
            ));
        }
        if sector[..3] != BOOT_CODE_V2 {
            return Err(Error::corrupt(format!(
                "BitLocker volume header with unknown boot code {:02x} {:02x} {:02x} (expected \
                 eb 58 90)",
                sector[0], sector[1], sector[2]
            )));
        }
        let sector_size = match le16(sector, 11) {
            0 => 512,
            n => u32::from(n),
        };
        if sector_size != 512 && sector_size != 4096 {
            return Err(Error::corrupt(format!(
                "BitLocker sector size {sector_size} is not supported (512 or 4096)"
            )));
        }
        let g = &sector[at..at + 16];
        let kind = if g == GUID_NORMAL {
            Kind::Normal
        } else if g == GUID_EOW {
            Kind::EncryptOnWrite
        } else {
            Kind::Unknown
        };
        let fve_offsets = [
            le64(sector, at + 16),
            le64(sector, at + 24),
            le64(sector, at + 32),
        ];
        Ok(VolumeHeader {
            togo,
            sector_size,
            kind,
            fve_offsets,
        })
    }
}

/// Why a copy is not used, and whether only the end of the image was in the way.
struct BadCopy {
    why: String,
    truncated: bool,
}

impl Metadata {
    /// Reads the metadata of `store` whose volume header is `header`: the first FVE copy
    /// that passes every check.
    pub fn read(store: &dyn Store, header: VolumeHeader) -> Result<Metadata> {
        let size = store::size(store)?;
        let mut bad = Vec::new();
        for copy in 0..3 {
            match read_copy(store, size, header.fve_offsets[copy]) {
                Ok(block) => {
                    let bad_copies: Vec<(usize, String)> = bad
                        .into_iter()
                        .enumerate()
                        .map(|(i, b): (usize, BadCopy)| (i, b.why))
                        .collect();
                    return decode(&block, header, copy, bad_copies);
                }
                Err(b) => bad.push(b),
            }
        }
        let why: Vec<String> = bad
            .iter()
            .enumerate()
            .map(|(i, b)| format!("copy {i} at {}: {}", header.fve_offsets[i], b.why))
            .collect();
        let detail = format!("no valid BitLocker FVE metadata copy ({})", why.join("; "));
        if bad.iter().all(|b| b.truncated) {
            Err(HeaderError::Truncated(detail).into())
        } else {
            Err(Error::corrupt(detail))
        }
    }
}

/// Reads the FVE block at `offset` and checks it (signature, version, size, validation
/// header, CRC-32); returns the block, or why it cannot be used.
fn read_copy(store: &dyn Store, size: u64, offset: u64) -> std::result::Result<Vec<u8>, BadCopy> {
    let bad = |why: String| BadCopy {
        why,
        truncated: false,
    };
    let read = |len: usize, at: u64| -> std::result::Result<Vec<u8>, BadCopy> {
        if at.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(BadCopy {
                why: format!("the image ({size} bytes) ends before it"),
                truncated: true,
            });
        }
        let mut buf = vec![0u8; len];
        store
            .read_at(&mut buf, at)
            .map_err(|e| bad(format!("read failed: {e}")))?;
        Ok(buf)
    };
    let head = read(HEADERS_LEN, offset)?;
    if &head[..8] != SIGNATURE {
        return Err(bad("no -FVE-FS- signature".into()));
    }
    let version = le16(&head, 10);
    if version != 2 {
        return Err(bad(format!(
            "FVE block version {version} is not supported (2)"
        )));
    }
    let block_len = usize::from(le16(&head, 8)) << 4;
    if !(HEADERS_LEN..=FVE_AREA as usize).contains(&block_len) {
        return Err(bad(format!(
            "FVE block size {block_len} is outside {HEADERS_LEN}..{FVE_AREA}"
        )));
    }
    let block = read(block_len, offset)?;
    // The validation follows the block; read what of it is there, up to its full length.
    let avail = size.saturating_sub(offset + block_len as u64);
    let vlen = (VALIDATION_LEN as u64).min(avail) as usize;
    if vlen < 8 {
        return Err(BadCopy {
            why: "the image ends before its validation".into(),
            truncated: true,
        });
    }
    let validation = read(vlen, offset + block_len as u64)?;
    let vsize = le16(&validation, 0);
    let vversion = le16(&validation, 2);
    if vsize < 8 || vversion > 2 {
        return Err(bad(format!(
            "validation header of size {vsize}, version {vversion} is not valid"
        )));
    }
    let stored = le32(&validation, 4);
    let computed = crc32(&block);
    if stored != computed {
        return Err(bad(format!(
            "CRC-32 mismatch (stored {stored:08x}, computed {computed:08x})"
        )));
    }
    let mut out = block;
    out.extend_from_slice(&validation);
    Ok(out)
}

/// Decodes a checked block (followed by its validation bytes).
fn decode(
    raw: &[u8],
    header: VolumeHeader,
    copy: usize,
    bad_copies: Vec<(usize, String)>,
) -> Result<Metadata> {
    let block_len = usize::from(le16(raw, 8)) << 4;
    let (block, validation) = raw.split_at(block_len);
    let fve_offsets = [le64(block, 32), le64(block, 40), le64(block, 48)];
    if fve_offsets[copy] != header.fve_offsets[copy] {
        return Err(Error::corrupt(format!(
            "BitLocker FVE metadata copy {copy} read at {} records its place as {}",
            header.fve_offsets[copy], fve_offsets[copy]
        )));
    }
    let meta_len = le32(block, 64) as usize;
    if meta_len < 48 + 4 || 64 + meta_len > block_len {
        return Err(Error::corrupt(format!(
            "BitLocker metadata size {meta_len} does not fit its {block_len}-byte block"
        )));
    }
    let mut guid = [0u8; 16];
    guid.copy_from_slice(&block[80..96]);
    let mut md = Metadata {
        header,
        copy,
        bad_copies,
        version: le16(block, 10),
        state: (le16(block, 12), le16(block, 14)),
        volume_size: le64(block, 16),
        fve_offsets,
        guid,
        method: le16(block, 100),
        created: le64(block, 104),
        description: None,
        vmks: Vec::new(),
        fvek: None,
        volume_header: (le64(block, 56), u64::from(le32(block, 28))),
        validation: None,
        sha256: Sha256::digest(block).into(),
    };
    // The block header's volume-header fields count sectors; an entry (older Windows)
    // gives bytes and takes precedence.
    md.volume_header.1 *= u64::from(md.header.sector_size);
    parse_entries(&block[HEADERS_LEN..64 + meta_len], &mut md)?;
    if validation.len() >= VALIDATION_LEN
        && usize::from(le16(validation, 0)) >= VALIDATION_LEN
        && le16(validation, 8) == 80
        && le16(validation, 10) == 0
        && le16(validation, 12) == value::AES_CCM
    {
        md.validation = Some(wrapped(&validation[16..VALIDATION_LEN]));
    }
    Ok(md)
}

/// An AES-CCM datum's value (after the entry header): nonce, tag, data.
fn wrapped(v: &[u8]) -> Wrapped {
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&v[..12]);
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&v[12..28]);
    Wrapped {
        nonce,
        tag,
        data: v[28..].to_vec(),
    }
}

/// The entries of `buf`: (type, value type, the entry's bytes after its header).
fn entries(buf: &[u8]) -> Result<Vec<(u16, u16, &[u8])>> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= ENTRY_HEADER {
        let len = usize::from(le16(buf, at));
        if len == 0 {
            break;
        }
        if len < ENTRY_HEADER || len > buf.len() - at {
            return Err(Error::corrupt(format!(
                "BitLocker metadata entry of {len} bytes at {at} does not fit ({} left)",
                buf.len() - at
            )));
        }
        out.push((le16(buf, at + 2), le16(buf, at + 4), &buf[at + 8..at + len]));
        at += len;
    }
    Ok(out)
}

fn parse_entries(buf: &[u8], md: &mut Metadata) -> Result<()> {
    let short = |what: &str, len: usize| {
        Error::corrupt(format!(
            "BitLocker {what} entry of {len} bytes is too short"
        ))
    };
    for (kind, val, body) in entries(buf)? {
        match (kind, val) {
            (entry::VMK, value::VMK) => {
                if body.len() < VMK_FIELDS {
                    return Err(short("VMK", body.len()));
                }
                md.vmks.push(parse_vmk(body)?);
            }
            (entry::FVEK, value::AES_CCM) if md.fvek.is_none() => {
                if body.len() < 28 {
                    return Err(short("FVEK", body.len()));
                }
                md.fvek = Some(wrapped(body));
            }
            (entry::VOLUME_HEADER, value::OFFSET_SIZE) => {
                if body.len() < 16 {
                    return Err(short("volume header", body.len()));
                }
                md.volume_header = (le64(body, 0), le64(body, 8));
            }
            (entry::DESCRIPTION, value::STRING) if md.description.is_none() => {
                md.description = Some(utf16(body));
            }
            _ => {}
        }
    }
    Ok(())
}

fn parse_vmk(body: &[u8]) -> Result<Vmk> {
    let mut guid = [0u8; 16];
    guid.copy_from_slice(&body[..16]);
    let mut vmk = Vmk {
        guid,
        protection: le16(body, 26),
        name: None,
        salt: None,
        clear_key: None,
        wrapped: Vec::new(),
    };
    for (kind, val, v) in entries(&body[VMK_FIELDS..])? {
        if kind != entry::PROPERTY {
            continue;
        }
        match val {
            value::STRETCH_KEY if v.len() >= 20 => {
                let mut salt = [0u8; 16];
                salt.copy_from_slice(&v[4..20]);
                vmk.salt = Some(salt);
            }
            value::AES_CCM if v.len() >= 28 => vmk.wrapped.push(wrapped(v)),
            value::KEY if v.len() >= 4 => vmk.clear_key = Some(v[4..].to_vec()),
            value::STRING if vmk.name.is_none() => vmk.name = Some(utf16(v)),
            value::STRETCH_KEY | value::AES_CCM | value::KEY => {
                return Err(Error::corrupt(format!(
                    "BitLocker VMK {} has a key entry of {} bytes, too short",
                    guid_string(&guid),
                    v.len()
                )))
            }
            _ => {}
        }
    }
    Ok(vmk)
}
