//! Volumes on NBD exports: every volume command given an NBD URI in place of the image
//! path, with nbdkit (`file` and `memory` plugins, the `error` and `delay` filters) as the
//! upstream; `serve URI` as an encrypting proxy used by nbdinfo, nbdcopy and qemu-img; the
//! exported bytes checked with cryptsetup and with sectorcrypt on a local copy. Skipped
//! with a printed reason where nbdkit (or another tool) is missing.

#[path = "support/remote_io.rs"]
mod remote_io;
#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use remote_io::{read_plain, write_and_read};
use sectorcrypt_nbd::client::{Client, ClientConfig, NbdUri};
use sectorcrypt_testkit::nbdkit::Nbdkit;
use sectorcrypt_testkit::{pattern, require, run};
use served::Served;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{code, ok, s, sc};
use volumes::{key_file, FAST};

/// What `sectorcrypt read` of a local image gives at `offset`.
fn read_local(img: &Path, key: &Path, offset: u64, len: usize) -> Vec<u8> {
    read_plain(s(img), key, offset, len)
}

#[test]
fn luks2_luks1_and_geli_volumes_are_read_and_written_through_nbd_uris() {
    require!("nbdkit", "cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = key_file(d, "k", "remote secret");
    let make = |name: &str, kind: &str| {
        let img = d.join(name);
        std::fs::File::create(&img)
            .unwrap()
            .set_len(24 << 20)
            .unwrap();
        match kind {
            "luks1" => {
                run(Command::new("cryptsetup")
                    .args(["luksFormat", "--type", "luks1", "--batch-mode"])
                    .args(["--pbkdf-force-iterations", "1000", "--key-file"])
                    .arg(&key)
                    .arg(&img));
            }
            _ => {
                let mut a = vec!["format", s(&img), "--type", kind, "--key-file", s(&key)];
                a.extend(FAST);
                a.push("--batch");
                ok(sc(&a, b""));
            }
        }
        img
    };
    for (i, kind) in ["luks2", "luks1", "geli"].into_iter().enumerate() {
        let img = make(&format!("{kind}.img"), kind);
        let file = format!("file={}", img.display());
        // Unix socket for one, loopback TCP for the others.
        let kit = if i == 0 {
            Nbdkit::unix(&d.join(format!("{kind}.sock")), &["file", &file])
        } else {
            Nbdkit::tcp(&["file", &file])
        };
        let uri = kit.uri();
        let dump = ok(sc(&["dump", &uri], b""));
        assert!(dump.to_lowercase().contains(&kind[..4]), "{kind}: {dump}");
        assert_eq!(
            code(&sc(&["test-key", &uri, "--key-file", s(&key)], b"")),
            0
        );
        let data = pattern(3 << 20, i as u64);
        write_and_read(&uri, &key, d, &data, 12345);
        drop(kit);
        // The ciphertext landed where the format puts it: the local file decrypts.
        assert!(read_local(&img, &key, 12345, data.len()) == data, "{kind}");
        if kind != "geli" {
            run(Command::new("cryptsetup")
                .args(["open", "--test-passphrase", "--key-file"])
                .arg(&key)
                .arg(&img));
        }
    }
}

#[test]
fn format_on_an_empty_memory_export_gives_a_volume_cryptsetup_opens() {
    require!("nbdkit", "nbdcopy", "cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = key_file(d, "k", "formatted remotely");
    for kind in ["luks2", "luks1"] {
        let kit = Nbdkit::unix(&d.join(format!("{kind}.sock")), &["memory", "40M"]);
        let uri = kit.uri();
        let mut a = vec![
            "format",
            &uri,
            "--type",
            kind,
            "--key-file",
            s(&key),
            "--batch",
        ];
        a.extend(FAST);
        ok(sc(&a, b""));
        // A --size that is not the export's is refused: the size comes from the export.
        let mut again = a.clone();
        again.extend(["--size", "20M"]);
        let out = sc(&again, b"");
        assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
        let data = pattern(1 << 20, 7);
        write_and_read(&uri, &key, d, &data, 4096);
        let copy = d.join(format!("{kind}.copy"));
        run(Command::new("nbdcopy").arg(&uri).arg(&copy));
        let dump =
            String::from_utf8(run(Command::new("cryptsetup").arg("luksDump").arg(&copy)).stdout)
                .unwrap();
        assert!(
            dump.contains(if kind == "luks2" {
                "Version:       \t2"
            } else {
                "Version:       \t1"
            }),
            "{dump}"
        );
        run(Command::new("cryptsetup")
            .args(["open", "--test-passphrase", "--key-file"])
            .arg(&key)
            .arg(&copy));
        assert!(read_local(&copy, &key, 4096, data.len()) == data, "{kind}");
        std::fs::remove_file(&copy).unwrap();
    }
}

#[test]
fn keyslot_header_and_erase_commands_work_on_an_nbd_export() {
    require!("nbdkit", "cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let k1 = key_file(d, "k1", "one");
    let k2 = key_file(d, "k2", "two");
    let kit = Nbdkit::unix(
        &d.join("k.sock"),
        &["file", &format!("file={}", img.display())],
    );
    let uri = kit.uri();
    let mut add = vec!["add-key", &uri, s(&k1), "--key-file", s(&k0)];
    add.extend(FAST);
    ok(sc(&add, b""));
    let mut change = vec!["change-key", &uri, s(&k2), "--key-file", s(&k1)];
    change.extend(FAST);
    ok(sc(&change, b""));
    assert_eq!(code(&sc(&["test-key", &uri, "--key-file", s(&k1)], b"")), 3);
    assert_eq!(code(&sc(&["test-key", &uri, "--key-file", s(&k2)], b"")), 0);
    let backup = d.join("hdr.bak");
    ok(sc(&["header", "backup", &uri, s(&backup)], b""));
    ok(sc(&["remove-key", &uri, "--key-file", s(&k2)], b""));
    assert_eq!(code(&sc(&["test-key", &uri, "--key-file", s(&k2)], b"")), 3);
    ok(sc(&["header", "restore", &uri, s(&backup), "--batch"], b""));
    assert_eq!(code(&sc(&["test-key", &uri, "--key-file", s(&k2)], b"")), 0);
    // cryptsetup agrees on the file behind the export.
    run(Command::new("cryptsetup")
        .args(["open", "--test-passphrase", "--key-file"])
        .arg(&k2)
        .arg(&img));
    ok(sc(&["erase", &uri, "--batch"], b""));
    let out = sc(&["test-key", &uri, "--key-file", s(&k0)], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no active keyslot"));
}

#[test]
fn serve_uri_is_an_encrypting_proxy_for_nbdcopy_nbdinfo_and_qemu_img() {
    require!("nbdkit", "nbdcopy", "nbdinfo", "qemu-img");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let kit = Nbdkit::unix(
        &d.join("up.sock"),
        &["file", &format!("file={}", img.display())],
    );
    let proxy = Served::start(&[&kit.uri(), "--key-file", s(&k0)], &d.join("proxy.sock"));
    let size: u64 =
        String::from_utf8(run(Command::new("nbdinfo").arg("--size").arg(proxy.uri())).stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
    assert_eq!(
        size,
        (20 << 20) - (16 << 20),
        "the data area of a 20 MiB LUKS2 volume"
    );
    let plain = pattern(size as usize, 11);
    let input = d.join("plain.bin");
    std::fs::write(&input, &plain).unwrap();
    run(Command::new("nbdcopy")
        .args(["--connections", "4", "--flush"])
        .arg(&input)
        .arg(proxy.uri()));
    let out = d.join("out.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(proxy.uri())
        .arg(&out));
    assert!(
        std::fs::read(&out).unwrap() == plain,
        "qemu-img read differs"
    );
    let (status, _) = proxy.stop("TERM");
    assert!(status.success());
    // What reached the upstream's file is ciphertext that decrypts locally.
    let stored = std::fs::read(&img).unwrap();
    assert!(stored[16 << 20..] != plain[..]);
    assert!(read_local(&img, &k0, 0, plain.len()) == plain);
}

/// A client of the proxy (this crate's own NBD client, with no retries).
fn proxy_client(srv: &Served) -> Client {
    let config = ClientConfig {
        timeout: Some(Duration::from_secs(20)),
        ..ClientConfig::default()
    };
    Client::connect(&NbdUri::parse(&srv.uri()).unwrap(), config).unwrap()
}

#[test]
fn an_upstream_eio_fails_exactly_that_request_through_the_proxy() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let trigger = d.join("trigger");
    let kit = Nbdkit::unix(
        &d.join("up.sock"),
        &[
            "--filter=error",
            "file",
            &format!("file={}", img.display()),
            "error-pread=EIO",
            "error-pread-rate=25%",
            &format!("error-file={}", trigger.display()),
        ],
    );
    let proxy = Served::start(&[&kit.uri(), "--key-file", s(&k0)], &d.join("p.sock"));
    let c = proxy_client(&proxy);
    let plain = pattern(4 << 20, 5);
    c.write_at(&plain, 0, false).unwrap();
    c.flush().unwrap();
    std::fs::write(&trigger, b"").unwrap();
    let (mut failed, mut good) = (0, 0);
    for i in 0..128usize {
        let mut buf = vec![0u8; 32768];
        match c.read_at(&mut buf, (i * 32768) as u64) {
            Ok(()) => {
                assert!(
                    buf == plain[i * 32768..(i + 1) * 32768],
                    "read {i}: wrong bytes"
                );
                good += 1;
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(5), "read {i}: {e}");
                failed += 1;
            }
        }
    }
    assert!(failed > 5 && good > 5, "{failed} failed, {good} good");
}

#[test]
fn a_vanished_or_stuck_upstream_gives_errors_within_the_timeout() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let file = format!("file={}", img.display());
    // Stuck: the upstream stops answering (nbdkit's pause filter); the proxy gives up
    // after 2 s and says EIO.
    let control = d.join("pause.ctl");
    let slow = Nbdkit::unix(
        &d.join("slow.sock"),
        &[
            "--filter=pause",
            "file",
            &file,
            &format!("pause-control={}", control.display()),
        ],
    );
    let proxy = Served::start(
        &[&slow.uri(), "--key-file", s(&k0), "--remote-timeout", "2"],
        &d.join("p1.sock"),
    );
    let c = proxy_client(&proxy);
    let mut buf = vec![0u8; 65536];
    c.read_at(&mut buf, 0).unwrap();
    let mut ctl = std::os::unix::net::UnixStream::connect(&control).unwrap();
    ctl.write_all(b"p").unwrap();
    let mut answer = [0u8; 1];
    ctl.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"P");
    let t0 = Instant::now();
    let e = c.read_at(&mut buf, 1 << 20).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    ctl.write_all(b"r").unwrap();
    drop((c, proxy, slow));
    // Killed: the upstream disappears under a working proxy.
    let mut kit = Nbdkit::unix(&d.join("up.sock"), &["file", &file]);
    let proxy = Served::start(
        &[&kit.uri(), "--key-file", s(&k0), "--remote-timeout", "5"],
        &d.join("p2.sock"),
    );
    let c = proxy_client(&proxy);
    c.read_at(&mut buf, 0).unwrap();
    kit.kill();
    let t0 = Instant::now();
    let e = c.read_at(&mut buf, 1 << 20).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn bad_nbd_and_nbds_uris_are_usage_errors() {
    let uri = "nbds://127.0.0.1/x?tls-certificates=/nonexistent";
    let out = sc(&["dump", uri], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("/nonexistent/ca-cert.pem"), "{err}");
    let out = sc(&["dump", "nbd+unix:///x"], b"");
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("socket"));
}

/// A URI that does not parse was quoted whole in the refusal, with the
/// password of its user information and the secret values of its query.
#[test]
fn a_bad_nbd_uri_is_refused_without_quoting_its_secrets() {
    const SECRET: &str = "pw-SECRET-9e2b";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0u8; 1 << 20]).unwrap();
    for (uri, says, shown) in [
        (
            format!("nbd://user:{SECRET}@127.0.0.1/x?tls-psk-file=/k/{SECRET}"),
            "unknown query parameter \"tls-psk-file\"",
            "nbd://127.0.0.1/x",
        ),
        (
            format!("nbds+unix:///x?socket=/s&password={SECRET}"),
            "unknown query parameter \"password\"",
            "nbds+unix:///x",
        ),
        (
            format!("nbd://user:{SECRET}@127.0.0.1:port/x"),
            "bad port",
            "nbd://127.0.0.1:port/x",
        ),
    ] {
        for args in [
            vec!["dump", uri.as_str()],
            vec!["serve", "--socket", "/nonexistent/s", uri.as_str()],
            vec!["dump", "--header", uri.as_str(), s(&data)],
        ] {
            let out = sc(&args, b"");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(code(&out), 2, "{args:?}: {err}");
            assert!(err.contains(says) && err.contains(shown), "{args:?}: {err}");
            assert!(!err.contains(SECRET), "{args:?}: the secret shows: {err}");
            assert!(!String::from_utf8_lossy(&out.stdout).contains(SECRET));
        }
    }
}

/// A LUKS2 volume with a detached header: `d/hdr.img` and 8 MiB of data in `d/data.img`.
fn detached_volume(d: &Path, key: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (hdr, data) = (d.join("hdr.img"), d.join("data.img"));
    std::fs::write(&data, vec![0u8; 8 << 20]).unwrap();
    let mut args = vec![
        "format",
        s(&data),
        "--header",
        s(&hdr),
        "--key-file",
        s(key),
    ];
    args.extend(FAST);
    ok(sc(&args, b""));
    (hdr, data)
}

/// `mount` of an NBD URI shows the same plaintext as `read` of it, and a detached header
/// can itself live on an export (`--header URI`) with the data in a local file.
#[test]
fn mount_and_a_detached_header_take_uris_too() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k = key_file(d, "k", "remote header");
    // Detached: header in hdr.img (exported), data in data.img (local).
    let (hdr, data) = detached_volume(d, &k);
    let kit = Nbdkit::unix(
        &d.join("h.sock"),
        &["file", &format!("file={}", hdr.display())],
    );
    let plain = pattern(100_000, 5);
    let input = d.join("in");
    std::fs::write(&input, &plain).unwrap();
    let remote = ["--header", &kit.uri(), "--key-file", s(&k)];
    ok(sc(
        &[
            &["write", s(&data), "--input", s(&input), "--offset", "777"][..],
            &remote,
        ]
        .concat(),
        b"",
    ));
    let local = ["--header", s(&hdr), "--key-file", s(&k)];
    let read = |h: &[&str]| {
        support::ok_bytes(sc(
            &[
                &["read", s(&data), "--offset", "777", "--length", "100000"][..],
                h,
            ]
            .concat(),
            b"",
        ))
    };
    assert!(read(&remote) == plain, "read with the header on the export");
    assert!(read(&local) == plain, "the same header read as a file");

    if !Path::new("/dev/fuse").exists() || !sectorcrypt_testkit::have("fusermount3") {
        return sectorcrypt_testkit::skipped!(
            "skipped the mount part: no /dev/fuse or fusermount3"
        );
    }
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let kit = Nbdkit::unix(
        &d.join("m.sock"),
        &["file", &format!("file={}", img.display())],
    );
    let uri = kit.uri();
    write_and_read(&uri, &k0, d, &pattern(300_000, 8), 12_345);
    let mp = d.join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let mp = std::fs::canonicalize(&mp).unwrap();
    ok(sc(&["mount", &uri, s(&mp), "--key-file", s(&k0)], b""));
    let shown = std::fs::read(mp.join("disk"));
    volumes::unmount(&mp);
    let whole = support::ok_bytes(sc(&["read", &uri, "--key-file", s(&k0)], b""));
    assert!(
        shown.unwrap() == whole,
        "the mounted disk of a URI is its plaintext"
    );
}

/// The FUSE mount runs the kernel's concurrent requests at once: four readers of a volume
/// whose upstream takes 2 s per read finish in about 2 s, not 8 (on the one session
/// thread they ran one after the other), and each gets its own bytes.
#[test]
fn a_mount_serves_concurrent_reads_at_once() {
    require!("nbdkit");
    if !Path::new("/dev/fuse").exists() || !sectorcrypt_testkit::have("fusermount3") {
        return sectorcrypt_testkit::skipped!("skipped: no /dev/fuse or fusermount3");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k = key_file(d, "k", "slow upstream");
    // A detached header (local) so that unlocking reads nothing from the slow export.
    let (hdr, data) = detached_volume(d, &k);
    let plain = pattern(8 << 20, 21);
    let input = d.join("in");
    std::fs::write(&input, &plain).unwrap();
    let local = ["--header", s(&hdr), "--key-file", s(&k)];
    ok(sc(
        &[&["write", s(&data), "--input", s(&input)][..], &local].concat(),
        b"",
    ));
    let kit = Nbdkit::unix(
        &d.join("slow.sock"),
        &[
            "--filter=delay",
            "file",
            &format!("file={}", data.display()),
            "rdelay=2",
        ],
    );
    let mp = d.join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let mp = std::fs::canonicalize(&mp).unwrap();
    ok(sc(
        &[&["mount", &kit.uri(), s(&mp)][..], &local].concat(),
        b"",
    ));
    let disk = mp.join("disk");
    let start = Instant::now();
    let got: std::io::Result<Vec<Vec<u8>>> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4u64)
            .map(|i| {
                let disk = &disk;
                scope.spawn(move || {
                    use std::os::unix::fs::FileExt;
                    let mut b = vec![0u8; 4096];
                    let f = std::fs::File::open(disk).unwrap();
                    f.read_exact_at(&mut b, (2 * i + 1) << 20).map(|()| b)
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let got = got.unwrap_or_else(|e| {
        volumes::unmount(&mp);
        panic!("a read through the mount failed: {e}")
    });
    let took = start.elapsed();
    volumes::unmount(&mp);
    for (i, b) in got.iter().enumerate() {
        let at = (2 * i + 1) << 20;
        assert!(b[..] == plain[at..at + 4096], "reader {i}'s bytes");
    }
    assert!(
        took < Duration::from_secs(5),
        "four 2-second reads took {took:?}: they ran one after the other"
    );
}

/// Sends SIGTERM to `child` and waits for it at most 15 s: how long it took to exit
/// after the signal, and its stderr. A child still running then is killed and the test
/// fails.
fn sigterm_and_wait(mut child: std::process::Child) -> (Duration, String) {
    run(Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string()));
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve still running 15 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t0.elapsed();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (took, format!("{}; stderr: {err}", out.status))
}

/// Trickles a whole NBD handshake to `s`, a byte every 50 ms: the greeting, then an
/// answer of 60000 bytes to the first option.
fn trickle_handshake(mut s: std::os::unix::net::UnixStream) {
    use sectorcrypt_nbd::proto::*;
    let trickle = |s: &mut std::os::unix::net::UnixStream, bytes: &[u8]| {
        for b in bytes {
            if s.write_all(std::slice::from_ref(b)).is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    };
    if !trickle(
        &mut s,
        &encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES),
    ) {
        return;
    }
    let mut h = [0u8; 20];
    if s.read_exact(&mut h).is_err() {
        return;
    }
    let option = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let r = OptionReply {
        option,
        kind: REP_ACK,
        len: 60_000,
    };
    if trickle(&mut s, &r.encode()) {
        trickle(&mut s, &[0u8; 60_000]);
    }
}

#[test]
fn serve_of_an_upstream_that_trickles_its_handshake_ends_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let up = d.join("trickle.sock");
    let listener = std::os::unix::net::UnixListener::bind(&up).unwrap();
    std::thread::spawn(move || {
        for _ in 0..4 {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            std::thread::spawn(move || trickle_handshake(s));
        }
    });
    let key = key_file(d, "k", "zero");
    let uri = format!("nbd+unix:///?socket={}", up.display());
    let serve = |sock: &str| {
        volumes::spawn(
            &[
                "serve",
                &uri,
                "--key-file",
                s(&key),
                "--remote-timeout",
                "2",
                "--retry",
                "0",
                "--socket",
                s(&d.join(sock)),
            ],
            std::process::Stdio::piped(),
        )
    };

    // Left alone, it gives up at the deadline, saying why (the upstream sends a byte every
    // 50 ms, so a deadline per read would never fire).
    let mut child = serve("p.sock");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve of a trickling upstream still running after 15 s (--remote-timeout 2)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t0.elapsed();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(
        took < Duration::from_millis(4500),
        "serve gave up {took:?} after it started (--remote-timeout 2): {err}"
    );
    assert!(
        err.contains("did not finish the handshake") && err.contains("within 2 s"),
        "{err}"
    );

    // SIGTERM while it waits on the upstream stops it at once.
    let child = serve("q.sock");
    std::thread::sleep(Duration::from_millis(500));
    let (took, err) = sigterm_and_wait(child);
    assert!(
        took < Duration::from_millis(1500),
        "serve ended {took:?} after SIGTERM (--remote-timeout 2): {err}"
    );
    assert!(err.contains("signal 15"), "{err}");
}

/// With --remote-timeout 0 a request the upstream never answers is waited for: the first
/// SIGTERM waits for it (the stop finishes the requests in flight), and nothing, not even
/// a second SIGTERM, ended the server; now the second one does, at once.
#[test]
fn a_second_sigterm_stops_serve_that_waits_for_an_upstream_without_timeout() {
    use std::io::{Read as _, Write as _};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let file = format!("file={}", img.display());
    let kit = Nbdkit::unix(&d.join("kit.sock"), &["file", &file]);
    // The upstream the proxy sees: nbdkit, through a relay that, once `stall` is set,
    // passes no more replies on (the connection stays open: nothing fails).
    let up = d.join("relay.sock");
    let listener = UnixListener::bind(&up).unwrap();
    let kit_sock = d.join("kit.sock");
    let stall = Arc::new(AtomicBool::new(false));
    let stall2 = stall.clone();
    std::thread::spawn(move || {
        for _ in 0..4 {
            let Ok((down, _)) = listener.accept() else {
                return;
            };
            let upstream = UnixStream::connect(&kit_sock).unwrap();
            let (mut d1, mut u1) = (down.try_clone().unwrap(), upstream.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut d1, &mut u1);
            });
            let (mut u2, mut d2, stall) = (upstream, down, stall2.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = u2.read(&mut buf) {
                    if n == 0 || (!stall.load(Ordering::SeqCst) && d2.write_all(&buf[..n]).is_err())
                    {
                        break;
                    }
                }
            });
        }
    });
    let uri = format!("nbd+unix:///?socket={}", up.display());
    let mut proxy = Served::start(
        &[
            &uri,
            "--key-file",
            s(&k0),
            "--remote-timeout",
            "0",
            "--connections",
            "1",
        ],
        &d.join("p.sock"),
    );
    let c = proxy_client(&proxy);
    let mut buf = vec![0u8; 65536];
    c.read_at(&mut buf, 0).unwrap();
    stall.store(true, Ordering::SeqCst);
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        c.read_at(&mut buf, 1 << 20)
    });
    std::thread::sleep(Duration::from_millis(500));
    let mut child = proxy.child.take().unwrap();
    let pid = child.id().to_string();
    run(Command::new("kill").arg("-TERM").arg(&pid));
    // The first stop waits for the read in flight, which the upstream never answers.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().unwrap().is_none(),
        "serve stopped without its request in flight answered"
    );
    let (took, err) = sigterm_and_wait(child);
    assert!(
        took < Duration::from_secs(3),
        "serve ended {took:?} after a second SIGTERM: {err}"
    );
    assert!(err.contains("stopping now"), "{err}");
    assert!(!err.contains("exit status: 0"), "{err}");
    assert!(reader.join().unwrap().is_err(), "no upstream, no data");
    drop(kit);
}

#[test]
fn serve_ends_on_sigterm_within_the_timeout_while_a_reconnection_trickles() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let file = format!("file={}", img.display());
    let kit = Nbdkit::unix(&d.join("kit.sock"), &["file", &file]);
    // The upstream the proxy sees: its first connection relayed to nbdkit (and cut when
    // the test says), every later one trickling its handshake.
    let up = d.join("relay.sock");
    let listener = std::os::unix::net::UnixListener::bind(&up).unwrap();
    let kit_sock = d.join("kit.sock");
    let (cut_tx, cut_rx) = std::sync::mpsc::channel::<()>();
    let (cut_done_tx, cut_done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((first, _)) = listener.accept() else {
            return;
        };
        let upstream = std::os::unix::net::UnixStream::connect(&kit_sock).unwrap();
        let pipe = |mut from: std::os::unix::net::UnixStream,
                    mut to: std::os::unix::net::UnixStream| {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(std::net::Shutdown::Both);
            })
        };
        let (a, b) = (first.try_clone().unwrap(), upstream.try_clone().unwrap());
        pipe(first.try_clone().unwrap(), upstream.try_clone().unwrap());
        pipe(b, a);
        std::thread::spawn(move || {
            if cut_rx.recv().is_ok() {
                let _ = first.shutdown(std::net::Shutdown::Both);
                let _ = upstream.shutdown(std::net::Shutdown::Both);
                let _ = cut_done_tx.send(());
            }
        });
        for _ in 0..4 {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            std::thread::spawn(move || trickle_handshake(s));
        }
    });
    let uri = format!("nbd+unix:///?socket={}", up.display());
    let mut proxy = Served::start(
        &[
            &uri,
            "--key-file",
            s(&k0),
            "--remote-timeout",
            "2",
            "--connections",
            "1",
        ],
        &d.join("p.sock"),
    );
    let c = proxy_client(&proxy);
    let mut buf = vec![0u8; 65536];
    c.read_at(&mut buf, 0).unwrap();
    // The upstream connection is cut: the next read waits for a reconnection, which
    // trickles; SIGTERM comes while it does.
    cut_tx.send(()).unwrap();
    // Only once it is cut does the read start (else it may still be served before).
    cut_done_rx.recv().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        c.read_at(&mut buf, 1 << 20)
    });
    std::thread::sleep(Duration::from_millis(500));
    let (took, err) = sigterm_and_wait(proxy.child.take().unwrap());
    assert!(
        took < Duration::from_millis(3000),
        "serve ended {took:?} after SIGTERM (--remote-timeout 2): {err}"
    );
    assert!(reader.join().unwrap().is_err(), "no upstream, no data");
    drop(kit);
}

#[test]
fn a_password_in_an_nbd_uri_reaches_no_message_json_or_export_description() {
    require!("nbdkit", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = volumes::new_volume(d, &[]);
    let k0 = d.join("k0");
    let kit = Nbdkit::tcp(&["file", &format!("file={}", img.display())]);
    let port = kit
        .uri()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    const SECRET: &str = "pw-SECRET-4c1d";
    let uri = format!("nbd://user:{SECRET}@127.0.0.1:{port}/");
    let shown = format!("nbd://127.0.0.1:{port}/");
    // Every place that shows the locator, checked before any assertion, so that a
    // failure names them all.
    let mut leaks = Vec::new();
    let out = sc(&["test-key", &uri, "--key-file", s(&k0), "--json"], b"");
    let json = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        code(&out),
        0,
        "{json} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let proxy = Served::start(&[&uri, "--key-file", s(&k0)], &d.join("p.sock"));
    let info = run(Command::new("nbdinfo").arg("--json").arg(proxy.uri())).stdout;
    let info = String::from_utf8_lossy(&info).to_string();
    let (_, log) = proxy.stop("TERM");
    for (place, text) in [
        ("test-key --json", &json),
        ("the export description (nbdinfo --json)", &info),
        ("serve's log", &log),
    ] {
        if text.contains(SECRET) || !text.contains(&shown) {
            leaks.push(format!("{place}: {text}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "the password shows:\n{}",
        leaks.join("\n")
    );
}

/// A URI refused for a parameter the client does not take (`password=`, `tls-psk-file=`)
/// is bad input (2) and named redacted: the refusal quoted the URI whole, secret and all.
#[test]
fn a_refused_nbd_uri_is_named_without_its_secret() {
    const SECRET: &str = "pw-SECRET-77aa";
    for uri in [
        format!("nbd+unix:///e?socket=/nowhere.sock&password={SECRET}"),
        format!("nbds://127.0.0.1:1/e?tls-psk-file=/k/{SECRET}"),
    ] {
        let out = sc(&["dump", &uri], b"");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(code(&out), 2, "{err}");
        assert!(
            !err.contains(SECRET) && err.contains("unknown query parameter"),
            "{err}"
        );
    }
}
