//! The one error type of the LUKS layer. Messages are lowercase and never contain a
//! passphrase or key bytes.

/// Everything opening, unlocking or changing a LUKS volume can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the image failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The image carries no LUKS header at all.
    #[error("not a luks volume: {0}")]
    NotLuks(String),
    /// A header (or both LUKS2 copies) fails its checks: magic, checksum, json, layout.
    #[error("corrupt luks header: {0}")]
    Corrupt(String),
    /// The image ends before a header, a keyslot area or the data area.
    #[error("image is truncated: {0}")]
    Truncated(String),
    /// A valid volume that uses something sectorcrypt does not implement.
    #[error("unsupported volume: {0}")]
    Unsupported(String),
    /// No keyslot opens with the passphrase given (wrong passphrase, or the keyslot area
    /// holding it is damaged).
    #[error(
        "no keyslot opens with this passphrase (wrong passphrase, or its keyslot area is damaged)"
    )]
    WrongPassphrase,
    /// The volume has no active keyslot left (erased).
    #[error("the volume has no active keyslot (it was erased); the data cannot be opened without a header backup")]
    NoKeyslot,
    /// Every keyslot is in use, or the keyslot area has no room for another.
    #[error("no free keyslot: {0}")]
    NoFreeKeyslot(String),
    /// A keyslot number that is not active or out of range.
    #[error("keyslot {0} is not active")]
    KeyslotNotActive(usize),
    /// An option or argument the format cannot take.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The crypto core refused a key or a cipher.
    #[error(transparent)]
    Crypto(#[from] sectorcrypt_crypto::Error),
}

/// Results of the LUKS layer.
pub type Result<T> = std::result::Result<T, Error>;
