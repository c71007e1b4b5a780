//! The choice among a family's usable backends by measurement, as Linux chooses its RAID6
//! routines: the first time a choice is asked for, each candidate runs a short piece of
//! real work (a [`Workload`]: a few KiB through a mode, on a key made once), timed a few
//! times, and the fastest is kept for the life of the process.
//!
//! Why measure instead of trusting the static order (fastest first in each family's
//! enum): where wide vectors lower the clock, or a core has fewer units of one kind, the
//! wider backend can lose; and a backend added to a family (a new enum variant) is measured
//! with no code here, because the candidates are whatever [`usable`] lists.
//!
//! The rules:
//! - `SECTORCRYPT_BACKEND` wins: with a name, nothing is measured (the name's meaning is
//!   [`for_forced_name`]'s);
//! - the candidates are the backends that can run here and passed their self-test (and,
//!   for a mode with a self-test of its own such as GCM, that one too): a backend that
//!   failed is never timed nor chosen;
//! - the portable backend (last in each family) is only the fallback: it is never
//!   measured beside another candidate (it is 10 to 200 times slower than any SIMD
//!   backend, and timing it would cost most of the budget);
//! - with one candidate nothing is measured; otherwise each runs its work once untimed
//!   (page faults, the first call's branch history), then [`TIMINGS`] times, and its
//!   figure is the best of those (the least disturbed by other load); a backend later in
//!   the static order displaces the one chosen so far only when it is more than
//!   [`MARGIN`] faster, so that backends running the same code (or close) do not flip
//!   from one process to the next on noise, and the static order decides between them;
//! - each choice ([`Algorithm`] row) is made once per process, the figures kept for
//!   `sectorcrypt backends`.
//!
//! The clock is a parameter (time since any fixed origin), so the tests drive the whole
//! choice with a fake one whose time advances only when a fake workload runs.

use super::{for_forced_name, index, portable, usable, Algorithm, Selectable};
use crate::Error;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Timed runs per candidate (after one untimed run); its figure is the best of them.
pub(crate) const TIMINGS: usize = 5;

/// How much faster (as a fraction) a backend must be than the one before it in the static
/// order, chosen so far, to displace it.
pub(crate) const MARGIN: f64 = 0.05;

/// The work a choice times its candidates on.
#[derive(Clone, Copy)]
pub(crate) struct Workload<F> {
    /// The choice's row: its family's own algorithm, or a mode with a choice of its own
    /// (AES-GCM over the AES backends).
    pub(crate) algorithm: Algorithm,
    /// What one run does, for the report (e.g. "aes-256-xts, 4 units of 4096 bytes").
    pub(crate) what: &'static str,
    /// Bytes one run processes.
    pub(crate) bytes: usize,
    /// A check beyond the family's own (CPU, self-test) that a candidate must pass.
    pub(crate) usable: fn(F) -> Result<(), Error>,
    /// The work on backend `b`, keyed once: each call of the closure is one run.
    pub(crate) prepare: fn(F) -> Result<Run, Error>,
}

/// One run of a workload on a key made beforehand.
pub(crate) type Run = Box<dyn FnMut()>;

/// What a measured choice found.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The work each candidate ran (e.g. "aes-256-xts, one 4096-byte unit").
    pub work: &'static str,
    /// Each candidate, in the static order, with its best throughput in bytes per second.
    pub figures: Vec<(&'static str, f64)>,
    /// The backend chosen: the one with the highest figure.
    pub chosen: &'static str,
    /// The time the whole measurement took, key setup included.
    pub took: Duration,
}

/// A choice as remembered: the backend's position in its family's list, and the
/// measurement behind it (`None`: forced by name, or a single candidate).
type Choice = Result<(usize, Option<Measurement>), Error>;

/// The choices of one process, one per [`Algorithm`] row, each made once.
pub(crate) struct Choices {
    rows: [OnceLock<Choice>; Algorithm::COUNT],
}

impl Choices {
    pub(crate) const fn new() -> Choices {
        Choices {
            rows: [const { OnceLock::new() }; Algorithm::COUNT],
        }
    }

    /// The backend of `F` for the work `w` (and the measurement that chose it): by the name
    /// `forced` when given, otherwise the fastest candidate on `clock`, measured the first
    /// time this row is asked for. Later calls return the first answer.
    pub(crate) fn get<F: Selectable>(
        &self,
        forced: Option<&str>,
        w: &Workload<F>,
        clock: &dyn Fn() -> Duration,
    ) -> Result<(F, Option<&Measurement>), Error> {
        self.rows[w.algorithm as usize]
            .get_or_init(|| {
                let (b, m) = match forced {
                    Some(name) => {
                        let b = for_forced_name::<F>(name)?;
                        (w.usable)(b)?;
                        (b, None)
                    }
                    None => choose(w, clock),
                };
                Ok((index(b), m))
            })
            .as_ref()
            .map(|(i, m)| (F::ALL[*i], m.as_ref()))
            .map_err(Error::clone)
    }
}

/// The fastest candidate for `w` on `clock` (see the module documentation): the portable
/// backend if none is usable, the only one without measuring.
fn choose<F: Selectable>(
    w: &Workload<F>,
    clock: &dyn Fn() -> Duration,
) -> (F, Option<Measurement>) {
    let mut candidates: Vec<F> = usable::<F>()
        .into_iter()
        .filter(|b| (w.usable)(*b).is_ok())
        .collect();
    if candidates.len() > 1 {
        candidates.retain(|b| *b != portable::<F>());
    }
    if candidates.len() < 2 {
        return (candidates.first().copied().unwrap_or(portable::<F>()), None);
    }
    let start = clock();
    let mut timed: Vec<(F, f64)> = Vec::new();
    for b in candidates {
        // A candidate whose work cannot be set up is left out (it would fail for the
        // caller's keys the same way).
        let Ok(mut run) = (w.prepare)(b) else {
            continue;
        };
        run();
        let best = (0..TIMINGS)
            .map(|_| {
                let t = clock();
                run();
                clock().saturating_sub(t)
            })
            .min()
            .unwrap_or(Duration::MAX);
        // A run below the clock's resolution counts as one nanosecond.
        let secs = best.as_secs_f64().max(1e-9);
        timed.push((b, w.bytes as f64 / secs));
    }
    let Some(&(chosen, _)) = timed
        .iter()
        .fold(None, |best: Option<&(F, f64)>, c| match best {
            Some(b) if c.1 <= b.1 * (1.0 + MARGIN) => Some(b),
            _ => Some(c),
        })
    else {
        return (portable::<F>(), None);
    };
    let took = clock().saturating_sub(start);
    let m = Measurement {
        work: w.what,
        figures: timed.iter().map(|(b, f)| (b.name(), *f)).collect(),
        chosen: chosen.name(),
        took,
    };
    (chosen, Some(m))
}

/// The process's clock for the choices: the time since its first reading.
pub(crate) fn monotonic() -> Duration {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
}

#[cfg(test)]
mod tests;
