//! The machine's own limit for a case, from the unit probe ([`crate::probe_units`]): the
//! fraction of it a case reaches is the `limit` field of the report.
//!
//! AES: the probe times steps of 8 independent VAESENC on ymm (2 blocks each) and on zmm
//! (4 blocks each), from which the core's rate of block rounds per second follows for
//! each width. A case that encrypts one block per data block with `rounds` rounds (every
//! AES mode: the XTS tweak, GCM's hash and E_K(J0) cost no rounds per data block) can at
//! best run at `rate * 16 / rounds` bytes per second on the width its backend uses. A
//! latency-bound case (one CBC chain) shows how far it is from what the units allow.
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
    /// AES with `rounds` rounds per block; `gcm`: GCM's kernels (zmm on the avx512
    /// backend, where the other modes keep ymm); `threads`: the case runs on all its
    /// threads (the limit is one core's times the threads).
    Aes {
        rounds: usize,
        gcm: bool,
        threads: bool,
    },
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

/// The width whose rate bounds AES on the backend named `backend` (GCM's kernels: `gcm`);
/// `None` for the portable backend, which has no AES unit to be bound by.
pub fn aes_width(backend: &str, gcm: bool) -> Option<Width> {
    match backend {
        "aesni" => Some(Width::Xmm),
        "vaes" => Some(Width::Ymm),
        "avx512" if gcm => Some(Width::Zmm),
        "avx512" => Some(Width::Ymm),
        _ => None,
    }
}

/// The fraction of `limit` (bytes per second) that `bytes_per_sec` reaches.
pub fn fraction(bytes_per_sec: f64, limit: Option<f64>) -> Option<f64> {
    limit
        .filter(|l| l.is_finite() && *l > 0.0)
        .map(|l| bytes_per_sec / l)
}

/// The `limit` of a case with bound `bound` that ran at `bytes_per_sec` on `backend`, with
/// `threads` threads.
pub(crate) fn of_case(
    bound: Bound,
    rate: &AesRate,
    backend: &str,
    threads: usize,
    bytes_per_sec: f64,
) -> Option<f64> {
    match bound {
        Bound::None => None,
        Bound::Aes {
            rounds,
            gcm,
            threads: all,
        } => {
            let one = rate.bytes_per_sec(aes_width(backend, gcm)?, rounds)?;
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

    #[test]
    fn the_fraction_of_a_case_is_its_rate_over_the_limit() {
        let r = zen4();
        let bound = |rounds, gcm, threads| Bound::Aes {
            rounds,
            gcm,
            threads,
        };
        // At 4 GHz the AES-256 limit is 18.29 GB/s (0.219 cycles per byte); a case at
        // 0.25 cycles per byte (16 GB/s) reaches 0.875 of it.
        let f = of_case(bound(14, false, false), &r, "avx512", 1, 16e9).unwrap();
        assert!((f - 0.875).abs() < 1e-12, "{f}");
        let f = of_case(bound(14, false, false), &r, "vaes", 1, 16e9).unwrap();
        assert!((f - 0.875).abs() < 1e-12, "{f}");
        // GCM on avx512 is bound by the zmm rate: a slower zmm halves the limit.
        let slow_zmm = AesRate {
            zmm: Some(8e9),
            ..r
        };
        let f = of_case(bound(14, true, false), &slow_zmm, "avx512", 1, 8e9).unwrap();
        assert!((f - 0.875).abs() < 1e-12, "{f}");
        let f = of_case(bound(14, false, false), &slow_zmm, "avx512", 1, 8e9).unwrap();
        assert!((f - 0.4375).abs() < 1e-12, "{f}");
        // AES-128: 10 rounds, 25.6 GB/s; two threads double the limit.
        let f = of_case(bound(10, false, true), &r, "vaes", 2, 25.6e9).unwrap();
        assert!((f - 0.5).abs() < 1e-12, "{f}");
        // No limit: the portable backend, a width the probe lacks, no bound.
        assert_eq!(of_case(bound(14, false, false), &r, "soft", 1, 1e9), None);
        assert_eq!(of_case(bound(14, false, false), &r, "aesni", 1, 1e9), None);
        assert_eq!(of_case(Bound::None, &r, "avx512", 1, 1e9), None);
        assert_eq!(fraction(1e9, Some(0.0)), None);
        assert_eq!(fraction(1e9, Some(4e9)), Some(0.25));
    }
}
