//! Which implementation runs, for every algorithm family: the one self-test registry, the
//! CPU checks and the one reading of `SECTORCRYPT_BACKEND`.
//!
//! A family (AES, GHASH, GOST) is an enum of backends implementing [`Family`]: its
//! backends fastest first, each with the CPU features it needs and its known-answer
//! self-test. The functions here do the rest for all of them:
//! - [`check_cpu`]: the features this CPU lacks for a backend, in one error;
//! - [`ensure_usable`]: the CPU check, then the self-test, run once per backend and
//!   remembered in one registry (AES-GCM's pairs of AES and GHASH are tested through the
//!   same registry, with [`self_test_passed`]); a backend that fails is never used;
//! - [`selected`]: the backend new keys take, decided once per family. Unset or empty
//!   `SECTORCRYPT_BACKEND`: the fastest usable backend, as measured at the first choice on
//!   the family's [`Workload`] when more than one is usable ([`measure`]; a mode with a
//!   workload of its own, AES-GCM, is chosen apart with [`selected_for`]). Otherwise the
//!   name must be one some family has and this CPU can run: every family with that backend takes it; a family
//!   without it takes its portable backend (`avx2`: AES `soft`, GOST `avx2`, MAC `soft`;
//!   `aesni`: AES `aesni`, GOST and MAC `soft`). An unknown or unusable name is an error,
//!   never a silent fallback.
//!
//! The families that share `SECTORCRYPT_BACKEND` (AES, GOST, the sector tags) are
//! introduced to each other by [`Selectable::SHARING`], one list given at the crate root,
//! so that this module and the family modules name none of the others.

mod measure;

use crate::cpu::{self, Feature};
use crate::error::{BackendError, Error};
use std::sync::OnceLock;

pub use measure::Measurement;
pub(crate) use measure::{monotonic, Run, Workload};

/// The rows of the self-test registry; the name is the `algorithm` of a [`BackendError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Aes,
    Ghash,
    AesGcm,
    Gost,
    Mac,
    Serpent,
    Camellia,
    Twofish,
    Kuznyechik,
    /// The fake family of this module's tests.
    #[cfg(test)]
    Test,
}

impl Algorithm {
    const COUNT: usize = 9 + cfg!(test) as usize;

    pub(crate) fn name(self) -> &'static str {
        match self {
            Algorithm::Aes => "aes",
            Algorithm::Ghash => "ghash",
            Algorithm::AesGcm => "aes-gcm",
            Algorithm::Gost => "gost",
            Algorithm::Mac => "mac",
            Algorithm::Serpent => "serpent",
            Algorithm::Camellia => "camellia",
            Algorithm::Twofish => "twofish",
            Algorithm::Kuznyechik => "kuznyechik",
            #[cfg(test)]
            Algorithm::Test => "test",
        }
    }
}

/// The most backends a family has.
const MAX_BACKENDS: usize = 4;

/// An enum of the backends of one algorithm family.
pub(crate) trait Family: Copy + PartialEq + 'static {
    /// Its row in the registry.
    const ALGORITHM: Algorithm;
    /// Every backend, fastest first; the last is the portable one, which every CPU runs.
    const ALL: &'static [Self];

    /// The name used by `SECTORCRYPT_BACKEND`, `--backend` and the reports.
    fn name(self) -> &'static str;

    /// The CPU features the backend needs, in the order a "missing" error lists them, or
    /// `None` when this build has no code for it (another architecture).
    fn needs(self) -> Option<&'static [Feature]>;

    /// The known-answer self-test, run once by [`ensure_usable`] before first use.
    fn self_test(self) -> bool;
}

/// A family whose backend `SECTORCRYPT_BACKEND` chooses.
pub(crate) trait Selectable: Family {
    /// Every family sharing the variable, AES first (this one among them): a name only
    /// the others have gives this family its portable backend.
    const SHARING: &'static [Sharer];
    /// The work its backends are timed on when more than one is usable.
    const WORKLOAD: Workload<Self>;
}

/// A family sharing `SECTORCRYPT_BACKEND`, as the others see it.
pub(crate) struct Sharer {
    algorithm: Algorithm,
    names: fn() -> Vec<&'static str>,
    /// `None` when the family has no backend of that name, else whether it is usable.
    ensure_named: fn(&str) -> Option<Result<(), Error>>,
}

impl Sharer {
    /// The family `F`.
    pub(crate) const fn of<F: Family>() -> Sharer {
        Sharer {
            algorithm: F::ALGORITHM,
            names: names::<F>,
            ensure_named: ensure_named::<F>,
        }
    }
}

/// Whether `F` has a backend called `name`, and then whether it is usable.
fn ensure_named<F: Family>(name: &str) -> Option<Result<(), Error>> {
    from_name::<F>(name).map(ensure_usable)
}

/// Defines a family's enum of backends, fastest first, each with its name and the CPU
/// features it needs (`x86 [...]`: on x86-64 only; `portable`: none, everywhere), with its
/// `ALL` list, `name()`, `Display`, the public checks (`check_cpu`, `ensure_usable`,
/// `usable`) and its [`Family`] implementation.
macro_rules! family {
    (
        $(#[$attr:meta])*
        pub enum $name:ident: $algorithm:ident, self_test: $test:path {
            $(
                $(#[$vattr:meta])*
                $variant:ident = $vname:literal, $kind:ident $([$($need:ident),*])?
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vattr])* $variant,)*
        }

        // (GHASH's enum is public only with the test hooks; without them nothing calls
        // some of these.)
        #[allow(dead_code)]
        impl $name {
            /// Every backend, fastest first (the default preference order).
            pub const ALL: [$name; [$($vname),*].len()] = [$($name::$variant),*];

            /// The name used by `SECTORCRYPT_BACKEND`, `--backend` and the reports.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $vname,)*
                }
            }

            /// `Ok` when this CPU and OS can run the backend; otherwise what is missing.
            pub fn check_cpu(self) -> Result<(), $crate::Error> {
                $crate::backend::check_cpu(self)
            }

            /// `Ok` when the backend can run here and passed its known-answer self-test
            /// (run once, on first use). A backend that fails is never used.
            pub fn ensure_usable(self) -> Result<(), $crate::Error> {
                $crate::backend::ensure_usable(self)
            }

            /// The backends this CPU can run and that pass their self-test, fastest first.
            pub fn usable() -> Vec<$name> {
                $crate::backend::usable()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::backend::Family for $name {
            const ALGORITHM: $crate::backend::Algorithm = $crate::backend::Algorithm::$algorithm;
            const ALL: &'static [$name] = &$name::ALL;

            fn name(self) -> &'static str {
                $name::name(self)
            }

            fn needs(self) -> Option<&'static [$crate::cpu::Feature]> {
                match self {
                    $($name::$variant => $crate::backend::family!(@needs $kind $([$($need),*])?),)*
                }
            }

            fn self_test(self) -> bool {
                $test(self)
            }
        }
    };
    (@needs portable) => {
        Some(&[])
    };
    (@needs x86 [$($need:ident),*]) => {
        if cfg!(target_arch = "x86_64") {
            Some(&[$($crate::cpu::Feature::$need),*])
        } else {
            None
        }
    };
}
pub(crate) use family;

/// Defines the public methods of a [`Selectable`] family that choose its backend:
/// `from_name` (an unknown name's error lists `known`: `all` the names any family has, or
/// `own`), `selected` and `for_forced_name`.
macro_rules! selectable {
    ($name:ident, unknown: $what:literal lists $known:ident) => {
        impl $name {
            /// Parses a backend name.
            pub fn from_name(name: &str) -> Result<$name, $crate::Error> {
                $crate::backend::from_name(name).ok_or_else(|| {
                    $crate::Error::unknown_name($what, name, $crate::backend::selectable!(@known $known $name))
                })
            }

            /// The backend new keys use, decided once: the fastest usable one, unless
            /// `SECTORCRYPT_BACKEND` names one ([`Self::for_forced_name`]; an error when it
            /// names an unknown or unusable backend).
            pub fn selected() -> Result<$name, $crate::Error> {
                $crate::backend::selected()
            }

            /// [`Self::selected`] with the measurement that chose it: `None` when
            /// `SECTORCRYPT_BACKEND` named the backend or only one was usable.
            pub fn selection() -> Result<($name, Option<$crate::Measurement>), $crate::Error> {
                $crate::backend::selected_for(&<$name as $crate::backend::Selectable>::WORKLOAD)
                    .map(|(b, m)| (b, m.cloned()))
            }

            /// What `SECTORCRYPT_BACKEND=name` means here: this algorithm's backend of that
            /// name, which must be usable; the portable backend when only the other
            /// algorithm (AES or GOST) has the name, which must be usable there (`avx2`
            /// gives AES `soft`, `aesni` and `vaes` give GOST `soft`; `avx512` is both
            /// families' own); an error for any other name.
            pub fn for_forced_name(name: &str) -> Result<$name, $crate::Error> {
                $crate::backend::for_forced_name(name)
            }
        }
    };
    (@known all $name:ident) => {
        $crate::backend::all_names::<$name>()
    };
    (@known own $name:ident) => {
        $name::ALL.map($name::name)
    };
}
pub(crate) use selectable;

/// The position of `b` in `F::ALL`.
pub(crate) fn index<F: Family>(b: F) -> usize {
    F::ALL.iter().position(|x| *x == b).unwrap_or(0)
}

/// The backend of `F` called `name`.
pub(crate) fn from_name<F: Family>(name: &str) -> Option<F> {
    F::ALL.iter().copied().find(|b| b.name() == name)
}

/// `Ok` when this CPU and OS can run `b`; otherwise what is missing.
pub(crate) fn check_cpu<F: Family>(b: F) -> Result<(), Error> {
    let Some(needs) = b.needs() else {
        return Err(unavailable(b, "not built for this architecture".into()));
    };
    let f = cpu::features();
    let missing: Vec<&str> = needs
        .iter()
        .filter(|n| !f.has(**n))
        .map(|n| n.name())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(unavailable(b, format!("missing {}", missing.join(", "))))
    }
}

/// `b` cannot run here, because of `why`.
pub(crate) fn unavailable<F: Family>(b: F, why: String) -> Error {
    BackendError::Unavailable {
        algorithm: F::ALGORITHM.name(),
        backend: b.name(),
        why,
    }
    .into()
}

/// `Ok` when `b` can run here and passed its self-test (run once, on first use).
pub(crate) fn ensure_usable<F: Family>(b: F) -> Result<(), Error> {
    check_cpu(b)?;
    self_test_passed(F::ALGORITHM, index(b), b.name(), || b.self_test())
}

/// The registry: `test` is run the first time row `algorithm`, column `index` is asked
/// about, and its answer kept for the life of the process. `Ok` when it passed.
pub(crate) fn self_test_passed(
    algorithm: Algorithm,
    index: usize,
    backend: &'static str,
    test: impl FnOnce() -> bool,
) -> Result<(), Error> {
    static RESULTS: [[OnceLock<bool>; MAX_BACKENDS]; Algorithm::COUNT] =
        [const { [const { OnceLock::new() }; MAX_BACKENDS] }; Algorithm::COUNT];
    if *RESULTS[algorithm as usize][index].get_or_init(test) {
        Ok(())
    } else {
        Err(BackendError::SelfTestFailed {
            algorithm: algorithm.name(),
            backend,
        }
        .into())
    }
}

/// The backends of `F` this CPU can run and that pass their self-test, fastest first.
pub(crate) fn usable<F: Family>() -> Vec<F> {
    F::ALL
        .iter()
        .copied()
        .filter(|b| ensure_usable(*b).is_ok())
        .collect()
}

/// The portable backend of `F`.
fn portable<F: Family>() -> F {
    F::ALL[F::ALL.len() - 1]
}

/// Every name `SECTORCRYPT_BACKEND` accepts: the AES backends, then the new ones of each
/// following family of [`Selectable::SHARING`].
pub(crate) fn all_names<F: Selectable>() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = Vec::new();
    for s in F::SHARING {
        for n in (s.names)() {
            if !all.contains(&n) {
                all.push(n);
            }
        }
    }
    all
}

fn names<F: Family>() -> Vec<&'static str> {
    F::ALL.iter().map(|b| b.name()).collect()
}

/// What `SECTORCRYPT_BACKEND=name` means for `F`: its backend of that name (which must be
/// usable); its portable backend when only other families have the name (the first of
/// them must have it usable); an error for any other name.
pub(crate) fn for_forced_name<F: Selectable>(name: &str) -> Result<F, Error> {
    if let Some(b) = from_name::<F>(name) {
        ensure_usable(b)?;
        return Ok(b);
    }
    let Some(other) = F::SHARING
        .iter()
        .filter(|s| s.algorithm != F::ALGORITHM)
        .find_map(|s| (s.ensure_named)(name))
    else {
        return Err(Error::unknown_name("backend", name, all_names::<F>()));
    };
    other?;
    let b = portable::<F>();
    ensure_usable(b)?;
    Ok(b)
}

/// The backend new keys of `F` take: `SECTORCRYPT_BACKEND` when set (see
/// [`for_forced_name`]), otherwise the fastest usable one, measured on the family's
/// workload. Decided once per family.
pub(crate) fn selected<F: Selectable>() -> Result<F, Error> {
    selected_for(&F::WORKLOAD).map(|(b, _)| b)
}

/// The backend of `F` for the work `w` (a family's own, or a mode's, which is chosen
/// apart): `SECTORCRYPT_BACKEND` when set, otherwise the usable backend (passing also
/// `w`'s own check) that is fastest on `w`, with the measurement. Decided once per row.
pub(crate) fn selected_for<F: Selectable>(
    w: &Workload<F>,
) -> Result<(F, Option<&'static Measurement>), Error> {
    static FORCED: OnceLock<Option<String>> = OnceLock::new();
    static CHOICES: measure::Choices = measure::Choices::new();
    let forced = FORCED.get_or_init(|| {
        std::env::var("SECTORCRYPT_BACKEND")
            .ok()
            .filter(|n| !n.is_empty())
    });
    CHOICES.get(forced.as_deref(), w, &measure::monotonic)
}
