//! CBC on AES-NI (the kernels around these pieces:
//! [`cbc_kernels!`](super::super::rounds::cbc_kernels)): parallel decryption, 8 blocks
//! per group, each block's predecessor one block back; encryption of many sectors with 8
//! independent chains interleaved, one per register. One chain is encrypted by the
//! scaffolding's xmm chain.
#![allow(unsafe_code)]

use super::super::rounds::cbc_kernels;
use super::{crypt, last_round, rounds_but_last, Keys, GROUP, REGS};
use core::arch::x86_64::*;

cbc_kernels! {
    keys: Keys,
    register: __m128i,
    features: "aes,sse4.1",
    xor: _mm_xor_si128,
    zero: _mm_setzero_si128,
    bytes: 16,
    load: _mm_loadu_si128,
    store: _mm_storeu_si128,
    decrypt: cbc_decrypt_aesni,
    first: |_src, chain| chain,
    sectors: [cbc_encrypt_sectors_aesni: "aes,sse4.1", regs: 8, rest: [7, 6, 5, 4, 3, 2, 1]],
    chains: 1,
    skewed: 2,
    skew: 4,
    load: |p, _size| _mm_loadu_si128(p.cast()),
    store: |p, _size, v| _mm_storeu_si128(p.cast(), v),
    steps: 1,
    store_steps: |p, _size, v| _mm_storeu_si128(p.cast(), v[0]),
    ivs: |ivs| _mm_loadu_si128(ivs[0].as_ptr().cast()),
}
