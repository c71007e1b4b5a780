//! `sectorcrypt mount` / `umount`: the plaintext of a volume as one file, MOUNTPOINT/disk,
//! through FUSE (the fuser crate, mounting with fusermount3 or the mount syscall as root;
//! no libfuse needed).
//!
//! The file system has two inodes: the root directory and `disk`, a regular file of the
//! volume's size. Every open of `disk` is direct I/O (FOPEN_DIRECT_IO, or the caller's own
//! O_DIRECT), so the kernel keeps no page cache of the plaintext and each read or write
//! reaches the engine (which is what a loop device on top wants). The size cannot change; `fsync` is the volume's flush, and so is unmounting.
//! Requests are read on the session's thread and the disk's reads and writes run on a few
//! workers (`fuse/workers.rs`), several at once; they go up to 1 MiB each (FUSE's max_pages).
//!
//! Without `--foreground`, the command starts itself again with `--foreground` (same
//! arguments, same standard input and error, so a prompt or `--key-file -` work as usual),
//! waits until the mount appears in /proc/self/mountinfo, and returns; the child serves
//! until unmounted. No `fork` (which would need `unsafe`).

use crate::failure::Failure;
use crate::flags::{MountArgs, UmountArgs};
use crate::fuse::workers::{errno, Workers};
use crate::volumes::export::{self as volume_export, VolumeExport};
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, MountOption, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow,
};
use sectorcrypt_nbd::Export;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const ROOT: u64 = fuser::FUSE_ROOT_ID;
const DISK: u64 = 2;
const NAME: &str = "disk";
/// Attributes never change behind the kernel's back except through us: cache them.
const TTL: Duration = Duration::from_secs(1);
/// The largest read or write the kernel is asked to send in one request.
const MAX_REQUEST: u32 = 1 << 20;
/// Worker threads on a local image (the engine's work is the CPU's) and on a remote store
/// (each worker mostly waits on the network).
const LOCAL_WORKERS: usize = 4;
const REMOTE_WORKERS: usize = 16;
/// FOPEN_DIRECT_IO (the FUSE ABI, include/uapi/linux/fuse.h).
const FOPEN_DIRECT_IO: u32 = 1 << 0;

struct DiskFs {
    export: Arc<VolumeExport>,
    /// Where the disk's reads and writes run (this thread only reads requests).
    workers: Workers,
    uid: u32,
    gid: u32,
    mounted_at: SystemTime,
}

impl DiskFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == ROOT {
            (FileType::Directory, 0o755, 0, 2)
        } else {
            let perm = if self.export.read_only() {
                0o400
            } else {
                0o600
            };
            (FileType::RegularFile, perm, self.export.size(), 1)
        };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: self.export.preferred_block_size(),
            flags: 0,
        }
    }
}

/// The byte offset of a read or write of `ino`, which must be the disk: an errno otherwise.
fn disk_offset(ino: u64, offset: i64) -> Result<u64, i32> {
    if ino != DISK {
        return Err(libc::EISDIR);
    }
    u64::try_from(offset).map_err(|_| libc::EINVAL)
}

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), i32> {
        // Larger requests mean fewer round trips; the kernel clamps to what it supports.
        let _ = config.set_max_write(MAX_REQUEST);
        // Asynchronous direct I/O: the pieces of one asynchronous O_DIRECT request are
        // sent at once (a synchronous read of a direct_io file still goes piece by piece;
        // concurrent callers overlap either way).
        let _ = config.add_capabilities(fuser::consts::FUSE_ASYNC_DIO);
        Ok(())
    }

    fn destroy(&mut self) {
        // Every request handed to a worker replies first; the flush then covers them.
        self.workers.finish();
        if let Err(e) = self.export.flush() {
            log(format_args!("flushing the volume at unmount failed: {e}"));
        }
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        if parent == ROOT && name == NAME {
            reply.entry(&TTL, &self.attr(DISK), 0);
        } else {
            reply.error(libc::ENOENT);
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match ino {
            ROOT | DISK => reply.attr(&TTL, &self.attr(ino)),
            _ => reply.error(libc::ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        if ino != DISK && ino != ROOT {
            return reply.error(libc::ENOENT);
        }
        // The volume's size is fixed (O_TRUNC on open is refused here too); owners and
        // modes are the image's. Time updates are accepted and ignored.
        if size.is_some_and(|s| ino != DISK || s != self.export.size()) {
            return reply.error(libc::EPERM);
        }
        if mode.is_some() || uid.is_some() || gid.is_some() {
            return reply.error(libc::EPERM);
        }
        reply.attr(&TTL, &self.attr(ino));
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if ino != DISK {
            return reply.error(libc::EISDIR);
        }
        if self.export.read_only() && flags & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.error(libc::EROFS);
        }
        // An O_DIRECT open bypasses the page cache by itself, and through the kernel's
        // direct I/O path, which sends the pieces of one large read or write at once
        // (FUSE_ASYNC_DIO) so that the workers run them together. Every other open is
        // direct_io: no page cache of the plaintext either, pieces one after the other.
        if flags & libc::O_DIRECT != 0 {
            reply.opened(0, 0);
        } else {
            reply.opened(0, FOPEN_DIRECT_IO);
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let offset = match disk_offset(ino, offset) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        let total = self.export.size();
        // Reads at or past the end return what is there (nothing): end of file. The
        // volume refuses a range that starts beyond its end, even an empty one.
        let n = (size as u64).min(total.saturating_sub(offset)) as usize;
        if n == 0 {
            return reply.data(&[]);
        }
        self.workers.read(offset, n, reply);
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let offset = match disk_offset(ino, offset) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > self.export.size())
        {
            // The file cannot grow.
            return reply.error(libc::ENOSPC);
        }
        self.workers.write(offset, data, reply);
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lo: u64, reply: ReplyEmpty) {
        // close(): nothing is buffered here (direct I/O); durability is fsync's job.
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        match self.export.flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        if ino != ROOT {
            return reply.error(libc::ENOTDIR);
        }
        let entries = [
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (DISK, FileType::RegularFile, NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(*ino, (i + 1) as i64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A line on stderr. Errors are ignored: in the background the parent that relayed our
/// stderr is gone, and a log line must never take the mount down.
fn log(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "sectorcrypt: {args}");
}

/// Mount points in /proc/self/mountinfo (field 5, octal escapes undone).
fn mount_points() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|field| {
            let b = field.as_bytes();
            let mut out = Vec::with_capacity(b.len());
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\\'
                    && i + 3 < b.len()
                    && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
                {
                    let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
                    out.push(v);
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            PathBuf::from(String::from_utf8_lossy(&out).into_owned())
        })
        .collect()
}

pub fn is_mounted(mp: &Path) -> bool {
    mount_points().iter().any(|p| p == mp)
}

/// `path` as a mount point: an existing directory, not mounted on yet (canonical).
pub fn mount_point(path: &Path) -> Result<PathBuf, Failure> {
    let mp = std::fs::canonicalize(path)
        .map_err(|e| Failure::usage(format!("mount point {}: {e}", path.display())))?;
    if !mp.is_dir() {
        return Err(Failure::usage(format!(
            "{} is not a directory",
            mp.display()
        )));
    }
    if is_mounted(&mp) {
        return Err(Failure::usage(format!(
            "{} is already a mount point",
            mp.display()
        )));
    }
    Ok(mp)
}

/// The disk file system over `export` (the volume at `image`), and its mount options.
fn disk_fs(
    export: &Arc<VolumeExport>,
    image: &Path,
) -> Result<(DiskFs, Vec<MountOption>), Failure> {
    // The disk file's owner is the image's; a remote store (an NBD export, an RBD image)
    // has no owner here, so the disk is the mounting user's (/proc/self is owned by this
    // process's effective user and group).
    let (owner, workers) = match crate::present::locator::locate(image)? {
        crate::present::locator::Location::Local => (image, LOCAL_WORKERS),
        _ => (Path::new("/proc/self"), REMOTE_WORKERS),
    };
    let meta = std::fs::metadata(owner)
        .map_err(|e| Failure::runtime(format!("{}: {e}", owner.display())))?;
    let workers = Workers::start(export.clone(), workers)
        .map_err(|e| Failure::runtime(format!("starting the mount's threads: {e}")))?;
    let fs = DiskFs {
        export: export.clone(),
        workers,
        uid: meta.uid(),
        gid: meta.gid(),
        mounted_at: SystemTime::now(),
    };
    let mut options = vec![
        MountOption::FSName("sectorcrypt".into()),
        MountOption::Subtype("sectorcrypt".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    options.push(if export.read_only() {
        MountOption::RO
    } else {
        MountOption::RW
    });
    Ok((fs, options))
}

/// Mounts the disk file of `export` (the volume at `image`) at `mp`, served by a thread
/// of this process until the returned session is unmounted ([`unmount`]) or dropped.
pub fn spawn(
    export: &Arc<VolumeExport>,
    image: &Path,
    mp: &Path,
) -> Result<fuser::BackgroundSession, Failure> {
    let (fs, options) = disk_fs(export, image)?;
    fuser::spawn_mount2(fs, mp, &options)
        .map_err(|e| Failure::runtime(format!("mounting {}: {e}", mp.display())))
}

pub fn run(a: MountArgs) -> Result<(), Failure> {
    if a.tcrypt.system && !a.open.read_only {
        return Err(Failure::usage(
            "system VeraCrypt/TrueCrypt volumes are mounted read-only here: add --read-only",
        ));
    }
    crate::volumes::image::request(&a.tcrypt)?;
    let mp = mount_point(&a.mountpoint)?;
    if !a.foreground {
        return background("the mount", |_| is_mounted(&mp));
    }

    let export = Arc::new(volume_export::open(&a.open)?);
    let (fs, options) = disk_fs(&export, &a.open.image)?;

    // SIGINT/SIGTERM: unmount (which ends the session below, after flushing).
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::runtime(format!("cannot catch signals: {e}")))?;
    let signals_handle = signals.handle();
    let mp2 = mp.clone();
    let watcher = std::thread::spawn(move || {
        for sig in signals.forever() {
            log(format_args!("signal {sig}: unmounting {}", mp2.display()));
            if let Err(e) = unmount(&mp2) {
                log(format_args!("{e}"));
            }
        }
    });
    log(format_args!(
        "{} mounted as {}/{NAME}",
        crate::present::locator::redacted(&a.open.image),
        mp.display()
    ));
    let result = fuser::mount2(fs, &mp, &options)
        .map_err(|e| Failure::runtime(format!("mounting {}: {e}", mp.display())));
    signals_handle.close();
    let _ = watcher.join();
    // destroy() flushed already when the kernel ended the session; flush again for the
    // paths where it did not run (mount failure after writes cannot happen, but cheap).
    let flushed = export
        .flush()
        .map_err(|e| Failure::runtime(format!("flushing the volume: {e}")));
    result?;
    flushed?;
    log(format_args!("{} unmounted; volume flushed", mp.display()));
    Ok(())
}

/// Starts this command again with `--foreground` and returns once `ready(child's pid)`
/// holds (`what` is waited for, as error messages name it). The child's stderr comes
/// through a pipe relayed here until then, so a caller capturing our output is not left
/// waiting for the serving process to end. SIGINT or SIGTERM until then is passed on to
/// the child as SIGTERM and waited for (at most [`STOP_WAIT`], then SIGKILL): a child
/// deriving a key that a hostile header makes last for hours does not run on unseen after
/// the command was stopped.
pub fn background(what: &str, ready: impl Fn(u32) -> bool) -> Result<(), Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::runtime(format!("cannot find this program: {e}")))?;
    // Caught before the child exists, so that no stop goes unseen.
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::runtime(format!("cannot catch signals: {e}")))?;
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .arg("--foreground")
        .stdin(Stdio::inherit())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure::runtime(format!("cannot start {what}'s process: {e}")))?;
    let relay = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut err, &mut std::io::stderr());
        })
    });
    loop {
        if ready(child.id()) {
            return Ok(());
        }
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Failure::runtime(format!("waiting for {what}'s process: {e}")))?
        {
            // Its last words (the reason) are relayed before ours.
            if let Some(relay) = relay {
                let _ = relay.join();
            }
            // The same exit code as the serving process: the same failure.
            let msg = match status.code() {
                Some(2 | 3) => format!("{what} failed (see above)"),
                _ => format!("{what} failed: its process {status}"),
            };
            return Err(Failure::from_exit_code(status.code(), msg));
        }
        if let Some(sig) = signals.pending().next() {
            stop_child(&mut child, what);
            if let Some(relay) = relay {
                let _ = relay.join();
            }
            return Err(Failure::runtime(format!("signal {sig}: {what} stopped")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a background child stopped before it was ready may take to end.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Sends SIGTERM to `child` and waits for it to end, sending SIGKILL after [`STOP_WAIT`].
fn stop_child(child: &mut std::process::Child, what: &str) {
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let until = std::time::Instant::now() + STOP_WAIT;
    while std::time::Instant::now() < until {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    log(format_args!(
        "{what}'s process {} ignored SIGTERM for {} s: killing it",
        child.id(),
        STOP_WAIT.as_secs()
    ));
    let _ = child.kill();
    let _ = child.wait();
}

/// Unmounts with fusermount3 (fusermount, then umount(8) as fallbacks).
pub fn unmount(mp: &Path) -> Result<(), String> {
    unmount_with(
        mp,
        [
            ("fusermount3", "-u"),
            ("fusermount", "-u"),
            ("umount", "-v"),
        ],
    )
}

/// Detaches `mp` even while it is busy or its server is gone (fusermount3 -z, umount -l).
pub fn unmount_lazily(mp: &Path) -> Result<(), String> {
    unmount_with(
        mp,
        [
            ("fusermount3", "-uz"),
            ("fusermount", "-uz"),
            ("umount", "-l"),
        ],
    )
}

fn unmount_with(mp: &Path, tools: [(&str, &str); 3]) -> Result<(), String> {
    let mut last = String::new();
    for (tool, args) in tools {
        match Command::new(tool).arg(args).arg(mp).output() {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => last = String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(_) => continue,
        }
    }
    Err(format!("cannot unmount {}: {last}", mp.display()))
}

pub fn umount(a: UmountArgs) -> Result<(), Failure> {
    let mp = std::fs::canonicalize(&a.mountpoint)
        .map_err(|e| Failure::usage(format!("mount point {}: {e}", a.mountpoint.display())))?;
    if !is_mounted(&mp) {
        return Err(Failure::usage(format!("{} is not mounted", mp.display())));
    }
    let servers = servers_of(&mp);
    unmount(&mp).map_err(Failure::runtime)?;
    // The serving process flushes and exits once the kernel ends the session: wait for it,
    // so that when `umount` returns the data is written and the image free for the next
    // command (which would otherwise meet the server's writer claim).
    let t0 = std::time::Instant::now();
    while servers
        .iter()
        .any(|&(pid, start)| crate::host::process::start_time(pid) == Some(start))
    {
        if t0.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "sectorcrypt: warning: {} is unmounted, but its server is still flushing",
                mp.display()
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The processes of this program serving the FUSE mount at `mp` (its `mount` command line
/// names `mp`), each with its start time: only waited for, never signalled, so a match by
/// command line is enough.
fn servers_of(mp: &Path) -> Vec<(u32, u64)> {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        if pid == std::process::id()
            || std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_ref() != Some(&me)
        {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let names_mp = args.iter().any(|a| {
            let a = Path::new(OsStr::from_bytes(a));
            std::fs::canonicalize(a).is_ok_and(|a| a == mp)
        });
        if args.iter().any(|a| *a == b"mount") && names_mp {
            if let Some(start) = crate::host::process::start_time(pid) {
                found.push((pid, start));
            }
        }
    }
    found
}
