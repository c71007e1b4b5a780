//! The transmission phase (proto.md, "Transmission"): requests in, simple replies out.
//!
//! One reader thread per connection parses request headers and write payloads and hands
//! each request to the connection's worker pool through a bounded queue (so a client that
//! sends faster than the export works is slowed down, not buffered without limit). Workers
//! run the request against the export and write the reply under a mutex on the socket: a
//! reply header and its data leave in one `write_all`, and replies may leave in any order.
//!
//! A malformed request never reaches the export: a bad magic ends this connection (the
//! stream can no longer be parsed); a bad range or length gets an error reply, after a
//! write's payload has been consumed, so the connection stays usable. Nothing a client does
//! affects another connection.
//!
//! Memory is bounded server-wide: a READ or WRITE takes its payload's share of the
//! server's [`Budget`] before its buffer is allocated (the reader waits when the budget is
//! spent) and gives it back when its reply is sent; pooled buffers are few and small. A
//! client that stops reading its replies is cut off after the write timeout, which gives
//! its share back.
//!
//! When the reader stops (NBD_CMD_DISC, end of stream, protocol violation, server
//! shutdown) the queue is closed, the workers finish every request already received and
//! send their replies, and only then is the socket closed.

use crate::proto::*;
use crate::server::Shared;
use crate::stream::Stream;
use std::io::{self, BufReader, Read, Write};
use std::net::Shutdown;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// Buffers kept for reuse per connection.
const POOL_KEEP: usize = 4;
/// Larger buffers are freed after use, not kept: a connection keeps at most
/// `POOL_KEEP * POOL_MAX_BUFFER` bytes between requests.
const POOL_MAX_BUFFER: usize = 4 << 20;
/// Read-side buffering of the socket: request headers and small payloads come out of it
/// with few syscalls. Kept small because a header read fills it with the start of the
/// next payload, which is then copied once more; larger payloads are read straight into
/// their pooled buffer.
const READ_BUFFER: usize = 32 * 1024;

enum Job {
    Read {
        cookie: u64,
        offset: u64,
        len: usize,
        _permit: Permit,
    },
    Write {
        cookie: u64,
        offset: u64,
        data: Vec<u8>,
        len: usize,
        fua: bool,
        _permit: Permit,
    },
    Flush {
        cookie: u64,
    },
    Trim {
        cookie: u64,
        offset: u64,
        len: u64,
        fua: bool,
    },
    Zero {
        cookie: u64,
        offset: u64,
        len: u64,
        fua: bool,
    },
}

/// The server-wide budget of payload bytes in flight (a counting semaphore).
pub(crate) struct Budget {
    left: Mutex<usize>,
    freed: Condvar,
    total: usize,
}

impl Budget {
    pub(crate) fn new(total: usize) -> Budget {
        let total = total.max(1);
        Budget {
            left: Mutex::new(total),
            freed: Condvar::new(),
            total,
        }
    }

    /// Waits until `n` bytes (at most the whole budget) are free and takes them until the
    /// permit is dropped.
    fn take(self: &Arc<Self>, n: usize) -> Permit {
        let n = n.min(self.total);
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left < n {
            left = self.freed.wait(left).unwrap_or_else(|e| e.into_inner());
        }
        *left -= n;
        Permit {
            budget: self.clone(),
            n,
        }
    }
}

/// A share of the [`Budget`], given back when dropped.
struct Permit {
    budget: Arc<Budget>,
    n: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut left = self.budget.left.lock().unwrap_or_else(|e| e.into_inner());
        *left += self.n;
        drop(left);
        self.budget.freed.notify_all();
    }
}

/// Reusable byte buffers, so steady-state requests allocate nothing.
struct BufPool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl BufPool {
    /// A buffer of at least `n` bytes (contents unspecified).
    fn get(&self, n: usize) -> Vec<u8> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        // Any kept buffer that is large enough (mixed request sizes do not churn).
        match free.iter().position(|v| v.len() >= n) {
            Some(i) => free.swap_remove(i),
            None => {
                drop(free);
                vec![0u8; n]
            }
        }
    }

    fn put(&self, v: Vec<u8>) {
        if v.len() > POOL_MAX_BUFFER {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < POOL_KEEP {
            free.push(v);
        } else if let Some(i) = free.iter().position(|k| k.len() < v.len()) {
            // Full: keep the larger of the two.
            free[i] = v;
        }
    }
}

struct Conn {
    shared: Arc<Shared>,
    id: u64,
    writer: Mutex<Stream>,
    pool: BufPool,
}

impl Conn {
    fn header(buf: &mut [u8], error: u32, cookie: u64) {
        buf[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        buf[4..8].copy_from_slice(&error.to_be_bytes());
        buf[8..16].copy_from_slice(&cookie.to_be_bytes());
    }

    /// Sends `msg` (a reply header, possibly followed by data). A failed send means the
    /// client is gone: the socket is shut so the reader stops too.
    fn send(&self, msg: &[u8]) {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if w.write_all(msg).is_err() {
            w.shutdown(Shutdown::Both);
        }
    }

    fn reply(&self, cookie: u64, error: u32) {
        let mut h = [0u8; SIMPLE_REPLY_LEN];
        Conn::header(&mut h, error, cookie);
        self.send(&h);
    }

    fn result(&self, cookie: u64, what: &str, r: io::Result<()>) {
        match r {
            Ok(()) => self.reply(cookie, 0),
            Err(e) => {
                self.shared
                    .log(format_args!("connection {}: {what} failed: {e}", self.id));
                self.reply(cookie, errno(&e));
            }
        }
    }

    fn run(&self, job: Job) {
        let export = &*self.shared.export;
        match job {
            Job::Read {
                cookie,
                offset,
                len,
                _permit,
            } => {
                let mut buf = self.pool.get(SIMPLE_REPLY_LEN + len);
                match export.read_at(&mut buf[SIMPLE_REPLY_LEN..SIMPLE_REPLY_LEN + len], offset) {
                    Ok(()) => {
                        Conn::header(&mut buf, 0, cookie);
                        self.send(&buf[..SIMPLE_REPLY_LEN + len]);
                    }
                    Err(e) => {
                        self.shared
                            .log(format_args!("connection {}: read failed: {e}", self.id));
                        self.reply(cookie, errno(&e));
                    }
                }
                self.pool.put(buf);
            }
            Job::Write {
                cookie,
                offset,
                data,
                len,
                fua,
                _permit,
            } => {
                let mut r = export.write_at(&data[..len], offset);
                self.pool.put(data);
                if r.is_ok() && fua {
                    r = export.flush();
                }
                self.result(cookie, "write", r);
            }
            Job::Flush { cookie } => self.result(cookie, "flush", export.flush()),
            Job::Trim {
                cookie,
                offset,
                len,
                fua,
            } => {
                let mut r = export.trim(offset, len);
                if r.is_ok() && fua {
                    r = export.flush();
                }
                self.result(cookie, "trim", r);
            }
            Job::Zero {
                cookie,
                offset,
                len,
                fua,
            } => {
                let mut r = export.write_zeroes(offset, len);
                if r.is_ok() && fua {
                    r = export.flush();
                }
                self.result(cookie, "write zeroes", r);
            }
        }
    }
}

/// The protocol's error number for an I/O error.
fn errno(e: &io::Error) -> u32 {
    match e.raw_os_error() {
        Some(n @ (1 | 5 | 12 | 22 | 28 | 75 | 95 | 108)) => n as u32,
        Some(30) => EPERM,  // EROFS
        Some(27) => ENOSPC, // EFBIG
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => EPERM,
            io::ErrorKind::OutOfMemory => ENOMEM,
            io::ErrorKind::InvalidInput => EINVAL,
            io::ErrorKind::Unsupported => ENOTSUP,
            _ => EIO,
        },
    }
}

/// Whether `offset + len` lies within `size` (no overflow).
fn in_range(offset: u64, len: u64, size: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= size)
}

/// Reads and drops `n` bytes (the payload of a write that is refused).
fn discard(r: &mut impl Read, n: u64) -> io::Result<()> {
    let got = io::copy(&mut r.take(n), &mut io::sink())?;
    if got != n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Serves requests on `stream` until the client disconnects or the server shuts down.
pub(crate) fn serve(stream: Stream, shared: Arc<Shared>, id: u64) -> io::Result<()> {
    let conn = Arc::new(Conn {
        shared: shared.clone(),
        id,
        writer: Mutex::new(stream.try_clone()?),
        pool: BufPool {
            free: Mutex::new(Vec::new()),
        },
    });
    let workers = shared.config.workers_per_connection.max(1);
    let (tx, rx) = sync_channel::<Job>(workers * 2);
    let rx = Arc::new(Mutex::new(rx));
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let conn = conn.clone();
            let rx: Arc<Mutex<Receiver<Job>>> = rx.clone();
            thread::Builder::new()
                .name(format!("nbd-{id}-w{i}"))
                .spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    match job {
                        Ok(job) => conn.run(job),
                        Err(_) => break,
                    }
                })
        })
        .collect::<io::Result<_>>()?;

    let mut reader = BufReader::with_capacity(READ_BUFFER, stream);
    let why = read_requests(&mut reader, &conn, |job| tx.send(job).is_ok());
    drop(tx);
    for h in handles {
        let _ = h.join();
    }
    conn.writer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .shutdown(Shutdown::Both);
    match why {
        Ok(msg) => {
            shared.log(format_args!("connection {id}: closed ({msg})"));
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The reader loop; returns why it stopped.
fn read_requests(
    r: &mut impl Read,
    conn: &Conn,
    mut dispatch: impl FnMut(Job) -> bool,
) -> io::Result<&'static str> {
    let shared = &*conn.shared;
    let size = shared.export.size();
    let read_only = shared.export.read_only();
    let max = shared.config.max_payload as u64;
    let mut h = [0u8; REQUEST_LEN];
    loop {
        // End of stream before a header: the client (or the shutdown) closed the socket.
        match r.read(&mut h[..1]) {
            Ok(0) => return Ok("end of stream"),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        r.read_exact(&mut h[1..])?;
        let magic = u32::from_be_bytes(h[0..4].try_into().unwrap());
        let flags = u16::from_be_bytes(h[4..6].try_into().unwrap());
        let kind = u16::from_be_bytes(h[6..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let offset = u64::from_be_bytes(h[16..24].try_into().unwrap());
        let len32 = u32::from_be_bytes(h[24..28].try_into().unwrap());
        let len = len32 as u64;
        if magic != REQUEST_MAGIC {
            shared.log(format_args!(
                "connection {}: bad request magic {magic:#010x}, disconnecting",
                conn.id
            ));
            return Ok("protocol violation");
        }
        let fua = flags & CMD_FLAG_FUA != 0;
        let job = match kind {
            CMD_READ => {
                if len == 0 || len > max || !in_range(offset, len, size) {
                    conn.reply(cookie, EINVAL);
                    continue;
                }
                Job::Read {
                    cookie,
                    offset,
                    len: len as usize,
                    _permit: shared.budget.take(len as usize),
                }
            }
            CMD_WRITE => {
                if len > max {
                    discard(r, len)?;
                    conn.reply(cookie, EINVAL);
                    continue;
                }
                // The budget first: the buffer is allocated and filled only once its
                // bytes are accounted for.
                let permit = shared.budget.take(len as usize);
                let mut data = conn.pool.get(len as usize);
                r.read_exact(&mut data[..len as usize])?;
                let refuse = if read_only {
                    Some(EPERM)
                } else if !in_range(offset, len, size) {
                    Some(ENOSPC)
                } else {
                    None
                };
                if let Some(err) = refuse {
                    conn.pool.put(data);
                    conn.reply(cookie, err);
                    continue;
                }
                Job::Write {
                    cookie,
                    offset,
                    data,
                    len: len as usize,
                    fua,
                    _permit: permit,
                }
            }
            CMD_DISC => return Ok("client disconnected"),
            CMD_FLUSH => Job::Flush { cookie },
            CMD_TRIM if shared.export.can_trim() => {
                if read_only {
                    conn.reply(cookie, EPERM);
                    continue;
                }
                if !in_range(offset, len, size) {
                    conn.reply(cookie, ENOSPC);
                    continue;
                }
                Job::Trim {
                    cookie,
                    offset,
                    len,
                    fua,
                }
            }
            CMD_WRITE_ZEROES => {
                if read_only {
                    conn.reply(cookie, EPERM);
                    continue;
                }
                if flags & CMD_FLAG_FAST_ZERO != 0 {
                    // Not advertised: writing zeros is never faster than a write here.
                    conn.reply(cookie, ENOTSUP);
                    continue;
                }
                if !in_range(offset, len, size) {
                    conn.reply(cookie, ENOSPC);
                    continue;
                }
                Job::Zero {
                    cookie,
                    offset,
                    len,
                    fua,
                }
            }
            _ => {
                // TRIM when not advertised, CACHE, BLOCK_STATUS, unknown commands. None of
                // them carries a payload in this (non-extended) protocol.
                conn.reply(cookie, EINVAL);
                continue;
            }
        };
        if !dispatch(job) {
            return Ok("workers stopped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_refuse_overflow_and_the_end() {
        assert!(in_range(0, 10, 10));
        assert!(!in_range(1, 10, 10));
        assert!(!in_range(u64::MAX, 2, u64::MAX));
        assert!(in_range(10, 0, 10));
    }

    #[test]
    fn the_pool_reuses_any_buffer_large_enough() {
        let pool = BufPool {
            free: Mutex::new(Vec::new()),
        };
        let big = pool.get(1 << 20);
        let small = pool.get(100);
        let big_ptr = big.as_ptr();
        pool.put(big);
        pool.put(small);
        let again = pool.get(300_000);
        assert_eq!(
            again.as_ptr(),
            big_ptr,
            "the large buffer is found behind the small"
        );
        assert!(pool.get(50).len() >= 50);
        for _ in 0..POOL_KEEP + 4 {
            pool.put(vec![0; 10]);
        }
        pool.put(again);
        let last = pool.get(1 << 20);
        assert_eq!(last.as_ptr(), big_ptr, "a full pool keeps the larger");
        // Buffers above the size cap are freed, not kept.
        let huge = vec![0u8; POOL_MAX_BUFFER + 1];
        pool.put(huge);
        assert!(pool
            .free
            .lock()
            .unwrap()
            .iter()
            .all(|v| v.len() <= POOL_MAX_BUFFER));
    }

    #[test]
    fn the_budget_blocks_until_bytes_are_given_back() {
        let b = Arc::new(Budget::new(100));
        let a = b.take(60);
        let c = b.take(40);
        let (tx, rx) = std::sync::mpsc::channel();
        let b2 = b.clone();
        let t = thread::spawn(move || {
            // Larger than the whole budget: clamped, waits until everything is free.
            let p = b2.take(1000);
            tx.send(p.n).unwrap();
        });
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(100))
            .is_err());
        drop(a);
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(100))
            .is_err());
        drop(c);
        assert_eq!(rx.recv().unwrap(), 100);
        t.join().unwrap();
        assert_eq!(*b.left.lock().unwrap(), 100);
    }

    #[test]
    fn errno_maps_os_and_kinds() {
        assert_eq!(errno(&io::Error::from_raw_os_error(28)), ENOSPC);
        assert_eq!(errno(&io::Error::from_raw_os_error(30)), EPERM);
        assert_eq!(errno(&io::Error::from(io::ErrorKind::InvalidInput)), EINVAL);
        assert_eq!(errno(&io::Error::other("x")), EIO);
    }
}
