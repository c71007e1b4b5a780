//! The bridge to the SIMD leaf: `avx2.rs` on x86-64, nothing elsewhere.

use super::soft::SideJob;
use super::{Order, Sbox};

#[cfg(target_arch = "x86_64")]
#[path = "avx2.rs"]
mod avx2;

/// ECB with the key words `k` taken in the round order `rounds` (encryption or
/// decryption) over the whole blocks of `buf`, in place, stepping `side` along; returns
/// how many leading bytes were done (the rest is left to the portable code). Only called
/// for keys on the `avx2` backend.
#[cfg(target_arch = "x86_64")]
pub(crate) fn ecb(
    k: &[u32; 8],
    rounds: &[usize; 32],
    sbox: Sbox,
    order: Order,
    buf: &mut [u8],
    side: Option<&mut SideJob>,
) -> usize {
    avx2::ecb(k, rounds, sbox, order, buf, side)
}

/// No SIMD backend on this architecture.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn ecb(
    _k: &[u32; 8],
    _rounds: &[usize; 32],
    _sbox: Sbox,
    _order: Order,
    _buf: &mut [u8],
    _side: Option<&mut SideJob>,
) -> usize {
    0
}
