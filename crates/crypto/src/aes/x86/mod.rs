//! The x86-64 AES backends. Their `#[target_feature]` functions are private to their leaf
//! files and reachable only through [`crate::aes::AesKernels`] objects, which are only built
//! for a backend after [`crate::Backend::ensure_usable`] confirmed the CPU features.

pub(crate) mod aesni;
pub(crate) mod common;
pub(crate) mod vaes;
pub(crate) mod vaes512;
