//! Who is using a block device or a file, as `losetup -d` and `umount` would find out too
//! late: for `close`, which must not pull a loop device or a FUSE file from under a file
//! system or a process (acknowledged writes would be lost).
//!
//! A device is busy when it or one of its partitions is; that is when the kernel lists
//! holders of it (/sys/block/DEV/holders: a device-mapper or md device on top), when a file
//! system on it is mounted anywhere (every process's /proc/PID/mountinfo is read, once per
//! mount namespace, and mounts are matched by device number, so another device node for the
//! same device counts), when a process has it open (/proc/PID/fd) or mapped
//! (/proc/PID/maps), or when another loop device is attached to the file. A FUSE disk file
//! is recognised by its path and also by its device and inode through any other path on the
//! same file system (a bind mount of it). Only what this process may read in /proc is seen:
//! root sees everything.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One line of a mountinfo file.
pub struct Mount {
    /// The device number of the mounted file system ("MAJOR:MINOR").
    pub dev: String,
    /// Where it is mounted (octal escapes undone).
    pub point: PathBuf,
    pub fstype: String,
    /// What is mounted (a device, or a FUSE file system's name).
    pub source: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|d| (b'0'..=b'7').contains(d))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The mounts listed in a mountinfo text.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let head: Vec<&str> = head.split(' ').collect();
            let mut tail = tail.split(' ');
            Some(Mount {
                dev: head.get(2)?.to_string(),
                point: unescape(head.get(4)?),
                fstype: tail.next()?.to_string(),
                source: unescape(tail.next()?).to_string_lossy().into_owned(),
            })
        })
        .collect()
}

/// The mounts of this process's mount namespace.
pub fn mounts_here() -> Vec<Mount> {
    fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// The process ids in /proc.
fn pids() -> Vec<u32> {
    let Ok(list) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = list
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids
}

/// A process as people know it: "process PID (COMMAND)".
fn process(pid: u32) -> String {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    format!(
        "process {pid} ({})",
        crate::present::escape::printable(comm.trim_end())
    )
}

/// Every mount of the device numbered `dev` ("MAJOR:MINOR") in any mount namespace, as
/// "mounted at POINT" (and the namespace when it is not this process's).
fn mounts_of(dev: &str) -> Vec<String> {
    let own_ns = fs::read_link("/proc/self/ns/mnt").ok();
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for pid in pids() {
        let Ok(ns) = fs::read_link(format!("/proc/{pid}/ns/mnt")) else {
            continue;
        };
        if !seen.insert(ns.clone()) {
            continue;
        }
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
            continue;
        };
        for m in parse_mountinfo(&text).iter().filter(|m| m.dev == dev) {
            let point = crate::present::escape::printable(&m.point.to_string_lossy());
            found.push(if Some(&ns) == own_ns.as_ref() {
                format!("mounted at {point}")
            } else {
                format!(
                    "mounted at {point} in another mount namespace (that of {})",
                    process(pid)
                )
            });
        }
    }
    found
}

/// The processes (other than this one) with an open descriptor or a memory mapping for
/// which `is_it` holds; `is_it` is given a path to stat (the descriptor's in /proc, or the
/// mapped file's) and the file it names. A mapping holds the file as a descriptor does
/// (`umount` says busy), and outlives the descriptor it was made with.
fn opened_by(is_it: impl Fn(&Path, &Path) -> bool) -> Vec<String> {
    let me = std::process::id();
    let mut found = Vec::new();
    for pid in pids().into_iter().filter(|&p| p != me) {
        let open = fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.filter_map(Result::ok).any(|e| {
                let fd = e.path();
                // Sockets, pipes and anonymous files name no path.
                fs::read_link(&fd).is_ok_and(|target| target.is_absolute() && is_it(&fd, &target))
            })
        });
        if open {
            found.push(format!("open in {}", process(pid)));
        } else if mapped_files(pid).iter().any(|f| is_it(f, f)) {
            found.push(format!("mapped in {}", process(pid)));
        }
    }
    found
}

/// The files process `pid` has mapped (/proc/PID/maps), each once.
fn mapped_files(pid: u32) -> Vec<PathBuf> {
    let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    maps.lines()
        // ADDRESS PERMS OFFSET DEV INODE PATH: the path is all after the fifth field; an
        // anonymous mapping has none, a special one ("[heap]") is no path.
        .filter_map(|l| {
            let mut rest = l;
            for _ in 0..5 {
                rest = rest.trim_start().split_once(' ')?.1;
            }
            let path = rest.trim_start();
            path.starts_with('/').then(|| unescape_maps(path))
        })
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// A path as /proc/PID/maps shows it: a newline in it is written `\012`, and a deleted
/// file's ends in " (deleted)" (kept, so that it matches no live file).
fn unescape_maps(path: &str) -> PathBuf {
    PathBuf::from(path.replace("\\012", "\n"))
}

/// What is using the block device `dev` (such as /dev/loop3), or any of its partitions
/// (/dev/loop3p1, made by `partx -a` or a partition scan), one phrase each; empty when
/// nothing is.
pub fn device_users(dev: &str) -> Vec<String> {
    let Some(base) = Path::new(dev).file_name().and_then(|b| b.to_str()) else {
        return Vec::new();
    };
    let sys = Path::new("/sys/block").join(base);
    // The device itself, then each partition (a directory of its own with a `partition`
    // file): whoever uses a partition uses the device.
    let mut parts = vec![(String::new(), sys.clone())];
    if let Ok(list) = fs::read_dir(&sys) {
        for e in list.filter_map(Result::ok) {
            if e.path().join("partition").exists() {
                let node = format!("/dev/{}", e.file_name().to_string_lossy());
                let via = format!(
                    ", through its partition {}",
                    crate::present::escape::printable(&node)
                );
                parts.push((via, e.path()));
            }
        }
    }
    // A device node may be anywhere (mknod); files on FUSE and network file systems are
    // not looked at, since stat() there could hang on a stuck server.
    let remote: Vec<PathBuf> = mounts_here()
        .into_iter()
        .filter(|m| {
            ["fuse", "nfs", "cifs", "smb", "9p", "ceph"]
                .iter()
                .any(|t| m.fstype.starts_with(t))
        })
        .map(|m| m.point)
        .collect();
    let mut found = Vec::new();
    for (via, dir) in &parts {
        if let Ok(list) = fs::read_dir(dir.join("holders")) {
            for h in list.filter_map(Result::ok) {
                found.push(format!(
                    "held by /dev/{}{via}",
                    crate::present::escape::printable(&h.file_name().to_string_lossy())
                ));
            }
        }
        let Ok(num) = fs::read_to_string(dir.join("dev")) else {
            continue;
        };
        let num = num.trim();
        found.extend(mounts_of(num).into_iter().map(|m| format!("{m}{via}")));
        let users = opened_by(|fd, target| {
            !remote.iter().any(|r| target.starts_with(r))
                && fs::metadata(fd)
                    .is_ok_and(|m| m.file_type().is_block_device() && dev_name(m.rdev()) == num)
        });
        found.extend(users.into_iter().map(|u| format!("{u}{via}")));
    }
    found
}

/// What is using the regular file `file` (a FUSE disk file), one phrase each: processes
/// with it open or mapped, and loop devices other than `except` attached to it; by its
/// path, or by another path to the same file (a bind mount of it, or of its mount point).
pub fn file_users(file: &Path, except: Option<&str>) -> Vec<String> {
    let is_file = same_file_as(file);
    let mut found = Vec::new();
    if let Ok(list) = fs::read_dir("/sys/block") {
        for e in list.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let node = format!("/dev/{name}");
            if !name.starts_with("loop") || except == Some(node.as_str()) {
                continue;
            }
            let backing = fs::read_to_string(e.path().join("loop/backing_file"));
            if backing.is_ok_and(|b| is_file(Path::new(b.trim_end_matches('\n')))) {
                found.push(format!("attached to {node}"));
            }
        }
    }
    found.extend(opened_by(|_, target| is_file(target)));
    found
}

/// A test of whether a path (as this process's mount namespace sees it) names `file`, a
/// file on a FUSE mount served by the caller's volume: the same path, or a path on a mount
/// of the same file system (the same device number: a bind mount) with the same inode.
/// Only paths on that file system are looked at (stat), so a hung network or FUSE file
/// system elsewhere cannot stop the scan.
fn same_file_as(file: &Path) -> impl Fn(&Path) -> bool + '_ {
    let id = fs::metadata(file).ok().map(|m| (m.dev(), m.ino()));
    let mounts = mounts_here();
    move |path: &Path| {
        if path == file {
            return true;
        }
        let Some((dev, ino)) = id else {
            return false;
        };
        // The mount the path is on: the last one listed with the longest matching point.
        let on = mounts
            .iter()
            .filter(|m| path.starts_with(&m.point))
            .max_by_key(|m| m.point.as_os_str().len());
        on.is_some_and(|m| m.dev == dev_name(dev))
            && fs::metadata(path).is_ok_and(|m| m.dev() == dev && m.ino() == ino)
    }
}

/// A device number as mountinfo writes it ("MAJOR:MINOR", glibc's split of dev_t).
fn dev_name(dev: u64) -> String {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff);
    format!("{major}:{minor}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_are_written_as_mountinfo_does() {
        let meta = fs::metadata("/proc/self/mountinfo").unwrap();
        let own = mounts_here();
        // /proc is mounted, and the file's device is that mount's.
        let proc = own.iter().rfind(|m| m.point == Path::new("/proc")).unwrap();
        assert_eq!(dev_name(meta.dev()), proc.dev);
        assert_eq!(dev_name((259 << 8) | (0x1200 << 12) | 0x05), "259:4613");
    }

    #[test]
    fn mountinfo_lines_are_parsed_with_escapes() {
        let text = "36 35 7:3 / /mnt/a\\040b rw,relatime shared:1 - ext4 /dev/loop3 rw\n\
                    37 35 0:52 / /run/x rw - fuse.sectorcrypt sectorcrypt rw,user_id=0\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].dev, "7:3");
        assert_eq!(m[0].point, Path::new("/mnt/a b"));
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[1].fstype, "fuse.sectorcrypt");
        assert_eq!(m[1].source, "sectorcrypt");
    }
}
