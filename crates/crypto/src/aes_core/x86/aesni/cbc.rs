//! CBC on AES-NI: parallel decryption (8 blocks per group), and encryption of many sectors
//! with 8 independent chains interleaved, one per register (the kernels around these
//! pieces: [`cbc_kernels!`](super::super::scaffold::cbc_kernels)). One chain is encrypted
//! by the scaffolding's xmm chain.
#![allow(unsafe_code)]

use super::super::scaffold::cbc_kernels;
use super::{crypt, Keys, GROUP, REGS};
use core::arch::x86_64::*;

/// Decrypts one group of 8 blocks whose predecessor is `chain`.
///
/// # Safety
/// The aesni features (`k` proves them); `src` and `dst` cover one group.
#[target_feature(enable = "aes,sse4.1")]
unsafe fn decrypt_group(k: &Keys, chain: __m128i, src: *const u8, dst: *mut u8) {
    let mut x = [_mm_setzero_si128(); REGS];
    // SAFETY (of the loads and stores): the blocks are inside the group (caller).
    unsafe {
        for (i, v) in x.iter_mut().enumerate() {
            *v = _mm_loadu_si128(src.add(16 * i).cast());
        }
        crypt::<REGS, true>(k, &mut x);
        // All predecessors are read before the first store (in place is safe).
        let mut prev = [chain; REGS];
        for (i, p) in prev.iter_mut().enumerate().skip(1) {
            *p = _mm_loadu_si128(src.add(16 * i - 16).cast());
        }
        for i in 0..REGS {
            _mm_storeu_si128(dst.add(16 * i).cast(), _mm_xor_si128(x[i], prev[i]));
        }
    }
}

cbc_kernels! {
    keys: Keys,
    register: __m128i,
    features: "aes,sse4.1",
    xor: _mm_xor_si128,
    zero: _mm_setzero_si128,
    decrypt: cbc_decrypt_aesni by decrypt_group,
    sectors: cbc_encrypt_sectors_aesni,
    chains: 1,
    load: |p, _size| _mm_loadu_si128(p.cast()),
    store: |p, _size, v| _mm_storeu_si128(p.cast(), v),
    ivs: |ivs| _mm_loadu_si128(ivs[0].as_ptr().cast()),
}
