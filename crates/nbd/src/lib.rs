//! An NBD server (the NBD protocol's fixed newstyle handshake and transmission phase) over
//! any [`Export`]. This crate knows nothing about encryption.
//!
//! - [`proto`]: the wire constants (from the NBD project's `doc/proto.md`);
//! - `handshake`: option haggling (GO, INFO, EXPORT_NAME, LIST, ABORT; the rest unsupported);
//! - `transmission`: one reader thread per connection parses requests and hands them to a
//!   small worker pool; replies are serialized by a mutex on the socket and may leave in any
//!   order (the client matches them by cookie);
//! - [`Server`]: binds a Unix socket or a loopback TCP port, accepts connections, and on
//!   [`ShutdownHandle::shutdown`] stops reading requests, lets the ones in flight finish,
//!   and flushes the export.
//!
//! Simple replies only: structured replies bring nothing here (no sparse reads, no block
//! status), and every NBD client falls back to simple replies when the option is refused.
#![forbid(unsafe_code)]

mod error;
mod handshake;
pub mod proto;
mod server;
mod stream;
mod transmission;

pub use error::Error;
pub use server::{Listen, Server, ServerConfig, ShutdownHandle};

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

    /// The smallest request the export handles without the client doing read-modify-write
    /// itself: 1 when `read_at`/`write_at` accept any offset and length.
    fn min_block_size(&self) -> u32 {
        1
    }

    /// Whether `flush` on any connection makes the completed writes of every connection
    /// durable (true when all connections share one file and flush is fdatasync), so
    /// clients may open several connections (NBD_FLAG_CAN_MULTI_CONN).
    fn can_multi_conn(&self) -> bool {
        true
    }

    /// Whether [`Export::trim`] may be called (NBD_FLAG_SEND_TRIM).
    fn can_trim(&self) -> bool {
        false
    }

    /// Discards `length` bytes at `offset` (the contents read afterwards are unspecified).
    /// Called only when [`Export::can_trim`] says so.
    fn trim(&self, offset: u64, length: u64) -> io::Result<()> {
        let _ = (offset, length);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Makes `length` bytes at `offset` read as zeros. The default writes zeros through
    /// [`Export::write_at`] in bounded pieces (on an encrypted volume: encrypted zeros, so
    /// nothing about the contents leaks and no hole is punched).
    fn write_zeroes(&self, offset: u64, length: u64) -> io::Result<()> {
        const PIECE: usize = 1 << 20;
        let zeros = vec![0u8; (length.min(PIECE as u64)) as usize];
        let mut done = 0u64;
        while done < length {
            let n = (length - done).min(PIECE as u64) as usize;
            self.write_at(&zeros[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }
}
