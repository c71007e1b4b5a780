//! Which GOST implementation runs: the backends, their availability on this CPU, the
//! `SECTORCRYPT_BACKEND` rule shared with AES, and the self-test before first use.

use crate::backend::{self, Algorithm, Family};
use crate::cpu::Feature;
use crate::Error;
use std::fmt;

/// An implementation of the GOST 28147-89 / Magma kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GostBackend {
    /// Portable, constant-time (S-boxes looked up inside registers), no `unsafe`.
    Soft,
    /// AVX2: 32 blocks byte-sliced in ymm registers, S-boxes as `vpshufb` tables.
    Avx2,
}

impl Family for GostBackend {
    const ALGORITHM: Algorithm = Algorithm::Gost;
    const ALL: &'static [GostBackend] = &GostBackend::ALL;

    fn name(self) -> &'static str {
        GostBackend::name(self)
    }

    fn needs(self) -> Option<&'static [Feature]> {
        match self {
            GostBackend::Soft => Some(&[]),
            GostBackend::Avx2 if cfg!(target_arch = "x86_64") => {
                Some(&[Feature::Avx2, Feature::OsYmm])
            }
            GostBackend::Avx2 => None,
        }
    }

    fn self_test(self) -> bool {
        super::self_test(self)
    }
}

impl GostBackend {
    /// Every GOST backend, fastest first.
    pub const ALL: [GostBackend; 2] = [GostBackend::Avx2, GostBackend::Soft];

    /// The name used by `SECTORCRYPT_BACKEND` and the reports.
    pub fn name(self) -> &'static str {
        match self {
            GostBackend::Soft => "soft",
            GostBackend::Avx2 => "avx2",
        }
    }

    /// Parses a GOST backend name (`soft`, `avx2`).
    pub fn from_name(name: &str) -> Result<GostBackend, Error> {
        backend::from_name(name).ok_or_else(|| {
            Error::unknown_name(
                "gost backend",
                name,
                GostBackend::ALL.map(GostBackend::name),
            )
        })
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
    pub fn usable() -> Vec<GostBackend> {
        backend::usable()
    }

    /// The backend new GOST keys use, decided once. `SECTORCRYPT_BACKEND=NAME` forces NAME
    /// for every algorithm that has it and the portable backend for the others: `avx2`
    /// (which this CPU must run) gives `avx2`; `soft` gives `soft`; an AES-only name
    /// (`aesni`, `vaes`, `avx512`), which must be usable for AES, gives `soft`; any other
    /// name is an error. Unset or empty: the fastest usable backend.
    pub fn selected() -> Result<GostBackend, Error> {
        backend::selected()
    }

    /// What `SECTORCRYPT_BACKEND=name` means for GOST (see [`GostBackend::selected`]).
    pub fn for_forced_name(name: &str) -> Result<GostBackend, Error> {
        backend::for_forced_name(name)
    }
}

impl fmt::Display for GostBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
