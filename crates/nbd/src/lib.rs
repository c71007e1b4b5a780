//! An NBD server (the NBD protocol's fixed newstyle handshake and transmission phase) over
//! any [`Export`]. This crate knows nothing about encryption.
#![forbid(unsafe_code)]

use std::io;

/// What the server serves: a byte-addressed device of fixed size. Implementations must be
/// safe to call from several threads at once (requests run concurrently).
pub trait Export: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// The preferred block size (the volume's sector size); a power of two, 512..=65536.
    fn preferred_block_size(&self) -> u32;
    /// Whether writes are refused.
    fn read_only(&self) -> bool;
    /// Fills `buf` from `offset`; the range is within `size()`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Stores `buf` at `offset`; the range is within `size()`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;
}
