//! ECB on VAES: groups of 16 blocks, the cipher's rounds interleaved over 8 registers.
#![allow(unsafe_code)]

use super::{crypt_vaes_avx2, tail_through_buffer, Keys, GROUP};
use core::arch::x86_64::*;

#[target_feature(enable = "avx2,vaes")]
unsafe fn group<const DEC: bool>(k: &Keys, src: *const u8, dst: *mut u8) {
    group_n::<8, DEC>(k, src, dst)
}

/// `N` registers (2N blocks).
#[inline]
#[target_feature(enable = "avx2,vaes")]
unsafe fn group_n<const N: usize, const DEC: bool>(k: &Keys, src: *const u8, dst: *mut u8) {
    let mut x = [_mm256_setzero_si256(); N];
    for (i, v) in x.iter_mut().enumerate() {
        *v = _mm256_loadu_si256(src.add(32 * i).cast());
    }
    crypt_vaes_avx2::<N, DEC>(k, &mut x);
    for (i, v) in x.iter().enumerate() {
        _mm256_storeu_si256(dst.add(32 * i).cast(), *v);
    }
}

/// `len` is a multiple of 16.
#[target_feature(enable = "avx2,vaes")]
pub(super) unsafe fn ecb_vaes_avx2<const DEC: bool>(
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
    if off < len && len - off <= 32 {
        // One or two blocks (GCM's E_K(J0), a tweak): one register, through a 32-byte buffer.
        // SAFETY (for the closure): the buffer pointers cover 32 bytes.
        crate::aes::x86::common::tail_through_buffer::<32>(
            src.add(off),
            dst.add(off),
            len - off,
            |s, d| unsafe { group_n::<1, DEC>(k, s, d) },
        );
    } else if off < len {
        // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
        tail_through_buffer(src.add(off), dst.add(off), len - off, |s, d| unsafe {
            group::<DEC>(k, s, d)
        });
    }
}
