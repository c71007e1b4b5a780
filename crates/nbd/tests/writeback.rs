//! Writeback errors are sticky: once a flush (or the flush of a FUA write) failed, writes
//! acknowledged before it may be lost, so no later flush on any connection may report
//! success, though the file's own error was reported once and its next sync succeeds.

use crate::support::server::Running;
use crate::support::{quiet, start, MemExport, Raw};
use sectorcrypt_nbd::proto;
use std::sync::Arc;

/// Sends a FLUSH on `c` and returns its error value.
fn flush(c: &mut Raw, cookie: u64) -> u32 {
    c.request(proto::CMD_FLUSH, 0, cookie, 0, 0, &[]);
    let (error, got) = c.reply().expect("a reply to FLUSH");
    assert_eq!(got, cookie);
    error
}

/// Stops the server and returns whether its last flush of the export succeeded.
fn stop_flushed(srv: Running) -> bool {
    let mut srv = srv;
    srv.handle.shutdown();
    srv.thread.take().unwrap().join().unwrap().is_ok()
}

/// A server over a memory export, and two clients connected to it.
fn two_clients() -> (Arc<MemExport>, Running, Raw, Raw) {
    let export = MemExport::new(vec![0; 65536], 512, false);
    let srv = start(export.clone(), quiet());
    let a = Raw::go(&srv.sock);
    let b = Raw::go(&srv.sock);
    (export, srv, a, b)
}

#[test]
fn a_failed_flush_fails_every_later_flush_on_every_connection() {
    let (export, srv, mut a, mut b) = two_clients();
    a.request(proto::CMD_WRITE, 0, 1, 0, 4, b"lost");
    assert_eq!(a.reply(), Some((0, 1)));
    assert_eq!(flush(&mut b, 2), 0, "nothing failed yet");

    export.fail_next_flush();
    assert_eq!(flush(&mut a, 3), proto::EIO);
    // The export's next sync succeeds; the server must not say so.
    assert_eq!(flush(&mut b, 4), proto::EIO, "the other connection");
    assert_eq!(flush(&mut a, 5), proto::EIO, "a retry");
    b.request(proto::CMD_WRITE, proto::CMD_FLAG_FUA, 6, 8, 4, b"more");
    assert_eq!(b.reply(), Some((proto::EIO, 6)), "a FUA write");
    // Plain writes and reads go on.
    b.request(proto::CMD_WRITE, 0, 7, 16, 4, b"next");
    assert_eq!(b.reply(), Some((0, 7)));
    assert_eq!(b.read(8, 16, 4), b"next");
    let mut c = Raw::go(&srv.sock);
    assert_eq!(flush(&mut c, 9), proto::EIO, "a new connection");
    assert!(!stop_flushed(srv), "the final flush reported success");
}

#[test]
fn a_failed_fua_write_fails_later_flushes_elsewhere() {
    let (export, srv, mut a, mut b) = two_clients();
    export.fail_next_flush();
    a.request(proto::CMD_WRITE, proto::CMD_FLAG_FUA, 1, 0, 4, b"fua!");
    assert_eq!(a.reply(), Some((proto::EIO, 1)));
    assert_eq!(flush(&mut b, 2), proto::EIO);
    assert!(!stop_flushed(srv));

    // A new server over the same export (the export reopened) starts clean.
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    assert_eq!(flush(&mut c, 1), 0);
    assert!(stop_flushed(srv));
}
