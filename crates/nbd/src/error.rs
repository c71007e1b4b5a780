//! The crate's error type: why the server could not start or stopped with a failure.
//!
//! Only what ends [`Server::run`](crate::Server::run) or [`Server::bind`](crate::Server::bind)
//! or a [`Listen`](crate::Listen) parse is an [`Error`]; a connection's failures (a
//! client that misbehaves or goes away) are logged and end that connection alone.

use std::fmt;
use std::io;

/// The longest Unix socket path Linux binds or connects to: a socket address holds 108
/// bytes, the terminating NUL included.
pub(crate) const MAX_SOCKET_PATH: usize = 107;

/// Why the server could not start or stopped with a failure. Errors of one connection
/// (a client that misbehaves or goes away) are logged and never end the server.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The listen address is not a loopback address (the server serves no network).
    NotLoopback(String),
    /// The listen address could not be parsed.
    BadAddress(String),
    /// Something exists at the socket path and is not a socket.
    SocketPathTaken(String),
    /// A Unix socket's mode with bits beyond the permission bits (0o777).
    SocketMode(u32),
    /// A Unix socket path longer than a socket address holds (107 bytes on Linux); the
    /// path and its length.
    SocketPathTooLong(String, usize),
    /// The server's Unix socket was removed or replaced while it ran: no client could
    /// reach it any more, so the server stopped.
    SocketGone(String),
    /// An I/O failure, with what was being done.
    Io(&'static str, io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotLoopback(a) => write!(
                f,
                "refusing to listen on {a}: only loopback addresses (127.0.0.1, ::1) or a unix socket"
            ),
            Error::BadAddress(a) => write!(f, "bad listen address {a:?}: expected ADDR:PORT"),
            Error::SocketPathTaken(p) => {
                write!(f, "{p} exists and is not a socket; refusing to replace it")
            }
            Error::SocketMode(m) => {
                write!(f, "socket mode {m:#o}: only permission bits (at most 0777)")
            }
            Error::SocketPathTooLong(p, len) => write!(
                f,
                "socket path {p} is {len} bytes long: a Unix socket's path is at most \
                 {MAX_SOCKET_PATH} bytes; choose a shorter one"
            ),
            Error::SocketGone(p) => write!(
                f,
                "the socket {p} was removed or replaced while serving; stopped (nobody \
                 could connect any more)"
            ),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(_, e) => Some(e),
            _ => None,
        }
    }
}
