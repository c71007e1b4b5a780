//! Opening one connection: the socket, then the fixed newstyle handshake as a client:
//! NBD_OPT_STARTTLS first for `nbds://` (a refusal is an error: never plaintext instead),
//! the TLS handshake, then over TLS (or in the clear for `nbd://`)
//! NBD_OPT_STRUCTURED_REPLY (when wanted; a refusal leaves simple replies), then
//! NBD_OPT_GO asking for NBD_INFO_BLOCK_SIZE, falling back to NBD_OPT_EXPORT_NAME on a
//! server that does not know NBD_OPT_GO. A server that requires TLS of an `nbd://`
//! client is told apart (NBD_REP_ERR_TLS_REQD) and named.
//!
//! The connection timeout bounds the whole of it, not each read: connecting, the TLS
//! handshake and the NBD options together must finish within it. A server that trickles
//! its handshake a byte at a time is cut off at the deadline as one that says nothing:
//! a watchdog thread shuts the socket down then, which ends whatever read or write is
//! blocked on it (in this code or in the TLS session's), and the error says which
//! deadline passed. (Resolving a host name is the one step it cannot bound: the system's
//! resolver has its own timeouts.)

use super::secure::{Duplex, Link, Reader, TlsSetup, Writer};
use super::uri::{Endpoint, NbdUri};
use crate::proto::*;
use crate::stream::{Stream, SEND_BUFFER};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the handshake learnt about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportFacts {
    /// Size in bytes.
    pub size: u64,
    /// The transmission flags (`FLAG_*`).
    pub flags: u16,
    /// The smallest request size and alignment the server takes (1: any).
    pub min_block: u32,
    /// The size requests should be multiples of.
    pub preferred_block: u32,
    /// The largest READ or WRITE payload the server takes.
    pub max_block: u32,
    /// Whether structured replies were negotiated.
    pub structured: bool,
}

/// The largest payload sent when the server names no maximum (the specification's
/// advice: 32 MiB), and the most this client sends in one request in any case.
pub const DEFAULT_MAX_BLOCK: u32 = 32 << 20;

impl ExportFacts {
    fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    /// Writes are refused.
    pub fn read_only(&self) -> bool {
        self.has(FLAG_READ_ONLY)
    }
    /// NBD_CMD_FLUSH may be sent.
    pub fn can_flush(&self) -> bool {
        self.has(FLAG_SEND_FLUSH)
    }
    /// NBD_CMD_FLAG_FUA may be sent.
    pub fn can_fua(&self) -> bool {
        self.has(FLAG_SEND_FUA)
    }
    /// NBD_CMD_TRIM may be sent.
    pub fn can_trim(&self) -> bool {
        self.has(FLAG_SEND_TRIM)
    }
    /// NBD_CMD_WRITE_ZEROES may be sent.
    pub fn can_zero(&self) -> bool {
        self.has(FLAG_SEND_WRITE_ZEROES)
    }
    /// Several connections may be opened (a flush on one covers all).
    pub fn can_multi_conn(&self) -> bool {
        self.has(FLAG_CAN_MULTI_CONN)
    }
}

/// Shuts a socket down when a deadline passes, unless it is disarmed (dropped) first.
struct Watchdog {
    /// Dropped to disarm.
    stop: Option<mpsc::Sender<()>>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    fn arm(sock: Stream, deadline: Instant) -> io::Result<Watchdog> {
        let (stop, rx) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&fired);
        let thread = std::thread::Builder::new()
            .name("nbd-client-handshake".into())
            .spawn(move || {
                let left = deadline.saturating_duration_since(Instant::now());
                if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(left) {
                    f.store(true, Ordering::Release);
                    sock.shutdown(Shutdown::Both);
                }
            })?;
        Ok(Watchdog {
            stop: Some(stop),
            fired,
            thread: Some(thread),
        })
    }

    /// Disarms it; whether it fired before (the socket is then shut down).
    fn disarm(mut self) -> bool {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.fired.load(Ordering::Acquire)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Connects to `uri`'s endpoint and negotiates its export, over TLS when `tls` is given,
/// all within `timeout`; the socket comes back with no read timeout.
pub(crate) fn open(
    uri: &NbdUri,
    timeout: Option<Duration>,
    structured: bool,
    tls: Option<&TlsSetup>,
) -> io::Result<(Link, ExportFacts)> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let late = || {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the server did not finish the handshake (connection, TLS and NBD \
                 negotiation) within {} s",
                timeout.unwrap_or_default().as_secs_f64()
            ),
        )
    };
    let s = connect(&uri.endpoint, deadline).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => late(),
        _ => e,
    })?;
    let watchdog = match deadline {
        Some(d) => Some(Watchdog::arm(s.try_clone()?, d)?),
        None => None,
    };
    let r = negotiate(s, timeout, uri.export.as_bytes(), structured, tls);
    match (r, watchdog.map(Watchdog::disarm)) {
        (_, Some(true)) => Err(late()),
        (r, _) => r,
    }
}

/// The handshake on a connected socket.
fn negotiate(
    mut s: Stream,
    timeout: Option<Duration>,
    export: &[u8],
    structured: bool,
    tls: Option<&TlsSetup>,
) -> io::Result<(Link, ExportFacts)> {
    // Each read and write is bounded too (the watchdog bounds them together).
    s.set_read_timeout(timeout)?;
    s.set_write_timeout(timeout)?;
    let no_zeroes = greet(&mut s)?;
    let control = s.try_clone()?;
    let (mut reader, mut writer) = match tls {
        None => (Reader::Plain(s.try_clone()?), Writer::Plain(s)),
        Some(t) => {
            starttls(&mut s)?;
            let (r, w) = t
                .tls
                .connect(t.server_name.as_deref(), s.try_clone()?, s)
                .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
            (Reader::Tls(r), Writer::Tls(w))
        }
    };
    let mut duplex = Duplex {
        reader: &mut reader,
        writer: &mut writer,
    };
    let facts = options(&mut duplex, export, no_zeroes, structured)?;
    control.set_read_timeout(None)?;
    control.widen_send_buffer(SEND_BUFFER);
    Ok((
        Link {
            control,
            reader,
            writer,
        },
        facts,
    ))
}

/// The socket, connected before `deadline`.
fn connect(endpoint: &Endpoint, deadline: Option<Instant>) -> io::Result<Stream> {
    match endpoint {
        Endpoint::Unix(path) => Ok(Stream::Unix(connect_unix(path, deadline)?)),
        Endpoint::Tcp { host, port } => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"));
            for addr in (host.as_str(), *port).to_socket_addrs()? {
                let s = match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
                    Some(t) if t.is_zero() => Err(io::ErrorKind::TimedOut.into()),
                    Some(t) => TcpStream::connect_timeout(&addr, t),
                    None => TcpStream::connect(addr),
                };
                match s {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        return Ok(Stream::Tcp(s));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// A Unix socket connected before `deadline`. When the listener's backlog is full, a
/// connect waits for room with no end of its own (a server that stopped accepting would
/// hold the client forever); the kernel bounds that wait by the socket's send timeout,
/// so that timeout is set to the time left before connecting, and cleared after. A
/// path starting with NUL names an abstract socket.
fn connect_unix(path: &std::path::Path, deadline: Option<Instant>) -> io::Result<UnixStream> {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
    use std::os::fd::AsRawFd as _;
    use std::os::unix::ffi::OsStrExt as _;
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let left = nix::sys::time::TimeVal::new(
            left.as_secs().try_into().unwrap_or(i64::MAX),
            // At least a microsecond: a zero timeout would mean none.
            left.subsec_micros().max(1).into(),
        );
        socket::setsockopt(&fd, sockopt::SendTimeout, &left)?;
    }
    let bytes = path.as_os_str().as_bytes();
    let addr = match bytes.strip_prefix(b"\0") {
        Some(name) => UnixAddr::new_abstract(name)?,
        None => UnixAddr::new(path)?,
    };
    // A full backlog still full at the deadline gives EAGAIN (WouldBlock).
    socket::connect(fd.as_raw_fd(), &addr)?;
    let s = UnixStream::from(fd);
    s.set_write_timeout(None)?;
    Ok(s)
}

fn protocol(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_array<const N: usize>(s: &mut impl Read) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    s.read_exact(&mut b)?;
    Ok(b)
}

/// An option reply's header and data (data of at most 64 KiB: nothing this client asks
/// for is longer, and a server cannot make it allocate more).
fn option_reply(s: &mut impl Read, option: u32) -> io::Result<(u32, Vec<u8>)> {
    let r = OptionReply::decode(&read_array(s)?)
        .map_err(|m| protocol(format!("bad option reply magic {m:#x}")))?;
    if r.option != option {
        return Err(protocol(format!(
            "a reply to option {} while negotiating option {option}",
            r.option
        )));
    }
    if r.kind == REP_ERR_TLS_REQD {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the server requires TLS: use an nbds:// (or nbds+unix://) URI",
        ));
    }
    if r.len > 64 << 10 {
        return Err(protocol(format!("an option reply of {} bytes", r.len)));
    }
    let mut data = vec![0u8; r.len as usize];
    s.read_exact(&mut data)?;
    Ok((r.kind, data))
}

/// The server's words in an error reply, for the message.
fn refusal(kind: u32, data: &[u8]) -> String {
    let what = match kind {
        REP_ERR_UNSUP => "unsupported",
        REP_ERR_POLICY => "refused by policy",
        REP_ERR_INVALID => "invalid",
        REP_ERR_UNKNOWN => "no such export",
        REP_ERR_TOO_BIG => "too big",
        _ => "error",
    };
    let text = String::from_utf8_lossy(data);
    if text.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {text}")
    }
}

fn send_option(s: &mut impl Write, option: u32, data: &[u8]) -> io::Result<()> {
    let mut msg = encode_option_request(option, data.len() as u32).to_vec();
    msg.extend_from_slice(data);
    s.write_all(&msg)
}

/// The server's greeting and the client's flags; whether the server omits the zeroes
/// after NBD_OPT_EXPORT_NAME's reply.
fn greet(s: &mut Stream) -> io::Result<bool> {
    let flags = decode_greeting(&read_array(s)?)
        .ok_or_else(|| protocol("not a newstyle NBD server (bad greeting)"))?;
    if flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(protocol("the server does not speak fixed newstyle NBD"));
    }
    let no_zeroes = flags & FLAG_NO_ZEROES != 0;
    let mut client = FLAG_C_FIXED_NEWSTYLE;
    if no_zeroes {
        client |= FLAG_C_NO_ZEROES;
    }
    s.write_all(&client.to_be_bytes())?;
    Ok(no_zeroes)
}

/// NBD_OPT_STARTTLS: the server's acknowledgement, or an error that says plaintext is not
/// an option.
fn starttls(s: &mut Stream) -> io::Result<()> {
    send_option(s, OPT_STARTTLS, &[])?;
    let (kind, data) = option_reply(s, OPT_STARTTLS)?;
    match kind {
        REP_ACK => Ok(()),
        k if k & REP_FLAG_ERROR != 0 => Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!(
                "the server refused NBD_OPT_STARTTLS ({}): it does not offer TLS, and an \
                 nbds:// URI is never used in plaintext (nbd:// is the plain scheme)",
                refusal(k, &data)
            ),
        )),
        k => Err(protocol(format!(
            "unexpected reply {k} to NBD_OPT_STARTTLS"
        ))),
    }
}

/// The options after the greeting (and TLS): structured replies, then the export.
fn options<S: Read + Write>(
    s: &mut S,
    name: &[u8],
    no_zeroes: bool,
    structured: bool,
) -> io::Result<ExportFacts> {
    let mut sr = false;
    if structured {
        send_option(s, OPT_STRUCTURED_REPLY, &[])?;
        let (kind, _) = option_reply(s, OPT_STRUCTURED_REPLY)?;
        sr = kind == REP_ACK;
    }
    send_option(s, OPT_GO, &encode_info_request(name, &[INFO_BLOCK_SIZE]))?;
    let mut export: Option<(u64, u16)> = None;
    let mut sizes = None;
    loop {
        let (kind, data) = option_reply(s, OPT_GO)?;
        match kind {
            REP_INFO => match (data.get(..2), data.len()) {
                (Some([0, 0]), 12) => {
                    export = Some(decode_size_and_flags(data[2..].try_into().expect("10")))
                }
                (Some([0, 3]), 14) => {
                    sizes = Some(decode_block_sizes(data[2..].try_into().expect("12")))
                }
                _ => {} // NAME, DESCRIPTION, or unknown: not needed.
            },
            REP_ACK => break,
            REP_ERR_UNSUP => return export_name(s, name, no_zeroes, sr),
            k if k & REP_FLAG_ERROR != 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "export {:?}: {}",
                        String::from_utf8_lossy(name),
                        refusal(k, &data)
                    ),
                ))
            }
            k => return Err(protocol(format!("unexpected reply {k} to NBD_OPT_GO"))),
        }
    }
    let (size, flags) =
        export.ok_or_else(|| protocol("NBD_OPT_GO ended without NBD_INFO_EXPORT"))?;
    facts(size, flags, sizes, sr)
}

/// The old way in, for servers without NBD_OPT_GO: no block sizes, no error reply (a
/// server that does not know the name closes the connection).
fn export_name(
    s: &mut (impl Read + Write),
    name: &[u8],
    no_zeroes: bool,
    sr: bool,
) -> io::Result<ExportFacts> {
    send_option(s, OPT_EXPORT_NAME, name)?;
    let (size, flags) = decode_size_and_flags(&read_array(s)?);
    if !no_zeroes {
        let _: [u8; 124] = read_array(s)?;
    }
    facts(size, flags, None, sr)
}

fn facts(
    size: u64,
    flags: u16,
    sizes: Option<(u32, u32, u32)>,
    sr: bool,
) -> io::Result<ExportFacts> {
    let (min, preferred, max) = sizes.unwrap_or((1, 4096, DEFAULT_MAX_BLOCK));
    // The specification's constraints: powers of two, min <= preferred, max a multiple
    // of min; anything else is not worth guessing about.
    let sane = min.is_power_of_two()
        && min <= 65536
        && preferred.is_power_of_two()
        && preferred >= min
        && max >= min
        && (max.is_multiple_of(min) || max == u32::MAX);
    if !sane {
        return Err(protocol(format!(
            "nonsensical block sizes: minimum {min}, preferred {preferred}, maximum {max}"
        )));
    }
    Ok(ExportFacts {
        size,
        flags,
        min_block: min,
        preferred_block: preferred,
        max_block: (max.min(DEFAULT_MAX_BLOCK) / min) * min,
        structured: sr,
    })
}
