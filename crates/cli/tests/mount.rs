//! `sectorcrypt mount` with the kernel's FUSE and loop devices: mount a LUKS1 volume (made
//! by qemu-img), attach MOUNTPOINT/disk to a loop device, make an ext4 file system on it,
//! mount that, write files, unmount everything, open the volume again in a new process and
//! check the files. Needs /dev/fuse, root (for
//! losetup and mount) and the tools; otherwise the test says why it is skipped.

mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::run_stdout as sh;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{bin, code, s, sc};
use volumes::mounted;

/// Undoes whatever the test set up, even when it fails half-way.
struct Cleanup {
    fs_mount: PathBuf,
    loopdev: Option<String>,
    fuse_mount: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if mounted(&self.fs_mount) {
            let _ = Command::new("umount").arg(&self.fs_mount).status();
        }
        if let Some(d) = self.loopdev.take() {
            let _ = Command::new("losetup").args(["-d", &d]).status();
        }
        if mounted(&self.fuse_mount) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.fuse_mount)
                .status();
        }
    }
}

/// `sectorcrypt mount IMG MP --key-file PASS` (which returns once mounted).
fn mount_volume(img: &Path, pass: &Path, mp: &Path) {
    sh(Command::new(bin())
        .arg("mount")
        .arg(img)
        .arg(mp)
        .arg("--key-file")
        .arg(pass));
    assert!(mounted(mp));
}

/// Mounts the volume, attaches a loop device to its disk.
fn attach(img: &Path, pass: &Path, fuse_mount: &Path, clean: &mut Cleanup) -> String {
    mount_volume(img, pass, fuse_mount);
    let disk = fuse_mount.join("disk");
    let dev = sh(Command::new("losetup").args(["-f", "--show"]).arg(&disk))
        .trim()
        .to_string();
    clean.loopdev = Some(dev.clone());
    dev
}

/// Detaches the loop device and unmounts the volume.
fn detach(dev: &str, fuse_mount: &Path, clean: &mut Cleanup) {
    sh(Command::new("losetup").args(["-d", dev]));
    clean.loopdev = None;
    volumes::unmount(fuse_mount);
}

#[test]
fn ext4_on_a_loop_device_over_the_mounted_volume() {
    if let Some(why) = volumes::loop_unavailable(&["qemu-img"]) {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("vol.img");
    let pass = volumes::key_file(dir.path(), "pass", "mount test passphrase");
    volumes::qemu_luks(&img, &pass, 48 << 20);
    let fuse_mount = dir.path().join("plain");
    let fs_mount = dir.path().join("fs");
    std::fs::create_dir(&fuse_mount).unwrap();
    std::fs::create_dir(&fs_mount).unwrap();
    let fuse_mount = std::fs::canonicalize(&fuse_mount).unwrap();
    let mut clean = Cleanup {
        fs_mount: fs_mount.clone(),
        loopdev: None,
        fuse_mount: fuse_mount.clone(),
    };

    let dev = attach(&img, &pass, &fuse_mount, &mut clean);
    let disk = fuse_mount.join("disk");
    assert_eq!(std::fs::metadata(&disk).unwrap().len(), 48 << 20);
    // The file cannot grow or be truncated.
    let f = std::fs::OpenOptions::new().write(true).open(&disk).unwrap();
    assert!(f.set_len(1 << 20).is_err());
    drop(f);
    sh(Command::new("mkfs.ext4").args(["-q", "-F", &dev]));
    sh(Command::new("mount").arg(&dev).arg(&fs_mount));
    let text = "sectorcrypt plaintext marker: the quick brown fox\n".repeat(1000);
    let blob: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i * 7 + i / 1000) as u8)
        .collect();
    std::fs::write(fs_mount.join("a.txt"), &text).unwrap();
    std::fs::create_dir(fs_mount.join("sub")).unwrap();
    std::fs::write(fs_mount.join("sub/blob.bin"), &blob).unwrap();
    sh(Command::new("umount").arg(&fs_mount));
    detach(&dev, &fuse_mount, &mut clean);

    // What reached the image is ciphertext: the marker text is nowhere in it.
    let stored = std::fs::read(&img).unwrap();
    let marker = b"sectorcrypt plaintext marker";
    assert!(!stored.windows(marker.len()).any(|w| w == marker));

    // Open the volume again in a new process: the files are there.
    let dev = attach(&img, &pass, &fuse_mount, &mut clean);
    sh(Command::new("mount").arg(&dev).arg(&fs_mount));
    assert_eq!(
        std::fs::read_to_string(fs_mount.join("a.txt")).unwrap(),
        text
    );
    assert!(std::fs::read(fs_mount.join("sub/blob.bin")).unwrap() == blob);
    sh(Command::new("umount").arg(&fs_mount));
    detach(&dev, &fuse_mount, &mut clean);

    // Unmounting again is a clear usage error.
    assert_eq!(code(&sc(&["umount", s(&fuse_mount)], b"")), 2);
}

#[test]
fn the_mounted_file_reads_and_writes_at_odd_offsets_and_keeps_its_size() {
    use std::io::{Read, Seek, SeekFrom, Write};
    if !Path::new("/dev/fuse").exists() {
        sectorcrypt_testkit::skipped!("skipped: no /dev/fuse");
        return;
    }
    sectorcrypt_testkit::require!("fusermount3", "qemu-img");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("vol.img");
    let pass = volumes::key_file(dir.path(), "pass", "odd offsets");
    volumes::qemu_luks(&img, &pass, 4 << 20);
    let mp = dir.path().join("plain");
    std::fs::create_dir(&mp).unwrap();
    let mp = std::fs::canonicalize(&mp).unwrap();
    let clean = Cleanup {
        fs_mount: dir.path().join("unused"),
        loopdev: None,
        fuse_mount: mp.clone(),
    };
    let mount = || mount_volume(&img, &pass, &mp);
    let unmount = || volumes::unmount(&mp);
    mount();
    let disk = mp.join("disk");
    let names: Vec<_> = std::fs::read_dir(&mp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("disk")]);
    let size = 4u64 << 20;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&disk)
        .unwrap();
    let writes: [(u64, usize, u8); 4] = [
        (1, 1, 0xa1),
        (511, 2, 0xa2),
        (7777, 300_001, 0xa3),
        (size - 3, 3, 0xa4),
    ];
    for &(o, l, p) in &writes {
        f.seek(SeekFrom::Start(o)).unwrap();
        f.write_all(&vec![p; l]).unwrap();
    }
    // Writing past the end fails; reading at or past the end gives end of file.
    f.seek(SeekFrom::Start(size - 1)).unwrap();
    assert!(f.write_all(b"xy").is_err());
    let mut b = [0u8; 10];
    for at in [size, size + 1, size + 4096, 1 << 40] {
        f.seek(SeekFrom::Start(at)).unwrap();
        let got = f.read(&mut b);
        assert_eq!(got.as_ref().ok(), Some(&0), "a read at {at}: {got:?}");
    }
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(std::fs::metadata(&disk).unwrap().len(), size);
    unmount();

    // A new process: the bytes are there.
    mount();
    let mut f = std::fs::File::open(&disk).unwrap();
    for &(o, l, p) in &writes {
        let mut got = vec![0u8; l];
        f.seek(SeekFrom::Start(o)).unwrap();
        f.read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&x| x == p), "bytes at {o}");
    }
    drop(f);
    unmount();
    drop(clean);
}

#[test]
fn a_mount_that_fails_in_the_background_always_says_why() {
    // The reason comes from the serving process through the relayed stderr; it must be
    // relayed before the command exits, every time.
    let dir = tempfile::tempdir().unwrap();
    let img = volumes::new_volume(dir.path(), &[]);
    let bad = volumes::key_file(dir.path(), "bad", "not the passphrase");
    let mp = dir.path().join("plain");
    std::fs::create_dir(&mp).unwrap();
    for i in 0..30 {
        let o = sc(&["mount", s(&img), s(&mp), "--key-file", s(&bad)], b"");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 3, "run {i}: {err}");
        assert!(err.contains("no keyslot opens"), "run {i}: {err}");
    }
}

/// A 4096-aligned window of `len` bytes inside `v` (O_DIRECT wants aligned buffers).
fn aligned(v: &mut [u8], len: usize) -> &mut [u8] {
    let skip = (4096 - v.as_ptr() as usize % 4096) % 4096;
    &mut v[skip..skip + len]
}

/// O_DIRECT opens of the disk take the kernel's direct I/O path (whose large requests
/// arrive in pieces at once): 3 MiB written and read back that way (the volume holds 4) give what
/// `sectorcrypt read` gives after unmounting, and no page of the file is left in the
/// page cache (fincore), as with every other open.
#[test]
fn o_direct_reads_and_writes_go_through_and_cache_nothing() {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    if !Path::new("/dev/fuse").exists() {
        sectorcrypt_testkit::skipped!("skipped: no /dev/fuse");
        return;
    }
    sectorcrypt_testkit::require!("fusermount3");
    let dir = tempfile::tempdir().unwrap();
    let img = volumes::new_volume(dir.path(), &[]);
    let key = dir.path().join("k0");
    let mp = dir.path().join("plain");
    std::fs::create_dir(&mp).unwrap();
    let mp = std::fs::canonicalize(&mp).unwrap();
    let _clean = Cleanup {
        fs_mount: dir.path().join("unused"),
        loopdev: None,
        fuse_mount: mp.clone(),
    };
    mount_volume(&img, &key, &mp);
    let disk = mp.join("disk");
    let direct = |write: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_DIRECT)
            .open(&disk)
            .unwrap()
    };
    let plain = sectorcrypt_testkit::pattern(3 << 20, 77);
    let (mut wbuf, mut rbuf) = (vec![0u8; (3 << 20) + 4096], vec![0u8; (3 << 20) + 4096]);
    let w = aligned(&mut wbuf, 3 << 20);
    w.copy_from_slice(&plain);
    direct(true).write_all_at(w, 512 << 10).unwrap();
    let r = aligned(&mut rbuf, 3 << 20);
    direct(false).read_exact_at(r, 512 << 10).unwrap();
    assert!(r[..] == plain[..], "O_DIRECT read back what O_DIRECT wrote");
    if sectorcrypt_testkit::have("fincore") {
        let cached = sh(Command::new("fincore")
            .args(["--bytes", "--noheadings", "--output", "RES"])
            .arg(&disk));
        assert_eq!(
            cached.trim(),
            "0",
            "pages of the plaintext in the page cache"
        );
    } else {
        sectorcrypt_testkit::skipped!("the page cache check skipped: no fincore");
    }
    volumes::unmount(&mp);
    let out = support::ok_bytes(sc(
        &[
            "read",
            s(&img),
            "--offset",
            "524288",
            "--length",
            "3145728",
            "--key-file",
            s(&key),
        ],
        b"",
    ));
    assert!(
        out == plain,
        "the volume holds what was written through the mount"
    );
}
