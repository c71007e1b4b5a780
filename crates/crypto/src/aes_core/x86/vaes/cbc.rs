//! CBC on VAES (the kernels around these pieces:
//! [`cbc_kernels!`](super::super::rounds::cbc_kernels)).
//!
//! - Decryption is parallel: 16 blocks per group; the predecessors of blocks (2i, 2i+1)
//!   are (2i-1, 2i), a load one block back, except for the first register, whose low lane
//!   is the chaining value.
//! - Encryption of one chain is serial (each block needs the previous ciphertext), so it is
//!   latency bound: the scaffolding's xmm chain.
//! - Encryption of many sectors interleaves independent chains: two sectors per register
//!   (lane 0 and lane 1), up to 8 registers = 16 sectors advancing together.
#![allow(unsafe_code)]

use super::super::rounds::cbc_kernels;
use super::{crypt, Keys, GROUP, REGS};
use core::arch::x86_64::*;

cbc_kernels! {
    keys: Keys,
    register: __m256i,
    features: "avx2,vaes",
    xor: _mm256_xor_si256,
    zero: _mm256_setzero_si256,
    bytes: 32,
    load: _mm256_loadu_si256,
    store: _mm256_storeu_si256,
    decrypt: cbc_decrypt_vaes_avx2,
    first: |src, chain| {
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(chain), _mm_loadu_si128(src.cast()))
    },
    sectors: cbc_encrypt_sectors_vaes_avx2,
    chains: 2,
    load: |p, size| _mm256_loadu2_m128i(p.add(size).cast(), p.cast()),
    store: |p, size, v| _mm256_storeu2_m128i(p.add(size).cast(), p.cast(), v),
    ivs: |ivs| _mm256_loadu2_m128i(ivs[1].as_ptr().cast(), ivs[0].as_ptr().cast()),
}
