//! The crypto crate's one error type, in four categories a caller can act on: the key, the
//! input (buffers, IVs, tags, sizes), names that are not known, the backend; plus a failed
//! authentication, which callers usually handle on its own.

/// Everything the crypto core can refuse. Messages are lowercase and never contain key bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key the algorithm or mode does not accept.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A buffer, IV, tag or size the operation cannot take.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A name (cipher, backend, S-box) that is not known.
    #[error("unknown {what} {name:?} (known: {known})")]
    UnknownName {
        /// What kind of name, e.g. "backend".
        what: &'static str,
        /// The name given.
        name: String,
        /// The known names, comma separated (built from the crate's own tables).
        known: String,
    },
    /// A backend that cannot run here or failed its self-test.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// An AEAD tag did not verify: the data, the aad, the iv or the key differ from what
    /// was sealed. Nothing was released (an in-place buffer is zeroed).
    #[error("authentication failed: the tag does not match")]
    AuthenticationFailed,
}

/// A key the algorithm or mode does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A key whose length this algorithm or mode does not accept.
    #[error("invalid key length {got} bytes for {what} (expected {expected})")]
    Length {
        /// What the key was for, e.g. "aes-xts".
        what: &'static str,
        /// The length given.
        got: usize,
        /// The accepted lengths, in words.
        expected: &'static str,
    },
    /// XTS with Key1 == Key2, which IEEE 1619-2007 section 5.1 and FIPS forbid.
    #[error("aes-xts: the two key halves are equal; xts needs two independent keys")]
    XtsEqualHalves,
}

/// A buffer, IV, tag or size the operation cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// A buffer length the operation cannot take.
    #[error("invalid length {got} bytes: {why}")]
    Length {
        /// The length given.
        got: usize,
        /// What the length must be.
        why: &'static str,
    },
    /// Source and destination of an out-of-place call differ in length.
    #[error("source is {src} bytes but destination is {dst} bytes")]
    LengthMismatch {
        /// Source length.
        src: usize,
        /// Destination length.
        dst: usize,
    },
    /// An IV of a length the mode does not accept.
    #[error("invalid iv length {got} bytes (expected {expected})")]
    IvLength {
        /// Length given.
        got: usize,
        /// The accepted lengths, in words.
        expected: &'static str,
    },
    /// A tag length the operation does not accept.
    #[error("invalid tag length {got} bytes (expected {expected})")]
    TagLength {
        /// Length given.
        got: usize,
        /// The accepted lengths, in words.
        expected: &'static str,
    },
    /// A message, aad or iv longer than the mode allows for one message.
    #[error("{what} too long: at most {limit} bytes per message")]
    TooLong {
        /// What was too long, e.g. "gcm plaintext".
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
    /// A sector size outside 16..=65536 or not a multiple of 16.
    #[error("invalid sector size {0}: must be a multiple of 16 from 16 to 65536")]
    SectorSize(usize),
    /// A sector size that is no multiple of 512 while the IV counts 512-byte units.
    #[error(
        "sector size {0} is not a multiple of 512: the iv counts 512-byte units unless \
         large-sector ivs are chosen"
    )]
    SectorSizeNeedsLargeIv(usize),
    /// A nonce the mode refuses.
    #[error("invalid nonce: {0}")]
    Nonce(&'static str),
}

/// A backend that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// A backend this CPU (or its OS, or this build) cannot run.
    #[error("{algorithm} backend {backend} is not usable on this cpu: {why}")]
    Unavailable {
        /// The algorithm family: "aes" or "gost".
        algorithm: &'static str,
        /// The backend's name.
        backend: &'static str,
        /// What is missing.
        why: String,
    },
    /// A backend failed its known-answer self-test and is never used.
    #[error("{algorithm} backend {backend} failed its known-answer self-test")]
    SelfTestFailed {
        /// The algorithm family: "aes" or "gost".
        algorithm: &'static str,
        /// The backend's name.
        backend: &'static str,
    },
}

impl Error {
    /// An unknown `what` called `name`; `known` lists the accepted names.
    pub(crate) fn unknown_name<'a>(
        what: &'static str,
        name: &str,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Error {
        Error::UnknownName {
            what,
            name: name.to_string(),
            known: known.into_iter().collect::<Vec<_>>().join(", "),
        }
    }
}
