//! GCM's stitched kernels on x86-64: CTR and GHASH in one pass over the data, on ymm
//! ([`ymm`]: the vaes AES kernels with the VPCLMULQDQ ymm GHASH, 256-byte groups) and on
//! zmm ([`zmm`]: 512-byte groups, AVX-512), each as a pair of matching keys; [`glue`] puts a
//! message (or the whole groups of a piece of a stream) through either. The kernels are
//! tuned per width and kept apart; `probe` (with the test hooks) measures what their design
//! rests on.

pub(crate) mod glue;
#[cfg(feature = "hazmat-testing")]
pub(crate) mod probe;
#[cfg(test)]
mod tests;
pub(crate) mod ymm;
pub(crate) mod zmm;
