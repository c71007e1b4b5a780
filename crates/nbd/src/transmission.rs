//! The transmission phase (proto.md, "Transmission"): requests in, simple replies out.
//!
//! One reader thread per connection parses request headers and write payloads (through
//! `incoming`, which applies the read and idle timeouts) and hands each request to the
//! connection's worker pool through a bounded queue (`queue`: so a client that sends
//! faster than the export works is slowed down, not buffered without limit; a worker is
//! woken only when one sleeps). Workers run the request against the export and hand the
//! reply to `outgoing`: a reply header and its data leave whole, replies ready at once leave
//! together in one `writev`, and replies may leave in any order. A request ends (for the
//! connection's [`Activity`]) when its reply has been sent.
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
use crate::outgoing::{Outgoing, Reply};
use crate::pool::{BufPool, MAX_BUFFER};
use crate::proto::*;
use crate::queue::JobQueue;
use crate::request::{decide, Action};
use crate::stream::{Stream, SEND_BUFFER};
use crate::tls::{self, TlsWriter};
use crate::writeback::Writeback;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::thread;

/// Requests received and waiting for a worker, at most, on one connection (beyond, the
/// reader waits). Memory is bounded by the connection's budget, not by this; the bound is
/// for requests without a payload and is above the queue depths clients use (the kernel's
/// NBD client: 128; fio and qemu: 32 to 64), so that a deep queue of small requests does
/// not make the reader sleep and be woken once per request.
const QUEUED_JOBS: usize = 128;

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

/// What a reply holds until it has been sent: its share of the budget, whether its buffer
/// goes back to the pool, and whether it ends its request.
struct Held {
    _permit: Option<Permit>,
    pooled: bool,
    ends: bool,
}

impl Held {
    /// A reply that holds nothing but ends its request.
    const END: Held = Held {
        _permit: None,
        pooled: false,
        ends: true,
    };
}

/// One connection in the transmission phase: what the reader and the workers share.
struct Conn<'a> {
    cx: Context<'a>,
    /// The socket, or the TLS session's writing half, shared by the workers' replies.
    out: Outgoing<Box<dyn Write + Send>, Held>,
    /// The socket itself, to shut it.
    socket: Stream,
    pool: BufPool,
    budget: Arc<Budget>,
}

impl Conn<'_> {
    /// Sends `data[..len]` (a reply header, possibly followed by data), now or with
    /// another worker's replies; then gives back what `held` holds and ends the request
    /// if it says so. A failed send means the client is gone: the socket is shut so the
    /// reader stops too.
    fn send(&self, data: Vec<u8>, len: usize, held: Held) {
        let reply = Reply {
            data,
            len,
            token: held,
        };
        let sent = |r: Reply<Held>, _ok| {
            if r.token.pooled {
                self.pool.put(r.data);
            }
            if r.token.ends {
                self.cx.activity.end();
            }
            // The budget share (`r.token._permit`) is given back here, once sent.
        };
        self.out
            .send(reply, sent, || self.socket.shutdown(Shutdown::Both));
    }

    /// Replies with a header alone, which ends the request.
    fn reply(&self, cookie: u64, error: u32, held: Held) {
        let header = SimpleReply { error, cookie }.encode();
        self.send(header.to_vec(), header.len(), held);
    }

    /// Refuses a request the reader handles alone; the request is over.
    fn refuse(&self, cookie: u64, error: u32) {
        self.reply(cookie, error, Held::END);
    }

    fn flush(&self) -> io::Result<()> {
        self.cx.writeback.flush(self.cx.export)
    }

    /// Replies with success, or logs the failure and replies with its error value.
    fn result(&self, cookie: u64, what: &str, r: io::Result<()>) {
        self.result_holding(cookie, what, r, Held::END);
    }

    /// [`Conn::result`] of a request that holds `held` until its reply has been sent.
    fn result_holding(&self, cookie: u64, what: &str, r: io::Result<()>, held: Held) {
        match r {
            Ok(()) => self.reply(cookie, 0, held),
            Err(e) => {
                self.cx.config.log(format_args!(
                    "connection {}: {what} failed: {e}",
                    self.cx.id
                ));
                self.reply(cookie, error_code(&e), held);
            }
        }
    }

    /// Replies to a request that changed the export, after a flush when it asked for FUA;
    /// `held` until the reply has been sent.
    fn changed(&self, req: &Request, what: &str, r: io::Result<()>, held: Held) {
        let r = match r {
            Ok(()) if req.fua() => self.flush(),
            r => r,
        };
        self.result_holding(req.cookie, what, r, held);
    }

    /// Replies to a write the export completed on its own; its budget share is given back
    /// after the reply.
    fn written(&self, w: Written) {
        self.pool.put(w.data);
        let held = Held {
            _permit: Some(w._permit),
            ..Held::END
        };
        self.result_holding(w.cookie, "write", w.result, held);
    }

    /// Runs `job` and sends its reply, which ends the request once sent.
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
                        // The buffer leaves with the reply and goes back to the pool after.
                        let held = Held {
                            _permit: Some(_permit),
                            pooled: true,
                            ends: true,
                        };
                        self.send(buf, end, held);
                    }
                    Err(e) => {
                        self.pool.put(buf);
                        let held = Held {
                            _permit: Some(_permit),
                            ..Held::END
                        };
                        self.result_holding(req.cookie, "read", Err(e), held);
                    }
                }
            }
            Job::Write { req, data, _permit } if req.fua() && export.can_fua() => {
                let buf = &data[..req.len as usize];
                let r = (self.cx.writeback).durable(|| export.write_at_fua(buf, req.offset));
                self.pool.put(data);
                let held = Held {
                    _permit: Some(_permit),
                    ..Held::END
                };
                self.result_holding(req.cookie, "write", r, held);
            }
            Job::Write { req, data, _permit } => {
                let (data, r) = export.write_owned(data, 0..req.len as usize, req.offset);
                self.pool.put(data);
                let held = Held {
                    _permit: Some(_permit),
                    ..Held::END
                };
                self.changed(&req, "write", r, held);
            }
            Job::Flush(req) => self.result(req.cookie, "flush", self.flush()),
            Job::Trim(req) => {
                let r = export.trim(req.offset, req.len.into());
                self.changed(&req, "trim", r, Held::END);
            }
            Job::Zero(req) => {
                let r = export.write_zeroes(req.offset, req.len.into());
                self.changed(&req, "write zeroes", r, Held::END);
            }
        }
    }
}

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
        out: Outgoing::new(writer),
        socket: stream,
        // Every worker, or every started write, may hold one buffer; the budget bounds
        // what is in flight, and so what the pool keeps.
        pool: BufPool::new(workers.max(cx.config.connection_budget / MAX_BUFFER)),
        budget: Arc::new(Budget::new(cx.config.connection_budget)),
    };
    let jobs = JobQueue::<Job>::new(QUEUED_JOBS.max(workers * 2));
    // Started writes report to the replier; it stops once the reader and every started
    // write have let go of their senders, so it outlives them all.
    let (written_tx, written_rx) = channel::<Written>();
    let export = cx.export;
    let why = thread::scope(|scope| {
        // Owned by this closure: dropped on every way out of it, which stops the replier
        // before the scope waits for it; the job queue is closed on every way out too.
        let written_tx = written_tx;
        let _close = CloseOnDrop(&jobs);
        let conn_ref = &conn;
        let replier = thread::Builder::new()
            .name(format!("nbd-{}-r", cx.id))
            .spawn_scoped(scope, move || {
                for w in written_rx {
                    conn_ref.written(w);
                }
            })?;
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let worker = thread::Builder::new()
                .name(format!("nbd-{}-w{i}", cx.id))
                .spawn_scoped(scope, || {
                    while let Some(job) = jobs.pop() {
                        conn.run(job);
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
            job => jobs.push(job).is_ok(),
        });
        jobs.close();
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

/// Closes the job queue when dropped (the reader's scope ends, by an error too), so the
/// workers finish what is queued and stop.
struct CloseOnDrop<'a, T>(&'a JobQueue<T>);

impl<T> Drop for CloseOnDrop<'_, T> {
    fn drop(&mut self) {
        self.0.close();
    }
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
