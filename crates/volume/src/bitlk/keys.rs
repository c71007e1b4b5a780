//! BitLocker's keys: the protectors that open a volume master key (VMK), and the VMK
//! that opens the full-volume encryption key (FVEK).
//!
//! - **Password**: UTF-16LE of the password, SHA-256 twice, then the stretch.
//! - **Recovery password**: 48 digits in 8 groups of 6 joined by `-`, each group a
//!   multiple of 11 below 720896; the 8 quotients as little-endian u16 form a 16-byte key;
//!   SHA-256 once, then the stretch. A passphrase of that form is tried as a recovery
//!   password (and as a password), as cryptsetup does.
//! - **The stretch**: a 88-byte record `{last SHA-256, initial SHA-256, salt (16), count
//!   (u64 LE)}` hashed 0x100000 times, `last` replaced and `count` incremented each time;
//!   the final `last` is the AES-256 key that unwraps the VMK.
//! - **Startup key** (`.BEK` file): a 48-byte header naming the VMK's GUID, then one
//!   external-key entry whose key entry holds the 32-byte key used directly.
//! - **Clear key**: the 32-byte key stored in the VMK entry itself.
//!
//! Every wrap is AES-256-CCM with a 12-byte nonce and a 16-byte tag; the plaintext is a
//! key entry: its 12-byte header (size, type, value type 1, version, method), then the
//! key. A tag that does not match under a protector's key means that protector's secret
//! is wrong; under a VMK that opened, it means the metadata is damaged.
//!
//! Facts from cryptsetup's `lib/bitlk/bitlk.c` (`bitlk_kdf`, `get_recovery_key`,
//! `get_startup_key`, `decrypt_key`) and libbde's format document.

use super::metadata::{guid_string, Vmk, Wrapped};
use crate::error::{Error, Result};
use sectorcrypt_crypto::aes::Ccm;
use sha2::{Digest as _, Sha256};
use zeroize::{Zeroize as _, Zeroizing};

/// Rounds of the stretch.
pub const STRETCH_ROUNDS: u64 = 0x10_0000;
/// Bytes of a key entry's header before the key (size, type, value type, version,
/// method).
const KEY_ENTRY_HEADER: usize = 12;
/// Bytes of a `.BEK` file's header.
const BEK_HEADER: usize = 48;

/// The stretch of `initial` with `salt` (see the module doc). The 88-byte record is
/// hashed as its two padded SHA-256 blocks through the bare compression function: the
/// generic `Digest` path, instantiated in this (unoptimised in tests) crate, is several
/// times slower for a million short messages.
pub fn stretch(initial: &[u8; 32], salt: &[u8; 16]) -> Zeroizing<[u8; 32]> {
    use sha2::digest::generic_array::GenericArray;
    // SHA-256's initial hash value (FIPS 180-4, 5.3.3).
    const H0: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    // Block 1: last (32) || initial (32). Block 2: salt (16) || count (8) || 0x80 ||
    // zeros || the message length in bits (88 * 8) as a big-endian u64.
    let mut blocks = [GenericArray::<u8, sha2::digest::consts::U64>::default(); 2];
    blocks[0][32..].copy_from_slice(initial);
    blocks[1][..16].copy_from_slice(salt);
    blocks[1][24] = 0x80;
    blocks[1][56..].copy_from_slice(&(88u64 * 8).to_be_bytes());
    let mut state = Zeroizing::new(H0);
    for count in 0..STRETCH_ROUNDS {
        blocks[1][16..24].copy_from_slice(&count.to_le_bytes());
        *state = H0;
        sha2::compress256(&mut state, &blocks[..]);
        for (chunk, word) in blocks[0][..32].chunks_exact_mut(4).zip(state.iter()) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
    }
    let mut out = Zeroizing::new([0u8; 32]);
    out.copy_from_slice(&blocks[0][..32]);
    for b in blocks.iter_mut() {
        b.as_mut_slice().zeroize();
    }
    out
}

/// The key a password opens its VMK with, for the VMK's `salt`. A password that is not
/// UTF-8 cannot be a BitLocker password (Windows stores UTF-16).
pub fn password_key(password: &[u8], salt: &[u8; 16]) -> Result<Zeroizing<[u8; 32]>> {
    let text = std::str::from_utf8(password).map_err(|_| {
        Error::invalid("a BitLocker password is text: the passphrase given is not UTF-8")
    })?;
    let mut utf16 = Zeroizing::new(Vec::with_capacity(text.len() * 2));
    for unit in text.encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    let mut once: [u8; 32] = Sha256::digest(&utf16[..]).into();
    let mut initial: [u8; 32] = Sha256::digest(once).into();
    let key = stretch(&initial, salt);
    once.zeroize();
    initial.zeroize();
    Ok(key)
}

/// The 16-byte key of a recovery password, or `None` when `pass` is not of that form
/// (one trailing newline, as from a key file, is allowed).
pub fn recovery_key(pass: &[u8]) -> Option<Zeroizing<[u8; 16]>> {
    let pass = pass.strip_suffix(b"\n").unwrap_or(pass);
    if pass.len() != 55 {
        return None;
    }
    let mut key = Zeroizing::new([0u8; 16]);
    for (i, group) in pass.split(|&b| b == b'-').enumerate() {
        if i >= 8 || group.len() != 6 || !group.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = group
            .iter()
            .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
        if n % 11 != 0 || n / 11 > 0xffff {
            return None;
        }
        key[2 * i..2 * i + 2].copy_from_slice(&((n / 11) as u16).to_le_bytes());
    }
    Some(key)
}

/// The key a recovery password opens its VMK with.
pub fn recovery_password_key(key16: &[u8; 16], salt: &[u8; 16]) -> Zeroizing<[u8; 32]> {
    let mut initial: [u8; 32] = Sha256::digest(key16).into();
    let key = stretch(&initial, salt);
    initial.zeroize();
    key
}

/// The 32-byte key of a `.BEK` startup key file, when it is the key of `vmk`: `None`
/// when the file names another VMK; an error for a file that is no startup key.
pub fn startup_key(bek: &[u8], vmk: &Vmk) -> Result<Option<Zeroizing<Vec<u8>>>> {
    let bad = |why: &str| Error::invalid(format!("the startup key file is not valid: {why}"));
    if bek.len() < BEK_HEADER + 8 {
        return Err(bad("shorter than its 48-byte header and one entry"));
    }
    // The header's GUID (at 16) names the VMK the key opens.
    if bek[16..32] != vmk.guid[..] {
        return Ok(None);
    }
    let version = u32::from_le_bytes(bek[4..8].try_into().expect("4 bytes"));
    if version != 1 {
        return Err(bad(&format!("metadata version {version} (expected 1)")));
    }
    let size = u32::from_le_bytes(bek[..4].try_into().expect("4 bytes")) as usize;
    if size != bek.len() {
        return Err(bad(&format!(
            "its header says {size} bytes, the file has {}",
            bek.len()
        )));
    }
    let e = &bek[BEK_HEADER..];
    let (len, kind, val) = (
        usize::from(u16::from_le_bytes([e[0], e[1]])),
        u16::from_le_bytes([e[2], e[3]]),
        u16::from_le_bytes([e[4], e[5]]),
    );
    // One startup-key entry (type 6) of an external key (value 9): 8-byte entry header,
    // 24 bytes (GUID, modified time), then nested entries.
    if kind != 6 || val != 9 || len < 8 + 24 || len > e.len() {
        return Err(bad("its entry is not an external startup key"));
    }
    let mut at = 8 + 24;
    while len - at >= 8 {
        let n = usize::from(u16::from_le_bytes([e[at], e[at + 1]]));
        if n == 0 {
            break;
        }
        if n < 8 || n > len - at {
            return Err(bad("an entry does not fit"));
        }
        let val = u16::from_le_bytes([e[at + 4], e[at + 5]]);
        if val == 1 {
            if n < 8 + 4 + 32 {
                return Err(bad("its key entry is too short"));
            }
            return Ok(Some(Zeroizing::new(e[at + 12..at + n].to_vec())));
        }
        at += n;
    }
    Err(bad("it holds no key"))
}

/// Unwraps `w` under `key` (AES-256-CCM): the key its entry holds, or `None` when the
/// tag does not match (a wrong key, or damaged material).
pub fn unwrap(key: &[u8], w: &Wrapped) -> Result<Option<Zeroizing<Vec<u8>>>> {
    let ccm = Ccm::new(key)?;
    let mut data = Zeroizing::new(w.data.clone());
    match ccm.open(&w.nonce, &[], &mut data, &w.tag) {
        Ok(()) => {}
        Err(sectorcrypt_crypto::Error::AuthenticationFailed) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    if data.len() < KEY_ENTRY_HEADER {
        return Err(Error::corrupt("a BitLocker wrapped key is too short"));
    }
    let size = usize::from(u16::from_le_bytes([data[0], data[1]]));
    if size != data.len() {
        return Err(Error::corrupt(format!(
            "a BitLocker wrapped key says {size} bytes, it has {}",
            data.len()
        )));
    }
    Ok(Some(Zeroizing::new(data[KEY_ENTRY_HEADER..].to_vec())))
}

/// Opens the VMK of `vmk` with the protector key `key`: tries each wrapped key.
pub fn open_vmk(vmk: &Vmk, key: &[u8]) -> Result<Option<Zeroizing<Vec<u8>>>> {
    for w in &vmk.wrapped {
        if let Some(k) = unwrap(key, w)? {
            if k.len() != 32 {
                return Err(Error::corrupt(format!(
                    "BitLocker VMK {} is {} bytes (expected 32)",
                    guid_string(&vmk.guid),
                    k.len()
                )));
            }
            return Ok(Some(k));
        }
    }
    Ok(None)
}
