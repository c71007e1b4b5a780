//! Whole pages for secrets, mapped outside the heap ([`Pages`]): from `memfd_secret(2)` where the
//! kernel has it (Linux 5.14 and later, on by default since 6.5: the pages leave the
//! kernel's direct map, so no other process, not even root through /proc/PID/mem or
//! ptrace, can read them; they are never swapped and never in a core dump), otherwise
//! private anonymous pages marked `MADV_DONTDUMP` and locked with `mlock(2)`. When the lock
//! is refused (`RLIMIT_MEMLOCK`) the pages are used as they are, still out of core dumps,
//! and [`Protection::Unlocked`] is recorded for [`protection`] to report. Every mapping
//! is wiped (volatile writes) before it is unmapped.
//!
//! Both kinds count against `RLIMIT_MEMLOCK` (8 MiB by default on current distributions;
//! processes with `CAP_IPC_LOCK` have no limit). While a `memfd_secret` mapping exists the
//! kernel refuses to hibernate, which would write the pages to disk.
//!
//! One of the three leaves with `unsafe` of the secret types (with `pool.rs` and
//! `boxed.rs`): the system calls, and the view of a mapping as bytes.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use zeroize::Zeroize;

/// How the pages of secrets are protected, from the strongest to the weakest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Protection {
    /// `memfd_secret` pages: out of the kernel's direct map, locked, never dumped.
    Secretmem,
    /// Locked anonymous pages (`mlock`), never dumped (`MADV_DONTDUMP`).
    Locked,
    /// Anonymous pages that could not be locked (`RLIMIT_MEMLOCK`): they may be swapped
    /// out, but are never dumped.
    Unlocked,
}

impl Protection {
    fn code(self) -> u8 {
        match self {
            Protection::Secretmem => 1,
            Protection::Locked => 2,
            Protection::Unlocked => 3,
        }
    }
}

/// The weakest protection any mapping got so far (0: none yet).
static WEAKEST: AtomicU8 = AtomicU8::new(0);

/// Whether `memfd_secret` may work: cleared for good when the kernel lacks it.
static SECRETMEM: AtomicU8 = AtomicU8::new(1);

fn record(p: Protection) {
    WEAKEST.fetch_max(p.code(), Ordering::Relaxed);
}

/// The weakest protection given to any secret so far in this process, or `None` before
/// the first secret.
pub fn protection() -> Option<Protection> {
    match WEAKEST.load(Ordering::Relaxed) {
        1 => Some(Protection::Secretmem),
        2 => Some(Protection::Locked),
        3 => Some(Protection::Unlocked),
        _ => None,
    }
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): no core dump, and no ptrace or
/// /proc/PID/mem access by other processes of the same user. For long-running processes
/// that hold keys.
pub fn forbid_core_dumps() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes no pointer and changes only a flag of this
    // process.
    let r = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system and takes no pointer.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Pages of memory for secrets, zero when new, owned by this value alone.
pub(crate) struct Pages {
    /// Page-aligned start (dangling when `len` is 0).
    ptr: NonNull<u8>,
    /// Bytes mapped: a whole number of pages, or 0.
    len: usize,
    kind: Protection,
}

// SAFETY: a mapping is plain memory owned by this value alone (like a `Box<[u8]>`);
// nothing in it is tied to a thread.
unsafe impl Send for Pages {}
// SAFETY: shared references only read the bytes (see `bytes`).
unsafe impl Sync for Pages {}

impl Pages {
    /// No pages.
    pub(crate) const fn empty() -> Pages {
        Pages {
            ptr: NonNull::dangling(),
            len: 0,
            kind: Protection::Secretmem,
        }
    }

    /// At least `min` bytes (rounded up to whole pages), zeroed; the best protection this
    /// system gives (see the module documentation).
    pub(crate) fn new(min: usize) -> Pages {
        Pages::with(min, true)
    }

    /// [`Pages::new`], trying `memfd_secret` only when `secretmem` (tests of the fallback).
    pub(crate) fn with(min: usize, secretmem: bool) -> Pages {
        if min == 0 {
            return Pages::empty();
        }
        let page = page_size();
        let len = min
            .checked_next_multiple_of(page)
            .expect("a secret smaller than the address space");
        if secretmem && SECRETMEM.load(Ordering::Relaxed) == 1 {
            if let Some(r) = secretmem_pages(len) {
                record(r.kind);
                return r;
            }
        }
        let r = anonymous_pages(len);
        record(r.kind);
        r
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes (mapped readable and writable, or dangling
        // with `len` 0), initialised (pages are zero when mapped), and borrowed from self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The start of the pages (page-aligned).
    pub(crate) fn start(&self) -> NonNull<u8> {
        self.ptr
    }

    /// How these pages are protected.
    pub(crate) fn protection(&self) -> Protection {
        self.kind
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        self.bytes_mut().zeroize();
        // SAFETY: `ptr`/`len` are exactly one mapping made by this value, which no
        // reference outlives (they all borrow `self`). munmap also unlocks the pages.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// `len` bytes of `memfd_secret` pages, or `None` when the kernel refuses (no such
/// system call, disabled, or over `RLIMIT_MEMLOCK`).
fn secretmem_pages(len: usize) -> Option<Pages> {
    // SAFETY: memfd_secret takes only flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_memfd_secret, libc::O_CLOEXEC as libc::c_ulong) };
    if fd < 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            SECRETMEM.store(0, Ordering::Relaxed);
        }
        return None;
    }
    let fd = fd as libc::c_int;
    // SAFETY: `fd` is the descriptor just made; ftruncate and mmap take no pointer of ours
    // (mmap chooses the address); `fd` is closed once, after mapping (the mapping keeps the
    // memory alive).
    let ptr = unsafe {
        let ptr = if libc::ftruncate(fd, len as libc::off_t) == 0 {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        libc::close(fd);
        ptr
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    Some(Pages {
        ptr: NonNull::new(ptr.cast()).expect("mmap does not map page 0"),
        len,
        kind: Protection::Secretmem,
    })
}

/// `len` bytes of private anonymous pages, out of core dumps, locked if the limit allows.
fn anonymous_pages(len: usize) -> Pages {
    // SAFETY: an anonymous private mapping at an address the kernel chooses; no pointer of
    // ours is passed.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        // Out of memory (or of mappings), as a failed heap allocation would be.
        let layout = std::alloc::Layout::from_size_align(len, page_size()).expect("a layout");
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `ptr`/`len` is the mapping just made; madvise and mlock change only how the
    // kernel treats those pages. A refused MADV_DONTDUMP (kernels before 3.4) leaves them
    // dumpable, as ordinary memory.
    let locked = unsafe {
        libc::madvise(ptr, len, libc::MADV_DONTDUMP);
        libc::mlock(ptr, len) == 0
    };
    Pages {
        ptr: NonNull::new(ptr.cast()).expect("mmap does not map page 0"),
        len,
        kind: if locked {
            Protection::Locked
        } else {
            Protection::Unlocked
        },
    }
}
