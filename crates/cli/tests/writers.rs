//! The writer claim between processes: one `serve` (or `open`, `write`, Python or C
//! program) writes an image at a time, since two engines doing read-modify-writes of the
//! same sectors lose each other's writes; a read-only open beside a writer is refused
//! unless `--shared`; readers share. A refusal names the holder (its PID and command).
//!
//! The lost-write race is real: two NBD clients (libnbd's Python binding) write single bytes, interleaved,
//! into the same sectors through two servers of one image. Before the writer claim both
//! servers started and some of the writes were lost; now the second server is refused.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use served::Served;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::{code, ok, s, sc};
use volumes::new_volume;

/// Single-byte writes each client makes.
const WRITES: usize = 3000;

/// Starts `sectorcrypt serve ARGS --socket SOCK`: the server once it listens, or the
/// output of a server that exited first (within 20 s).
fn serve_or_exit(args: &[&str], sock: &Path) -> Result<Served, Output> {
    let all = [&["serve"], args, &["--socket", s(sock)]].concat();
    let mut child = volumes::spawn(&all, Stdio::piped());
    let t0 = Instant::now();
    loop {
        if sock.exists() {
            return Ok(Served {
                child: Some(child),
                sock: sock.to_path_buf(),
            });
        }
        if child.try_wait().unwrap().is_some() {
            return Err(child.wait_with_output().unwrap());
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "serve: no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Asserts that `refused` exited 1 naming the holder `holder` (its PID and its command).
fn assert_refused_naming(refused: &Output, holder: &Served, what: &str) {
    let e = err(refused);
    let pid = holder.child.as_ref().unwrap().id();
    assert_eq!(code(refused), 1, "{what}: {e}");
    assert!(
        e.contains(&format!("PID {pid} (")) && e.contains("serve"),
        "{what}: the holder (PID {pid}, serve) is not named: {e}"
    );
}

/// A Python with libnbd's binding (`import nbd`): the system's, where another Python
/// comes first in PATH (nbdsh runs whichever `python3` is first).
fn nbd_python() -> Option<&'static str> {
    support::python_with("nbd")
}

/// Starts a libnbd client (Python) on `uri` writing byte `value` at offsets `2i + parity`
/// for i below [`WRITES`], once the file `go` exists (at most 20 s later).
fn start_writer(py: &str, uri: &str, go: &Path, value: u8, parity: usize) -> std::process::Child {
    let script = format!(
        "import os, time, nbd\n\
         h = nbd.NBD()\n\
         h.connect_uri({uri:?})\n\
         t0 = time.time()\n\
         while not os.path.exists({go:?}) and time.time() - t0 < 20: time.sleep(0.005)\n\
         for i in range({WRITES}): h.pwrite(bytes([{value}]), 2 * i + {parity})\n\
         h.shutdown()\n",
        go = go.display().to_string()
    );
    Command::new(py)
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3")
}

#[test]
fn a_second_read_write_serve_is_refused_naming_the_holder_so_no_write_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    let a = Served::start(&[s(&img), "--key-file", s(&k0)], &dir.path().join("a.sock"));
    let b = match serve_or_exit(&[s(&img), "--key-file", s(&k0)], &dir.path().join("b.sock")) {
        Err(refused) => {
            assert_refused_naming(&refused, &a, "a second read-write serve");
            assert!(err(&refused).contains("second writer"), "{}", err(&refused));
            return;
        }
        Ok(b) => b,
    };
    // The refusal needs no NBD client; showing what the second writer costs does.
    let Some(py) = nbd_python() else {
        panic!(
            "a second read-write serve of one image was started (and no python3 with \
             libnbd's binding is here to count the writes it loses)"
        );
    };
    // Both servers write the image at once: the race a second writer would cause, for
    // the record.
    let go = dir.path().join("go");
    let wa = start_writer(py, &a.uri(), &go, 0xaa, 0);
    let wb = start_writer(py, &b.uri(), &go, 0x55, 1);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&go, b"").unwrap();
    for w in [wa, wb] {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "libnbd client: {}", err(&out));
    }
    for srv in [a, b] {
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "{log}");
    }
    let len = (2 * WRITES).to_string();
    let read = ["read", s(&img), "--length", &len, "--key-file", s(&k0)];
    let got = support::ok_bytes(sc(&read, b""));
    let lost = (0..2 * WRITES)
        .filter(|&i| got[i] != if i % 2 == 0 { 0xaa } else { 0x55 })
        .count();
    panic!(
        "a second read-write serve of one image was started: {lost} of {} single-byte \
         writes through the two servers were lost",
        2 * WRITES
    );
}

#[test]
fn a_read_only_serve_beside_a_writer_needs_shared() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    let writer = Served::start(&[s(&img), "--key-file", s(&k0)], &dir.path().join("w.sock"));
    let ro = [s(&img), "--key-file", s(&k0), "--read-only"];
    match serve_or_exit(&ro, &dir.path().join("r.sock")) {
        Err(refused) => {
            assert_refused_naming(&refused, &writer, "read-only beside a writer");
            assert!(err(&refused).contains("--shared"), "{}", err(&refused));
        }
        Ok(_) => panic!("a read-only serve was started beside a writer without --shared"),
    }
    // `read` is refused the same way, and reads with --shared.
    let read = ["read", s(&img), "--length", "4096", "--key-file", s(&k0)];
    let out = sc(&read, b"");
    assert_refused_naming(&out, &writer, "read beside a writer");
    let got = support::ok_bytes(sc(&[&read[..], &["--shared"]].concat(), b""));
    assert_eq!(got.len(), 4096);
    let shared = [&ro[..], &["--shared"]].concat();
    let reader = serve_or_exit(&shared, &dir.path().join("s.sock"))
        .unwrap_or_else(|o| panic!("--read-only --shared beside a writer: {}", err(&o)));
    for srv in [reader, writer] {
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "{log}");
    }
    // --shared is for a read-only open only.
    let out = sc(
        &[
            "serve",
            s(&img),
            "--key-file",
            s(&k0),
            "--shared",
            "--socket",
            "x",
        ],
        b"",
    );
    assert_eq!(code(&out), 2, "{}", err(&out));
}

#[test]
fn two_readers_share_and_keep_a_writer_out_until_they_stop() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    let ro = [s(&img), "--key-file", s(&k0), "--read-only"];
    let r1 = Served::start(&ro, &dir.path().join("r1.sock"));
    let r2 = serve_or_exit(&ro, &dir.path().join("r2.sock"))
        .unwrap_or_else(|o| panic!("a second reader: {}", err(&o)));
    let w = ["write", s(&img), "--key-file", s(&k0)];
    let out = sc(&w, b"data");
    assert_eq!(code(&out), 1, "{}", err(&out));
    assert!(
        err(&out).contains("open read-only by a reader, PID"),
        "{}",
        err(&out)
    );
    for srv in [r1, r2] {
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "{log}");
    }
    ok(sc(&w, b"data"));
}

#[test]
fn a_onetime_server_is_a_writer_too() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    let first = Served::start(&[s(&img), "--onetime"], &dir.path().join("a.sock"));
    match serve_or_exit(&[s(&img), "--onetime"], &dir.path().join("b.sock")) {
        Err(refused) => assert_refused_naming(&refused, &first, "a second onetime serve"),
        Ok(_) => panic!("two one-time servers write one image"),
    }
}
