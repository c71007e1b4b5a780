//! What bounds the resources a client can hold: connection slots (an idle connection gives
//! its slot up to a new one), the handshake deadline, the read and idle timeouts, each
//! connection's payload budget, and the write timeout on replies nobody reads.

use crate::support::raw::{option_bytes, request_bytes, PATIENCE};
use crate::support::{quiet, start, MemExport, Raw, SlowExport};
use sectorcrypt_nbd::{proto, Listen, Server, ServerConfig};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

/// Whether the server closed `c`'s connection: it reads end of stream (or a reset) within
/// a few seconds.
fn closed(c: &mut Raw) -> bool {
    c.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    match c.s.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn at_the_connection_limit_the_longest_idle_gives_way_and_busy_ones_do_not() {
    let export = MemExport::new(vec![3; 8192], 512, false);
    let srv = start(
        export,
        ServerConfig {
            max_connections: 2,
            ..quiet()
        },
    );
    let mut a = Raw::go(&srv.sock);
    thread::sleep(Duration::from_millis(20));
    let mut b = Raw::go(&srv.sock);
    assert_eq!(b.read(1, 0, 16), vec![3; 16]);
    // Both idle, a for longer: a third client takes a's slot.
    let mut c = Raw::go(&srv.sock);
    assert!(closed(&mut a), "the longest idle connection was closed");
    assert_eq!(b.read(2, 100, 16), vec![3; 16]);
    assert_eq!(c.read(3, 200, 16), vec![3; 16]);
    // b and c in the middle of a write: busy. A fourth client is refused when it asks
    // for the export (with an error, not an acknowledgement), and closed.
    b.request(proto::CMD_WRITE, 0, 4, 0, 1024, &[7; 100]);
    c.request(proto::CMD_WRITE, 0, 5, 0, 1024, &[8; 100]);
    thread::sleep(Duration::from_millis(50));
    let mut d = Raw::handshake(&srv.sock);
    let replies = d.option(proto::OPT_GO, b"\0\0\0\x03vol\0\0");
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].0, proto::REP_ERR_POLICY);
    assert!(String::from_utf8_lossy(&replies[0].1).contains("server busy"));
    assert!(closed(&mut d));
    // Once b's write is whole and answered, b is idle and gives way to the next client
    // (b's worker marks it idle just after sending the reply: a moment to wait).
    b.s.write_all(&[7; 924]).unwrap();
    assert_eq!(b.reply(), Some((0, 4)));
    let t0 = Instant::now();
    let mut e = loop {
        if let Some(e) = Raw::try_go(&srv.sock, PATIENCE) {
            break e;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "b never gave way");
        thread::sleep(Duration::from_millis(10));
    };
    assert!(closed(&mut b));
    c.s.write_all(&[8; 924]).unwrap();
    assert_eq!(c.reply(), Some((0, 5)));
    assert_eq!(e.read(6, 0, 1024), vec![8; 1024]);
    srv.stop();
}

#[test]
fn a_client_stalled_in_a_request_is_closed_after_the_read_timeout() {
    let export = MemExport::new(vec![4; 1 << 20], 512, false);
    let srv = start(
        export.clone(),
        ServerConfig {
            read_timeout: Duration::from_millis(300),
            ..quiet()
        },
    );
    let mut header = Raw::go(&srv.sock);
    header
        .s
        .write_all(&request_bytes(proto::CMD_READ, 0, 1, 0, 512)[..10])
        .unwrap();
    let mut payload = Raw::go(&srv.sock);
    payload.request(proto::CMD_WRITE, 0, 1, 0, 65536, &[9; 1000]);
    let mut refused = Raw::go(&srv.sock);
    refused.request(proto::CMD_WRITE, 0, 1, 1 << 20, 65536, &[9; 1000]);
    let mut idle = Raw::go(&srv.sock);
    let t0 = Instant::now();
    for c in [&mut header, &mut payload, &mut refused] {
        assert!(closed(c));
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // An idle connection is not subject to the read timeout.
    assert_eq!(idle.read(2, 0, 16), vec![4; 16]);
    assert!(export.snapshot().iter().all(|&b| b == 4));
    srv.stop();
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let export = MemExport::new(vec![5; 1 << 20], 512, false);
    let srv = start(
        export,
        ServerConfig {
            idle_timeout: Duration::from_millis(300),
            ..quiet()
        },
    );
    let mut idle = Raw::go(&srv.sock);
    let mut used = Raw::go(&srv.sock);
    // A request in flight (a write whose payload is on its way) is not idling.
    used.request(proto::CMD_WRITE, 0, 1, 0, 4096, &[6; 1000]);
    let t0 = Instant::now();
    assert!(closed(&mut idle));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    used.s.write_all(&[6; 3096]).unwrap();
    assert_eq!(used.reply(), Some((0, 1)));
    assert_eq!(used.read(2, 4000, 200)[..96], [6; 96]);
    assert!(closed(&mut used), "idle again after its requests");
    srv.stop();
}

#[test]
fn idle_handshakes_time_out_and_free_their_slots() {
    // Every slot taken by a connection that never sends a byte: their handshakes time
    // out and they are closed, and a real client is served (at once, in the slot of the
    // one idle longest).
    let export = MemExport::new(vec![9; 8192], 512, false);
    let srv = start(
        export,
        ServerConfig {
            max_connections: 4,
            handshake_timeout: Duration::from_millis(200),
            ..quiet()
        },
    );
    let idle: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&srv.sock).unwrap())
        .collect();
    // A trickling client (one option byte at a time) is bounded by the same deadline.
    let mut slow = UnixStream::connect(&srv.sock).unwrap();
    let t0 = Instant::now();
    let mut c = loop {
        if let Some(mut r) = Raw::try_handshake(&srv.sock, Duration::from_secs(5)) {
            r.send_go();
            break r;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no slot freed");
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(c.read(1, 0, 16), vec![9; 16]);
    // The idle ones were closed by the server.
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(got.len() <= 18, "only the greeting, then closed");
    }
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 64];
    let _ = slow.read(&mut buf);
    let trickle_start = Instant::now();
    let mut closed = false;
    for b in proto::IHAVEOPT.to_be_bytes().iter().cycle().take(200) {
        if slow.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(closed || trickle_start.elapsed() < Duration::from_secs(5));
    // The established connection is not subject to the handshake deadline.
    thread::sleep(Duration::from_millis(400));
    assert_eq!(c.read(2, 8, 8), vec![9; 8]);
    srv.stop();
}

#[test]
fn payload_bytes_in_flight_are_bounded_per_connection() {
    // Budget for two 512 KiB requests per connection; two clients each pipeline eight
    // reads and eight writes (4 workers each): never more than two payloads in flight on
    // a connection, four in all.
    let export = SlowExport::new(8 << 20);
    let srv = start(
        export.clone(),
        ServerConfig {
            connection_budget: 1 << 20,
            ..quiet()
        },
    );
    const LEN: u32 = 512 << 10;
    let clients: Vec<_> = (0..2u64)
        .map(|k| {
            let sock = srv.sock.clone();
            thread::spawn(move || {
                let mut c = Raw::go(&sock);
                let mut w = c.try_clone();
                let writer = thread::spawn(move || {
                    let payload = vec![7u8; LEN as usize];
                    for i in 0..8u64 {
                        w.request(proto::CMD_READ, 0, i, (k * 8 + i) * LEN as u64, LEN, &[]);
                    }
                    for i in 8..16u64 {
                        w.request(proto::CMD_WRITE, 0, i, 0, LEN, &payload);
                    }
                });
                let mut seen = BTreeSet::new();
                for _ in 0..16 {
                    let (err, cookie) = c.reply().unwrap();
                    assert_eq!(err, 0);
                    if cookie < 8 {
                        let d = c.data(LEN);
                        let off = (k * 8 + cookie) * LEN as u64;
                        assert!(d
                            .iter()
                            .enumerate()
                            .all(|(i, b)| *b == ((off + i as u64) % 251) as u8));
                    }
                    seen.insert(cookie);
                }
                assert_eq!(seen.len(), 16);
                writer.join().unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let peak = export.peak();
    assert!(peak >= 1);
    assert!(
        peak <= 4,
        "{peak} payloads in flight with budgets for 2 + 2"
    );
    srv.stop();
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    // Its blocked replies hold its own connection's budget until the write timeout ends
    // the connection; another client is served meanwhile.
    let export = MemExport::new(vec![2; 8 << 20], 512, false);
    let srv = start(
        export,
        ServerConfig {
            connection_budget: 4 << 20,
            write_timeout: Duration::from_millis(300),
            ..quiet()
        },
    );
    let mut stuck = Raw::stuck(&srv.sock, 64);
    thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let mut c = Raw::go(&srv.sock);
    assert_eq!(c.read(1, 0, 4096), vec![2; 4096]);
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "another client waited {:?}",
        t0.elapsed()
    );
    // The stuck connection is closed by the server once a reply has waited for the
    // write timeout (a read here would unblock the server: wait first).
    thread::sleep(Duration::from_millis(1500));
    stuck
        .s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = Vec::new();
    let end = stuck.s.read_to_end(&mut sink);
    assert!(
        end.is_ok() || end.as_ref().unwrap_err().kind() == std::io::ErrorKind::ConnectionReset,
        "closed, not timed out: {end:?}"
    );
    srv.stop();
}

/// A read timeout too long to add to the clock (`serve --timeout 18446744073709551615`) is
/// no limit. It used to panic every connection at its first request (and a panicked
/// connection kept its slot: enough of them locked every client out).
#[test]
fn a_read_timeout_beyond_the_clock_is_no_limit() {
    let export = MemExport::new(vec![6; 8192], 512, false);
    let srv = start(
        export,
        ServerConfig {
            read_timeout: Duration::MAX,
            ..quiet()
        },
    );
    let mut clients: Vec<Raw> = (0..4).map(|_| Raw::go(&srv.sock)).collect();
    for (cookie, c) in (0u64..).zip(clients.iter_mut()) {
        assert_eq!(c.read(cookie, 512 * cookie, 16), vec![6; 16]);
        assert_eq!(c.read(cookie + 10, 0, 16), vec![6; 16]);
    }
    srv.stop();
}

/// Connects to `addr` over TCP and enters the transmission phase on export "vol" by
/// hand (greeting, client flags, NBD_OPT_GO acknowledged).
fn tcp_go(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(&option_bytes(proto::OPT_GO, b"\0\0\0\x03vol\0\0"))
        .unwrap();
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        s.read_exact(&mut vec![0u8; len]).unwrap();
        if kind != proto::REP_INFO {
            assert_eq!(kind, proto::REP_ACK);
            return s;
        }
    }
}

/// A READ of `len` bytes at `offset` on `s` (any stream in the transmission phase, plain
/// or TLS), its reply checked; the data, or the error that ended the connection.
pub fn read_over<S: Read + Write>(
    s: &mut S,
    cookie: u64,
    offset: u64,
    len: u32,
) -> std::io::Result<Vec<u8>> {
    s.write_all(&request_bytes(proto::CMD_READ, 0, cookie, offset, len))?;
    let mut reply = [0u8; 16];
    s.read_exact(&mut reply)?;
    assert_eq!(
        &reply[..8],
        &[0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0],
        "magic, no error"
    );
    assert_eq!(u64::from_be_bytes(reply[8..].try_into().unwrap()), cookie);
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data)?;
    Ok(data)
}

/// Opens `n` TCP connections to `addr` that never send a byte; waits until the server
/// has greeted each one (so each was accepted and is in its handshake).
pub fn silent_tcp(addr: std::net::SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(PATIENCE)).unwrap();
            // Greeted, or closed at once (a handshake slot taken by a newer one).
            let _ = s.read(&mut [0u8; 18]);
            s
        })
        .collect()
}

/// Waits for each of `silent` to be closed by the server; panics unless all are closed
/// within `max` after `t0`.
pub fn all_closed_in(silent: Vec<std::net::TcpStream>, t0: Instant, max: Duration) {
    for mut s in silent {
        s.set_read_timeout(Some(max)).unwrap();
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!(
                "a silent connection still open after {:?}: {e}",
                t0.elapsed()
            ),
        }
        assert!(rest.len() <= 18, "only the greeting: {rest:?}");
    }
    assert!(t0.elapsed() < max, "closed after {:?}", t0.elapsed());
}

#[test]
fn silent_connections_beyond_the_limit_evict_no_client_past_its_handshake() {
    // Four slots, one taken by an idle client that finished its handshake, then 70
    // connections that never send a byte (more than the slots and the handshake slots):
    // the client stays connected and served, and the silent ones are closed at the
    // handshake deadline.
    let export = MemExport::new(vec![6; 8192], 512, false);
    let config = ServerConfig {
        max_connections: 4,
        handshake_timeout: Duration::from_millis(1500),
        ..quiet()
    };
    let server = Server::bind(&Listen::tcp("127.0.0.1:0").unwrap(), export, config).unwrap();
    let Listen::Tcp(addr) = server.local().clone() else {
        panic!("tcp");
    };
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    let mut idle = tcp_go(addr);
    assert_eq!(read_over(&mut idle, 1, 0, 16).unwrap(), vec![6; 16]);
    thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let silent = silent_tcp(addr, 70);
    assert_eq!(
        read_over(&mut idle, 2, 100, 16).expect("the idle client must stay connected"),
        vec![6; 16]
    );
    // A new client is served beside them, in a free slot.
    let mut other = tcp_go(addr);
    assert_eq!(read_over(&mut other, 1, 200, 16).unwrap(), vec![6; 16]);
    all_closed_in(silent, t0, Duration::from_secs(6));
    assert_eq!(read_over(&mut idle, 3, 300, 16).unwrap(), vec![6; 16]);
    handle.shutdown();
    t.join().unwrap().unwrap();
}

/// Small reads of an export that does not say its reads are quick (one that may wait on
/// a network) still run on the workers, side by side: eight pipelined 4 KiB reads of a
/// slow export overlap, and each gets its own data.
#[test]
fn small_reads_of_a_slow_export_overlap_on_the_workers() {
    let export = SlowExport::new(1 << 20);
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    for i in 0..8u64 {
        c.request(proto::CMD_READ, 0, i, i * 4096, 4096, &[]);
    }
    let mut seen = BTreeSet::new();
    for _ in 0..8 {
        let (err, cookie) = c.reply().unwrap();
        assert_eq!(err, 0);
        let d = c.data(4096);
        let off = cookie * 4096;
        assert!(d
            .iter()
            .enumerate()
            .all(|(i, b)| *b == ((off + i as u64) % 251) as u8));
        seen.insert(cookie);
    }
    assert_eq!(seen.len(), 8);
    let peak = export.peak();
    assert!(peak >= 2, "the small reads ran one at a time (peak {peak})");
    srv.stop();
}
