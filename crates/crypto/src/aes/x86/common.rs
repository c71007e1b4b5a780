//! Helpers shared by the x86 backends (a leaf file: raw pointers).
#![allow(unsafe_code)]

use zeroize::Zeroize;

/// Runs `group`, which reads and writes exactly `GROUP` bytes, on the last `len <= GROUP`
/// bytes of a buffer through a stack buffer (the short last group of a kernel).
///
/// # Safety
/// `src` must be readable and `dst` writable for `len` bytes.
#[inline(always)]
pub(crate) unsafe fn tail_through_buffer<const GROUP: usize>(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    group: impl FnOnce(*const u8, *mut u8),
) {
    // Checked in every build: the copies below rely on it.
    assert!(len <= GROUP, "tail of {len} bytes for a group of {GROUP}");
    let mut buf = [0u8; GROUP];
    // SAFETY: the caller guarantees `len` readable bytes at `src`; `buf` holds GROUP >= len
    // bytes (asserted above).
    unsafe { core::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), len) };
    let p = buf.as_mut_ptr();
    group(p, p);
    // SAFETY: the caller guarantees `len` writable bytes at `dst`.
    unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr(), dst, len) };
    buf.zeroize();
}
