//! The one error type of the volume crate, for every format, the backing store and the
//! layout. Messages are lowercase, name what failed (a file, an offset, a keyslot) and
//! never contain a passphrase or key bytes.
//!
//! Categories nest: [`Error::Header`] holds what is wrong with a header
//! ([`HeaderError`]), [`Error::Keyslot`] what a keyslot operation cannot do
//! ([`KeyslotError`]). The data path of the engine ([`crate::engine::Volume::read_at`] and
//! friends) returns `std::io::Error` instead, because its callers (the NBD server, the FUSE
//! mount, streams) speak `io::Error`; an engine error inside a format operation becomes
//! [`Error::Io`].

use std::io;

/// Everything opening, unlocking or changing a volume can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the backing store failed; `context` says what was being done and
    /// on which store.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `reading the keyslot area of disk.img`.
        context: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// The store holds no header of a known format, or a damaged or cut-short one.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// No keyslot opens with the passphrase given (wrong passphrase, or the keyslot area
    /// holding it is damaged).
    #[error(
        "no keyslot opens with this passphrase (wrong passphrase, or its keyslot area is damaged)"
    )]
    WrongPassphrase,
    /// A keyslot operation that the volume's keyslots do not allow.
    #[error(transparent)]
    Keyslot(#[from] KeyslotError),
    /// A valid volume, or a request, that uses something sectorcrypt does not implement.
    #[error("unsupported volume: {0}")]
    Unsupported(String),
    /// An option or argument the format, the layout or the engine cannot take.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Another process holds a use claim that conflicts with this one (an erase or header
    /// restore running, or, for an exclusive claim, any user of the volume); the same
    /// request succeeds once it is done.
    #[error("{0}")]
    InUse(String),
    /// The crypto core refused a key or a cipher.
    #[error(transparent)]
    Crypto(#[from] sectorcrypt_crypto::Error),
    /// An authenticated sector whose tag does not verify (nothing of it is released).
    #[error(transparent)]
    Authentication(#[from] AuthenticationFailed),
}

/// A tag that does not verify: the data of `sector` is not what was written there
/// (damaged, tampered with, or a unit torn by a crash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("authentication failed for sector {sector}")]
pub struct AuthenticationFailed {
    /// The first sector of the run whose tags do not verify.
    pub sector: u64,
}

/// What is wrong with a header.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// No format of [`crate::formats::FORMATS`] recognises the store.
    #[error("not a volume of a known format: {0}")]
    Unrecognised(String),
    /// A header (or every copy of it) fails its checks: magic, checksum, metadata, layout.
    #[error("corrupt header: {0}")]
    Corrupt(String),
    /// The store ends before a header, a keyslot area or the data area.
    #[error("image is truncated: {0}")]
    Truncated(String),
}

/// What a keyslot operation cannot do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyslotError {
    /// The volume has no active keyslot left (erased).
    #[error("the volume has no active keyslot (it was erased); the data cannot be opened without a header backup")]
    NoneActive,
    /// Every keyslot is in use, or the keyslot area has no room for another.
    #[error("no free keyslot: {0}")]
    NoFree(String),
    /// A keyslot number that is not active or out of range.
    #[error("keyslot {0} is not active")]
    NotActive(usize),
}

impl Error {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// [`HeaderError::Corrupt`].
    pub fn corrupt(detail: impl Into<String>) -> Error {
        Error::Header(HeaderError::Corrupt(detail.into()))
    }

    /// [`HeaderError::Truncated`].
    pub fn truncated(detail: impl Into<String>) -> Error {
        Error::Header(HeaderError::Truncated(detail.into()))
    }

    /// [`Error::Invalid`].
    pub fn invalid(detail: impl Into<String>) -> Error {
        Error::Invalid(detail.into())
    }

    /// [`Error::Unsupported`].
    pub fn unsupported(detail: impl Into<String>) -> Error {
        Error::Unsupported(detail.into())
    }
}

/// Results of the volume crate.
pub type Result<T> = std::result::Result<T, Error>;
