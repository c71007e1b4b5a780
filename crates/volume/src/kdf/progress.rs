//! What the slow key-derivation steps are doing, told to whoever watches: a front end
//! shows it (the CLI's progress bar or JSON lines); this crate draws nothing and depends
//! on no display crate.
//!
//! A KDF step is either the calibration of a KDF to `--iter-time` (timing runs that grow
//! until the machine's speed is known) or one derivation (a keyslot sealed or opened).
//! Each step is reported as it begins, with the time it should take when that is known,
//! again whenever calibration learns a better estimate of the time left, and as it ends.
//! The expected time of a derivation is known when its costs were calibrated on this
//! thread (by one of the last few calibrations): it is the calibration's target. Nothing
//! secret is reported: the KDF and its costs only, which the header shows anyway.
//!
//! There is one observer for the process, set once (as a logger is); with none set a step
//! costs one atomic load. The observer is called on the thread doing the work, between
//! runs of the KDF, never inside one.

use super::{Kdf, KdfKind};
use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Duration;

/// A slow step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KdfStep {
    /// Timing `kind` on this machine to fix costs that take about `target_ms`.
    Calibrate {
        /// The KDF being calibrated.
        kind: KdfKind,
        /// The time one derivation should take (`--iter-time`).
        target_ms: u32,
    },
    /// Deriving one key with these costs.
    Derive(Kdf),
}

/// What an observer is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KdfEvent {
    /// A step began; `expected` is how long it should take, when known.
    Begin {
        /// The step.
        step: KdfStep,
        /// Its expected duration.
        expected: Option<Duration>,
    },
    /// The step under way should end in about this much more time.
    Left(Duration),
    /// The step ended (successfully or not).
    End,
}

/// The observer's type.
pub type Observer = Box<dyn Fn(KdfEvent) + Send + Sync>;

static OBSERVER: OnceLock<Observer> = OnceLock::new();

/// How many calibrations are remembered (a new LUKS volume calibrates its keyslot and its
/// volume key digest).
const REMEMBERED: usize = 4;

thread_local! {
    /// The costs calibration fixed last on this thread, the latest first, with the targets
    /// they were fixed for.
    static CALIBRATED: Cell<[Option<(Kdf, u32)>; REMEMBERED]> =
        const { Cell::new([None; REMEMBERED]) };
}

/// Sets the process's observer; `false` (and `f` dropped) when one is already set.
pub fn set_observer(f: Observer) -> bool {
    OBSERVER.set(f).is_ok()
}

fn tell(e: KdfEvent) {
    if let Some(f) = OBSERVER.get() {
        f(e);
    }
}

/// Tells the observer that the step under way should end in about `left`.
pub(crate) fn left(left: Duration) {
    tell(KdfEvent::Left(left));
}

/// Runs `work` as `step`, told to the observer as it begins and ends.
pub(crate) fn step<T>(step: KdfStep, expected: Option<Duration>, work: impl FnOnce() -> T) -> T {
    tell(KdfEvent::Begin { step, expected });
    // Told also when `work` unwinds, so that a display never stays on a dead step.
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            tell(KdfEvent::End);
        }
    }
    let _end = End;
    work()
}

/// Notes that calibration fixed `kdf` for a derivation of about `target_ms`.
pub(crate) fn calibrated(kdf: Kdf, target_ms: u32) {
    CALIBRATED.with(|c| {
        let mut list = c.get();
        list.rotate_right(1);
        list[0] = Some((kdf, target_ms));
        c.set(list);
    });
}

/// Runs the derivation `work` with `kdf` as a step, expected to take the target of the
/// calibration that fixed `kdf`, if it was fixed on this thread.
pub(crate) fn derive<T>(kdf: Kdf, work: impl FnOnce() -> T) -> T {
    let expected = CALIBRATED
        .with(Cell::get)
        .into_iter()
        .flatten()
        .find_map(|(k, ms)| (k == kdf).then(|| Duration::from_millis(u64::from(ms))));
    step(KdfStep::Derive(kdf), expected, work)
}
