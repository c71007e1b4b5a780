//! The client's deadlines against hostile upstreams written here: one that trickles its
//! handshake a byte at a time (in the clear, and inside the TLS handshake), one that
//! reads a request's payload a trickle at a time, and one whose reconnection trickles
//! while other requests go on. Each upstream is a thread on a Unix socket in a temporary
//! directory; each call of the client runs on a thread of its own and is waited for at
//! most a bound, so that the old behaviour (a hang) fails the test instead of hanging it.

use sectorcrypt_nbd::client::{Client, ClientConfig, NbdUri};
use sectorcrypt_nbd::proto::*;
use sectorcrypt_testkit::require_openssl;
use sectorcrypt_testkit::tls::make_certificates;
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a test waits for a call before it calls it a hang.
const HANG: Duration = Duration::from_secs(15);

/// The export the fake upstreams serve.
const SIZE: u64 = 64 << 20;

fn config(timeout: Duration, connections: usize, retry: u32) -> ClientConfig {
    ClientConfig {
        connections,
        timeout: Some(timeout),
        retry,
        structured_replies: true,
    }
}

/// Runs `f` on a thread of its own; its result and how long it took, or a panic naming
/// `what` when it is still running after [`HANG`].
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG) {
        Ok(v) => (v, t0.elapsed()),
        Err(_) => panic!("{what}: still running after {HANG:?}: a hang"),
    }
}

/// An upstream on `dir/name`: the `n`th connection accepted (from 0) is handed to
/// `serve(n, stream)` on a thread of its own. At most 16 connections are accepted.
fn upstream(dir: &Path, name: &str, serve: fn(usize, UnixStream)) -> PathBuf {
    let sock = dir.join(name);
    let listener = UnixListener::bind(&sock).unwrap();
    std::thread::spawn(move || {
        for n in 0..16 {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            std::thread::spawn(move || serve(n, s));
        }
    });
    sock
}

/// Writes `bytes` one at a time, `gap` apart; stops when the client is gone.
fn trickle(s: &mut UnixStream, bytes: &[u8], gap: Duration) {
    for b in bytes {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            return;
        }
        std::thread::sleep(gap);
    }
}

/// Reads an option request; its code.
fn read_option(s: &mut UnixStream) -> io::Result<u32> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h)?;
    let option = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let mut data = vec![0u8; u32::from_be_bytes(h[12..].try_into().unwrap()) as usize];
    s.read_exact(&mut data)?;
    Ok(option)
}

fn reply(s: &mut UnixStream, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let r = OptionReply {
        option,
        kind,
        len: data.len() as u32,
    };
    s.write_all(&r.encode())?;
    s.write_all(data)
}

/// The handshake of an honest server with simple replies: export of [`SIZE`] bytes with
/// `flags`.
fn handshake(s: &mut UnixStream, flags: u16) -> io::Result<()> {
    handshake_blocks(s, flags, None)
}

/// [`handshake`], telling the block sizes (minimum, preferred, maximum) when given.
fn handshake_blocks(
    s: &mut UnixStream,
    flags: u16,
    blocks: Option<(u32, u32, u32)>,
) -> io::Result<()> {
    s.write_all(&encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))?;
    let mut client = [0u8; 4];
    s.read_exact(&mut client)?;
    loop {
        let option = read_option(s)?;
        if option != OPT_GO {
            reply(s, option, REP_ERR_UNSUP, &[])?;
            continue;
        }
        let mut info = INFO_EXPORT.to_be_bytes().to_vec();
        info.extend_from_slice(&encode_size_and_flags(SIZE, FLAG_HAS_FLAGS | flags));
        reply(s, option, REP_INFO, &info)?;
        if let Some((min, preferred, max)) = blocks {
            let mut info = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
            for v in [min, preferred, max] {
                info.extend_from_slice(&v.to_be_bytes());
            }
            reply(s, option, REP_INFO, &info)?;
        }
        return reply(s, option, REP_ACK, &[]);
    }
}

/// Answers requests (reads with zeros, everything else with success) until NBD_CMD_DISC
/// or the end of the connection.
fn serve_requests(s: &mut UnixStream) {
    serve_requests_but(s, |_| false);
}

/// [`serve_requests`], leaving the requests `ignored` picks without a reply.
fn serve_requests_but(s: &mut UnixStream, ignored: fn(&Request) -> bool) {
    let mut h = [0u8; REQUEST_LEN];
    while s.read_exact(&mut h).is_ok() {
        let r = Request::decode(&h).unwrap();
        if r.kind == CMD_DISC {
            return;
        }
        if r.kind == CMD_WRITE {
            let mut payload = vec![0u8; r.len as usize];
            if s.read_exact(&mut payload).is_err() {
                return;
            }
        }
        if ignored(&r) {
            continue;
        }
        let mut out = SimpleReply {
            error: 0,
            cookie: r.cookie,
        }
        .encode()
        .to_vec();
        if r.kind == CMD_READ {
            out.resize(out.len() + r.len as usize, 0);
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

/// A server that trickles its whole handshake, a byte every 50 ms: the greeting, then
/// an answer of 60000 bytes to the first option (an hour's worth).
fn trickling_handshake(mut s: UnixStream) {
    let gap = Duration::from_millis(50);
    trickle(
        &mut s,
        &encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES),
        gap,
    );
    let mut client = [0u8; 4];
    let Ok(option) = s.read_exact(&mut client).and_then(|()| read_option(&mut s)) else {
        return;
    };
    let r = OptionReply {
        option,
        kind: REP_ACK,
        len: 60_000,
    };
    trickle(&mut s, &r.encode(), gap);
    trickle(&mut s, &[0u8; 60_000], gap);
}

fn uri(sock: &Path) -> NbdUri {
    NbdUri::parse(&format!("nbd+unix:///?socket={}", sock.display())).unwrap()
}

#[test]
fn a_handshake_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let sock = upstream(dir.path(), "t.sock", |_, s| trickling_handshake(s));
    let u = uri(&sock);
    let (r, took) = bounded("connecting to a trickling upstream", move || {
        Client::connect(&u, config(Duration::from_secs(1), 1, 0)).map(|_| ())
    });
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(
        e.to_string().contains("did not finish the handshake") && e.to_string().contains("1 s"),
        "{e}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
        "the 1 s deadline ended the handshake after {took:?}"
    );
}

#[test]
fn a_tls_handshake_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline() {
    require_openssl!();
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    make_certificates(&certs, "sectorcrypt test CA");
    // STARTTLS is acknowledged at once; the TLS records then come a byte every 50 ms (a
    // record header announcing 16 KiB, then its body).
    let sock = upstream(dir.path(), "tls.sock", |_, mut s| {
        let mut go = || -> io::Result<()> {
            s.write_all(&encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))?;
            let mut client = [0u8; 4];
            s.read_exact(&mut client)?;
            let option = read_option(&mut s)?;
            reply(&mut s, option, REP_ACK, &[])?;
            Ok(())
        };
        if go().is_ok() {
            let mut record = vec![0x16, 0x03, 0x03, 0x40, 0x00];
            record.resize(5 + 0x4000, 0);
            trickle(&mut s, &record, Duration::from_millis(50));
        }
    });
    let u = NbdUri::parse(&format!(
        "nbds+unix:///?socket={}&tls-certificates={}",
        sock.display(),
        certs.display()
    ))
    .unwrap();
    let (r, took) = bounded("a TLS handshake with a trickling upstream", move || {
        Client::connect(&u, config(Duration::from_secs(1), 1, 0)).map(|_| ())
    });
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("handshake"), "{e}");
    assert!(
        took < Duration::from_millis(2500),
        "the 1 s deadline ended the TLS handshake after {took:?}"
    );
}

#[test]
fn a_request_whose_payload_the_upstream_reads_slowly_fails_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    // Reads 1 KiB every 20 ms once the handshake is done: a 16 MiB write would take
    // more than five minutes.
    let sock = upstream(dir.path(), "slow.sock", |_, mut s| {
        if handshake(&mut s, FLAG_SEND_FLUSH).is_err() {
            return;
        }
        let mut buf = [0u8; 1024];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let c = std::sync::Arc::new(
        Client::connect(&uri(&sock), config(Duration::from_secs(1), 1, 0)).unwrap(),
    );
    let writer = std::sync::Arc::clone(&c);
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send((
            writer.write_at(&vec![7u8; 16 << 20], 0, false),
            t0.elapsed(),
        ));
    });
    // A read sent meanwhile on the same connection waits behind the write's payload: it
    // fails at the deadline too, never later.
    std::thread::sleep(Duration::from_millis(200));
    let (read, read_took) = bounded("a read behind a stalled write", move || {
        let mut buf = vec![0u8; 4096];
        c.read_at(&mut buf, 0)
    });
    let (write, write_took) = rx
        .recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("a write to a slow reader: still running after {HANG:?}"));
    let e = write.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("no reply within 1 s"), "{e}");
    assert!(write_took < Duration::from_millis(2500), "{write_took:?}");
    assert!(read.is_err(), "the connection failed under the read");
    assert!(read_took < Duration::from_millis(2500), "{read_took:?}");
}

#[test]
fn a_reconnection_that_trickles_holds_up_no_request_on_the_live_connection() {
    let dir = tempfile::tempdir().unwrap();
    // Connection 0 serves; connection 1 closes at its first request; every later one
    // (the reconnection) trickles its handshake.
    let sock = upstream(dir.path(), "re.sock", |n, mut s| match n {
        0 | 1 => {
            if handshake(&mut s, FLAG_CAN_MULTI_CONN | FLAG_SEND_FLUSH).is_err() {
                return;
            }
            if n == 0 {
                serve_requests(&mut s);
            } else {
                let mut h = [0u8; REQUEST_LEN];
                let _ = s.read_exact(&mut h);
            }
        }
        _ => trickling_handshake(s),
    });
    let timeout = Duration::from_secs(3);
    let c = std::sync::Arc::new(Client::connect(&uri(&sock), config(timeout, 2, 1)).unwrap());
    assert_eq!(c.connections(), 2);
    let mut buf = vec![0u8; 4096];
    c.read_at(&mut buf, 0).unwrap(); // slot 0
                                     // Slot 1: its connection is closed under this read, which is sent again (retry 1).
    let first = std::sync::Arc::clone(&c);
    let (r, took) = bounded("a read whose connection was lost", move || {
        let mut buf = vec![0u8; 4096];
        first.read_at(&mut buf, 4096)
    });
    r.unwrap();
    assert!(
        took < Duration::from_millis(1500),
        "the retried read waited {took:?} for a reconnection"
    );
    // The reconnection of slot 1 now trickles for up to 3 s; requests meant for either
    // slot go on, on the live connection.
    let many = std::sync::Arc::clone(&c);
    let (r, took) = bounded("reads while a connection is reopened", move || {
        let mut buf = vec![0u8; 4096];
        for i in 0..20 {
            many.read_at(&mut buf, i * 4096)?;
        }
        many.write_at(&[1u8; 4096], 0, false)?;
        many.flush()
    });
    r.unwrap();
    assert!(
        took < Duration::from_millis(1500),
        "20 reads, a write and a flush took {took:?} while a reconnection trickled"
    );
}

#[test]
fn an_unaligned_write_waits_only_for_one_on_the_same_block() {
    let dir = tempfile::tempdir().unwrap();
    // 4 KiB blocks, two connections; a read of block 0 is never answered.
    let sock = upstream(dir.path(), "rmw.sock", |_, mut s| {
        let flags = FLAG_CAN_MULTI_CONN | FLAG_SEND_FLUSH;
        if handshake_blocks(&mut s, flags, Some((4096, 4096, 1 << 20))).is_ok() {
            serve_requests_but(&mut s, |r| r.kind == CMD_READ && r.offset == 0);
        }
    });
    let c = std::sync::Arc::new(
        Client::connect(&uri(&sock), config(Duration::from_secs(3), 2, 0)).unwrap(),
    );
    assert_eq!(c.facts().min_block, 4096);
    // A sub-block write to block 0: its read of the block hangs until the deadline.
    let stuck = std::sync::Arc::clone(&c);
    let first = std::thread::spawn(move || stuck.write_at(b"x", 10, false));
    std::thread::sleep(Duration::from_millis(300));
    // One to block 2 goes on meanwhile.
    let other = std::sync::Arc::clone(&c);
    let (r, took) = bounded("a sub-block write to another block", move || {
        other.write_at(b"y", 8192 + 10, false)
    });
    r.unwrap();
    assert!(
        took < Duration::from_secs(1),
        "a write to block 2 waited {took:?} for the read-modify-write of block 0"
    );
    let e = first.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
}

#[test]
fn writes_acknowledged_on_a_lost_connection_fail_the_flush_without_a_reconnection() {
    let dir = tempfile::tempdir().unwrap();
    // Connection 0 acknowledges one write and closes; later ones serve.
    let sock = upstream(dir.path(), "lost.sock", |n, mut s| {
        if handshake(&mut s, FLAG_SEND_FLUSH).is_err() {
            return;
        }
        if n > 0 {
            return serve_requests(&mut s);
        }
        let mut h = [0u8; REQUEST_LEN];
        if s.read_exact(&mut h).is_ok() {
            let r = Request::decode(&h).unwrap();
            let mut payload = vec![0u8; r.len as usize];
            let _ = s.read_exact(&mut payload);
            let ack = SimpleReply {
                error: 0,
                cookie: r.cookie,
            };
            let _ = s.write_all(&ack.encode());
        }
    });
    let c = Client::connect(&uri(&sock), config(Duration::from_secs(3), 1, 0)).unwrap();
    c.write_at(&[5u8; 4096], 0, false).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // the server has closed by now
    let e = c.flush().unwrap_err();
    assert!(e.to_string().contains("may not be durable"), "{e}");
    // Reported once; then the client works again on a new connection.
    c.flush().unwrap();
    let mut buf = vec![1u8; 4096];
    c.read_at(&mut buf, 0).unwrap();
    c.flush().unwrap();
}

#[test]
fn a_listener_whose_backlog_is_full_is_given_up_at_the_deadline() {
    use nix::sys::socket::{self, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};
    use std::os::fd::AsRawFd as _;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("full.sock");
    // A server that stopped accepting: a backlog of 0 takes one waiting connection,
    // which the first connect below fills.
    let listener = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    socket::bind(listener.as_raw_fd(), &UnixAddr::new(&sock).unwrap()).unwrap();
    socket::listen(&listener, Backlog::new(0).unwrap()).unwrap();
    let _first = UnixStream::connect(&sock).unwrap();
    let u = uri(&sock);
    let (r, took) = bounded("connecting to a listener with a full backlog", move || {
        Client::connect(&u, config(Duration::from_secs(1), 1, 0)).map(|_| ())
    });
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(
        e.to_string().contains("did not finish the handshake"),
        "{e}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
        "the 1 s deadline ended the connect after {took:?}"
    );
    drop(listener);
}

#[test]
fn an_abstract_socket_is_reached_by_its_name() {
    use std::os::linux::net::SocketAddrExt as _;
    let name = format!("sectorcrypt-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let (tx, accepted) = mpsc::channel();
    std::thread::spawn(move || tx.send(listener.accept().map(|_| ())));
    let u = NbdUri::parse(&format!("nbd+unix:///?socket=%00{name}")).unwrap();
    let (r, _) = bounded("connecting to an abstract socket", move || {
        Client::connect(&u, config(Duration::from_secs(1), 1, 0)).map(|_| ())
    });
    // The listener accepted (and closed) the connection: the handshake fails after it.
    assert!(r.is_err());
    accepted.recv_timeout(HANG).unwrap().unwrap();
}
