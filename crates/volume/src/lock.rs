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

/// A use claim, released when dropped. It holds its own descriptor of the file.
#[derive(Debug)]
pub struct UseClaim {
    file: File,
}

impl Drop for UseClaim {
    fn drop(&mut self) {
        let _ = set_use_lock(&self.file, libc::F_UNLCK as libc::c_short, false);
    }
}

/// Claims the use of `file` in `mode` (a shared claim needs a descriptor open for reading,
/// an exclusive one for writing): waits for it when `wait`, otherwise returns `None` when
/// another process holds a conflicting claim.
pub fn claim_use(file: &File, mode: Mode, wait: bool) -> io::Result<Option<UseClaim>> {
    let kind = match mode {
        Mode::Shared => libc::F_RDLCK,
        Mode::Exclusive => libc::F_WRLCK,
    };
    let file = file.try_clone()?;
    match set_use_lock(&file, kind as libc::c_short, wait) {
        Ok(()) => Ok(Some(UseClaim { file })),
        Err(e) if !wait && matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `fcntl(F_OFD_SETLK[W])` of `kind` on [`USE_BYTE`], retried when a signal interrupts
/// the wait.
fn set_use_lock(file: &File, kind: libc::c_short, wait: bool) -> io::Result<()> {
    let lock = libc::flock {
        l_type: kind,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: USE_BYTE,
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
}
