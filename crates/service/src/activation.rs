//! Listening sockets handed over by the service manager: systemd's socket activation.
//!
//! The manager opens the sockets of a `.socket` unit, starts the service with them as
//! descriptors 3, 4, ... and says so in the environment: `$LISTEN_PID` (the process
//! meant; a child that inherited the variables must not take the descriptors),
//! `$LISTEN_FDS` (how many), `$LISTEN_FDNAMES` (their `FileDescriptorName=`s, separated
//! by `:`). [`listeners`] takes them once per process, checks that each is a listening
//! stream socket, and returns it typed by its address family with its name.

use crate::Env;
use nix::sys::socket::{self, sockopt, AddressFamily, SockType, SockaddrLike, SockaddrStorage};
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::net::UnixListener;

/// The first descriptor the manager passes (`SD_LISTEN_FDS_START`).
pub const FIRST_FD: i32 = 3;

/// The most descriptors taken: far more than any unit passes, small enough that a
/// corrupt `$LISTEN_FDS` cannot make this adopt descriptors the process opened itself.
const MAX_FDS: usize = 256;

/// A passed listening socket.
#[derive(Debug)]
pub enum Listener {
    /// A Unix stream socket.
    Unix(UnixListener),
    /// A TCP socket (IPv4 or IPv6).
    Tcp(TcpListener),
}

/// A passed socket with its name (`FileDescriptorName=`, or `unknown` when the manager
/// gave none, as `sd_listen_fds_with_names` does).
#[derive(Debug)]
pub struct Inherited {
    /// The name given in the unit.
    pub name: String,
    /// The socket.
    pub listener: Listener,
}

/// The sockets the manager passed to this process; empty when it passed none (no
/// `$LISTEN_FDS`, or `$LISTEN_PID` names another process). A descriptor that is not a
/// listening stream socket, or an environment that does not parse, is an error naming
/// it. The second call in a process is an error.
pub fn listeners(env: Env<'_>) -> io::Result<Vec<Inherited>> {
    let Some(count) = env("LISTEN_FDS") else {
        return Ok(Vec::new());
    };
    match env("LISTEN_PID").map(|p| p.parse::<u32>()) {
        Some(Ok(pid)) if pid == std::process::id() => {}
        Some(Ok(_)) | None => return Ok(Vec::new()),
        Some(Err(_)) => return Err(invalid("LISTEN_PID is not a process ID")),
    }
    let count: usize = count
        .parse()
        .map_err(|_| invalid("LISTEN_FDS is not a number"))?;
    if count > MAX_FDS {
        return Err(invalid(&format!(
            "LISTEN_FDS={count}: more than {MAX_FDS} sockets"
        )));
    }
    let names: Vec<String> = match env("LISTEN_FDNAMES") {
        Some(n) if !n.is_empty() => n.split(':').map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    if !names.is_empty() && names.len() != count {
        return Err(invalid(&format!(
            "LISTEN_FDNAMES names {} sockets, LISTEN_FDS says {count}",
            names.len()
        )));
    }
    let fds = crate::ffi::adopt_inherited(FIRST_FD, count)?;
    fds.into_iter()
        .enumerate()
        .map(|(i, fd)| {
            let name = names.get(i).cloned().unwrap_or_else(|| "unknown".into());
            let listener = typed(fd).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "socket {} ({name}) passed by the service manager: {e}",
                        FIRST_FD + i as i32
                    ),
                )
            })?;
            Ok(Inherited { name, listener })
        })
        .collect()
}

/// `fd` as a listener of its family, when it is a listening stream socket.
fn typed(fd: OwnedFd) -> io::Result<Listener> {
    let not = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
    let kind = socket::getsockopt(&fd, sockopt::SockType).map_err(|_| not("not a socket"))?;
    if kind != SockType::Stream {
        return Err(not("not a stream socket (ListenStream= makes one)"));
    }
    if !socket::getsockopt(&fd, sockopt::AcceptConn)? {
        return Err(not("not listening (Accept=no is needed)"));
    }
    let addr: SockaddrStorage = socket::getsockname(fd.as_raw_fd())?;
    match addr.family() {
        Some(AddressFamily::Unix) => Ok(Listener::Unix(UnixListener::from(fd))),
        Some(AddressFamily::Inet | AddressFamily::Inet6) => {
            Ok(Listener::Tcp(TcpListener::from(fd)))
        }
        _ => Err(not("neither a Unix nor a TCP socket")),
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}
