//! `geli onetime`: a provider attached under a random master key that is never stored
//! (FreeBSD `sys/geom/eli/g_eli_ctl.c`, `g_eli_ctl_onetime`): no metadata is written and
//! no sector reserved, the whole provider is data, whatever is written is unreadable once
//! it is detached. The master key is 128 random bytes (IV key || data key) and the data is
//! laid out as an attached provider of the newest metadata version lays it out (byte-offset
//! IVs, a key per zone of 2^20 sectors derived from the data key), from metadata that
//! exists in memory only.

use super::init;
use super::keys::KEY_LEN;
use super::metadata::{algo, flags, Metadata, MAX_MKEYS, MKEY_LEN, SALT_LEN, VERSION};
use super::Geli;
use crate::error::{Error, Result};
use crate::Unlocked;
use zeroize::Zeroizing;

/// What `geli onetime` is told (`-a`, `-e`, `-l`, `-s`, `-T`, `-R`, `-d`). Defaults as
/// geli's: AES-XTS with a 128-bit key, the provider's sector size, no authentication.
#[derive(Debug, Clone)]
pub struct OnetimeOptions {
    /// `md_ealgo`: [`algo::AES_XTS`], [`algo::AES_CBC`], or [`algo::NULL_CBC`] with
    /// authentication.
    pub ealgo: u16,
    /// `md_aalgo`: an HMAC for authenticated sectors (`geli onetime -a`), 0 for none.
    /// Sectors never written since the provider was attached then fail their tags.
    pub aalgo: u16,
    /// Key length in bits; 0 for the algorithm's default (128).
    pub keylen: u16,
    /// Bytes per GELI sector (0: the provider's, 512).
    pub sectorsize: u32,
    /// Flags the provider would carry (`NODELETE` for `-T`, `RW_DETACH` for `-d`, not
    /// `AUTORESIZE` with `-R`); they change nothing in the data.
    pub flags: u32,
}

impl Default for OnetimeOptions {
    fn default() -> OnetimeOptions {
        OnetimeOptions {
            ealgo: algo::AES_XTS,
            aalgo: 0,
            keylen: 0,
            sectorsize: 0,
            flags: flags::AUTORESIZE,
        }
    }
}

/// The metadata `opts` describes for a provider of `size` bytes (512-byte sectors), as
/// geli checks it, and the provider opened under a fresh random master key: all of its
/// bytes, in whole GELI sectors (whole stored sectors when authenticated), are data.
pub fn onetime(size: u64, opts: &OnetimeOptions) -> Result<(Metadata, Unlocked)> {
    if opts.ealgo == algo::NULL_CBC && opts.aalgo == 0 {
        return Err(Error::invalid(
            "NULL encryption is allowed only with authentication (geli onetime -a)",
        ));
    }
    let mut flags = opts.flags & !flags::ONETIME;
    if opts.aalgo != 0 {
        super::mac_algorithm(opts.aalgo)?;
        flags |= flags::AUTH;
    }
    let keylen = init::keylen(opts.ealgo, opts.keylen)?;
    let sectorsize = init::sectorsize(opts.sectorsize, 512)?;
    let data = match opts.aalgo {
        0 => size - size % u64::from(sectorsize),
        a => super::SectorMetadata {
            unit_len: 512,
            mac: super::mac_algorithm(a)?,
        }
        .data_size(size, sectorsize as usize),
    };
    if data == 0 {
        return Err(Error::invalid(format!(
            "a {size}-byte provider is smaller than one {sectorsize}-byte GELI sector"
        )));
    }
    let md = Metadata {
        version: VERSION,
        flags,
        ealgo: opts.ealgo,
        keylen,
        aalgo: opts.aalgo,
        provsize: size,
        sectorsize,
        keys: 0,
        iterations: -1,
        salt: [0; SALT_LEN],
        mkeys: [[0; MKEY_LEN]; MAX_MKEYS],
    };
    let mut mkey = Zeroizing::new(vec![0u8; 2 * KEY_LEN]);
    crate::random(&mut mkey)?;
    let unlocked = Geli::new(md.clone(), 512).open_data(mkey, 0, data)?;
    let md = Metadata {
        flags: md.flags | flags::ONETIME,
        ..md
    };
    Ok((md, unlocked))
}
