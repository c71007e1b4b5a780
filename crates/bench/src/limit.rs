//! The machine's own limit for a case, from the unit probe ([`crate::probe_units`]): the
//! fraction of it a case reaches is the `limit` field of the report.
//!
//! AES: the probe times steps of 8 independent AESENC on xmm (1 block each), VAESENC on
//! ymm (2 blocks each) and on zmm (4 blocks each), from which the core's rate of block
//! rounds per second follows for each width. The limit is the core's, not the backend's:
//! the best of those widths, whatever width (or backend) the case ran on, so a backend that
//! leaves a faster width unused shows it (on a core that runs a zmm VAESENC at the ymm
//! rate, ymm kernels reach at most half). A case that encrypts one block per data block
//! with `rounds` rounds (every AES mode: the XTS tweak, GCM's hash and E_K(J0) cost no
//! rounds per data block) can at best run at `rate * 16 / rounds` bytes per second, or
//! `rounds / (16 * block rounds per cycle)` cycles per byte ([`AesRate::limit_cpb`], which
//! `sectorcrypt backends` shows). A latency-bound case (one CBC chain) shows how far it is
//! from what the units allow.
//!
//! Other bounds (a GOST backend's measured round cost) give their bytes per second the
//! same way and go through the same [`fraction`].

/// Block rounds per second the AES units do on each register width, from the probe
/// (`None` where the probe has no figure: the CPU lacks the width, or no step was timed).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AesRate {
    pub xmm: Option<f64>,
    pub ymm: Option<f64>,
    pub zmm: Option<f64>,
}

/// The register width whose AES rate bounds a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    Xmm,
    Ymm,
    Zmm,
}

/// What bounds a case (part of its definition in `cases.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// No limit is stated.
    None,
    /// AES with `rounds` rounds per block; `threads`: the case runs on all its threads
    /// (the limit is one core's times the threads).
    Aes { rounds: usize, threads: bool },
}

/// Probe steps and the block rounds one of them does: 8 VAESENC of 1, 2 or 4 blocks.
const STEPS: [(&str, Width, f64); 3] = [
    ("8 AESENC xmm", Width::Xmm, 8.0),
    ("8 VAESENC ymm", Width::Ymm, 16.0),
    ("8 VAESENC zmm", Width::Zmm, 32.0),
];

impl AesRate {
    /// The rates of the probe's figures `(step name, seconds per step)`.
    pub fn from_probe(steps: &[(&str, f64)]) -> AesRate {
        let mut rate = AesRate::default();
        for (name, width, block_rounds) in STEPS {
            let secs = steps.iter().find(|(n, _)| *n == name).map(|(_, s)| *s);
            let per_sec = secs
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(|s| block_rounds / s);
            match width {
                Width::Xmm => rate.xmm = per_sec,
                Width::Ymm => rate.ymm = per_sec,
                Width::Zmm => rate.zmm = per_sec,
            }
        }
        rate
    }

    /// The bytes per second of AES with `rounds` rounds on `width` at these rates.
    pub fn bytes_per_sec(&self, width: Width, rounds: usize) -> Option<f64> {
        let rate = match width {
            Width::Xmm => self.xmm,
            Width::Ymm => self.ymm,
            Width::Zmm => self.zmm,
        }?;
        (rounds > 0).then(|| rate * 16.0 / rounds as f64)
    }
}

impl AesRate {
    /// The width with the highest rate of block rounds, and that rate (`None` when the
    /// probe timed no width).
    pub fn best(&self) -> Option<(Width, f64)> {
        [
            (Width::Xmm, self.xmm),
            (Width::Ymm, self.ymm),
            (Width::Zmm, self.zmm),
        ]
        .into_iter()
        .filter_map(|(w, r)| r.filter(|r| r.is_finite() && *r > 0.0).map(|r| (w, r)))
        .fold(None, |best: Option<(Width, f64)>, c| match best {
            Some(b) if b.1 >= c.1 => Some(b),
            _ => Some(c),
        })
    }

    /// The physical limit of one core for AES with `rounds` rounds: bytes per second on
    /// the best width.
    pub fn limit(&self, rounds: usize) -> Option<f64> {
        self.bytes_per_sec(self.best()?.0, rounds)
    }

    /// That limit in cycles per byte at `ghz`.
    pub fn limit_cpb(&self, rounds: usize, ghz: f64) -> Option<f64> {
        self.limit(rounds)
            .filter(|_| ghz.is_finite() && ghz > 0.0)
            .map(|bps| ghz * 1e9 / bps)
    }
}

/// The fraction of `limit` (bytes per second) that `bytes_per_sec` reaches.
pub fn fraction(bytes_per_sec: f64, limit: Option<f64>) -> Option<f64> {
    limit
        .filter(|l| l.is_finite() && *l > 0.0)
        .map(|l| bytes_per_sec / l)
}

/// The `limit` of a case with bound `bound` that ran at `bytes_per_sec` with `threads`
/// threads: its fraction of the core's limit (the best width's), on every backend.
pub(crate) fn of_case(
    bound: Bound,
    rate: &AesRate,
    threads: usize,
    bytes_per_sec: f64,
) -> Option<f64> {
    match bound {
        Bound::None => None,
        Bound::Aes {
            rounds,
            threads: all,
        } => {
            let one = rate.limit(rounds)?;
            let cores = if all { threads.max(1) } else { 1 };
            fraction(bytes_per_sec, Some(one * cores as f64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Zen 4 as docs/PERFORMANCE.md shows it: 8 VAESENC in 4 cycles on ymm, 8 on zmm,
    /// at 4 GHz (1 ns per 4 cycles).
    fn zen4() -> AesRate {
        AesRate::from_probe(&[
            ("8 VAESENC ymm", 1e-9),
            ("4 VPCLMULQDQ ymm", 2e-9),
            ("8 VAESENC zmm", 2e-9),
        ])
    }

    #[test]
    fn rates_follow_from_the_probe_steps() {
        let r = zen4();
        let near = |x: Option<f64>, want: f64| x.is_some_and(|x| (x - want).abs() < 1e-3);
        // 16 block rounds per ns on ymm, 32 per 2 ns on zmm: the same rate.
        assert!(near(r.ymm, 16e9), "{r:?}");
        assert!(near(r.zmm, 16e9), "{r:?}");
        assert_eq!(r.xmm, None);
        // AES-256: 16e9 * 16 / 14 bytes per second; AES-128 with 10 rounds.
        let l256 = r.bytes_per_sec(Width::Ymm, 14).unwrap();
        assert!((l256 - 16e9 * 16.0 / 14.0).abs() < 1.0, "{l256}");
        assert!(near(r.bytes_per_sec(Width::Ymm, 10), 16e9 * 1.6));
        assert_eq!(r.bytes_per_sec(Width::Xmm, 10), None);
        let x = AesRate::from_probe(&[("8 AESENC xmm", 2e-9)]);
        assert!(near(x.bytes_per_sec(Width::Xmm, 10), 4e9 * 1.6));
    }

    /// A Zen 5 (AMD EPYC, family 0x1a): 8 VAESENC on ymm in 4.01 cycles, on zmm in 4.04, at
    /// 4.4 GHz; xmm in 4.0 as well.
    fn zen5() -> AesRate {
        let ns = |cycles: f64| cycles / 4.4 * 1e-9;
        AesRate::from_probe(&[
            ("8 AESENC xmm", ns(4.0)),
            ("8 VAESENC ymm", ns(4.01)),
            ("8 VAESENC zmm", ns(4.04)),
        ])
    }

    #[test]
    fn the_limit_is_the_best_width_the_probe_measured() {
        // Zen 5: zmm, 32 block rounds per 4.04 cycles. AES-256: 14 / (16 * 32 / 4.04)
        // = 0.1105 cycles per byte; AES-192 0.0947, AES-128 0.0789.
        let r = zen5();
        assert_eq!(r.best().unwrap().0, Width::Zmm);
        let cpb = |rounds| r.limit_cpb(rounds, 4.4).unwrap();
        assert!((cpb(14) - 14.0 * 4.04 / 512.0).abs() < 1e-12, "{}", cpb(14));
        assert!((cpb(12) - 12.0 * 4.04 / 512.0).abs() < 1e-12, "{}", cpb(12));
        assert!((cpb(10) - 10.0 * 4.04 / 512.0).abs() < 1e-12, "{}", cpb(10));
        // 0.1105 c/B at 4.4 GHz is 39.8 GB/s.
        let gbs = r.limit(14).unwrap() / 1e9;
        assert!((gbs - 4.4 * 512.0 / (14.0 * 4.04)).abs() < 1e-9, "{gbs}");
        // Zen 4: zmm at half rate, so ymm and zmm tie; the first of the best (ymm) is named
        // and the limit is the same either way.
        let z4 = zen4();
        assert_eq!(z4.best().unwrap().0, Width::Ymm);
        assert!((z4.limit_cpb(14, 4.0).unwrap() - 14.0 / 64.0).abs() < 1e-12);
        // Only xmm timed (a CPU without VAES): its rate; nothing timed: no limit.
        let x = AesRate::from_probe(&[("8 AESENC xmm", 2e-9)]);
        assert_eq!(x.best().unwrap().0, Width::Xmm);
        assert_eq!(AesRate::default().limit(14), None);
        assert_eq!(r.limit_cpb(14, 0.0), None);
    }

    #[test]
    fn the_fraction_of_a_case_is_its_rate_over_the_cores_limit() {
        let bound = |rounds, threads| Bound::Aes { rounds, threads };
        // Zen 4 at 4 GHz: the AES-256 limit is 18.29 GB/s (0.219 cycles per byte); a case
        // at 0.25 cycles per byte (16 GB/s) reaches 0.875 of it.
        let r = zen4();
        let f = of_case(bound(14, false), &r, 1, 16e9).unwrap();
        assert!((f - 0.875).abs() < 1e-12, "{f}");
        // A slower zmm leaves the ymm limit: the best width counts.
        let slow_zmm = AesRate {
            zmm: Some(8e9),
            ..r
        };
        let f = of_case(bound(14, false), &slow_zmm, 1, 16e9).unwrap();
        assert!((f - 0.875).abs() < 1e-12, "{f}");
        // A zmm at twice the rate (Zen 5) halves every case's fraction, whatever width it
        // ran on: 16 GB/s is 0.4375 of 36.57.
        let fast_zmm = AesRate {
            zmm: Some(32e9),
            ..r
        };
        let f = of_case(bound(14, false), &fast_zmm, 1, 16e9).unwrap();
        assert!((f - 0.4375).abs() < 1e-12, "{f}");
        // AES-128: 10 rounds, 25.6 GB/s; two threads double the limit.
        let f = of_case(bound(10, true), &r, 2, 25.6e9).unwrap();
        assert!((f - 0.5).abs() < 1e-12, "{f}");
        // No limit: no width timed, or no bound.
        assert_eq!(of_case(bound(14, false), &AesRate::default(), 1, 1e9), None);
        assert_eq!(of_case(Bound::None, &r, 1, 1e9), None);
        assert_eq!(fraction(1e9, Some(0.0)), None);
        assert_eq!(fraction(1e9, Some(4e9)), Some(0.25));
    }
}
