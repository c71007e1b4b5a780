//! The x86-64 AES backends: `aesni` (xmm registers), `vaes` (ymm registers) and `avx512`,
//! which runs each mode on ymm (the vaes kernels, some built a second time with
//! AVX-512VL's 32 registers, and zmm registers for the XTS tweaks: `vaes/mod.rs`) or on
//! zmm (`zmm/`: four blocks per instruction), whichever was faster when measured once per
//! process (`avx512.rs`, [`crate::aes_core::width`]; `SECTORCRYPT_AES_WIDTH` forces one).
//! Why both: on the cores AVX-512 first came to (Intel, AMD Zen 4) a 512-bit AES
//! instruction does the work of two 256-bit ones at half their rate, so zmm gains nothing
//! there (only GCM does, for its carry-less multiplications: [`crate::gcm`]); on an AMD
//! Zen 5 with its 512-bit datapath the probe runs 8 VAESENC on zmm in the cycles of 8 on
//! ymm (4.04 against 4.01), twice the blocks per cycle, and the zmm kernels run about
//! twice as fast (docs/PERFORMANCE.md).
//!
//! Every width is built from the same scaffolding ([`scaffold`], [`rounds`]): the key
//! containers, the round helpers and the `AesKernels` methods are stamped out per backend
//! by macros, each function compiled with the backend's features; what differs, and is
//! tuned per width, is in the backends' own files, which have the same names in each
//! folder (`cbc.rs`, `ctr.rs`, `xts.rs`). The `#[target_feature]` functions are private to these
//! leaf files and reachable only through `AesKernels` objects, which are only built after
//! the backend's CPU check. `probe.rs` times AESENC on xmm, one of the steps from which
//! `sectorcrypt bench` and `backends` take the core's AES limit (the ymm and zmm steps are
//! in `gcm/x86/probe.rs`).

pub(crate) mod aesni;
pub(crate) mod avx512;
#[cfg(feature = "hazmat-testing")]
pub(crate) mod probe;
pub(crate) mod rounds;
pub(crate) mod scaffold;
#[cfg(test)]
mod tests;
pub(crate) mod vaes;
pub(crate) mod zmm;
