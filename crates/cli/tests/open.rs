//! `sectorcrypt open IMAGE NAME`, `status [NAME]` and `close NAME`: the NBD export read by
//! libnbd's nbdinfo and nbdcopy against `sectorcrypt read`, status as text and JSON, a
//! NAME in use or malformed refused, a stale entry (its process killed) cleaned up, and
//! ext4 on the loop device of `open --loop` surviving close and open. Every run uses a
//! temporary runtime directory (SECTORCRYPT_RUNTIME_DIR), never the real one.

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
        eprintln!("skipped: {why}");
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
        eprintln!("skipped: no /dev/fuse");
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
