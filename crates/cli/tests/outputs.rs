//! What the CLI writes outside a volume: `--output` of `read` and `cipher` writes through
//! an existing FIFO, character device or block device (as `dd` does), refuses to replace
//! a symbolic link, and still replaces a regular file atomically; `format` creates images
//! readable by their owner only. Device nodes are made with mknod in a temporary folder
//! (root only), never the system's own.

mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{pattern, run_stdout};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::Duration;
use support::{code, ok, s, sc};
use volumes::{new_volume, write_volume};

/// The plaintext written into the test volumes.
fn data() -> Vec<u8> {
    pattern(1 << 20, 21)
}

/// A volume in `dir` holding [`data`] at offset 0, and its key file.
fn volume(dir: &Path) -> (PathBuf, PathBuf) {
    let img = new_volume(dir, &[]);
    let k0 = dir.join("k0");
    write_volume(dir, &img, &k0, &data());
    (img, k0)
}

/// `read IMG --length 1M --output OUT`.
fn read_to(img: &Path, key: &Path, out: &Path) -> Output {
    let args = [
        "read",
        s(img),
        "--length",
        "1048576",
        "--output",
        s(out),
        "--key-file",
        s(key),
    ];
    sc(&args, b"")
}

/// `cipher encrypt` of `input` to `out` (aes-xts-plain64, a fixed key), and the
/// ciphertext it must produce (the same command to standard output).
fn cipher_to(input: &[u8], out: &Path) -> (Output, Vec<u8>) {
    let key = format!("{}{}", "11".repeat(32), "22".repeat(32));
    let mut args = vec![
        "cipher",
        "encrypt",
        "--cipher",
        "aes-xts-plain64",
        "--key",
        &key,
    ];
    let want = support::ok_bytes(sc(&args, input));
    args.extend(["--output", s(out)]);
    (sc(&args, input), want)
}

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    run_stdout(Command::new("mkfifo").arg(path));
}

/// Reads the FIFO `path` to its end on a thread; the bytes arrive on the channel.
fn drain(path: &Path) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut got = vec![];
        std::fs::File::open(&path)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        let _ = tx.send(got);
    });
    rx
}

/// What a FIFO reader received, once the writer has finished.
fn received(rx: &mpsc::Receiver<Vec<u8>>) -> Vec<u8> {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the FIFO's reader got no end of data: the FIFO was not written")
}

fn file_type(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

#[test]
fn output_to_a_fifo_is_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let (img, key) = volume(dir.path());
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let rx = drain(&fifo);
    let o = read_to(&img, &key, &fifo);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(file_type(&fifo).is_fifo(), "read replaced the FIFO");
    assert!(received(&rx) == data(), "the FIFO's reader got other bytes");

    let rx = drain(&fifo);
    let (o, want) = cipher_to(&data()[..4096], &fifo);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(file_type(&fifo).is_fifo(), "cipher replaced the FIFO");
    assert_eq!(received(&rx), want);
}

#[test]
fn output_to_a_symlink_is_refused_and_its_target_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (img, key) = volume(dir.path());
    let target = dir.path().join("target");
    std::fs::write(&target, b"keep me").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    for l in [&link, &dangling] {
        let runs = [
            ("read", read_to(&img, &key, l)),
            ("cipher", cipher_to(&[7u8; 512], l).0),
        ];
        for (what, o) in runs {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(code(&o), 2, "{what} --output {}: {err}", l.display());
            assert!(err.contains("symbolic link"), "{what}: {err}");
            assert!(file_type(l).is_symlink(), "{what} replaced the link");
        }
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    assert!(!dir.path().join("nowhere").exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".sectorcrypt-")),
        "{names:?}"
    );
}

#[test]
fn output_to_a_character_device_keeps_the_device() {
    if !root() {
        sectorcrypt_testkit::skipped!("skipped: mknod needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, key) = volume(dir.path());
    // A node of the null device (1, 3), made here: the system's /dev/null is never used.
    let null = dir.path().join("null");
    run_stdout(Command::new("mknod").arg(&null).args(["c", "1", "3"]));
    let o = read_to(&img, &key, &null);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        file_type(&null).is_char_device(),
        "read replaced the device node"
    );
    let (o, _) = cipher_to(&[7u8; 512], &null);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        file_type(&null).is_char_device(),
        "cipher replaced the device node"
    );
}

/// A loop device over a file, detached on drop.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn output_to_a_block_device_writes_the_device() {
    if !root() || !Path::new("/dev/loop-control").exists() {
        sectorcrypt_testkit::skipped!("skipped: loop devices need root and /dev/loop-control");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, key) = volume(dir.path());
    let backing = dir.path().join("backing");
    std::fs::write(&backing, vec![0u8; 2 << 20]).unwrap();
    let Ok(out) = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&backing)
        .output()
    else {
        sectorcrypt_testkit::skipped!("skipped: losetup did not run");
        return;
    };
    if !out.status.success() {
        sectorcrypt_testkit::skipped!(
            "skipped: no loop device: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let dev = Loop(String::from_utf8(out.stdout).unwrap().trim().to_string());
    // A node of that device made here, so that the old behaviour (replacing the node)
    // could only ever replace this one.
    let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&dev.0).unwrap());
    // glibc's encoding of dev_t.
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xffff_ff00);
    let (major, minor) = (major.to_string(), minor.to_string());
    let node = dir.path().join("blk");
    run_stdout(Command::new("mknod").arg(&node).args(["b", &major, &minor]));
    let o = read_to(&img, &key, &node);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        file_type(&node).is_block_device(),
        "read replaced the device node"
    );
    drop(dev);
    let written = std::fs::read(&backing).unwrap();
    assert!(
        written[..1 << 20] == data()[..],
        "the device did not get the plaintext"
    );
    assert!(written[1 << 20..].iter().all(|&b| b == 0));
}

#[test]
fn output_to_a_regular_file_is_still_replaced_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let (img, key) = volume(dir.path());
    let out = dir.path().join("out");
    std::fs::write(&out, b"old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&out).unwrap();
    ok(read_to(&img, &key, &out));
    let after = std::fs::metadata(&out).unwrap();
    assert!(std::fs::read(&out).unwrap() == data());
    // A new file put in place (not the old one rewritten), private to its owner.
    use std::os::unix::fs::MetadataExt;
    assert_ne!(before.ino(), after.ino());
    assert_eq!(after.permissions().mode() & 0o777, 0o600);
}

#[test]
fn format_creates_images_readable_by_their_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let mode = std::fs::metadata(&img).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "format created the image with mode {mode:o}");
    // An existing image keeps its mode: format changes the contents, not who may read.
    std::fs::set_permissions(&img, std::fs::Permissions::from_mode(0o640)).unwrap();
    let k = dir.path().join("k0");
    let mut args = vec!["format", s(&img), "--key-file", s(&k), "--batch"];
    args.extend_from_slice(&volumes::FAST);
    ok(sc(&args, b""));
    let mode = std::fs::metadata(&img).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

/// Output to a reader that has gone (`sectorcrypt dump --json | head`): the command ends
/// quietly with the status of a process that SIGPIPE ended in a shell (141), not with a
/// panic's message and status 101.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(support::bin())
        .args(["backends", "--json"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 141, "stderr: {err}");
    assert!(err.is_empty(), "stderr: {err}");
}
