//! Listening and shutting down: a Unix socket of the configured mode that disappears at the
//! end, loopback TCP only, a shutdown that finishes the requests in flight and flushes, and one that is
//! bounded when a client stops reading its replies.

use crate::support::{quiet, start, MemExport, Raw};
use sectorcrypt_nbd::{proto, Listen, Server, ServerConfig};
use sectorcrypt_testkit::{have, run_stdout};
use std::io::Read;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

#[test]
fn shutdown_finishes_and_flushes_and_removes_the_socket() {
    let export = MemExport::new(vec![0; 65536], 512, false);
    let srv = start(export.clone(), quiet());
    let sock = srv.sock.clone();
    let mut c = Raw::go(&sock);
    c.request(proto::CMD_WRITE, 0, 1, 0, 4, b"abcd");
    assert_eq!(c.reply(), Some((0, 1)));
    // A client stuck in the handshake does not hold the shutdown up.
    let mut idle = Raw::handshake(&sock);
    let before = export.flushes();
    srv.stop();
    let mut rest = Vec::new();
    assert_eq!(idle.s.read_to_end(&mut rest).unwrap_or(0), 0);
    assert!(export.flushes() > before);
    assert!(!sock.exists());
    // The open connection was closed by the shutdown.
    assert_eq!(c.reply(), None);
}

#[test]
fn shutdown_is_bounded_when_a_client_stops_reading_replies() {
    let export = MemExport::new(vec![1; 8 << 20], 512, false);
    let mut srv = start(
        export.clone(),
        ServerConfig {
            shutdown_grace: Duration::from_millis(200),
            ..quiet()
        },
    );
    let mut c = Raw::go(&srv.sock);
    c.request(proto::CMD_WRITE, 0, 1, 0, 4, b"wxyz");
    assert_eq!(c.reply(), Some((0, 1)));
    let _stuck = Raw::stuck(&srv.sock, 64);
    thread::sleep(Duration::from_millis(300));
    let before = export.flushes();
    let (tx, rx) = mpsc::channel();
    let handle = srv.handle.clone();
    let t = srv.thread.take().unwrap();
    thread::spawn(move || {
        handle.shutdown();
        tx.send(t.join().unwrap().is_ok()).unwrap();
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the server did not stop"
    );
    assert!(export.flushes() > before, "flushed at the end");
    assert_eq!(&export.snapshot()[..4], b"wxyz");
}

#[test]
fn the_socket_has_its_mode_and_nothing_is_left_beside_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let export = MemExport::new(vec![5; 4096], 512, false);
    let config = |socket_mode| ServerConfig {
        socket_mode,
        ..quiet()
    };
    let bad = Server::bind(&Listen::Unix(sock.clone()), export.clone(), config(0o1777));
    assert!(matches!(
        bad,
        Err(sectorcrypt_nbd::Error::SocketMode(0o1777))
    ));
    let server = Server::bind(&Listen::Unix(sock.clone()), export, config(0o640)).unwrap();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o640);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["nbd.sock"]);
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    handle.shutdown();
    t.join().unwrap().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn tcp_only_on_loopback() {
    assert!(Listen::tcp("0.0.0.0:10809").is_err());
    assert!(Listen::tcp("192.168.1.1:10809").is_err());
    assert!(Listen::tcp("localhost").is_err());
    let l = Listen::tcp("127.0.0.1:0").unwrap();
    let export = MemExport::new(vec![5; 4096], 512, false);
    let server = Server::bind(&l, export, quiet()).unwrap();
    let Listen::Tcp(addr) = server.local().clone() else {
        panic!("tcp");
    };
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    if have("nbdinfo") {
        let out = run_stdout(
            Command::new("nbdinfo")
                .arg("--size")
                .arg(format!("nbd://127.0.0.1:{}/vol", addr.port())),
        );
        assert_eq!(out.trim(), "4096");
    } else {
        eprintln!("nbdinfo is not installed: the TCP export is not read through a client");
    }
    handle.shutdown();
    t.join().unwrap().unwrap();
}
