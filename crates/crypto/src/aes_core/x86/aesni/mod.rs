//! The `aesni` backend: AES-NI + PCLMULQDQ on 128-bit xmm registers (SSE4.1 baseline).
//!
//! # Design
//! Target: every x86-64 CPU with AES-NI (Intel since Westmere, AMD since Bulldozer), and
//! the fallback on VAES CPUs when `SECTORCRYPT_BACKEND=aesni` is forced.
//!
//! Throughput model: AESENC has a latency of about 4 cycles and modern cores issue one or
//! two per cycle, so 8 independent blocks per round key are needed to keep the units busy;
//! every parallel kernel works on groups of 8 xmm registers = 8 blocks = 128 bytes. With two
//! AES units this is the same per-instruction rate as OpenSSL's AES-NI code, and its
//! advantage over OpenSSL comes only from keeping the pipeline full (many sectors per call,
//! tweaks in registers).
//!
//! Register budget (16 xmm): 8 data registers, 1 round key, the rest for tweaks, counters
//! and chaining values.
//!
//! Left out: XTS ciphertext stealing (generic layer, `modes/xts.rs`); a group shorter than
//! 8 blocks goes through a 128-byte stack buffer (ECB: a single block through one
//! register).
//!
//! The key container, the round helpers, ECB, the CBC kernels around `cbc.rs`'s pieces, the
//! single-chain CBC on xmm and the `AesKernels` methods come from the scaffolding
//! (`super::scaffold`); `ctr.rs` and `xts.rs` are this width's own.
//!
//! Calling contract: every `unsafe fn` in this folder needs the CPU features of
//! [`Backend::Aesni`]; a [`Keys`] value exists only when they are present (checked in
//! [`Keys::new`]), which makes the safe trait methods sound. Pointers passed to the kernels
//! come from an `InOut` of the stated length.
#![allow(unsafe_code)]

mod cbc;
mod ctr;
mod xts;

use super::rounds::aes_rounds;
use super::scaffold::{aes_kernels, round_keys};
use crate::aes_core::Backend;
use core::arch::x86_64::*;

/// Registers in one group.
const REGS: usize = 8;
/// Bytes in one group of 8 xmm registers.
const GROUP: usize = 16 * REGS;

round_keys! {
    /// The expanded keys of the aesni backend, one block per register.
    pub(crate) struct Keys {
        register: __m128i,
        words: 2,
        features: "aes,sse4.1",
        load: _mm_load_si128,
        broadcast: core::convert::identity,
        store: _mm_storeu_si128,
        decryption: true,
        kernels: Backend::Aesni,
    }
}

aes_rounds! {
    keys: Keys,
    register: __m128i,
    bytes: 16,
    features: "aes,sse4.1",
    xor: _mm_xor_si128,
    enc: _mm_aesenc_si128,
    enclast: _mm_aesenclast_si128,
    dec: _mm_aesdec_si128,
    declast: _mm_aesdeclast_si128,
    load: _mm_loadu_si128,
    store: _mm_storeu_si128,
    zero: _mm_setzero_si128,
}

aes_kernels! {
    Keys {
        ecb: ecb,
        cbc_decrypt: cbc::cbc_decrypt_aesni,
        cbc_encrypt_sectors: cbc::cbc_encrypt_sectors_aesni,
        ctr: ctr::ctr_aesni,
        xts: xts::xts_aesni,
    }
}
