//! One connection to the server, with many requests in flight: callers send their
//! requests under a mutex on the socket's writing side, and one reader thread reads the
//! replies, which may come in any order, and hands each to its request by cookie (the
//! data of a read into that request's own buffer).
//!
//! A failure of the connection itself (the server closed it, a socket error, a reply
//! that cannot be parsed, a request that timed out) fails every request in flight on it
//! with a [`Lost`] error and closes the socket; the client may then open another
//! connection. An error the server reports for one request fails that request alone.
//!
//! Deadlines: each request must be answered in full within the timeout from the moment
//! it was submitted, however the time is spent: waiting for the writing side (another
//! request's payload still going out), sending its own payload to a server that reads
//! slowly, waiting for the reply, or receiving a reply the server trickles. A third
//! thread per connection, the watch, sleeps until the earliest deadline of the requests
//! in flight (the one whose reply is being read included) and fails the connection when
//! it passes; shutting the socket down wakes every thread blocked on it, so no lock stays
//! held past a deadline.

use super::reply::ReadReply;
use super::secure::{Link, Reader, Writer};
use crate::proto::*;
use crate::stream::Stream;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Condvar;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a request's reply gives: a read's buffer, or nothing.
pub(crate) type Outcome = io::Result<Option<Vec<u8>>>;

/// The connection, not the request, failed: the request may be sent again on a new one.
#[derive(Debug)]
pub(crate) struct Lost(String);

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Lost {}

pub(crate) fn lost(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, Lost(msg))
}

/// Whether `e` is a failure of the connection rather than of the request.
pub(crate) fn is_lost(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<Lost>())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a request in flight waits for.
enum Waiting {
    Read(ReadReply),
    /// Any other command; the first error chunk's code.
    Other(Option<u32>),
}

struct Pending {
    waiting: Waiting,
    tx: mpsc::Sender<Outcome>,
    /// When its reply must have come in full (`None`: no limit).
    deadline: Option<Instant>,
}

#[derive(Default)]
struct Table {
    pending: HashMap<u64, Pending>,
    /// The deadline of the request whose reply the reader thread is reading (taken out
    /// of `pending` meanwhile).
    reading: Option<Instant>,
    /// Set once the connection failed: why.
    failed: Option<(io::ErrorKind, String)>,
}

impl Table {
    /// The earliest deadline of a request in flight.
    fn next_deadline(&self) -> Option<Instant> {
        let waiting = self.pending.values().filter_map(|p| p.deadline);
        waiting.chain(self.reading).min()
    }
}

/// What the callers and the reader thread share.
struct Shared {
    table: Mutex<Table>,
    /// Wakes the watch: the connection failed, or a first deadline appeared.
    watch: Condvar,
    /// How long a request may take from its submission (`None`: no limit).
    timeout: Option<Duration>,
    /// A handle on the socket, to shut it down from any thread.
    control: Stream,
    structured: bool,
    name: String,
}

impl Shared {
    /// Fails the connection: every request in flight gets the error, the socket closes.
    fn fail(&self, kind: io::ErrorKind, msg: String) {
        let mut t = lock(&self.table);
        if t.failed.is_none() {
            t.failed = Some((kind, msg.clone()));
        }
        for (_, p) in t.pending.drain() {
            let _ = p.tx.send(Err(lost(kind, msg.clone())));
        }
        drop(t);
        self.watch.notify_all();
        self.control.shutdown(Shutdown::Both);
    }

    /// Takes the request `cookie` out of the table to read its reply; its deadline still
    /// counts while the reply is read.
    fn take(&self, cookie: u64) -> io::Result<Pending> {
        let mut t = lock(&self.table);
        let p = t.pending.remove(&cookie).ok_or_else(|| {
            protocol(format!(
                "a reply for cookie {cookie}, which is not in flight"
            ))
        })?;
        t.reading = p.deadline;
        Ok(p)
    }

    /// Puts a request back after a chunk of its reply (more are to come).
    fn put_back(&self, cookie: u64, p: Pending) {
        let mut t = lock(&self.table);
        t.reading = None;
        t.pending.insert(cookie, p);
    }

    /// Hands a request its outcome: its reply was read.
    fn answer(&self, tx: mpsc::Sender<Outcome>, outcome: Outcome) {
        lock(&self.table).reading = None;
        let _ = tx.send(outcome);
    }

    /// The watch: fails the connection when a request in flight passes its deadline.
    fn watch(&self) {
        let mut t = lock(&self.table);
        loop {
            if t.failed.is_some() {
                return;
            }
            let now = Instant::now();
            t = match t.next_deadline() {
                None => self.watch.wait(t).unwrap_or_else(|e| e.into_inner()),
                Some(d) if d <= now => break,
                Some(d) => {
                    let (t, _) = self
                        .watch
                        .wait_timeout(t, d - now)
                        .unwrap_or_else(|e| e.into_inner());
                    t
                }
            };
        }
        drop(t);
        let secs = self.timeout.unwrap_or_default().as_secs_f64();
        self.fail(
            io::ErrorKind::TimedOut,
            format!(
                "{}: no reply within {secs} s: the server is gone or stuck",
                self.name
            ),
        );
    }
}

fn protocol(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A request sent, whose reply is awaited with [`Conn::wait`].
#[derive(Debug)]
pub(crate) struct Ticket {
    rx: mpsc::Receiver<Outcome>,
}

/// One negotiated connection.
pub(crate) struct Conn {
    writer: Mutex<Writer>,
    shared: Arc<Shared>,
    cookies: AtomicU64,
    /// The reader thread and the watch.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Writes were acknowledged on it since its last successful flush.
    pub(crate) dirty: AtomicBool,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("name", &self.shared.name)
            .finish()
    }
}

impl Conn {
    /// Starts the reader thread and the watch on a negotiated connection; each request
    /// must be answered within `timeout` of its submission; `name` is used in messages.
    pub(crate) fn start(
        link: Link,
        structured: bool,
        timeout: Option<Duration>,
        name: String,
    ) -> io::Result<Conn> {
        let Link {
            control,
            reader: reading,
            writer,
        } = link;
        let shared = Arc::new(Shared {
            table: Mutex::default(),
            watch: Condvar::new(),
            timeout,
            control,
            structured,
            name,
        });
        let s = Arc::clone(&shared);
        let reader = std::thread::Builder::new()
            .name("nbd-client-reader".into())
            .spawn(move || read_replies(&s, reading))?;
        let mut threads = vec![reader];
        if timeout.is_some() {
            let s = Arc::clone(&shared);
            let watch = std::thread::Builder::new()
                .name("nbd-client-watch".into())
                .spawn(move || s.watch());
            match watch {
                Ok(h) => threads.push(h),
                Err(e) => {
                    shared.fail(e.kind(), format!("{}: {e}", shared.name));
                    for h in threads {
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Conn {
            writer: Mutex::new(writer),
            shared,
            cookies: AtomicU64::new(1),
            threads: Mutex::new(threads),
            dirty: AtomicBool::new(false),
        })
    }

    /// Whether the connection failed (its requests can only fail).
    pub(crate) fn failed(&self) -> bool {
        lock(&self.shared.table).failed.is_some()
    }

    /// Fails the connection (see [`Shared::fail`]).
    pub(crate) fn fail(&self, kind: io::ErrorKind, msg: String) {
        self.shared.fail(kind, msg)
    }

    /// Sends a request: `payload` for a write; for a read, `into`: the buffer its `len`
    /// bytes go to and where in it they start (the reply gives the whole buffer back). A
    /// failure to send fails the connection and shows in the ticket's outcome.
    pub(crate) fn submit(
        &self,
        kind: u16,
        flags: u16,
        offset: u64,
        len: u32,
        payload: Option<&[u8]>,
        into: Option<(Vec<u8>, usize)>,
    ) -> io::Result<Ticket> {
        let cookie = self.cookies.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let waiting = match into {
            Some((b, start)) => Waiting::Read(ReadReply::new(offset, b, start, len as usize)),
            None => Waiting::Other(None),
        };
        let deadline = self.shared.timeout.map(|d| Instant::now() + d);
        {
            let mut t = lock(&self.shared.table);
            if let Some((k, m)) = &t.failed {
                return Err(lost(*k, m.clone()));
            }
            // Deadlines only grow: the watch needs waking only when nothing was in flight.
            let first = t.pending.is_empty() && t.reading.is_none();
            t.pending.insert(
                cookie,
                Pending {
                    waiting,
                    tx,
                    deadline,
                },
            );
            if first {
                self.shared.watch.notify_all();
            }
        }
        let header = Request {
            flags,
            kind,
            cookie,
            offset,
            len,
        }
        .encode();
        let sent = lock(&self.writer).write_both(&header, payload.unwrap_or(&[]));
        if let Err(e) = sent {
            self.fail(
                e.kind(),
                format!("{}: sending a request: {e}", self.shared.name),
            );
        }
        Ok(Ticket { rx })
    }

    /// Waits for the reply of `t`. A request past its deadline fails the connection (the
    /// watch; its reply could no longer be told apart), and with it this wait.
    pub(crate) fn wait(&self, t: Ticket) -> Outcome {
        match t.rx.recv() {
            Ok(outcome) => outcome,
            Err(mpsc::RecvError) => Err(lost(
                io::ErrorKind::ConnectionAborted,
                format!("{}: the connection ended", self.shared.name),
            )),
        }
    }
}

impl Drop for Conn {
    /// Says NBD_CMD_DISC when the connection still works, then closes it and waits for
    /// the reader thread and the watch.
    fn drop(&mut self) {
        if !self.failed() {
            let disc = Request {
                flags: 0,
                kind: CMD_DISC,
                cookie: 0,
                offset: 0,
                len: 0,
            };
            let mut w = lock(&self.writer);
            let _ = w.write_all(&disc.encode());
            w.close();
        }
        self.shared.fail(
            io::ErrorKind::ConnectionAborted,
            format!("{}: the connection was closed", self.shared.name),
        );
        for h in std::mem::take(&mut *lock(&self.threads)) {
            let _ = h.join();
        }
    }
}

/// The reader thread: replies until the connection ends, then fails what is in flight.
fn read_replies(shared: &Shared, stream: Reader) {
    let mut r = BufReader::with_capacity(64 << 10, stream);
    let e = loop {
        if let Err(e) = one_reply(shared, &mut r) {
            break e;
        }
    };
    let why = if e.kind() == io::ErrorKind::UnexpectedEof {
        "the server closed the connection".to_string()
    } else {
        e.to_string()
    };
    shared.fail(e.kind(), format!("{}: {why}", shared.name));
}

fn array<const N: usize>(r: &mut impl Read) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn one_reply(shared: &Shared, r: &mut impl Read) -> io::Result<()> {
    let magic: [u8; 4] = array(r)?;
    match u32::from_be_bytes(magic) {
        SIMPLE_REPLY_MAGIC => {
            let mut h = [0u8; SIMPLE_REPLY_LEN];
            h[..4].copy_from_slice(&magic);
            r.read_exact(&mut h[4..])?;
            let reply = SimpleReply::decode(&h).expect("the magic was checked");
            let p = shared.take(reply.cookie)?;
            let outcome = match (reply.error, p.waiting) {
                (0, Waiting::Read(mut read)) => {
                    r.read_exact(read.whole())?;
                    Ok(Some(read.into_buf()))
                }
                (0, Waiting::Other(_)) => Ok(None),
                (code, _) => Err(io::Error::from_raw_os_error(code as i32)),
            };
            shared.answer(p.tx, outcome);
            Ok(())
        }
        STRUCTURED_REPLY_MAGIC if shared.structured => {
            let mut h = [0u8; STRUCTURED_REPLY_LEN];
            h[..4].copy_from_slice(&magic);
            r.read_exact(&mut h[4..])?;
            let chunk = ChunkHeader::decode(&h).expect("the magic was checked");
            let mut p = shared.take(chunk.cookie)?;
            read_chunk(r, &chunk, &mut p.waiting)?;
            if chunk.done() {
                let outcome = match p.waiting {
                    Waiting::Read(read) => read.finish().map(Some),
                    Waiting::Other(None) => Ok(None),
                    Waiting::Other(Some(code)) => Err(io::Error::from_raw_os_error(code as i32)),
                };
                shared.answer(p.tx, outcome);
            } else {
                shared.put_back(chunk.cookie, p);
            }
            Ok(())
        }
        m => Err(protocol(format!("bad reply magic {m:#x}"))),
    }
}

/// Reads one chunk's data into what its request waits for.
fn read_chunk(r: &mut impl Read, c: &ChunkHeader, waiting: &mut Waiting) -> io::Result<()> {
    let len = u64::from(c.len);
    match (c.kind, waiting) {
        (REPLY_TYPE_NONE, _) if len == 0 && c.done() => Ok(()),
        (REPLY_TYPE_OFFSET_DATA, Waiting::Read(read)) if len > 8 => {
            let at = u64::from_be_bytes(array(r)?);
            match read.data(at, len - 8) {
                Some(dst) => r.read_exact(dst),
                None => skip(r, len - 8),
            }
        }
        (REPLY_TYPE_OFFSET_HOLE, Waiting::Read(read)) if len == 12 => {
            let at = u64::from_be_bytes(array(r)?);
            let n = u32::from_be_bytes(array(r)?);
            read.hole(at, u64::from(n));
            Ok(())
        }
        (k, waiting) if k & REPLY_TYPE_FLAG_ERROR != 0 && (6..=65536 + 14).contains(&len) => {
            let code = u32::from_be_bytes(array(r)?);
            let msg_len = u64::from(u16::from_be_bytes(array(r)?));
            if msg_len > len - 6 {
                return Err(protocol(format!(
                    "an error chunk's message overruns it ({len} bytes)"
                )));
            }
            let mut msg = vec![0u8; msg_len as usize];
            r.read_exact(&mut msg)?;
            skip(r, len - 6 - msg_len)?;
            // An unknown error type still fails the request; a code of 0 would not.
            let code = if code == 0 { EIO } else { code };
            match waiting {
                Waiting::Read(read) => read.error(code, &String::from_utf8_lossy(&msg)),
                Waiting::Other(first) => {
                    first.get_or_insert(code);
                }
            }
            Ok(())
        }
        (k, _) => Err(protocol(format!(
            "an unexpected structured reply chunk (type {k}, {len} bytes)"
        ))),
    }
}

/// Reads and drops `n` bytes.
fn skip(r: &mut impl Read, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut r.take(n), &mut io::sink())?;
    if copied < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}
