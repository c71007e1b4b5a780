//! Encrypted volumes.
//!
//! - [`luks`]: the LUKS2 and LUKS1 on-disk formats (headers, JSON metadata, keyslots with
//!   the anti-forensic splitter, digests, PBKDF2/Argon2), compatible with cryptsetup;
//! - [`engine`]: the sector engine, `read_at`/`write_at` at any offset over an encrypted
//!   data area, large requests split into bounded chunks of whole sectors over a worker pool.
#![forbid(unsafe_code)]

pub mod atomic;
pub mod engine;
pub mod luks;
