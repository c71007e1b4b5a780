//! The AES backends: their names, the CPU features each needs, and the public methods
//! that choose and check one (the rules themselves are shared with GOST in
//! [`crate::backend`]).

use crate::backend::{self, Algorithm, Family};
use crate::cpu::Feature;
use crate::Error;
use std::fmt;

/// An implementation of the AES kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// Portable, constant-time (bitsliced), no `unsafe`. Always available; the reference.
    Soft,
    /// AES-NI + PCLMULQDQ on xmm registers.
    Aesni,
    /// VAES + VPCLMULQDQ on 256-bit ymm registers (AVX2 integer ops, no AVX-512).
    Vaes,
    /// The `vaes` kernels, with GCM on 512-bit zmm registers (AVX-512F/BW/VL): four blocks
    /// per instruction and 32 registers, which the carry-less multiplications need.
    Avx512,
}

impl Family for Backend {
    const ALGORITHM: Algorithm = Algorithm::Aes;
    const ALL: &'static [Backend] = &Backend::ALL;

    fn name(self) -> &'static str {
        Backend::name(self)
    }

    fn needs(self) -> Option<&'static [Feature]> {
        use Feature::*;
        match self {
            Backend::Soft => Some(&[]),
            _ if !cfg!(target_arch = "x86_64") => None,
            Backend::Aesni => Some(&[Aes, Pclmulqdq, Sse41]),
            Backend::Vaes => Some(&[Aes, Avx2, Vaes, Vpclmulqdq, OsYmm]),
            Backend::Avx512 => Some(&[
                Aes, Pclmulqdq, Avx2, Vaes, Vpclmulqdq, OsZmm, Avx512f, Avx512bw, Avx512vl,
            ]),
        }
    }

    fn self_test(self) -> bool {
        super::self_test(self)
    }
}

impl Backend {
    /// Every AES backend, fastest first (the default preference order).
    pub const ALL: [Backend; 4] = [
        Backend::Avx512,
        Backend::Vaes,
        Backend::Aesni,
        Backend::Soft,
    ];

    /// The name used by `SECTORCRYPT_BACKEND`, `--backend` and the reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Soft => "soft",
            Backend::Aesni => "aesni",
            Backend::Vaes => "vaes",
            Backend::Avx512 => "avx512",
        }
    }

    /// Parses a backend name.
    pub fn from_name(name: &str) -> Result<Backend, Error> {
        backend::from_name(name)
            .ok_or_else(|| Error::unknown_name("backend", name, backend::all_names::<Backend>()))
    }

    /// `Ok` when this CPU and OS can run the backend; otherwise what is missing.
    pub fn check_cpu(self) -> Result<(), Error> {
        backend::check_cpu(self)
    }

    /// `Ok` when the backend can run here and passed its known-answer self-test (run once,
    /// on first use). A backend that fails is never used.
    pub fn ensure_usable(self) -> Result<(), Error> {
        backend::ensure_usable(self)
    }

    /// The backends this CPU can run and that pass their self-test, fastest first.
    pub fn usable() -> Vec<Backend> {
        backend::usable()
    }

    /// The backend new keys use: `SECTORCRYPT_BACKEND` when set (see
    /// [`Backend::for_forced_name`]; an error when it names an unknown or unusable
    /// backend), otherwise the fastest usable one. Decided once.
    pub fn selected() -> Result<Backend, Error> {
        backend::selected()
    }

    /// What `SECTORCRYPT_BACKEND=name` means for AES: NAME when AES has that backend (it
    /// must be usable); the portable backend when only another algorithm has it (GOST's
    /// `avx2`, which must be usable on this CPU); an error for any other name.
    pub fn for_forced_name(name: &str) -> Result<Backend, Error> {
        backend::for_forced_name(name)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
