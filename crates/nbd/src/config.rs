//! What the caller chooses: where to listen ([`Listen`]) and how the server behaves
//! ([`ServerConfig`]: the name and description of a server's one export, limits, timeouts,
//! the socket's mode, TLS, logging).
//!
//! Plain data with defaults; nothing here binds or reads a socket. Addresses are checked
//! when parsed: the server serves loopback and Unix sockets only.

use crate::error::Error;
use crate::exports::Peer;
use crate::tls::ServerTls;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket at this path.
    Unix(PathBuf),
    /// A loopback TCP address.
    Tcp(SocketAddr),
}

impl Listen {
    /// Parses `ADDR:PORT` (`[::1]:PORT` for IPv6); refuses every non-loopback address.
    pub fn tcp(addr: &str) -> Result<Listen, Error> {
        let sa: SocketAddr = addr
            .parse()
            .map_err(|_| Error::BadAddress(addr.to_string()))?;
        if !sa.ip().is_loopback() {
            return Err(Error::NotLoopback(addr.to_string()));
        }
        Ok(Listen::Tcp(sa))
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The export's name, for a server of one export ([`Server::bind`](crate::Server::bind));
    /// clients asking for "" get it too (the default export). A table
    /// ([`Server::bind_exports`](crate::Server::bind_exports)) names its own exports.
    pub export_name: String,
    /// Shown by NBD_OPT_LIST and NBD_INFO_DESCRIPTION, for a server of one export.
    pub description: Option<String>,
    /// Worker threads per connection (requests of one connection run this many at once).
    pub workers_per_connection: usize,
    /// The largest READ or WRITE payload accepted (advertised as the maximum block size).
    pub max_payload: u32,
    /// Connections served at once past their handshake (each costs a reader and the
    /// workers' threads, and up to `connection_budget` bytes). A connection takes a slot
    /// only once its handshake is over (TLS included, the export chosen). When every
    /// slot is taken, it takes the slot of the one idle longest (no request in flight),
    /// which is closed; when none is idle, the new connection is closed.
    pub max_connections: usize,
    /// Connections one export may have past their handshake at once; 0 (the default):
    /// no limit of its own, `max_connections` only. Below `max_connections`, it keeps
    /// slots for the other exports of a server of many: the clients of an export whose
    /// store stalls have requests in flight that never come back, so none of them is
    /// idle and none can be closed to make room; they hold this many slots at most. A
    /// client over the limit is refused at NBD_OPT_GO with NBD_REP_ERR_POLICY.
    pub max_connections_per_export: usize,
    /// Connections in their handshake at once, apart from `max_connections`. When every
    /// handshake slot is taken, a new connection takes the slot of the one in its
    /// handshake longest, which is closed: connections that never finish their handshake
    /// hold a thread each for `handshake_timeout` at most, and close no client that has
    /// finished its own.
    pub max_handshakes: usize,
    /// Log connections and errors on stderr (or to [`ServerConfig::observer`], when
    /// there is one).
    pub log: bool,
    /// Told of every connection that reaches its transmission phase and of its end, and
    /// given the server's log lines in place of stderr: a gateway's list of clients
    /// (`sectorcrypt status`) and its log in the format it chose. `None`: log lines go to
    /// stderr.
    pub observer: Option<Arc<dyn Observer>>,
    /// The whole handshake (greeting to NBD_OPT_GO, TLS included) must finish within
    /// this time, or the connection is closed and its handshake slot freed.
    pub handshake_timeout: Duration,
    /// After the handshake: once the first byte of a request has arrived, the rest of its
    /// header must arrive within this time, and a write's payload within this time once
    /// the connection's budget has room for it; otherwise the connection is closed. A
    /// client stalled in the middle of a request holds nothing but its own connection,
    /// and not for longer than this. Zero: no limit.
    pub read_timeout: Duration,
    /// After the handshake: a connection with no request in flight for this long is
    /// closed. Zero (the default): idle connections stay open (block devices and virtual
    /// machines keep theirs for as long as they run) until their slot is needed.
    pub idle_timeout: Duration,
    /// READ and WRITE payload bytes in flight at once on one connection (received and not
    /// yet written to the export, or read and not yet sent): the connection's reader waits
    /// for its share before a buffer is allocated, so memory stays below
    /// `max_connections` times this however clients pipeline. Each connection has its
    /// own: a client that stops sending a payload or reading its replies waits alone. A
    /// request larger than the whole budget waits until it is the connection's only one.
    pub connection_budget: usize,
    /// A reply (or handshake message) that cannot be sent within this time ends its
    /// connection: a client that stops reading cannot hold a worker or the shutdown
    /// forever. Zero: no timeout.
    pub write_timeout: Duration,
    /// On shutdown, connections get this long to finish the requests already read and
    /// send their replies; then their sockets are shut both ways (a blocked send fails at
    /// once), the workers finish, and the export is flushed.
    pub shutdown_grace: Duration,
    /// The permission bits of a Unix socket (only the owner may connect by default: the
    /// socket gives whoever connects the volume's plaintext). The umask plays no part.
    pub socket_mode: u32,
    /// Stop serving when the Unix socket is removed or replaced (checked twice a second)
    /// and no client past its handshake is left: no new client can reach the server, and
    /// the ones connected are served until they leave. Off for a server whose export is also
    /// used another way (a FUSE mount, a loop device), which must not end with the
    /// socket. A server with more than one listener
    /// ([`Server::also_bind`](crate::Server::also_bind)) is still reached through the
    /// others: it does not stop.
    pub stop_when_socket_gone: bool,
    /// Stop serving once the last connection past its handshake has closed (GELI's
    /// detach on last close, `geli attach -d`): the server then shuts down as on
    /// [`ShutdownHandle::shutdown`](crate::ShutdownHandle::shutdown). A connection that
    /// closes before its handshake is over (a port scan, a client refused by TLS, one
    /// that asks for the export list only) does not count.
    pub exit_after_last: bool,
    /// TLS through NBD_OPT_STARTTLS, allowed or required (see [`ServerTls`]); `None`: no
    /// TLS, STARTTLS is refused as unsupported.
    pub tls: Option<ServerTls>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            export_name: String::new(),
            description: None,
            workers_per_connection: 4,
            max_payload: 32 << 20,
            max_connections: 64,
            max_connections_per_export: 0,
            max_handshakes: 64,
            log: true,
            observer: None,
            handshake_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::ZERO,
            connection_budget: 64 << 20,
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(5),
            socket_mode: 0o600,
            stop_when_socket_gone: true,
            exit_after_last: false,
            tls: None,
        }
    }
}

impl ServerConfig {
    /// Prints one line on stderr when logging is on.
    pub(crate) fn log(&self, args: fmt::Arguments<'_>) {
        match (&self.observer, self.log) {
            (_, false) => {}
            (Some(o), true) => o.message(args),
            (None, true) => eprintln!("sectorcrypt-nbd: {args}"),
        }
    }
}

/// One connection in its transmission phase, as an [`Observer`] is told of it.
#[derive(Debug, Clone, Copy)]
pub struct Connection<'a> {
    /// The connection's number (the one log lines give).
    pub id: u64,
    /// The export it uses.
    pub export: &'a str,
    /// Who it is.
    pub peer: &'a Peer,
    /// Whether it runs over TLS.
    pub tls: bool,
}

/// What a server tells of its connections, from their own threads (keep it short: a
/// connection waits for it). Every connection [`Observer::connected`] was told of is
/// told [`Observer::disconnected`] once, however it ends.
pub trait Observer: Send + Sync + fmt::Debug {
    /// A log line (without the `sectorcrypt-nbd: ` that stderr gets).
    fn message(&self, line: fmt::Arguments<'_>);
    /// A connection chose its export and starts its transmission phase.
    fn connected(&self, c: &Connection<'_>);
    /// That connection ended: `error` is why, when it was an error (a socket error, a
    /// timeout), `None` when the client left or the server stopped.
    fn disconnected(&self, c: &Connection<'_>, error: Option<&std::io::Error>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_addresses_must_be_loopback() {
        assert!(matches!(Listen::tcp("127.0.0.1:0"), Ok(Listen::Tcp(_))));
        assert!(matches!(Listen::tcp("[::1]:10809"), Ok(Listen::Tcp(_))));
        assert!(matches!(
            Listen::tcp("0.0.0.0:10809"),
            Err(Error::NotLoopback(_))
        ));
        assert!(matches!(
            Listen::tcp("192.168.1.1:10809"),
            Err(Error::NotLoopback(_))
        ));
        assert!(matches!(
            Listen::tcp("localhost"),
            Err(Error::BadAddress(_))
        ));
    }
}
