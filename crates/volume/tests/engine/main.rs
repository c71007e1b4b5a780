//! The sector engine against two references: `SectorCipher` applied directly to the file's
//! data area, and OpenSSL (aes-xts with plain64 tweaks, aes-cbc with plain64 or
//! essiv:sha256 IVs) sector by sector. One test binary, a module per topic.

mod alignment;
mod concurrency;
mod failures;
mod fixture;
mod fua;
mod layout;
mod objects;
mod pipes;
