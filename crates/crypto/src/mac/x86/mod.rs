//! The x86-64 kernels of the sector tags: SHA-NI lanes ([`shani`]) and the 16-lane
//! AVX-512 SHA-256 ([`avx512`]).

mod avx512;
mod shani;

pub(crate) use avx512::Avx512;
pub(crate) use shani::Shani;
