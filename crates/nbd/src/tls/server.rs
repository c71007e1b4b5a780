//! The server's side: its TLS configuration from a certificates directory
//! ([`ServerTls::from_dir`], nbdkit's file names), whether TLS is required, and the TLS
//! handshake of one connection after NBD_OPT_STARTTLS was acknowledged ([`accept`]),
//! and the subject of the certificate the client presented ([`client_subject`]).

use super::pem::{self, TlsError, CA_CERT, SERVER_CERT, SERVER_KEY};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// TLS on the server's connections: the certificate and key it presents, whether it
/// asks for client certificates, and whether a client must upgrade before anything else.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    required: bool,
    verify_peer: bool,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("required", &self.required)
            .field("verify_peer", &self.verify_peer)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads `dir/server-cert.pem` (the certificate chain, the server's own first) and
    /// `dir/server-key.pem`; with `verify_peer`, clients must present a certificate that
    /// chains to `dir/ca-cert.pem`. `required`: a client that does not upgrade gets
    /// NBD_REP_ERR_TLS_REQD for every option (FORCEDTLS); otherwise TLS is the client's
    /// choice (SELECTIVETLS, the export not TLS-only).
    pub fn from_dir(dir: &Path, verify_peer: bool, required: bool) -> Result<Self, TlsError> {
        let chain = pem::certificates(dir, SERVER_CERT)?;
        let key = pem::private_key(dir, SERVER_KEY)?;
        let builder = rustls::ServerConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Rejected(dir.to_path_buf(), e.to_string()))?;
        let builder = if verify_peer {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(pem::roots(dir)?),
                super::provider(),
            )
            .build()
            .map_err(|e| TlsError::Rejected(dir.join(CA_CERT), e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Rejected(dir.join(SERVER_KEY), e.to_string()))?;
        Ok(ServerTls {
            config: Arc::new(config),
            required,
            verify_peer,
        })
    }

    /// A client must upgrade to TLS before any other option.
    pub fn required(&self) -> bool {
        self.required
    }

    /// Clients must present a certificate that chains to the directory's `ca-cert.pem`.
    pub fn verify_peer(&self) -> bool {
        self.verify_peer
    }
}

/// Runs the server's TLS handshake on `sock` (NBD_OPT_STARTTLS was just acknowledged);
/// the caller bounds its time through the socket.
pub(crate) fn accept<S: Read + Write>(
    tls: &ServerTls,
    sock: &mut S,
) -> io::Result<rustls::ServerConnection> {
    let mut conn = rustls::ServerConnection::new(tls.config.clone())
        .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
    super::handshake(&mut conn, sock)?;
    Ok(conn)
}

/// The subject (RFC 4514 form) of the certificate the client of `conn` presented, once
/// its handshake is over: `None` when the server asks for no certificate (no
/// `verify_peer`, so nothing was verified and nothing is taken from it), or when the
/// certificate cannot be read.
pub(crate) fn client_subject(tls: &ServerTls, conn: &rustls::ServerConnection) -> Option<String> {
    if !tls.verify_peer {
        return None;
    }
    let end_entity = conn.peer_certificates()?.first()?;
    super::subject::subject_of(end_entity)
}
