//! `sectorcrypt open IMAGE NAME`, `status [NAME]` and `close NAME`: the NBD export read by
//! libnbd's nbdinfo and nbdcopy against `sectorcrypt read`, status as text and JSON, a NAME
//! in use or malformed refused, a stale entry (its process killed) cleaned up, and ext4 on
//! the loop device of `open --loop` surviving close and open. And what must not be trusted:
//! close refusing while the loop device or disk file is used anywhere (another mount
//! namespace, another device node, an open descriptor, a mapping, a partition, another loop
//! device, a bind mount of the disk file), SIGTERM stopping serve, open and its serving
//! process during an endless key derivation (a remote image's URI shown without its
//! password) or at the prompt (the terminal given back), processes told apart by start time
//! not arguments, a runtime directory others can write (or under a directory or link of
//! another user's) refused, planted links and entries neither followed nor obeyed, a bad
//! entry named while the others are listed, and NAME's character set with status printing
//! no control character. Every run uses a temporary runtime directory
//! (SECTORCRYPT_RUNTIME_DIR), never the real one.

mod support;
#[path = "support/volumes.rs"]
mod volumes;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{bin, code, ok, ok_bytes, s};
use volumes::mounted;

/// A runtime directory, and closing whatever a test left open there.
struct Runtime {
    dir: PathBuf,
    names: Vec<String>,
}

impl Runtime {
    fn new(parent: &Path) -> Runtime {
        Runtime {
            dir: parent.join("run"),
            names: Vec::new(),
        }
    }

    /// `sectorcrypt ARGS` with this runtime directory and no standard input.
    fn sc(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .env("SECTORCRYPT_RUNTIME_DIR", &self.dir)
            .env_remove("SECTORCRYPT_BACKEND")
            .stdin(Stdio::null())
            .output()
            .expect("run sectorcrypt")
    }

    /// `sectorcrypt open IMG NAME --key-file KEY EXTRA`: its standard output's lines.
    fn open(&mut self, img: &Path, name: &str, key: &Path, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["open", s(img), name, "--key-file", s(key)];
        args.extend_from_slice(extra);
        let out = ok(self.sc(&args));
        self.names.push(name.to_string());
        out.lines().map(str::to_string).collect()
    }

    /// `status NAME --json`.
    fn status(&self, name: &str) -> Value {
        serde_json::from_str(&ok(self.sc(&["status", name, "--json"]))).unwrap()
    }

    fn close(&self, name: &str) {
        ok(self.sc(&["close", name]));
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.sc(&["close", name]);
        }
    }
}

/// Waits until process `pid` is gone (reaped, or a zombie: no command line).
fn wait_gone(pid: u64) {
    let t0 = std::time::Instant::now();
    while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
        assert!(t0.elapsed().as_secs() < 20, "process {pid} still running");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A 20 MiB LUKS2 volume holding a pattern, its key file and the plaintext.
fn volume(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let img = volumes::new_volume(dir, &[]);
    let key = dir.join("k0");
    let size = 4 << 20;
    let data = sectorcrypt_testkit::pattern(size, 17);
    volumes::write_volume(dir, &img, &key, &data);
    (img, key, data)
}

#[test]
fn open_serves_over_nbd_status_shows_it_and_close_stops_it() {
    sectorcrypt_testkit::require!("nbdinfo", "nbdcopy");
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, data) = volume(tmp.path());

    let out = rt.open(&img, "vault", &key, &[]);
    let sock = rt.dir.join("vault.sock");
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    assert_eq!(out, std::slice::from_ref(&uri));
    // What libnbd reads is what `sectorcrypt read` reads: the plaintext.
    let size = ok(Command::new("nbdinfo")
        .args(["--size", &uri])
        .output()
        .unwrap());
    // (`read` beside the read-write server needs --shared: nothing writes meanwhile.)
    let read = ["read", s(&img), "--key-file", s(&key), "--shared"];
    let plain = ok_bytes(rt.sc(&read));
    assert_eq!(size.trim(), plain.len().to_string());
    let served = Command::new("nbdcopy").args([&uri, "-"]).output().unwrap();
    assert!(served.status.success());
    assert!(served.stdout == plain, "nbdcopy and read differ");
    assert!(plain[..data.len()] == data[..]);

    // status: text for people, JSON for scripts.
    let text = ok(rt.sc(&["status"]));
    for want in [
        "vault: open",
        "luks2",
        "aes-xts-plain64",
        &uri,
        "read-write",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let all: Value = serde_json::from_str(&ok(rt.sc(&["status", "--json"]))).unwrap();
    let one = rt.status("vault");
    assert_eq!(all, Value::Array(vec![one.clone()]));
    let img_abs = std::fs::canonicalize(&img).unwrap();
    assert_eq!(one["name"], "vault");
    assert_eq!(one["image"], s(&img_abs));
    assert_eq!(one["format"], "luks2");
    assert_eq!(one["cipher"], "aes-xts-plain64");
    assert_eq!(one["size"], plain.len() as u64);
    assert_eq!(one["sector_size"], 4096);
    assert_eq!(one["read_only"], false);
    assert_eq!(one["uri"], uri.as_str());
    assert_eq!(one["mount"], Value::Null);
    assert_eq!(one["loop"], Value::Null);
    assert!(one.get("ready").is_none());

    // The name is taken: refused before any passphrase is read, the server untouched.
    let again = rt.sc(&["open", s(&img), "vault", "--key-file", s(&key)]);
    assert_eq!(code(&again), 2);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("NAME vault is in use"), "{err}");
    assert!(!err.contains("unlocked"), "{err}");
    assert_eq!(rt.status("vault"), one);

    // close: the process ends, its socket and entry go; status and close say so.
    let pid = one["pid"].as_u64().unwrap();
    rt.close("vault");
    wait_gone(pid);
    assert!(!sock.exists());
    assert!(!rt.dir.join("vault.json").exists());
    assert_eq!(ok(rt.sc(&["status", "--json"])).trim(), "[]");
    assert_eq!(ok(rt.sc(&["status"])), "");
    assert_eq!(code(&rt.sc(&["status", "vault"])), 2);
    assert_eq!(code(&rt.sc(&["close", "vault"])), 2);
}

#[test]
fn bad_names_are_refused_before_anything_is_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let long = "n".repeat(65);
    for name in ["", "a/b", "..", ".", long.as_str()] {
        for args in [
            vec!["open", "no-such.img", name],
            vec!["close", name],
            vec!["status", name],
        ] {
            let o = rt.sc(&args);
            assert_eq!(code(&o), 2, "{args:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("bad NAME"), "{args:?}: {err}");
        }
    }
    // 64 bytes is a name (nothing is open under it).
    let o = rt.sc(&["status", &"n".repeat(64)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing is open"));
    assert!(!rt.dir.exists(), "the runtime directory was created");
}

#[test]
fn a_stale_entry_is_detected_and_cleaned_up() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());

    // Killed without a chance to clean up: the next open of the name works.
    rt.open(&img, "stale", &key, &[]);
    let pid = rt.status("stale")["pid"].as_u64().unwrap();
    sectorcrypt_testkit::run(Command::new("kill").args(["-9", &pid.to_string()]));
    wait_gone(pid);
    assert!(rt.dir.join("stale.json").exists());
    let out = rt.open(&img, "stale", &key, &[]);
    assert_eq!(out.len(), 1);
    let pid2 = rt.status("stale")["pid"].as_u64().unwrap();
    assert_ne!(pid, pid2);

    // status finds a dead entry, says so and removes it.
    sectorcrypt_testkit::run(Command::new("kill").args(["-9", &pid2.to_string()]));
    wait_gone(pid2);
    let o = rt.sc(&["status", "--json"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "[]");
    assert!(String::from_utf8_lossy(&o.stderr).contains("stale entry was removed"));
    assert!(!rt.dir.join("stale.json").exists());
    assert!(!rt.dir.join("stale.sock").exists());
}

/// Mounts `dev` at `mp`, or unmounts `mp`.
fn mount(dev: &str, mp: &Path) {
    sectorcrypt_testkit::run(Command::new("mount").arg(dev).arg(mp));
}

fn umount(mp: &Path) {
    sectorcrypt_testkit::run(Command::new("umount").arg(mp));
}

/// Unmounts the file system when a test fails half-way (before the runtime closes).
struct FsMount(PathBuf);

impl Drop for FsMount {
    fn drop(&mut self) {
        if mounted(&self.0) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
}

/// Whether a loop device is attached to a file under `dir`.
fn loop_under(dir: &Path) -> bool {
    let out = Command::new("losetup")
        .args(["-n", "-O", "BACK-FILE"])
        .output();
    let list = String::from_utf8_lossy(&out.unwrap().stdout).to_string();
    list.lines().any(|l| l.starts_with(s(dir)))
}

#[test]
fn ext4_on_the_loop_device_of_open_survives_close_and_open() {
    if let Some(why) = volumes::loop_unavailable(&[]) {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    let fs = std::fs::canonicalize(tmp.path()).unwrap().join("fs");
    std::fs::create_dir(&fs).unwrap();

    let out = rt.open(&img, "disk", &key, &["--loop"]);
    let _fs_guard = FsMount(fs.clone());
    assert_eq!(out.len(), 2, "{out:?}");
    let dev = out[1].clone();
    assert!(dev.starts_with("/dev/loop"), "{dev}");
    let entry = rt.status("disk");
    assert_eq!(entry["loop"], dev.as_str());
    let private = PathBuf::from(entry["mount"].as_str().unwrap());
    assert!(mounted(&private));

    sectorcrypt_testkit::run(Command::new("mkfs.ext4").args(["-q", "-F", &dev]));
    mount(&dev, &fs);
    let text = "open --loop marker line\n".repeat(2000);
    std::fs::write(fs.join("a.txt"), &text).unwrap();
    std::fs::create_dir(fs.join("sub")).unwrap();
    let blob = sectorcrypt_testkit::pattern(1 << 20, 3);
    std::fs::write(fs.join("sub/blob.bin"), &blob).unwrap();
    // A mounted file system keeps the volume open.
    let busy = rt.sc(&["close", "disk"]);
    assert_eq!(code(&busy), 2);
    assert!(String::from_utf8_lossy(&busy.stderr).contains("unmount it first"));
    umount(&fs);
    rt.close("disk");
    assert!(!mounted(&private));
    assert!(!private.exists());
    assert!(!loop_under(&rt.dir), "a loop device is still attached");
    let stored = std::fs::read(&img).unwrap();
    assert!(!stored.windows(23).any(|w| w == b"open --loop marker line"));

    let out = rt.open(&img, "disk", &key, &["--loop"]);
    mount(&out[1], &fs);
    assert_eq!(std::fs::read_to_string(fs.join("a.txt")).unwrap(), text);
    assert!(std::fs::read(fs.join("sub/blob.bin")).unwrap() == blob);
    umount(&fs);
    rt.close("disk");
    assert!(!loop_under(&rt.dir));
}

#[test]
fn open_with_a_wrong_passphrase_says_why_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let (img, _, _) = volume(tmp.path());
    let bad = volumes::key_file(tmp.path(), "bad", "not the passphrase");
    let o = rt.sc(&["open", s(&img), "v", "--key-file", s(&bad)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), 3, "{err}");
    assert!(err.contains("no keyslot opens"), "{err}");
    assert_eq!(std::fs::read_dir(&rt.dir).unwrap().count(), 0);
}

#[test]
fn open_mount_shows_the_plaintext_as_a_file() {
    if !Path::new("/dev/fuse").exists() {
        sectorcrypt_testkit::skipped!("skipped: no /dev/fuse");
        return;
    }
    sectorcrypt_testkit::require!("fusermount3");
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, data) = volume(tmp.path());
    let mp = std::fs::canonicalize(tmp.path()).unwrap().join("plain");
    std::fs::create_dir(&mp).unwrap();

    let out = rt.open(&img, "ro", &key, &["--mount", s(&mp), "--read-only"]);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[1], format!("{}/disk", mp.display()));
    let entry = rt.status("ro");
    assert_eq!(entry["mount"], s(&mp));
    assert_eq!(entry["read_only"], true);
    assert_eq!(entry["loop"], Value::Null);
    let disk = std::fs::read(mp.join("disk")).unwrap();
    assert_eq!(disk.len() as u64, entry["size"].as_u64().unwrap());
    assert!(disk[..data.len()] == data[..]);
    assert!(std::fs::OpenOptions::new()
        .write(true)
        .open(mp.join("disk"))
        .is_err());
    // The directory is taken: a second open on it is refused.
    let o = rt.sc(&[
        "open",
        s(&img),
        "other",
        "--key-file",
        s(&key),
        "--mount",
        s(&mp),
    ]);
    assert_eq!(code(&o), 2);
    rt.close("ro");
    assert!(!mounted(&mp));
    assert!(mp.exists(), "the caller's directory is kept");
}

/// Children a test started, killed when it ends however it ends.
struct Kids(Vec<std::process::Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `close NAME`, which must be refused (exit 2) with every phrase of `want` in its error.
fn close_refused(rt: &Runtime, name: &str, want: &[&str]) {
    let o = rt.sc(&["close", name]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(code(&o), 2, "close was not refused: {err}");
    for w in want {
        assert!(err.contains(w), "{w:?} missing from: {err}");
    }
}

#[test]
fn close_refuses_while_the_loop_device_is_busy_anywhere() {
    if let Some(why) = volumes::loop_unavailable(&["unshare", "mknod", "sleep"]) {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    let fs = std::fs::canonicalize(tmp.path()).unwrap().join("fs");
    std::fs::create_dir(&fs).unwrap();
    let out = rt.open(&img, "busy", &key, &["--loop"]);
    let dev = out[1].clone();
    sectorcrypt_testkit::run(Command::new("mkfs.ext4").args(["-q", "-F", &dev]));
    let mut kids = Kids(Vec::new());

    // ext4 mounted in another mount namespace: invisible in ours.
    let mut ns = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount {dev} {} && echo ready && exec sleep 60",
            fs.display()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(ns.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    assert!(!mounted(&fs), "the mount leaked into this namespace");
    kids.0.push(ns);
    close_refused(
        &rt,
        "busy",
        &[
            "busy is busy",
            "mounted at",
            "another mount namespace",
            "--force",
        ],
    );
    kids.0.pop().map(|mut c| {
        c.kill().unwrap();
        c.wait().unwrap()
    });

    // Mounted in a mount namespace that no process is in any more (kept by a bind
    // mount of its nsfs file): no /proc scan finds it, the kernel's claim does.
    let keep = tmp.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    sectorcrypt_testkit::run(Command::new("mount").args(["--bind", s(&keep), s(&keep)]));
    let keep_guard = FsMount(keep.clone());
    sectorcrypt_testkit::run(Command::new("mount").args(["--make-private", s(&keep)]));
    let ns_file = keep.join("ns");
    std::fs::write(&ns_file, "").unwrap();
    sectorcrypt_testkit::run(
        Command::new("unshare")
            .arg(format!("--mount={}", ns_file.display()))
            .args(["--propagation", "private", "mount", &dev, s(&fs)]),
    );
    let ns_guard = FsMount(ns_file.clone());
    close_refused(
        &rt,
        "busy",
        &["busy is busy", "no process shows", "--force"],
    );
    drop(ns_guard);
    drop(keep_guard);
    assert!(!mounted(&keep));

    // Mounted here through another device node of the same device.
    let rdev = std::fs::read_to_string(format!(
        "/sys/block/{}/dev",
        dev.trim_start_matches("/dev/")
    ))
    .unwrap();
    let (major, minor) = rdev.trim().split_once(':').unwrap();
    let node = tmp.path().join("node");
    sectorcrypt_testkit::run(Command::new("mknod").arg(&node).args(["b", major, minor]));
    mount(s(&node), &fs);
    let fs_guard = FsMount(fs.clone());
    close_refused(&rt, "busy", &["mounted at", s(&fs), "unmount it first"]);
    umount(&fs);
    drop(fs_guard);

    // A process holding the device open; --force closes anyway.
    let held = Command::new("sleep")
        .arg("60")
        .stdin(std::fs::File::open(&dev).unwrap())
        .spawn()
        .unwrap();
    let held_pid = held.id();
    kids.0.push(held);
    close_refused(
        &rt,
        "busy",
        &[&format!("open in process {held_pid} (sleep)")],
    );
    assert!(
        rt.status("busy")["loop"] == dev.as_str(),
        "the volume was closed"
    );
    let o = rt.sc(&["close", "busy", "--force"]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("closing by force while busy"));
    assert_eq!(code(&rt.sc(&["status", "busy"])), 2);
}

/// A LUKS1 volume whose keyslot 0 asks for 2^32-1 PBKDF2 iterations (hours of work, as a
/// hostile header may), and its key file.
fn endless_kdf_volume(dir: &Path) -> (PathBuf, PathBuf) {
    let img = volumes::new_volume(dir, &["--type", "luks1"]);
    let mut bytes = std::fs::read(&img).unwrap();
    assert_eq!(&bytes[..6], b"LUKS\xba\xbe");
    // Keyslot 0 starts at byte 208: active (4 bytes), then the iterations (big-endian).
    assert_eq!(&bytes[208..212], &0x00AC_71F3u32.to_be_bytes());
    bytes[212..216].copy_from_slice(&u32::MAX.to_be_bytes());
    std::fs::write(&img, bytes).unwrap();
    (img, dir.join("k0"))
}

/// Sends SIGTERM to `pid`.
fn terminate(pid: u32) {
    sectorcrypt_testkit::run(Command::new("kill").args(["-TERM", &pid.to_string()]));
}

#[test]
fn serve_and_open_stop_on_sigterm_during_key_derivation() {
    let tmp = tempfile::tempdir().unwrap();
    let (img, key) = endless_kdf_volume(tmp.path());
    let mut kids = Kids(Vec::new());

    let sock = tmp.path().join("s.sock");
    let serve = Command::new(bin())
        .args([
            "serve",
            s(&img),
            "--key-file",
            s(&key),
            "--socket",
            s(&sock),
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    kids.0.push(serve);
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(kids.0[0].try_wait().unwrap().is_none(), "serve ended early");
    terminate(kids.0[0].id());
    let t0 = std::time::Instant::now();
    while kids.0[0].try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed().as_secs() < 5,
            "serve still running 5 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let serve = kids.0.pop().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&serve.stderr);
    assert_eq!(serve.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped while unlocking"), "{err}");
    assert!(!sock.exists());

    // open: `close` stops its serving process while unlocking; the name is free again.
    let rt = Runtime::new(tmp.path());
    let open = Command::new(bin())
        .args(["open", s(&img), "slow", "--key-file", s(&key)])
        .env("SECTORCRYPT_RUNTIME_DIR", &rt.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    kids.0.push(open);
    let entry = rt.dir.join("slow.json");
    let t0 = std::time::Instant::now();
    let pid = loop {
        let e: Option<Value> = std::fs::read(&entry)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(pid) = e.and_then(|e| e["pid"].as_u64()) {
            break pid;
        }
        assert!(t0.elapsed().as_secs() < 10, "no entry for slow");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::thread::sleep(std::time::Duration::from_secs(1));
    // `close slow` sends the SIGTERM and returns once the process is gone.
    let mut close = Command::new(bin())
        .args(["close", "slow"])
        .env("SECTORCRYPT_RUNTIME_DIR", &rt.dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let closed = loop {
        if let Some(st) = close.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed().as_secs() >= 5 {
            let _ = close.kill();
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("close slow still waiting 5 s later: its process ignored SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(closed.success());
    let t0 = std::time::Instant::now();
    while kids.0[0].try_wait().unwrap().is_none() {
        assert!(t0.elapsed().as_secs() < 5, "open still waiting");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let open = kids.0.pop().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&open.stderr);
    assert_eq!(open.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped while unlocking"), "{err}");
    wait_gone(pid);
    assert!(!entry.exists());
}

/// A runtime directory made by the test (mode 0700), as `open` would make it.
fn make_runtime(rt: &Runtime) {
    std::fs::create_dir(&rt.dir).unwrap();
    std::fs::set_permissions(&rt.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
}

/// Whether the tests run as root.
fn is_root() -> bool {
    let id = sectorcrypt_testkit::run_stdout(Command::new("id").arg("-u"));
    id.trim() == "0"
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> u64 {
    let mut c = Command::new("true").spawn().unwrap();
    c.wait().unwrap();
    c.id() as u64
}

#[test]
fn a_process_that_merely_has_the_name_in_its_arguments_is_never_signalled() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    make_runtime(&rt);
    let mut kids = Kids(Vec::new());
    // argv: sh -c '...' victim --foreground, as `open`'s serving process has.
    let victim = Command::new("sh")
        .args(["-c", "sleep 60; :", "victim", "--foreground"])
        .spawn()
        .unwrap();
    let pid = victim.id();
    kids.0.push(victim);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    // An entry without a start time, then one with the wrong start time.
    for extra in [Value::Null, Value::from(start + 1)] {
        let entry = serde_json::json!({
            "name": "victim", "pid": pid, "start": extra, "ready": true, "image": "/x",
        });
        std::fs::write(rt.dir.join("victim.json"), entry.to_string()).unwrap();
        let o = rt.sc(&["close", "victim"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            kids.0[0].try_wait().unwrap().is_none(),
            "process {pid} was signalled"
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 0, "{err}");
        assert!(err.contains("stale entry was removed"), "{err}");
        assert!(!rt.dir.join("victim.json").exists());
    }
    // With its real start time it is the entry's process (status lists it).
    let entry = serde_json::json!({
        "name": "victim", "pid": pid, "start": start, "ready": true, "image": "/x",
    });
    std::fs::write(rt.dir.join("victim.json"), entry.to_string()).unwrap();
    assert_eq!(rt.status("victim")["pid"], pid);
}

#[test]
fn a_runtime_directory_others_can_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    make_runtime(&rt);
    let set_mode = |m: u32| {
        std::fs::set_permissions(&rt.dir, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap()
    };
    let all_refuse = |want: &str| {
        for args in [
            vec!["status"],
            vec!["status", "v"],
            vec!["close", "v"],
            vec!["open", s(&img), "v", "--key-file", s(&key)],
        ] {
            let o = rt.sc(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(code(&o), 2, "{args:?}: {err}");
            assert!(err.contains("the runtime directory"), "{args:?}: {err}");
            assert!(err.contains(want), "{args:?}: {err}");
        }
    };
    set_mode(0o1777);
    all_refuse("writable by group or others (mode 1777)");
    set_mode(0o770);
    all_refuse("writable by group or others (mode 0770)");
    set_mode(0o700);
    if is_root() {
        sectorcrypt_testkit::run(Command::new("chown").args(["65534", s(&rt.dir)]));
        all_refuse("owned by uid 65534");
        sectorcrypt_testkit::run(Command::new("chown").args(["0", s(&rt.dir)]));
    }
    // In a parent that others can write without the sticky bit, it could be renamed away
    // and replaced; with the sticky bit (as /tmp) it cannot.
    let parent_mode = |m: u32| {
        std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(m))
            .unwrap()
    };
    parent_mode(0o777);
    all_refuse("which others can write (mode 0777, no sticky bit)");
    parent_mode(0o1777);
    assert_eq!(ok(rt.sc(&["status", "--json"])).trim(), "[]");
    parent_mode(0o700);
    // A link to a directory of the user's is no runtime directory either.
    let real = tmp.path().join("real");
    std::fs::rename(&rt.dir, &real).unwrap();
    std::os::unix::fs::symlink(&real, &rt.dir).unwrap();
    all_refuse("is a symbolic link");
    std::fs::remove_file(&rt.dir).unwrap();
    std::fs::rename(&real, &rt.dir).unwrap();
    assert_eq!(ok(rt.sc(&["status", "--json"])).trim(), "[]");
}

#[test]
fn planted_entries_and_links_are_neither_followed_nor_obeyed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    make_runtime(&rt);

    // A link where `open` writes its entry: the file it names is not clobbered.
    let precious = tmp.path().join("precious");
    std::fs::write(&precious, "keep me").unwrap();
    for planted in [".v.json.new", "v.json.new"] {
        std::os::unix::fs::symlink(&precious, rt.dir.join(planted)).unwrap();
    }
    rt.open(&img, "v", &key, &[]);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
    assert!(rt.dir.join(".v.json.new").is_symlink());
    let entries = std::fs::read_dir(&rt.dir).unwrap().count();
    assert_eq!(
        entries, 4,
        "v.json, v.sock and the two links, no temporary file"
    );
    rt.close("v");
}

#[test]
fn status_does_not_unmount_what_a_planted_entry_names() {
    sectorcrypt_testkit::require!("mount", "umount");
    if !is_root() {
        sectorcrypt_testkit::skipped!("skipped: not root (mounting a tmpfs needs it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    make_runtime(&rt);
    // Entries naming a file system this tool did not mount: a regular file, and a link
    // to one. status does not unmount it, and names the link as a bad entry.
    let victim = std::fs::canonicalize(tmp.path()).unwrap().join("victim");
    std::fs::create_dir(&victim).unwrap();
    sectorcrypt_testkit::run(Command::new("mount").args(["-t", "tmpfs", "tmpfs", s(&victim)]));
    let _guard = FsMount(victim.clone());
    let dead = dead_pid();
    let planted = |name: &str| {
        serde_json::json!({
            "name": name, "pid": dead, "start": 1, "ready": true, "image": "/x",
            "mount": s(&victim), "loop": "/dev/loop0",
        })
        .to_string()
    };
    std::fs::write(rt.dir.join("plain.json"), planted("plain")).unwrap();
    let target = tmp.path().join("target.json");
    std::fs::write(&target, planted("linked")).unwrap();
    std::os::unix::fs::symlink(&target, rt.dir.join("linked.json")).unwrap();
    let o = rt.sc(&["status"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), 0, "{err}");
    assert!(mounted(&victim), "status unmounted {}", victim.display());
    assert!(err.contains("bad entry linked"), "{err}");
    assert!(err.contains("symbolic link (not followed)"), "{err}");
    assert!(err.contains("plain: its process was gone"), "{err}");
    assert!(target.exists());
}

#[test]
fn a_bad_entry_is_named_and_the_others_are_still_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    rt.open(&img, "good", &key, &[]);
    std::fs::write(rt.dir.join("broken.json"), "{\"name\": \"bro").unwrap();
    std::fs::write(
        rt.dir.join("other.json"),
        "{\"name\": \"good\", \"pid\": 1}",
    )
    .unwrap();
    for json in [false, true] {
        let args: &[&str] = if json {
            &["status", "--json"]
        } else {
            &["status"]
        };
        let o = rt.sc(args);
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(code(&o), 0, "{err}");
        assert!(out.contains("good"), "{out}");
        assert!(err.contains("bad entry broken"), "{err}");
        assert!(err.contains("bad entry other"), "{err}");
        assert!(err.contains("it names another NAME"), "{err}");
        if json {
            let all: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(all.as_array().unwrap().len(), 1);
        }
    }
    // The bad entries are left for the user to look at; NAME alone is an error.
    assert!(rt.dir.join("broken.json").exists());
    let o = rt.sc(&["status", "broken"]);
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad entry broken"));
}

#[test]
fn names_are_a_safe_set_and_status_prints_no_control_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    for name in [
        "a\x1b[2Jb",
        "tab\tx",
        "nl\n",
        ".hidden",
        "-x",
        "sp ace",
        "caf\u{e9}",
    ] {
        for args in [vec!["close", "--", name], vec!["status", "--", name]] {
            let o = rt.sc(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(code(&o), 2, "{args:?}");
            assert!(err.contains("bad NAME"), "{args:?}: {err}");
            assert!(
                !err.contains('\x1b') && !err.contains('\t'),
                "{args:?}: {err}"
            );
        }
    }
    for name in ["v-1.2_x", "A", "0"] {
        let o = rt.sc(&["status", name]);
        assert!(String::from_utf8_lossy(&o.stderr).contains("nothing is open"));
    }

    // An image whose path holds terminal escapes (C0 and C1): status shows them escaped.
    let (img, key, _) = volume(tmp.path());
    let odd = tmp.path().join("v\x1b[31m\u{9b}2J\x07.img");
    std::fs::rename(&img, &odd).unwrap();
    rt.open(&odd, "odd", &key, &[]);
    let text = rt.sc(&["status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("v\\u{1b}[31m\\u{9b}2J\\u{7}.img"), "{text:?}");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    let json = String::from_utf8_lossy(&rt.sc(&["status", "odd", "--json"]).stdout).to_string();
    assert!(
        !json.chars().any(|c| c.is_control() && c != '\n'),
        "{json:?}"
    );
    let entry: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(entry["image"], s(&std::fs::canonicalize(&odd).unwrap()));
}

#[test]
fn a_killed_open_loop_is_cleaned_up_by_status() {
    if let Some(why) = volumes::loop_unavailable(&[]) {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    rt.open(&img, "killed", &key, &["--loop"]);
    let entry = rt.status("killed");
    let private = PathBuf::from(entry["mount"].as_str().unwrap());
    let pid = entry["pid"].as_u64().unwrap();
    sectorcrypt_testkit::run(Command::new("kill").args(["-9", &pid.to_string()]));
    wait_gone(pid);
    assert!(mounted(&private));
    // Its FUSE mount's server is gone: that mount, its loop device and the entry go.
    let o = rt.sc(&["status", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("stale entry was removed"), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "[]");
    assert!(!mounted(&private));
    assert!(!private.exists());
    assert!(!loop_under(&rt.dir), "a loop device is still attached");
}

#[test]
fn close_refuses_while_the_disk_file_is_in_use() {
    if let Some(why) = volumes::loop_unavailable(&["sleep"]) {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    let mp = std::fs::canonicalize(tmp.path()).unwrap().join("plain");
    std::fs::create_dir(&mp).unwrap();
    rt.open(&img, "file", &key, &["--mount", s(&mp)]);
    let disk = mp.join("disk");

    // A loop device of someone else's on the disk file.
    let other =
        sectorcrypt_testkit::run_stdout(Command::new("losetup").args(["-f", "--show"]).arg(&disk));
    let other = other.trim().to_string();
    let refused = rt.sc(&["close", "file"]);
    let _ = Command::new("losetup").args(["-d", &other]).status();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(code(&refused), 2, "{err}");
    assert!(err.contains(&format!("is attached to {other}")), "{err}");

    // A process with it open.
    let mut kids = Kids(Vec::new());
    kids.0.push(
        Command::new("sleep")
            .arg("60")
            .stdin(std::fs::File::open(&disk).unwrap())
            .spawn()
            .unwrap(),
    );
    let held = kids.0[0].id();
    close_refused(&rt, "file", &[&format!("open in process {held} (sleep)")]);
    drop(kids);
    rt.close("file");
    assert!(!mounted(&mp));
}

#[test]
fn sigterm_at_the_passphrase_prompt_gives_the_terminal_back() {
    sectorcrypt_testkit::require!("script", "stty", "timeout");
    let tmp = tempfile::tempdir().unwrap();
    let (img, _, _) = volume(tmp.path());
    let sock = tmp.path().join("s.sock");
    // On a pseudo-terminal: serve prompts (echo off), is stopped there, and then the
    // terminal's settings are printed.
    let cmd = format!(
        "'{}' serve '{}' --socket '{}' </dev/tty & sleep 1; kill -TERM $!; wait $!; echo exit=$?; stty -a",
        bin(),
        img.display(),
        sock.display()
    );
    let mut script = Command::new("timeout")
        .args(["20", "script", "-qfec", &cmd, "/dev/null"])
        .env_remove("SECTORCRYPT_BACKEND")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Standard input stays open (no end of input reaches the prompt) until it is done.
    let stdin = script.stdin.take();
    let out = script.wait_with_output().unwrap();
    drop(stdin);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Enter passphrase"), "{text}");
    assert!(text.contains("stopped while unlocking"), "{text}");
    assert!(text.contains("exit=1"), "{text}");
    let words: Vec<&str> = text.split_whitespace().collect();
    for mode in ["echo", "icanon", "isig"] {
        assert!(words.contains(&mode), "{mode} is off:\n{text}");
    }
}

/// Every file under `dir` (its entries, whatever their layout), as text.
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(p);
            } else if t.is_file() {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                out.push((p, text));
            }
        }
    }
    out
}

#[test]
fn a_password_in_an_nbd_uri_reaches_no_open_entry_status_or_export_description() {
    sectorcrypt_testkit::require!("nbdkit", "nbdinfo");
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let img = volumes::new_volume(tmp.path(), &[]);
    let key = tmp.path().join("k0");
    let kit =
        sectorcrypt_testkit::nbdkit::Nbdkit::tcp(&["file", &format!("file={}", img.display())]);
    let port = kit
        .uri()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    const SECRET: &str = "pw-SECRET-77e0";
    let uri = format!("nbd://user:{SECRET}@127.0.0.1:{port}/");
    let shown = format!("nbd://127.0.0.1:{port}/");
    rt.open(Path::new(&uri), "remote", &key, &[]);
    let mut leaks = Vec::new();
    for (p, text) in files_under(&rt.dir) {
        if text.contains(SECRET) {
            leaks.push(format!("{}: {text}", p.display()));
        }
    }
    let status = ok(rt.sc(&["status", "remote", "--json"]));
    let text = ok(rt.sc(&["status"]));
    let entry: Value = serde_json::from_str(&status).unwrap();
    let sock = entry["socket"]
        .as_str()
        .expect("the entry's socket")
        .to_string();
    let info = ok(Command::new("nbdinfo")
        .arg("--json")
        .arg(format!("nbd+unix:///?socket={sock}"))
        .output()
        .unwrap());
    for (place, out) in [
        ("status --json", &status),
        ("status", &text),
        ("the export description", &info),
    ] {
        if out.contains(SECRET) || !out.contains(&shown) {
            leaks.push(format!("{place}: {out}"));
        }
    }
    rt.close("remote");
    assert!(
        leaks.is_empty(),
        "the password shows:\n{}",
        leaks.join("\n")
    );
}

#[test]
fn a_signal_while_unlocking_a_remote_volume_shows_no_secret_of_its_uri() {
    sectorcrypt_testkit::require!("nbdkit");
    let tmp = tempfile::tempdir().unwrap();
    let (img, key) = endless_kdf_volume(tmp.path());
    let kit =
        sectorcrypt_testkit::nbdkit::Nbdkit::tcp(&["file", &format!("file={}", img.display())]);
    let port = kit
        .uri()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    const SECRET: &str = "pw-SECRET-5c1d";
    let uri = format!("nbd://user:{SECRET}@127.0.0.1:{port}/");
    let sock = tmp.path().join("s.sock");
    let mut kids = Kids(Vec::new());
    kids.0.push(
        Command::new(bin())
            .args(["serve", &uri, "--key-file", s(&key), "--socket", s(&sock)])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(kids.0[0].try_wait().unwrap().is_none(), "serve ended early");
    terminate(kids.0[0].id());
    let t0 = std::time::Instant::now();
    while kids.0[0].try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed().as_secs() < 5,
            "serve still running 5 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let serve = kids.0.pop().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&serve.stderr);
    assert_eq!(serve.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("stopped while unlocking nbd://127.0.0.1:{port}/")),
        "{err}"
    );
    assert!(!err.contains(SECRET), "the password shows: {err}");
}

/// A python3 process that maps `path` (shared and writable, or private and read-only)
/// with libc's mmap, closes the descriptor it mapped it with and keeps the mapping (no
/// descriptor left: Python's own mmap keeps a duplicate); it has mapped it once this
/// returns.
fn mapper(path: &str, shared: bool) -> std::process::Child {
    // PROT_READ 1, PROT_WRITE 2; MAP_SHARED 1, MAP_PRIVATE 2.
    let (flags, prot, mode) = if shared {
        (1, 3, "O_RDWR")
    } else {
        (2, 1, "O_RDONLY")
    };
    let mut child = Command::new("python3")
        .args(["-c"])
        .arg(format!(
            "import ctypes, os, sys, time\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             libc.mmap.restype = ctypes.c_void_p\n\
             libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, \
             ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
             fd = os.open(sys.argv[1], os.{mode})\n\
             addr = libc.mmap(None, 4096, {prot}, {flags}, fd, 0)\n\
             assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())\n\
             os.close(fd)\n\
             print('ready', flush=True)\n\
             time.sleep(60)\n"
        ))
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready", "python3 could not map {path}");
    child
}

#[test]
fn close_refuses_while_the_loop_device_or_the_disk_file_is_mapped() {
    if let Some(why) = volumes::loop_unavailable(&["python3"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    let out = rt.open(&img, "mapped", &key, &["--loop"]);
    let dev = out[1].clone();
    let mp = rt.status("mapped")["mount"].as_str().unwrap().to_string();
    let disk = format!("{mp}/disk");
    let mut kids = Kids(Vec::new());

    // The loop device mapped (shared, writable) by a process that closed its descriptor.
    kids.0.push(mapper(&dev, true));
    let pid = kids.0[0].id();
    close_refused(
        &rt,
        "mapped",
        &[&format!("{dev} is mapped in process {pid}")],
    );
    drop(kids);

    // The disk file mapped (private, read-only) the same way.
    let mut kids = Kids(vec![mapper(&disk, false)]);
    let pid = kids.0[0].id();
    close_refused(
        &rt,
        "mapped",
        &[&format!("{disk} is mapped in process {pid}")],
    );
    let _ = kids.0[0].kill();
    let _ = kids.0[0].wait();
    rt.close("mapped");
    assert!(!loop_under(&rt.dir), "a loop device is still attached");
}

#[test]
fn a_runtime_directory_under_a_directory_of_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: not root (chown)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    let mine = theirs.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let rt = Runtime::new(&mine);
    make_runtime(&rt);
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    let via_link = Runtime::new(&link);
    let (img, key, _) = volume(tmp.path());
    let refused = |rt: &Runtime, by: &Path| {
        let want = format!(
            "is under {}, which is owned by uid 65534, who could rename it away",
            by.display()
        );
        for args in [
            vec!["status"],
            vec!["close", "v"],
            vec!["open", s(&img), "v", "--key-file", s(&key)],
        ] {
            let o = rt.sc(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(code(&o), 2, "{args:?}: {err}");
            assert!(err.contains(&want), "{args:?}: {err}");
        }
    };
    let chown = |who: &str, p: &Path| {
        sectorcrypt_testkit::run(Command::new("chown").args(["-h", who, s(p)]));
    };
    assert_eq!(ok(rt.sc(&["status", "--json"])).trim(), "[]");
    assert_eq!(ok(via_link.sc(&["status", "--json"])).trim(), "[]");
    // Its parent's owner (not root, not the user) may rename it away, whatever the mode.
    chown("65534", &mine);
    refused(&rt, &mine);
    chown("0", &mine);
    // So may the owner of any directory further up.
    chown("65534", &theirs);
    refused(&rt, &theirs);
    chown("0", &theirs);
    // And whoever owns a link on the way may put another in its place.
    chown("65534", &link);
    refused(&via_link, &link);
    chown("0", &link);
    assert_eq!(ok(rt.sc(&["status", "--json"])).trim(), "[]");
    assert_eq!(ok(via_link.sc(&["status", "--json"])).trim(), "[]");
}

/// SIGKILL for a process id when dropped (a test's leftover, whatever happened).
struct KillOnDrop(u64);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn sigterm_to_open_itself_stops_its_process_during_key_derivation() {
    let tmp = tempfile::tempdir().unwrap();
    let (img, key) = endless_kdf_volume(tmp.path());
    let rt = Runtime::new(tmp.path());
    let mut kids = Kids(Vec::new());
    // As `timeout 60 sectorcrypt open ...` would: the signal reaches `open` alone, not
    // its serving process.
    kids.0.push(
        Command::new(bin())
            .args(["open", s(&img), "slow", "--key-file", s(&key)])
            .env("SECTORCRYPT_RUNTIME_DIR", &rt.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let entry = rt.dir.join("slow.json");
    let t0 = std::time::Instant::now();
    let pid = loop {
        let e: Option<Value> = std::fs::read(&entry)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(pid) = e.and_then(|e| e["pid"].as_u64()) {
            break pid;
        }
        assert!(t0.elapsed().as_secs() < 10, "no entry for slow");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _serving = KillOnDrop(pid);
    std::thread::sleep(std::time::Duration::from_secs(1));
    terminate(kids.0[0].id());
    let t0 = std::time::Instant::now();
    while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
        assert!(
            t0.elapsed().as_secs() < 5,
            "open's serving process {pid} still unlocking 5 s after open was stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let open = kids.0.pop().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&open.stderr);
    assert_eq!(open.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped while unlocking"), "{err}");
    assert!(err.contains("signal 15: opening stopped"), "{err}");
    assert!(!entry.exists());
}

#[test]
fn close_refuses_while_the_disk_file_is_in_use_through_a_bind_mount() {
    if let Some(why) = volumes::loop_unavailable(&["sleep"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    let mp = std::fs::canonicalize(tmp.path()).unwrap().join("plain");
    std::fs::create_dir(&mp).unwrap();
    rt.open(&img, "bound", &key, &["--mount", s(&mp)]);
    let disk = mp.join("disk");
    // The disk file bound to another path, and used through it only.
    let alias = tmp.path().join("alias");
    std::fs::write(&alias, b"").unwrap();
    sectorcrypt_testkit::run(Command::new("mount").arg("--bind").arg(&disk).arg(&alias));
    struct Unbind(PathBuf);
    impl Drop for Unbind {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let unbind = Unbind(alias.clone());
    let mut kids = Kids(Vec::new());
    kids.0.push(
        Command::new("sleep")
            .arg("60")
            .stdin(std::fs::File::open(&alias).unwrap())
            .spawn()
            .unwrap(),
    );
    let held = kids.0[0].id();
    let shown = disk.display().to_string();
    close_refused(
        &rt,
        "bound",
        &[&format!("{shown} is open in process {held} (sleep)")],
    );
    // A loop device attached through the other path.
    drop(kids);
    let other =
        sectorcrypt_testkit::run_stdout(Command::new("losetup").args(["-f", "--show"]).arg(&alias));
    let other = other.trim().to_string();
    let refused = rt.sc(&["close", "bound"]);
    let _ = Command::new("losetup").args(["-d", &other]).status();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(code(&refused), 2, "{err}");
    assert!(
        err.contains(&format!("{shown} is attached to {other}")),
        "{err}"
    );
    drop(unbind);
    rt.close("bound");
    assert!(!mounted(&mp));
}

#[test]
fn close_refuses_while_a_partition_of_the_loop_device_is_in_use_and_then_removes_it() {
    if let Some(why) = volumes::loop_unavailable(&["partx", "mknod", "sleep"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rt = Runtime::new(tmp.path());
    let (img, key, _) = volume(tmp.path());
    let out = rt.open(&img, "parted", &key, &["--loop"]);
    let dev = out[1].clone();
    // An MBR with one partition (sectors 2048..6144), added by partx.
    let mut mbr = vec![0u8; 512];
    mbr[446 + 4] = 0x83;
    mbr[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
    mbr[446 + 12..446 + 16].copy_from_slice(&4096u32.to_le_bytes());
    mbr[510..].copy_from_slice(&[0x55, 0xaa]);
    {
        use std::io::Write;
        let mut d = std::fs::OpenOptions::new().write(true).open(&dev).unwrap();
        d.write_all(&mbr).unwrap();
        d.sync_all().unwrap();
    }
    sectorcrypt_testkit::run(Command::new("partx").args(["-a", &dev]));
    struct Unpart(String);
    impl Drop for Unpart {
        fn drop(&mut self) {
            let _ = Command::new("partx")
                .args(["-d", &self.0])
                .stderr(Stdio::null())
                .status();
        }
    }
    let _unpart = Unpart(dev.clone());
    let base = Path::new(&dev)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let part = format!("{base}p1");
    let num = std::fs::read_to_string(format!("/sys/block/{base}/{part}/dev")).unwrap();
    let (major, minor) = num.trim().split_once(':').unwrap();
    // Its own node (whether or not /dev has one), held open by a process.
    let node = tmp.path().join("p1");
    sectorcrypt_testkit::run(Command::new("mknod").arg(&node).args(["b", major, minor]));
    let mut kids = Kids(Vec::new());
    kids.0.push(
        Command::new("sleep")
            .arg("60")
            .stdin(std::fs::File::open(&node).unwrap())
            .spawn()
            .unwrap(),
    );
    let held = kids.0[0].id();
    close_refused(
        &rt,
        "parted",
        &[&format!(
            "{dev} is open in process {held} (sleep), through its partition /dev/{part}"
        )],
    );
    drop(kids);
    // Partitions added by partx outlive the loop device's detaching (the next file on it
    // would show through them): close removes them.
    rt.close("parted");
    assert!(!loop_under(&rt.dir), "a loop device is still attached");
    assert!(
        !Path::new(&format!("/sys/block/{base}/{part}")).exists(),
        "{part} outlived close"
    );
}
