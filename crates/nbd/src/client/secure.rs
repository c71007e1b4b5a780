//! TLS for `nbds://` and `nbds+unix://`: what the URI's TLS parameters mean
//! ([`TlsSetup::from_uri`]), and a connection's two halves, plain or TLS ([`Reader`],
//! [`Writer`], together a [`Link`]).
//!
//! The parameters, as libnbd reads them:
//! - `tls-certificates=DIR`: `ca-cert.pem`, and `client-cert.pem` with `client-key.pem`
//!   when the server asks for a client certificate. Without it, `$HOME/.pki/libnbd` when
//!   that directory exists, else `/etc/pki/libnbd`.
//! - `tls-verify-peer=false` (or `0`, `no`, `off`): the server's certificate is not
//!   checked at all (encrypted, not authenticated). By default its chain is checked, and
//!   its name too when there is one: `tls-hostname=`, else the TCP host. A Unix socket
//!   without `tls-hostname` has no name to check, and the chain alone is checked.
//! - `tls-type=x509` is the only kind supported; `psk` (pre-shared keys) is refused.
//!
//! The plain path stays as it was: a [`Reader::Plain`] and [`Writer::Plain`] are the
//! socket itself, with no buffer or copy between (a write of a header and its payload is
//! still one vectored system call).

use super::uri::{Endpoint, NbdUri};
use crate::stream::Stream;
use crate::tls::{ClientTls, TlsReader, TlsWriter};
use std::io::{self, IoSlice, Read, Write};
use std::path::PathBuf;

/// How `nbds://` connections are made: the configuration (read once, used by every
/// connection and reconnection) and the name the server's certificate must hold.
#[derive(Debug, Clone)]
pub(crate) struct TlsSetup {
    pub(crate) tls: ClientTls,
    pub(crate) server_name: Option<String>,
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// libnbd's default certificates directory.
fn default_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".pki/libnbd"));
    match home {
        Some(d) if d.is_dir() => d,
        _ => PathBuf::from("/etc/pki/libnbd"),
    }
}

impl TlsSetup {
    /// The TLS `uri` asks for: `None` for `nbd://` and `nbd+unix://`.
    pub(crate) fn from_uri(uri: &NbdUri) -> io::Result<Option<TlsSetup>> {
        if !uri.tls {
            return Ok(None);
        }
        match uri.tls_param("tls-type") {
            None | Some("x509") => {}
            Some(t) => {
                return Err(bad(format!(
                    "tls-type={t}: only X.509 certificates (tls-type=x509) are supported, \
                     not pre-shared keys (psk)"
                )))
            }
        }
        let verify = match uri.tls_param("tls-verify-peer") {
            None => true,
            Some("true" | "1" | "yes" | "on") => true,
            Some("false" | "0" | "no" | "off") => false,
            Some(v) => return Err(bad(format!("tls-verify-peer={v}: expected true or false"))),
        };
        let dir = uri
            .tls_param("tls-certificates")
            .map_or_else(default_dir, PathBuf::from);
        let tls = if verify {
            ClientTls::from_dir(&dir)
        } else {
            ClientTls::unverified(&dir)
        }
        .map_err(|e| bad(format!("TLS: {e}")))?;
        let server_name = match (uri.tls_param("tls-hostname"), &uri.endpoint) {
            (Some(h), _) => Some(h.to_string()),
            (None, Endpoint::Tcp { host, .. }) => Some(host.clone()),
            (None, Endpoint::Unix(_)) => None,
        };
        Ok(Some(TlsSetup { tls, server_name }))
    }
}

/// A negotiated connection: a handle to shut the socket down from any thread, and its
/// reading and writing halves.
pub(crate) struct Link {
    pub(crate) control: Stream,
    pub(crate) reader: Reader,
    pub(crate) writer: Writer,
}

/// The reading half.
pub(crate) enum Reader {
    Plain(Stream),
    Tls(TlsReader<Stream>),
}

/// The writing half.
pub(crate) enum Writer {
    Plain(Stream),
    Tls(TlsWriter<Stream>),
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Reader::Plain(s) => s.read(buf),
            Reader::Tls(s) => s.read(buf),
        }
    }
}

impl Writer {
    /// Writes `a` then `b`, together: one vectored system call where the socket takes it
    /// (plain), or records sealed from each in turn (TLS; the caller holds the writer, so
    /// no other request comes between).
    pub(crate) fn write_both(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        match self {
            Writer::Plain(s) => write_vectored_all(s, a, b),
            Writer::Tls(s) => {
                s.write_all(a)?;
                s.write_all(b)
            }
        }
    }

    /// Ends the session cleanly (a TLS close_notify); best effort.
    pub(crate) fn close(&self) {
        if let Writer::Tls(s) = self {
            s.close();
        }
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Writer::Plain(s) => s.write(buf),
            Writer::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Writer::Plain(s) => s.flush(),
            Writer::Tls(s) => s.flush(),
        }
    }
}

/// Writes `a` then `b` in as few system calls as the socket allows.
fn write_vectored_all(w: &mut Stream, a: &[u8], b: &[u8]) -> io::Result<()> {
    let mut bufs = [IoSlice::new(a), IoSlice::new(b)];
    let mut bufs = &mut bufs[..];
    while !bufs.is_empty() && bufs.iter().any(|s| !s.is_empty()) {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The two halves as one stream, for the rest of the handshake after STARTTLS.
pub(crate) struct Duplex<'a> {
    pub(crate) reader: &'a mut Reader,
    pub(crate) writer: &'a mut Writer,
}

impl Read for Duplex<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for Duplex<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}
