//! Listening and shutting down: a Unix socket of the configured mode that disappears at the
//! end, loopback TCP only, several listeners serving one export and stopped together, a shutdown that finishes the requests in flight and flushes, and one that is
//! bounded when a client stops reading its replies.

use crate::support::raw::PATIENCE;
use crate::support::{quiet, start, MemExport, Raw};
use sectorcrypt_nbd::{proto, serve_connection, Listen, Server, ServerConfig};
use sectorcrypt_testkit::{have, run_stdout};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
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
        sectorcrypt_testkit::skipped!(
            "nbdinfo is not installed: the TCP export is not read through a client"
        );
    }
    handle.shutdown();
    t.join().unwrap().unwrap();
}

#[test]
fn one_connected_socket_is_served_until_the_client_disconnects() {
    let export = MemExport::new(vec![0; 65536], 512, false);
    let (client, server) = UnixStream::pair().unwrap();
    let e2 = export.clone();
    let t = thread::spawn(move || serve_connection(server, e2, quiet()));
    let mut c = Raw::greeted(client, PATIENCE).expect("the server greets");
    c.send_go();
    c.request(proto::CMD_WRITE, 0, 1, 512, 4, b"abcd");
    assert_eq!(c.reply(), Some((0, 1)));
    assert_eq!(c.read(2, 510, 8), b"\0\0abcd\0\0");
    c.request(proto::CMD_DISC, 0, 3, 0, 0, &[]);
    t.join().unwrap();
    assert_eq!(&export.snapshot()[512..516], b"abcd");
    assert_eq!(c.reply(), None);
}

/// Waits up to `max` for the server thread `t` to end.
fn ends_within(t: &thread::JoinHandle<Result<(), sectorcrypt_nbd::Error>>, max: Duration) -> bool {
    let t0 = std::time::Instant::now();
    while !t.is_finished() {
        if t0.elapsed() > max {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn exit_after_last_counts_only_clients_past_their_handshake() {
    // `geli attach -d`: connections that close before their handshake is over (silent,
    // aborted, asking for the list only) do not end the server; the last client that
    // chose the export does.
    let export = MemExport::new(vec![7; 8192], 512, false);
    let config = ServerConfig {
        exit_after_last: true,
        ..quiet()
    };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("d.sock");
    let server = Server::bind(&Listen::Unix(sock.clone()), export, config).unwrap();
    let t = thread::spawn(move || server.run());
    drop(UnixStream::connect(&sock).unwrap());
    let mut lister = Raw::handshake(&sock);
    assert_eq!(lister.option(proto::OPT_LIST, &[]).len(), 2);
    lister.option(proto::OPT_ABORT, &[]);
    drop(lister);
    let mut half = UnixStream::connect(&sock).unwrap();
    half.write_all(&3u32.to_be_bytes()).unwrap();
    drop(half);
    assert!(
        !ends_within(&t, Duration::from_millis(700)),
        "the server stopped when a connection closed in its handshake"
    );
    let mut c = Raw::go(&sock);
    assert_eq!(c.read(1, 0, 8), vec![7; 8]);
    c.request(proto::CMD_DISC, 0, 2, 0, 0, &[]);
    drop(c);
    assert!(
        ends_within(&t, Duration::from_secs(10)),
        "not stopped after the last client"
    );
    t.join().unwrap().unwrap();
    assert!(!sock.exists());
}

#[test]
fn a_socket_path_too_long_to_connect_to_is_refused_at_bind() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().as_os_str().len();
    let export = MemExport::new(vec![0; 4096], 512, false);
    // 107 bytes: the longest path a client can connect to; 108: one too many.
    let name = |len: usize| dir.path().join("s".repeat(len - base - 1));
    let fits = name(107);
    let server = Server::bind(&Listen::Unix(fits.clone()), export.clone(), quiet()).unwrap();
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    assert_eq!(Raw::go(&fits).read(1, 0, 4), vec![0; 4]);
    handle.shutdown();
    assert!(ends_within(&t, Duration::from_secs(10)));
    t.join().unwrap().unwrap();

    let long = name(108);
    let e = Server::bind(&Listen::Unix(long.clone()), export, quiet()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("108 bytes long") && msg.contains("at most 107 bytes"),
        "{msg}"
    );
    assert!(!long.exists(), "nothing left at the path");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A path a client can connect to is served whatever the length of its file name: the
/// socket was bound first in a directory beside it, named in the path, so a path of 107
/// bytes or a little less with a short file name was refused, the message naming a path
/// the user never gave.
#[test]
fn a_socket_path_that_fits_is_served_however_short_its_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().as_os_str().len();
    let export = MemExport::new(vec![7; 4096], 512, false);
    for (len, file) in [(107, "s"), (107, "x.sock"), (100, "s"), (96, "nbd")] {
        // DIR/ddd.../FILE, `len` bytes in all.
        let sub = dir.path().join("d".repeat(len - base - 2 - file.len()));
        std::fs::create_dir(&sub).unwrap();
        let sock = sub.join(file);
        assert_eq!(sock.as_os_str().len(), len);
        let server = Server::bind(&Listen::Unix(sock.clone()), export.clone(), quiet())
            .unwrap_or_else(|e| panic!("{len} bytes, file name {file:?}: {e}"));
        let handle = server.shutdown_handle();
        let t = thread::spawn(move || server.run());
        assert_eq!(Raw::go(&sock).read(1, 0, 4), vec![7; 4]);
        handle.shutdown();
        assert!(ends_within(&t, Duration::from_secs(10)));
        t.join().unwrap().unwrap();
        assert!(!sock.exists());
        // Nothing else was left beside it (the private directory the socket was made in).
        assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0);
        std::fs::remove_dir(&sub).unwrap();
    }
}

#[test]
fn a_server_whose_socket_is_removed_or_replaced_stops_when_its_clients_have_gone() {
    for replace in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("gone.sock");
        let export = MemExport::new(vec![1; 4096], 512, false);
        let server = Server::bind(&Listen::Unix(sock.clone()), export.clone(), quiet()).unwrap();
        let t = thread::spawn(move || server.run());
        let mut c = Raw::go(&sock);
        assert_eq!(c.read(1, 0, 4), vec![1; 4]);
        std::fs::remove_file(&sock).unwrap();
        if replace {
            std::fs::write(&sock, b"someone else's").unwrap();
        }
        // The client connected is still served (a file system on a kernel NBD client
        // would lose its unflushed writes if the server left under it) ...
        assert!(
            !ends_within(&t, Duration::from_millis(1500)),
            "stopped under a connected client when its socket went (replaced: {replace})"
        );
        assert_eq!(
            c.read(2, 0, 4),
            vec![1; 4],
            "the connected client is served"
        );
        // ... and once it has gone, no one can reach the server any more: it stops.
        drop(c);
        assert!(
            ends_within(&t, Duration::from_secs(5)),
            "still serving with its socket gone and no client (replaced: {replace})"
        );
        let e = t.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("was removed or replaced"), "{e}");
        if replace {
            assert_eq!(std::fs::read(&sock).unwrap(), b"someone else's");
        }
    }
    // A shutdown, too, needs no socket path: the handle stops the server whatever
    // became of it.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("moved.sock");
    let export = MemExport::new(vec![1; 4096], 512, false);
    let server = Server::bind(&Listen::Unix(sock.clone()), export, quiet()).unwrap();
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    std::fs::rename(&sock, dir.path().join("elsewhere")).unwrap();
    handle.shutdown();
    assert!(
        ends_within(&t, Duration::from_secs(5)),
        "the handle did not stop it"
    );
    let _ = t.join().unwrap();
}

#[test]
fn with_stop_when_socket_gone_off_a_removed_socket_stops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kept.sock");
    let export = MemExport::new(vec![2; 4096], 512, false);
    let config = ServerConfig {
        stop_when_socket_gone: false,
        ..quiet()
    };
    let server = Server::bind(&Listen::Unix(sock.clone()), export, config).unwrap();
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    let mut c = Raw::go(&sock);
    std::fs::remove_file(&sock).unwrap();
    assert!(!ends_within(&t, Duration::from_millis(1500)), "stopped");
    assert_eq!(
        c.read(1, 0, 4),
        vec![2; 4],
        "the connected client is still served"
    );
    handle.shutdown();
    assert!(
        ends_within(&t, Duration::from_secs(5)),
        "the handle did not stop it"
    );
    t.join().unwrap().unwrap();
}

#[test]
fn a_server_on_several_sockets_serves_the_same_export_on_each_and_stops_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one.sock"), dir.path().join("two.sock"));
    let export = MemExport::new(vec![0; 65536], 512, false);
    let mut server = Server::bind(&Listen::Unix(one.clone()), export.clone(), quiet()).unwrap();
    assert_eq!(
        server.also_bind(&Listen::Unix(two.clone())).unwrap(),
        Listen::Unix(two.clone())
    );
    let Listen::Tcp(tcp) = server
        .also_bind(&Listen::tcp("127.0.0.1:0").unwrap())
        .unwrap()
    else {
        panic!("tcp");
    };
    assert_eq!(
        server.locals(),
        [
            Listen::Unix(one.clone()),
            Listen::Unix(two.clone()),
            Listen::Tcp(tcp)
        ]
    );
    // A socket in use (its own) is not bound again.
    assert!(server.also_bind(&Listen::Unix(one.clone())).is_err());
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    // Written through one socket, read through the other.
    let mut c1 = Raw::go(&one);
    c1.request(proto::CMD_WRITE, 0, 1, 1024, 4, b"both");
    assert_eq!(c1.reply(), Some((0, 1)));
    let mut c2 = Raw::go(&two);
    assert_eq!(c2.read(2, 1024, 4), b"both");
    let mut tcp_client = std::net::TcpStream::connect(tcp).unwrap();
    let mut magic = [0u8; 8];
    tcp_client.read_exact(&mut magic).unwrap();
    assert_eq!(&magic, b"NBDMAGIC");
    handle.shutdown();
    t.join().unwrap().unwrap();
    // Every listener is closed and every socket removed; the clients were let go.
    assert!(!one.exists() && !two.exists());
    assert!(std::net::TcpStream::connect(tcp).is_err());
    assert_eq!(c2.reply(), None);
    assert!(export.flushes() > 0);
}
