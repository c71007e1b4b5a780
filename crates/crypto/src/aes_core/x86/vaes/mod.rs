//! The `vaes` backend: VAES + VPCLMULQDQ on 256-bit ymm registers, AVX2 integer operations.
//!
//! # Design
//! Target: x86-64 CPUs with VAES on ymm but not necessarily AVX-512 (AMD Zen 3 and Zen 4,
//! Intel Ice Lake and later, including VMs that expose VAES without the AVX-512 register
//! state, such as some of this project's Zen 4 machines with XCR0 = 0x7; where the state
//! is there, the `avx512` backend reuses these kernels and adds GCM on zmm). Nothing here
//! touches zmm or mask registers.
//!
//! Throughput model: a VAESENC on a ymm register encrypts one round of two blocks; Zen 4
//! issues two per cycle with a latency of about 4 cycles, so 8 independent registers (16
//! blocks) must be in flight to keep both units busy. Every parallel kernel therefore works
//! on groups of 8 ymm = 16 blocks = 256 bytes. AES-256 costs 14 rounds per block, i.e.
//! 16 x 14 / 4 = 56 cycles per 256-byte group at best (docs/PERFORMANCE.md measures how
//! close each mode comes).
//!
//! Register budget (16 ymm): 8 data registers, 1 round key (round keys are broadcast to
//! both lanes once per key and streamed from L1, one load per round per group), the rest
//! for XTS tweaks / CTR counters / CBC chaining values; the compiler spills what does not
//! fit to L1, which costs loads, not latency.
//!
//! The avx512 backend runs these kernels for the modes it measured faster on ymm than on
//! zmm (`super::zmm`, `super::avx512`), with the same key container, but its CTR and
//! many-sector CBC kernels are compiled a second time with AVX-512VL, whose EVEX encoding
//! reaches ymm16-31: the next group's counters are built before the group's rounds
//! without spilling, and 24 CBC chains fit; its XTS kernel is its own (`xts.rs`): the same
//! ymm data path, the tweaks built ahead in zmm registers, four blocks' per multiply. Each
//! call takes the build of the backend the keys were made for (`aes_kernels!`'s
//! `narrow | wide` kernels); ECB and CBC decryption gain nothing from more registers and
//! exist once.
//!
//! Tuned for: storage sectors (virtually all XTS inputs are 512 or 4096 bytes, handed over
//! many sectors per call), CTR and ECB over long buffers, CBC decryption, and CBC encryption
//! of many independent sectors (16 chains at once, two per register; up to 24 on avx512).
//!
//! Left out: single-stream CBC encryption is latency bound by definition and uses plain
//! AES-NI on xmm (the scaffolding's chain); XTS ciphertext stealing is done by the generic
//! layer (`modes/xts.rs`); a group shorter than 16 blocks is run through a 256-byte stack
//! buffer rather than with narrower code, since it happens at most once per data unit
//! (ECB and CTR put a tail of one or two blocks, a tweak or a GCM block, through one
//! register instead).
//!
//! The key container, the round helpers, ECB, the CBC kernels around `cbc.rs`'s pieces
//! and the `AesKernels` methods come from the scaffolding (`super::scaffold`); `ctr.rs` and
//! `xts.rs` are this width's own.
//!
//! Calling contract: every `unsafe fn` in this folder needs the CPU features of
//! [`Backend::Vaes`]; a [`Keys`] value exists only when they are present (checked in
//! [`Keys::new`], for the `vaes` or the `avx512` backend), which is what makes the safe
//! trait methods sound. Pointers passed to the kernels come from an `InOut` of the stated
//! length.
#![allow(unsafe_code)]

mod cbc;
pub(crate) mod ctr;
mod xts;

use super::rounds::aes_rounds;
use super::scaffold::{aes_kernels, round_keys};
use crate::aes_core::Backend;
use core::arch::x86_64::*;

/// Registers in one group.
pub(crate) const REGS: usize = 8;
/// Bytes in one group of 8 ymm registers.
pub(crate) const GROUP: usize = 32 * REGS;

round_keys! {
    /// The expanded keys of the vaes kernels (the `vaes` and `avx512` backends), broadcast
    /// to both 128-bit lanes.
    pub(crate) struct Keys {
        register: __m256i,
        words: 4,
        features: "avx2,aes",
        load: _mm256_load_si256,
        broadcast: _mm256_broadcastsi128_si256,
        store: _mm256_storeu_si256,
        decryption: true,
        kernels: Backend::Vaes,
    }
}

aes_rounds! {
    keys: Keys,
    register: __m256i,
    bytes: 32,
    features: "avx2,vaes",
    xor: _mm256_xor_si256,
    enc: _mm256_aesenc_epi128,
    enclast: _mm256_aesenclast_epi128,
    dec: _mm256_aesdec_epi128,
    declast: _mm256_aesdeclast_epi128,
    load: _mm256_loadu_si256,
    store: _mm256_storeu_si256,
    zero: _mm256_setzero_si256,
}

aes_kernels! {
    Keys {
        ecb: ecb,
        cbc_decrypt: cbc::cbc_decrypt_vaes_avx2,
        cbc_encrypt_sectors: cbc::cbc_encrypt_sectors_vaes_avx2
            | cbc::cbc_encrypt_sectors_vaes_avx512,
        ctr: ctr::ctr_vaes_avx2 | ctr::ctr_vaes_avx512,
        xts: xts::xts_vaes_avx2 | xts::xts_vaes_avx512,
    }
}
