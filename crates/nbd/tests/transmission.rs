//! Requests through the raw client: malformed ones refused without harm to the
//! connection or to another client, pipelining with replies matched by cookie, FLUSH, FUA,
//! WRITE_ZEROES, DISC, a read-only export, and writes the export completes later on its
//! own threads.

use crate::support::raw::request_bytes;
use crate::support::{quiet, start, LaterExport, MemExport, Raw};
use sectorcrypt_nbd::proto;
use sectorcrypt_testkit::pattern;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

#[test]
fn malformed_requests_get_errors_while_another_client_is_served() {
    let size = 1 << 20;
    let plain = pattern(size, 3);
    let export = MemExport::new(plain.clone(), 512, false);
    let srv = start(export.clone(), quiet());
    let sock = srv.sock.clone();

    // A well-behaved client reading in a loop the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let good = {
        let stop = stop.clone();
        let plain = plain.clone();
        thread::spawn(move || {
            let mut c = Raw::go(&sock);
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) || n < 10 {
                let o = (n * 7919) % (size as u64 - 4096);
                assert!(c.read(n, o, 4096) == plain[o as usize..o as usize + 4096]);
                n += 1;
            }
            n
        })
    };

    let mut bad = Raw::go(&srv.sock);
    // Out of range read and write (the write's payload is consumed: the next request
    // parses), an offset that overflows, an oversized read and an oversized write.
    bad.request(proto::CMD_READ, 0, 1, size as u64 - 10, 11, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 1)));
    bad.request(proto::CMD_WRITE, 0, 2, size as u64, 100, &[0xee; 100]);
    assert_eq!(bad.reply(), Some((proto::ENOSPC, 2)));
    bad.request(proto::CMD_READ, 0, 3, u64::MAX - 1, 4, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 3)));
    bad.request(proto::CMD_READ, 0, 4, 0, (32 << 20) + 1, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 4)));
    let big = vec![0xddu8; (32 << 20) + 512];
    bad.request(proto::CMD_WRITE, 0, 5, 0, big.len() as u32, &big);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 5)));
    bad.request(proto::CMD_TRIM, 0, 6, 0, 512, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 6)), "trim is not offered");
    bad.request(proto::CMD_BLOCK_STATUS, 0, 7, 0, 512, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 7)));
    // Still usable, and nothing was written.
    assert!(bad.read(8, 0, 512) == plain[..512]);
    assert!(
        export.snapshot() == plain,
        "a refused request changed the export"
    );
    // Bad magic: the server hangs up.
    let mut m = request_bytes(proto::CMD_READ, 0, 9, 0, 512);
    m[..4].copy_from_slice(&0xdead_beef_u32.to_be_bytes());
    bad.s.write_all(&m).unwrap();
    assert_eq!(bad.reply(), None);

    // A client that goes away in the middle of a write payload.
    let mut half = Raw::go(&srv.sock);
    half.request(proto::CMD_WRITE, 0, 1, 0, 4096, &[0xcc; 100]);
    drop(half);

    stop.store(true, Ordering::SeqCst);
    let served = good.join().unwrap();
    assert!(served >= 10);
    assert!(export.snapshot() == plain);
    srv.stop();
}

#[test]
fn pipelined_requests_match_their_cookies_and_flush_and_fua_flush() {
    let size = 4 << 20;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    // 64 writes in flight, then the replies, in any order, one per cookie.
    let mut want = vec![0u8; size];
    for i in 0..64u64 {
        let d = vec![i as u8 + 1; 65536];
        c.request(proto::CMD_WRITE, 0, 1000 + i, i * 65536, 65536, &d);
        want[(i * 65536) as usize..((i + 1) * 65536) as usize].copy_from_slice(&d);
    }
    let mut seen: Vec<u64> = (0..64)
        .map(|_| c.reply().unwrap())
        .map(|(e, k)| {
            assert_eq!(e, 0);
            k
        })
        .collect();
    seen.sort();
    assert_eq!(seen, (1000..1064).collect::<Vec<_>>());
    assert!(export.snapshot() == want);
    let before = export.flushes();
    c.request(proto::CMD_FLUSH, 0, 5, 0, 0, &[]);
    assert_eq!(c.reply(), Some((0, 5)));
    c.request(proto::CMD_WRITE, proto::CMD_FLAG_FUA, 6, 7, 3, b"abc");
    assert_eq!(c.reply(), Some((0, 6)));
    assert_eq!(export.flushes(), before + 2);
    c.request(
        proto::CMD_WRITE_ZEROES,
        proto::CMD_FLAG_NO_HOLE,
        7,
        5,
        70000,
        &[],
    );
    assert_eq!(c.reply(), Some((0, 7)));
    want[7..10].copy_from_slice(b"abc");
    want[5..70005].fill(0);
    assert!(export.snapshot() == want);
    // DISC: the server closes after the requests in flight.
    c.request(proto::CMD_WRITE, 0, 8, 100, 4, b"wxyz");
    c.request(proto::CMD_DISC, 0, 9, 0, 0, &[]);
    assert_eq!(c.reply(), Some((0, 8)));
    assert_eq!(c.reply(), None);
    want[100..104].copy_from_slice(b"wxyz");
    assert!(export.snapshot() == want);
    srv.stop();
}

#[test]
fn pipelined_small_and_large_reads_at_queue_depth_32_get_their_own_data() {
    let size = 4 << 20;
    let plain = pattern(size, 9);
    let export = MemExport::new(plain.clone(), 512, false);
    let srv = start(export, quiet());
    let mut c = Raw::go(&srv.sock);
    // Small reads (served on the connection's reader) mixed with large ones (served by
    // the workers), 32 in flight per round, each reply matched to its cookie and data.
    for round in 0..8u64 {
        let mut asked = std::collections::HashMap::new();
        for i in 0..32u64 {
            let cookie = round * 100 + i;
            let len: u32 = if i % 8 == 7 { 65536 } else { 4096 };
            let offset = (cookie * 7919 * 512) % (size as u64 - 65536);
            c.request(proto::CMD_READ, 0, cookie, offset, len, &[]);
            asked.insert(cookie, (offset as usize, len));
        }
        for _ in 0..32 {
            let (e, cookie) = c.reply().unwrap();
            assert_eq!(e, 0);
            let (offset, len) = asked.remove(&cookie).expect("one reply per cookie");
            assert!(c.data(len) == plain[offset..offset + len as usize]);
        }
        assert!(asked.is_empty());
    }
    srv.stop();
}

#[test]
fn read_only_exports_refuse_writes() {
    let export = MemExport::new(vec![7; 4096], 512, true);
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    c.request(proto::CMD_WRITE, 0, 1, 0, 4, b"abcd");
    assert_eq!(c.reply(), Some((proto::EPERM, 1)));
    c.request(proto::CMD_WRITE_ZEROES, 0, 2, 0, 4, &[]);
    assert_eq!(c.reply(), Some((proto::EPERM, 2)));
    assert_eq!(c.read(3, 0, 4), vec![7; 4]);
    assert_eq!(export.snapshot(), vec![7; 4096]);
    srv.stop();
}

/// Writes an export starts and completes later from its own threads are answered when it
/// calls back, each with its own outcome; FUA writes still run on a worker; a DISC behind
/// started writes closes the connection only after their replies.
#[test]
fn started_writes_are_answered_when_the_export_calls_back() {
    let size = 4 << 20;
    let export = LaterExport::new(size, 13 * 65536);
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    let mut want = vec![0u8; size];
    for i in 0..64u64 {
        let d = pattern(65536, i);
        c.request(proto::CMD_WRITE, 0, 1000 + i, i * 65536, 65536, &d);
        if i != 13 {
            want[(i * 65536) as usize..][..65536].copy_from_slice(&d);
        }
    }
    let mut seen: Vec<u64> = (0..64)
        .map(|_| c.reply().unwrap())
        .map(|(e, k)| {
            let failed = if k == 1013 { proto::EIO } else { 0 };
            assert_eq!(e, failed, "the reply to {k}");
            k
        })
        .collect();
    seen.sort();
    assert_eq!(seen, (1000..1064).collect::<Vec<_>>());
    assert_eq!(export.started(), 64);
    assert!(export.snapshot() == want);
    c.request(proto::CMD_WRITE, proto::CMD_FLAG_FUA, 7, 3, 3, b"abc");
    assert_eq!(c.reply(), Some((0, 7)));
    assert_eq!(export.started(), 64, "a FUA write is not started");
    want[3..6].copy_from_slice(b"abc");
    for i in 0..8u64 {
        c.request(proto::CMD_WRITE, 0, 2000 + i, i * 65536 + 100, 4, b"wxyz");
        want[(i * 65536 + 100) as usize..][..4].copy_from_slice(b"wxyz");
    }
    c.request(proto::CMD_DISC, 0, 9, 0, 0, &[]);
    let mut last: Vec<u64> = (0..8).map(|_| c.reply().unwrap().1).collect();
    last.sort();
    assert_eq!(last, (2000..2008).collect::<Vec<_>>());
    assert_eq!(c.reply(), None);
    assert!(export.snapshot() == want);
    srv.stop();
}
