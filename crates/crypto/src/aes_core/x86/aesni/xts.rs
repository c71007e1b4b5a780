//! XTS on AES-NI: 8 blocks per group, tweaks in registers.
//!
//! A unit's first 8 tweaks T, T x, ..., T x^7 are computed once (seven branch-free
//! doublings); after each group every register is multiplied by x^8: a one-byte shift of
//! the 128-bit lane, and the 8 bits shifted out of the top folded back as h * 0x87
//! (x^128 = x^7 + x^2 + x + 1) with one PCLMULQDQ. The tweak XORs are folded into the
//! round-0 whitening and the last round key.
#![allow(unsafe_code)]

use super::super::scaffold::tail_through_buffer;
use super::{tweaked_group, Keys, GROUP, REGS};
use crate::aes_core::xts_mul_alpha;
use crate::block::Block;
use core::arch::x86_64::*;

#[inline]
#[target_feature(enable = "sse4.1,pclmulqdq")]
unsafe fn mul_x8(t: __m128i) -> __m128i {
    let poly = _mm_set_epi64x(0, 0x87);
    let h = _mm_srli_si128::<15>(t);
    _mm_xor_si128(
        _mm_slli_si128::<1>(t),
        _mm_clmulepi64_si128::<0x00>(h, poly),
    )
}

/// Data units of `unit` bytes (a multiple of 16), one encrypted tweak each.
#[target_feature(enable = "aes,sse4.1,pclmulqdq")]
pub(super) unsafe fn xts_aesni<const DEC: bool>(
    k: &Keys,
    tweaks: &[Block],
    src: *const u8,
    dst: *mut u8,
    unit: usize,
) {
    for (u, t) in tweaks.iter().enumerate() {
        let (src, dst) = (src.add(u * unit), dst.add(u * unit));
        let mut tw = [_mm_setzero_si128(); REGS];
        let mut t = u128::from_le_bytes(*t);
        for v in tw.iter_mut() {
            let b = t.to_le_bytes();
            *v = _mm_loadu_si128(b.as_ptr().cast());
            t = xts_mul_alpha(t);
        }
        let mut off = 0;
        while off + GROUP <= unit {
            // The next group's tweaks before this group's rounds (software pipelining).
            let next = if off + GROUP < unit {
                tw.map(|v| mul_x8(v))
            } else {
                tw
            };
            tweaked_group::<REGS, DEC>(k, &tw, src.add(off), dst.add(off));
            tw = next;
            off += GROUP;
        }
        if off < unit {
            // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
            tail_through_buffer::<GROUP>(src.add(off), dst.add(off), unit - off, |s, d| unsafe {
                tweaked_group::<REGS, DEC>(k, &tw, s, d)
            });
        }
    }
}
