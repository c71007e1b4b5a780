//! Encrypted volumes, in layers that know little of each other:
//!
//! - [`store`]: where the bytes live ([`Store`]: positioned reads and writes, sync, size,
//!   discard; [`FileStore`] over a local file or block device; [`Placement`]: one store,
//!   or a detached header beside its data), and [`lock`], the advisory locks between
//!   processes on an image (a header lock for reading and changing headers, a use claim
//!   while the data is read or written);
//! - [`mod@format`]: the on-disk formats behind one interface ([`format::Format`]: detect,
//!   read and validate, unlock, keyslot changes, header backup and restore, dump), with
//!   [`luks`] (LUKS1 and LUKS2, compatible with cryptsetup), [`geli`] (FreeBSD's GELI) and
//!   [`bitlk`] (BitLocker, existing volumes) registered in
//!   [`formats`], and [`tcrypt`] (VeraCrypt and TrueCrypt, existing volumes, read only
//!   when asked for: they have no signature); [`signatures`] finds and wipes every format's signature
//!   (a leaf the formats call when they create a header);
//! - [`layout`]: what the engine needs from a format ([`Layout`]: where each sector lives,
//!   its key, one per volume or per zone, its IV rule);
//! - [`engine`]: `read_at`/`write_at` at any offset over the data area a layout
//!   describes, large requests split into chunks of whole sectors over a worker pool.
//!
//! Shared by the formats: [`kdf`] (PBKDF2, Argon2, calibration; its slow steps told to a
//! front end through [`kdf::progress`]) and [`hash`]; the one error type is [`Error`].
//! [`atomic`] replaces files atomically (header backups, the CLI's outputs).
#![forbid(unsafe_code)]

pub mod atomic;
pub mod bitlk;
mod crc;
pub mod engine;
mod error;
pub mod format;
pub mod formats;
pub mod fvault2;
pub mod geli;
pub mod hash;
pub mod kdf;
pub mod layout;
pub mod lock;
pub mod luks;
pub mod signatures;
pub mod store;
pub mod tcrypt;

pub use error::{Error, HeaderError, KeyslotError, Result};
pub use format::{backup_header, restore_header, Header, Unlocked};
pub use layout::{AuthenticationFailed, Geometry, IvRule, Layout, SectorMetadata, UnitKeys};
pub use store::{FileStore, Placement, Store, WriteDone};

use std::sync::{Mutex, MutexGuard};

/// Fills `buf` from the operating system's random source.
pub(crate) fn random(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf)
        .map_err(|e| Error::io("the random source", std::io::Error::other(e.to_string())))
}

/// Constant-time equality (`subtle`); slices of different lengths are unequal.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// Locks `m`, ignoring poisoning: none of this crate's locks guards an invariant that a
/// panicking holder could leave broken (lock tables guard no data; buffer lists and
/// caches are plain collections).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
