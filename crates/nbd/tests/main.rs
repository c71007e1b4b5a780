//! The NBD server against real clients (nbdinfo, nbdcopy, qemu-io, qemu-img from
//! libnbd-bin and qemu-utils) and against a raw client written here for what no real
//! client sends. Each test runs its own server on a Unix socket in a temporary directory
//! (`support`); a test whose client tool is missing is skipped with a printed reason.
//!
//! One test binary; the topic files are its modules:
//! - `real_clients`: the tools' view of the export, and data through them byte-exact;
//! - `handshake`: option haggling through the raw client;
//! - `transmission`: requests through the raw client: refusals, pipelining, flush, FUA;
//! - `limits`: connection slots, the handshake deadline, the payload budget, the write
//!   timeout;
//! - `fairness`: stalled and idle clients hold up no one else;
//! - `writeback`: a failed flush fails every later flush;
//! - `lifecycle`: listening (Unix socket, loopback TCP) and shutting down;
//! - `client`: the NBD client against nbdkit, this server and a hand-written one;
//! - `client_tls`: the NBD client over TLS (`nbds://`);
//! - `client_deadlines`: the client's deadlines against upstreams that trickle or stall;
//! - `tls`: NBD_OPT_STARTTLS with nbdinfo, nbdcopy, qemu-img and the crate's client side;
//! - `exports`: many exports behind one server, and who may see and use each.

mod support;

mod client;
mod client_deadlines;
mod client_tls;
mod exports;
mod fairness;
mod handshake;
mod lifecycle;
mod limits;
mod real_clients;
mod tls;
mod transmission;
mod writeback;
