//! The commands' side of the image library (`sectorcrypt_image`): its opener with the
//! global remote flags, the passphrase from the key flags, wait messages and exit codes
//! ([`image`]), and a volume opened to be served ([`export`]). Stores, locks, claims and
//! creation are the library's.

pub mod export;
pub mod image;
