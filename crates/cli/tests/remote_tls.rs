//! Volumes on NBD exports over TLS (`nbds://127.0.0.1:PORT/`, `nbds+unix:///?socket=`):
//! `dump`, `read`, `write` and `format` against nbdkit `--tls=require` and against
//! sectorcrypt's own `serve --tls-certificates`; a wrong CA and a plain `nbd://` URI to a
//! server that requires TLS refused as bad input; the proxy chain `serve nbds://…
//! --socket S --tls-certificates D2` read by nbdcopy over TLS. Certificates are made per
//! test with the openssl command line; skipped with a printed reason where a tool is
//! missing.

#[path = "support/remote_io.rs"]
mod remote_io;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use remote_io::write_and_read;
use sectorcrypt_testkit::nbdkit::Nbdkit;
use sectorcrypt_testkit::tls::{make_certificates, nbds_uri};
use sectorcrypt_testkit::{pattern, require, require_openssl, run};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{code, ok, s, sc};
use volumes::{key_file, FAST};

/// Runs `sectorcrypt ARGS` and checks its failure: exit 2 and a message containing
/// every one of `says`.
fn refused(args: &[&str], says: &[&str]) {
    let out = sc(args, b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{args:?}: {err}");
    for w in says {
        assert!(err.contains(w), "{args:?}: {err} (expected {w:?})");
    }
}

#[test]
fn volumes_on_nbdkit_over_tls_are_formatted_dumped_read_and_written() {
    require!("nbdkit");
    require_openssl!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (certs, other) = (d.join("certs"), d.join("other"));
    make_certificates(&certs, "sectorcrypt test CA");
    make_certificates(&other, "another CA");
    let key = key_file(d, "k", "tls secret");
    let tls = format!("--tls-certificates={}", certs.display());

    // A Unix socket: a volume formatted on the (empty) export, its size the export's.
    let kit = Nbdkit::unix(
        &d.join("kit.sock"),
        &["--tls=require", &tls, "memory", "32M"],
    );
    let uri = nbds_uri(kit.sock.as_ref().unwrap(), &certs);
    let mut f = vec!["format", &uri, "--type", "luks2", "--key-file", s(&key)];
    f.extend(FAST);
    f.push("--batch");
    ok(sc(&f, b""));
    let dump = ok(sc(&["dump", &uri], b""));
    assert!(dump.contains("Version:        2"), "{dump}");
    write_and_read(&uri, &key, d, &pattern(1 << 20, 1), 4096);

    // Loopback TCP, the certificate's name (127.0.0.1) checked.
    let img = d.join("file.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let file = format!("file={}", img.display());
    let tcp = Nbdkit::tcp(&["--tls=require", &tls, "file", &file]);
    let port = tcp.port.unwrap();
    let uri = format!(
        "nbds://127.0.0.1:{port}/?tls-certificates={}",
        certs.display()
    );
    f[1] = &uri;
    ok(sc(&f, b""));
    write_and_read(&uri, &key, d, &pattern(3 << 20, 2), 1 << 20);

    // Refusals: another CA, another name, and no TLS at all.
    let wrong_ca = format!(
        "nbds://127.0.0.1:{port}/?tls-certificates={}",
        other.display()
    );
    refused(&["dump", &wrong_ca], &["TLS", "certificate"]);
    let wrong_name = format!("{uri}&tls-hostname=example.org");
    refused(&["dump", &wrong_name], &["certificate"]);
    let plain = format!("nbd://127.0.0.1:{port}/");
    refused(&["dump", &plain], &["requires TLS", "nbds://"]);
}

/// A child process, killed when dropped (a failed test leaves no server behind).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sectorcrypt ARGS` listening on loopback TCP: started, and waited for until `port`
/// takes connections.
fn serve_tcp(args: &[&str], port: u16) -> Killed {
    let mut child = volumes::spawn(args, Stdio::null());
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Killed(child)
}

fn wait_for(sock: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(t0.elapsed() < Duration::from_secs(20), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sectorcrypts_own_tls_server_and_a_tls_proxy_chain_read_by_nbdcopy() {
    require!("nbdcopy");
    require_openssl!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (d1, d2) = (d.join("d1"), d.join("d2"));
    make_certificates(&d1, "upstream CA");
    make_certificates(&d2, "proxy CA");
    let outer_key = key_file(d, "outer", "outer secret");
    let inner_key = key_file(d, "inner", "inner secret");
    let outer = d.join("outer.img");
    let mut f = vec![
        "format",
        s(&outer),
        "--size",
        "24M",
        "--key-file",
        s(&outer_key),
    ];
    f.extend(FAST);
    f.push("--batch");
    ok(sc(&f, b""));

    // The upstream: the outer volume's plaintext served over TLS on loopback TCP.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let up_args = [
        "serve",
        s(&outer),
        "--key-file",
        s(&outer_key),
        "--listen",
        &listen,
    ];
    let _upstream = serve_tcp(
        &[&up_args[..], &["--tls-certificates", s(&d1)]].concat(),
        port,
    );
    let up = format!("nbds://127.0.0.1:{port}/?tls-certificates={}", d1.display());
    let mut f = vec![
        "format",
        &up,
        "--type",
        "luks1",
        "--key-file",
        s(&inner_key),
    ];
    f.extend(FAST);
    f.push("--batch");
    ok(sc(&f, b""));
    let dump = ok(sc(&["dump", &up], b""));
    assert!(dump.contains("Version:        1"), "{dump}");
    let data = pattern(2 << 20, 3);
    write_and_read(&up, &inner_key, d, &data, 0);

    // The proxy: the inner volume's plaintext, over TLS with other certificates.
    let sock = d.join("proxy.sock");
    let p = [
        "serve",
        &up,
        "--key-file",
        s(&inner_key),
        "--socket",
        s(&sock),
    ];
    let mut proxy = Killed(volumes::spawn(
        &[&p[..], &["--tls-certificates", s(&d2)]].concat(),
        Stdio::null(),
    ));
    wait_for(&sock, &mut proxy.0);
    let out = d.join("out.bin");
    run(Command::new("nbdcopy").arg(nbds_uri(&sock, &d2)).arg(&out));
    let got = std::fs::read(&out).unwrap();
    assert!(
        got[..data.len()] == data[..],
        "the proxy's plaintext differs"
    );
    // The proxy asks the upstream for TLS with its own client side, never in the clear:
    // certificates of the wrong CA stop it before it serves.
    let bad = format!("nbds://127.0.0.1:{port}/?tls-certificates={}", d2.display());
    refused(
        &[
            "serve",
            &bad,
            "--key-file",
            s(&inner_key),
            "--socket",
            s(&d.join("x.sock")),
        ],
        &["certificate"],
    );
}
