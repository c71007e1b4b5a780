//! CBC on VAES (the kernels around these pieces:
//! [`cbc_kernels!`](super::super::rounds::cbc_kernels)).
//!
//! - Decryption is parallel: 16 blocks per group; the predecessors of blocks (2i, 2i+1)
//!   are (2i-1, 2i), a load one block back, except for the first register, whose low lane
//!   is the chaining value.
//! - Encryption of one chain is serial (each block needs the previous ciphertext), so it is
//!   latency bound: the scaffolding's xmm chain.
//! - Encryption of many sectors interleaves independent chains: two sectors per register
//!   (lane 0 and lane 1), 8 registers = 16 sectors advancing together on 16 ymm registers
//!   (the vaes backend), up to 12 registers = 24 sectors with AVX-512VL's 32 (the avx512
//!   backend). Each register runs its sectors in turns and takes up its next two as soon as
//!   its last end, so the skew between register pairs (against 4 KiB aliasing in the L1
//!   cache) idles registers once per call, not once per batch of 16 or 24; the next
//!   block's plaintext and round key 0 are folded into the last round key, so a chain is 14
//!   VAESENC and no XOR. A step of 8 registers is 56 cycles of AES work at two VAESENC per
//!   cycle, about one chain's step latency: 8 registers stay latency bound at the edge, and
//!   any op on the chain costs more than its own cycle (8 chains of 14 VAESENC: +18% time
//!   per step with one XOR added to each chain). 4096x64 sectors, kernel timing, medians:
//!   the vaes build 17.0-17.2 GB/s (ECB 17.5-18.4), against 15.0 in batches of 16 chains
//!   each with its own ramp and the XORs on the chain; 11 registers on the vaes build
//!   16.4-16.7 (better at 512-byte sectors: 17.8 against 17.2); the avx512 build 16.5-16.9
//!   on 12 registers, 15.8-16.0 on 8. The sector pointers are read from memory each step:
//!   held in registers, the compiler stepped and spilled 32 of them (vaes 16.2, avx512
//!   14.3).
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
    skewed: 2,
    skew: 4,
    load: |p, size| _mm256_loadu2_m128i(p.add(size).cast(), p.cast()),
    store: |p, size, v| _mm256_storeu2_m128i(p.add(size).cast(), p.cast(), v),
    steps: 1,
    store_steps: |p, size, v| _mm256_storeu2_m128i(p.add(size).cast(), p.cast(), v[0]),
    ivs: |ivs| _mm256_loadu2_m128i(ivs[1].as_ptr().cast(), ivs[0].as_ptr().cast()),
}
