//! ECB on AES-NI: groups of 8 blocks, rounds interleaved over 8 registers.
#![allow(unsafe_code)]

use super::{crypt_aesni, tail_through_buffer, Keys, GROUP};
use core::arch::x86_64::*;

#[target_feature(enable = "aes,sse4.1")]
unsafe fn group<const DEC: bool>(k: &Keys, src: *const u8, dst: *mut u8) {
    let mut x = [_mm_setzero_si128(); 8];
    for (i, v) in x.iter_mut().enumerate() {
        *v = _mm_loadu_si128(src.add(16 * i).cast());
    }
    crypt_aesni::<8, DEC>(k, &mut x);
    for (i, v) in x.iter().enumerate() {
        _mm_storeu_si128(dst.add(16 * i).cast(), *v);
    }
}

/// `len` is a multiple of 16.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn ecb_aesni<const DEC: bool>(
    k: &Keys,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let mut off = 0;
    while off + GROUP <= len {
        group::<DEC>(k, src.add(off), dst.add(off));
        off += GROUP;
    }
    if off < len {
        // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
        tail_through_buffer(src.add(off), dst.add(off), len - off, |s, d| unsafe {
            group::<DEC>(k, s, d)
        });
    }
}
