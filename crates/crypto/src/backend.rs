//! Which implementation runs: the backends, their availability on this CPU, the
//! `SECTORCRYPT_BACKEND` override and the known-answer self-test run before first use.

use crate::error::BackendError;
use crate::{cpu, Error};
use std::fmt;
use std::sync::OnceLock;

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

    /// A dense index (for per-backend tables).
    pub(crate) fn index(self) -> usize {
        match self {
            Backend::Soft => 0,
            Backend::Aesni => 1,
            Backend::Vaes => 2,
            Backend::Avx512 => 3,
        }
    }

    /// Parses a backend name.
    pub fn from_name(name: &str) -> Result<Backend, Error> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| Error::unknown_name("backend", name, backend_names()))
    }

    /// `Ok` when this CPU and OS can run the backend; otherwise what is missing.
    pub fn check_cpu(self) -> Result<(), Error> {
        let f = cpu::features();
        let missing: Vec<&str> = match self {
            Backend::Soft => vec![],
            Backend::Aesni => [
                ("aes", f.aes),
                ("pclmulqdq", f.pclmulqdq),
                ("sse4.1", f.sse41),
            ]
            .iter()
            .filter(|(_, on)| !on)
            .map(|(n, _)| *n)
            .collect(),
            Backend::Vaes => [
                ("aes", f.aes),
                ("avx2", f.avx2),
                ("vaes", f.vaes),
                ("vpclmulqdq", f.vpclmulqdq),
                ("os ymm state", f.os_ymm),
            ]
            .iter()
            .filter(|(_, on)| !on)
            .map(|(n, _)| *n)
            .collect(),
            Backend::Avx512 => [
                ("aes", f.aes),
                ("pclmulqdq", f.pclmulqdq),
                ("avx2", f.avx2),
                ("vaes", f.vaes),
                ("vpclmulqdq", f.vpclmulqdq),
                ("os zmm state", f.os_zmm),
                ("avx512f", f.avx512f),
                ("avx512bw", f.avx512bw),
                ("avx512vl", f.avx512vl),
            ]
            .iter()
            .filter(|(_, on)| !on)
            .map(|(n, _)| *n)
            .collect(),
        };
        if missing.is_empty() && self.compiled_in() {
            Ok(())
        } else if !self.compiled_in() {
            Err(self.unavailable("not built for this architecture".into()))
        } else {
            Err(self.unavailable(format!("missing {}", missing.join(", "))))
        }
    }

    fn compiled_in(self) -> bool {
        match self {
            Backend::Soft => true,
            Backend::Aesni | Backend::Vaes | Backend::Avx512 => cfg!(target_arch = "x86_64"),
        }
    }

    /// `Ok` when the backend can run here and passed its known-answer self-test (run once,
    /// on first use). A backend that fails is never used.
    pub fn ensure_usable(self) -> Result<(), Error> {
        self.check_cpu()?;
        static RESULTS: [OnceLock<bool>; 4] = [const { OnceLock::new() }; 4];
        if *RESULTS[self.index()].get_or_init(|| crate::aes::self_test(self)) {
            Ok(())
        } else {
            Err(BackendError::SelfTestFailed {
                algorithm: "aes",
                backend: self.name(),
            }
            .into())
        }
    }

    /// The backends this CPU can run and that pass their self-test, fastest first.
    pub fn usable() -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| b.ensure_usable().is_ok())
            .collect()
    }

    /// The backend new keys use: `SECTORCRYPT_BACKEND` when set (see
    /// [`Backend::for_forced_name`]; an error when it names an unknown or unusable
    /// backend), otherwise the fastest usable one. Decided once.
    pub fn selected() -> Result<Backend, Error> {
        static SELECTED: OnceLock<Result<Backend, Error>> = OnceLock::new();
        SELECTED
            .get_or_init(|| match std::env::var("SECTORCRYPT_BACKEND") {
                Ok(name) if !name.is_empty() => Backend::for_forced_name(&name),
                _ => Ok(Backend::usable().first().copied().unwrap_or(Backend::Soft)),
            })
            .clone()
    }
}

impl Backend {
    /// What `SECTORCRYPT_BACKEND=name` means for AES: NAME when AES has that backend (it
    /// must be usable); the portable backend when only another algorithm has it (GOST's
    /// `avx2`, which must be usable on this CPU); an error for any other name.
    pub fn for_forced_name(name: &str) -> Result<Backend, Error> {
        if let Ok(b) = Backend::from_name(name) {
            b.ensure_usable()?;
            return Ok(b);
        }
        let gost = crate::GostBackend::from_name(name)
            .map_err(|_| Error::unknown_name("backend", name, backend_names()))?;
        gost.ensure_usable()?;
        Ok(Backend::Soft)
    }
}

impl Backend {
    /// This backend cannot run here, because of `why`.
    pub(crate) fn unavailable(self, why: String) -> Error {
        BackendError::Unavailable {
            algorithm: "aes",
            backend: self.name(),
            why,
        }
        .into()
    }
}

/// Every name `SECTORCRYPT_BACKEND` accepts: the AES backends, then GOST's own.
fn backend_names() -> impl Iterator<Item = &'static str> {
    let gost = crate::GostBackend::ALL
        .into_iter()
        .map(crate::GostBackend::name);
    let aes = Backend::ALL.into_iter().map(Backend::name);
    aes.chain(gost.filter(|g| Backend::ALL.iter().all(|a| a.name() != *g)))
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Measures how the AES and carry-less multiply units share the core (see `sectorcrypt
/// bench --probe`): seconds per loop step of named mixes of independent instructions, on
/// ymm (when the CPU can run the `vaes` backend) and on zmm (when it can run `avx512`).
#[doc(hidden)]
pub fn probe_units() -> Vec<(&'static str, f64)> {
    #[allow(unused_mut)]
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        use crate::aes::x86::{vaes, vaes512};
        if Backend::Vaes.check_cpu().is_ok() {
            let [a, c, m] = vaes::probe::probe(2_000_000);
            out.extend([
                ("8 VAESENC ymm", a),
                ("4 VPCLMULQDQ ymm", c),
                ("8 VAESENC + 4 VPCLMULQDQ ymm", m),
            ]);
        }
        if Backend::Avx512.check_cpu().is_ok() {
            out.extend(vaes512::probe::probe(1_000_000));
        }
    }
    out
}
