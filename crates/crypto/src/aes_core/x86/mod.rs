//! The x86-64 AES backends: `aesni` (xmm registers) and `vaes` (ymm registers), which the
//! `avx512` backend also runs: on the cores it targets, a 512-bit AES instruction does the
//! work of two 256-bit ones at half their rate, so AES alone gains nothing from zmm (only
//! GCM does, for its carry-less multiplications: [`crate::gcm`]). Not on every core: on
//! an AMD EPYC exposing AVX-512 the probe ran 8 VAESENC on zmm in the cycles of 8 on ymm
//! (4.2 against 4.1), twice the blocks per cycle. ECB, CTR and XTS on zmm did run twice
//! as fast there (ECB-128 57 against 28 GB/s), but XTS then reached only 0.86 of ECB
//! (0.93 on ymm) and 512-byte units 0.86 of 4096-byte ones: the tweak steps and the
//! per-unit work weigh twice as much per byte; such kernels would go beside these, chosen
//! by measurement. What the avx512 backend does use is AVX-512VL's 32 ymm registers, and
//! zmm registers for the XTS tweaks (`vaes/mod.rs`).
//!
//! Both backends are built from the same scaffolding ([`scaffold`], [`rounds`]): the key
//! containers, the round helpers and the `AesKernels` methods are stamped out per backend
//! by macros, each function compiled with the backend's features; what differs, and is
//! tuned per width, is in the backends' own files, which have the same names in each
//! folder (`cbc.rs`, `ctr.rs`, `xts.rs`). The `#[target_feature]` functions are private to these
//! leaf files and reachable only through `AesKernels` objects, which are only built after
//! the backend's CPU check. `probe.rs` times AESENC on xmm for `sectorcrypt bench`'s
//! limit of the aesni backend (the ymm and zmm steps are in `gcm/x86/probe.rs`).

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
