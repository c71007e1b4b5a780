//! CBC on VAES (the kernels around these pieces:
//! [`cbc_kernels!`](super::super::scaffold::cbc_kernels)).
//!
//! - Decryption is parallel: 16 blocks per group; the previous ciphertext blocks are read
//!   with loads shifted by one block, all before the group's stores (in place is safe).
//! - Encryption of one chain is serial (each block needs the previous ciphertext), so it is
//!   latency bound: the scaffolding's xmm chain.
//! - Encryption of many sectors interleaves independent chains: two sectors per register
//!   (lane 0 and lane 1), up to 8 registers = 16 sectors advancing together.
#![allow(unsafe_code)]

use super::super::scaffold::cbc_kernels;
use super::{crypt, Keys, GROUP, REGS};
use core::arch::x86_64::*;

/// Decrypts one group of 16 blocks whose predecessor is `chain`.
///
/// # Safety
/// The vaes features (`k` proves them); `src` and `dst` cover one group.
#[target_feature(enable = "avx2,vaes")]
unsafe fn decrypt_group(k: &Keys, chain: __m128i, src: *const u8, dst: *mut u8) {
    let mut x = [_mm256_setzero_si256(); REGS];
    // SAFETY (of the loads and stores): the blocks are inside the group (caller).
    unsafe {
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm256_loadu_si256(src.add(32 * i).cast());
        }
        crypt::<REGS, true>(k, &mut x);
        // The predecessors of blocks (2i, 2i+1) are (2i-1, 2i): a load one block back,
        // except for the first register, whose low lane is the chaining value.
        let mut prev = [_mm256_setzero_si256(); REGS];
        let first = _mm_loadu_si128(src.cast());
        prev[0] = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(chain), first);
        for (i, p) in prev.iter_mut().enumerate().skip(1) {
            *p = _mm256_loadu_si256(src.add(32 * i - 16).cast());
        }
        for i in 0..REGS {
            _mm256_storeu_si256(dst.add(32 * i).cast(), _mm256_xor_si256(x[i], prev[i]));
        }
    }
}

cbc_kernels! {
    keys: Keys,
    register: __m256i,
    features: "avx2,vaes",
    xor: _mm256_xor_si256,
    zero: _mm256_setzero_si256,
    decrypt: cbc_decrypt_vaes_avx2 by decrypt_group,
    sectors: cbc_encrypt_sectors_vaes_avx2,
    chains: 2,
    load: |p, size| _mm256_loadu2_m128i(p.add(size).cast(), p.cast()),
    store: |p, size, v| _mm256_storeu2_m128i(p.add(size).cast(), p.cast(), v),
    ivs: |ivs| _mm256_loadu2_m128i(ivs[1].as_ptr().cast(), ivs[0].as_ptr().cast()),
}
