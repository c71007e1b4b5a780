//! Advisory locks between processes on the files a volume lives in. Two locks, independent
//! of each other, on the open file description (so threads of one process share them, and
//! they go away with the last descriptor, a crash included):
//!
//! - **The header lock**, `flock(2)` on the file holding the header: shared while a header
//!   is read and a keyslot opened, exclusive while a header is changed. It is the lock
//!   cryptsetup 2.x takes on a regular file (`flock` on the metadata device itself; for a
//!   block device cryptsetup locks `/run/cryptsetup/L_MAJOR:MINOR` instead), so a
//!   `cryptsetup luksAddKey` and a `sectorcrypt add-key` on one image file run one after
//!   the other; flock(1) can take it by hand. It is held only for the duration of a read
//!   or an update, never while a volume is served.
//! - **The use claim**, an open file description lock (`F_OFD_SETLK`, Linux 3.15+) on one
//!   byte far past the end of any image ([`USE_BYTE`]): shared for as long as a process
//!   reads or writes the data (read, write, serve, mount), exclusive (and never waited
//!   for) while a header is replaced or destroyed (format, erase, header restore), so
//!   those refuse an image in use. It cannot be a second `flock`: a file has only one,
//!   and keyslot changes on a served volume must still get the header lock.
//! - **The writer claim**, an OFD lock on the next byte ([`WRITER_BYTE`]), taken beside
//!   the use claim by every open of the data ([`claim_access`]) and never waited for:
//!   exclusive by a read-write open ([`Access::Writer`]), so that a second writer is
//!   refused (two engines doing read-modify-writes of the same sectors lose each other's
//!   writes, as cryptsetup's refusal of a second mapping prevents); shared by a read-only
//!   open ([`Access::Reader`]), so that a reader and a writer refuse each other (the
//!   reader would see data changing under it and caches nothing consistent); nothing by a
//!   read-only open that accepts that ([`Access::SharedReader`], cryptsetup's
//!   `--shared`). Who holds a conflicting claim is found by [`holder`] for the message.
//!
//! Why these calls: `flock` and OFD locks belong to the open file description, unlike
//! classic POSIX `fcntl` locks, which belong to the process and vanish when any of its
//! descriptors of the file is closed (a library reopening the image would drop them
//! silently). On Linux the two kinds do not interact on local file systems. On NFS the
//! kernel emulates `flock` with a whole-file byte-range lock, which then conflicts with a
//! use claim: there a keyslot change waits until the volume is no longer in use.
//! QEMU's image locking uses OFD locks on bytes 100 to 300 of an image, away from
//! [`USE_BYTE`].
//!
//! Advisory locks bind only processes that take them: `dd` or an old sectorcrypt ignore
//! them.

use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use rustix::fs::{flock, FlockOperation};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The byte the use claim locks: 2^62, past the end of any image (an OFD lock may lie
/// beyond the end of a file).
pub const USE_BYTE: i64 = 1 << 62;

/// The byte the writer claim locks: the one after [`USE_BYTE`].
pub const WRITER_BYTE: i64 = USE_BYTE + 1;

/// How an open of the data uses it, for the writer claim ([`claim_access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads and writes: no other writer, no other (non-shared) reader.
    Writer,
    /// Reads only, and wants no writer beside it.
    Reader,
    /// Reads only, and accepts a writer beside it (`--shared`): takes no writer claim.
    SharedReader,
}

/// Shared or exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Many holders at once.
    Shared,
    /// One holder, no shared ones.
    Exclusive,
}

/// A header lock, released when dropped. It holds its own descriptor of the file (a
/// duplicate: the same open file description).
#[derive(Debug)]
pub struct HeaderLock {
    file: File,
}

impl Drop for HeaderLock {
    fn drop(&mut self) {
        // Closing the duplicate would not release the lock while the store's descriptor
        // stays open: unlock explicitly. A failure leaves the lock to the last close.
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

/// Takes the header lock on `file` in `mode`: waits for it when `wait`, otherwise returns
/// `None` when another process holds a conflicting one.
pub fn lock_header(file: &File, mode: Mode, wait: bool) -> io::Result<Option<HeaderLock>> {
    let op = match (mode, wait) {
        (Mode::Shared, true) => FlockOperation::LockShared,
        (Mode::Exclusive, true) => FlockOperation::LockExclusive,
        (Mode::Shared, false) => FlockOperation::NonBlockingLockShared,
        (Mode::Exclusive, false) => FlockOperation::NonBlockingLockExclusive,
    };
    let file = file.try_clone()?;
    loop {
        match flock(&file, op) {
            Ok(()) => return Ok(Some(HeaderLock { file })),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A use claim or a writer claim, released when dropped. It holds its own descriptor of
/// the file.
#[derive(Debug)]
pub struct UseClaim {
    file: File,
    byte: i64,
}

impl Drop for UseClaim {
    fn drop(&mut self) {
        let _ = set_ofd_lock(&self.file, self.byte, libc::F_UNLCK as libc::c_short, false);
    }
}

/// Claims the use of `file` in `mode` (a shared claim needs a descriptor open for reading,
/// an exclusive one for writing): waits for it when `wait`, otherwise returns `None` when
/// another process holds a conflicting claim.
pub fn claim_use(file: &File, mode: Mode, wait: bool) -> io::Result<Option<UseClaim>> {
    claim_byte(file, USE_BYTE, mode, wait)
}

/// Takes the writer claim `access` needs on `file` (opened for writing for
/// [`Access::Writer`], for reading otherwise), never waiting: `Ok(None)` when another
/// open holds a conflicting one (find it with [`holder`]). [`Access::SharedReader`] takes
/// nothing and always succeeds (`Ok(Some)` with no lock held).
pub fn claim_access(file: &File, access: Access) -> io::Result<Option<Option<UseClaim>>> {
    let mode = match access {
        Access::Writer => Mode::Exclusive,
        Access::Reader => Mode::Shared,
        Access::SharedReader => return Ok(Some(None)),
    };
    Ok(claim_byte(file, WRITER_BYTE, mode, false)?.map(Some))
}

fn claim_byte(file: &File, byte: i64, mode: Mode, wait: bool) -> io::Result<Option<UseClaim>> {
    let kind = match mode {
        Mode::Shared => libc::F_RDLCK,
        Mode::Exclusive => libc::F_WRLCK,
    };
    let file = file.try_clone()?;
    match set_ofd_lock(&file, byte, kind as libc::c_short, wait) {
        Ok(()) => Ok(Some(UseClaim { file, byte })),
        Err(e) if !wait && matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A holder of a writer claim on a file, as [`holder`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command line (arguments joined by spaces, control characters shown as `?`,
    /// cut at 200 characters).
    pub command: String,
    /// Whether it holds the claim of a writer (exclusive) rather than a reader's.
    pub writer: bool,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = if self.writer { "writer" } else { "reader" };
        write!(f, "a {role}, PID {} ({})", self.pid, self.command)
    }
}

/// The holders of a writer claim on the file `file` is open on (call it after
/// [`claim_access`] failed, when `file` itself holds none), from the `lock:` lines of `/proc/PID/fdinfo/FD`
/// (Linux 4.x+) whose descriptor is the same file (device and inode). Processes of other
/// users are not visible to an unprivileged caller: then nothing is found, and the lock
/// is still the authority. Best effort, for messages only.
pub fn holder(file: &File) -> Vec<Holder> {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = file.metadata() else {
        return Vec::new();
    };
    let mut found: Vec<Holder> = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(info) = std::fs::read_to_string(fd.path()) else {
                continue;
            };
            // `lock:\t1: OFDLCK ADVISORY  WRITE -1 00:2d:1234 START END`; the kernel
            // merges a reader's claim with its shared use claim on the byte before into
            // one range.
            let writer = info.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let n = f.len();
                let covers = n >= 3
                    && f[n - 2].parse::<i64>().is_ok_and(|a| a <= WRITER_BYTE)
                    && (f[n - 1] == "EOF"
                        || f[n - 1].parse::<i64>().is_ok_and(|b| b >= WRITER_BYTE));
                let ours = f.first() == Some(&"lock:") && f.contains(&"OFDLCK") && covers;
                ours.then(|| f.contains(&"WRITE"))
            });
            let Some(writer) = writer else { continue };
            let same = std::fs::metadata(p.path().join("fd").join(fd.file_name()))
                .is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino());
            if !same || found.iter().any(|h| h.pid == pid && h.writer == writer) {
                continue;
            }
            found.push(Holder {
                pid,
                command: command_line(pid),
                writer,
            });
        }
    }
    found
}

/// Why [`claim_access`] of `access` on `file` (the file `path`) was refused, naming the
/// holders [`holder`] finds: one sentence, the same from every front end.
pub fn refusal(path: &str, file: &File, access: Access) -> String {
    let holders = holder(file);
    let named = if holders.is_empty() {
        "another process (not visible to this user)".to_string()
    } else {
        let all: Vec<String> = holders.iter().map(Holder::to_string).collect();
        all.join("; ")
    };
    match access {
        Access::Writer if holders.iter().any(|h| h.writer) || holders.is_empty() => format!(
            "{path} is already in use by {named}: a second writer would lose writes \
             (two read-modify-writes of one sector overwrite each other); stop it first"
        ),
        Access::Writer => format!(
            "{path} is open read-only by {named}, which did not accept a writer beside it \
             (--shared); stop it first"
        ),
        _ => format!(
            "{path} is open for writing by {named}: a read-only open beside a writer sees \
             the data change under it; stop the writer, or accept that with --shared \
             (shared=True in Python, SECTORCRYPT_OPEN_SHARED in C)"
        ),
    }
}

/// `/proc/PID/cmdline` as text, for a message.
fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut s: String = String::from_utf8_lossy(&raw)
        .trim_end_matches('\0')
        .chars()
        .map(|c| match c {
            '\0' => ' ',
            c if c.is_control() => '?',
            c => c,
        })
        .take(200)
        .collect();
    if s.is_empty() {
        s = "command unknown".into();
    }
    s
}

/// `fcntl(F_OFD_SETLK[W])` of `kind` on `byte`, retried when a signal interrupts the wait.
fn set_ofd_lock(file: &File, byte: i64, kind: libc::c_short, wait: bool) -> io::Result<()> {
    let lock = libc::flock {
        l_type: kind,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: byte,
        l_len: 1,
        // Must be 0 for OFD locks.
        l_pid: 0,
    };
    loop {
        let arg = if wait {
            FcntlArg::F_OFD_SETLKW(&lock)
        } else {
            FcntlArg::F_OFD_SETLK(&lock)
        };
        match fcntl(file.as_raw_fd(), arg) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_opens() -> (tempfile::TempDir, File, File) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        std::fs::write(&p, b"x").unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .unwrap()
        };
        let (a, b) = (open(), open());
        (dir, a, b)
    }

    /// Two open file descriptions of one file conflict as two processes would.
    #[test]
    fn header_locks_exclude_and_release() {
        let (_d, a, b) = two_opens();
        let held = lock_header(&a, Mode::Exclusive, false).unwrap().unwrap();
        assert!(lock_header(&b, Mode::Shared, false).unwrap().is_none());
        drop(held);
        let shared = lock_header(&a, Mode::Shared, false).unwrap().unwrap();
        assert!(lock_header(&b, Mode::Shared, false).unwrap().is_some());
        drop(shared);
        assert!(lock_header(&b, Mode::Exclusive, false).unwrap().is_some());
    }

    #[test]
    fn use_claims_exclude_and_are_independent_of_the_header_lock() {
        let (_d, a, b) = two_opens();
        let shared = claim_use(&a, Mode::Shared, false).unwrap().unwrap();
        let shared2 = claim_use(&b, Mode::Shared, false).unwrap().unwrap();
        drop(shared2);
        assert!(claim_use(&b, Mode::Exclusive, false).unwrap().is_none());
        // A served volume's keyslots can still be changed.
        let header = lock_header(&b, Mode::Exclusive, false).unwrap();
        assert!(header.is_some());
        drop(shared);
        assert!(claim_use(&b, Mode::Exclusive, false).unwrap().is_some());
    }

    /// A reader's shared use claim and writer claim merge into one range in the kernel's
    /// listing; the holder is still found, as a reader, and a writer as a writer.
    #[test]
    fn writer_claims_exclude_and_name_their_holder() {
        let (_d, a, b) = two_opens();
        let used = claim_use(&a, Mode::Shared, false).unwrap().unwrap();
        let reader = claim_access(&a, Access::Reader).unwrap().unwrap();
        assert!(claim_access(&b, Access::Writer).unwrap().is_none());
        let me = std::process::id();
        assert_eq!(
            holder(&b),
            vec![Holder {
                pid: me,
                command: command_line(me),
                writer: false
            }]
        );
        assert!(claim_access(&b, Access::Reader).unwrap().is_some());
        drop((reader, used));
        let writer = claim_access(&a, Access::Writer).unwrap().unwrap();
        assert!(claim_access(&b, Access::Reader).unwrap().is_none());
        assert!(claim_access(&b, Access::SharedReader).unwrap().is_some());
        assert!(holder(&b).iter().all(|h| h.writer && h.pid == me));
        assert!(refusal("img", &b, Access::Writer).contains("second writer"));
        drop(writer);
        assert!(holder(&b).is_empty());
        assert!(claim_access(&b, Access::Writer).unwrap().is_some());
    }
}
