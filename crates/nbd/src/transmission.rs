//! The transmission phase (proto.md, "Transmission"): requests in, simple replies out.
//!
//! One reader thread per connection parses request headers and write payloads (through
//! `incoming`, which applies the read and idle timeouts). It serves a read of at most
//! 4 KiB itself (the hand-off to a worker and back costs more than such a read) and hands
//! every other request to the
//! connection's worker pool through a bounded queue (so a client that sends faster than
//! the export works is slowed down, not buffered without limit). Workers run the request
//! against the export and write the reply under a mutex on the socket: a reply header and
//! its data leave in one `write_all`, and replies may leave in any order.
//!
//! A malformed request never reaches the export: a bad magic ends this connection (the
//! stream can no longer be parsed); a bad range or length gets an error reply, after a
//! write's payload has been consumed (in small pieces, with nothing reserved for it), so
//! the connection stays usable. Nothing a client does affects another connection.
//!
//! The data path copies nothing it need not: a read's data and its reply header share one
//! pooled buffer and leave in one `write_all`; a write's payload is read into a pooled
//! buffer, which goes to the export as it is.
//!
//! A write the export can start and complete on its own ([`Export::starts_write`]: a
//! volume on librbd) is not queued for a worker: the reader hands it to the export, which
//! calls back from its own thread when the write is over, and the connection's replier
//! thread sends the reply. No thread sleeps through the write, and what is in flight is
//! bounded by the connection's budget, as for any request. FUA writes still run on a worker.
//!
//! What a request does is decided by [`decide`] from its header and the connection's
//! [`ExportInfo`]; this module only moves bytes and runs the export.
//!
//! Memory is bounded per connection: a READ or WRITE takes its payload's share of the
//! connection's own [`Budget`] before its buffer is allocated (the reader waits when the
//! budget is spent) and gives it back when its reply is sent; between requests the pool
//! keeps one buffer per worker, or as many 4 MiB ones as the budget holds if that is more
//! (started writes are in flight beyond the workers' count), none over 4 MiB. A client
//! that stops sending a payload or reading its replies thus waits on its own budget, never
//! on another connection's; it is cut off after the read or write timeout. Flushes go
//! through the server's [`Writeback`], which makes a failure stick.
//!
//! When the reader stops (NBD_CMD_DISC, end of stream, protocol violation, server
//! shutdown) the queue is closed, the workers finish every request already received and
//! send their replies, and only then is the socket closed.

use crate::activity::Activity;
use crate::budget::{Budget, Permit};
use crate::config::ServerConfig;
use crate::export::Export;
use crate::export_info::ExportInfo;
use crate::incoming::{Incoming, Next};
use crate::pool::{BufPool, MAX_BUFFER};
use crate::proto::*;
use crate::request::{decide, Action};
use crate::stream::{Stream, SEND_BUFFER};
use crate::tls::{self, TlsWriter};
use crate::writeback::Writeback;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread;

/// What one connection's transmission phase works with, lent by the server for the
/// connection's lifetime (the workers are scoped threads).
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) export: &'a dyn Export,
    pub(crate) info: &'a ExportInfo,
    pub(crate) config: &'a ServerConfig,
    /// The server's flushes of the export.
    pub(crate) writeback: &'a Writeback,
    /// The connection's requests in flight, as the listener sees them.
    pub(crate) activity: &'a Activity,
    /// The connection's number in log lines and thread names.
    pub(crate) id: u64,
}

/// A request the reader accepted, on its way to a worker; a READ or WRITE holds its share
/// of the budget until its reply is sent.
enum Job {
    Read {
        req: Request,
        _permit: Permit,
    },
    Write {
        req: Request,
        data: Vec<u8>,
        _permit: Permit,
    },
    Flush(Request),
    Trim(Request),
    Zero(Request),
}

/// A write the export completed on its own thread, on its way to the replier.
struct Written {
    cookie: u64,
    data: Vec<u8>,
    result: io::Result<()>,
    _permit: Permit,
}

/// One connection in the transmission phase: what the reader and the workers share.
struct Conn<'a> {
    cx: Context<'a>,
    /// The socket, or the TLS session's writing half.
    writer: Mutex<Box<dyn Write + Send>>,
    /// The socket itself, to shut it.
    socket: Stream,
    pool: BufPool,
    budget: Arc<Budget>,
}

impl Conn<'_> {
    /// Sends `msg` (a reply header, possibly followed by data). A failed send means the
    /// client is gone: the socket is shut so the reader stops too.
    fn send(&self, msg: &[u8]) {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if w.write_all(msg).is_err() {
            self.socket.shutdown(Shutdown::Both);
        }
    }

    fn reply(&self, cookie: u64, error: u32) {
        self.send(&SimpleReply { error, cookie }.encode());
    }

    /// Refuses a request the reader handles alone; the request is over.
    fn refuse(&self, cookie: u64, error: u32) {
        self.reply(cookie, error);
        self.cx.activity.end();
    }

    fn flush(&self) -> io::Result<()> {
        self.cx.writeback.flush(self.cx.export)
    }

    /// Replies with success, or logs the failure and replies with its error value.
    fn result(&self, cookie: u64, what: &str, r: io::Result<()>) {
        match r {
            Ok(()) => self.reply(cookie, 0),
            Err(e) => {
                self.cx.config.log(format_args!(
                    "connection {}: {what} failed: {e}",
                    self.cx.id
                ));
                self.reply(cookie, error_code(&e));
            }
        }
    }

    /// Replies to a request that changed the export, after a flush when it asked for FUA.
    fn changed(&self, req: &Request, what: &str, r: io::Result<()>) {
        let r = match r {
            Ok(()) if req.fua() => self.flush(),
            r => r,
        };
        self.result(req.cookie, what, r);
    }

    /// Replies to a write the export completed on its own; its budget share is given back
    /// after the reply.
    fn written(&self, w: Written) {
        self.pool.put(w.data);
        self.result(w.cookie, "write", w.result);
    }

    fn run(&self, job: Job) {
        let export = self.cx.export;
        match job {
            Job::Read { req, _permit } => {
                let end = SIMPLE_REPLY_LEN + req.len as usize;
                let buf = self.pool.get(end);
                let (mut buf, r) = export.read_owned(buf, SIMPLE_REPLY_LEN..end, req.offset);
                match r {
                    Ok(()) => {
                        let header = SimpleReply {
                            error: 0,
                            cookie: req.cookie,
                        };
                        buf[..SIMPLE_REPLY_LEN].copy_from_slice(&header.encode());
                        self.send(&buf[..end]);
                    }
                    Err(e) => self.result(req.cookie, "read", Err(e)),
                }
                self.pool.put(buf);
            }
            Job::Write { req, data, _permit } if req.fua() && export.can_fua() => {
                let buf = &data[..req.len as usize];
                let r = (self.cx.writeback).durable(|| export.write_at_fua(buf, req.offset));
                self.pool.put(data);
                self.result(req.cookie, "write", r);
            }
            Job::Write { req, data, _permit } => {
                let (data, r) = export.write_owned(data, 0..req.len as usize, req.offset);
                self.pool.put(data);
                self.changed(&req, "write", r);
            }
            Job::Flush(req) => self.result(req.cookie, "flush", self.flush()),
            Job::Trim(req) => {
                let r = export.trim(req.offset, req.len.into());
                self.changed(&req, "trim", r);
            }
            Job::Zero(req) => {
                let r = export.write_zeroes(req.offset, req.len.into());
                self.changed(&req, "write zeroes", r);
            }
        }
    }
}

/// Reads up to this size are served by the connection's reader, not handed to a worker.
const INLINE_READ: u32 = 4096;

/// Serves requests on `stream` until the client disconnects or the server shuts down;
/// in `session` when the handshake started TLS.
pub(crate) fn serve(
    stream: Stream,
    session: Option<rustls::ServerConnection>,
    cx: Context<'_>,
) -> io::Result<()> {
    stream.widen_send_buffer(SEND_BUFFER);
    let (reader, writer, secure): (Box<dyn Read + Send>, Box<dyn Write + Send>, _) = match session {
        None => (
            Box::new(stream.try_clone()?),
            Box::new(stream.try_clone()?),
            None,
        ),
        Some(session) => {
            let session = rustls::Connection::Server(session);
            let (r, w) = tls::split(session, stream.try_clone()?, stream.try_clone()?);
            let closer: TlsWriter<Stream> = w.clone();
            (Box::new(r), Box::new(w), Some(closer))
        }
    };
    let mut incoming = Incoming::new(&stream, reader, cx.activity, cx.config)?;
    let workers = cx.config.workers_per_connection.max(1);
    let conn = Conn {
        cx,
        writer: Mutex::new(writer),
        socket: stream,
        // Every worker, or every started write, may hold one buffer; the budget bounds
        // what is in flight, and so what the pool keeps.
        pool: BufPool::new(workers.max(cx.config.connection_budget / MAX_BUFFER)),
        budget: Arc::new(Budget::new(cx.config.connection_budget)),
    };
    let (tx, rx) = sync_channel::<Job>(workers * 2);
    let rx = Mutex::new(rx);
    // Started writes report to the replier; it stops once the reader and every started
    // write have let go of their senders, so it outlives them all.
    let (written_tx, written_rx) = channel::<Written>();
    let export = cx.export;
    // Small reads on the reader only where reads never wait on a network.
    let inline_reads = if export.quick_reads() { INLINE_READ } else { 0 };
    let why = thread::scope(|scope| {
        // Owned by this closure: dropped on every way out of it, which stops the workers
        // and the replier before the scope waits for them.
        let (tx, written_tx) = (tx, written_tx);
        let (conn_ref, activity) = (&conn, cx.activity);
        let replier = thread::Builder::new()
            .name(format!("nbd-{}-r", cx.id))
            .spawn_scoped(scope, move || {
                for w in written_rx {
                    conn_ref.written(w);
                    activity.end();
                }
            })?;
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let worker = thread::Builder::new()
                .name(format!("nbd-{}-w{i}", cx.id))
                .spawn_scoped(scope, || loop {
                    let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    match job {
                        Ok(job) => {
                            conn.run(job);
                            cx.activity.end();
                        }
                        Err(_) => break,
                    }
                })?;
            handles.push(worker);
        }
        let why = read_requests(&mut incoming, &conn, |job| match job {
            Job::Write { req, data, _permit }
                if !req.fua() && export.starts_write(req.offset, req.len as usize) =>
            {
                let (to_replier, cookie) = (written_tx.clone(), req.cookie);
                let done = move |data, result| {
                    // The replier takes every report (it waits for this sender).
                    let _ = to_replier.send(Written {
                        cookie,
                        data,
                        result,
                        _permit,
                    });
                };
                export.start_write(data, 0..req.len as usize, req.offset, Box::new(done));
                true
            }
            // A small read of an export whose reads are quick is served on the reader
            // thread itself: handing it to a worker and its reply back costs more futex
            // wake-ups than the read takes (4 KiB reads at queue depth 32: about 5.6 futex
            // calls per request and 1.5x the CPU time). Larger reads, and every read of an
            // export that may wait on a network, go to the workers, where they overlap.
            job @ Job::Read { .. } if matches!(&job, Job::Read { req, .. } if req.len <= inline_reads) =>
            {
                conn.run(job);
                cx.activity.end();
                true
            }
            job => tx.send(job).is_ok(),
        });
        drop(tx);
        drop(written_tx);
        // Joined here rather than by the scope, which would re-raise a worker's panic (one
        // from the export) and skip the closing below.
        for h in handles {
            let _ = h.join();
        }
        let _ = replier.join();
        why
    });
    if let Some(w) = secure {
        w.close();
    }
    conn.socket.shutdown(Shutdown::Both);
    let why = why?;
    cx.config
        .log(format_args!("connection {}: closed ({why})", cx.id));
    Ok(())
}

/// The reader loop; returns why it stopped.
fn read_requests(
    r: &mut Incoming<'_>,
    conn: &Conn<'_>,
    mut dispatch: impl FnMut(Job) -> bool,
) -> io::Result<&'static str> {
    let cx = conn.cx;
    let mut h = [0u8; REQUEST_LEN];
    loop {
        if let Next::Closed(why) = r.header(&mut h)? {
            return Ok(why);
        }
        let req = match Request::decode(&h) {
            Ok(req) => req,
            Err(magic) => {
                cx.config.log(format_args!(
                    "connection {}: bad request magic {magic:#010x}, disconnecting",
                    cx.id
                ));
                return Ok("protocol violation");
            }
        };
        let len = req.len as usize;
        let job = match decide(&req, cx.info) {
            Action::Read => Job::Read {
                req,
                _permit: conn.budget.take(len),
            },
            Action::Write => {
                // The budget first: the buffer is allocated and filled only once its
                // bytes are accounted for.
                let permit = conn.budget.take(len);
                let mut data = conn.pool.get(len);
                r.payload(&mut data[..len])?;
                Job::Write {
                    req,
                    data,
                    _permit: permit,
                }
            }
            Action::Flush => Job::Flush(req),
            Action::Trim => Job::Trim(req),
            Action::WriteZeroes => Job::Zero(req),
            Action::Disconnect => return Ok("client disconnected"),
            Action::Refuse(error) => {
                conn.refuse(req.cookie, error);
                continue;
            }
            Action::DiscardAndRefuse(error) => {
                r.discard(req.len.into())?;
                conn.refuse(req.cookie, error);
                continue;
            }
        };
        if !dispatch(job) {
            return Ok("workers stopped");
        }
    }
}
