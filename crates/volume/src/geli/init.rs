//! Creating GELI providers (`geli init`, FreeBSD `lib/geom/eli/geom_eli.c`, `eli_init`):
//! a random salt and master key (IV key || data key), slot 0 sealed under the user key,
//! slot 1 random bytes (geli fills both slots with random bytes before sealing the first),
//! the metadata written to the provider's last sector. The data is not touched (an
//! authenticated provider's sectors then fail their tags until written: the caller wipes
//! them, as `geli init -a` asks its user to).

use super::keys::{self, KEY_LEN};
use super::metadata::{algo, flags, Metadata, MAX_MKEYS, MKEY_LEN, SALT_LEN, VERSION};
use super::Geli;
use crate::error::{Error, Result};
use crate::format::Format as _;
use crate::hash::HashAlg;
use crate::kdf::{KdfKind, KdfOptions};
use crate::store::{self, Store};
use crate::Unlocked;
use zeroize::Zeroizing;

/// What `geli init` is told. Defaults: AES-XTS with a 128-bit key, 512-byte sectors,
/// version 7, PBKDF2 calibrated to about 2 seconds, the AUTORESIZE flag (geli init sets it
/// unless `-R`: FreeBSD's `tests/sys/geom/class/eli/configure_test.sh` expects `flags:
/// 0x200` after a plain `geli init`).
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// `md_ealgo`: [`algo::AES_XTS`], [`algo::AES_CBC`], [`algo::CAMELLIA_CBC`], or
    /// [`algo::NULL_CBC`] (with
    /// `aalgo` only).
    pub ealgo: u16,
    /// `md_aalgo`: 0 for none, or an HMAC ([`algo::HMAC_SHA256`], ...): an authenticated
    /// provider (the AUTH flag), geli's `-a`.
    pub aalgo: u16,
    /// Key length in bits; 0 for the algorithm's default (128, `g_eli_keylen`).
    pub keylen: u16,
    /// Bytes per GELI sector (0: the provider's sector size).
    pub sectorsize: u32,
    /// Bytes per provider sector: 512, or 4096 for a provider of 4 KiB sectors.
    pub provider_sector: u64,
    /// PBKDF2 iterations: `Some(0)` for salt || passphrase, `None` to calibrate (or -1
    /// with no passphrase).
    pub iterations: Option<u32>,
    /// Calibration target in milliseconds.
    pub iter_time_ms: u32,
    /// Whether a passphrase is part of the user key (geli's `-P` clears it).
    pub use_passphrase: bool,
    /// On-disk flags (`BOOT`, `RW_DETACH`, `GELIBOOT`, `NODELETE`, ...).
    pub flags: u32,
    /// Metadata version (geli's `-V`), 1 to 7.
    pub version: u32,
}

impl Default for InitOptions {
    fn default() -> InitOptions {
        InitOptions {
            ealgo: algo::AES_XTS,
            aalgo: 0,
            keylen: 0,
            sectorsize: 0,
            provider_sector: 512,
            iterations: None,
            iter_time_ms: 2000,
            use_passphrase: true,
            flags: flags::AUTORESIZE,
            version: VERSION,
        }
    }
}

/// Initialises `store` as a GELI provider whose user key comes from `keyfiles` (in
/// order) and, when `opts.use_passphrase`, `passphrase`. Every known format's signature
/// in `store` is wiped first ([`crate::signatures::wipe_signatures`]). Returns the header and
/// the provider opened with its new key (slot 0).
pub fn init(
    store: &dyn Store,
    opts: &InitOptions,
    keyfiles: &[&[u8]],
    passphrase: &[u8],
) -> Result<(Geli, Unlocked)> {
    if opts.ealgo == algo::NULL_CBC && opts.aalgo == 0 {
        return Err(Error::invalid(
            "NULL encryption is allowed only with authentication (geli init -a, --integrity)",
        ));
    }
    let mut flags = opts.flags;
    if opts.aalgo != 0 {
        super::mac_algorithm(opts.aalgo)?;
        flags |= flags::AUTH;
    }
    let keylen = keylen(opts.ealgo, opts.keylen)?;
    if !(1..=VERSION).contains(&opts.version) {
        return Err(Error::invalid(format!(
            "GELI metadata version {} cannot be created (1 to {VERSION})",
            opts.version
        )));
    }
    if opts.ealgo == algo::AES_XTS && opts.version < 5 {
        return Err(Error::invalid(
            "AES-XTS exists from GELI metadata version 5 on",
        ));
    }
    if !opts.use_passphrase && keyfiles.is_empty() {
        return Err(Error::invalid(
            "no key component: give a passphrase or a keyfile",
        ));
    }
    let prov = opts.provider_sector;
    if prov != 512 && prov != 4096 {
        return Err(Error::invalid(format!(
            "a provider sector has 512 or 4096 bytes, not {prov}"
        )));
    }
    let sectorsize = sectorsize(opts.sectorsize, prov)?;
    let size = store::size(store)?;
    let provsize = size / prov * prov;
    let ss = u64::from(sectorsize);
    let stored = match opts.aalgo {
        0 => ss,
        a => super::SectorMetadata {
            unit_len: prov as usize,
            mac: super::mac_algorithm(a)?,
        }
        .stored_sector_len(ss as usize) as u64,
    };
    if provsize < prov + stored {
        return Err(Error::invalid(format!(
            "{} has {size} bytes: too small for one {sectorsize}-byte GELI sector and the \
             metadata sector",
            store.name()
        )));
    }
    let iterations: i32 = if !opts.use_passphrase {
        -1
    } else {
        match opts.iterations {
            Some(n) => i32::try_from(n)
                .map_err(|_| Error::invalid(format!("{n} PBKDF2 iterations is too many")))?,
            None => {
                let kdf = KdfOptions {
                    kind: KdfKind::Pbkdf2,
                    hash: HashAlg::Sha512,
                    iter_time_ms: opts.iter_time_ms,
                    ..KdfOptions::default()
                };
                match kdf.resolve(KEY_LEN)? {
                    crate::kdf::Kdf::Pbkdf2 { iterations, .. } => {
                        i32::try_from(iterations).unwrap_or(i32::MAX)
                    }
                    _ => unreachable!("a PBKDF2 request resolves to PBKDF2"),
                }
            }
        }
    };
    let mut salt = [0u8; SALT_LEN];
    crate::random(&mut salt)?;
    let mut mkeys = [[0u8; MKEY_LEN]; MAX_MKEYS];
    for m in &mut mkeys {
        crate::random(m)?;
    }
    let mut mkey = Zeroizing::new(vec![0u8; 2 * KEY_LEN]);
    crate::random(&mut mkey)?;
    let user = keys::user_key(keyfiles, Some(passphrase), &salt, iterations)?;
    let slot_key_bytes = match opts.ealgo {
        algo::NULL_CBC => 0,
        _ => usize::from(keylen) / 8,
    };
    let camellia = opts.ealgo == algo::CAMELLIA_CBC;
    mkeys[0] = keys::seal_slot(&mkey, &user[..], slot_key_bytes, camellia)?;
    let md = Metadata {
        version: opts.version,
        flags,
        ealgo: opts.ealgo,
        keylen,
        aalgo: opts.aalgo,
        provsize,
        sectorsize,
        keys: 1,
        iterations,
        salt,
        mkeys,
    };
    let geli = Geli::new(md, prov);
    // No other format's header may stay live beside the new metadata (a LUKS header at
    // the start would still be found first).
    crate::signatures::wipe_signatures(store)?;
    geli.write(store)?;
    let unlocked = geli.unlocked(store, mkey, 0)?;
    Ok((geli, unlocked))
}

/// The key length in bits for `ealgo` (`g_eli_keylen`): `keylen`, or the algorithm's
/// default (128) when 0; refuses a length the algorithm does not take and the algorithms
/// not supported here.
pub(crate) fn keylen(ealgo: u16, keylen: u16) -> Result<u16> {
    match (ealgo, keylen) {
        // g_eli_keylen: NULL takes any length up to 512 bits, 512 by default.
        (algo::NULL_CBC, 0) => Ok(512),
        (algo::NULL_CBC, k @ 1..=512) => Ok(k),
        (algo::NULL_CBC, k) => Err(Error::invalid(format!(
            "key length {k} is not valid for NULL (at most 512)"
        ))),
        (algo::AES_XTS | algo::AES_CBC | algo::CAMELLIA_CBC, 0) => Ok(128),
        (algo::AES_XTS, k @ (128 | 256)) => Ok(k),
        (algo::AES_CBC | algo::CAMELLIA_CBC, k @ (128 | 192 | 256)) => Ok(k),
        (algo::AES_XTS | algo::AES_CBC | algo::CAMELLIA_CBC, k) => Err(Error::invalid(format!(
            "key length {k} is not valid for {} (AES-XTS: 128 or 256; AES-CBC and \
             CAMELLIA-CBC: 128, 192 or 256)",
            algo::name(ealgo)
        ))),
        (a, _) => Err(Error::unsupported(format!(
            "GELI encryption {} is not supported for new providers (supported: AES-XTS, \
             AES-CBC, CAMELLIA-CBC, NULL with authentication)",
            algo::name(a)
        ))),
    }
}

/// The GELI sector size for a provider of `prov`-byte sectors: `sectorsize`, or `prov`
/// when 0; a power of two from `prov` to 65536.
pub(crate) fn sectorsize(sectorsize: u32, prov: u64) -> Result<u32> {
    let ss = if sectorsize == 0 {
        prov as u32
    } else {
        sectorsize
    };
    let s = u64::from(ss);
    if !s.is_power_of_two() || s < prov || s > 65536 {
        return Err(Error::invalid(format!(
            "GELI sector size {ss} must be a power of two from {prov} to 65536"
        )));
    }
    Ok(ss)
}
