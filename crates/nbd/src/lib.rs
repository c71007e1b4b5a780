//! An NBD server (the NBD protocol's fixed newstyle handshake and transmission phase) over
//! any [`Export`], or over a table of them ([`Exports`]) that says which client may see and
//! use which. This crate knows nothing about encryption.
//!
//! The protocol and its state are kept apart from the socket code, in modules that touch
//! no socket and are unit-tested without one:
//! - [`proto`]: the wire constants and the codec of the messages (from the NBD project's
//!   `doc/proto.md`);
//! - `exports`: the table of exports the handshake consults ([`Exports`], [`ExportTable`]),
//!   what the server knows of a client ([`Peer`]: Unix credentials, TCP address, TLS
//!   certificate subject) and who may see and use an export ([`Access`]);
//! - `export_info`: what a client is told about the export it chose (size, transmission
//!   flags, block sizes, name, description);
//! - `request`: what a transmission request does, or why it is refused, from its header
//!   and the export's description;
//! - `budget`: a connection's budget of payload bytes in flight;
//! - `writeback`: an export's flushes, one at a time, a failure sticking;
//! - `served`: the exports in use, each with its own writeback, flushed when the server
//!   stops or, once their table has let them go, when their last client leaves;
//! - plain types: `config` ([`ServerConfig`], [`Listen`], and the [`Observer`] a server
//!   tells of each connection's transmission phase and its end, and gives its log lines),
//!   `export` ([`Export`]), `error` ([`Error`]).
//!
//! The socket code sits on top:
//! - `stream`: a Unix or loopback TCP socket behind one type, and the handshake deadline;
//! - `activity`: which connections are busy or idle, and the listener's tables of
//!   connections in their handshake (a bounded pool of their own) and past it; a
//!   connection takes an open slot, closing the one idle longest to make room, only once
//!   its handshake is over;
//! - `incoming`: request headers and payloads off the socket, under the read and idle
//!   timeouts;
//! - `handshake`: option haggling (GO, INFO, EXPORT_NAME, LIST, ABORT, and STARTTLS when
//!   the server has TLS, allowed or required; the rest unsupported) over the exports the
//!   table gives the client: a refused export looks exactly like an unknown one;
//! - [`tls`]: TLS with rustls (X.509): the server's and a client's configuration from a
//!   certificates directory, and a session split between a reading thread and writing
//!   threads, which the transmission phase uses in place of the socket;
//! - `transmission`: one reader thread per connection parses requests and hands them to a
//!   small worker pool; replies are serialized by a mutex on the socket and may leave in any
//!   order (the client matches them by cookie);
//! - [`Server`]: binds a Unix socket or a loopback TCP port for one export
//!   ([`Server::bind`]) or a table ([`Server::bind_exports`]), accepts connections, and on
//!   [`ShutdownHandle::shutdown`] stops reading requests, lets the ones in flight finish,
//!   and flushes the exports; [`ExportsHandle`] closes the exports a changing table no
//!   longer offers and nobody uses; [`serve_connection`] serves one socket already connected.
//!
//! Imports point one way, down that list: `server` uses `handshake`, `tls` and
//! `transmission`, which use `incoming`, `activity`, `stream`, `tls` and the protocol
//! state (`exports`, `export_info`, `served` among them), which uses `proto`; `tls` uses no
//! other module of the crate; no module imports `server`.
//!
//! [`client`] is the other end: an NBD client over the same `proto` and `stream` (URIs,
//! structured replies, multi-conn, many requests in flight, timeouts, reconnection), for
//! volumes that live on an NBD export. It imports no server module.
//!
//! Simple replies only: structured replies bring nothing here (no sparse reads, no block
//! status), and every NBD client falls back to simple replies when the option is refused.
#![forbid(unsafe_code)]

mod activity;
mod budget;
pub mod client;
mod config;
mod error;
mod export;
mod export_info;
mod exports;
mod handshake;
mod incoming;
mod pool;
pub mod proto;
mod request;
mod served;
mod server;
mod stream;
pub mod tls;
mod transmission;
mod writeback;

pub use config::{Connection, Listen, Observer, ServerConfig};
pub use error::Error;
pub use export::{Export, WriteDone};
pub use exports::{Access, Credentials, ExportTable, Exports, Found, Listing, Peer, TableError};
pub use server::{serve_connection, Adopted, ExportsHandle, Server, ShutdownHandle};
