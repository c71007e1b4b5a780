//! What the caller chooses: where to listen ([`Listen`]) and how the server behaves
//! ([`ServerConfig`]: the export's name and description, limits, timeouts, logging).
//!
//! Plain data with defaults; nothing here binds or reads a socket. Addresses are checked
//! when parsed: the server serves loopback and Unix sockets only.

use crate::error::Error;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
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
    /// The export's name; clients asking for "" get it too (the default export).
    pub export_name: String,
    /// Shown by NBD_OPT_LIST and NBD_INFO_DESCRIPTION.
    pub description: Option<String>,
    /// Worker threads per connection (requests of one connection run this many at once).
    pub workers_per_connection: usize,
    /// The largest READ or WRITE payload accepted (advertised as the maximum block size).
    pub max_payload: u32,
    /// Connections served at once; more are closed at once (each costs a reader and the
    /// workers' threads).
    pub max_connections: usize,
    /// Log connections and errors on stderr.
    pub log: bool,
    /// The whole handshake (greeting to NBD_OPT_GO) must finish within this time, or the
    /// connection is closed and its slot freed: idle or slow connections in the
    /// handshake count against `max_connections`, so without a bound they could lock
    /// every other client out. Established connections may idle without limit.
    pub handshake_timeout: Duration,
    /// READ and WRITE payload bytes in flight at once over all connections (received
    /// and not yet written to the export, or read and not yet sent): a request waits
    /// for its share before its buffer is allocated, so memory stays bounded however
    /// many clients pipeline large requests. A request larger than the whole budget
    /// waits until it is the only one in flight.
    pub payload_budget: usize,
    /// A reply (or handshake message) that cannot be sent within this time ends its
    /// connection: a client that stops reading cannot hold a worker, its payload budget
    /// or the shutdown forever. Zero: no timeout.
    pub write_timeout: Duration,
    /// On shutdown, connections get this long to finish the requests already read and
    /// send their replies; then their sockets are shut both ways (a blocked send fails at
    /// once), the workers finish, and the export is flushed.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            export_name: String::new(),
            description: None,
            workers_per_connection: 4,
            max_payload: 32 << 20,
            max_connections: 64,
            log: true,
            handshake_timeout: Duration::from_secs(10),
            payload_budget: 256 << 20,
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

impl ServerConfig {
    /// Prints one line on stderr when logging is on.
    pub(crate) fn log(&self, args: fmt::Arguments<'_>) {
        if self.log {
            eprintln!("sectorcrypt-nbd: {args}");
        }
    }
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
