//! The crypto crate's one error type.

use crate::{Backend, GostBackend};

/// Everything the crypto core can refuse. Messages are lowercase and never contain key bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key whose length this algorithm or mode does not accept.
    #[error("invalid key length {got} bytes for {what} (expected {expected})")]
    KeyLength {
        /// What the key was for, e.g. "aes-xts".
        what: &'static str,
        /// The length given.
        got: usize,
        /// The accepted lengths, in words.
        expected: &'static str,
    },
    /// XTS with Key1 == Key2, which IEEE 1619-2007 section 5.1 and FIPS forbid.
    #[error("aes-xts: the two key halves are equal; xts needs two independent keys")]
    XtsEqualKeys,
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
    /// An IV of the wrong length.
    #[error("invalid iv length {got} bytes (expected {expected})")]
    IvLength {
        /// Length given.
        got: usize,
        /// Length expected.
        expected: usize,
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
    /// A cipher specification that is not understood.
    #[error("unsupported cipher {0:?} (supported: aes-xts-plain64, aes-xts-plain, aes-cbc-plain64, aes-cbc-plain, aes-cbc-essiv:sha256, aes-ecb)")]
    UnknownCipher(String),
    /// `SECTORCRYPT_BACKEND` names no backend.
    #[error("unknown backend {0:?} (known: soft, aesni, vaes, avx512, avx2)")]
    UnknownBackend(String),
    /// A backend this CPU (or its OS) cannot run.
    #[error("backend {backend} is not usable on this cpu: {why}")]
    BackendUnavailable {
        /// The backend asked for.
        backend: Backend,
        /// What is missing.
        why: String,
    },
    /// A backend failed its known-answer self-test and is never used.
    #[error("backend {0} failed its known-answer self-test")]
    SelfTestFailed(Backend),
    /// An AEAD tag did not verify: the data, the aad, the iv or the key differ from what
    /// was sealed. Nothing was released (an in-place buffer is zeroed).
    #[error("authentication failed: the tag does not match")]
    AuthenticationFailed,
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
    MessageTooLong {
        /// What was too long, e.g. "gcm plaintext".
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
    /// An iv length outside a range (rather than one fixed length).
    #[error("invalid iv length {got} bytes (expected {expected})")]
    IvLengthRange {
        /// Length given.
        got: usize,
        /// The accepted lengths, in words.
        expected: &'static str,
    },
    /// A GOST backend this CPU (or its OS) cannot run.
    #[error("gost backend {backend} is not usable on this cpu: {why}")]
    GostBackendUnavailable {
        /// The backend asked for.
        backend: GostBackend,
        /// What is missing.
        why: String,
    },
    /// A GOST backend failed its known-answer self-test and is never used.
    #[error("gost backend {0} failed its known-answer self-test")]
    GostSelfTestFailed(GostBackend),
    /// An S-box parameter set name that is not known.
    #[error("unknown s-box {0:?} (known: id-GostR3411-94-TestParamSet, id-GostR3411-94-CryptoProParamSet, id-Gost28147-89-TestParamSet, id-Gost28147-89-CryptoPro-A-ParamSet, id-Gost28147-89-CryptoPro-B-ParamSet, id-Gost28147-89-CryptoPro-C-ParamSet, id-Gost28147-89-CryptoPro-D-ParamSet, id-tc26-gost-28147-param-Z)")]
    UnknownSbox(String),
    /// A nonce the mode refuses.
    #[error("invalid nonce: {0}")]
    InvalidNonce(&'static str),
}
