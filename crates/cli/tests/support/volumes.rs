//! Volume images for the tests of the volume commands, `serve` and `mount` (included with
//! `#[path = "support/volumes.rs"] mod volumes;` beside `mod support;`): key files, a
//! LUKS2 volume made by `sectorcrypt format` at the lowest KDF cost, a LUKS1 volume made by
//! qemu-img, mount points.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use crate::support::{bin, code, ok, s, sc};
use sectorcrypt_testkit::run;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The lowest keyslot cost `format` and the key commands accept.
pub const FAST: [&str; 4] = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

/// A key file `dir/name` holding `pass`.
pub fn key_file(dir: &Path, name: &str, pass: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, pass).unwrap();
    p
}

/// `dir/v.img`: a 20 MiB volume made by `sectorcrypt format FAST EXTRA`, keyslot 0 opened
/// by "zero" (in the key file `dir/k0`).
pub fn new_volume(dir: &Path, extra: &[&str]) -> PathBuf {
    let img = dir.join("v.img");
    let k = key_file(dir, "k0", "zero");
    let mut args = vec!["format", s(&img), "--size", "20M", "--key-file", s(&k)];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    ok(sc(&args, b""));
    img
}

/// `sectorcrypt test-key IMG` with `pass` on standard input: its exit code.
pub fn test_key(img: &Path, pass: &str) -> i32 {
    code(&sc(
        &["test-key", s(img), "--key-file", "-"],
        pass.as_bytes(),
    ))
}

/// A LUKS1 volume of `size` bytes of data made by `qemu-img create -f luks` (10 ms of
/// PBKDF2) with the passphrase in `pass`.
pub fn qemu_luks(img: &Path, pass: &Path, size: usize) {
    run(Command::new("qemu-img")
        .args(["create", "-q", "-f", "luks", "--object"])
        .arg(format!("secret,id=s0,file={}", pass.display()))
        .args(["-o", "key-secret=s0,iter-time=10"])
        .arg(img)
        .arg(size.to_string()));
}

/// Whether `mp` is a mount point (field 5 of /proc/self/mountinfo).
pub fn mounted(mp: &Path) -> bool {
    let mp = mp.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(mp.as_str()))
}

/// `sectorcrypt umount MP`, then waits until the serving process let go of it.
pub fn unmount(mp: &Path) {
    run(Command::new(bin()).arg("umount").arg(mp));
    let t0 = std::time::Instant::now();
    while mounted(mp) {
        assert!(t0.elapsed().as_secs() < 20, "still mounted");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts `sectorcrypt ARGS` with no standard input or output; its standard error goes to
/// `stderr`.
pub fn spawn(args: &[&str], stderr: Stdio) -> Child {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start sectorcrypt")
}

/// `sectorcrypt write IMG --input DIR/in --key-file KEY` of `data` (which goes to
/// `dir/in` first).
pub fn write_volume(dir: &Path, img: &Path, key: &Path, data: &[u8]) {
    let input = dir.join("in");
    std::fs::write(&input, data).unwrap();
    let args = ["write", s(img), "--input", s(&input), "--key-file", s(key)];
    ok(sc(&args, b""));
}

/// Why this machine cannot run a test with FUSE, loop devices, mkfs.ext4 and mount (and
/// the `tools` it names), if it cannot: it needs /dev/fuse, root and an attachable loop.
pub fn loop_unavailable(tools: &[&str]) -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices (/dev/loop-control)".into());
    }
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root (losetup and mount need it)".into());
    }
    let needed = ["fusermount3", "losetup", "mkfs.ext4", "mount", "umount"];
    for tool in needed.iter().chain(tools) {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !found {
            return Some(format!("{tool} is not installed"));
        }
    }
    // A loop device must actually be attachable (containers often forbid it).
    let dir = tempfile::tempdir().ok()?;
    let probe = dir.path().join("probe");
    std::fs::write(&probe, vec![0u8; 1 << 20]).ok()?;
    let out = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&probe)
        .output()
        .ok()?;
    if !out.status.success() {
        return Some(format!(
            "losetup cannot attach a loop device: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    None
}
