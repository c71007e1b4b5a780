//! The register width each AES mode runs on, on the `avx512` backend: 256-bit ymm (the
//! `vaes` kernels, `x86/vaes`) or 512-bit zmm (`x86/zmm`).
//!
//! Why a choice: a zmm VAESENC does four blocks' round, a ymm one two. Where the core runs
//! both at the same rate (AMD Zen 5's 512-bit datapath: two per cycle at every width) zmm
//! doubles the blocks per cycle; where a zmm instruction costs two ymm ones (Zen 4, Intel
//! cores) or lowers the clock, ymm is at least as fast. The modes differ beside the rounds
//! (XTS's tweak steps, CTR's counters, CBC's chains), so each mode's width is measured on
//! its own, as the backends are ([`crate::backend`]'s `measure`):
//! - `SECTORCRYPT_AES_WIDTH=ymm` or `zmm` forces every mode's width (for tests and
//!   benchmarks); any other non-empty value is an error when an avx512 key is made, never a
//!   silent fallback. It has no effect on the other backends, and `SECTORCRYPT_BACKEND`
//!   still chooses the backend first;
//! - otherwise, the first time an avx512 key is made, each mode runs [`bytes`] bytes (16
//!   KiB; 128 KiB of 4 KiB sectors for many-sector CBC) on each width once untimed, then
//!   [`TIMINGS`] times, and keeps the best figure of each;
//!   zmm displaces ymm only when more than [`MARGIN`] faster (so that equal widths do not
//!   flip from one process to the next on noise). Well under a millisecond in all (0.05 to
//!   0.2 ms measured), once per process.
//!
//! The clock and the work are parameters of [`choose`], so the tests drive the whole
//! choice with a fake clock that advances only when fake work runs.
//!
//! What each mode covers: `ecb` both directions, `ctr` (and so GCM's keystream where
//! GCM runs on these kernels), `cbc-dec` one chain (and sectors, one chain each), `cbc-enc-
//! sectors` many independent chains, `xts` both directions. One CBC chain's encryption is
//! latency bound and runs on xmm at every width.

use crate::Error;
use std::time::Duration;

/// Timed runs per mode and width (after one untimed run); the figure is the best.
pub(crate) const TIMINGS: usize = 5;
/// How much faster (as a fraction) zmm must be than ymm to be chosen.
pub(crate) const MARGIN: f64 = 0.05;
/// Bytes one timed run processes, but for many-sector CBC encryption ([`bytes`]).
pub(crate) const BYTES: usize = 16 << 10;

/// Bytes one timed run of `mode` processes: [`BYTES`], and for many-sector CBC encryption
/// 32 sectors of 4096 bytes (whole turns of both widths' chains, with the 4 KiB aliasing
/// of real sectors in the L1 cache, which 512-byte sectors do not show).
pub(crate) fn bytes(mode: WidthMode) -> usize {
    match mode {
        WidthMode::CbcEncryptSectors => SECTORS * SECTOR,
        _ => BYTES,
    }
}

/// The sectors of the many-sector CBC run, and their size.
pub(crate) const SECTORS: usize = 32;
pub(crate) const SECTOR: usize = 4096;

/// A register width of the avx512 backend's data kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    /// 256-bit registers, two blocks per instruction.
    Ymm,
    /// 512-bit registers, four blocks per instruction.
    Zmm,
}

impl Width {
    /// Both widths, the default (ymm) first.
    pub const ALL: [Width; 2] = [Width::Ymm, Width::Zmm];

    /// The name `SECTORCRYPT_AES_WIDTH` and the reports use.
    pub fn name(self) -> &'static str {
        match self {
            Width::Ymm => "ymm",
            Width::Zmm => "zmm",
        }
    }

    /// Parses a width name.
    pub fn from_name(name: &str) -> Result<Width, Error> {
        Width::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| Error::unknown_name("aes width", name, Width::ALL.map(Width::name)))
    }
}

impl std::fmt::Display for Width {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The modes whose width is chosen apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WidthMode {
    Ecb,
    Ctr,
    CbcDecrypt,
    CbcEncryptSectors,
    Xts,
}

impl WidthMode {
    /// Every mode, in the order of the reports.
    pub const ALL: [WidthMode; 5] = [
        WidthMode::Ecb,
        WidthMode::Ctr,
        WidthMode::CbcDecrypt,
        WidthMode::CbcEncryptSectors,
        WidthMode::Xts,
    ];

    /// The name the reports use.
    pub fn name(self) -> &'static str {
        match self {
            WidthMode::Ecb => "ecb",
            WidthMode::Ctr => "ctr",
            WidthMode::CbcDecrypt => "cbc-dec",
            WidthMode::CbcEncryptSectors => "cbc-enc-sectors",
            WidthMode::Xts => "xts",
        }
    }
}

/// The width of each mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widths([Width; 5]);

impl Widths {
    /// Every mode on `w`.
    pub const fn all(w: Width) -> Widths {
        Widths([w; 5])
    }

    /// The width of `mode`.
    pub fn get(&self, mode: WidthMode) -> Width {
        self.0[mode as usize]
    }
}

/// What the choice of widths found.
#[derive(Debug, Clone, PartialEq)]
pub struct WidthChoice {
    /// The width of each mode.
    pub widths: Widths,
    /// `Some(w)` when `SECTORCRYPT_AES_WIDTH` forced `w` (nothing measured).
    pub forced: Option<Width>,
    /// Each mode with its best ymm and zmm throughput in bytes per second (empty when
    /// forced).
    pub figures: Vec<(WidthMode, f64, f64)>,
    /// The time the whole measurement took, key setup included.
    pub took: Duration,
}

impl WidthChoice {
    /// Every mode forced to `w`.
    pub(crate) fn forced(w: Width) -> WidthChoice {
        WidthChoice {
            widths: Widths::all(w),
            forced: Some(w),
            figures: Vec::new(),
            took: Duration::ZERO,
        }
    }
}

/// The choice of every mode's width on `clock` (time since any fixed origin):
/// `run(mode, width)` does one run of [`bytes`]`(mode)` bytes through the mode on the width.
pub(crate) fn choose(
    clock: &dyn Fn() -> Duration,
    run: &mut dyn FnMut(WidthMode, Width),
) -> WidthChoice {
    let start = clock();
    let mut widths = Widths::all(Width::Ymm);
    let mut figures = Vec::new();
    for mode in WidthMode::ALL {
        let [ymm, zmm] = Width::ALL.map(|w| {
            run(mode, w);
            let best = (0..TIMINGS)
                .map(|_| {
                    let t = clock();
                    run(mode, w);
                    clock().saturating_sub(t)
                })
                .min()
                .unwrap_or(Duration::MAX);
            // A run below the clock's resolution counts as one nanosecond.
            bytes(mode) as f64 / best.as_secs_f64().max(1e-9)
        });
        if zmm > ymm * (1.0 + MARGIN) {
            widths.0[mode as usize] = Width::Zmm;
        }
        figures.push((mode, ymm, zmm));
    }
    WidthChoice {
        widths,
        forced: None,
        figures,
        took: clock().saturating_sub(start),
    }
}

/// `SECTORCRYPT_AES_WIDTH`, read once: `None` when unset or empty, an error for a name
/// that is no width. Checked for every AES key, on every backend, so that a wrong value is
/// an error everywhere, not only where the avx512 backend runs.
pub(crate) fn forced() -> Result<Option<Width>, Error> {
    static FORCED: std::sync::OnceLock<Result<Option<Width>, Error>> = std::sync::OnceLock::new();
    FORCED
        .get_or_init(|| {
            std::env::var("SECTORCRYPT_AES_WIDTH")
                .ok()
                .filter(|v| !v.is_empty())
                .map(|name| Width::from_name(&name))
                .transpose()
        })
        .clone()
}

/// The process's choice: `SECTORCRYPT_AES_WIDTH` when set and not empty, else measured
/// with `measure` (the avx512 kernels on the process's clock), the first time it is asked
/// for; later calls return the first answer. Only asked for where the avx512 backend runs.
pub(crate) fn process_choice(
    measure: impl FnOnce() -> WidthChoice,
) -> Result<&'static WidthChoice, Error> {
    static CHOICE: std::sync::OnceLock<Result<WidthChoice, Error>> = std::sync::OnceLock::new();
    CHOICE
        .get_or_init(|| {
            Ok(match forced()? {
                Some(w) => WidthChoice::forced(w),
                None => measure(),
            })
        })
        .as_ref()
        .map_err(Error::clone)
}

#[cfg(feature = "hazmat-testing")]
thread_local! {
    /// The width [`with_width`] forces on this thread's new avx512 keys.
    static OVERRIDE: std::cell::Cell<Option<Width>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every mode of the avx512 keys it makes on this thread on width `w`, above
/// `SECTORCRYPT_AES_WIDTH` and the measured choice (a test hook: the test matrices run
/// every kernel on every width in one process).
#[cfg(feature = "hazmat-testing")]
pub fn with_width<R>(w: Width, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Width>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(w))));
    f()
}

/// The width [`with_width`] forces on this thread, if any.
pub(crate) fn overridden() -> Option<Width> {
    #[cfg(feature = "hazmat-testing")]
    return OVERRIDE.with(|o| o.get());
    #[cfg(not(feature = "hazmat-testing"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// Runs [`choose`] on a fake clock: a run of `mode` on `width` advances it by
    /// `cost(mode, width)` nanoseconds, and nothing else does.
    fn fake(cost: impl Fn(WidthMode, Width) -> u64) -> (WidthChoice, Vec<(WidthMode, Width)>) {
        let now = Cell::new(Duration::ZERO);
        let runs = RefCell::new(Vec::new());
        let clock = || now.get();
        let mut run = |m, w| {
            runs.borrow_mut().push((m, w));
            now.set(now.get() + Duration::from_nanos(cost(m, w)));
        };
        let c = choose(&clock, &mut run);
        (c, runs.into_inner())
    }

    #[test]
    fn each_mode_takes_zmm_only_when_clearly_faster() {
        // XTS: zmm twice as fast; CTR: zmm 4% faster (within the margin); CBC sectors: zmm
        // slower; ECB: 6% faster; CBC decryption: equal.
        let (c, runs) = fake(|m, w| match (m, w) {
            (_, Width::Ymm) => 1000,
            (WidthMode::Xts, Width::Zmm) => 500,
            (WidthMode::Ctr, Width::Zmm) => 962,
            (WidthMode::CbcEncryptSectors, Width::Zmm) => 2000,
            (WidthMode::Ecb, Width::Zmm) => 940,
            (WidthMode::CbcDecrypt, Width::Zmm) => 1000,
        });
        let got: Vec<Width> = WidthMode::ALL.map(|m| c.widths.get(m)).to_vec();
        use Width::{Ymm, Zmm};
        assert_eq!(got, [Zmm, Ymm, Ymm, Ymm, Zmm], "{c:?}");
        assert_eq!(c.forced, None);
        // Every mode on both widths: one untimed run and TIMINGS timed ones each.
        assert_eq!(runs.len(), WidthMode::ALL.len() * 2 * (1 + TIMINGS));
        // The figures are bytes over the best run's time; the time is the timed runs'
        // (the untimed first runs are inside the measurement, too).
        let xts = c.figures.iter().find(|f| f.0 == WidthMode::Xts).unwrap();
        assert!((xts.1 - BYTES as f64 / 1e-6).abs() < 1.0, "{xts:?}");
        assert!((xts.2 - BYTES as f64 / 0.5e-6).abs() < 1.0, "{xts:?}");
        let total: u64 = runs
            .iter()
            .map(|&(m, w)| match (m, w) {
                (_, Width::Ymm) => 1000,
                (WidthMode::Xts, _) => 500,
                (WidthMode::Ctr, _) => 962,
                (WidthMode::CbcEncryptSectors, _) => 2000,
                (WidthMode::Ecb, _) => 940,
                (WidthMode::CbcDecrypt, _) => 1000,
            })
            .sum();
        assert_eq!(c.took, Duration::from_nanos(total));
    }

    #[test]
    fn the_best_timing_counts_and_a_zero_time_is_one_nanosecond() {
        // Zmm's runs alternate between 100 and 3000 ns: the best (100) counts. Ymm's take
        // no time at all on the fake clock: one nanosecond, so zmm loses.
        let flip = Cell::new(false);
        let (c, _) = fake(|_, w| match w {
            Width::Ymm => 0,
            Width::Zmm => {
                flip.set(!flip.get());
                if flip.get() {
                    3000
                } else {
                    100
                }
            }
        });
        assert_eq!(c.widths, Widths::all(Width::Ymm));
        for (m, ymm, zmm) in &c.figures {
            let b = bytes(*m) as f64;
            assert!((ymm - b / 1e-9).abs() < 1.0);
            assert!((zmm - b / 100e-9).abs() < 1e-3, "{zmm}");
        }
        assert_eq!(bytes(WidthMode::CbcEncryptSectors), 32 * 4096);
    }

    #[test]
    fn width_names_parse_and_others_are_refused() {
        assert_eq!(Width::from_name("ymm").unwrap(), Width::Ymm);
        assert_eq!(Width::from_name("zmm").unwrap(), Width::Zmm);
        let e = Width::from_name("xmm").unwrap_err().to_string();
        assert!(e.contains("xmm") && e.contains("ymm, zmm"), "{e}");
    }

    #[cfg(feature = "hazmat-testing")]
    #[test]
    fn the_test_override_is_scoped_to_its_closure() {
        assert_eq!(overridden(), None);
        with_width(Width::Zmm, || {
            assert_eq!(overridden(), Some(Width::Zmm));
            with_width(Width::Ymm, || assert_eq!(overridden(), Some(Width::Ymm)));
            assert_eq!(overridden(), Some(Width::Zmm));
        });
        assert_eq!(overridden(), None);
    }
}
