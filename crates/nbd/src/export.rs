//! The [`Export`] trait: what the server serves, a byte-addressed device of fixed size.
//!
//! Capability queries (`read_only`, `can_trim`, `can_multi_conn`, block sizes) become the
//! transmission flags and block sizes a client is told; data operations run on the
//! connections' worker threads, several at once (a write the export can start and complete
//! on its own, [`Export::start_write`], is handed over by the connection's reader and
//! answered when the export calls back, with no worker waiting on it). Nothing in the
//! trait is NBD-specific
//! beyond those capabilities, so a volume, a file or a memory buffer can stand behind it.

use std::io;
use std::ops::Range;

/// What a started write ([`Export::start_write`]) calls once it is over, on whichever
/// thread that happens: its buffer back, and the outcome.
pub type WriteDone = Box<dyn FnOnce(Vec<u8>, io::Result<()>) + Send>;

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
    /// Fills `buf[range]` from `offset` like [`Export::read_at`], taking the buffer by
    /// value so that an export whose data arrives on another thread (a proxy's upstream)
    /// can have it read straight into the reply; the buffer comes back in every case.
    fn read_owned(
        &self,
        mut buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let r = self.read_at(&mut buf[range], offset);
        (buf, r)
    }
    /// Stores `buf` at `offset`; the range is within `size()`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Stores `buf[range]` at `offset` like [`Export::write_at`], taking the buffer by
    /// value: the export may use it as its own scratch space (an encrypting export
    /// encrypts in place instead of into a second buffer), so its contents are
    /// unspecified when it comes back, as it does in every case.
    fn write_owned(
        &self,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let r = self.write_at(&buf[range], offset);
        (buf, r)
    }
    /// Whether [`Export::start_write`] of `len` bytes at `offset` returns before the write
    /// is over, completing it on another thread (an export over librbd's asynchronous
    /// writes). The server then starts such a write from the connection's reader and
    /// replies when it is done; every other write runs on a worker. The default: `false`.
    fn starts_write(&self, offset: u64, len: usize) -> bool {
        let _ = (offset, len);
        false
    }
    /// Stores `buf[range]` at `offset` like [`Export::write_owned`], and calls `done` with
    /// the buffer and the outcome when the write is over: later, on any thread, when
    /// [`Export::starts_write`] said so; before returning otherwise (the default:
    /// [`Export::write_owned`], then `done`).
    fn start_write(&self, buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        let (buf, r) = self.write_owned(buf, range, offset);
        done(buf, r)
    }
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;

    /// Whether a small read returns quickly, without waiting on a network (a volume over
    /// a local file): the server then serves reads of at most 4 KiB on the connection's
    /// reader thread instead of handing them to a worker and back. The default, `false`,
    /// keeps every read on the workers, where a slow one holds up no other request.
    fn quick_reads(&self) -> bool {
        false
    }

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

    /// Whether [`Export::write_at_fua`] makes one write durable by itself, cheaper than a
    /// write and a [`Export::flush`] of everything (a FUA write to an upstream NBD server).
    /// When false, a write with NBD_CMD_FLAG_FUA is a write and then a flush.
    fn can_fua(&self) -> bool {
        false
    }

    /// Stores `buf` at `offset` and returns once it is durable. Called only when
    /// [`Export::can_fua`] says so; the default: [`Export::write_at`], then
    /// [`Export::flush`].
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_at(buf, offset)?;
        self.flush()
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
