//! Which GOST implementation runs: the backends, their availability on this CPU, the
//! `SECTORCRYPT_BACKEND` rule shared with AES, and the self-test before first use.

use crate::error::BackendError;
use crate::{cpu, Backend, Error};
use std::fmt;
use std::sync::OnceLock;

/// An implementation of the GOST 28147-89 / Magma kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GostBackend {
    /// Portable, constant-time (S-boxes looked up inside registers), no `unsafe`.
    Soft,
    /// AVX2: 32 blocks byte-sliced in ymm registers, S-boxes as `vpshufb` tables.
    Avx2,
}

impl GostBackend {
    /// This backend cannot run here, because of `why`.
    fn unavailable(self, why: String) -> Error {
        BackendError::Unavailable {
            algorithm: "gost",
            backend: self.name(),
            why,
        }
        .into()
    }

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
        GostBackend::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| {
                Error::unknown_name(
                    "gost backend",
                    name,
                    GostBackend::ALL.map(GostBackend::name),
                )
            })
    }

    /// `Ok` when this CPU and OS can run the backend; otherwise what is missing.
    pub fn check_cpu(self) -> Result<(), Error> {
        match self {
            GostBackend::Soft => Ok(()),
            GostBackend::Avx2 => {
                if !cfg!(target_arch = "x86_64") {
                    return Err(self.unavailable("not built for this architecture".into()));
                }
                let f = cpu::features();
                let missing: Vec<&str> = [("avx2", f.avx2), ("os ymm state", f.os_ymm)]
                    .iter()
                    .filter(|(_, on)| !on)
                    .map(|(n, _)| *n)
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(self.unavailable(format!("missing {}", missing.join(", "))))
                }
            }
        }
    }

    /// `Ok` when the backend can run here and passed its known-answer self-test (run once,
    /// on first use). A backend that fails is never used.
    pub fn ensure_usable(self) -> Result<(), Error> {
        self.check_cpu()?;
        static RESULTS: [OnceLock<bool>; 2] = [OnceLock::new(), OnceLock::new()];
        let slot = match self {
            GostBackend::Soft => &RESULTS[0],
            GostBackend::Avx2 => &RESULTS[1],
        };
        if *slot.get_or_init(|| super::self_test(self)) {
            Ok(())
        } else {
            Err(BackendError::SelfTestFailed {
                algorithm: "gost",
                backend: self.name(),
            }
            .into())
        }
    }

    /// The backends this CPU can run and that pass their self-test, fastest first.
    pub fn usable() -> Vec<GostBackend> {
        GostBackend::ALL
            .into_iter()
            .filter(|b| b.ensure_usable().is_ok())
            .collect()
    }

    /// The backend new GOST keys use, decided once. `SECTORCRYPT_BACKEND=NAME` forces NAME
    /// for every algorithm that has it and the portable backend for the others: `avx2`
    /// (which this CPU must run) gives `avx2`; `soft` gives `soft`; an AES-only name
    /// (`aesni`, `vaes`), which must be usable for AES, gives `soft`; any other name is an
    /// error. Unset or empty: the fastest usable backend.
    pub fn selected() -> Result<GostBackend, Error> {
        static SELECTED: OnceLock<Result<GostBackend, Error>> = OnceLock::new();
        SELECTED
            .get_or_init(|| match std::env::var("SECTORCRYPT_BACKEND") {
                Ok(name) if !name.is_empty() => GostBackend::for_forced_name(&name),
                _ => Ok(GostBackend::usable()
                    .first()
                    .copied()
                    .unwrap_or(GostBackend::Soft)),
            })
            .clone()
    }

    /// What `SECTORCRYPT_BACKEND=name` means for GOST (see [`GostBackend::selected`]).
    pub fn for_forced_name(name: &str) -> Result<GostBackend, Error> {
        if let Ok(g) = GostBackend::from_name(name) {
            g.ensure_usable()?;
            return Ok(g);
        }
        let aes = Backend::from_name(name)?;
        aes.ensure_usable()?;
        GostBackend::Soft.ensure_usable()?;
        Ok(GostBackend::Soft)
    }
}

impl fmt::Display for GostBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
