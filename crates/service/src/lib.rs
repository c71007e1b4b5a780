//! What a long-running sectorcrypt server needs from its service manager and its
//! operators:
//!
//! - [`notify`]: readiness, status, stopping and watchdog messages to the service
//!   manager (systemd's `sd_notify` datagram protocol on `$NOTIFY_SOCKET`);
//! - [`activation`]: listening sockets handed over by the service manager (systemd's
//!   socket activation: `$LISTEN_PID`, `$LISTEN_FDS`, `$LISTEN_FDNAMES`), each checked to
//!   be a listening stream socket and named;
//! - [`metrics`]: per-export counters and latency histograms kept per thread (no cache
//!   line is shared between threads on the data path), summed and written in
//!   Prometheus' text format only when scraped;
//! - [`http`]: the scrape endpoint, `GET /metrics` on a TCP or Unix socket.
//!
//! `ffi.rs` holds the crate's only `unsafe`: taking ownership of the file descriptors the
//! service manager passed.

pub mod activation;
mod ffi;
pub mod http;
pub mod metrics;
pub mod notify;

/// Reads an environment variable as text (`None` when unset or not UTF-8). The modules
/// take their variables through a lookup function, so tests give their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, for [`Env`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
