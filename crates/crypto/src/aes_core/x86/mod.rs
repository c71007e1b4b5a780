//! The x86-64 AES backends: `aesni` (xmm registers) and `vaes` (ymm registers), which the
//! `avx512` backend also runs: on the cores it targets, a 512-bit AES instruction does the
//! work of two 256-bit ones at half their rate, so AES alone gains nothing from zmm (only
//! GCM does, for its carry-less multiplications: [`crate::gcm`]).
//!
//! Both backends are built from the same scaffolding ([`scaffold`], [`rounds`]): the key
//! containers, the round helpers and the `AesKernels` methods are stamped out per backend
//! by macros, each function compiled with the backend's features; what differs, and is
//! tuned per width, is in the backends' own files, which have the same names in each
//! folder (`cbc.rs`, `ctr.rs`, `xts.rs`). The `#[target_feature]` functions are private to these
//! leaf files and reachable only through `AesKernels` objects, which are only built after
//! the backend's CPU check.

pub(crate) mod aesni;
pub(crate) mod rounds;
pub(crate) mod scaffold;
#[cfg(test)]
mod tests;
pub(crate) mod vaes;
