//! The crate's only `unsafe`: taking ownership of the file descriptors a service manager
//! passed to this process (socket activation).
//!
//! Contract kept here, so that [`crate::activation`] needs no `unsafe`:
//! - a descriptor is adopted only when the caller found it in the range the manager named
//!   for this very process (`$LISTEN_PID` equal to our PID);
//! - every descriptor is adopted at most once per process ([`adopt_inherited`] works only
//!   on its first call), so no two owners close the same number;
//! - a number that is not open is not adopted (`fcntl(F_GETFD)` fails for it).
#![allow(
    unsafe_code,
    reason = "adopting the descriptors a service manager passed: OwnedFd::from_raw_fd"
)]

use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

static ADOPTED: AtomicBool = AtomicBool::new(false);

/// Owns the descriptors `first..first + count`, marked close-on-exec (so that programs
/// this process starts do not inherit them), on the first call in the process; later
/// calls get an error. A number in the range that is not open is an error.
pub(crate) fn adopt_inherited(first: RawFd, count: usize) -> io::Result<Vec<OwnedFd>> {
    if ADOPTED.swap(true, Ordering::SeqCst) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the service manager's sockets were already taken by this process",
        ));
    }
    let mut fds = Vec::with_capacity(count);
    for i in 0..count {
        let fd = first + i as RawFd;
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).map_err(|_| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("descriptor {fd} passed by the service manager is not open"),
            )
        })?;
        // SAFETY: `fd` is open (checked above), lies in the range the manager passed to
        // this process (the caller checked $LISTEN_PID), and is adopted once: the static
        // flag makes this the only call that ever owns these numbers.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let cloexec =
            nix::fcntl::FdFlag::from_bits_truncate(flags) | nix::fcntl::FdFlag::FD_CLOEXEC;
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(cloexec))?;
        fds.push(owned);
    }
    Ok(fds)
}
