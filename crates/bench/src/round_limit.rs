//! The GOST cases' limit: the cycles per byte that the measured cost of one cipher round
//! allows (`round_limit_cpb` in the JSON report). The probe is the crypto crate's
//! [`GostBackend::round_seconds`]: the rounds alone of the kernel, in registers, on as many
//! blocks as it keeps in flight, measured in this process.

use sectorcrypt_crypto::GostBackend;

/// Rounds per 8-byte block of a GOST case and whether it runs on the kernel of its
/// backend (`false`: a chain of one block after another, on the portable code); `None`
/// for a case that is not a GOST one.
fn shape(case: &str) -> Option<(f64, bool)> {
    let mode = case.split('/').next()?;
    match mode {
        "gost89-ecb" | "gost89-cnt" | "magma-ctr" => Some((32.0, true)),
        // CFB encryption is sequential.
        "gost89-cfb" => Some((32.0, false)),
        // The MAC's transform has 16 rounds and is sequential.
        "gost89-mac" => Some((16.0, false)),
        _ => None,
    }
}

/// The limit of `case` in cycles per byte, from the seconds per round per block of the
/// backend's kernel (`kernel`) and of the portable chain (`chain`) at `ghz`.
pub(crate) fn limit_cpb(case: &str, kernel: f64, chain: f64, ghz: f64) -> Option<f64> {
    let (rounds, parallel) = shape(case)?;
    let secs = if parallel { kernel } else { chain };
    Some(rounds * secs * ghz * 1e9 / 8.0)
}

/// The limit of `case` on the GOST backend called `backend`, measured now (a few
/// milliseconds); `None` for other cases or an unknown or unusable backend.
pub(crate) fn measure(case: &str, backend: &str, ghz: f64) -> Option<f64> {
    shape(case)?;
    let kernel = GostBackend::from_name(backend).ok()?.round_seconds()?;
    let chain = GostBackend::Soft.round_seconds()?;
    limit_cpb(case, kernel, chain, ghz)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known probe figures: 0.25 ns per round per block on the kernel and 2 ns on the
    /// chain, at 4 GHz, are 1 and 8 cycles per round: 32 rounds / 8 bytes = 4 c/B per
    /// cycle of round cost, 2 for the 16-round MAC.
    #[test]
    fn limit_from_known_probe_figures() {
        let (k, c, ghz) = (0.25e-9, 2e-9, 4.0);
        let close = |x: Option<f64>, want: f64| (x.unwrap() - want).abs() < 1e-9;
        assert!(close(limit_cpb("gost89-ecb/16384", k, c, ghz), 4.0));
        assert!(close(limit_cpb("gost89-cnt/16384", k, c, ghz), 4.0));
        assert!(close(limit_cpb("magma-ctr/16384", k, c, ghz), 4.0));
        assert!(close(limit_cpb("gost89-cfb/16384", k, c, ghz), 32.0));
        assert!(close(limit_cpb("gost89-mac/16384", k, c, ghz), 16.0));
        assert_eq!(limit_cpb("aes-256-ctr/16384", k, c, ghz), None);
    }

    /// The measured limit is positive and finite on every usable backend, and absent for
    /// an AES case or a name that is no GOST backend.
    #[test]
    fn measured_limit_is_plausible() {
        for b in GostBackend::usable() {
            let x = measure("gost89-ecb/16384", b.name(), 4.0).unwrap();
            assert!(x.is_finite() && x > 0.0 && x < 1000.0, "{b}: {x}");
        }
        assert_eq!(measure("aes-256-ecb/16384", "soft", 4.0), None);
        assert_eq!(measure("gost89-ecb/16384", "vaes", 4.0), None);
    }
}
