//! `sectorcrypt serve` (and `geli onetime`) with TLS: `--tls-certificates DIR` (nbdkit's
//! file names), `--tls on|require|off`, `--tls-verify-peer`, used by nbdcopy, nbdinfo and
//! qemu-img over `nbds+unix://` / `tls-creds-x509`; a plain client refused when TLS is
//! required; the options' mistakes and bad certificate files as usage errors that name
//! the file and never show a key. Certificates are made per test with the openssl
//! command line; tests skip with a printed reason when a tool is missing.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use rand::{RngCore, SeedableRng};
use sectorcrypt_testkit::require_openssl;
use sectorcrypt_testkit::tls::{make_certificates, nbds_uri, qemu_tls_args};
use sectorcrypt_testkit::{require, run_stdout as run};
use served::Served;
use std::path::PathBuf;
use std::process::Command;
use support::{code, s, sc};

/// A temporary directory with certificates in `certs/`.
fn certificates() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    make_certificates(&certs, "sectorcrypt test CA");
    (dir, certs)
}

/// [`certificates`] and a 1 MiB image of zeros for `--onetime` beside them.
fn scratch_with_certificates() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, certs) = certificates();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    (dir, certs, img)
}

#[test]
fn a_luks_volume_written_by_qemu_reads_back_over_tls_and_plain_clients_are_refused() {
    require!("nbdcopy", "nbdinfo", "qemu-img");
    require_openssl!();
    let (dir, certs) = certificates();
    let d = dir.path();
    let size = 8 << 20;
    let img = d.join("luks.img");
    let pass = volumes::key_file(d, "pass", "correct horse");
    volumes::qemu_luks(&img, &pass, size);
    let mut plain = vec![0u8; size];
    rand::rngs::StdRng::seed_from_u64(15).fill_bytes(&mut plain);
    let input = d.join("plain.bin");
    std::fs::write(&input, &plain).unwrap();
    // qemu encrypts; sectorcrypt decrypts and serves over TLS.
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "--object"])
        .arg(format!("secret,id=s0,file={}", pass.display()))
        .arg(&input)
        .arg("--target-image-opts")
        .arg(format!(
            "driver=luks,key-secret=s0,file.filename={}",
            img.display()
        )));

    let sock = d.join("s.sock");
    let srv = Served::start(
        &[
            s(&img),
            "--key-file",
            s(&pass),
            "--tls-certificates",
            s(&certs),
        ],
        &sock,
    );
    let output = d.join("out.bin");
    run(Command::new("nbdcopy")
        .args(["--connections", "4"])
        .arg(nbds_uri(&sock, &certs))
        .arg(&output));
    assert!(
        std::fs::read(&output).unwrap() == plain,
        "the plaintext read over TLS differs from what qemu wrote"
    );
    let refused = Command::new("nbdinfo")
        .env("LIBNBD_DEBUG", "1")
        .arg(srv.uri())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a plain client got in");
    assert!(err.contains("TLS is required"), "{err}");
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");
    assert!(log.contains("over TLS"), "{log}");
    assert!(
        log.contains("without the required TLS") || log.contains("closed"),
        "{log}"
    );
}

#[test]
fn tls_on_admits_both_and_geli_onetime_takes_the_same_options() {
    require!("nbdinfo", "qemu-img");
    require_openssl!();
    let (dir, certs, img) = scratch_with_certificates();
    let d = dir.path();
    let sock = d.join("s.sock");
    let tls = ["--tls", "on", "--tls-certificates", s(&certs)];
    let srv = Served::start(&[&[s(&img), "--onetime"], &tls[..]].concat(), &sock);
    for uri in [srv.uri(), nbds_uri(&sock, &certs)] {
        assert_eq!(
            run(Command::new("nbdinfo").arg("--size").arg(&uri)).trim(),
            "1048576"
        );
    }
    // qemu-img writes a pattern over TLS and reads it back.
    let (object, image) = qemu_tls_args(&sock, &certs);
    let mut data = vec![0u8; 1 << 20];
    rand::rngs::StdRng::seed_from_u64(16).fill_bytes(&mut data);
    let src = d.join("src.bin");
    std::fs::write(&src, &data).unwrap();
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "--object", &object])
        .arg(&src)
        .args(["--target-image-opts", &image]));
    let back = d.join("back.bin");
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
        .arg(&back));
    assert!(std::fs::read(&back).unwrap() == data, "qemu-img round trip");
    assert!(
        std::fs::read(&img).unwrap() != data,
        "the file holds ciphertext"
    );
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");

    let gsock = d.join("g.sock");
    let geli = Served::start_command(
        &[
            "geli",
            "onetime",
            "--socket",
            s(&gsock),
            "--tls-certificates",
            s(&certs),
            "--tls-verify-peer",
            s(&img),
        ],
        &gsock,
    );
    let out = Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd+unix:///?socket={}", gsock.display()))
        .output()
        .unwrap();
    assert!(!out.status.success(), "TLS is required by default");
    assert_eq!(
        run(Command::new("nbdinfo")
            .arg("--size")
            .arg(nbds_uri(&gsock, &certs)))
        .trim(),
        "1048576"
    );
    let (status, log) = geli.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");
}

#[test]
fn tls_mistakes_are_usage_errors_naming_the_file_and_never_showing_a_key() {
    require_openssl!();
    let (dir, certs, img) = scratch_with_certificates();
    let d = dir.path();
    let sock = d.join("s.sock");
    let serve = |extra: &[&str]| {
        let args = [
            &["serve", s(&img), "--onetime", "--socket", s(&sock)],
            extra,
        ]
        .concat();
        let out = sc(&args, b"");
        (code(&out), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (c, err) = serve(&["--tls", "require"]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("needs --tls-certificates"), "{err}");
    let (c, err) = serve(&["--tls", "off", "--tls-certificates", s(&certs)]);
    assert_eq!(c, 2, "{err}");
    let (c, err) = serve(&["--tls-verify-peer"]);
    assert_eq!(c, 2, "{err}");
    let (c, err) = serve(&["--tls", "sometimes", "--tls-certificates", s(&certs)]);
    assert_eq!(c, 2, "{err}");

    // A directory without the key, a key that is not PEM, a key of another certificate.
    let broken = d.join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::copy(
        certs.join("server-cert.pem"),
        broken.join("server-cert.pem"),
    )
    .unwrap();
    let (c, err) = serve(&["--tls-certificates", s(&broken)]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("server-key.pem: no such file"), "{err}");
    // Not base64, then base64 that is no key: neither message quotes the file.
    for body in ["TOP-SECRET!KEY*MATERIAL", "TOPSECRETKEYMATERIAL"] {
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n");
        std::fs::write(broken.join("server-key.pem"), pem).unwrap();
        let (c, err) = serve(&["--tls-certificates", s(&broken)]);
        assert_eq!(c, 2, "{err}");
        assert!(err.contains("server-key.pem: "), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
    }
    let other = d.join("other");
    make_certificates(&other, "another CA");
    std::fs::copy(other.join("server-key.pem"), broken.join("server-key.pem")).unwrap();
    let (c, err) = serve(&["--tls-certificates", s(&broken)]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("server-key.pem"), "{err}");
    // --tls-verify-peer needs the CA.
    std::fs::copy(certs.join("server-key.pem"), broken.join("server-key.pem")).unwrap();
    let (c, err) = serve(&["--tls-certificates", s(&broken), "--tls-verify-peer"]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("ca-cert.pem: no such file"), "{err}");
    assert!(!sock.exists(), "nothing was served");
}
