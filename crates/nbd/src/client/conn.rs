//! One connection to the server, with many requests in flight: callers send their
//! requests under a mutex on the socket's writing side, and one reader thread reads the
//! replies, which may come in any order, and hands each to its request by cookie (the
//! data of a read into that request's own buffer).
//!
//! A failure of the connection itself (the server closed it, a socket error, a reply
//! that cannot be parsed, a request that timed out) fails every request in flight on it
//! with a [`Lost`] error and closes the socket; the client may then open another
//! connection. An error the server reports for one request fails that request alone.

use super::reply::ReadReply;
use super::secure::{Link, Reader, Writer};
use crate::proto::*;
use crate::stream::Stream;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

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
}

#[derive(Default)]
struct Table {
    pending: HashMap<u64, Pending>,
    /// Set once the connection failed: why.
    failed: Option<(io::ErrorKind, String)>,
}

/// What the callers and the reader thread share.
struct Shared {
    table: Mutex<Table>,
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
        self.control.shutdown(Shutdown::Both);
    }

    fn take(&self, cookie: u64) -> io::Result<Pending> {
        lock(&self.table).pending.remove(&cookie).ok_or_else(|| {
            protocol(format!(
                "a reply for cookie {cookie}, which is not in flight"
            ))
        })
    }

    fn put_back(&self, cookie: u64, p: Pending) {
        lock(&self.table).pending.insert(cookie, p);
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
    reader: Mutex<Option<JoinHandle<()>>>,
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
    /// Starts the reader thread on a negotiated connection; `name` is used in messages.
    pub(crate) fn start(link: Link, structured: bool, name: String) -> io::Result<Conn> {
        let Link {
            control,
            reader: reading,
            writer,
        } = link;
        let shared = Arc::new(Shared {
            table: Mutex::default(),
            control,
            structured,
            name,
        });
        let s = Arc::clone(&shared);
        let reader = std::thread::Builder::new()
            .name("nbd-client-reader".into())
            .spawn(move || read_replies(&s, reading))?;
        Ok(Conn {
            writer: Mutex::new(writer),
            shared,
            cookies: AtomicU64::new(1),
            reader: Mutex::new(Some(reader)),
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
        {
            let mut t = lock(&self.shared.table);
            if let Some((k, m)) = &t.failed {
                return Err(lost(*k, m.clone()));
            }
            t.pending.insert(cookie, Pending { waiting, tx });
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

    /// Waits for the reply of `t`, at most `timeout`; a request that times out fails the
    /// connection (its reply could no longer be told apart).
    pub(crate) fn wait(&self, t: Ticket, timeout: Option<Duration>) -> Outcome {
        let r = match timeout {
            Some(d) => t.rx.recv_timeout(d),
            None => t.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match r {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => {
                let msg = format!(
                    "{}: no reply within {} s: the server is gone or stuck",
                    self.shared.name,
                    timeout.unwrap_or_default().as_secs_f64()
                );
                self.fail(io::ErrorKind::TimedOut, msg.clone());
                Err(lost(io::ErrorKind::TimedOut, msg))
            }
            Err(RecvTimeoutError::Disconnected) => Err(lost(
                io::ErrorKind::ConnectionAborted,
                format!("{}: the connection ended", self.shared.name),
            )),
        }
    }
}

impl Drop for Conn {
    /// Says NBD_CMD_DISC when the connection still works, then closes it and waits for
    /// the reader thread.
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
        if let Some(h) = lock(&self.reader).take() {
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
            let _ = p.tx.send(outcome);
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
                let _ = p.tx.send(outcome);
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
