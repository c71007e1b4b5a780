//! CBC on VAES (the kernels around these pieces:
//! [`cbc_kernels!`](super::super::rounds::cbc_kernels)).
//!
//! - Decryption is parallel: 16 blocks per group; the predecessors of blocks (2i, 2i+1)
//!   are (2i-1, 2i), a load one block back, except for the first register, whose low lane
//!   is the chaining value.
//! - Encryption of one chain is serial (each block needs the previous ciphertext), so it is
//!   latency bound: the scaffolding's xmm chain.
//! - Encryption of many sectors interleaves independent chains: two sectors per register
//!   (lane 0 and lane 1), up to 8 registers = 16 sectors advancing together on 16 ymm
//!   registers (the vaes backend), 12 registers = 24 sectors with AVX-512VL's 32 (the
//!   avx512 backend). A step of 8 registers runs 8 x 14 AES-256 rounds, 56 cycles at two
//!   per cycle, about the latency of one chain's step (14 rounds of 4 cycles and two
//!   XORs): 16 chains leave the units idle whenever a step waits; 12 registers cover it
//!   with room for the loads and stores. More did not help (the skew between register
//!   pairs below lengthens the ramp at the start and end of each batch, and 16 registers
//!   of chains and their saved copies no longer fit): 4096x64 sectors, best of 9 runs,
//!   10 registers 13.7 GB/s, 12 16.2, 14 13.0, 16 12.8; ECB 18.3-18.9.
#![allow(unsafe_code)]

use super::super::rounds::cbc_kernels;
use super::{crypt, last_round, rounds_but_last, Keys, GROUP, REGS};
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
    sectors: [
        cbc_encrypt_sectors_vaes_avx2: "avx2,vaes", regs: 8, rest: [7, 6, 5, 4, 3, 2, 1];
        cbc_encrypt_sectors_vaes_avx512: "avx2,vaes,avx512f,avx512vl",
            regs: 12, rest: [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    ],
    chains: 2,
    load: |p, size| _mm256_loadu2_m128i(p.add(size).cast(), p.cast()),
    store: |p, size, v| _mm256_storeu2_m128i(p.add(size).cast(), p.cast(), v),
    ivs: |ivs| _mm256_loadu2_m128i(ivs[1].as_ptr().cast(), ivs[0].as_ptr().cast()),
}
