//! Test support: buffers that end where an inaccessible page begins, so that a kernel
//! reading or writing past the end of its bytes faults (the masked loads and stores of the
//! avx512 kernels must touch nothing outside the caller's bytes). A leaf, compiled for
//! tests only.
#![allow(unsafe_code)]

const PAGE: usize = 4096;

/// `pages` read-write pages followed by one inaccessible page.
pub(crate) struct Guarded {
    base: *mut u8,
    pages: usize,
}

impl Guarded {
    pub(crate) fn new(pages: usize) -> Guarded {
        let size = (pages + 1) * PAGE;
        // SAFETY: an anonymous private mapping of `size` bytes at an address the kernel
        // chooses; checked for failure below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let base = p.cast::<u8>();
        // SAFETY: the last page lies inside the mapping just made.
        let r = unsafe { libc::mprotect(base.add(pages * PAGE).cast(), PAGE, libc::PROT_NONE) };
        assert_eq!(r, 0, "mprotect");
        Guarded { base, pages }
    }

    /// The last `n` bytes before the inaccessible page.
    pub(crate) fn tail(&mut self, n: usize) -> &mut [u8] {
        assert!(n <= self.pages * PAGE);
        // SAFETY: the `n` bytes end where the read-write pages end, inside the mapping,
        // and the returned borrow of `self` keeps them exclusive.
        unsafe { core::slice::from_raw_parts_mut(self.base.add(self.pages * PAGE - n), n) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no borrow of it outlives `self`.
        unsafe { libc::munmap(self.base.cast(), (self.pages + 1) * PAGE) };
    }
}
