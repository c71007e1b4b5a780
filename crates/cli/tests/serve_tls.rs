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
        set_mode(&broken.join("server-key.pem"), 0o600);
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

/// Sets `path`'s permission bits.
fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs `serve SCRATCH --onetime ARGS` until it listens (on `sock`, or on TCP `addr`),
/// stops it with SIGTERM, and gives its standard error; it must have exited cleanly.
fn served_log(args: &[&str], sock: Option<&std::path::Path>, addr: Option<&str>) -> String {
    let mut child = volumes::spawn(args, std::process::Stdio::piped());
    let t0 = std::time::Instant::now();
    loop {
        let ready = match (sock, addr) {
            (Some(p), _) => p.exists(),
            (None, Some(a)) => std::net::TcpStream::connect(a).is_ok(),
            (None, None) => unreachable!(),
        };
        if ready {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "serve exited");
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "not listening"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    run(Command::new("kill").arg(child.id().to_string()));
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{log}");
    log
}

#[test]
fn the_any_local_user_warning_shows_only_when_any_local_user_can_connect() {
    require_openssl!();
    let (dir, certs, img) = scratch_with_certificates();
    let warned = |log: &str| log.contains("any local user can connect");
    let port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let base = ["serve", s(&img), "--onetime"];
    // TCP: TLS required with client certificates lets only their holders in.
    for (tls, want) in [
        (
            &["--tls-certificates", s(&certs), "--tls-verify-peer"][..],
            false,
        ),
        (&["--tls-certificates", s(&certs)][..], true),
        (
            &[
                "--tls",
                "on",
                "--tls-certificates",
                s(&certs),
                "--tls-verify-peer",
            ][..],
            true,
        ),
        (&[][..], true),
    ] {
        let addr = format!("127.0.0.1:{}", port());
        let args = [&base[..], &["--listen", &addr], tls].concat();
        let log = served_log(&args, None, Some(&addr));
        assert_eq!(warned(&log), want, "{tls:?}: {log}");
    }
    // A Unix socket open to others (0666): a warning only when others can reach it,
    // every directory above it letting them through.
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    set_mode(&private, 0o700);
    let public = dir.path().join("public");
    std::fs::create_dir(&public).unwrap();
    set_mode(&public, 0o755);
    set_mode(dir.path(), 0o755);
    for (sub, mode, tls, want) in [
        (&private, "0666", &[][..], false),
        (&public, "0600", &[][..], false),
        (&public, "0660", &[][..], false),
        (&public, "0666", &[][..], true),
        (
            &public,
            "0666",
            &["--tls-certificates", s(&certs), "--tls-verify-peer"][..],
            false,
        ),
    ] {
        let sock = sub.join("s.sock");
        let args = [
            &base[..],
            &["--socket", s(&sock), "--socket-mode", mode],
            tls,
        ]
        .concat();
        let log = served_log(&args, Some(&sock), None);
        assert_eq!(warned(&log), want, "{sub:?} {mode} {tls:?}: {log}");
    }
}

#[test]
fn a_server_key_open_to_group_or_others_is_refused_as_ssh_does() {
    require_openssl!();
    let (dir, certs, img) = scratch_with_certificates();
    let sock = dir.path().join("k.sock");
    let key = certs.join("server-key.pem");
    for mode in [0o644, 0o640, 0o604, 0o602, 0o620] {
        set_mode(&key, mode);
        let args = [
            "serve",
            s(&img),
            "--onetime",
            "--socket",
            s(&sock),
            "--tls-certificates",
            s(&certs),
        ];
        let out = served::refused(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "mode {mode:o}: {err}");
        assert!(
            err.contains(&format!(
                "server-key.pem: permissions {mode:04o} are too open"
            )),
            "{err}"
        );
        assert!(!sock.exists(), "nothing was served");
    }
    set_mode(&key, 0o600);
    let srv = Served::start(
        &[s(&img), "--onetime", "--tls-certificates", s(&certs)],
        &sock,
    );
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "{log}");
}
