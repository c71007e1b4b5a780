//! The 16-byte block that AES, GHASH, GCM and the modes share, in a module of its own so
//! that none of them has to import another for it.

/// The AES block size in bytes (also GHASH's block).
pub const BLOCK: usize = 16;

/// One 16-byte block.
pub(crate) type Block = [u8; BLOCK];
