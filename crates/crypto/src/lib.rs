//! sectorcrypt's crypto core.
//!
//! # Algorithms and modes
//! AES-128/192/256 (FIPS-197) with the modes storage uses: [`Ecb`], [`Cbc`], [`Ctr`] (random
//! access into the keystream), [`Xts`] (IEEE 1619-2007, with ciphertext stealing), and
//! [`SectorCipher`], which encrypts many dm-crypt sectors in one call with the `plain64`,
//! `plain` and `essiv:sha256` IV generators.
//! [`Gcm`] is AES-GCM (SP 800-38D) with one-shot and streaming APIs; its GHASH runs on the
//! same backend as its AES (soft, PCLMULQDQ, or VPCLMULQDQ on ymm).
//!
//! GOST 28147-89 ([`gost89`]: ECB, CNT, CFB, CBC and the MAC, little-endian as its
//! libraries, any of eight S-box sets, optional CryptoPro key meshing) and Magma
//! ([`magma`]: ECB, CTR, OFB, CBC, CFB, the MAC, CTR-ACPKM and MGM, big-endian) are one
//! cipher with two byte conventions; both families share one implementation of each chain
//! mode, and every in-place and out-of-place method goes through one code path. Their
//! backends are [`GostBackend`]s: `soft` (portable, constant-time, the S-boxes evaluated
//! inside registers) and `avx2` (32 blocks byte-sliced per group, for everything built on
//! independent blocks); the sequential chains run on the portable code.
//!
//! # Backends
//! Every mode is a whole-buffer kernel of a backend ([`Backend`]):
//! - `soft`: portable, bitsliced, constant-time, `#![forbid(unsafe_code)]`; the reference;
//! - `aesni`: AES-NI + PCLMULQDQ on xmm registers;
//! - `vaes`: VAES + VPCLMULQDQ on 256-bit ymm registers (no AVX-512 needed);
//! - `avx512`: the `vaes` kernels, with GCM on 512-bit zmm registers (AVX-512F/BW/VL and
//!   the OS saving the AVX-512 state).
//!
//! The CPU is probed once ([`cpu::features`]); each backend runs a known-answer self-test
//! before its first use and is never used if it fails. New keys take the fastest usable
//! backend, unless `SECTORCRYPT_BACKEND=soft|aesni|vaes|avx512` names one (an unknown or unusable
//! name is an error, never a silent fallback). `with_backend` constructors pick one
//! explicitly, which is how the tests run every backend.
//!
//! # Secrets
//! Expanded keys are zeroized on drop and never appear in `Debug` output or errors.
//!
//! # Unsafe
//! `unsafe` is denied crate-wide and allowed only in the x86 backend leaf files and the CPUID
//! probe, each block with a `// SAFETY:` comment.

pub mod cpu;

pub mod aes;
mod backend;
mod buf;
mod error;
mod ghash;
mod gost;
mod modes;
mod traits;

pub use backend::{probe_units, Backend};
pub use error::{BackendError, Error, InputError, KeyError};
#[doc(hidden)]
pub use ghash::Ghash;
pub use gost::GostBackend;
pub use traits::{Aead, IvLen, Mode};

/// dm-crypt compatible sectors: many sectors per call, with dm-crypt's IV generators
/// (`aes-xts-plain64`, `aes-cbc-essiv:sha256`, ...).
pub mod dmcrypt {
    pub use crate::modes::{CipherMode, CipherSpec, IvMode, SectorCipher, SectorLayout};
}

pub use gost::{gost89, magma};
