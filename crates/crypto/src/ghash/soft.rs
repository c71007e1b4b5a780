//! Portable, constant-time GHASH: no `unsafe`, no table, no branch on secret data.
//!
//! # Why this is constant-time
//! The usual fast software GHASH (4-bit or 8-bit "Shoup" tables of multiples of H) indexes a
//! table with bits of the secret hash state, so its memory access pattern leaks H and the
//! data through the cache. This file instead multiplies polynomials with ordinary integer
//! multiplications:
//!
//! - A carry-less 64x64 product is built from 25 integer products `u64 x u64 -> u128` of
//!   *masked* operands ([`clmul64`]). Each operand is split into five classes by bit index
//!   modulo 5, so a class holds at most 13 set bits with four zero bits ("holes") between
//!   them. In an integer product of two such classes every output column sums at most 13
//!   one-bits (< 32), so its carries stay inside the four holes above it and never reach the
//!   next column of the same class: the class bits of the integer product are exactly the
//!   parities of the carry-less columns. Masking keeps those bits and drops the carries.
//! - The 128x128 product uses one level of Karatsuba (three `clmul64`), and the reduction
//!   modulo x^128 + x^7 + x^2 + x + 1 is a fixed sequence of shifts and XORs.
//!
//! Every operation is a multiplication, shift, AND or XOR whose timing does not depend on
//! the operand values on the CPUs this project targets (x86-64 `MUL`, AArch64
//! `MUL`/`UMULH` are data-independent; a few old or embedded cores with early-terminating
//! multipliers are not such targets). The loops have fixed trip counts.
//!
//! # Representation
//! See [`super`]: a block is the big-endian `u128` of its 16 bytes ("reflected": the
//! coefficient of x^0 is the most significant bit), and the key is stored "twisted" as
//! `H * x^-1`, so a plain carry-less product followed by [`reduce`] gives `X * H`.

#![forbid(unsafe_code)]

use zeroize::{Zeroize, ZeroizeOnDrop};

/// Bit `i` is set when `i % 5 == k`, for the 128-bit products.
const OUT_MASK: [u128; 5] = {
    let mut m = [0u128; 5];
    let mut i = 0;
    while i < 128 {
        m[i % 5] |= 1 << i;
        i += 1;
    }
    m
};

/// The same classes for the 64-bit operands: the low halves of [`OUT_MASK`].
const IN_MASK: [u64; 5] = [
    OUT_MASK[0] as u64,
    OUT_MASK[1] as u64,
    OUT_MASK[2] as u64,
    OUT_MASK[3] as u64,
    OUT_MASK[4] as u64,
];

/// The carry-less product of two 64-bit polynomials (bit `i` = coefficient of x^i), in
/// constant time with integer multiplications of masked operands (see the module doc).
#[inline(always)]
pub(super) fn clmul64(a: u64, b: u64) -> u128 {
    let av: [u128; 5] = core::array::from_fn(|i| (a & IN_MASK[i]) as u128);
    let bv: [u128; 5] = core::array::from_fn(|i| (b & IN_MASK[i]) as u128);
    let mut r = 0u128;
    for k in 0..5 {
        // Products of the classes i and j with i + j = k (mod 5) land in class k.
        let mut acc = 0u128;
        for i in 0..5 {
            let j = (k + 5 - i) % 5;
            acc ^= av[i].wrapping_mul(bv[j]);
        }
        r |= acc & OUT_MASK[k];
    }
    r
}

/// The 256-bit carry-less product of two 128-bit values as `(high, low)`, by Karatsuba.
#[inline(always)]
fn clmul128(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = ((a >> 64) as u64, a as u64);
    let (b1, b0) = ((b >> 64) as u64, b as u64);
    let lo = clmul64(a0, b0);
    let hi = clmul64(a1, b1);
    let mid = clmul64(a0 ^ a1, b0 ^ b1) ^ lo ^ hi;
    (hi ^ (mid >> 64), lo ^ (mid << 64))
}

/// Reduces the 256-bit reflected product `(high, low)` of a block and a twisted key to the
/// reflected field element.
///
/// In the reflected order the high half holds the coefficients 0..127 (already reduced)
/// and the low half `t` the coefficients 128..255. `x^128 = 1 + x + x^2 + x^7`, and
/// multiplying by x^k is a right shift by k in this order; the bits a right shift drops
/// (degrees >= 128 again) are the left shifts by 128 - k, folded in the same way once more.
#[inline(always)]
pub(super) fn reduce(high: u128, low: u128) -> u128 {
    let d = low ^ (low << 127) ^ (low << 126) ^ (low << 121);
    high ^ d ^ (d >> 1) ^ (d >> 2) ^ (d >> 7)
}

/// `x * h` in the reflected representation, where `h_twisted` is `twist(H)`.
#[inline(always)]
pub(super) fn mul(x: u128, h_twisted: u128) -> u128 {
    let (hi, lo) = clmul128(x, h_twisted);
    reduce(hi, lo)
}

/// `H * x^-1` in the reflected representation: a left shift by one, and when the
/// coefficient of x^0 (the top bit) was set, `x^-1 = x^127 + x^6 + x + 1`, whose reflected
/// form is 0xC2000000_00000000_00000000_00000001. Branch-free.
#[inline(always)]
pub(crate) fn twist(h: u128) -> u128 {
    let carry = 0u128.wrapping_sub(h >> 127);
    (h << 1) ^ (carry & 0xC200_0000_0000_0000_0000_0000_0000_0001)
}

/// The soft GHASH key: twisted H.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct Key {
    h: u128,
}

impl Key {
    /// `h` is the reflected (big-endian) H.
    pub(crate) fn new(h: u128) -> Key {
        Key { h: twist(h) }
    }

    /// Folds whole blocks into `y` (Horner's rule: `y = (y ^ x_i) * H`).
    pub(crate) fn update(&self, y: &mut u128, blocks: &[u8]) {
        debug_assert_eq!(blocks.len() % 16, 0);
        let mut acc = *y;
        for b in blocks.chunks_exact(16) {
            let mut x = [0u8; 16];
            x.copy_from_slice(b);
            acc = mul(acc ^ u128::from_be_bytes(x), self.h);
        }
        *y = acc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SP 800-38D Algorithm 1, bit by bit on the reflected representation.
    fn mul_reference(x: u128, y: u128) -> u128 {
        let r: u128 = 0xE1 << 120;
        let mut z = 0u128;
        let mut v = y;
        for i in 0..128 {
            if (x >> (127 - i)) & 1 == 1 {
                z ^= v;
            }
            v = if v & 1 == 1 { (v >> 1) ^ r } else { v >> 1 };
        }
        z
    }

    fn clmul64_reference(a: u64, b: u64) -> u128 {
        (0..64)
            .filter(|i| (b >> i) & 1 == 1)
            .fold(0u128, |acc, i| acc ^ ((a as u128) << i))
    }

    /// A xorshift64 generator from `seed`.
    fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    #[test]
    fn clmul64_matches_shift_and_xor() {
        let mut next = xorshift(0x0123_4567_89ab_cdef);
        for _ in 0..2000 {
            let (a, b) = (next(), next());
            assert_eq!(clmul64(a, b), clmul64_reference(a, b));
        }
        assert_eq!(
            clmul64(u64::MAX, u64::MAX),
            clmul64_reference(u64::MAX, u64::MAX)
        );
    }

    #[test]
    fn mul_matches_algorithm_1() {
        let mut word = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut next = || {
            let s = word();
            ((s as u128) << 64) | (s.rotate_left(29) as u128 ^ 0x5555)
        };
        for _ in 0..500 {
            let (x, h) = (next(), next());
            assert_eq!(mul(x, twist(h)), mul_reference(x, h));
        }
        for (x, h) in [
            (u128::MAX, u128::MAX),
            (1 << 127, u128::MAX),
            (u128::MAX, 1),
        ] {
            assert_eq!(mul(x, twist(h)), mul_reference(x, h));
        }
    }
}
