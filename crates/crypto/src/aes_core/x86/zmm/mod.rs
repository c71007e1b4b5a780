//! The zmm data kernels of the `avx512` backend: VAES on 512-bit registers, four blocks per
//! instruction, for ECB, CTR, XTS, CBC decryption and the interleaved CBC encryption of
//! many sectors.
//!
//! # Why beside the ymm ones
//! On a core that runs a zmm VAESENC at the rate of a ymm one (AMD Zen 5 with its 512-bit
//! datapath: two per cycle at every width), these kernels do twice the blocks per cycle of
//! the ymm kernels (`super::vaes`). On Zen 4 and on Intel cores a zmm VAESENC costs two ymm
//! ones (or lowers the clock), so there the ymm kernels stay at least as fast. Which width
//! a mode runs on is therefore measured, once per process, per mode (`crate::aes_core::width`),
//! and can be forced (`SECTORCRYPT_AES_WIDTH`); the `avx512` backend's kernel object
//! (`super::avx512::Avx512Kernels`) holds the keys of both widths.
//!
//! # Design
//! Latency 4 cycles, two instructions per cycle: 8 independent zmm registers (32 blocks,
//! 512 bytes) keep both units busy, so every parallel kernel works on groups of 8 zmm
//! registers. AES-256 costs 32 x 14 / 8 = 56 cycles per 512-byte group at best (0.109
//! cycles per byte). The 32 zmm registers hold the group, the next group's tweaks or
//! counters and a round key with room to spare.
//!
//! The key container, the round helpers, ECB, the CBC kernels around `cbc.rs`'s pieces
//! and the `AesKernels` methods come from the scaffolding (`super::scaffold`,
//! `super::rounds`), stamped out for zmm; `ctr.rs` and `xts.rs` are this width's own
//! (steady CTR groups start at a counter that is a multiple of 32 and whiten their counters
//! with one XOR per register; tweaks stepped by x^32 per group). XTS ciphertext stealing is
//! done by the generic layer (`modes/xts.rs`), as for every backend; a group shorter than 32
//! blocks goes through a 512-byte stack buffer (ECB puts a tail of up to four blocks
//! through one register instead; CTR runs its head and tail on as many registers as they
//! need, the last under a byte mask).
//!
//! Calling contract: every `unsafe fn` in this folder needs the CPU features of
//! [`Backend::Avx512`]; a [`Keys`] value exists only when they are present (checked in
//! [`Keys::new`]), which is what makes the safe trait methods sound. Pointers passed to
//! the kernels come from an `InOut` of the stated length.
#![allow(unsafe_code)]

mod cbc;
mod ctr;
mod xts;

use super::rounds::aes_rounds;
use super::scaffold::{aes_kernels, round_keys};
use crate::aes_core::Backend;
use core::arch::x86_64::*;

/// Registers in one group.
pub(crate) const REGS: usize = 8;
/// Bytes in one group of 8 zmm registers.
pub(crate) const GROUP: usize = 64 * REGS;

round_keys! {
    /// The expanded keys of the zmm kernels (the `avx512` backend), broadcast to the four
    /// 128-bit lanes.
    pub(crate) struct Keys {
        register: __m512i,
        words: 8,
        features: "avx512f,aes",
        load: _mm512_load_si512,
        broadcast: _mm512_broadcast_i32x4,
        store: _mm512_storeu_si512,
        decryption: true,
        kernels: Backend::Avx512,
    }
}

aes_rounds! {
    keys: Keys,
    register: __m512i,
    bytes: 64,
    features: "avx512f,avx512bw,vaes",
    xor: _mm512_xor_si512,
    enc: _mm512_aesenc_epi128,
    enclast: _mm512_aesenclast_epi128,
    dec: _mm512_aesdec_epi128,
    declast: _mm512_aesdeclast_epi128,
    load: _mm512_loadu_si512,
    store: _mm512_storeu_si512,
    zero: _mm512_setzero_si512,
}

aes_kernels! {
    Keys {
        ecb: ecb,
        cbc_decrypt: cbc::cbc_decrypt_zmm,
        cbc_encrypt_sectors: cbc::cbc_encrypt_sectors_zmm,
        ctr: ctr::ctr_zmm,
        xts: xts::xts_zmm,
    }
}
