//! The scrape endpoint: `GET /metrics` answered with the Prometheus text of
//! [`Metrics`], on a TCP or Unix socket (`--metrics 127.0.0.1:9560` or a path).
//!
//! One scraper is served at a time on a thread of its own; each has a few seconds to send
//! its request line and headers (at most 8 KiB) and to take the reply, so a stalled
//! scraper holds up only later scrapes, never the data path. Only `GET` and `HEAD` of
//! `/metrics` are answered with the metrics; other paths get 404, other methods 405.

use crate::metrics::Metrics;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a scraper has to send its request, and to take the reply.
const DEADLINE: Duration = Duration::from_secs(5);

/// The most request bytes read (request line and headers).
const MAX_REQUEST: usize = 8 << 10;

/// Where to listen: a TCP address or a Unix socket's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `HOST:PORT` (IPv6 in brackets).
    Tcp(SocketAddr),
    /// A Unix socket's path (anything with a `/`).
    Unix(PathBuf),
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Endpoint, String> {
        if s.contains('/') {
            return Ok(Endpoint::Unix(PathBuf::from(s)));
        }
        s.parse().map(Endpoint::Tcp).map_err(|_| {
            format!("{s:?} is neither HOST:PORT (like 127.0.0.1:9560) nor a socket path")
        })
    }
}

/// A running endpoint; it serves until the process ends.
#[derive(Debug)]
pub struct MetricsServer {
    /// Where it listens (the port chosen when 0 was asked for).
    pub endpoint: Endpoint,
    _thread: JoinHandle<()>,
}

impl MetricsServer {
    /// Listens on `at` and serves `metrics` from a thread of its own. A Unix socket's
    /// path must not exist yet.
    pub fn spawn(at: &Endpoint, metrics: Arc<Metrics>) -> io::Result<MetricsServer> {
        let (endpoint, thread) = match at {
            Endpoint::Tcp(a) => {
                let l = TcpListener::bind(a)?;
                let endpoint = Endpoint::Tcp(l.local_addr()?);
                let t = spawn(move || loop {
                    if let Ok((s, _)) = l.accept() {
                        let _ = s.set_read_timeout(Some(DEADLINE));
                        let _ = s.set_write_timeout(Some(DEADLINE));
                        if let Ok(true) = answer(&s, &metrics) {
                            let _ = s.shutdown(std::net::Shutdown::Write);
                            drain(&s);
                        }
                    }
                })?;
                (endpoint, t)
            }
            Endpoint::Unix(p) => {
                let l = UnixListener::bind(p)?;
                let t = spawn(move || loop {
                    if let Ok((s, _)) = l.accept() {
                        let _ = s.set_read_timeout(Some(DEADLINE));
                        let _ = s.set_write_timeout(Some(DEADLINE));
                        if let Ok(true) = answer(&s, &metrics) {
                            let _ = s.shutdown(std::net::Shutdown::Write);
                            drain(&s);
                        }
                    }
                })?;
                (at.clone(), t)
            }
        };
        Ok(MetricsServer {
            endpoint,
            _thread: thread,
        })
    }
}

fn spawn(f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("metrics".into()).spawn(f)
}

/// Reads the rest of a request that was answered before it was read whole (at most 64
/// KiB, within the deadline): closing a socket with unread input would reset the
/// connection and lose the answer.
fn drain(mut s: impl Read) {
    let mut buf = [0u8; 4096];
    let mut left: usize = 64 << 10;
    while left > 0 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// Reads one request from `s` and answers it; true when the request was not read whole.
fn answer(mut s: impl Read + Write, metrics: &Metrics) -> io::Result<bool> {
    let mut req = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && !req.windows(2).any(|w| w == b"\n\n") {
        if req.len() >= MAX_REQUEST {
            let too_long = "431 Request Header Fields Too Large";
            reply(&mut s, too_long, "text/plain", "too long\n", true)?;
            return Ok(true);
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(false);
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let answered = match (method, path) {
        ("GET" | "HEAD", "/metrics") => reply(
            &mut s,
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            &metrics.render(),
            method == "GET",
        ),
        ("GET" | "HEAD", _) => reply(
            &mut s,
            "404 Not Found",
            "text/plain",
            "try /metrics\n",
            true,
        ),
        _ => reply(
            &mut s,
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n",
            true,
        ),
    };
    answered.map(|()| false)
}

fn reply(
    s: &mut impl Write,
    status: &str,
    kind: &str,
    body: &str,
    with_body: bool,
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    if with_body {
        s.write_all(body.as_bytes())?;
    }
    s.flush()
}
