//! The bridge to the SIMD leaf: `avx2.rs` on x86-64, nothing elsewhere.

use super::soft::PackedSbox;
use super::Order;

#[cfg(target_arch = "x86_64")]
#[path = "avx2.rs"]
mod avx2;

/// ECB with the 32 round keys `rk` (already in encryption or decryption order) over the
/// whole blocks of `buf`, in place; returns how many leading bytes were done (the rest is
/// left to the portable code). Only called for keys on the `avx2` backend.
#[cfg(target_arch = "x86_64")]
pub(crate) fn ecb(rk: &[u32; 32], sbox: &PackedSbox, order: Order, buf: &mut [u8]) -> usize {
    avx2::ecb(rk, sbox, order, buf)
}

/// No SIMD backend on this architecture.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn ecb(_rk: &[u32; 32], _sbox: &PackedSbox, _order: Order, _buf: &mut [u8]) -> usize {
    0
}
