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

/// What `geli onetime` is told (`-e`, `-l`, `-s`, `-T`, `-R`, `-d`). Defaults as geli's:
/// AES-XTS with a 128-bit key, the provider's sector size.
#[derive(Debug, Clone)]
pub struct OnetimeOptions {
    /// `md_ealgo`: [`algo::AES_XTS`] or [`algo::AES_CBC`].
    pub ealgo: u16,
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
            keylen: 0,
            sectorsize: 0,
            flags: flags::AUTORESIZE,
        }
    }
}

/// The metadata `opts` describes for a provider of `size` bytes (512-byte sectors), as
/// geli checks it, and the provider opened under a fresh random master key: all of its
/// bytes, rounded down to whole GELI sectors, are data.
pub fn onetime(size: u64, opts: &OnetimeOptions) -> Result<(Metadata, Unlocked)> {
    if opts.ealgo == algo::NULL_CBC {
        return Err(Error::invalid(
            "NULL encryption is allowed only with authentication, which one-time providers \
             do not have here",
        ));
    }
    let keylen = init::keylen(opts.ealgo, opts.keylen)?;
    let sectorsize = init::sectorsize(opts.sectorsize, 512)?;
    let data = size - size % u64::from(sectorsize);
    if data == 0 {
        return Err(Error::invalid(format!(
            "a {size}-byte provider is smaller than one {sectorsize}-byte GELI sector"
        )));
    }
    let md = Metadata {
        version: VERSION,
        flags: opts.flags & !flags::ONETIME,
        ealgo: opts.ealgo,
        keylen,
        aalgo: 0,
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
