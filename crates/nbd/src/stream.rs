//! One connected socket, Unix or loopback TCP, behind one type ([`Stream`]), and the
//! handshake's view of it, whose reads must all finish before a deadline ([`Deadline`]).
//!
//! Only the socket operations the server needs are here (and what the socket tells of
//! the client, [`Stream::peer`]); what goes over the socket is the business of
//! `handshake` and `transmission`.

use crate::exports::{Credentials, Peer};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The send buffer asked for on every connection in the transmission phase, both ways:
/// several 256 KiB replies (or write requests) queue without the sender blocking in the
/// middle of one (a blocked sender holds the socket's lock, and every worker with a reply
/// waits behind it). The kernel caps it at `net.core.wmem_max`.
pub(crate) const SEND_BUFFER: usize = 4 << 20;

/// A client connection.
#[derive(Debug)]
pub(crate) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    /// Bounds each blocking read (`None`: wait forever).
    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }

    /// Bounds each blocking write (`None`: wait forever).
    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
        }
    }

    /// Asks the kernel for a send buffer of `bytes`, so a whole reply (or a whole request
    /// with its payload) fits and the sending thread does not block in the middle of it.
    /// The kernel caps it at `net.core.wmem_max`; a refusal is not an error (the default
    /// buffer works, only slower).
    pub(crate) fn widen_send_buffer(&self, bytes: usize) {
        use nix::sys::socket::{setsockopt, sockopt::SndBuf};
        let _ = match self {
            Stream::Unix(s) => setsockopt(s, SndBuf, &bytes),
            Stream::Tcp(s) => setsockopt(s, SndBuf, &bytes),
        };
    }

    /// What the socket tells of the client: a Unix socket's peer credentials as the
    /// kernel took them at `connect()` (`SO_PEERCRED`; none if the kernel does not say),
    /// or a TCP client's address.
    pub(crate) fn peer(&self) -> Peer {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        match self {
            Stream::Unix(s) => {
                Peer::unix(getsockopt(s, PeerCredentials).ok().map(|c| Credentials {
                    uid: c.uid(),
                    gid: c.gid(),
                    pid: c.pid(),
                }))
            }
            Stream::Tcp(s) => match s.peer_addr() {
                Ok(a) => Peer::tcp(a),
                Err(_) => Peer::default(),
            },
        }
    }

    /// Ends reading, writing or both; errors (already closed) are irrelevant here.
    pub(crate) fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write_vectored(bufs),
            Stream::Tcp(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A stream whose reads and writes must all finish before a deadline: each waits at
/// most the time left, so a client that trickles bytes, or reads its replies slowly,
/// cannot stretch the handshake either. It leaves the socket's timeouts changed.
pub(crate) struct Deadline<'a> {
    s: &'a mut Stream,
    deadline: Instant,
}

impl<'a> Deadline<'a> {
    pub(crate) fn new(s: &'a mut Stream, deadline: Instant) -> Deadline<'a> {
        Deadline { s, deadline }
    }
}

impl Deadline<'_> {
    /// The time left, never zero; an error once the deadline has passed.
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake not finished in time",
            ));
        }
        Ok(left)
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.s.set_read_timeout(Some(left))?;
        self.s.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.s.set_write_timeout(Some(left))?;
        self.s.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{getsockopt, sockopt::SndBuf};

    #[test]
    fn a_unix_peer_is_known_by_the_kernels_credentials() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = Stream::Unix(a).peer().credentials.unwrap();
        // /proc/self belongs to the process's effective user and group.
        let me = std::fs::metadata("/proc/self").unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!((c.uid, c.gid), (me.uid(), me.gid()));
        assert_eq!(c.pid, std::process::id() as i32);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        let p = Stream::Tcp(server).peer();
        assert_eq!(p.address, Some(client.local_addr().unwrap()));
        assert_eq!(p.credentials, None);
    }

    #[test]
    fn the_send_buffer_is_widened_up_to_the_kernels_cap() {
        let (a, _b) = UnixStream::pair().unwrap();
        let before = getsockopt(&a, SndBuf).unwrap();
        let cap: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(before);
        Stream::Unix(a.try_clone().unwrap()).widen_send_buffer(SEND_BUFFER);
        // Linux reports twice what was set (its bookkeeping overhead).
        let after = getsockopt(&a, SndBuf).unwrap();
        assert!(
            after >= 2 * SEND_BUFFER.min(cap) && after >= before,
            "send buffer {before} -> {after}, wmem_max {cap}"
        );
    }
}
