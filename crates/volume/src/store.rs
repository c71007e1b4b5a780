//! Backing stores: where a volume's bytes live. A format reads and writes its header only
//! through [`Store`], and so does the engine for the data, so a volume can later sit on
//! something other than a local file (an NBD export, a Ceph RBD image, a detached header
//! file beside a data device) without the formats or the engine knowing.
//!
//! The trait is small on purpose: positioned reads and writes of exact lengths, a durable
//! sync (and a write durable by itself, which defaults to a write and a sync), the size,
//! an optional discard, and an optional started write (one the store completes on its own
//! thread and reports through a callback; by default a plain write, then the callback). A store has a name (a path, a URI) for
//! messages. [`FileStore`] is the one implementation today: a file or block device opened
//! by the caller, with the advisory locks of [`crate::lock`] on it.
//!
//! A volume is one store (the header at its start, the data after it) or two: a detached
//! header (cryptsetup's `--header`), whose file holds the header and keyslots, beside a
//! data device whose every byte is data. [`Placement`] says which; the formats read and
//! write keyslots in the header's store and measure the data in the data's store, and the
//! engine gets the data's store with the header's data offset (usually 0 for a detached
//! header).
//!
//! Cost: the engine holds a `Box<dyn Store>`, so each `pread`/`pwrite` of a chunk (512 KiB
//! by default) or of an edge sector goes through one virtual call, about a nanosecond
//! against at least a microsecond for the system call itself; nothing is called per
//! sector (see docs/PERFORMANCE.md for the before/after figures).

use crate::error::{Error, HeaderError, Result};
use crate::lock::{self, HeaderLock, UseClaim};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use zeroize::Zeroizing;

/// What a started write ([`Store::start_write`]) calls once it is over, on whichever thread
/// that happens: its buffer back, and the outcome.
pub type WriteDone = Box<dyn FnOnce(Vec<u8>, io::Result<()>) + Send>;

/// Where the bytes of a volume (header, keyslots, data) are. Every method takes `&self`
/// and may run from many threads at once.
pub trait Store: fmt::Debug + Send + Sync {
    /// A name for messages: a path, a URI.
    fn name(&self) -> &str;

    /// The size in bytes.
    fn size(&self) -> io::Result<u64>;

    /// Reads exactly `buf.len()` bytes at `offset`; past the end the error is of kind
    /// `UnexpectedEof`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Reads `buf[range]` at `offset` like [`Store::read_at`], taking the buffer by value:
    /// a store whose data arrives on another thread (an NBD client's reader) can read it
    /// straight into `buf` instead of into its own buffer and then copying. The buffer
    /// comes back in every case.
    fn read_owned(
        &self,
        mut buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let r = self.read_at(&mut buf[range], offset);
        (buf, r)
    }

    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Whether [`Store::start_write`] returns before the write is over, completing it later
    /// with no thread of the caller waiting for it (librbd's asynchronous writes). The
    /// default: `false`.
    fn starts_writes(&self) -> bool {
        false
    }

    /// Writes all of `buf[range]` at `offset`, taking the buffer by value, and calls `done`
    /// with the buffer and the outcome when the write is over: later, from another thread,
    /// on a store that [starts writes](Store::starts_writes); before returning otherwise
    /// (the default: [`Store::write_at`], then `done`). The buffer is the store's until
    /// `done` gets it back.
    fn start_write(&self, buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        let r = self.write_at(&buf[range], offset);
        done(buf, r)
    }

    /// Makes every completed write durable.
    fn sync(&self) -> io::Result<()>;

    /// Writes all of `buf` at `offset` and returns once those bytes are durable (a
    /// forced-unit-access write: NBD's FUA, SCSI's FUA bit). The default:
    /// [`Store::write_at`], then [`Store::sync`] (for a file, `pwrite` then `fdatasync`).
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_at(buf, offset)?;
        self.sync()
    }

    /// Whether [`Store::write_at_fua`] makes one write durable by itself, without a
    /// [`Store::sync`] of everything (an NBD export taking FUA): then a durable request
    /// written in several pieces is best written as FUA pieces; otherwise as plain writes
    /// and one sync. The default: `false`.
    fn can_fua(&self) -> bool {
        false
    }

    /// Gives back the storage of `[offset, offset + len)`, whose bytes then read as zeros
    /// (a hole in a file, a discard on a device). The default: `Unsupported`.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{} cannot discard", self.name()),
        ))
    }

    /// The unit the store is cut into, when it has one (an RBD image's object size, a
    /// power of two): new volumes align their data offset to it, as librbd does. The
    /// default: `None`.
    fn object_size(&self) -> Option<u64> {
        None
    }

    /// Whether a small read returns quickly, without waiting on a network (a local file,
    /// memory): a server may then run it on the thread that reads the requests. The
    /// default, `false`, is right for any store that may wait (and for a wrapper that does
    /// not say).
    fn quick_reads(&self) -> bool {
        false
    }
}

/// A store shared by its owner and an engine over it (the engine takes its store by
/// value).
impl<T: Store + ?Sized> Store for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn size(&self) -> io::Result<u64> {
        (**self).size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn read_owned(
        &self,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        (**self).read_owned(buf, range, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn starts_writes(&self) -> bool {
        (**self).starts_writes()
    }
    fn start_write(&self, buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        (**self).start_write(buf, range, offset, done)
    }
    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at_fua(buf, offset)
    }
    fn can_fua(&self) -> bool {
        (**self).can_fua()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).discard(offset, len)
    }
    fn object_size(&self) -> Option<u64> {
        (**self).object_size()
    }
    fn quick_reads(&self) -> bool {
        (**self).quick_reads()
    }
}

/// A local file or block device.
#[derive(Debug)]
pub struct FileStore {
    file: File,
    name: String,
}

impl FileStore {
    /// A store over an open file; `name` is used in messages.
    pub fn new(file: File, name: impl Into<String>) -> FileStore {
        FileStore {
            file,
            name: name.into(),
        }
    }

    /// Opens `path` for reading, and for writing too when `write`.
    pub fn open(path: &Path, write: bool) -> io::Result<FileStore> {
        let file = OpenOptions::new().read(true).write(write).open(path)?;
        Ok(FileStore::new(file, path.display().to_string()))
    }

    /// The file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Takes the header lock on this file (see [`crate::lock`]): waits for it when
    /// `wait`, otherwise `None` when another process holds a conflicting one.
    pub fn lock_header(&self, mode: lock::Mode, wait: bool) -> io::Result<Option<HeaderLock>> {
        lock::lock_header(&self.file, mode, wait)
    }

    /// Claims the use of this file (see [`crate::lock`]): waits for it when `wait`,
    /// otherwise `None` when another process holds a conflicting claim.
    pub fn claim_use(&self, mode: lock::Mode, wait: bool) -> io::Result<Option<UseClaim>> {
        lock::claim_use(&self.file, mode, wait)
    }

    /// Takes the writer claim `access` needs on this file (see [`lock::claim_access`]),
    /// never waiting: an error naming the holder ([`lock::refusal`]) when another open
    /// holds a conflicting one.
    pub fn claim_access(
        &self,
        access: lock::Access,
    ) -> io::Result<std::result::Result<Option<UseClaim>, String>> {
        Ok(match lock::claim_access(&self.file, access)? {
            Some(c) => Ok(c),
            None => Err(lock::refusal(&self.name, &self.file, access)),
        })
    }
}

/// Where a volume's header (with its keyslots) and its data are.
#[derive(Debug, Clone, Copy)]
pub enum Placement<'a> {
    /// One store: the header at the start, the data at the header's data offset.
    Attached(&'a dyn Store),
    /// A detached header: the header and keyslots in one store, the data in another, the
    /// header's data offset counting in the data's store.
    Detached {
        /// The header's store.
        header: &'a dyn Store,
        /// The data's store.
        data: &'a dyn Store,
    },
}

impl<'a> Placement<'a> {
    /// The store holding the header and keyslots.
    pub fn header(&self) -> &'a dyn Store {
        match *self {
            Placement::Attached(s) => s,
            Placement::Detached { header, .. } => header,
        }
    }

    /// The store holding the data.
    pub fn data(&self) -> &'a dyn Store {
        match *self {
            Placement::Attached(s) => s,
            Placement::Detached { data, .. } => data,
        }
    }

    /// Whether the header is detached from the data.
    pub fn is_detached(&self) -> bool {
        matches!(self, Placement::Detached { .. })
    }
}

impl Store for FileStore {
    fn quick_reads(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> io::Result<u64> {
        let meta = self.file.metadata()?;
        if meta.is_file() {
            return Ok(meta.len());
        }
        // Block devices report 0 in their metadata: their end is where a seek lands.
        (&self.file).seek(SeekFrom::End(0))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::{fallocate, FallocateFlags};
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        Ok(fallocate(&self.file, flags, offset, len)?)
    }
}

/// Bytes in memory, of a fixed size: a header built before it may go where it belongs
/// (a data-shift encryption builds its header while the data is still where the header
/// will be). Wiped when dropped.
#[derive(Debug)]
pub struct MemStore {
    bytes: std::sync::Mutex<Zeroizing<Vec<u8>>>,
}

impl MemStore {
    /// `len` zero bytes.
    pub fn new(len: usize) -> MemStore {
        MemStore {
            bytes: std::sync::Mutex::new(Zeroizing::new(vec![0; len])),
        }
    }

    /// A copy of the bytes.
    pub fn to_vec(&self) -> Zeroizing<Vec<u8>> {
        self.bytes.lock().expect("no panic holds it").clone()
    }

    fn range(&self, offset: u64, len: usize) -> io::Result<Range<usize>> {
        let size = self.bytes.lock().expect("no panic holds it").len();
        usize::try_from(offset)
            .ok()
            .and_then(|o| Some(o..o.checked_add(len)?))
            .filter(|r| r.end <= size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"))
    }
}

impl Store for MemStore {
    fn quick_reads(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "(memory)"
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.bytes.lock().expect("no panic holds it").len() as u64)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        buf.copy_from_slice(&self.bytes.lock().expect("no panic holds it")[r]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        self.bytes.lock().expect("no panic holds it")[r].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads exactly `buf.len()` bytes of metadata at `offset`: running into the end of the
/// store is a truncated image naming `what`; any other failure an I/O error saying what
/// was read.
pub(crate) fn read_exact(store: &dyn Store, buf: &mut [u8], offset: u64, what: &str) -> Result<()> {
    match store.read_at(buf, offset) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Err(Error::Header(HeaderError::Truncated(format!(
                "the image ends before the {what} (bytes {offset}..{})",
                offset + buf.len() as u64
            ))))
        }
        Err(e) => Err(Error::io(
            format!("reading the {what} of {}", store.name()),
            e,
        )),
    }
}

/// Reads up to `buf.len()` bytes at the start of the store (fewer when it is shorter):
/// what format detection looks at. Returns the bytes read.
pub(crate) fn read_head(store: &dyn Store, buf: &mut [u8]) -> Result<usize> {
    let n = (size(store)?).min(buf.len() as u64) as usize;
    read_exact(store, &mut buf[..n], 0, "header")?;
    Ok(n)
}

/// Writes all of `buf` at `offset`; `what` names it in an error.
pub(crate) fn write_all(store: &dyn Store, buf: &[u8], offset: u64, what: &str) -> Result<()> {
    store
        .write_at(buf, offset)
        .map_err(|e| Error::io(format!("writing the {what} of {}", store.name()), e))
}

/// Makes the writes so far durable.
pub(crate) fn sync(store: &dyn Store) -> Result<()> {
    store
        .sync()
        .map_err(|e| Error::io(format!("syncing {}", store.name()), e))
}

/// The size of the store.
pub(crate) fn size(store: &dyn Store) -> Result<u64> {
    store
        .size()
        .map_err(|e| Error::io(format!("the size of {}", store.name()), e))
}

/// Overwrites `len` bytes at `offset` with zeros, or with random bytes when `random`
/// (keyslot areas being destroyed), 1 MiB at a time.
///
/// The random bytes are the AES-256-CTR keystream under a key and counter drawn from the
/// operating system's random source for this one wipe (the key is dropped after it): as
/// unpredictable as the source, at the cipher's speed (the kernel's source gives about
/// 0.5 GB/s, which made wiping a 16 MiB keyslot area the slowest step of a re-key's end).
pub(crate) fn wipe(store: &dyn Store, offset: u64, len: u64, random: bool) -> Result<()> {
    let mut buf = vec![0u8; (1usize << 20).min(len as usize)];
    let stream = if random {
        Some(RandomStream::new()?)
    } else {
        None
    };
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        if let Some(s) = &stream {
            s.fill(done, &mut buf[..n]);
        }
        write_all(store, &buf[..n], offset + done, "wiped area")?;
        done += n as u64;
    }
    Ok(())
}

/// Random bytes for wiping: the AES-256-CTR keystream under a fresh random key and
/// counter (see [`wipe`]).
struct RandomStream {
    ctr: sectorcrypt_crypto::aes::Ctr,
    iv: [u8; 16],
}

impl RandomStream {
    fn new() -> Result<RandomStream> {
        let mut key = Zeroizing::new([0u8; 32]);
        let mut iv = [0u8; 16];
        crate::random(&mut key[..])?;
        crate::random(&mut iv)?;
        let ctr = sectorcrypt_crypto::aes::Ctr::new(&key[..])
            .map_err(|e| Error::invalid(format!("the wipe's random stream: {e}")))?;
        Ok(RandomStream { ctr, iv })
    }

    /// Fills `buf` with the stream's bytes from `offset` on (whatever `buf` held is
    /// replaced, not mixed in).
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        buf.fill(0);
        self.ctr.apply_keystream(&self.iv, offset, buf);
    }
}

/// Copies `len` bytes from offset `from` of `src` to offset `to` of `dst`, 1 MiB at a time
/// (a header's sizes never decide how much is allocated); `what` names them in errors.
pub(crate) fn copy(
    src: &dyn Store,
    from: u64,
    dst: &dyn Store,
    to: u64,
    len: u64,
    what: &str,
) -> Result<()> {
    let mut buf = Zeroizing::new(vec![0u8; (1usize << 20).min(len as usize)]);
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        read_exact(src, &mut buf[..n], from + done, what)?;
        write_all(dst, &buf[..n], to + done, what)?;
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random wipe writes every byte of the range and nothing around it, and its
    /// bytes do not repeat: not per 1 MiB piece (the stream goes on across the pieces),
    /// not from one wipe to the next (each draws a key of its own).
    #[test]
    fn a_random_wipe_covers_its_range_with_bytes_that_do_not_repeat() {
        let (at, len) = (4096u64, (2u64 << 20) + 12_345);
        let store = MemStore::new((at + len + 4096) as usize);
        let image = |s: &MemStore| {
            let mut v = vec![0u8; s.size().unwrap() as usize];
            read_exact(s, &mut v, 0, "image").unwrap();
            v
        };
        wipe(&store, at, len, true).unwrap();
        let first = image(&store);
        let (before, rest) = first.split_at(at as usize);
        let (wiped, after) = rest.split_at(len as usize);
        assert!(
            before.iter().chain(after).all(|&b| b == 0),
            "bytes outside the range changed"
        );
        let zeros = wiped.iter().filter(|&&b| b == 0).count();
        assert!(
            zeros < wiped.len() / 128,
            "{zeros} zero bytes in {}",
            wiped.len()
        );
        let mib = 1 << 20;
        assert_ne!(
            wiped[..mib],
            wiped[mib..2 * mib],
            "the second MiB repeats the first"
        );
        wipe(&store, at, len, true).unwrap();
        assert_ne!(
            image(&store)[at as usize..][..64],
            wiped[..64],
            "two wipes wrote the same bytes"
        );
        wipe(&store, at, len, false).unwrap();
        assert!(
            image(&store).iter().all(|&b| b == 0),
            "a zero wipe left bytes"
        );
    }
}
