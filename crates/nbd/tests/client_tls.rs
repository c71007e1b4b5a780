//! The client over TLS (`nbds://`, `nbds+unix://`): NBD_OPT_STARTTLS first, then the rest
//! of the handshake and every connection of a multi-conn client over TLS, against this
//! crate's server and nbdkit (`--tls=require`); a wrong CA, a wrong host name, a server
//! without TLS and a plain client to a server that requires TLS all refused in a clear
//! sentence, never a fallback to plaintext. Certificates are made per test with the
//! openssl command line; a test whose tools are missing is skipped with a printed reason.

use crate::client::round_trips;
use crate::support::{quiet, start, MemExport};
use sectorcrypt_nbd::client::{Client, ClientConfig, NbdUri};
use sectorcrypt_nbd::tls::ServerTls;
use sectorcrypt_nbd::ServerConfig;
use sectorcrypt_testkit::nbdkit::Nbdkit;
use sectorcrypt_testkit::tls::make_certificates;
use sectorcrypt_testkit::{pattern, require, require_openssl};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn connect(uri: &str) -> io::Result<Client> {
    let config = ClientConfig {
        timeout: Some(Duration::from_secs(10)),
        ..ClientConfig::default()
    };
    Client::connect(&NbdUri::parse(uri).unwrap(), config)
}

/// Two certificate authorities of their own: `certs/` and `other/`.
fn two_cas() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let other = dir.path().join("other");
    make_certificates(&certs, "sectorcrypt test CA");
    make_certificates(&other, "another CA");
    (dir, certs, other)
}

fn tls_server(certs: &Path, required: bool) -> ServerConfig {
    ServerConfig {
        tls: Some(ServerTls::from_dir(certs, false, required).unwrap()),
        ..quiet()
    }
}

fn unix(sock: &Path, export: &str, query: &str) -> String {
    format!("nbds+unix:///{export}?socket={}&{query}", sock.display())
}

#[test]
fn data_round_trips_over_tls_through_this_crates_server() {
    require_openssl!();
    let (_dir, certs, _) = two_cas();
    let export = MemExport::new(vec![0u8; 4 << 20], 4096, false);
    let srv = start(export.clone(), tls_server(&certs, true));
    let c = connect(&unix(
        &srv.sock,
        "vol",
        &format!("tls-certificates={}", certs.display()),
    ))
    .unwrap();
    round_trips(&c);
    assert!(export.flushes() > 0);
    // The server's certificate names localhost: a Unix socket may name it to check.
    let named = format!(
        "tls-certificates={}&tls-hostname=localhost",
        certs.display()
    );
    connect(&unix(&srv.sock, "vol", &named)).unwrap();
    drop(c);
    srv.stop();
}

#[test]
fn every_connection_of_a_multi_conn_client_speaks_tls_to_nbdkit() {
    require!("nbdkit");
    require_openssl!();
    let (dir, certs, _) = two_cas();
    let certs_arg = format!("--tls-certificates={}", certs.display());
    let kit = Nbdkit::unix(
        &dir.path().join("kit.sock"),
        &[
            "--tls=require",
            &certs_arg,
            "--filter=multi-conn",
            "memory",
            "8M",
            "multi-conn-mode=emulate",
        ],
    );
    let sock = kit.sock.clone().unwrap();
    let c = connect(&unix(
        &sock,
        "",
        &format!("tls-certificates={}", certs.display()),
    ))
    .unwrap();
    assert_eq!(c.connections(), 4, "nbdkit allows multi-conn");
    round_trips(&c);
    // And over TCP, the host name checked against the certificate's.
    let tcp = Nbdkit::tcp(&["--tls=require", &certs_arg, "memory", "1M"]);
    let uri = format!(
        "nbds://127.0.0.1:{}/?tls-certificates={}",
        tcp.port.unwrap(),
        certs.display()
    );
    let c = connect(&uri).unwrap();
    c.write_at(&pattern(4096, 5), 8192, false).unwrap();
    let mut back = vec![0u8; 4096];
    c.read_at(&mut back, 8192).unwrap();
    assert_eq!(back, pattern(4096, 5));
}

#[test]
fn a_wrong_ca_or_host_name_is_refused_unless_verification_is_off() {
    require_openssl!();
    let (_dir, certs, other) = two_cas();
    let srv = start(
        MemExport::new(vec![0u8; 1 << 20], 512, false),
        tls_server(&certs, true),
    );
    let wrong_ca = format!("tls-certificates={}", other.display());
    let e = connect(&unix(&srv.sock, "vol", &wrong_ca)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("TLS") && msg.contains("certificate"), "{msg}");
    let wrong_name = format!(
        "tls-certificates={}&tls-hostname=example.org",
        certs.display()
    );
    let e = connect(&unix(&srv.sock, "vol", &wrong_name)).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    // libnbd's tls-verify-peer=false: any certificate is taken.
    let off = format!("tls-certificates={}&tls-verify-peer=false", other.display());
    let c = connect(&unix(&srv.sock, "vol", &off)).unwrap();
    assert_eq!(c.size(), 1 << 20);
    let e = connect(&unix(&srv.sock, "vol", "tls-certificates=/nonexistent/dir")).unwrap_err();
    assert!(
        e.to_string().contains("/nonexistent/dir/ca-cert.pem"),
        "{e}"
    );
    let e = connect(&unix(&srv.sock, "vol", "tls-type=psk")).unwrap_err();
    assert!(e.to_string().contains("psk"), "{e}");
    drop(c);
    srv.stop();
}

#[test]
fn a_server_without_tls_is_never_used_in_plaintext_by_an_nbds_client() {
    require_openssl!();
    let (_dir, certs, _) = two_cas();
    let srv = start(MemExport::new(vec![0u8; 1 << 20], 512, false), quiet());
    let e = connect(&unix(
        &srv.sock,
        "vol",
        &format!("tls-certificates={}", certs.display()),
    ))
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("STARTTLS") && msg.contains("plaintext"),
        "{msg}"
    );
    srv.stop();
}

#[test]
fn a_plain_client_to_a_server_requiring_tls_is_told_to_use_nbds() {
    require_openssl!();
    let (_dir, certs, _) = two_cas();
    let srv = start(
        MemExport::new(vec![0u8; 1 << 20], 512, false),
        tls_server(&certs, true),
    );
    let e = connect(&format!("nbd+unix:///vol?socket={}", srv.sock.display())).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("requires TLS") && msg.contains("nbds"),
        "{msg}"
    );
    srv.stop();
}
