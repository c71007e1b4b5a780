//! Keyslot material, the same in LUKS1 and LUKS2: the volume key is split by the
//! anti-forensic splitter ([`super::af`]), encrypted with a key derived from the passphrase
//! (the area's cipher over 512-byte sectors, IVs counted from 0 at the start of the area,
//! as cryptsetup does) and stored in the keyslot's area; a PBKDF2 digest of the volume key
//! tells the right key from a wrong one.
//!
//! Unlocking tries the candidate keyslots in order. A wrong passphrase and a damaged area
//! look the same (the digest does not match): both end in [`Error::WrongPassphrase`], unless
//! a keyslot could not be read at all, whose error is then returned.

use super::af;
use super::fields::align_up;
use crate::error::{Error, HeaderError, Result};
use crate::hash::HashAlg;
use crate::kdf::Kdf;
use crate::store::{self, Store};
use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher, SectorLayout};
use sectorcrypt_crypto::secret::SecretBytes;
use zeroize::Zeroizing;

/// The largest key any supported cipher takes (AES-256-XTS: 64 bytes).
pub const MAX_KEY_BYTES: u64 = 64;

/// The cipher strings LUKS volumes may use: the crypto core's, less ECB (no IV).
pub fn ciphers() -> impl Iterator<Item = &'static str> {
    CipherSpec::ALL.into_iter().filter(|c| *c != "aes-ecb")
}

/// Maps a cipher string of a segment or keyslot area onto the crypto core, checking the
/// key length.
pub fn cipher_spec(encryption: &str, key_len: usize) -> Result<CipherSpec> {
    let spec: CipherSpec = match encryption.parse() {
        Ok(s) if ciphers().any(|c| c == encryption) => s,
        _ => {
            return Err(Error::unsupported(format!(
                "cipher {encryption:?} (supported: {})",
                ciphers().collect::<Vec<_>>().join(", ")
            )))
        }
    };
    if !spec.key_lengths().contains(&key_len) {
        return Err(Error::unsupported(format!(
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

/// Whether PBKDF2-`hash`(`key`, `salt`, `iterations`) is `digest` (constant time). An empty
/// digest, or one of another length than the hash's, matches nothing.
pub(crate) fn digest_matches(
    hash: HashAlg,
    key: &[u8],
    salt: &[u8],
    iterations: u32,
    digest: &[u8],
) -> bool {
    if digest.is_empty() || digest.len() > hash.output_len() {
        return false;
    }
    let mut out = Zeroizing::new(vec![0u8; digest.len()]);
    hash.pbkdf2(key, salt, iterations, &mut out);
    crate::ct_eq(&out, digest)
}

/// Where and how a keyslot's material is stored (LUKS1 and LUKS2 alike).
pub(crate) struct Material<'a> {
    pub(crate) kdf: Kdf,
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
    store: &dyn Store,
    passphrase: &[u8],
    m: &Material<'_>,
) -> Result<Zeroizing<Vec<u8>>> {
    if m.area_key_size == 0
        || m.area_key_size as u64 > MAX_KEY_BYTES
        || m.key_size == 0
        || m.key_size as u64 > MAX_KEY_BYTES
        || m.stripes != af::STRIPES
    {
        return Err(Error::corrupt(format!(
            "keyslot: key size {}, area key size {}, {} stripes",
            m.key_size, m.area_key_size, m.stripes
        )));
    }
    // At most 64 * 4000 bytes, after the checks above.
    let len = align_up((m.key_size * m.stripes) as u64, 512);
    let image = store::size(store)?;
    let end = m.area_offset.checked_add(len);
    if end.is_none_or(|e| e > image) {
        return Err(Error::truncated(format!(
            "the keyslot area {}+{len} lies beyond the end of the image ({image} bytes)",
            m.area_offset
        )));
    }
    let len = len as usize;
    let mut derived = SecretBytes::zeroed(m.area_key_size);
    m.kdf.derive(passphrase, m.salt, &mut derived)?;
    let mut material = SecretBytes::zeroed(len);
    store::read_exact(store, &mut material, m.area_offset, "keyslot area")?;
    crypt_area(m.area_encryption, &derived, &mut material, false)?;
    Ok(af::merge(&material, m.key_size, m.stripes, m.af_hash))
}

/// Tries `slots` (number and material) in order with `passphrase`; the first whose key
/// `verify` accepts wins. Returns the volume key and the keyslot.
pub(crate) fn try_keyslots<'a>(
    store: &dyn Store,
    passphrase: &[u8],
    slots: impl IntoIterator<Item = (usize, Material<'a>)>,
    verify: impl Fn(&[u8]) -> Result<bool>,
) -> Result<(Zeroizing<Vec<u8>>, usize)> {
    let mut last_err = None;
    for (n, m) in slots {
        match open_material(store, passphrase, &m) {
            Ok(key) if verify(&key)? => return Ok((key, n)),
            Ok(_) => {}
            Err(e @ (Error::Header(HeaderError::Truncated(_)) | Error::Io { .. })) => {
                last_err = Some(e)
            }
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or(Error::WrongPassphrase))
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
    crate::random(&mut salt)?;
    let mut derived = SecretBytes::zeroed(area_key_size);
    kdf.derive(passphrase, &salt, &mut derived)?;
    let split = af::split(key, af::STRIPES, af_hash)?;
    let len = align_up(split.len() as u64, 512) as usize;
    let mut material = Zeroizing::new(vec![0u8; len]);
    material[..split.len()].copy_from_slice(&split);
    crypt_area(area_encryption, &derived, &mut material, true)?;
    Ok((salt, material))
}
