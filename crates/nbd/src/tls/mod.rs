//! TLS for NBD (proto.md, "TLS support"), with rustls and X.509 certificates: the
//! server's side of NBD_OPT_STARTTLS ([`ServerTls`]), a client's ([`ClientTls`]), and a
//! session shared by a reading thread and writing threads ([`split`]: [`TlsReader`],
//! [`TlsWriter`]), which is how both sides use a connection in the transmission phase.
//!
//! - `pem`: the certificates directory (nbdkit's, qemu's and libnbd's file names) and its
//!   errors ([`TlsError`]); private keys are wiped after parsing and never quoted;
//! - `server`: the server's configuration and its handshake after STARTTLS;
//! - `client`: a client's configuration and its handshake, for `nbds://`;
//! - `session`: the split session;
//! - `subject`: a verified client certificate's subject as an RFC 4514 string, for
//!   access lists.
//!
//! The cryptography is rustls's `ring` provider; TLS 1.2 and 1.3 (proto.md: "MUST support
//! TLS version 1.2"), rustls's safe defaults otherwise.

mod client;
mod pem;
mod server;
mod session;
mod subject;

pub use client::ClientTls;
pub use pem::TlsError;
pub use server::ServerTls;
pub(crate) use server::{accept, client_subject};
pub use session::{split, TlsReader, TlsWriter};

use rustls::crypto::CryptoProvider;
use std::io::{self, Read, Write};
use std::sync::Arc;

/// The cryptography TLS uses.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Runs a TLS handshake to its end on `sock`, and sends what it leaves queued.
fn handshake<D, S: Read + Write>(
    conn: &mut rustls::ConnectionCommon<D>,
    sock: &mut S,
) -> io::Result<()> {
    while conn.is_handshaking() {
        let (read, written) = conn.complete_io(sock)?;
        if read == 0 && written == 0 && conn.is_handshaking() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the connection during the TLS handshake",
            ));
        }
    }
    while conn.wants_write() {
        conn.write_tls(sock)?;
    }
    Ok(())
}
