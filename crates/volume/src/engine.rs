//! The sector engine: `read_at` / `write_at` at any byte offset over the encrypted data area
//! of a file or block device, with the plaintext seen as one flat byte range.
//!
//! # Layout
//! Plaintext byte `X` (`0 <= X < size`) is stored at file offset `data_offset + X`, in sector
//! `s = X / sector_size`, encrypted with IV number `iv_offset + s * layout.iv_step()` (the
//! [`SectorCipher`] advances the IV per sector itself, given the first sector's number).
//!
//! # The data path
//! - **Whole sectors** (the aligned middle of any request) go straight through: a read is
//!   one `pread` into the caller's buffer and a decryption in place there (zero copies beyond
//!   the kernel's); a write encrypts from the caller's buffer into a pooled buffer and
//!   `pwrite`s that (one copy, which is the encryption itself).
//! - **Large requests** are cut into chunks of whole sectors ([`EngineOptions::chunk_bytes`],
//!   default [`DEFAULT_CHUNK_BYTES`]), one `pread`/`pwrite` per chunk, and the chunks are
//!   handed out from a shared queue to the calling thread and up to `threads - 1` helpers
//!   of a persistent pool. Each participant takes the next chunk when it finishes one, so
//!   a slow participant never holds up the others. A request of one chunk runs inline on
//!   the calling thread with no hop to the pool. While several callers are in the engine
//!   at once (an NBD server with many requests in flight), each call asks for
//!   proportionally fewer helpers: the parallelism is already there.
//! - **Unaligned edges** are read-modify-write: read the (one or two) edge sectors, decrypt,
//!   patch, encrypt, write back, under the lock(s) of a small striped lock table keyed by
//!   sector number. Only edges take locks: aligned writes never serialize, and two writers
//!   that share a sector but not bytes (both edges, so both locked) lose nothing. Writers
//!   whose *bytes* overlap get no guarantee, as with any block device: in particular an
//!   aligned write of a sector that lands between an edge write's read and write-back of
//!   the same sector is undone outside the edge's bytes, a result neither order gives.
//!   Clients that overlap writes must order them (every filesystem and NBD client does).
//!
//! # Why rayon, without `unsafe`
//! Zero-copy reads need a helper thread to write into a disjoint `&mut` part of the caller's
//! buffer, which safe Rust allows only through scoped execution. The options:
//! - `std::thread::scope` per call: no dependency, but a thread spawn and join per helper
//!   per call: measured 58-62 us per call with one helper on this 2-core machine;
//! - a persistent pool of our own with owned buffers: safe, but a read would then be
//!   decrypted into the pool's buffer and copied into the caller's, a second pass over the
//!   data (and the issue asks for zero-copy reads);
//! - **rayon's `ThreadPool::in_place_scope`** (chosen): persistent threads, the scope body
//!   runs on the caller's thread (which does its share), spawned jobs borrow the caller's
//!   buffer safely and the scope joins them before returning: measured 11-12 us per call
//!   with one helper (mostly waking the sleeping helper), against 0.2 us inline. A small
//!   boxed job per helper per fanned-out call is the only allocation (not per chunk, not per
//!   byte); data buffers come from the engine's pool, so steady state allocates none.
//!
//! Because of that fixed cost a request of one chunk never leaves the calling thread.
//!
//! # Measured (bench/volume.sh, 1 GiB on tmpfs, aes-xts-plain64 512-bit key, 2-core EPYC
//! with VAES, shared with other builds: medians of 3, wall time)
//! - 8 MiB requests: reads 4.5 GB/s on one thread, 9.3-9.5 GB/s on two (when the second
//!   core is free); writes 2.4-2.5 GB/s on one thread, 3.2 GB/s on two. Bare `pread` /
//!   `pwrite` of the same requests: 6.3 / 2.85 GB/s on one thread. Writes into a new tmpfs
//!   file are bound by the kernel (page allocation, and `pwrite`s to one file serialize on
//!   its inode lock), not by the cipher.
//! - From a file into the volume (`sectorcrypt write --input`): 1.8 GB/s alternating file
//!   reads with `write_at`, 2.8 GB/s with [`Volume::write_from`] (the file read overlaps);
//!   `qemu-img convert -O luks` of the same file: 0.17-0.24 GB/s, so 12x with
//!   `write_from` but under 10x without it on a busy machine.
//! - 256 KiB requests from 4 callers (an NBD server): engine / bare = 0.74x for reads
//!   (decryption costs ~0.07 CPU-s per GB, about a third of a bare read's CPU) and ~1x for
//!   writes.
//!
//! # Errors
//! Requests beyond [`Volume::size`] fail with `InvalidInput` before touching anything;
//! writes on a read-only volume with `PermissionDenied`. I/O errors (`ENOSPC`, `EIO`, short
//! files) are returned as they come: when one chunk fails the others stop at their next
//! chunk and the first error is returned. Nothing panics on I/O errors.

use rustix::fs::{fallocate, FallocateFlags};
use sectorcrypt_crypto::dmcrypt::SectorCipher;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use zeroize::Zeroize;

/// Default bytes per chunk of a large request: 512 KiB. Measured with `bench/volume.sh`
/// (1 thread, 8 MiB requests, tmpfs, GB per CPU-second, medians of 4 interleaved rounds):
/// 256 KiB write 2.37 / read 3.96, 512 KiB 2.40 / 3.96, 1 MiB 2.47 / 4.01, 64 KiB about
/// 5% below 256 KiB. Beyond 256 KiB the per-chunk cost is in the noise; 512 KiB keeps the
/// chunk and its copy inside a 1 MiB L2 and still spreads a 1 MiB request over two threads.
pub const DEFAULT_CHUNK_BYTES: usize = 512 * 1024;

/// The plaintext source of [`Volume::write_zeroes`] (1 MiB, more than any sector).
static ZEROS: [u8; 1 << 20] = [0; 1 << 20];

/// Bytes per piece of [`Volume::write_from`] / [`Volume::read_to`], and how many pieces
/// may wait between the two threads.
const PIPE_PIECE: usize = 8 << 20;
const PIPE_DEPTH: usize = 2;

/// Pieces of input that may wait for [`Volume::write_from`]'s writer. Its pieces are one
/// chunk each and are encrypted in place: the piece is read, encrypted and written while
/// it stays in L2. With 8 MiB pieces and a copy into a separate buffer, the same 1 GiB
/// file-to-volume write on tmpfs ran at 1.8 GB/s, memory traffic being the limit.
const WRITE_PIPE_DEPTH: usize = 4;

/// Stripes of the lock table for read-modify-write edges (a power of two).
const LOCK_STRIPES: usize = 256;

/// Free buffers kept in the pool beyond which returned buffers are dropped.
const MAX_POOLED_BUFFERS: usize = 64;

/// Tuning of a [`Volume`].
#[derive(Debug, Default, Clone)]
pub struct EngineOptions {
    /// Threads working on one large request, the caller included (default: the number of
    /// cores). `Some(1)` keeps everything on the calling thread.
    pub threads: Option<usize>,
    /// Refuse writes.
    pub read_only: bool,
    /// Bytes per chunk of a large request, rounded down to whole sectors (default
    /// [`DEFAULT_CHUNK_BYTES`]).
    pub chunk_bytes: Option<usize>,
}

/// An encrypted data area, read and written as plaintext at any offset. `Send + Sync`:
/// every method takes `&self` and may run from many threads at once.
pub struct Volume {
    file: File,
    cipher: SectorCipher,
    data_offset: u64,
    size: u64,
    iv_offset: u64,
    sector: usize,
    iv_step: u64,
    chunk: usize,
    read_only: bool,
    threads: usize,
    pool: Option<rayon::ThreadPool>,
    /// Calls currently fanning out over the pool (to share the helpers fairly).
    fanning: AtomicUsize,
    locks: Box<[Mutex<()>]>,
    buffers: BufferPool,
}

impl fmt::Debug for Volume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Volume")
            .field("cipher", &self.cipher)
            .field("data_offset", &self.data_offset)
            .field("size", &self.size)
            .field("iv_offset", &self.iv_offset)
            .field("chunk", &self.chunk)
            .field("threads", &self.threads)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Reads until `buf` is full, the input ends or it fails: the bytes read, and the error
/// if it failed (the bytes before a failure still count).
fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> (usize, io::Result<()>) {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (n, Err(e)),
        }
    }
    (n, Ok(()))
}

fn read_only_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "the volume is open read-only",
    )
}

fn crypto_error(e: sectorcrypt_crypto::Error) -> io::Error {
    io::Error::other(e)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves no broken invariant behind (the
    // lock table guards no data; the buffer list is a plain Vec), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Volume {
    /// Opens the data area `[data_offset, data_offset + size)` of `file`, encrypted with
    /// `cipher`, sector 0 of the area using IV number `iv_offset`. `size` must be a whole
    /// number of sectors and the file (or block device) at least `data_offset + size` long.
    pub fn new(
        file: File,
        cipher: SectorCipher,
        data_offset: u64,
        size: u64,
        iv_offset: u64,
        opts: EngineOptions,
    ) -> io::Result<Volume> {
        let layout = cipher.layout();
        let sector = layout.sector_size();
        if !size.is_multiple_of(sector as u64) {
            return Err(invalid(format!(
                "volume size {size} is not a whole number of {sector}-byte sectors"
            )));
        }
        let end = data_offset
            .checked_add(size)
            .ok_or_else(|| invalid(format!("data offset {data_offset} + size {size} overflows")))?;
        // Seeking to the end gives the length of block devices too (metadata says 0).
        let file_len = (&file).seek(SeekFrom::End(0))?;
        if file_len < end {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the file is {file_len} bytes, shorter than the end of the data area \
                     ({data_offset} + {size} = {end} bytes)"
                ),
            ));
        }
        let threads = match opts.threads {
            Some(0) => return Err(invalid("threads must be at least 1".into())),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let chunk_bytes = opts.chunk_bytes.unwrap_or(DEFAULT_CHUNK_BYTES);
        let chunk = (chunk_bytes / sector).max(1) * sector;
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads - 1)
                    .thread_name(|i| format!("sectorcrypt-io-{i}"))
                    .build()
                    .map_err(io::Error::other)?,
            )
        } else {
            None
        };
        Ok(Volume {
            file,
            cipher,
            data_offset,
            size,
            iv_offset,
            sector,
            iv_step: layout.iv_step(),
            chunk,
            read_only: opts.read_only,
            threads,
            pool,
            fanning: AtomicUsize::new(0),
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            // Read-modify-write needs up to two sectors.
            buffers: BufferPool::new(chunk.max(2 * sector)),
        })
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
        let ss = self.sector as u64;
        let end = offset + buf.len() as u64;
        let first_full = offset.div_ceil(ss);
        let end_full = end / ss;
        if first_full >= end_full {
            // No whole sector inside: one or two partial sectors, read in one go.
            let s0 = offset / ss;
            let n = (end.div_ceil(ss) - s0) as usize;
            let within = (offset - s0 * ss) as usize;
            return self.with_plain_sectors(s0, n, |plain| {
                buf.copy_from_slice(&plain[within..within + buf.len()]);
            });
        }
        let head = (first_full * ss - offset) as usize;
        let mid = ((end_full - first_full) * ss) as usize;
        let (head_buf, rest) = buf.split_at_mut(head);
        let (mid_buf, tail_buf) = rest.split_at_mut(mid);
        if !head_buf.is_empty() {
            let within = self.sector - head;
            self.with_plain_sectors(first_full - 1, 1, |plain| {
                head_buf.copy_from_slice(&plain[within..]);
            })?;
        }
        self.read_sectors(mid_buf, first_full)?;
        if !tail_buf.is_empty() {
            self.with_plain_sectors(end_full, 1, |plain| {
                tail_buf.copy_from_slice(&plain[..tail_buf.len()]);
            })?;
        }
        Ok(())
    }

    /// Stores the plaintext `buf` at `offset`.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        self.check_range(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let ss = self.sector as u64;
        let end = offset + buf.len() as u64;
        let first_full = offset.div_ceil(ss);
        let end_full = end / ss;
        if first_full >= end_full {
            let s0 = offset / ss;
            let n = (end.div_ceil(ss) - s0) as usize;
            return self.modify_sectors(s0, n, (offset - s0 * ss) as usize, buf);
        }
        let head = (first_full * ss - offset) as usize;
        let mid = ((end_full - first_full) * ss) as usize;
        let (head_buf, rest) = buf.split_at(head);
        let (mid_buf, tail_buf) = rest.split_at(mid);
        if !head_buf.is_empty() {
            self.modify_sectors(first_full - 1, 1, self.sector - head, head_buf)?;
        }
        self.write_sectors(mid_buf, first_full)?;
        if !tail_buf.is_empty() {
            self.modify_sectors(end_full, 1, 0, tail_buf)?;
        }
        Ok(())
    }

    /// Stores `len` zero bytes of plaintext at `offset` (encrypted zeros: NBD's
    /// WRITE_ZEROES, wiping a new volume), without the caller building a zero buffer.
    pub fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        let len_usize = usize::try_from(len).map_err(|_| invalid(format!("{len} bytes")))?;
        self.check_range(offset, len_usize)?;
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

    /// Gives back the storage of the whole sectors inside `[offset, offset + len)`:
    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`, a hole in a file, a discard on a block device
    /// (NBD's TRIM, where the volume allows discards). Partial sectors at the edges are left
    /// as they are: a discard is advisory. Discarded sectors then read as the decryption of
    /// zeros (noise), as under dm-crypt; [`Volume::write_zeroes`] gives zeros. Fails with
    /// `Unsupported` where the file system or device cannot punch holes.
    pub fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        let len_usize = usize::try_from(len).map_err(|_| invalid(format!("{len} bytes")))?;
        self.check_range(offset, len_usize)?;
        let ss = self.sector as u64;
        let first = offset.div_ceil(ss);
        let end = (offset + len) / ss;
        if first >= end {
            return Ok(());
        }
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        fallocate(
            &self.file,
            flags,
            self.file_offset(first),
            (end - first) * ss,
        )?;
        Ok(())
    }

    /// Stores everything `input` yields, until its end, as plaintext from `offset`;
    /// returns the number of bytes stored. A second thread reads the next piece of input
    /// while the engine encrypts and writes the current one, so reading the input (a pipe,
    /// a file) overlaps the work instead of adding to it. Pieces after the first start on
    /// sector boundaries. Input that goes beyond the end of the volume is an error
    /// (`InvalidInput`) after what fits has been stored; so is a failing `input`, after
    /// what it gave before has been stored.
    pub fn write_from(&self, input: &mut (dyn Read + Send), offset: u64) -> io::Result<u64> {
        if self.read_only {
            return Err(read_only_error());
        }
        self.check_range(offset, 0)?;
        let piece = self.chunk;
        let first = piece - (offset % self.sector as u64) as usize;
        let (full_tx, full_rx) =
            mpsc::sync_channel::<io::Result<(Vec<u8>, usize)>>(WRITE_PIPE_DEPTH);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
        for _ in 0..WRITE_PIPE_DEPTH + 1 {
            // Allocated per call (per transfer), not per request.
            let _ = empty_tx.send(vec![0; piece]);
        }
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut want = first;
                while let Ok(mut buf) = empty_rx.recv() {
                    let (n, status) = read_full(input, &mut buf[..want]);
                    if n > 0 && full_tx.send(Ok((buf, n))).is_err() {
                        break;
                    }
                    if let Err(e) = status {
                        let _ = full_tx.send(Err(e));
                        break;
                    }
                    if n < want {
                        break;
                    }
                    want = piece;
                }
                // Dropping full_tx ends the writer's loop.
            });
            let mut at = offset;
            let mut result = Ok(());
            for piece in full_rx.iter() {
                let (mut buf, n) = match piece {
                    Ok(p) => p,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                };
                let fits = (self.size - at).min(n as u64) as usize;
                if let Err(e) = self.store_owned(&mut buf[..fits], at) {
                    result = Err(e);
                    break;
                }
                at += fits as u64;
                if fits < n {
                    result = Err(invalid(format!(
                        "the input goes beyond the end of the volume ({} bytes); the first \
                         {} bytes were stored from offset {offset}",
                        self.size,
                        at - offset
                    )));
                    break;
                }
                let _ = empty_tx.send(buf);
            }
            // On an early stop, wake the reader: its send or its recv now fails.
            drop(full_rx);
            drop(empty_tx);
            result.map(|()| at - offset)
        })
    }

    /// Writes `len` bytes of plaintext from `offset` to `output`. The engine reads and
    /// decrypts the next piece while a second thread writes the current one to `output`.
    /// A failing `output` (a closed pipe) is returned as its error.
    pub fn read_to(
        &self,
        output: &mut (dyn Write + Send),
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let len_usize = usize::try_from(len).map_err(|_| invalid(format!("{len} bytes")))?;
        self.check_range(offset, len_usize)?;
        let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(PIPE_DEPTH);
        let (empty_tx, empty_rx) = mpsc::channel::<io::Result<Vec<u8>>>();
        for _ in 0..PIPE_DEPTH + 1 {
            let _ = empty_tx.send(Ok(vec![0; PIPE_PIECE]));
        }
        std::thread::scope(|scope| {
            let writer_tx = empty_tx.clone();
            scope.spawn(move || {
                for (buf, n) in full_rx.iter() {
                    match output.write_all(&buf[..n]) {
                        Ok(()) => {
                            if writer_tx.send(Ok(buf)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = writer_tx.send(Err(e));
                            return;
                        }
                    }
                }
                if let Err(e) = output.flush() {
                    let _ = writer_tx.send(Err(e));
                }
            });
            drop(empty_tx);
            let mut at = offset;
            let end = offset + len;
            // The first piece ends on a sector boundary, so the others are aligned.
            let mut want = PIPE_PIECE - (offset % self.sector as u64) as usize;
            let mut result = Ok(());
            while at < end {
                let mut buf = match empty_rx.recv() {
                    Ok(Ok(buf)) => buf,
                    Ok(Err(e)) => {
                        result = Err(e);
                        break;
                    }
                    Err(_) => break, // the writer is gone (it reported why)
                };
                let n = (end - at).min(want as u64) as usize;
                if let Err(e) = self.read_at(&mut buf[..n], at) {
                    result = Err(e);
                    break;
                }
                if full_tx.send((buf, n)).is_err() {
                    break;
                }
                at += n as u64;
                want = PIPE_PIECE;
            }
            drop(full_tx);
            // Let the writer drain; a write error it reports wins over a clean end.
            for msg in empty_rx.iter() {
                if let Err(e) = msg {
                    if result.is_ok() {
                        result = Err(e);
                    }
                }
            }
            result
        })
    }

    /// Stores `buf` at `offset` like [`Volume::write_at`], but may encrypt in place: `buf`
    /// holds ciphertext or garbage afterwards. Whole aligned sectors (all of
    /// [`Volume::write_from`]'s pieces but the edges of the transfer) go out in one `pwrite`
    /// with no copy; anything else takes the general path.
    fn store_owned(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let ss = self.sector as u64;
        if !offset.is_multiple_of(ss) || !(buf.len() as u64).is_multiple_of(ss) || self.read_only {
            return self.write_at(buf, offset);
        }
        self.check_range(offset, buf.len())?;
        let first = offset / ss;
        self.cipher
            .encrypt(self.iv(first), buf)
            .map_err(crypto_error)?;
        self.file.write_all_at(buf, self.file_offset(first))
    }

    /// Makes every completed write durable (`fdatasync`).
    pub fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
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

    fn file_offset(&self, sector: u64) -> u64 {
        self.data_offset + sector * self.sector as u64
    }

    fn iv(&self, sector: u64) -> u64 {
        self.iv_offset
            .wrapping_add(sector.wrapping_mul(self.iv_step))
    }

    /// Reads `n` (1 or 2) sectors from `first`, decrypted, into a pooled buffer for `f`.
    fn with_plain_sectors(&self, first: u64, n: usize, f: impl FnOnce(&[u8])) -> io::Result<()> {
        let mut scratch = self.buffers.take();
        let plain = &mut scratch.buf[..n * self.sector];
        self.file.read_exact_at(plain, self.file_offset(first))?;
        self.cipher
            .decrypt(self.iv(first), plain)
            .map_err(crypto_error)?;
        f(plain);
        Ok(())
    }

    /// Read-modify-write of `n` (1 or 2) sectors from `first`: `data` replaces the plaintext
    /// at byte `within` of the first one. Holds the sectors' stripe locks throughout.
    fn modify_sectors(&self, first: u64, n: usize, within: usize, data: &[u8]) -> io::Result<()> {
        let a = (first as usize) % LOCK_STRIPES;
        let b = ((first + n as u64 - 1) as usize) % LOCK_STRIPES;
        // Always lock the lower stripe first, so two edges never wait on each other.
        let (lo, hi) = (a.min(b), a.max(b));
        let _g1 = lock(&self.locks[lo]);
        let _g2 = (hi != lo).then(|| lock(&self.locks[hi]));
        let mut scratch = self.buffers.take();
        let sectors = &mut scratch.buf[..n * self.sector];
        let at = self.file_offset(first);
        let iv = self.iv(first);
        self.file.read_exact_at(sectors, at)?;
        self.cipher.decrypt(iv, sectors).map_err(crypto_error)?;
        sectors[within..within + data.len()].copy_from_slice(data);
        self.cipher.encrypt(iv, sectors).map_err(crypto_error)?;
        self.file.write_all_at(sectors, at)
    }

    /// How many pool helpers a request of `chunks` chunks gets, given `callers` calls
    /// (this one included) fanning out at the same time.
    fn helpers_for(&self, chunks: usize, callers: usize) -> usize {
        ((self.threads - 1) / callers.max(1)).min(chunks.saturating_sub(1))
    }

    /// Whole sectors from `first` into `buf` (a whole number of sectors), decrypted in place.
    fn read_sectors(&self, buf: &mut [u8], first: u64) -> io::Result<()> {
        let chunk_sectors = (self.chunk / self.sector) as u64;
        let read_chunk = |c: &mut [u8], s: u64| -> io::Result<()> {
            self.file.read_exact_at(c, self.file_offset(s))?;
            self.cipher.decrypt(self.iv(s), c).map_err(crypto_error)
        };
        let chunks = buf.len().div_ceil(self.chunk);
        let Some(pool) = self.pool.as_ref().filter(|_| chunks > 1) else {
            // Inline: one chunk, or no pool.
            for (i, c) in buf.chunks_mut(self.chunk).enumerate() {
                read_chunk(c, first + i as u64 * chunk_sectors)?;
            }
            return Ok(());
        };
        let _fan = FanOut::enter(&self.fanning);
        let helpers = self.helpers_for(chunks, _fan.callers);
        let queue = Mutex::new(buf.chunks_mut(self.chunk).enumerate());
        let outcome = Outcome::default();
        let work = || {
            while !outcome.failed() {
                let Some((i, c)) = lock(&queue).next() else {
                    break;
                };
                if let Err(e) = read_chunk(c, first + i as u64 * chunk_sectors) {
                    outcome.fail(e);
                }
            }
        };
        pool.in_place_scope(|s| {
            for _ in 0..helpers {
                s.spawn(|_| work());
            }
            work();
        });
        outcome.into_result()
    }

    /// Encrypts whole sectors `buf` into pooled buffers and writes them from sector `first`.
    fn write_sectors(&self, buf: &[u8], first: u64) -> io::Result<()> {
        let chunk_sectors = (self.chunk / self.sector) as u64;
        let write_chunk = |scratch: &mut [u8], c: &[u8], s: u64| -> io::Result<()> {
            let out = &mut scratch[..c.len()];
            self.cipher
                .encrypt_to(self.iv(s), c, out)
                .map_err(crypto_error)?;
            self.file.write_all_at(out, self.file_offset(s))
        };
        let chunks = buf.len().div_ceil(self.chunk);
        let Some(pool) = self.pool.as_ref().filter(|_| chunks > 1) else {
            let mut scratch = self.buffers.take();
            for (i, c) in buf.chunks(self.chunk).enumerate() {
                write_chunk(&mut scratch.buf, c, first + i as u64 * chunk_sectors)?;
            }
            return Ok(());
        };
        let _fan = FanOut::enter(&self.fanning);
        let helpers = self.helpers_for(chunks, _fan.callers);
        let next = AtomicUsize::new(0);
        let outcome = Outcome::default();
        let work = || {
            let mut scratch = self.buffers.take();
            while !outcome.failed() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= chunks {
                    break;
                }
                let start = i * self.chunk;
                let c = &buf[start..(start + self.chunk).min(buf.len())];
                if let Err(e) = write_chunk(&mut scratch.buf, c, first + i as u64 * chunk_sectors) {
                    outcome.fail(e);
                }
            }
        };
        pool.in_place_scope(|s| {
            for _ in 0..helpers {
                s.spawn(|_| work());
            }
            work();
        });
        outcome.into_result()
    }
}

/// Counts the calls fanning out over the pool while one is alive.
struct FanOut<'a> {
    counter: &'a AtomicUsize,
    callers: usize,
}

impl<'a> FanOut<'a> {
    fn enter(counter: &'a AtomicUsize) -> FanOut<'a> {
        let callers = counter.fetch_add(1, Ordering::Relaxed) + 1;
        FanOut { counter, callers }
    }
}

impl Drop for FanOut<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The first error of a fanned-out request, and a flag telling the others to stop.
#[derive(Default)]
struct Outcome {
    failed: AtomicBool,
    error: Mutex<Option<io::Error>>,
}

impl Outcome {
    fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    fn fail(&self, e: io::Error) {
        let mut slot = lock(&self.error);
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::Relaxed);
    }

    fn into_result(self) -> io::Result<()> {
        match self.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Reusable buffers of one size (a chunk, at least two sectors): steady state allocates
/// nothing. A buffer is allocated only when more are in use at once than ever before.
struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    len: usize,
}

struct Pooled<'a> {
    pool: &'a BufferPool,
    buf: Vec<u8>,
}

impl BufferPool {
    fn new(len: usize) -> BufferPool {
        BufferPool {
            free: Mutex::new(Vec::new()),
            len,
        }
    }

    fn take(&self) -> Pooled<'_> {
        let buf = lock(&self.free).pop().unwrap_or_else(|| vec![0; self.len]);
        Pooled { pool: self, buf }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // Edge buffers held plaintext: leave none of it in freed memory.
        for buf in lock(&self.free).iter_mut() {
            buf.zeroize();
        }
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let mut free = lock(&self.pool.free);
        if free.len() < MAX_POOLED_BUFFERS {
            free.push(std::mem::take(&mut self.buf));
        } else {
            self.buf.zeroize();
        }
    }
}
