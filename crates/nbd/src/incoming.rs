//! The reading side of a connection in the transmission phase ([`Incoming`]): request
//! headers and payloads off the socket, under the read timeout and the idle timeout
//! ([`ServerConfig::read_timeout`], [`ServerConfig::idle_timeout`]).
//!
//! The socket's own receive timeout is set once, to a tick (the shorter of the two
//! timeouts), so no system call is added per request: a read that times out is retried
//! until the request's deadline or the idle timeout has passed. A request's deadline is
//! also checked after every read that leaves it incomplete, so a client trickling one byte
//! per tick cannot stretch it. The bounds are therefore met within one tick.
//!
//! Waiting for a header is where a connection is idle: the first byte of a header starts
//! the request in the connection's [`Activity`], unless the listener has claimed the
//! connection to make room, and then the request is dropped unread.

use crate::activity::Activity;
use crate::config::ServerConfig;
use crate::proto::REQUEST_LEN;
use crate::stream::Stream;
use std::io::{self, BufReader, Read};
use std::time::{Duration, Instant};

/// Read-side buffering of the socket: request headers and small payloads come out of it
/// with few syscalls. Kept small because a header read fills it with the start of the
/// next payload, which is then copied once more; larger payloads are read straight into
/// their buffer.
const READ_BUFFER: usize = 32 * 1024;

/// What waiting for the next request gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// A request header, read whole; the request has begun in the connection's activity.
    Header,
    /// The connection is over, for this reason.
    Closed(&'static str),
}

/// The reading half of one connection.
pub(crate) struct Incoming<'a> {
    r: BufReader<Box<dyn Read + Send + 'a>>,
    activity: &'a Activity,
    read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
}

/// A timeout of zero is no timeout.
fn nonzero(t: Duration) -> Option<Duration> {
    Some(t).filter(|t| !t.is_zero())
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl<'a> Incoming<'a> {
    /// Reads requests from `reader`, which reads `socket` (directly, or through TLS);
    /// the socket's receive timeout becomes the tick.
    pub(crate) fn new(
        socket: &Stream,
        reader: Box<dyn Read + Send + 'a>,
        activity: &'a Activity,
        config: &ServerConfig,
    ) -> io::Result<Incoming<'a>> {
        let read_timeout = nonzero(config.read_timeout);
        let idle_timeout = nonzero(config.idle_timeout);
        let tick = match (read_timeout, idle_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        socket.set_read_timeout(tick)?;
        Ok(Incoming {
            r: BufReader::with_capacity(READ_BUFFER, reader),
            activity,
            read_timeout,
            idle_timeout,
        })
    }

    /// Waits for the next request and reads its header into `h`.
    pub(crate) fn header(&mut self, h: &mut [u8; REQUEST_LEN]) -> io::Result<Next> {
        loop {
            match self.r.read(&mut h[..1]) {
                // The client, the shutdown or the listener making room closed the socket;
                // over TLS without a close_notify (the shutdown, a client that just goes):
                // harmless between requests, nothing is cut short.
                Ok(0) => return Ok(Next::Closed("end of stream")),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Ok(Next::Closed("end of stream"))
                }
                Ok(_) => break,
                Err(e) if timed_out(&e) => {
                    let idle = self.activity.idle_for();
                    if let (Some(limit), Some(idle)) = (self.idle_timeout, idle) {
                        if idle >= limit {
                            return Ok(Next::Closed("idle timeout"));
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if !self.activity.begin() {
            return Ok(Next::Closed("closed to make room for another connection"));
        }
        self.fill(&mut h[1..], self.deadline())?;
        Ok(Next::Header)
    }

    /// Reads a payload into `buf`, which must arrive within the read timeout from now.
    pub(crate) fn payload(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.fill(buf, self.deadline())
    }

    /// Reads and drops `n` payload bytes (of a write that is refused), within the read
    /// timeout from now, without a buffer of their size.
    pub(crate) fn discard(&mut self, mut n: u64) -> io::Result<()> {
        let deadline = self.deadline();
        let mut scratch = [0u8; 8192];
        while n > 0 {
            let piece = n.min(scratch.len() as u64) as usize;
            self.fill(&mut scratch[..piece], deadline)?;
            n -= piece as u64;
        }
        Ok(())
    }

    /// When the read timeout from now ends; none for a timeout beyond the clock's range.
    fn deadline(&self) -> Option<Instant> {
        self.read_timeout
            .and_then(|t| Instant::now().checked_add(t))
    }

    /// Fills `buf` from the socket before `deadline`.
    fn fill(&mut self, buf: &mut [u8], deadline: Option<Instant>) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e),
            }
            if got < buf.len() && deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "a request did not arrive whole within the read timeout",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::thread;

    fn incoming(activity: &Activity, read: u64, idle: u64) -> (Incoming<'_>, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        let config = ServerConfig {
            read_timeout: Duration::from_millis(read),
            idle_timeout: Duration::from_millis(idle),
            ..ServerConfig::default()
        };
        let socket = Stream::Unix(a);
        let reader = Box::new(socket.try_clone().unwrap());
        (
            Incoming::new(&socket, reader, activity, &config).unwrap(),
            b,
        )
    }

    #[test]
    fn a_header_trickled_past_the_read_timeout_fails() {
        let activity = Activity::new(Instant::now());
        let (mut inc, mut peer) = incoming(&activity, 150, 0);
        let t = thread::spawn(move || {
            for _ in 0..REQUEST_LEN {
                if peer.write_all(&[0]).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(40));
            }
            peer
        });
        let mut h = [0u8; REQUEST_LEN];
        let t0 = Instant::now();
        let e = inc.header(&mut h).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(
            t0.elapsed() < Duration::from_millis(800),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(activity.idle_for(), None, "the request had begun");
        drop(t.join());
    }

    #[test]
    fn idle_timeout_only_without_requests_in_flight() {
        let activity = Activity::new(Instant::now());
        let (mut inc, peer) = incoming(&activity, 0, 100);
        let mut h = [0u8; REQUEST_LEN];
        // A request in flight: waiting for the next header is not idling.
        assert!(activity.begin());
        let waiter = thread::spawn({
            let mut peer = peer.try_clone().unwrap();
            move || {
                thread::sleep(Duration::from_millis(300));
                peer.write_all(&[7u8; REQUEST_LEN]).unwrap();
            }
        });
        assert_eq!(inc.header(&mut h).unwrap(), Next::Header);
        assert_eq!(h, [7u8; REQUEST_LEN]);
        waiter.join().unwrap();
        activity.end();
        activity.end();
        let t0 = Instant::now();
        assert_eq!(inc.header(&mut h).unwrap(), Next::Closed("idle timeout"));
        assert!(t0.elapsed() >= Duration::from_millis(90));
        drop(peer);
    }

    #[test]
    fn payloads_and_discards_arrive_in_pieces() {
        let activity = Activity::new(Instant::now());
        let (mut inc, mut peer) = incoming(&activity, 2000, 0);
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let sent = data.clone();
        let t = thread::spawn(move || {
            for piece in sent.chunks(7000) {
                peer.write_all(piece).unwrap();
                thread::sleep(Duration::from_millis(2));
            }
            peer.write_all(&[1u8; 20_000]).unwrap();
            peer
        });
        let mut buf = vec![0u8; data.len()];
        inc.payload(&mut buf).unwrap();
        assert!(buf == data);
        inc.discard(20_000).unwrap();
        drop(t.join().unwrap());
        assert_eq!(
            inc.payload(&mut buf[..1]).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
