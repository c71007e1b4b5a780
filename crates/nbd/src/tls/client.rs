//! A client's side, for `nbds://` URIs: its TLS configuration from a certificates
//! directory under libnbd's file names ([`ClientTls::from_dir`]: `ca-cert.pem`, and
//! `client-cert.pem` with `client-key.pem` when the server asks for a certificate), and
//! the TLS handshake after the server acknowledged NBD_OPT_STARTTLS ([`ClientTls::connect`]),
//! which gives the two halves of the session ([`super::split`]).
//!
//! The server's certificate always has to chain to `ca-cert.pem`. Its name is checked
//! when the caller has one (the URI's host, or libnbd's `tls-hostname`); a Unix socket
//! has none, and then the chain alone is checked (libnbd checks nothing there by default).
//! [`ClientTls::unverified`] is libnbd's `tls-verify-peer=false`: any certificate is taken
//! (the session is encrypted, but the server is not authenticated).

use super::pem::{self, TlsError, CLIENT_CERT, CLIENT_KEY};
use super::session::{split, TlsReader, TlsWriter};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// A client's TLS configuration.
#[derive(Clone)]
pub struct ClientTls {
    /// Checks the chain and the server's name.
    named: Arc<rustls::ClientConfig>,
    /// Checks the chain only (no name to check it against).
    unnamed: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field(
                "client_certificate",
                &self.named.client_auth_cert_resolver.has_certs(),
            )
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Reads `dir/ca-cert.pem`, and `dir/client-cert.pem` with `dir/client-key.pem` when
    /// both are there (one without the other is an error).
    pub fn from_dir(dir: &Path) -> Result<ClientTls, TlsError> {
        Self::build(dir, Some(Arc::new(pem::roots(dir)?)))
    }

    /// Takes any server certificate, checking neither its chain nor its name; reads only
    /// the client's certificate and key from `dir`, when both are there.
    pub fn unverified(dir: &Path) -> Result<ClientTls, TlsError> {
        Self::build(dir, None)
    }

    /// The configurations; `roots` `None`: no check of the server's certificate.
    fn build(dir: &Path, roots: Option<Arc<RootCertStore>>) -> Result<ClientTls, TlsError> {
        let pair = pem::optional_pair(dir, CLIENT_CERT, CLIENT_KEY)?;
        let provider = super::provider();
        let build = |verifier: Arc<dyn ServerCertVerifier>| {
            let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::Rejected(dir.to_path_buf(), e.to_string()))?
                .dangerous()
                .with_custom_certificate_verifier(verifier);
            match &pair {
                Some((chain, key)) => builder
                    .with_client_auth_cert(chain.clone(), key.clone_key())
                    .map_err(|e| TlsError::Rejected(dir.join(CLIENT_KEY), e.to_string())),
                None => Ok(builder.with_no_client_auth()),
            }
        };
        let unnamed = Arc::new(ChainOnly {
            roots: roots.clone(),
            provider: provider.clone(),
        });
        let named: Arc<dyn ServerCertVerifier> = match roots {
            Some(roots) => {
                rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| TlsError::Rejected(dir.join(pem::CA_CERT), e.to_string()))?
            }
            None => unnamed.clone(),
        };
        Ok(ClientTls {
            named: Arc::new(build(named)?),
            unnamed: Arc::new(build(unnamed)?),
        })
    }

    /// Runs the TLS handshake on `read` (after the server's NBD_REP_ACK to
    /// NBD_OPT_STARTTLS) and splits the session; `read` and `write` are two handles on
    /// the same socket. `server_name` (a DNS name or an IP address) is checked against the
    /// server's certificate; `None` checks the chain only.
    pub fn connect<S: Read + Write>(
        &self,
        server_name: Option<&str>,
        mut read: S,
        write: S,
    ) -> io::Result<(TlsReader<S>, TlsWriter<S>)> {
        let (config, name) = match server_name {
            Some(n) => (
                self.named.clone(),
                ServerName::try_from(n.to_string()).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{n:?} is not a DNS name or an IP address"),
                    )
                })?,
            ),
            // Sent as SNI only; the unnamed verifier ignores it.
            None => (
                self.unnamed.clone(),
                ServerName::try_from("localhost").expect("a valid name"),
            ),
        };
        let mut conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        super::handshake(&mut conn, &mut read)?;
        Ok(split(rustls::Connection::Client(conn), read, write))
    }
}

/// Accepts a server certificate that chains to the roots, whatever names it holds; with
/// no roots, any certificate (its handshake signatures are still checked).
#[derive(Debug)]
struct ChainOnly {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
