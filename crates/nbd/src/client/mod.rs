//! An NBD client: the other end of this crate's protocol code (`proto` is shared with the
//! server), for the storage a volume lives on.
//!
//! - [`uri`]: NBD URIs (`nbd://`, `nbd+unix://`, `nbds://`);
//! - `negotiate`: the socket and the fixed newstyle handshake (NBD_OPT_STARTTLS for
//!   `nbds://`, structured replies, NBD_OPT_GO with NBD_INFO_BLOCK_SIZE);
//! - `secure`: what an `nbds://` URI's TLS parameters mean, and a connection's halves,
//!   plain or TLS;
//! - `conn`: one connection with many requests in flight (callers write, one reader
//!   thread hands replies out by cookie);
//! - `reply`: a read put together from structured reply chunks;
//! - [`Client`] (here): up to `connections` connections when the server allows
//!   multi-conn, requests cut to the server's maximum block size and sent all at once
//!   (latency is hidden by pipelining, never by caching), unaligned requests made aligned
//!   for servers with a minimum block size, timeouts, and reconnection.
//!
//! Deadlines: the timeout bounds every phase. Opening a connection (connecting, TLS, the
//! NBD handshake) must finish within it as a whole, however slowly the server trickles
//! its bytes; each request must be answered within it from its submission (the
//! connection's watch fails the connection otherwise); a reconnection is an opening
//! like the first. No lock is held while the network is waited for: a failed connection
//! is reopened by a thread of its own, outside the lock of the connection slots (the
//! slot is marked as being reopened meanwhile); requests meanwhile go to the other live
//! connections, or, when there is none, wait for the reopening (itself bounded by the
//! timeout).
//!
//! Errors: an error the server reports for a request comes back as that OS error (EIO,
//! ENOSPC...) for that request only, and is never retried. A connection that fails
//! (closed, reset, no reply within the timeout) fails the requests in flight on it; with
//! `retry` > 0 each is sent again on a new connection, up to `retry` times, except
//! flushes: a flush that did not complete is an error. Writes acknowledged on a
//! connection that was lost before a flush covered them make the next flush fail (EIO),
//! since the server may have lost them.

mod conn;
mod negotiate;
mod reply;
mod secure;
pub mod uri;

pub use negotiate::{ExportFacts, DEFAULT_MAX_BLOCK};
pub use uri::{Endpoint, NbdUri, UriError};

use crate::pool::BufPool;
use crate::proto::*;
use conn::{is_lost, lost, Conn, Ticket};
use secure::TlsSetup;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Connections to open when the server allows multi-conn (1 otherwise).
    pub connections: usize,
    /// How long opening a connection (connect, TLS and handshake together), and each
    /// request from its submission to its whole reply, may take (`None`: no limit). A
    /// request without a reply by then fails, and so does its connection.
    pub timeout: Option<Duration>,
    /// How many times a request is sent again on a new connection after its connection
    /// failed.
    pub retry: u32,
    /// Ask for structured replies.
    pub structured_replies: bool,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            connections: 4,
            timeout: Some(Duration::from_secs(30)),
            retry: 0,
            structured_replies: true,
        }
    }
}

/// Reply buffers kept for reuse: enough for every request in flight of a busy proxy.
const READ_BUFFERS_KEPT: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connection slot.
#[derive(Debug)]
enum Slot {
    /// A connection, live or failed.
    Open(Arc<Conn>),
    /// A thread is opening a connection for it (outside the lock).
    Opening,
    /// The last opening failed: why.
    Failed(io::ErrorKind, String),
}

/// What opening a connection needs; shared with the threads that reopen connections.
#[derive(Debug)]
struct Opener {
    uri: NbdUri,
    name: String,
    config: ClientConfig,
    /// For `nbds://`: how every connection, and every reconnection, speaks TLS.
    tls: Option<TlsSetup>,
    /// What the first connection learnt; every other must find the same export.
    facts: ExportFacts,
}

impl Opener {
    /// Opens one more connection (within the timeout, as every opening).
    fn open(&self) -> io::Result<Arc<Conn>> {
        let fail = |e: io::Error| lost(e.kind(), format!("{}: reconnecting: {e}", self.name));
        let (link, facts) = negotiate::open(
            &self.uri,
            self.config.timeout,
            self.config.structured_replies,
            self.tls.as_ref(),
        )
        .map_err(fail)?;
        if facts.size != self.facts.size || facts.flags != self.facts.flags {
            return Err(lost(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the export changed (size or flags) between connections",
                    self.name
                ),
            ));
        }
        Ok(Arc::new(
            Conn::start(
                link,
                facts.structured,
                self.config.timeout,
                self.name.clone(),
            )
            .map_err(fail)?,
        ))
    }
}

/// The connections, shared with the threads that reopen them.
#[derive(Debug)]
struct Pool {
    /// The lock is held only to look at or change the slots, never across a network
    /// wait.
    slots: Mutex<Vec<Slot>>,
    /// Signalled when a slot's opening ends.
    opened: Condvar,
    /// Writes acknowledged on a lost connection were not flushed.
    lost_writes: AtomicBool,
}

impl Pool {
    /// Opens a connection for slot `i` (marked `Opening` by the caller) and puts it, or
    /// why it failed, in the slot. `old` is the failed connection it replaces.
    fn reopen(&self, opener: &Opener, i: usize, old: Option<Arc<Conn>>) {
        // Dropped here, outside the lock (it joins its threads).
        drop(old);
        let slot = match opener.open() {
            Ok(c) => Slot::Open(c),
            Err(e) => Slot::Failed(e.kind(), e.to_string()),
        };
        lock(&self.slots)[i] = slot;
        self.opened.notify_all();
    }
}

/// A client of one export. Every method takes `&self` and may run from many threads;
/// each call waits for its own replies.
#[derive(Debug)]
pub struct Client {
    name: String,
    config: ClientConfig,
    facts: ExportFacts,
    opener: Arc<Opener>,
    pool: Arc<Pool>,
    next: AtomicUsize,
    /// The ranges of unaligned writes being read-modify-written.
    rmw: Ranges,
    /// The buffers replies are read into before their data is copied out.
    buffers: BufPool,
}

/// The ranges claimed by read-modify-writes in progress. An unaligned write waits only
/// for one whose range overlaps its own; the lock is held to look at the list, never
/// while the network is waited for.
#[derive(Debug, Default)]
struct Ranges {
    busy: Mutex<Vec<Range<u64>>>,
    freed: Condvar,
}

impl Ranges {
    /// Claims `r`, once no claimed range overlaps it; released when dropped.
    fn claim(&self, r: Range<u64>) -> RangeClaim<'_> {
        let mut busy = lock(&self.busy);
        while busy.iter().any(|b| b.start < r.end && r.start < b.end) {
            busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        busy.push(r.clone());
        RangeClaim { ranges: self, r }
    }
}

/// A range claimed for a read-modify-write.
struct RangeClaim<'a> {
    ranges: &'a Ranges,
    r: Range<u64>,
}

impl Drop for RangeClaim<'_> {
    fn drop(&mut self) {
        let mut busy = lock(&self.ranges.busy);
        if let Some(i) = busy.iter().position(|b| *b == self.r) {
            busy.swap_remove(i);
        }
        drop(busy);
        self.ranges.freed.notify_all();
    }
}

/// One request of a call, before it is sent.
#[derive(Debug, Clone, Copy)]
struct Piece {
    kind: u16,
    flags: u16,
    offset: u64,
    len: u32,
    /// Where its payload or its data is in the caller's buffer.
    at: usize,
}

impl Client {
    /// Connects to `uri` and negotiates its export (over TLS for `nbds://`); opens the
    /// other connections when the server allows multi-conn.
    pub fn connect(uri: &NbdUri, config: ClientConfig) -> io::Result<Client> {
        let name = uri.to_string();
        let context = |e: io::Error| io::Error::new(e.kind(), format!("{name}: {e}"));
        let tls = TlsSetup::from_uri(uri).map_err(context)?;
        let (link, facts) =
            negotiate::open(uri, config.timeout, config.structured_replies, tls.as_ref())
                .map_err(context)?;
        let first = Conn::start(link, facts.structured, config.timeout, name.clone())?;
        let n = if facts.can_multi_conn() {
            config.connections.max(1)
        } else {
            1
        };
        let opener = Opener {
            uri: uri.clone(),
            name: name.clone(),
            config: config.clone(),
            tls,
            facts,
        };
        let mut slots = vec![Slot::Open(Arc::new(first))];
        for _ in 1..n {
            slots.push(Slot::Open(opener.open()?));
        }
        Ok(Client {
            name,
            config,
            facts,
            opener: Arc::new(opener),
            pool: Arc::new(Pool {
                slots: Mutex::new(slots),
                opened: Condvar::new(),
                lost_writes: AtomicBool::new(false),
            }),
            next: AtomicUsize::new(0),
            rmw: Ranges::default(),
            buffers: BufPool::new(READ_BUFFERS_KEPT),
        })
    }

    /// What the handshake said about the export.
    pub fn facts(&self) -> &ExportFacts {
        &self.facts
    }

    /// The export's size in bytes.
    pub fn size(&self) -> u64 {
        self.facts.size
    }

    /// Connections opened (1 when the server does not allow multi-conn).
    pub fn connections(&self) -> usize {
        lock(&self.pool.slots).len()
    }

    /// The URI, in its canonical spelling.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A live connection for slot `i`: its own; when that one failed, another live one
    /// while a thread of its own reopens it; when no connection is live, the reopened
    /// one, or why the reopening failed, waited for (the opening is bounded by the
    /// timeout; this wait, in case, by twice that). The slots' lock is never held while
    /// the network is waited for.
    fn conn(&self, i: usize) -> io::Result<Arc<Conn>> {
        let deadline = self.config.timeout.map(|t| Instant::now() + 2 * t);
        let pool = &self.pool;
        let mut slots = lock(&pool.slots);
        let mut waited = false;
        loop {
            let reopen = match &slots[i] {
                Slot::Open(c) if !c.failed() => return Ok(Arc::clone(c)),
                Slot::Opening => false,
                // An opening this call waited for failed: that is its error.
                Slot::Failed(kind, msg) if waited => return Err(lost(*kind, msg.clone())),
                Slot::Open(_) | Slot::Failed(..) => true,
            };
            if reopen {
                let old = match std::mem::replace(&mut slots[i], Slot::Opening) {
                    Slot::Open(old) => Some(old),
                    _ => None,
                };
                if old
                    .as_ref()
                    .is_some_and(|c| c.dirty.load(Ordering::Acquire))
                {
                    pool.lost_writes.store(true, Ordering::Release);
                }
                let (p, o) = (Arc::clone(pool), Arc::clone(&self.opener));
                let spawned = std::thread::Builder::new()
                    .name("nbd-client-reconnect".into())
                    .spawn(move || p.reopen(&o, i, old));
                if spawned.is_err() {
                    // No thread to spare: reopen on this one, still without the lock.
                    drop(slots);
                    pool.reopen(&self.opener, i, None);
                    slots = lock(&pool.slots);
                }
            }
            let live = slots.iter().find_map(|s| match s {
                Slot::Open(c) if !c.failed() => Some(Arc::clone(c)),
                _ => None,
            });
            if let Some(c) = live {
                return Ok(c);
            }
            waited = true;
            slots = match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
                None => pool.opened.wait(slots).unwrap_or_else(|e| e.into_inner()),
                Some(left) if left.is_zero() => {
                    return Err(lost(
                        io::ErrorKind::TimedOut,
                        format!(
                            "{}: no connection could be reopened within {} s",
                            self.name,
                            self.config.timeout.unwrap_or_default().as_secs_f64()
                        ),
                    ))
                }
                Some(left) => {
                    pool.opened
                        .wait_timeout(slots, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Runs `job` on one connection; after a failure of the connection, again on a new
    /// one, up to `retry` times (`retry` false: never).
    fn on_a_conn<T>(
        &self,
        retry: bool,
        mut job: impl FnMut(&Conn) -> io::Result<T>,
    ) -> io::Result<T> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connections();
        let attempts = if retry { self.config.retry } else { 0 };
        let mut attempt = 0;
        loop {
            let r = self.conn(i).and_then(|c| job(&c));
            match r {
                Err(e) if is_lost(&e) && attempt < attempts => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(100 << attempt.min(5)));
                }
                r => return r,
            }
        }
    }

    /// Sends every piece on `c` at once, then waits for all; a read's data lands in
    /// `read_into`. The first error is returned once every reply came or failed.
    fn pieces(
        &self,
        c: &Conn,
        pieces: &[Piece],
        payload: Option<&[u8]>,
        mut read_into: Option<&mut [u8]>,
    ) -> io::Result<()> {
        let mut tickets: Vec<(Piece, Ticket)> = Vec::with_capacity(pieces.len());
        let mut first_err = None;
        for p in pieces {
            let range = p.at..p.at + p.len as usize;
            let data = payload.map(|b| &b[range.clone()]);
            let buf = (read_into.as_ref()).map(|_| (self.buffers.get(p.len as usize), 0));
            match c.submit(p.kind, p.flags, p.offset, p.len, data, buf) {
                Ok(t) => tickets.push((*p, t)),
                Err(e) => {
                    first_err = Some(e);
                    break;
                }
            }
        }
        for (p, t) in tickets {
            match c.wait(t) {
                Ok(Some(data)) => {
                    if let Some(dst) = read_into.as_deref_mut() {
                        let n = p.len as usize;
                        dst[p.at..p.at + n].copy_from_slice(&data[..n]);
                    }
                    self.buffers.put(data);
                }
                Ok(None) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Cuts `[offset, offset + len)` into requests of at most `max` bytes.
    fn cut(kind: u16, flags: u16, offset: u64, len: u64, max: u32) -> Vec<Piece> {
        let mut v = Vec::with_capacity((len / u64::from(max)) as usize + 1);
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(u64::from(max)) as u32;
            v.push(Piece {
                kind,
                flags,
                offset: offset + done,
                len: n,
                at: done as usize,
            });
            done += u64::from(n);
        }
        v
    }

    fn check_range(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.facts.size => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: {len} bytes at {offset} go past the end of the export ({} bytes)",
                    self.name, self.facts.size
                ),
            )),
        }
    }

    fn aligned(&self, offset: u64, len: u64) -> bool {
        let m = u64::from(self.facts.min_block);
        offset.is_multiple_of(m) && len.is_multiple_of(m)
    }

    /// The aligned range around `[offset, offset + len)` (a range inside the export), as
    /// far as the export's last block; an error where those blocks would end past 2^64
    /// bytes, which no request can reach (an export whose size is in the last block of
    /// the offsets). Computed in 128 bits: the rounding up may pass 2^64.
    fn widen(&self, offset: u64, len: u64) -> io::Result<(u64, u64)> {
        let m = u128::from(self.facts.min_block);
        let start = u128::from(offset) / m * m;
        let end = (u128::from(offset) + u128::from(len)).div_ceil(m) * m;
        let end = end.min(u128::from(self.facts.size).div_ceil(m) * m);
        let start = u64::try_from(start).expect("start <= offset");
        match u64::try_from(end) {
            Ok(end) => Ok((start, end - start)),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: {len} bytes at {offset} are not aligned to the server's {m}-byte \
                     blocks, and the blocks around them end past 2^64 bytes",
                    self.name
                ),
            )),
        }
    }

    /// Reads exactly `buf.len()` bytes at `offset`. Past the end: `UnexpectedEof`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_range(offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        if !self.aligned(offset, buf.len() as u64) {
            let (start, len) = self.widen(offset, buf.len() as u64)?;
            let mut whole = vec![0u8; len as usize];
            self.read_at(&mut whole, start)?;
            let from = (offset - start) as usize;
            buf.copy_from_slice(&whole[from..from + buf.len()]);
            return Ok(());
        }
        let pieces = Self::cut(CMD_READ, 0, offset, buf.len() as u64, self.facts.max_block);
        self.on_a_conn(true, |c| self.pieces(c, &pieces, None, Some(&mut *buf)))
    }

    /// Reads `buf[range]` from `offset` like [`Client::read_at`], taking the buffer by
    /// value: a request that goes out whole (aligned, within the maximum block size, no
    /// `retry` to redo it) has its reply read straight into `buf`, with no copy. The
    /// buffer comes back in every case (a fresh one when the request failed on the way).
    pub fn read_owned(
        &self,
        mut buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let len = range.len() as u64;
        let whole = self.config.retry == 0
            && len > 0
            && len <= u64::from(self.facts.max_block)
            && self.aligned(offset, len)
            && self.check_range(offset, len).is_ok();
        if !whole {
            let r = self.read_at(&mut buf[range], offset);
            return (buf, r);
        }
        let end = range.end;
        let mut lent = Some((buf, range.start));
        let r = self.on_a_conn(false, |c| {
            let into = lent.take().expect("no retry: one attempt");
            let t = c.submit(CMD_READ, 0, offset, len as u32, None, Some(into))?;
            c.wait(t)
        });
        match r {
            Ok(Some(buf)) => (buf, Ok(())),
            Ok(None) => unreachable!("a read's reply carries its buffer"),
            Err(e) => (vec![0u8; end], Err(e)),
        }
    }

    /// Writes all of `buf` at `offset`; with `fua`, acknowledged only once durable (the
    /// server's FUA, or a flush after it when the server has no FUA).
    pub fn write_at(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.writable()?;
        self.check_write_range(offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        if !self.aligned(offset, buf.len() as u64) {
            let (start, len) = self.widen(offset, buf.len() as u64)?;
            let _mine = self.rmw.claim(start..start + len);
            let mut whole = vec![0u8; len as usize];
            self.read_at(&mut whole, start)?;
            let from = (offset - start) as usize;
            whole[from..from + buf.len()].copy_from_slice(buf);
            return self.write_at(&whole, start, fua);
        }
        let flags = if fua && self.facts.can_fua() {
            CMD_FLAG_FUA
        } else {
            0
        };
        let pieces = Self::cut(
            CMD_WRITE,
            flags,
            offset,
            buf.len() as u64,
            self.facts.max_block,
        );
        self.on_a_conn(true, |c| {
            self.pieces(c, &pieces, Some(buf), None)?;
            c.dirty.store(true, Ordering::Release);
            Ok(())
        })?;
        if fua && !self.facts.can_fua() {
            self.flush()?;
        }
        Ok(())
    }

    fn writable(&self) -> io::Result<()> {
        if self.facts.read_only() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: the export is read-only", self.name),
            ));
        }
        Ok(())
    }

    fn check_write_range(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_range(offset, len).map_err(|e| {
            // The export cannot grow: no space, as a full device says.
            io::Error::new(io::ErrorKind::StorageFull, e.to_string())
        })
    }

    /// Makes every acknowledged write durable: NBD_CMD_FLUSH on every live connection at
    /// once (with multi-conn one would do; every one costs nothing more than one round
    /// trip and does not depend on the server keeping its multi-conn promise).
    /// Acknowledged only once the server acknowledged. A server without flush takes
    /// nothing to flush. A failed connection is not reopened for a flush: a new
    /// connection has nothing to flush, and writes acknowledged on the failed one and not
    /// flushed are lost whatever comes next (the flush fails).
    pub fn flush(&self) -> io::Result<()> {
        let conns: Vec<Arc<Conn>> = {
            let slots = lock(&self.pool.slots);
            let open = slots.iter().filter_map(|s| match s {
                Slot::Open(c) => Some(c),
                _ => None,
            });
            let mut live = Vec::with_capacity(slots.len());
            for c in open {
                if !c.failed() {
                    live.push(Arc::clone(c));
                } else if c.dirty.swap(false, Ordering::AcqRel) {
                    self.pool.lost_writes.store(true, Ordering::Release);
                }
            }
            live
        };
        if self.pool.lost_writes.swap(false, Ordering::AcqRel) {
            return Err(io::Error::other(format!(
                "{}: writes acknowledged on a connection that was lost before a flush \
                 may not be durable",
                self.name
            )));
        }
        if !self.facts.can_flush() {
            return Ok(());
        }
        let mut tickets = Vec::with_capacity(conns.len());
        for c in &conns {
            // Cleared before sending: a write acknowledged meanwhile marks it again.
            c.dirty.store(false, Ordering::Release);
            tickets.push(c.submit(CMD_FLUSH, 0, 0, 0, None, None));
        }
        let mut first = None;
        for (c, t) in conns.iter().zip(tickets) {
            let r = t.and_then(|t| c.wait(t));
            if let Err(e) = r {
                c.dirty.store(true, Ordering::Release);
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// NBD_CMD_TRIM over `[offset, offset + len)` (the server may then read zeros or the
    /// old data). `Unsupported` when the server does not take TRIM.
    pub fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.range_command(CMD_TRIM, 0, offset, len, self.facts.can_trim(), "TRIM")
    }

    /// NBD_CMD_WRITE_ZEROES over `[offset, offset + len)`. `Unsupported` when the server
    /// does not take it.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        let flags = if fua && self.facts.can_fua() {
            CMD_FLAG_FUA
        } else {
            0
        };
        self.range_command(
            CMD_WRITE_ZEROES,
            flags,
            offset,
            len,
            self.facts.can_zero(),
            "WRITE_ZEROES",
        )?;
        if fua && !self.facts.can_fua() {
            self.flush()?;
        }
        Ok(())
    }

    fn range_command(
        &self,
        kind: u16,
        flags: u16,
        offset: u64,
        len: u64,
        can: bool,
        what: &str,
    ) -> io::Result<()> {
        if !can {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{}: the server does not take {what}", self.name),
            ));
        }
        self.writable()?;
        self.check_write_range(offset, len)?;
        if !self.aligned(offset, len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: {what} of {len} bytes at {offset} is not aligned to the server's \
                     {}-byte blocks",
                    self.name, self.facts.min_block
                ),
            ));
        }
        // No payload: pieces of up to 1 GiB (whole minimum blocks).
        let max = (1u32 << 30) / self.facts.min_block * self.facts.min_block;
        let pieces = Self::cut(kind, flags, offset, len, max);
        self.on_a_conn(true, |c| {
            self.pieces(c, &pieces, None, None)?;
            c.dirty.store(true, Ordering::Release);
            Ok(())
        })
    }
}
