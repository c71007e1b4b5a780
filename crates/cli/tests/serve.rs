//! `sectorcrypt serve` as a separate process, used by real NBD clients (nbdcopy, nbdinfo,
//! qemu-io): a one-time volume round trip, a clean stop on SIGTERM and SIGINT, refused
//! listen addresses, who may connect (the socket's mode, the warning on TCP).

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use rand::{RngCore, SeedableRng};
use sectorcrypt_testkit::{require, run_stdout as run};
use served::Served;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{code, ok, s, sc};

/// A temporary directory holding a 1 MiB image of zeros for `--onetime`.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    (dir, img)
}

#[test]
fn onetime_volume_round_trips_through_nbdcopy_and_stops_cleanly() {
    require!("nbdcopy", "qemu-io");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    let size = 16 << 20;
    std::fs::write(&img, vec![0u8; size]).unwrap();
    let mut plain = vec![0u8; size];
    rand::rngs::StdRng::seed_from_u64(5).fill_bytes(&mut plain);
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    std::fs::write(&input, &plain).unwrap();

    let sock = dir.path().join("s.sock");
    let srv = Served::start(&[s(&img), "--onetime"], &sock);
    let info = run(Command::new("nbdinfo").arg("--size").arg(srv.uri()));
    assert_eq!(info.trim(), size.to_string());
    run(Command::new("nbdcopy")
        .args(["--connections", "4", "--threads", "4", "--flush"])
        .arg(&input)
        .arg(srv.uri()));
    // Odd offsets through qemu-io, checked by qemu-io's own pattern verification.
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 170 12345 99999", &srv.uri()]));
    plain[12345..12345 + 99999].fill(170);
    run(Command::new("nbdcopy")
        .args(["--connections", "4"])
        .arg(srv.uri())
        .arg(&output));
    assert!(
        std::fs::read(&output).unwrap() == plain,
        "round trip differs"
    );
    // What reached the file is ciphertext.
    let stored = std::fs::read(&img).unwrap();
    assert!(stored[..4096] != plain[..4096]);
    assert!(stored[12345..12345 + 4096] != plain[12345..12345 + 4096]);

    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");
    assert!(log.contains("export flushed"), "{log}");
    assert!(!sock.exists(), "socket left behind");
}

#[test]
fn sigint_stops_the_server_cleanly() {
    let (dir, img) = scratch();
    let sock = dir.path().join("s.sock");
    let srv = Served::start(&[s(&img), "--onetime"], &sock);
    let (status, log) = srv.stop("INT");
    assert!(status.success(), "exit {status}: {log}");
    assert!(!sock.exists());
}

#[test]
fn non_loopback_addresses_and_bad_arguments_are_refused() {
    let (dir, img) = scratch();
    let onetime = ["serve", s(&img), "--onetime"];
    for addr in ["0.0.0.0:10809", "10.1.2.3:10809", "not-an-address"] {
        let out = sc(&[&onetime[..], &["--listen", addr]].concat(), b"");
        assert_eq!(code(&out), 2, "{addr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("loopback") || err.contains("address"), "{err}");
    }
    // Neither --socket nor --listen.
    assert_eq!(code(&sc(&onetime, b"")), 2);
    // A missing image.
    let sock = dir.path().join("s");
    let missing = [
        "serve",
        "/nonexistent/x.img",
        "--onetime",
        "--socket",
        s(&sock),
    ];
    assert_eq!(code(&sc(&missing, b"")), 2);
    // A regular file where the socket should go is not replaced.
    let taken = dir.path().join("taken");
    std::fs::write(&taken, b"keep").unwrap();
    let out = sc(&[&onetime[..], &["--socket", s(&taken)]].concat(), b"");
    assert_eq!(code(&out), 2);
    assert_eq!(std::fs::read(&taken).unwrap(), b"keep");
}

#[test]
fn unix_sockets_are_0600_whatever_the_umask_unless_widened() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, img) = scratch();
    // Every user may enter the directory: only the socket's mode keeps them out.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("s.sock");
    let mode = || {
        std::fs::symlink_metadata(&sock)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    for (umask, extra, want) in [
        ("000", &[][..], 0o600),
        ("077", &[][..], 0o600),
        ("000", &["--socket-mode", "0660"][..], 0o660),
        ("077", &["--socket-mode", "666"][..], 0o666),
    ] {
        let args = [&[s(&img), "--onetime"][..], extra].concat();
        let srv = Served::start_umask(umask, &args, &sock);
        assert_eq!(mode(), want, "umask {umask} {extra:?}: mode {:o}", mode());
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "{log}");
        // Mode 0666 lets every local user in, and the server says so.
        assert_eq!(log.contains("any local user"), want == 0o666, "{log}");
    }
    for bad in ["0800", "abc", "01777", "", "-1"] {
        let args = ["serve", s(&img), "--onetime", "--socket", s(&sock)];
        let out = sc(&[&args[..], &["--socket-mode", bad]].concat(), b"");
        assert_eq!(code(&out), 2, "--socket-mode {bad:?}");
        assert!(!sock.exists());
    }
}

#[test]
fn listening_on_tcp_says_that_any_local_user_can_connect() {
    let (_dir, img) = scratch();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let args = ["serve", s(&img), "--onetime", "--listen", &addr];
    let mut child = volumes::spawn(&args, Stdio::piped());
    let t0 = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "serve exited");
        assert!(t0.elapsed() < Duration::from_secs(20), "not listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    run(Command::new("kill").arg(child.id().to_string()));
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let warnings: Vec<_> = log
        .lines()
        .filter(|l| l.contains("any local user can connect"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains(&addr), "{log}");
}

/// A LUKS1 volume of `size` bytes made by qemu-img, and its passphrase file.
fn qemu_luks(dir: &Path, size: usize) -> (PathBuf, PathBuf) {
    let img = dir.join("luks.img");
    let pass = volumes::key_file(dir, "pass", "correct horse");
    volumes::qemu_luks(&img, &pass, size);
    (img, pass)
}

/// The plaintext of a qemu LUKS image, decrypted by qemu-img (an independent reader).
fn qemu_plaintext(dir: &Path, img: &Path, pass: &Path) -> Vec<u8> {
    let out = dir.join("qemu-plain.raw");
    run(Command::new("qemu-img")
        .arg("convert")
        .arg("--object")
        .arg(format!("secret,id=s0,file={}", pass.display()))
        .arg("--image-opts")
        .arg(format!(
            "driver=luks,key-secret=s0,file.filename={}",
            img.display()
        ))
        .args(["-O", "raw"])
        .arg(&out));
    std::fs::read(&out).unwrap()
}

#[test]
fn luks_volume_flush_then_kill_9_loses_nothing_acknowledged() {
    require!("nbdcopy", "qemu-img", "qemu-io");
    let dir = tempfile::tempdir().unwrap();
    let size = 8 << 20;
    let (img, pass) = qemu_luks(dir.path(), size);
    let mut plain = vec![0u8; size];
    rand::rngs::StdRng::seed_from_u64(9).fill_bytes(&mut plain);
    let input = dir.path().join("in.bin");
    std::fs::write(&input, &plain).unwrap();

    let sock = dir.path().join("s.sock");
    let mut srv = Served::start(&[s(&img), "--key-file", s(&pass)], &sock);
    // nbdcopy --flush returns after the server acknowledged the flush.
    run(Command::new("nbdcopy")
        .args(["--connections", "2", "--flush"])
        .arg(&input)
        .arg(srv.uri()));
    // Odd-sized writes then an explicit flush, in one qemu-io session.
    run(Command::new("qemu-io").args([
        "-f",
        "raw",
        "-c",
        "write -P 66 777 5000",
        "-c",
        "aio_write -P 67 1000001 333",
        "-c",
        "aio_flush",
        "-c",
        "flush",
        &srv.uri(),
    ]));
    plain[777..5777].fill(66);
    plain[1000001..1000334].fill(67);
    let mut child = srv.child.take().unwrap();
    child.kill().unwrap(); // SIGKILL: no clean shutdown
    child.wait().unwrap();

    assert!(
        qemu_plaintext(dir.path(), &img, &pass) == plain,
        "acknowledged data missing after kill -9 (read by qemu-img)"
    );
    // And through a new server.
    let _ = std::fs::remove_file(&sock);
    let srv = Served::start(&[s(&img), "--key-file", s(&pass), "--read-only"], &sock);
    let output = dir.path().join("out.bin");
    run(Command::new("nbdcopy").arg(srv.uri()).arg(&output));
    assert!(std::fs::read(&output).unwrap() == plain);
    let out = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write -P 1 0 512", &srv.uri()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a read-only export accepted a write");
    let (status, _) = srv.stop("TERM");
    assert!(status.success());
}

#[test]
fn wrong_passphrase_exits_3_and_serves_nothing() {
    require!("qemu-img");
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = qemu_luks(dir.path(), 1 << 20);
    let wrong = volumes::key_file(dir.path(), "wrong", "incorrect");
    let sock = dir.path().join("s.sock");
    let args = [
        "serve",
        s(&img),
        "--key-file",
        s(&wrong),
        "--socket",
        s(&sock),
    ];
    let out = sc(&args, b"");
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!sock.exists());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("incorrect"),
        "the passphrase was printed: {err}"
    );
}

#[test]
fn luks2_4096_byte_sectors_advertise_their_block_size() {
    require!("nbdinfo", "qemu-io");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("l2.img");
    let pass = volumes::key_file(dir.path(), "pass", "four k sectors");
    let args = ["format", s(&img), "--size", "24M", "--sector-size", "4096"];
    let more = ["--batch", "--key-file", s(&pass)];
    ok(sc(&[&args[..], &volumes::FAST, &more].concat(), b""));
    let sock = dir.path().join("s.sock");
    let srv = Served::start(&[s(&img), "--key-file", s(&pass)], &sock);
    let json = run(Command::new("nbdinfo").arg("--json").arg(srv.uri()));
    let has = |k: &str, v: &str| {
        json.replace([' ', '\n'], "")
            .contains(&format!("\"{k}\":{v}"))
    };
    // 24 MiB minus LUKS2's 16 MiB of metadata.
    assert!(has("export-size", &(8u64 << 20).to_string()), "{json}");
    assert!(has("block_size_preferred", "4096"), "{json}");
    assert!(has("block_size_minimum", "1"), "{json}");
    // Odd offsets inside 4096-byte sectors: read-modify-write in the engine. (The data
    // area of a new volume is not wiped: it reads as noise until written; write -z stores
    // encrypted zeros.)
    run(Command::new("qemu-io").args([
        "-f",
        "raw",
        "-c",
        "write -P 90 4095 4099",
        "-c",
        "read -P 90 4095 4099",
        "-c",
        "write -z 0 4095",
        "-c",
        "read -P 0 0 4095",
        "-c",
        "read -P 90 4095 4099",
        &srv.uri(),
    ]));
    let (status, _) = srv.stop("TERM");
    assert!(status.success());
}

#[test]
fn trim_is_offered_only_with_allow_discards_and_punches_holes() {
    require!("nbdinfo", "qemu-io");
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 4 << 20]).unwrap();
    let sock = dir.path().join("s.sock");
    let flat = |j: &str| j.replace([' ', '\n'], "");

    let srv = Served::start(&[s(&img), "--onetime"], &sock);
    let json = flat(&run(Command::new("nbdinfo").arg("--json").arg(srv.uri())));
    assert!(json.contains("\"can_trim\":false"), "{json}");
    srv.stop("TERM");

    let srv = Served::start(&[s(&img), "--onetime", "--allow-discards"], &sock);
    let json = flat(&run(Command::new("nbdinfo").arg("--json").arg(srv.uri())));
    assert!(json.contains("\"can_trim\":true"), "{json}");
    let before = std::fs::metadata(&img).unwrap().blocks();
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "discard 1000 2097152", &srv.uri()]));
    let after = std::fs::metadata(&img).unwrap().blocks();
    // Whole sectors inside the range became a hole (tmpfs and ext4 punch holes); the
    // partial sectors at the edges stay.
    if after == before {
        eprintln!("skipped hole check: the temporary file system does not punch holes");
    } else {
        assert!(before - after >= 2 * 2048 - 16, "{before} -> {after}");
    }
    let (status, _) = srv.stop("TERM");
    assert!(status.success());
}

#[test]
fn a_socket_path_over_107_bytes_is_refused_at_start() {
    let (dir, img) = scratch();
    let base = dir.path().as_os_str().len();
    let long = dir.path().join("s".repeat(108 - base - 1));
    assert_eq!(s(&long).len(), 108);
    let out = served::refused(&["serve", s(&img), "--onetime", "--socket", s(&long)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("is 108 bytes long") && err.contains("at most 107 bytes"),
        "{err}"
    );
    assert!(!long.exists());
}

#[test]
fn serve_stops_when_its_socket_is_removed() {
    let (dir, img) = scratch();
    let sock = dir.path().join("gone.sock");
    let mut srv = Served::start(&[s(&img), "--onetime"], &sock);
    std::fs::remove_file(&sock).unwrap();
    let child = srv.child.as_mut().unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still serving with its socket removed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = srv.child.take().unwrap().wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("gone.sock was removed or replaced"), "{log}");
}
