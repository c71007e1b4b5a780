//! GELI's keys: the user key from keyfiles and a passphrase, the master-key slots, and
//! the data keys of each zone.
//!
//! - User key (FreeBSD `lib/geom/eli/geom_eli.c`, `eli_genkey`): HMAC-SHA512 with an empty
//!   key over every keyfile's bytes in order, then, unless `iterations == -1` (keyfiles
//!   only), either the salt and the passphrase (`iterations == 0`) or the 64 bytes of
//!   PBKDF2-HMAC-SHA512(passphrase, salt, iterations).
//! - Master-key slots (`sys/geom/eli/g_eli_key.c`, `g_eli_mkey_decrypt`,
//!   `g_eli_mkey_encrypt`, `g_eli_mkey_verify`): 192 bytes, AES-CBC with a zero IV (CBC
//!   on XTS providers too, `g_eli_crypto.c`) under the first `keylen / 8` bytes of
//!   HMAC-SHA512(user key, 0x01); the plaintext is IV key (64) || data key (64) ||
//!   HMAC-SHA512(HMAC-SHA512(user key, 0x00), IV key || data key).
//! - Zone keys (`g_eli_key_cache.c`, `g_eli_key_fill`): HMAC-SHA512(base, "ekey" ||
//!   le64(zone)), zones of 2^20 sectors (`G_ELI_KEY_SHIFT`); the base is the data key
//!   from version 7 on and the IV key before (`G_ELI_FLAG_ENC_IVKEY`); before version 5
//!   the data key itself encrypts every sector (`G_ELI_FLAG_SINGLE_KEY`).
//! - The cipher takes the first `keylen / 8` bytes of its key, twice that for XTS (two
//!   AES keys; GRUB's `grub-core/disk/geli.c` doubles it for algorithm 0x16 likewise).
//! - Authenticated providers (`g_eli_key.c` `g_eli_mkey_propagate`, `g_eli_key_cache.c`
//!   `g_eli_key_init`): the data key is replaced by HMAC-SHA512(data key, 0x10) wherever
//!   it is used for encryption (the single key, the base of the zone keys from version 7),
//!   and the tags' key is HMAC-SHA512(data key, 0x11).
//! - NULL encryption keeps its slots unencrypted: the slot cipher is geli's NULL too
//!   (`g_eli_crypto.c`, `EVP_enc_null()` for `CRYPTO_NULL_CBC`).

use super::metadata::{MKEY_LEN, SALT_LEN};
use crate::error::{Error, Result};
use crate::layout::KeySource;
use hmac::{Hmac, Mac};
use sectorcrypt_crypto::aes::Cbc;
use sectorcrypt_crypto::dmcrypt::{
    CipherSpec, IvStep, SectorCipher, SectorLayout, GELI_IV_KEY_LEN,
};
use sha2::Sha512;
use std::fmt;
use zeroize::Zeroizing;

/// Bytes of the user key, the IV key, the data key and an HMAC-SHA512 (`G_ELI_MAXKEYLEN`).
pub const KEY_LEN: usize = 64;
/// log2 of the sectors per zone (`G_ELI_KEY_SHIFT`).
pub const ZONE_SHIFT: u32 = 20;

type HmacSha512 = Hmac<Sha512>;

/// HMAC-SHA512 of the concatenated `parts` under `key`.
pub fn hmac_sha512(key: &[u8], parts: &[&[u8]]) -> Zeroizing<[u8; KEY_LEN]> {
    let mut mac = <HmacSha512 as Mac>::new_from_slice(key).expect("hmac takes any key length");
    for p in parts {
        mac.update(p);
    }
    let mut out = Zeroizing::new([0u8; KEY_LEN]);
    out.copy_from_slice(&mac.finalize().into_bytes());
    out
}

/// The passphrase as geli uses it: up to the first newline or NUL (geli reads a
/// passphrase file, `-J`, up to its first newline, and keeps C strings).
pub fn passphrase_part(passphrase: &[u8]) -> &[u8] {
    let end = passphrase
        .iter()
        .position(|&b| b == b'\n' || b == 0)
        .unwrap_or(passphrase.len());
    &passphrase[..end]
}

/// The user key (`eli_genkey`): `keyfiles` are the contents of geli's `-k` files in
/// order; `passphrase` is `None` when the key has no passphrase component (geli's `-p` and
/// `-P`: the keyfiles alone, whatever `iterations` says), and is ignored when
/// `iterations == -1` (a provider made with `geli init -P`).
pub fn user_key(
    keyfiles: &[&[u8]],
    passphrase: Option<&[u8]>,
    salt: &[u8; SALT_LEN],
    iterations: i32,
) -> Result<Zeroizing<[u8; KEY_LEN]>> {
    let mut parts: Vec<&[u8]> = keyfiles.to_vec();
    let mut derived = Zeroizing::new([0u8; KEY_LEN]);
    let pass = match passphrase {
        Some(p) if iterations != -1 => passphrase_part(p),
        _ if keyfiles.is_empty() => {
            return Err(Error::invalid(
                "no key components: this GELI key takes keyfiles only, and none was given",
            ))
        }
        _ => return Ok(hmac_sha512(&[], &parts)),
    };
    match iterations {
        0 => {
            parts.push(salt);
            parts.push(pass);
        }
        n if n > 0 => {
            let kdf = crate::kdf::Kdf::Pbkdf2 {
                hash: crate::hash::HashAlg::Sha512,
                iterations: n as u32,
            };
            crate::kdf::progress::derive(kdf, || {
                pbkdf2::pbkdf2_hmac::<Sha512>(pass, salt, n as u32, &mut derived[..])
            });
            parts.push(&derived[..]);
        }
        n => {
            return Err(Error::corrupt(format!(
                "GELI iterations {n}: only -1 (keyfiles only), 0 and positive counts exist"
            )))
        }
    }
    Ok(hmac_sha512(&[], &parts))
}

/// The cipher of the master-key slots: CBC with a zero IV in the provider's cipher
/// (`g_eli_mkey_encrypt` through `g_eli_crypto_encrypt` with `md_ealgo`, AES-XTS taken as
/// AES-CBC), keyed with the first `key_bytes` of HMAC-SHA512(user key, 0x01).
enum SlotCipher {
    Aes(Cbc),
    /// Camellia-CBC: a sector of the whole slot under IV number 0 (plain64: a zero IV).
    Camellia(SectorCipher),
}

impl SlotCipher {
    fn run(&self, data: &mut [u8], encrypt: bool) -> Result<()> {
        match (self, encrypt) {
            (SlotCipher::Aes(c), true) => c.encrypt(&[0u8; 16], data)?,
            (SlotCipher::Aes(c), false) => c.decrypt(&[0u8; 16], data)?,
            (SlotCipher::Camellia(c), true) => c.encrypt(0, data)?,
            (SlotCipher::Camellia(c), false) => c.decrypt(0, data)?,
        }
        Ok(())
    }
}

/// The slot cipher of a provider whose cipher takes `key_bytes` (`None`, slots kept as
/// they are, for `key_bytes == 0`: a provider of NULL encryption); Camellia for a
/// Camellia-CBC provider, AES otherwise.
fn slot_cipher(user_key: &[u8], key_bytes: usize, camellia: bool) -> Result<Option<SlotCipher>> {
    if key_bytes == 0 {
        return Ok(None);
    }
    let enc = hmac_sha512(user_key, &[&[1]]);
    let key = &enc[..key_bytes];
    Ok(Some(if camellia {
        let spec: CipherSpec = "camellia-cbc-plain64".parse()?;
        let layout = SectorLayout::with_step(MKEY_LEN, IvStep::Sector)?;
        SlotCipher::Camellia(SectorCipher::new(spec, key, layout)?)
    } else {
        SlotCipher::Aes(Cbc::new(key)?)
    }))
}

/// The check value of a master key: HMAC-SHA512(HMAC-SHA512(user key, 0x00), IV key ||
/// data key).
fn mkey_check(user_key: &[u8], keys: &[u8]) -> Zeroizing<[u8; KEY_LEN]> {
    let hmkey = hmac_sha512(user_key, &[&[0]]);
    hmac_sha512(&hmkey[..], &[keys])
}

/// Decrypts a master-key slot with `user_key`: the 128-byte IV key || data key when the
/// check matches, `None` otherwise. `key_bytes` is the slot cipher's key length
/// (`keylen / 8`: 16, 24 or 32), in Camellia (`camellia`) or AES.
pub fn open_slot(
    slot: &[u8; MKEY_LEN],
    user_key: &[u8],
    key_bytes: usize,
    camellia: bool,
) -> Result<Option<Zeroizing<Vec<u8>>>> {
    let mut plain = Zeroizing::new(slot.to_vec());
    if let Some(c) = slot_cipher(user_key, key_bytes, camellia)? {
        c.run(&mut plain, false)?;
    }
    let check = mkey_check(user_key, &plain[..2 * KEY_LEN]);
    if !crate::ct_eq(&check[..], &plain[2 * KEY_LEN..]) {
        return Ok(None);
    }
    Ok(Some(Zeroizing::new(plain[..2 * KEY_LEN].to_vec())))
}

/// Encrypts the 128-byte master key `mkey` (IV key || data key) into a slot for
/// `user_key` (`g_eli_mkey_hmac` then `g_eli_mkey_encrypt`), as [`open_slot`] reads it.
pub fn seal_slot(
    mkey: &[u8],
    user_key: &[u8],
    key_bytes: usize,
    camellia: bool,
) -> Result<[u8; MKEY_LEN]> {
    if mkey.len() != 2 * KEY_LEN {
        return Err(Error::invalid(format!(
            "a GELI master key has {} bytes, not {}",
            2 * KEY_LEN,
            mkey.len()
        )));
    }
    let mut plain = Zeroizing::new([0u8; MKEY_LEN]);
    plain[..2 * KEY_LEN].copy_from_slice(mkey);
    plain[2 * KEY_LEN..].copy_from_slice(&mkey_check(user_key, mkey)[..]);
    if let Some(c) = slot_cipher(user_key, key_bytes, camellia)? {
        c.run(&mut plain[..], true)?;
    }
    Ok(*plain)
}

/// Where the data keys come from, for an opened provider.
pub struct ZoneKeys {
    /// The HMAC key of the zone keys (the IV key before version 7, the data key from 7),
    /// or the single data key (before version 5).
    base: Zeroizing<[u8; KEY_LEN]>,
    /// Whether every zone uses `base` itself (before version 5).
    single: bool,
    /// Bytes of cipher key taken from each zone key.
    cipher_bytes: usize,
    /// The IV key, appended to each cipher key for CBC's IV generator.
    iv_key: Option<Zeroizing<[u8; GELI_IV_KEY_LEN]>>,
}

impl fmt::Debug for ZoneKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZoneKeys")
            .field("single", &self.single)
            .field("cipher_bytes", &self.cipher_bytes)
            .finish_non_exhaustive()
    }
}

impl ZoneKeys {
    /// The key source of a provider of metadata `version` opened with `mkey` (IV key ||
    /// data key), whose cipher takes `cipher_bytes` of each key, CBC (`cbc`) or XTS.
    pub fn new(version: u32, mkey: &[u8], cipher_bytes: usize, cbc: bool) -> ZoneKeys {
        ZoneKeys::derive(version, mkey, cipher_bytes, cbc, false)
    }

    /// [`ZoneKeys::new`] for an authenticated provider: the encryption key is
    /// HMAC-SHA512(data key, 0x10) in place of the data key. Its zones count underlying
    /// sectors, each unit's zone coming from its own offset (`g_eli_key_hold` with the
    /// underlying sector size).
    pub fn authenticated(version: u32, mkey: &[u8], cipher_bytes: usize, cbc: bool) -> ZoneKeys {
        ZoneKeys::derive(version, mkey, cipher_bytes, cbc, true)
    }

    fn derive(version: u32, mkey: &[u8], cipher_bytes: usize, cbc: bool, auth: bool) -> ZoneKeys {
        let (iv, data) = mkey.split_at(KEY_LEN);
        let ekey = auth.then(|| hmac_sha512(data, &[&[0x10]]));
        let data = ekey.as_ref().map_or(data, |k| &k[..]);
        let mut base = Zeroizing::new([0u8; KEY_LEN]);
        // g_eli_key_init / g_eli_key_fill: G_ELI_FLAG_ENC_IVKEY before version 7.
        base.copy_from_slice(if (5..7).contains(&version) { iv } else { data });
        let iv_key = cbc.then(|| {
            let mut k = Zeroizing::new([0u8; GELI_IV_KEY_LEN]);
            k.copy_from_slice(iv);
            k
        });
        ZoneKeys {
            base,
            single: version < 5,
            cipher_bytes,
            iv_key,
        }
    }

    /// Whether every sector uses one key (metadata before version 5).
    pub fn single(&self) -> bool {
        self.single
    }
}

/// The tags' key of an authenticated provider opened with `mkey` (IV key || data key):
/// HMAC-SHA512(data key, 0x11).
pub fn auth_key(mkey: &[u8]) -> Zeroizing<[u8; KEY_LEN]> {
    hmac_sha512(&mkey[KEY_LEN..2 * KEY_LEN], &[&[0x11]])
}

impl KeySource for ZoneKeys {
    fn zone_key(&self, zone: u64) -> Result<Zeroizing<Vec<u8>>> {
        let full = if self.single {
            self.base.clone()
        } else {
            hmac_sha512(&self.base[..], &[b"ekey", &zone.to_le_bytes()])
        };
        let mut key = Zeroizing::new(Vec::with_capacity(self.cipher_bytes + GELI_IV_KEY_LEN));
        key.extend_from_slice(&full[..self.cipher_bytes]);
        if let Some(iv) = &self.iv_key {
            key.extend_from_slice(&iv[..]);
        }
        Ok(key)
    }
}
