//! Secrets stay secret in a running process. The memory of a `serve` that has unlocked a
//! volume and served reads (read through /proc/PID/mem, as root) holds neither the
//! passphrase nor the volume key; the key's halves (the two AES keys of aes-xts, which
//! are their own first round keys) are only in pages kept out of core dumps, and with
//! memfd_secret not readable at all. The same holds with no lockable memory at all
//! (`ulimit -l 0`, an unprivileged user), where `serve` still works and says so. `serve`
//! leaves no core dump; a core dump of `read` holds none of them.
//!
//! The volume key comes from an independent tool (`cryptsetup luksDump
//! --dump-volume-key`).

#[path = "support/memscan.rs"]
mod memscan;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use memscan::{scan_core, scan_process, Needle, Scan};
use sectorcrypt_testkit::{pattern, require, run_stdout};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};
use support::{bin, s};
use volumes::{key_file, new_volume, write_volume, FAST};

/// A passphrase no other byte string in the process is likely to equal.
const PASSPHRASE: &str = "correct-horse-7d1f93a0be52c4";

/// Whether this process runs as root (needed to read another process's memory once it
/// has made itself non-dumpable).
fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// The volume key of `img`, by cryptsetup.
fn volume_key(img: &Path, key: &Path) -> Vec<u8> {
    let out = run_stdout(Command::new("cryptsetup").args([
        "luksDump",
        "--dump-volume-key",
        "--batch-mode",
        "--key-file",
        s(key),
        s(img),
    ]));
    let start = out.find("MK dump:").expect("a volume key dump") + "MK dump:".len();
    let hex: String = out[start..]
        .lines()
        .take_while(|l| !l.contains(':') || l.starts_with(char::is_whitespace))
        .flat_map(|l| l.split_whitespace())
        .collect();
    sectorcrypt_testkit::unhex(&hex)
}

/// The secrets: the passphrase, the volume key and its halves (for aes-xts, the two AES
/// keys).
fn secrets(key: &[u8]) -> Vec<Needle> {
    let half = key.len() / 2;
    vec![
        Needle::new("the passphrase", PASSPHRASE.as_bytes()),
        Needle::new("the volume key", key),
        Needle::new("the key's first half", &key[..half]),
        Needle::new("the key's second half", &key[half..]),
    ]
}

/// A LUKS2 volume (aes-xts-plain64, 512-bit key) opened by [`PASSPHRASE`] (keyslot 1),
/// holding 1 MiB of [`pattern`] data; its key file and its volume key.
fn volume(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let img = new_volume(dir, &[]);
    let k0 = dir.join("k0");
    let key = key_file(dir, "kp", PASSPHRASE);
    let mut args = vec!["add-key", s(&img), s(&key), "--key-file", s(&k0)];
    args.extend_from_slice(&FAST);
    support::ok(support::sc(&args, b""));
    write_volume(dir, &img, &key, &pattern(1 << 20, 4));
    let vk = volume_key(&img, &key);
    assert_eq!(vk.len(), 64);
    (img, key, vk)
}

/// How a command under test is started.
#[derive(Clone, Copy)]
enum As {
    /// This user (root in these tests).
    Me,
    /// The unprivileged user `nobody`, with no lockable memory (`ulimit -l 0`).
    NobodyWithoutLockedMemory,
}

/// Starts `sectorcrypt ARGS` in `cwd` with core dumps allowed (`ulimit -c unlimited`),
/// `stdin` written to its standard input (which stays open), its standard output a pipe.
fn spawn(cwd: &Path, who: As, args: &[&str], stdin: &[u8]) -> (Child, ChildStdin) {
    let script = match who {
        As::Me => r#"ulimit -c unlimited && exec "$0" "$@""#,
        As::NobodyWithoutLockedMemory => {
            r#"ulimit -c unlimited && ulimit -l 0 &&
               exec setpriv --reuid=65534 --regid=65534 --clear-groups "$0" "$@""#
        }
    };
    let mut child = Command::new("sh")
        .current_dir(cwd)
        .args(["-c", script, bin()])
        .args(args)
        .env_remove("SECTORCRYPT_BACKEND")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    (child, input)
}

/// Waits until `serve` listens on `sock` (panics with its stderr if it exits first).
fn wait_for_socket(child: &mut Child, sock: &Path) {
    let t0 = Instant::now();
    while !sock.exists() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("serve exited with {st}: {}", stderr(child));
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The standard error of a process that has ended.
fn stderr(child: &mut Child) -> String {
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    err
}

/// Reads the whole export behind `sock` with nbdcopy (the server decrypts every sector);
/// checks the data written by [`volume`].
fn read_through_nbd(sock: &Path, out: &Path) {
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    run_stdout(Command::new("nbdcopy").arg(&uri).arg(out));
    let got = std::fs::read(out).unwrap();
    assert_eq!(got.len(), 4 << 20);
    assert!(
        got[..1 << 20] == pattern(1 << 20, 4)[..],
        "serve returned other data"
    );
}

/// Sends `sig` to `child` and waits for it; returns how it ended.
fn kill(child: &mut Child, sig: &str) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    run_stdout(Command::new("kill").arg(format!("-{sig}")).arg(pid));
    child.wait().unwrap()
}

/// Panics listing `found` unless it is empty.
fn none(what: &str, found: &[&memscan::Found]) {
    let list: Vec<String> = found.iter().map(|f| f.to_string()).collect();
    assert!(list.is_empty(), "{what}:\n{}", list.join("\n"));
}

/// Starts `serve` on a new volume as `who`, with the passphrase as one line of standard
/// input (the prompt's path without a terminal), reads the whole export through NBD, and
/// scans the server's memory. Returns the scan and the server's standard error.
fn serve_and_scan(who: As) -> (Scan, String) {
    let dir = tempfile::tempdir().unwrap();
    let (img, _key, vk) = volume(dir.path());
    if let As::NobodyWithoutLockedMemory = who {
        run_stdout(
            Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(dir.path()),
        );
    }
    let sock = dir.path().join("sock");
    let line = format!("{PASSPHRASE}\n");
    let args = ["serve", s(&img), "--socket", s(&sock)];
    let (mut child, _stdin) = spawn(dir.path(), who, &args, line.as_bytes());
    wait_for_socket(&mut child, &sock);
    read_through_nbd(&sock, &dir.path().join("out"));
    // A control: the socket path, which the server keeps, must be seen.
    let mut needles = secrets(&vk);
    needles.push(Needle::new("the socket path", s(&sock).as_bytes()));
    let scan = scan_process(child.id(), &needles);
    kill(&mut child, "TERM");
    eprintln!(
        "read {} bytes of serve's memory; not readable: {:#?}",
        scan.bytes, scan.unreadable
    );
    assert!(
        !scan.of("the socket path").is_empty(),
        "the scan saw nothing"
    );
    (scan, stderr(&mut child))
}

/// What must hold of a running server's memory: neither the passphrase nor the volume key
/// anywhere; the halves of the key only in pages kept out of core dumps (the key
/// schedules' secret pages).
fn check_server_memory(scan: &Scan) {
    none(
        "the passphrase is in serve's memory",
        &scan.of("the passphrase"),
    );
    none(
        "the volume key is in serve's memory",
        &scan.of("the volume key"),
    );
    for half in ["the key's first half", "the key's second half"] {
        let dumped: Vec<_> = scan.of(half).into_iter().filter(|f| !f.undumped).collect();
        none(
            &format!("{half} is in memory a core dump would hold"),
            &dumped,
        );
    }
}

#[test]
fn a_running_serve_holds_neither_the_passphrase_nor_the_volume_key() {
    require!("cryptsetup", "nbdcopy");
    if !root() {
        sectorcrypt_testkit::skipped!("skipped: reading another process's memory needs root");
        return;
    }
    let (scan, _) = serve_and_scan(As::Me);
    check_server_memory(&scan);
    // Where memfd_secret is used, the key schedules cannot be read at all.
    if scan.unreadable.iter().any(|m| m.contains("secretmem")) {
        let halves = [
            scan.of("the key's first half"),
            scan.of("the key's second half"),
        ];
        none("a key half is readable", &halves.concat());
    }
}

#[test]
fn without_lockable_memory_serve_still_works_and_says_so() {
    require!("cryptsetup", "nbdcopy", "setpriv");
    if !root() {
        sectorcrypt_testkit::skipped!(
            "skipped: running as another user and reading its memory needs root"
        );
        return;
    }
    let (scan, err) = serve_and_scan(As::NobodyWithoutLockedMemory);
    check_server_memory(&scan);
    assert!(
        err.contains("key memory could not be locked"),
        "no warning: {err}"
    );
    assert!(!err.contains(PASSPHRASE), "{err}");
}

/// Whether the kernel writes core dumps as files named `core` in the process's working
/// directory (not through a pipe to a collector).
fn cores_land_in_cwd() -> bool {
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    pattern.trim() == "core"
}

/// The core dump a process left in `dir` (core_pattern `core`, with or without the PID).
fn core_file(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("core"))
}

#[test]
fn serve_leaves_no_core_dump() {
    require!("cryptsetup", "nbdcopy");
    if !cores_land_in_cwd() {
        eprintln!("skipped: core dumps do not go to a file named core here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, key, vk) = volume(dir.path());
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let sock = dir.path().join("sock");
    let args = [
        "serve",
        s(&img),
        "--socket",
        s(&sock),
        "--key-file",
        s(&key),
    ];
    let (mut child, _stdin) = spawn(&cwd, As::Me, &args, b"");
    wait_for_socket(&mut child, &sock);
    read_through_nbd(&sock, &dir.path().join("out"));
    let status = kill(&mut child, "ABRT");
    assert!(!status.success(), "{status}");
    if let Some(core) = core_file(&cwd) {
        let scan = scan_core(&core, &secrets(&vk));
        let found: Vec<String> = scan.found.iter().map(|f| f.to_string()).collect();
        panic!(
            "serve left a core dump of {} bytes, holding:\n{}",
            scan.bytes,
            found.join("\n")
        );
    }
}

#[test]
fn a_core_dump_of_read_holds_neither_the_passphrase_nor_the_volume_key() {
    require!("cryptsetup");
    if !cores_land_in_cwd() {
        eprintln!("skipped: core dumps do not go to a file named core here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, _key, vk) = volume(dir.path());
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    // The passphrase as the whole of standard input (`--key-file -`); the plaintext goes
    // to a pipe read only in part, so `read` waits with its keys in use.
    let args = ["read", s(&img), "--key-file", "-"];
    let (mut child, stdin) = spawn(&cwd, As::Me, &args, PASSPHRASE.as_bytes());
    drop(stdin);
    let mut first = vec![0u8; 64 << 10];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    assert!(first == pattern(1 << 20, 4)[..64 << 10]);
    std::thread::sleep(Duration::from_millis(500));
    let status = kill(&mut child, "ABRT");
    assert!(!status.success(), "{status}");
    let core = core_file(&cwd).expect("read left no core dump");
    let scan = scan_core(&core, &secrets(&vk));
    let found: Vec<_> = scan.found.iter().collect();
    none("the core dump of read holds secrets", &found);
}
