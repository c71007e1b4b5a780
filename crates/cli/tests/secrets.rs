//! Secrets stay secret in a running process: the memory of a `serve` that has unlocked a
//! volume and served reads (read through /proc/PID/mem, as root) holds neither the
//! passphrase nor the volume key; `serve` leaves no core dump; a core dump of `read`
//! holds neither. The volume key comes from an independent tool (`cryptsetup luksDump
//! --dump-volume-key`), and each secret is searched for whole and, for the key, as the
//! AES keys the cipher is made of.

mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{require, run_stdout};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{bin, s};
use volumes::{key_file, new_volume, write_volume};

/// A passphrase no other byte string in the process is likely to equal.
const PASSPHRASE: &str = "correct-horse-7d1f93a0be52c4";

/// Whether this process runs as root (needed to read another process's memory once it
/// has made itself non-dumpable, and to find every mapping readable).
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
        .take_while(|l| l.starts_with('\t') || l.starts_with(' ') || !l.contains(':'))
        .flat_map(|l| l.split_whitespace())
        .collect();
    sectorcrypt_testkit::unhex(&hex)
}

/// The byte strings to look for: the passphrase, the volume key, and the halves of the
/// key (for aes-xts, the two AES keys).
fn needles(key: &[u8]) -> Vec<(String, Vec<u8>)> {
    let half = key.len() / 2;
    vec![
        ("the passphrase".into(), PASSPHRASE.as_bytes().to_vec()),
        ("the volume key".into(), key.to_vec()),
        ("the key's first half".into(), key[..half].to_vec()),
        ("the key's second half".into(), key[half..].to_vec()),
    ]
}

/// Where each needle occurs in `hay` (which starts at address `base` of `region`).
fn search(
    hay: &[u8],
    base: u64,
    region: &str,
    needles: &[(String, Vec<u8>)],
    found: &mut Vec<String>,
) {
    for (name, n) in needles {
        let mut from = 0;
        while let Some(i) = find(&hay[from..], n) {
            found.push(format!(
                "{name} at {:#x} in {region}",
                base + (from + i) as u64
            ));
            from += i + 1;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What a scan of a process's memory saw.
#[derive(Debug, Default)]
struct Scan {
    /// Each needle found, with where.
    found: Vec<String>,
    /// Mappings that could not be read (memfd_secret's, the vvar pages).
    unreadable: Vec<String>,
    /// Bytes read.
    bytes: u64,
}

/// Every readable mapping of process `pid`, searched through /proc/PID/mem.
fn scan_process(pid: u32, needles: &[(String, Vec<u8>)]) -> Scan {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(!maps.is_empty(), "/proc/{pid}/maps is empty");
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let overlap = needles.iter().map(|(_, n)| n.len()).max().unwrap();
    let mut scan = Scan::default();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (range, perms) = (f[0], f[1]);
        let name = f.get(5..).map(|n| n.join(" ")).unwrap_or_default();
        if !perms.starts_with('r') {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (start, end) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        let region = format!("{range} {perms} {name}");
        let mut at = start;
        let mut buf = vec![0u8; 1 << 20];
        while at < end {
            let want = ((end - at) as usize).min(buf.len());
            match mem.read_at(&mut buf[..want], at) {
                Ok(0) | Err(_) => {
                    scan.unreadable.push(region.clone());
                    break;
                }
                Ok(n) => {
                    scan.bytes += n as u64;
                    search(&buf[..n], at, &region, needles, &mut scan.found);
                    // Step back so a needle across two reads is still seen.
                    at += if n as u64 == end - at {
                        n as u64
                    } else {
                        (n - overlap) as u64
                    };
                }
            }
        }
    }
    scan
}

/// A volume formatted by `sectorcrypt format` with [`PASSPHRASE`], holding some data,
/// and its key (from cryptsetup).
fn volume(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let img = new_volume(dir, &[]);
    let k0 = dir.join("k0");
    let key = key_file(dir, "kp", PASSPHRASE);
    let o = support::sc(
        &[
            "add-key",
            s(&img),
            s(&key),
            "--key-file",
            s(&k0),
            "--pbkdf",
            "pbkdf2",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    write_volume(dir, &img, &key, &sectorcrypt_testkit::pattern(1 << 20, 4));
    let vk = volume_key(&img, &key);
    assert_eq!(vk.len(), 64);
    (img, key, vk)
}

/// Starts `sectorcrypt ARGS` in `cwd` with core dumps allowed (`ulimit -c unlimited`),
/// `stdin` written to its standard input (which then stays open), its standard output
/// a pipe nobody reads.
fn spawn(cwd: &Path, args: &[&str], stdin: &[u8]) -> (Child, std::process::ChildStdin) {
    let mut child = Command::new("sh")
        .current_dir(cwd)
        .arg("-c")
        .arg(r#"ulimit -c unlimited && exec "$0" "$@""#)
        .arg(bin())
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
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("serve exited with {st}: {err}");
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the whole export behind `sock` with nbdcopy (the server decrypts every sector).
fn read_through_nbd(sock: &Path, out: &Path) {
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    run_stdout(Command::new("nbdcopy").arg(&uri).arg(out));
    assert_eq!(std::fs::metadata(out).unwrap().len(), 4 << 20);
}

/// Sends `sig` to `child` and waits for it; returns how it ended.
fn kill(child: &mut Child, sig: &str) -> std::process::ExitStatus {
    run_stdout(
        Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string()),
    );
    child.wait().unwrap()
}

/// The core dump a process left in `dir` (core_pattern `core`, with or without the PID).
fn core_file(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("core"))
}

/// Whether the kernel writes core dumps as files named `core` in the process's working
/// directory (not through a pipe to a collector).
fn cores_land_in_cwd() -> bool {
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    pattern.trim() == "core"
}

/// A core dump's findings.
fn scan_core(core: &Path, needles: &[(String, Vec<u8>)]) -> Vec<String> {
    let bytes = std::fs::read(core).unwrap();
    let mut found = vec![];
    search(&bytes, 0, "the core file (offset)", needles, &mut found);
    found
}

#[test]
fn a_running_serve_holds_neither_the_passphrase_nor_the_volume_key() {
    require!("cryptsetup", "nbdcopy");
    if !root() {
        eprintln!("skipped: reading another process's memory needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, _key, vk) = volume(dir.path());
    let sock = dir.path().join("sock");
    // The passphrase as one line of standard input (the prompt's path without a terminal),
    // which stays open: nothing else is ever read from it.
    let line = format!("{PASSPHRASE}\n");
    let (mut child, _stdin) = spawn(
        dir.path(),
        &["serve", s(&img), "--socket", s(&sock)],
        line.as_bytes(),
    );
    wait_for_socket(&mut child, &sock);
    read_through_nbd(&sock, &dir.path().join("out"));
    // The scan must see the process: its socket path (an argument it keeps) is a control.
    let control = ("the socket path".to_string(), s(&sock).as_bytes().to_vec());
    let mut needles = needles(&vk);
    needles.push(control.clone());
    let scan = scan_process(child.id(), &needles);
    kill(&mut child, "TERM");
    eprintln!(
        "read {} bytes; mappings not readable: {:#?}",
        scan.bytes, scan.unreadable
    );
    let (control, secrets): (Vec<_>, Vec<_>) =
        scan.found.iter().partition(|f| f.starts_with(&control.0));
    assert!(!control.is_empty(), "the scan did not see serve's memory");
    assert!(
        secrets.is_empty(),
        "a running serve holds secrets:\n{}",
        secrets
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
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
    let (mut child, _stdin) = spawn(
        &cwd,
        &[
            "serve",
            s(&img),
            "--socket",
            s(&sock),
            "--key-file",
            s(&key),
        ],
        b"",
    );
    wait_for_socket(&mut child, &sock);
    read_through_nbd(&sock, &dir.path().join("out"));
    let status = kill(&mut child, "ABRT");
    assert!(!status.success(), "{status}");
    if let Some(core) = core_file(&cwd) {
        let found = scan_core(&core, &needles(&vk));
        panic!(
            "serve left a core dump of {} bytes, holding:\n{}",
            std::fs::metadata(&core).unwrap().len(),
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
    // to a pipe nobody reads, so `read` stops with the keys in use.
    let (mut child, stdin) = spawn(
        &cwd,
        &["read", s(&img), "--key-file", "-"],
        PASSPHRASE.as_bytes(),
    );
    drop(stdin);
    // The first 64 KiB of plaintext: the volume is open and being decrypted. Then the
    // pipe fills and `read` waits, its keys in use.
    let mut first = vec![0u8; 64 << 10];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    assert_eq!(first, sectorcrypt_testkit::pattern(1 << 20, 4)[..64 << 10]);
    std::thread::sleep(Duration::from_millis(500));
    let status = kill(&mut child, "ABRT");
    assert!(!status.success(), "{status}");
    let core = core_file(&cwd).expect("read left no core dump (is ulimit -c honoured?)");
    let found = scan_core(&core, &needles(&vk));
    assert!(
        found.is_empty(),
        "the core dump of read holds secrets:\n{}",
        found.join("\n")
    );
}
