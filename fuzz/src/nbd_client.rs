//! The NBD client target: the bytes are what a server sends to the client
//! ([`sectorcrypt_nbd::client::Client`]), handshake and replies alike, served by a fake
//! server on a Unix socket (Linux's abstract namespace: nothing on disk) to a client that
//! connects, negotiates, and runs a fixed session of calls ([`client_session`]: reads,
//! unaligned reads, writes with and without FUA, a flush, a trim, write-zeroes, a read
//! taken by value).
//!
//! The input is the server's byte stream cut in records, each `wait` (u32, big-endian),
//! `len` (u32, big-endian), then `len` bytes (fewer when the input ends); the top bit of
//! the first record's `wait` asks the client for TLS (`nbds+unix://`, the server's
//! certificate unchecked: [`TLS_QUERY`]), so NBD_OPT_STARTTLS's replies and a TLS handshake
//! with what the server sends are reached (a capture's TLS records cannot be replayed: the
//! client's random differs), and is not part of the wait. The server sends
//! a record once the client has sent `wait` bytes in all, so that a reply is not there
//! before its request (the client would rightly refuse a reply to a cookie not in
//! flight). A wait the client never reaches ends after [`FUZZ_IDLE`] without a byte from it
//! (at once while the client has sent nothing since the last such end); after the last record the server closes its side, so every run ends without the
//! client's own timeouts. Any later connection (the client reconnects after a failure)
//! is closed at once.
//!
//! What is checked beyond "no panic, no hang": whatever the server says, every request
//! the client sends lies inside the export, is aligned to the server's minimum block
//! size, and a read or write carries no more than the server's maximum.
//!
//! The seeds (`scripts/fuzz.sh seeds`) are captures of nbdkit and qemu-nbd answering
//! this session (`fuzz/nbd-capture.py ... replies`, `examples/nbd_client_session.rs`):
//! the capture records, for each piece the server sent, how many bytes the client had
//! sent before it, which is the record format here.

use sectorcrypt_nbd::client::{Client, ClientConfig, ExportFacts, NbdUri};
use sectorcrypt_nbd::proto::*;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long the fuzz target's fake server waits for a client byte before it sends a
/// record whose wait the client has not reached. A client that was only slow to send
/// (a loaded machine) gets a record early, and the run explores something else; the
/// replay of the captures in the tests waits longer, to be exact.
pub const FUZZ_IDLE: Duration = Duration::from_millis(5);

/// The client's timeout: a backstop only (every run ends sooner, see the module's docs).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// In the first record's wait: the client is asked for TLS.
const TLS_BIT: u32 = 1 << 31;

/// The TLS parameters of the session's `nbds+unix://` URI: the server's certificate is
/// not checked, and the client has none (no such folder), whatever the machine has in
/// libnbd's default folders.
pub const TLS_QUERY: &str = "&tls-verify-peer=false&tls-certificates=/nonexistent/sectorcrypt-fuzz";

/// Records used at most.
const MAX_RECORDS: usize = 256;

/// The export's name in the session.
pub const EXPORT: &str = "fuzz";

/// How far a session got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientReached {
    /// The handshake failed.
    Refused,
    /// The handshake ended; no call succeeded.
    Connected,
    /// At least one call succeeded.
    Served,
}

/// The NBD client target.
pub fn nbd_client(data: &[u8]) {
    nbd_client_reached(data, FUZZ_IDLE);
}

/// How far the session got against a server sending `data` (records, see the module's
/// docs), waiting `idle` for a client that sends nothing.
pub fn nbd_client_reached(data: &[u8], idle: Duration) -> ClientReached {
    crate::nbd::survive_sigpipe();
    // The first record's wait has its top bit set: the client is asked for TLS.
    let tls = data.first().is_some_and(|b| b & 0x80 != 0);
    let records = records(data);
    let name = format!(
        "sectorcrypt-fuzz-nbd-client-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("an abstract name");
    let listener = UnixListener::bind_addr(&addr).expect("a listening socket");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(Mutex::new(Vec::new()));
    let server = {
        let (stop, sent) = (stop.clone(), sent.clone());
        thread::spawn(move || accept(&listener, &stop, records, &sent, idle))
    };
    let query = if tls { TLS_QUERY } else { "" };
    let scheme = if tls { "nbds" } else { "nbd" };
    let uri = NbdUri::parse(&format!(
        "{scheme}+unix:///{EXPORT}?socket=%00{name}{query}"
    ))
    .expect("the fake server's URI");
    let (reached, facts) = client_session(&uri, CLIENT_TIMEOUT);
    stop.store(true, Ordering::Release);
    if let Err(panic) = server.join() {
        std::panic::resume_unwind(panic);
    }
    if let Some(facts) = facts {
        check_requests(&sent.lock().unwrap(), &facts);
    }
    reached
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The records of `data`: (wait, bytes).
fn records(mut data: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    while data.len() >= 8 && out.len() < MAX_RECORDS {
        let wait = u32::from_be_bytes(data[..4].try_into().expect("4 bytes")) & !TLS_BIT;
        let len = u32::from_be_bytes(data[4..8].try_into().expect("4 bytes")) as usize;
        let len = len.min(data.len() - 8);
        out.push((u64::from(wait), data[8..8 + len].to_vec()));
        data = &data[8 + len..];
    }
    out
}

/// Accepts connections until `stop`: the first is served the records (what the client
/// sent on it lands in `sent`), any other is closed at once.
fn accept(
    listener: &UnixListener,
    stop: &AtomicBool,
    records: Vec<(u64, Vec<u8>)>,
    sent: &Mutex<Vec<u8>>,
    idle: Duration,
) {
    let mut records = Some(records);
    let mut first = None;
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((s, _)) => match records.take() {
                Some(r) => first = Some(serve(s, r, idle)),
                None => drop(s),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_micros(200))
            }
            Err(e) => panic!("accepting the client: {e}"),
        }
    }
    if let Some(h) = first {
        *sent.lock().unwrap() = h.join().expect("the fake server");
    }
}

/// Serves `records` on `s` in a thread; the thread returns what the client sent.
fn serve(
    s: UnixStream,
    records: Vec<(u64, Vec<u8>)>,
    idle: Duration,
) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut s = s;
        s.set_nonblocking(false).expect("a blocking socket");
        s.set_write_timeout(Some(CLIENT_TIMEOUT))
            .expect("a timeout");
        let mut got = Vec::new();
        let mut closed = false;
        // The client went idle short of a wait: it waits for the server. Later records
        // are sent without waiting until the client sends again.
        let mut stalled = false;
        let mut buf = vec![0u8; 64 << 10];
        for (wait, bytes) in records {
            while !closed && (got.len() as u64) < wait {
                // Stalled: only what the client already sent.
                s.set_nonblocking(stalled).expect("a socket mode");
                s.set_read_timeout(Some(idle)).expect("a timeout");
                match s.read(&mut buf) {
                    Ok(0) => closed = true,
                    Ok(n) => {
                        got.extend_from_slice(&buf[..n]);
                        stalled = false;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        stalled = true;
                        break; // idle: send it anyway
                    }
                }
            }
            s.set_nonblocking(false).expect("a socket mode");
            if s.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        // What the client sends until it closes (its requests, then NBD_CMD_DISC).
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a timeout");
        while !closed && Instant::now() < deadline {
            match s.read(&mut buf) {
                Ok(0) => closed = true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => closed = true,
            }
        }
        got
    })
}

/// The session: connects to `uri` (one connection, no retry) and makes the calls; what
/// the handshake said, when it ended.
pub fn client_session(uri: &NbdUri, timeout: Duration) -> (ClientReached, Option<ExportFacts>) {
    let config = ClientConfig {
        connections: 1,
        timeout: Some(timeout),
        retry: 0,
        structured_replies: true,
    };
    let client = match Client::connect(uri, config) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return (ClientReached::Refused, None);
        }
    };
    let facts = *client.facts();
    let _ = (client.size(), client.connections(), client.name());
    let mut ok = 0;
    let mut count = |r: io::Result<()>| ok += usize::from(r.is_ok());
    let mut buf = vec![0u8; 16384];
    count(client.read_at(&mut buf[..4096], 0));
    count(client.read_at(&mut buf[..1000], 100));
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    count(client.write_at(&pattern[..4096], 4096, false));
    count(client.write_at(&pattern[..512], 8192, true));
    count(client.write_at(&pattern[..100], 9000, false));
    count(client.flush());
    count(client.trim(8192, 4096));
    count(client.write_zeroes(12288, 4096, true));
    count(client.read_at(&mut buf, 0));
    let (_, r) = client.read_owned(vec![0u8; 8192], 4096..8192, 4096);
    count(r);
    if let Some(end) = facts.size.checked_sub(512) {
        count(client.read_at(&mut buf[..512], end));
    }
    let reached = if ok > 0 {
        ClientReached::Served
    } else {
        ClientReached::Connected
    };
    (reached, Some(facts))
}

/// Checks every request in `sent` (what the client sent: its flags, options, then
/// requests) against what the server said in the handshake.
fn check_requests(sent: &[u8], facts: &ExportFacts) {
    let Some(mut rest) = sent.get(4..) else {
        return;
    };
    let be64 = |b: &[u8]| u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    let be32 = |b: &[u8]| u32::from_be_bytes(b[..4].try_into().expect("4 bytes"));
    let be16 = |b: &[u8]| u16::from_be_bytes(b[..2].try_into().expect("2 bytes"));
    while rest.len() >= OPTION_REQUEST_LEN && be64(rest) == IHAVEOPT {
        let len = be32(&rest[12..]) as usize;
        rest = rest.get(OPTION_REQUEST_LEN + len..).unwrap_or_default();
    }
    let min = u64::from(facts.min_block);
    while rest.len() >= REQUEST_LEN {
        assert_eq!(be32(rest), REQUEST_MAGIC, "a request out of step");
        let (kind, offset, len) = (be16(&rest[6..]), be64(&rest[16..]), be32(&rest[24..]));
        let what = format!("request {kind} of {len} bytes at {offset}, facts {facts:?}");
        rest = &rest[REQUEST_LEN..];
        if kind == CMD_DISC {
            break;
        }
        if matches!(kind, CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES) {
            let end = offset.checked_add(u64::from(len));
            assert!(end.is_some_and(|e| e <= facts.size), "outside: {what}");
            assert!(
                offset % min == 0 && u64::from(len) % min == 0,
                "unaligned: {what}"
            );
            assert!(len > 0, "empty: {what}");
        }
        if matches!(kind, CMD_READ | CMD_WRITE) {
            assert!(len <= facts.max_block, "too large: {what}");
        }
        if kind == CMD_WRITE {
            rest = rest.get(len as usize..).unwrap_or_default();
        }
    }
}

/// Runs the session against `uri` with a 30-second timeout and prints how far it got:
/// for capturing what a real server answers (`examples/nbd_client_session.rs`).
pub fn client_session_against(uri: &str) -> io::Result<()> {
    let uri = NbdUri::parse(uri).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let (reached, facts) = client_session(&uri, Duration::from_secs(30));
    writeln!(io::stdout(), "{reached:?} {facts:?}")
}
