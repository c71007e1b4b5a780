//! The sector engine: `read_at` / `write_at` at any byte offset over the data area a
//! [`Layout`] describes, in a [`Store`], with the plaintext seen as one flat byte range.
//! The engine knows no format: the layout says where sector `s` lives
//! ([`Layout::position`]) and encrypts runs of sectors with the right keys and IVs.
//!
//! # The data path
//! - **Whole sectors** (the aligned middle of any request) go straight through: a read is
//!   one `pread` into the caller's buffer and a decryption in place there (zero copies beyond
//!   the kernel's); a write encrypts from the caller's buffer into a pooled buffer and
//!   `pwrite`s that (one copy, which is the encryption itself).
//! - **Large requests** are cut into chunks of whole sectors ([`EngineOptions::chunk_bytes`],
//!   default [`DEFAULT_CHUNK_BYTES`], an object of up to [`MAX_OBJECT_CHUNK_BYTES`] on a
//!   store of objects such as an RBD image), one `pread`/`pwrite` per chunk, handed out
//!   over a worker pool (`fanout.rs`). A request of one chunk runs inline on the calling
//!   thread.
//! - **Unaligned edges** are read-modify-write under striped locks (`locks.rs`): only edges
//!   take locks, so aligned writes never serialize.
//! - **Streams**: [`Volume::write_from`] and [`Volume::read_to`] overlap a reader or writer
//!   with the engine on a second thread (`pipe.rs`).
//! - **Buffers** for writes and edges come from a pool (`buffers.rs`): steady state
//!   allocates nothing, and each thread has a shelf of its own in it, so threads working
//!   at once share no lock there.
//!
//! Per chunk the hot path costs one virtual call into the store and one or two `match`es in
//! the layout (single key, IV rule); nothing is done per sector beyond the cipher kernel.
//! Zoned layouts split a chunk's encryption at zone boundaries; the I/O stays one call.
//!
//! # Errors
//! Requests beyond [`Volume::size`] fail with `InvalidInput` before touching anything;
//! writes on a read-only volume with `PermissionDenied`, and so are writes that touch a
//! [`WriteFence`] (a protected hidden volume inside an outer one), whole and before
//! anything of them is written. I/O errors (`ENOSPC`, `EIO`, short
//! files) are returned as they come: when one chunk fails the others stop at their next
//! chunk and the first error is returned. Nothing panics on I/O errors.
//!
//! # Authenticated layouts
//! Sectors stored with tags ([`Layout::is_authenticated`]) take their own path
//! (`auth.rs`), chosen once per request, so the path above is unchanged: reads go through
//! a pooled buffer of stored sectors whose tags are all verified before anything is
//! decrypted into the caller's buffer; a bad tag fails the request with `InvalidData`
//! ("authentication failed for sector N"), which the NBD and FUSE fronts report as EIO.

mod auth;
mod buffers;
mod fanout;
mod locks;
mod pipe;
#[cfg(test)]
mod scaling_tests;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::store::{Store, WriteDone};
use buffers::BufferPool;
use fanout::Fan;
use locks::EdgeLocks;
use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Default bytes per chunk of a large request: 512 KiB (the measurements that chose it are
/// in docs/PERFORMANCE.md): it keeps a chunk and its copy inside a 1 MiB L2 and still
/// spreads a 1 MiB request over two threads.
pub const DEFAULT_CHUNK_BYTES: usize = 512 * 1024;

/// The largest default chunk on a store cut into objects ([`Store::object_size`]: an RBD
/// image): such a store pays per request (a round trip, an OSD operation), so the default
/// chunk there is an object, from [`DEFAULT_CHUNK_BYTES`] up to this. Measured on a
/// single-node cluster (docs/PERFORMANCE.md, Ceph RBD): 2 MiB requests read 10-25% faster
/// as one request than as four.
pub const MAX_OBJECT_CHUNK_BYTES: usize = 4 << 20;

/// The plaintext source of [`Volume::write_zeroes`] (1 MiB, more than any sector).
static ZEROS: [u8; 1 << 20] = [0; 1 << 20];

/// Tuning of a [`Volume`].
#[derive(Debug, Default, Clone)]
pub struct EngineOptions {
    /// Threads working on one large request, the caller included (default: the number of
    /// cores). `Some(1)` keeps everything on the calling thread.
    pub threads: Option<usize>,
    /// Refuse writes.
    pub read_only: bool,
    /// Bytes per chunk of a large request, rounded down to whole sectors (default
    /// [`DEFAULT_CHUNK_BYTES`], or an object up to [`MAX_OBJECT_CHUNK_BYTES`] on a store of
    /// objects).
    pub chunk_bytes: Option<usize>,
}

/// Byte ranges of a volume that writes may not touch (a hidden volume inside an outer
/// one, protected): a write, zeroing or discard that overlaps one is refused whole with
/// `PermissionDenied` before any of it is written. Reads are not affected.
#[derive(Debug, Clone)]
pub struct WriteFence {
    ranges: Vec<Range<u64>>,
    what: String,
}

impl WriteFence {
    /// Fences `ranges` (plaintext byte offsets of the volume; empty ones are dropped),
    /// named `what` in refusals.
    pub fn new(ranges: Vec<Range<u64>>, what: impl Into<String>) -> WriteFence {
        WriteFence {
            ranges: ranges.into_iter().filter(|r| !r.is_empty()).collect(),
            what: what.into(),
        }
    }

    /// The fenced ranges.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Refuses `len` bytes at `offset` when they overlap a fenced range.
    fn check(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.saturating_add(len);
        match self.ranges.iter().find(|r| offset < r.end && r.start < end) {
            Some(r) if len > 0 => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refused: the write of {len} bytes at offset {offset} touches {} (bytes \
                     {}..{} of this volume); nothing of it was written",
                    self.what, r.start, r.end
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// An encrypted data area, read and written as plaintext at any offset. `Send + Sync`:
/// every method takes `&self` and may run from many threads at once.
pub struct Volume {
    store: Box<dyn Store>,
    layout: Layout,
    size: u64,
    sector: usize,
    chunk: usize,
    read_only: bool,
    /// Why the volume is read-only whatever was asked, said in the write refusal.
    read_only_why: Option<&'static str>,
    fence: Option<WriteFence>,
    fan: Fan,
    locks: EdgeLocks,
    buffers: BufferPool,
}

impl fmt::Debug for Volume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Volume")
            .field("store", &self.store.name())
            .field("layout", &self.layout)
            .field("chunk", &self.chunk)
            .field("threads", &self.fan.threads())
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// Where a byte range falls on sectors.
enum Span {
    /// No whole sector inside: `n` (1 or 2) sectors from `first`, the range starting
    /// `within` bytes into the first.
    Partial { first: u64, n: usize, within: usize },
    /// `head` bytes at the end of sector `full - 1`, `mid` bytes of whole sectors from
    /// `full`, then the rest at the start of the sector after them.
    Split { head: usize, full: u64, mid: usize },
}

/// New plaintext for part of one or two sectors: `data` at byte `within` of the first,
/// written with FUA when `fua`.
#[derive(Clone, Copy)]
struct Patch<'a> {
    within: usize,
    data: &'a [u8],
    fua: bool,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn read_only_error(why: Option<&str>) -> io::Error {
    match why {
        None => io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the volume is open read-only",
        ),
        Some(why) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("the volume is open read-only: {why}"),
        ),
    }
}

/// A cipher, key-source or tag failure inside the data path (a tag that does not verify
/// is `InvalidData`).
fn crypt_error(e: Error) -> io::Error {
    match e {
        Error::Authentication(_) => io::Error::new(io::ErrorKind::InvalidData, e),
        e => io::Error::other(e),
    }
}

impl Volume {
    /// The engine over the data area `layout` describes in `store` (opened read-write
    /// unless `opts.read_only`). The store must reach the end of the data area.
    pub fn new(store: Box<dyn Store>, layout: Layout, opts: EngineOptions) -> Result<Volume> {
        let g = *layout.geometry();
        // The layout checked that this does not overflow.
        let end = layout.end();
        let len = crate::store::size(&*store)?;
        if len < end {
            return Err(Error::truncated(format!(
                "{} is {len} bytes, shorter than the end of the data area ({} + {} = {end} \
                 bytes)",
                store.name(),
                g.data_offset,
                end - g.data_offset
            )));
        }
        let threads = match opts.threads {
            Some(0) => return Err(Error::invalid("threads must be at least 1")),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let sector = g.sector_size;
        let chunk_bytes = opts.chunk_bytes.unwrap_or_else(|| {
            store.object_size().map_or(DEFAULT_CHUNK_BYTES, |o| {
                (o.min(MAX_OBJECT_CHUNK_BYTES as u64) as usize).max(DEFAULT_CHUNK_BYTES)
            })
        });
        let chunk = (chunk_bytes / sector).max(1) * sector;
        // Read-modify-write needs up to two sectors; authenticated sectors also their
        // stored form, and a chunk its stored form.
        let stored = layout.stored_sector_len();
        let pooled = if layout.is_authenticated() {
            (chunk / sector * stored).max(2 * (stored + sector))
        } else {
            chunk.max(2 * sector)
        };
        Ok(Volume {
            store,
            layout,
            size: g.size,
            sector,
            chunk,
            read_only: opts.read_only,
            read_only_why: None,
            fence: None,
            fan: Fan::new(threads)?,
            locks: EdgeLocks::new(),
            buffers: BufferPool::new(pooled),
        })
    }

    /// The same engine, read-only because of `why` (its format only reads such volumes),
    /// which the write refusal says.
    pub fn with_read_only_reason(mut self, why: &'static str) -> Volume {
        self.read_only = true;
        self.read_only_why = Some(why);
        self
    }

    /// The same engine refusing writes that touch `fence` ([`WriteFence`]).
    pub fn with_fence(mut self, fence: WriteFence) -> Volume {
        self.fence = Some(fence);
        self
    }

    /// The fence of [`Volume::with_fence`], if any.
    pub fn fence(&self) -> Option<&WriteFence> {
        self.fence.as_ref()
    }

    /// The plaintext size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The sector size in bytes.
    pub fn sector_size(&self) -> usize {
        self.sector
    }

    /// Whether writes are refused.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Fills `buf` with the plaintext at `offset`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_range(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let (head, full, mid) = match self.span(offset, buf.len()) {
            Span::Partial { first, n, within } => {
                return self.with_plain_sectors(first, n, |plain| {
                    buf.copy_from_slice(&plain[within..within + buf.len()]);
                })
            }
            Span::Split { head, full, mid } => (head, full, mid),
        };
        let (head_buf, rest) = buf.split_at_mut(head);
        let (mid_buf, tail_buf) = rest.split_at_mut(mid);
        if head > 0 {
            let within = self.sector - head;
            self.with_plain_sectors(full - 1, 1, |plain| {
                head_buf.copy_from_slice(&plain[within..]);
            })?;
        }
        self.read_sectors(mid_buf, full)?;
        if !tail_buf.is_empty() {
            let after = full + (mid / self.sector) as u64;
            self.with_plain_sectors(after, 1, |plain| {
                tail_buf.copy_from_slice(&plain[..tail_buf.len()]);
            })?;
        }
        Ok(())
    }

    /// Fills `buf[range]` with the plaintext at `offset` like [`Volume::read_at`], taking
    /// the buffer by value: a request of whole sectors within one chunk goes to the store
    /// as one [`Store::read_owned`] and is decrypted where the store put it, so a store
    /// that reads on another thread copies nothing. The buffer comes back in every case.
    pub fn read_owned(
        &self,
        mut buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let Some(first) = self.one_chunk(offset, range.len()) else {
            let r = self.read_at(&mut buf[range], offset);
            return (buf, r);
        };
        let (mut buf, r) = (self.store).read_owned(buf, range.clone(), self.layout.position(first));
        let r = r.and_then(|()| {
            (self.layout)
                .decrypt(first, &mut buf[range])
                .map_err(crypt_error)
        });
        (buf, r)
    }

    /// Stores the plaintext `buf[range]` at `offset` like [`Volume::write_at`], taking the
    /// buffer by value: a request of whole sectors within one chunk is encrypted in place
    /// and written from there, with no second buffer and no second pass over memory. The
    /// buffer comes back in every case, holding the ciphertext or the plaintext.
    pub fn write_owned(
        &self,
        mut buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let first = self
            .one_chunk(offset, range.len())
            .filter(|_| self.check_write(offset, range.len() as u64).is_ok());
        let Some(first) = first else {
            let r = self.write(&buf[range], offset, false);
            return (buf, r);
        };
        let r = (self.layout)
            .encrypt(first, &mut buf[range.clone()])
            .map_err(crypt_error)
            .and_then(|()| self.store_write(&buf[range], self.layout.position(first), false));
        (buf, r)
    }

    /// Whether a small read returns quickly (see [`Store::quick_reads`]).
    pub fn quick_reads(&self) -> bool {
        self.store.quick_reads()
    }

    /// Whether [`Volume::start_write`] of `len` bytes at `offset` returns before the write
    /// is over: a request of whole sectors within one chunk, on a store that
    /// [starts writes](Store::starts_writes).
    pub fn starts_write(&self, offset: u64, len: usize) -> bool {
        self.started_write(offset, len).is_some()
    }

    /// The first sector of a write [`Volume::start_write`] hands to the store, `None` for
    /// one it writes before returning.
    fn started_write(&self, offset: u64, len: usize) -> Option<u64> {
        let starts = self.store.starts_writes() && self.check_write(offset, len as u64).is_ok();
        self.one_chunk(offset, len).filter(|_| starts)
    }

    /// Stores the plaintext `buf[range]` at `offset` like [`Volume::write_owned`], and
    /// calls `done` with the buffer and the outcome when the write is over. When
    /// [`Volume::starts_write`] says so, the request is encrypted in place here and handed
    /// to the store, and `done` runs later on the store's thread; any other request is
    /// written before this returns, and `done` called then.
    pub fn start_write(&self, mut buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        let Some(first) = self.started_write(offset, range.len()) else {
            let (buf, r) = self.write_owned(buf, range, offset);
            return done(buf, r);
        };
        match (self.layout).encrypt(first, &mut buf[range.clone()]) {
            Ok(()) => (self.store).start_write(buf, range, self.layout.position(first), done),
            Err(e) => done(buf, Err(crypt_error(e))),
        }
    }

    /// The first sector of a request of whole sectors within one chunk, inside the volume,
    /// of an unauthenticated layout (one store I/O, transformed in place); `None` for any
    /// other request.
    fn one_chunk(&self, offset: u64, len: usize) -> Option<u64> {
        let whole = self.check_range(offset, len).is_ok()
            && len > 0
            && len <= self.chunk
            && !self.layout.is_authenticated()
            && matches!(self.span(offset, len),
                Span::Split { head: 0, mid, .. } if mid == len);
        whole.then(|| offset / self.sector as u64)
    }

    /// Stores the plaintext `buf` at `offset`.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write(buf, offset, false)
    }

    /// Stores the plaintext `buf` at `offset` and returns once it is durable (NBD's FUA).
    /// On a store that makes single writes durable ([`Store::can_fua`]: an NBD upstream
    /// taking FUA) every store write of the request, the read-modify-write edges included,
    /// is the store's [`Store::write_at_fua`], and nothing else is flushed; on any other
    /// store the request is written and then the store synced once.
    pub fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.store.can_fua() {
            return self.write(buf, offset, true);
        }
        self.write(buf, offset, false)?;
        self.store.sync()
    }

    /// Whether [`Volume::write_at_fua`] costs less than a write and a [`Volume::flush`]
    /// (the store's [`Store::can_fua`]).
    pub fn can_fua(&self) -> bool {
        self.store.can_fua()
    }

    /// [`Volume::write_at`], or [`Volume::write_at_fua`] when `fua`.
    fn write(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.check_write(offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        let (head, full, mid) = match self.span(offset, buf.len()) {
            Span::Partial { first, n, within } => {
                let patch = Patch {
                    within,
                    data: buf,
                    fua,
                };
                return self.modify_sectors(first, n, patch);
            }
            Span::Split { head, full, mid } => (head, full, mid),
        };
        let (head_buf, rest) = buf.split_at(head);
        let (mid_buf, tail_buf) = rest.split_at(mid);
        if head > 0 {
            let within = self.sector - head;
            let patch = Patch {
                within,
                data: head_buf,
                fua,
            };
            self.modify_sectors(full - 1, 1, patch)?;
        }
        self.write_sectors(mid_buf, full, fua)?;
        if !tail_buf.is_empty() {
            let after = full + (mid / self.sector) as u64;
            let patch = Patch {
                within: 0,
                data: tail_buf,
                fua,
            };
            self.modify_sectors(after, 1, patch)?;
        }
        Ok(())
    }

    /// Stores `len` zero bytes of plaintext at `offset` (encrypted zeros: NBD's
    /// WRITE_ZEROES, wiping a new volume), without the caller building a zero buffer.
    pub fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_write(offset, len)?;
        let ss = self.sector as u64;
        let mut done = 0u64;
        while done < len {
            let at = offset + done;
            // Pieces end on sector boundaries (but the last), so only the first and the
            // last piece have partial sectors.
            let mut n = (len - done).min(ZEROS.len() as u64);
            if at + n < offset + len {
                n = (at + n) / ss * ss - at;
            }
            self.write_at(&ZEROS[..n as usize], at)?;
            done += n;
        }
        Ok(())
    }

    /// Gives back the storage of the whole sectors inside `[offset, offset + len)` through
    /// the store's discard (a hole in a file, a discard on a block device: NBD's TRIM, where
    /// the volume allows discards). Partial sectors at the edges are left as they are: a
    /// discard is advisory. Discarded sectors then read as the decryption of zeros (noise),
    /// as under dm-crypt; [`Volume::write_zeroes`] gives zeros. Fails with `Unsupported`
    /// where the store cannot discard. On an authenticated layout nothing is discarded
    /// (a discarded sector's tags would fail: it would read as an error, not as data).
    pub fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_write(offset, len)?;
        if self.layout.is_authenticated() {
            return Ok(());
        }
        let ss = self.sector as u64;
        let first = offset.div_ceil(ss);
        let end = (offset + len) / ss;
        if first >= end {
            return Ok(());
        }
        self.store
            .discard(self.layout.position(first), (end - first) * ss)
    }

    /// Makes every completed write durable (the store's sync: `fdatasync` for a file).
    pub fn flush(&self) -> io::Result<()> {
        self.store.sync()
    }

    fn check_range(&self, offset: u64, len: usize) -> io::Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(invalid(format!(
                "request of {len} bytes at offset {offset} goes beyond the end of the volume \
                 ({} bytes)",
                self.size
            ))),
        }
    }

    /// Checks a write of `len` bytes at `offset` before any of it is written: the volume
    /// takes writes, the range lies inside it and touches no fenced range
    /// ([`Volume::with_fence`]). Every write, zeroing and discard is checked so, whole; a
    /// caller about to write a known range in several requests checks it first with this.
    pub fn check_write(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error(self.read_only_why));
        }
        let len_usize = usize::try_from(len).map_err(|_| invalid(format!("{len} bytes")))?;
        self.check_range(offset, len_usize)?;
        match &self.fence {
            Some(f) => f.check(offset, len),
            None => Ok(()),
        }
    }

    /// How the (checked, non-empty) range `offset..offset + len` falls on sectors.
    fn span(&self, offset: u64, len: usize) -> Span {
        let ss = self.sector as u64;
        let end = offset + len as u64;
        let full = offset.div_ceil(ss);
        let end_full = end / ss;
        if full >= end_full {
            let first = offset / ss;
            return Span::Partial {
                first,
                n: (end.div_ceil(ss) - first) as usize,
                within: (offset - first * ss) as usize,
            };
        }
        Span::Split {
            head: (full * ss - offset) as usize,
            full,
            mid: ((end_full - full) * ss) as usize,
        }
    }

    /// Reads `n` (1 or 2) sectors from `first`, decrypted, into a pooled buffer for `f`.
    fn with_plain_sectors(&self, first: u64, n: usize, f: impl FnOnce(&[u8])) -> io::Result<()> {
        if self.layout.is_authenticated() {
            return self.auth_plain_sectors(first, n, f);
        }
        let mut scratch = self.buffers.take();
        let plain = &mut scratch[..n * self.sector];
        self.store.read_at(plain, self.layout.position(first))?;
        self.layout.decrypt(first, plain).map_err(crypt_error)?;
        f(plain);
        Ok(())
    }

    /// Read-modify-write of `n` (1 or 2) sectors from `first` with `patch`. Holds the
    /// sectors' edge locks throughout.
    fn modify_sectors(&self, first: u64, n: usize, patch: Patch) -> io::Result<()> {
        if self.layout.is_authenticated() {
            return self.auth_modify_sectors(first, n, patch);
        }
        let Patch { within, data, fua } = patch;
        let _edges = self.locks.lock(first, first + n as u64 - 1);
        let mut scratch = self.buffers.take();
        let sectors = &mut scratch[..n * self.sector];
        let at = self.layout.position(first);
        self.store.read_at(sectors, at)?;
        self.layout.decrypt(first, sectors).map_err(crypt_error)?;
        sectors[within..within + data.len()].copy_from_slice(data);
        self.layout.encrypt(first, sectors).map_err(crypt_error)?;
        self.store_write(sectors, at, fua)
    }

    /// Writes stored bytes at `at`: the store's FUA write when `fua`.
    fn store_write(&self, stored: &[u8], at: u64, fua: bool) -> io::Result<()> {
        if fua {
            self.store.write_at_fua(stored, at)
        } else {
            self.store.write_at(stored, at)
        }
    }

    /// One chunk of whole sectors from `first`: read, decrypted in place.
    fn read_chunk(&self, chunk: &mut [u8], first: u64) -> io::Result<()> {
        self.store.read_at(chunk, self.layout.position(first))?;
        self.layout.decrypt(first, chunk).map_err(crypt_error)
    }

    /// One chunk of whole sectors from `first`: encrypted into `scratch`. Returns the
    /// length of its stored form there.
    fn encrypt_chunk(&self, scratch: &mut [u8], chunk: &[u8], first: u64) -> io::Result<usize> {
        let out = &mut scratch[..chunk.len()];
        self.layout
            .encrypt_to(first, chunk, out)
            .map_err(crypt_error)?;
        Ok(chunk.len())
    }

    /// Whole sectors from `first` into `buf` (a whole number of sectors), decrypted in place.
    fn read_sectors(&self, buf: &mut [u8], first: u64) -> io::Result<()> {
        if self.layout.is_authenticated() {
            return self.fan_read(buf, first, Volume::auth_read_chunk);
        }
        self.fan_read(buf, first, Volume::read_chunk)
    }

    /// Reads whole sectors from `first` into `buf` in chunks, each by `read`, over the
    /// worker pool when there are several.
    fn fan_read(
        &self,
        buf: &mut [u8],
        first: u64,
        read: impl Fn(&Volume, &mut [u8], u64) -> io::Result<()> + Sync,
    ) -> io::Result<()> {
        let chunk_sectors = (self.chunk / self.sector) as u64;
        let chunks = buf.len().div_ceil(self.chunk);
        if !self.fan.fans_out(chunks) {
            for (i, c) in buf.chunks_mut(self.chunk).enumerate() {
                read(self, c, first + i as u64 * chunk_sectors)?;
            }
            return Ok(());
        }
        let queue = Mutex::new(buf.chunks_mut(self.chunk).enumerate());
        self.fan.run(chunks, |outcome| {
            while !outcome.failed() {
                let Some((i, c)) = crate::lock(&queue).next() else {
                    break;
                };
                if let Err(e) = read(self, c, first + i as u64 * chunk_sectors) {
                    outcome.fail(e);
                }
            }
        })
    }

    /// Encrypts whole sectors `buf` into pooled buffers and writes them from sector `first`
    /// (every chunk with FUA when `fua`).
    fn write_sectors(&self, buf: &[u8], first: u64, fua: bool) -> io::Result<()> {
        let auth = self.layout.is_authenticated();
        self.fan_write(buf, first, |v, scratch, c, f| {
            let n = if auth {
                v.auth_seal_chunk(scratch, c, f)?
            } else {
                v.encrypt_chunk(scratch, c, f)?
            };
            v.store_write(&scratch[..n], v.layout.position(f), fua)
        })
    }

    /// Writes whole sectors `buf` from sector `first` in chunks, each by `write` with a
    /// pooled buffer, over the worker pool when there are several.
    fn fan_write(
        &self,
        buf: &[u8],
        first: u64,
        write: impl Fn(&Volume, &mut [u8], &[u8], u64) -> io::Result<()> + Sync,
    ) -> io::Result<()> {
        let chunk_sectors = (self.chunk / self.sector) as u64;
        let chunks = buf.len().div_ceil(self.chunk);
        if !self.fan.fans_out(chunks) {
            let mut scratch = self.buffers.take();
            for (i, c) in buf.chunks(self.chunk).enumerate() {
                write(self, &mut scratch, c, first + i as u64 * chunk_sectors)?;
            }
            return Ok(());
        }
        let next = AtomicUsize::new(0);
        self.fan.run(chunks, |outcome| {
            let mut scratch = self.buffers.take();
            while !outcome.failed() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= chunks {
                    break;
                }
                let start = i * self.chunk;
                let c = &buf[start..(start + self.chunk).min(buf.len())];
                if let Err(e) = write(self, &mut scratch, c, first + i as u64 * chunk_sectors) {
                    outcome.fail(e);
                }
            }
        })
    }
}
