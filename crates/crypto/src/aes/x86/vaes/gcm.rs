//! GCM's bulk on VAES + VPCLMULQDQ: CTR and GHASH stitched in one pass over the data.
//!
//! The AES rounds run on the AES units and the carry-less multiplications on a separate
//! unit (measured here on Zen 4: a VPCLMULQDQ ymm every 2 cycles, fully overlapped with two
//! VAESENC per cycle). Run as two passes, each over a few KiB, the two halves cannot
//! overlap: the out-of-order window (a few hundred instructions) sees only one of them at a
//! time, and the cost is the sum, ~0.46 cycles/byte for AES-256. Here one loop iteration
//! holds the CTR rounds of group `i` and the GHASH of an independent group (the ciphertext
//! of group `i - 1` when encrypting, of group `i` itself when decrypting), about 200
//! instructions, so the core executes both at once and the cost approaches the larger of
//! the two (AES-256: 56 cycles per 256-byte group; GHASH: 26 multiplications, 52 cycles).
//!
//! The caller passes whole groups whose counters do not wrap GCM's 32-bit counter, so the
//! 128-bit counter arithmetic of the CTR kernel equals `inc32` here.
#![allow(unsafe_code)]

use super::ctr::{counters, group};
use super::{Keys, GROUP};
use crate::ghash::vpclmul::{hash_group, Key as GhashKey};
use core::arch::x86_64::*;

/// Encrypts (`DEC = false`) or decrypts `len` bytes, a multiple of [`GROUP`], with the
/// counter `*ctr` (advanced by the blocks done) and hashes the ciphertext into `*y`.
///
/// # Safety
/// The CPU features of the vaes backend (a `Keys` exists) and of the vpclmul GHASH (a
/// `GhashKey` exists); `src` and `dst` cover `len` bytes (equal or not overlapping); the
/// low 32 bits of `*ctr` do not wrap within `len / 16` blocks.
#[target_feature(enable = "avx2,vaes,vpclmulqdq,pclmulqdq")]
pub(super) unsafe fn gcm_vaes_avx2<const DEC: bool>(
    k: &Keys,
    g: &GhashKey,
    ctr: &mut u128,
    y: &mut u128,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    debug_assert!(len.is_multiple_of(GROUP));
    let groups = len / GROUP;
    if groups == 0 {
        return;
    }
    let mut h = _mm_set_epi64x((*y >> 64) as i64, *y as i64);
    let mut x = counters(*ctr);
    for i in 0..groups {
        *ctr = ctr.wrapping_add(16);
        let next = counters(*ctr);
        let (s, d) = (src.add(i * GROUP), dst.add(i * GROUP));
        if DEC {
            // The ciphertext is the input: hash it before this group overwrites it (in
            // place); the two halves are independent and execute together.
            h = hash_group(g, h, s);
            group::<8>(k, x, s, d);
        } else {
            group::<8>(k, x, s, d);
            if i > 0 {
                h = hash_group(g, h, dst.add((i - 1) * GROUP));
            }
        }
        x = next;
    }
    if !DEC {
        h = hash_group(g, h, dst.add((groups - 1) * GROUP));
    }
    let mut out = [0u8; 16];
    _mm_storeu_si128(out.as_mut_ptr().cast(), h);
    *y = u128::from_le_bytes(out);
}
