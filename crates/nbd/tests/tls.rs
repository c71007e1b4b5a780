//! TLS (NBD_OPT_STARTTLS) with real clients: nbdinfo and nbdcopy (`nbds+unix://` with
//! `tls-certificates=`), qemu-img (`tls-creds-x509` objects), and the crate's own client
//! side (`tls::ClientTls`). Certificates are made per test with the openssl command line
//! (testkit); a test whose tools are missing is skipped with a printed reason.

use crate::limits::{all_closed_in, read_over, silent_tcp};
use crate::support::raw::{option_bytes, request_bytes};
use crate::support::{quiet, start, MemExport};
use sectorcrypt_nbd::tls::{ClientTls, ServerTls};
use sectorcrypt_nbd::{proto, Listen, Server, ServerConfig};
use sectorcrypt_testkit::require_openssl;
use sectorcrypt_testkit::tls::{make_certificates, nbds_uri, qemu_tls_args};
use sectorcrypt_testkit::{pattern, require, run};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary directory with certificates of a CA of its own in `certs/`.
fn certificates() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    make_certificates(&certs, "sectorcrypt test CA");
    (dir, certs)
}

/// The tests' configuration with TLS from `certs`.
fn with_tls(certs: &Path, verify_peer: bool, required: bool) -> ServerConfig {
    ServerConfig {
        tls: Some(ServerTls::from_dir(certs, verify_peer, required).unwrap()),
        ..quiet()
    }
}

fn nbdinfo(uri: &str) -> std::process::Output {
    Command::new("nbdinfo")
        .arg("--json")
        .arg(uri)
        .output()
        .unwrap()
}

#[test]
fn required_tls_serves_nbdinfo_over_tls_and_refuses_it_without() {
    require!("nbdinfo");
    require_openssl!();
    let (_dir, certs) = certificates();
    let size = 1 << 20;
    let srv = start(
        MemExport::new(vec![0; size], 4096, false),
        with_tls(&certs, false, true),
    );
    let out = nbdinfo(&nbds_uri(&srv.sock, &certs));
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exports"][0]["export-size"], size as u64, "{v}");
    assert_eq!(v["TLS"], true, "{v}");

    // libnbd shows the server's error messages in its debug output only.
    let plain = Command::new("nbdinfo")
        .env("LIBNBD_DEBUG", "1")
        .arg(srv.uri())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&plain.stderr);
    assert!(!plain.status.success(), "a plain client got in: {err}");
    assert!(
        err.contains("server error message: TLS is required"),
        "{err}"
    );
    assert!(!err.contains("export-size"), "{err}");
    srv.stop();
}

#[test]
fn allowed_tls_serves_plain_and_tls_clients() {
    require!("nbdinfo");
    require_openssl!();
    let (_dir, certs) = certificates();
    let srv = start(
        MemExport::new(vec![0; 8192], 512, false),
        with_tls(&certs, false, false),
    );
    for uri in [srv.uri(), nbds_uri(&srv.sock, &certs)] {
        let out = nbdinfo(&uri);
        assert!(out.status.success(), "{uri}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["TLS"], uri.starts_with("nbds"), "{uri}: {v}");
    }
    srv.stop();
}

#[test]
fn nbdcopy_over_tls_is_byte_exact_in_and_out() {
    require!("nbdcopy");
    require_openssl!();
    let (dir, certs) = certificates();
    let size = 24 * 1024 * 1024 + 512 * 7;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), with_tls(&certs, false, true));
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    let plain = pattern(size, 15);
    std::fs::write(&input, &plain).unwrap();
    let uri = nbds_uri(&srv.sock, &certs);
    let copy = || {
        let mut c = Command::new("nbdcopy");
        c.args(["--connections", "4", "--requests", "16"]);
        c
    };
    run(copy().arg("--flush").arg(&input).arg(&uri));
    assert!(
        export.snapshot() == plain,
        "the export differs after nbdcopy in"
    );
    run(copy().arg(&uri).arg(&output));
    assert!(
        std::fs::read(&output).unwrap() == plain,
        "what nbdcopy read over TLS differs"
    );
    srv.stop();
}

#[test]
fn qemu_img_with_tls_creds_reads_and_writes_the_plaintext() {
    require!("qemu-img");
    require_openssl!();
    let (dir, certs) = certificates();
    let size = 4 << 20;
    let plain = pattern(size, 16);
    let export = MemExport::new(plain.clone(), 512, false);
    let srv = start(export.clone(), with_tls(&certs, true, true));
    let (object, image) = qemu_tls_args(&srv.sock, &certs);
    let out = dir.path().join("out.raw");
    run(Command::new("qemu-img")
        .args([
            "convert",
            "-O",
            "raw",
            "--object",
            &object,
            "--image-opts",
            &image,
        ])
        .arg(&out));
    assert!(
        std::fs::read(&out).unwrap() == plain,
        "qemu-img read other data"
    );
    // And the other way: a new pattern written through qemu-img lands as it is.
    let new = pattern(size, 17);
    std::fs::write(&out, &new).unwrap();
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "--object", &object])
        .arg(&out)
        .args(["--target-image-opts", &image]));
    assert!(export.snapshot() == new, "qemu-img's writes differ");
    srv.stop();
}

#[test]
fn peer_verification_refuses_clients_without_a_certificate_of_the_ca() {
    require!("nbdinfo");
    require_openssl!();
    let (dir, certs) = certificates();
    let srv = start(
        MemExport::new(vec![0; 8192], 512, false),
        with_tls(&certs, true, true),
    );
    // The client's certificate is in the directory: admitted.
    let out = nbdinfo(&nbds_uri(&srv.sock, &certs));
    assert!(out.status.success(), "{out:?}");
    // The CA alone: the server refuses the handshake.
    let ca_only = dir.path().join("ca-only");
    std::fs::create_dir(&ca_only).unwrap();
    std::fs::copy(certs.join("ca-cert.pem"), ca_only.join("ca-cert.pem")).unwrap();
    let out = nbdinfo(&nbds_uri(&srv.sock, &ca_only));
    assert!(!out.status.success(), "admitted without a certificate");
    // A client certificate from another CA: refused too.
    let other = dir.path().join("other");
    make_certificates(&other, "another CA");
    let mixed = dir.path().join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    std::fs::copy(certs.join("ca-cert.pem"), mixed.join("ca-cert.pem")).unwrap();
    for f in ["client-cert.pem", "client-key.pem"] {
        std::fs::copy(other.join(f), mixed.join(f)).unwrap();
    }
    let out = nbdinfo(&nbds_uri(&srv.sock, &mixed));
    assert!(
        !out.status.success(),
        "admitted with another CA's certificate"
    );
    // And a client that trusts another CA refuses this server.
    let out = nbdinfo(&format!(
        "nbds+unix:///?socket={}&tls-certificates={}&tls-verify-peer=true",
        srv.sock.display(),
        other.display()
    ));
    assert!(
        !out.status.success(),
        "the client trusted an unknown server"
    );
    srv.stop();
}

/// The replies to one option, read from `r`: (type, data) up to the final one.
fn option_replies(r: &mut impl Read, opt: u32) -> Vec<(u32, Vec<u8>)> {
    let mut v = Vec::new();
    loop {
        let mut h = [0u8; 20];
        r.read_exact(&mut h).unwrap();
        assert_eq!(u32::from_be_bytes(h[8..12].try_into().unwrap()), opt);
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        let mut data = vec![0u8; len];
        r.read_exact(&mut data).unwrap();
        v.push((kind, data));
        if kind != proto::REP_INFO && kind != proto::REP_SERVER {
            return v;
        }
    }
}

/// Greets, asks for TLS and runs the crate's client side of it with `name`.
fn starttls(
    sock: &Path,
    client: &ClientTls,
    name: Option<&str>,
) -> std::io::Result<(
    sectorcrypt_nbd::tls::TlsReader<UnixStream>,
    sectorcrypt_nbd::tls::TlsWriter<UnixStream>,
)> {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(&option_bytes(proto::OPT_LIST, &[])).unwrap();
    let r = option_replies(&mut s, proto::OPT_LIST);
    assert_eq!(r[0].0, proto::REP_ERR_TLS_REQD);
    s.write_all(&option_bytes(proto::OPT_STARTTLS, &[]))
        .unwrap();
    assert_eq!(
        option_replies(&mut s, proto::OPT_STARTTLS),
        [(proto::REP_ACK, vec![])]
    );
    client.connect(name, s.try_clone().unwrap(), s)
}

#[test]
fn the_crates_client_side_talks_to_the_server_over_tls() {
    require_openssl!();
    let (dir, certs) = certificates();
    let size = 1 << 20;
    let export = MemExport::new(pattern(size, 18), 512, false);
    let srv = start(export.clone(), with_tls(&certs, true, true));
    let client = ClientTls::from_dir(&certs).unwrap();

    // Checked by name, then by the chain alone (a Unix socket has no host name).
    for name in [Some("localhost"), None] {
        let (mut r, mut w) = starttls(&srv.sock, &client, name).unwrap();
        w.write_all(&option_bytes(proto::OPT_STARTTLS, &[]))
            .unwrap();
        let again = option_replies(&mut r, proto::OPT_STARTTLS);
        assert_eq!(again[0].0, proto::REP_ERR_INVALID, "TLS twice");
        let mut go = 3u32.to_be_bytes().to_vec();
        go.extend_from_slice(b"vol\0\0");
        w.write_all(&option_bytes(proto::OPT_GO, &go)).unwrap();
        let r_go = option_replies(&mut r, proto::OPT_GO);
        assert_eq!(r_go.last().unwrap().0, proto::REP_ACK);
        // A write sent from another thread while this one waits for its reply, then a
        // read of it (after the write's reply: requests in flight have no order).
        let data = pattern(300_000, 19);
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            let mut msg = request_bytes(proto::CMD_WRITE, 0, 1, 4096, sent.len() as u32);
            msg.extend_from_slice(&sent);
            w.write_all(&msg).unwrap();
            w
        });
        let mut reply = [0u8; 16];
        r.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[4..8], &[0; 4], "write failed");
        assert_eq!(u64::from_be_bytes(reply[8..].try_into().unwrap()), 1);
        let mut w = writer.join().unwrap();
        w.write_all(&request_bytes(proto::CMD_READ, 0, 2, 4096, 300_000))
            .unwrap();
        r.read_exact(&mut reply).unwrap();
        assert_eq!(u64::from_be_bytes(reply[8..].try_into().unwrap()), 2);
        let mut back = vec![0u8; data.len()];
        r.read_exact(&mut back).unwrap();
        assert!(back == data, "read back over TLS differs");
        w.write_all(&request_bytes(proto::CMD_DISC, 0, 3, 0, 0))
            .unwrap();
        // The server ends with a close_notify: a clean end of stream.
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
    assert!(export.snapshot()[4096..304_096] == pattern(300_000, 19)[..]);

    // A name the certificate does not hold, and a CA that did not sign it: refused.
    assert!(starttls(&srv.sock, &client, Some("example.com")).is_err());
    let other = dir.path().join("other");
    make_certificates(&other, "another CA");
    let stranger = ClientTls::from_dir(&other).unwrap();
    assert!(starttls(&srv.sock, &stranger, None).is_err());
    srv.stop();
}

#[test]
fn stalled_tls_clients_are_cut_off_in_time() {
    require_openssl!();
    let (_dir, certs) = certificates();
    let limit = std::time::Duration::from_millis(300);
    let config = ServerConfig {
        handshake_timeout: limit,
        read_timeout: limit,
        ..with_tls(&certs, false, true)
    };
    let srv = start(MemExport::new(vec![0; 8192], 512, false), config);

    // STARTTLS acknowledged, then no TLS handshake: closed at the handshake deadline.
    let mut s = UnixStream::connect(&srv.sock).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(&option_bytes(proto::OPT_STARTTLS, &[]))
        .unwrap();
    assert_eq!(
        option_replies(&mut s, proto::OPT_STARTTLS),
        [(proto::REP_ACK, vec![])]
    );
    let t0 = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty());
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t0.elapsed()
    );

    // Over TLS, half a request header and then nothing: closed after the read timeout.
    let client = ClientTls::from_dir(&certs).unwrap();
    let (mut r, mut w) = starttls(&srv.sock, &client, None).unwrap();
    let mut go = 3u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"vol\0\0");
    w.write_all(&option_bytes(proto::OPT_GO, &go)).unwrap();
    assert_eq!(
        option_replies(&mut r, proto::OPT_GO).last().unwrap().0,
        proto::REP_ACK
    );
    w.write_all(&request_bytes(proto::CMD_READ, 0, 1, 0, 512)[..10])
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no reply to half a request");
    let waited = t0.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(250)
            && waited < std::time::Duration::from_secs(5),
        "{waited:?}"
    );
    srv.stop();
}

#[test]
fn silent_tcp_connections_evict_no_client_authenticated_over_tls() {
    // TLS required with client certificates, four slots: a client that authenticated
    // and chose the export sits idle while 70 connections that never send a byte come
    // and go. It stays connected and served; they are closed at the handshake deadline.
    require_openssl!();
    let (_dir, certs) = certificates();
    let config = ServerConfig {
        max_connections: 4,
        handshake_timeout: std::time::Duration::from_millis(1500),
        ..with_tls(&certs, true, true)
    };
    let export = MemExport::new(pattern(8192, 27), 512, false);
    let listen = Listen::tcp("127.0.0.1:0").unwrap();
    let server = Server::bind(&listen, export, config).unwrap();
    let Listen::Tcp(addr) = server.local().clone() else {
        panic!("tcp");
    };
    let handle = server.shutdown_handle();
    let t = std::thread::spawn(move || server.run());

    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    s.write_all(&option_bytes(proto::OPT_STARTTLS, &[]))
        .unwrap();
    assert_eq!(
        option_replies(&mut s, proto::OPT_STARTTLS),
        [(proto::REP_ACK, vec![])]
    );
    let client = ClientTls::from_dir(&certs).unwrap();
    let (r, w) = client
        .connect(Some("localhost"), s.try_clone().unwrap(), s)
        .unwrap();
    let mut idle = Split(r, w);
    let mut go = 3u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"vol\0\0");
    idle.write_all(&option_bytes(proto::OPT_GO, &go)).unwrap();
    let replies = option_replies(&mut idle, proto::OPT_GO);
    assert_eq!(replies.last().unwrap().0, proto::REP_ACK);
    let want = |at: usize| pattern(8192, 27)[at..at + 16].to_vec();
    assert_eq!(read_over(&mut idle, 1, 0, 16).unwrap(), want(0));

    std::thread::sleep(std::time::Duration::from_millis(50));
    let t0 = std::time::Instant::now();
    let silent = silent_tcp(addr, 70);
    assert_eq!(
        read_over(&mut idle, 2, 512, 16).expect("the TLS client must stay connected"),
        want(512)
    );
    all_closed_in(silent, t0, std::time::Duration::from_secs(6));
    assert_eq!(read_over(&mut idle, 3, 4096, 16).unwrap(), want(4096));
    handle.shutdown();
    t.join().unwrap().unwrap();
}

/// A TLS session's reading and writing halves as one stream.
struct Split<R, W>(R, W);

impl<R: Read, W> Read for Split<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R, W: Write> Write for Split<R, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.1.flush()
    }
}
