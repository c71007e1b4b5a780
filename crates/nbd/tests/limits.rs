//! What bounds the resources a client can hold: connection slots, the handshake deadline,
//! the server-wide payload budget, and the write timeout on replies nobody reads.

use crate::support::raw::PATIENCE;
use crate::support::{quiet, start, MemExport, Raw, SlowExport};
use sectorcrypt_nbd::{proto, ServerConfig};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn connections_beyond_the_limit_are_closed_and_the_others_served() {
    let export = MemExport::new(vec![3; 8192], 512, false);
    let srv = start(
        export,
        ServerConfig {
            max_connections: 2,
            ..quiet()
        },
    );
    let mut a = Raw::go(&srv.sock);
    let mut b = Raw::go(&srv.sock);
    // The third is closed before the greeting.
    let mut c = UnixStream::connect(&srv.sock).unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut got = Vec::new();
    assert_eq!(c.read_to_end(&mut got).unwrap_or(0), 0);
    assert_eq!(a.read(1, 0, 16), vec![3; 16]);
    assert_eq!(b.read(2, 100, 16), vec![3; 16]);
    // Once one goes, a new one is served.
    a.request(proto::CMD_DISC, 0, 3, 0, 0, &[]);
    assert_eq!(a.reply(), None);
    let t0 = Instant::now();
    while Raw::try_handshake(&srv.sock, PATIENCE).is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no slot freed");
        thread::sleep(Duration::from_millis(20));
    }
    srv.stop();
}

#[test]
fn idle_handshakes_time_out_and_free_their_slots() {
    // Every slot taken by a connection that never sends a byte: a real client must still
    // get served once their handshakes time out (the slots are freed).
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
fn payload_bytes_in_flight_are_bounded_across_connections() {
    // Budget for two 512 KiB requests; two clients each pipeline eight reads and eight
    // writes (4 workers each): never more than two payloads in flight server-wide.
    let export = SlowExport::new(8 << 20);
    let srv = start(
        export.clone(),
        ServerConfig {
            payload_budget: 1 << 20,
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
    assert!(peak <= 2, "{peak} payloads in flight with a budget for 2");
    srv.stop();
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    // Its blocked replies hold the whole payload budget until the write timeout ends its
    // connection; then another client is served.
    let export = MemExport::new(vec![2; 8 << 20], 512, false);
    let srv = start(
        export,
        ServerConfig {
            payload_budget: 4 << 20,
            write_timeout: Duration::from_millis(300),
            ..quiet()
        },
    );
    let mut stuck = Raw::stuck(&srv.sock, 64);
    thread::sleep(Duration::from_millis(100));
    let mut c = Raw::go(&srv.sock);
    assert_eq!(c.read(1, 0, 4096), vec![2; 4096]);
    // The stuck connection was closed by the server.
    stuck
        .s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = Vec::new();
    assert!(
        stuck.s.read_to_end(&mut sink).is_ok(),
        "closed, not timed out"
    );
    srv.stop();
}
