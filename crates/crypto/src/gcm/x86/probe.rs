//! The probe of how the AES and carry-less multiply units share the core, which the
//! stitched GCM kernels are designed around (`sectorcrypt bench --probe` prints it with its
//! own clock; docs/PERFORMANCE.md reads the table): loops of independent instructions,
//! timed. If two kinds of instruction issue on separate pipes, a loop of both costs the
//! slower of the two; if they compete for the same pipes, the sum.
//! - ymm (CPUs with the vaes backend): 8 VAESENC per step, 4 VPCLMULQDQ, and both; and
//!   16 VAESENC beside 4 VPCLMULQDQ, where the AES half alone fills the step: 8 cycles if
//!   the multiplies run on a pipe of their own, 12 if they take AES pipe time;
//! - zmm (CPUs with the avx512 backend): 8 VAESENC zmm per step alone, 4 VPCLMULQDQ zmm
//!   alone, and 8 VAESENC beside 4 VPCLMULQDQ, 8 VPXORQ or 8 VPSHUFB; then 12 VPCLMULQDQ
//!   zmm on 12 chains, alone and beside 8 VAESENC (four multiply chains are bound by the
//!   multiply's latency, about 5 cycles, whenever more than one can start per 1.25
//!   cycles, so only 12 chains measure the multiplier's throughput), and 32 VAESENC (four
//!   rounds on each of 8 chains) beside 4 VPCLMULQDQ, where the AES part alone takes as
//!   long as the multiplies: 16 cycles if the multiplies issue beside the AES pipes, 20 if
//!   each holds one of the two AES pipes for its 2 cycles. Those rows are lopsided (one
//!   kind of instruction alone fills the step), so they show whether the other kind costs
//!   extra, not whether both units can be full at once. The last two are the balanced
//!   mix a stitched GCM step is: 48 VAESENC (six rounds on 8 chains, 24 cycles at two per
//!   cycle, six times the "8 VAESENC zmm" row) beside 12 VPCLMULQDQ (24 cycles at one per
//!   two), 24 cycles if the two units run side by side and up to 48 if they take turns;
//!   and 56 VAESENC beside 12 VPCLMULQDQ, half of what the zmm GCM kernel's step does per
//!   512 bytes of AES-256 (112 VAESENC, 24 VPCLMULQDQ and a reduction per two steps).
#![allow(unsafe_code)]

use crate::aes_core::Backend;
use core::arch::x86_64::*;
use std::time::Instant;

/// Independent chains per kind of instruction: AES latency (4 to 5) x issue rate, which
/// with the multiply chains and the key leaves registers to spare (nothing spills).
const CHAINS: usize = 8;
/// Independent multiply chains.
const CLMUL_CHAINS: usize = 4;

/// What a step runs: 8 VAESENC unless `ClmulOnly` (16 with `Clmul16`), and beside them
/// the mix.
#[derive(Clone, Copy)]
enum Mix {
    AesOnly,
    ClmulOnly,
    Clmul,
    Clmul16,
    Xor,
    Shuffle,
}

/// Defines `$name(mix, steps)`, the loop of one register width: `steps` steps of the mix on
/// `CHAINS` AES chains and `CHAINS` other chains (`CLMUL_CHAINS` of them for multiplies),
/// then everything folded into one register so that nothing is optimised away.
macro_rules! probe_loop {
    (
        $name:ident: $reg:ty, $features:literal,
        $set1:path, $aesenc:path, $clmul:path, $xor:path, $shuffle:path
    ) => {
        #[target_feature(enable = $features)]
        fn $name(mix: Mix, steps: u64) -> $reg {
            let k = $set1(0x0123_4567);
            let mut a = [$set1(1); CHAINS];
            let mut c = [$set1(3); CHAINS];
            for _ in 0..steps {
                if !matches!(mix, Mix::ClmulOnly) {
                    for v in a.iter_mut() {
                        *v = $aesenc(*v, k);
                    }
                }
                if matches!(mix, Mix::Clmul16) {
                    for v in a.iter_mut() {
                        *v = $aesenc(*v, k);
                    }
                }
                for v in c.iter_mut().take(match mix {
                    Mix::AesOnly => 0,
                    Mix::Clmul | Mix::Clmul16 | Mix::ClmulOnly => CLMUL_CHAINS,
                    Mix::Xor | Mix::Shuffle => CHAINS,
                }) {
                    *v = match mix {
                        Mix::Xor => $xor(*v, k),
                        Mix::Shuffle => $shuffle(*v, k),
                        _ => $clmul(*v, k),
                    };
                }
            }
            a.iter().chain(c.iter()).fold(k, |r, v| $xor(r, *v))
        }
    };
}

probe_loop!(
    run_ymm: __m256i, "avx2,vaes,vpclmulqdq",
    _mm256_set1_epi32, _mm256_aesenc_epi128, _mm256_clmulepi64_epi128::<0x01>,
    _mm256_xor_si256, _mm256_shuffle_epi8
);
probe_loop!(
    run_zmm: __m512i, "avx512f,avx512bw,vaes,vpclmulqdq",
    _mm512_set1_epi32, _mm512_aesenc_epi128, _mm512_clmulepi64_epi128::<0x01>,
    _mm512_xor_si512, _mm512_shuffle_epi8
);

/// Independent multiply chains of the throughput rows: more than latency x issue rate for
/// any rate up to two per cycle (latency about 5), with 8 AES chains and the key still in
/// 32 registers.
const CLMUL_WIDE: usize = 12;

/// `steps` steps of `ROUNDS` VAESENC zmm on each of 8 chains and one VPCLMULQDQ zmm on each
/// of `CLMULS` (at most [`CLMUL_WIDE`]) chains; everything folded into one register at the
/// end. Constant counts, so that the loops unroll and the chains stay in registers.
#[target_feature(enable = "avx512f,avx512bw,vaes,vpclmulqdq")]
fn run_wide<const ROUNDS: usize, const CLMULS: usize>(steps: u64) -> __m512i {
    let k = _mm512_set1_epi32(0x0123_4567);
    // Distinct starting values: no two chains cancel in the fold.
    let mut a: [__m512i; CHAINS] = core::array::from_fn(|i| _mm512_set1_epi32(1 + i as i32));
    let mut c: [__m512i; CLMUL_WIDE] = core::array::from_fn(|i| _mm512_set1_epi32(20 + i as i32));
    for _ in 0..steps {
        for _ in 0..ROUNDS {
            for v in a.iter_mut() {
                *v = _mm512_aesenc_epi128(*v, k);
            }
        }
        for v in c.iter_mut().take(CLMULS) {
            *v = _mm512_clmulepi64_epi128::<0x01>(*v, k);
        }
    }
    a.iter()
        .chain(c.iter())
        .fold(k, |r, v| _mm512_xor_si512(r, *v))
}

/// A [`run_wide`] instance: `steps` in, the folded register out.
type WideRun = fn(u64) -> __m512i;

/// The best of five timings of `run(steps)`, in seconds per step.
fn best_of_five(steps: u64, run: impl Fn(u64)) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            run(steps);
            t.elapsed().as_secs_f64() / steps as f64
        })
        .fold(f64::MAX, f64::min)
}

/// Seconds per loop step of each mix this CPU can run (ymm where the vaes backend can run,
/// zmm where the avx512 backend can), with its name.
pub(crate) fn probe() -> Vec<(&'static str, f64)> {
    let (ymm, zmm) = (
        Backend::Vaes.check_cpu().is_ok(),
        Backend::Avx512.check_cpu().is_ok(),
    );
    let mixes = [
        ("8 VAESENC ymm", false, Mix::AesOnly),
        ("4 VPCLMULQDQ ymm", false, Mix::ClmulOnly),
        ("8 VAESENC + 4 VPCLMULQDQ ymm", false, Mix::Clmul),
        ("16 VAESENC + 4 VPCLMULQDQ ymm", false, Mix::Clmul16),
        ("8 VAESENC zmm", true, Mix::AesOnly),
        ("4 VPCLMULQDQ zmm", true, Mix::ClmulOnly),
        ("8 VAESENC + 4 VPCLMULQDQ zmm", true, Mix::Clmul),
        ("8 VAESENC + 8 VPXORQ zmm", true, Mix::Xor),
        ("8 VAESENC + 8 VPSHUFB zmm", true, Mix::Shuffle),
    ];
    let mut out = Vec::new();
    for (name, wide, mix) in mixes {
        let seconds = match (wide, ymm, zmm) {
            (false, true, _) => best_of_five(2_000_000, |steps| {
                // SAFETY: checked above: the vaes backend's CPU features (vaes, vpclmulqdq,
                // avx2 with the OS saving ymm state), those `run_ymm` is compiled for.
                std::hint::black_box(unsafe { run_ymm(mix, steps) });
            }),
            (true, _, true) => best_of_five(1_000_000, |steps| {
                // SAFETY: checked above: the avx512 backend's CPU features (avx512f/bw, vaes,
                // vpclmulqdq with the OS saving zmm state), those `run_zmm` is compiled for.
                std::hint::black_box(unsafe { run_zmm(mix, steps) });
            }),
            _ => continue,
        };
        out.push((name, seconds));
    }
    if zmm {
        // Each `unsafe` below: checked above, the avx512 backend's CPU features (avx512f/bw,
        // vaes, vpclmulqdq with the OS saving zmm state), those `run_wide` is compiled for.
        let wide: [(&str, WideRun); 5] = [
            // SAFETY: see above.
            ("12 VPCLMULQDQ zmm", |n| unsafe { run_wide::<0, 12>(n) }),
            // SAFETY: see above.
            ("8 VAESENC + 12 VPCLMULQDQ zmm", |n| unsafe {
                run_wide::<1, 12>(n)
            }),
            // SAFETY: see above.
            ("32 VAESENC + 4 VPCLMULQDQ zmm", |n| unsafe {
                run_wide::<4, 4>(n)
            }),
            // SAFETY: see above.
            ("48 VAESENC + 12 VPCLMULQDQ zmm", |n| unsafe {
                run_wide::<6, 12>(n)
            }),
            // SAFETY: see above.
            ("56 VAESENC + 12 VPCLMULQDQ zmm", |n| unsafe {
                run_wide::<7, 12>(n)
            }),
        ];
        for (name, run) in wide {
            let seconds = best_of_five(1_000_000, |steps| {
                std::hint::black_box(run(steps));
            });
            out.push((name, seconds));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ROUNDS` rounds per step on the AES chains and one multiply per step on `CLMULS`
    /// chains, as the row names say: lane 0 of the folded result against the same work on
    /// xmm (every lane of every chain starts equal, so all four lanes compute the same).
    fn wide_matches_xmm<const ROUNDS: usize, const CLMULS: usize>(steps: u64) {
        if Backend::Avx512.check_cpu().is_err() {
            eprintln!("avx512 probe test SKIPPED: no avx512 backend");
            return;
        }
        // SAFETY: checked above: the features of `run_wide` (which cover the xmm AES and
        // carry-less multiply used for the reference).
        unsafe {
            let got = _mm512_castsi512_si128(run_wide::<ROUNDS, CLMULS>(steps));
            let k = _mm_set1_epi32(0x0123_4567);
            let mut want = k;
            for i in 0..CHAINS {
                let mut a = _mm_set1_epi32(1 + i as i32);
                for _ in 0..steps * ROUNDS as u64 {
                    a = _mm_aesenc_si128(a, k);
                }
                want = _mm_xor_si128(want, a);
            }
            for i in 0..CLMUL_WIDE {
                let mut c = _mm_set1_epi32(20 + i as i32);
                for _ in 0..if i < CLMULS { steps } else { 0 } {
                    c = _mm_clmulepi64_si128::<0x01>(c, k);
                }
                want = _mm_xor_si128(want, c);
            }
            assert_eq!(
                core::mem::transmute::<__m128i, u128>(got),
                core::mem::transmute::<__m128i, u128>(want),
                "{ROUNDS} rounds, {CLMULS} multiplies, {steps} steps"
            );
        }
    }

    #[test]
    fn wide_rows_run_the_work_they_name() {
        wide_matches_xmm::<0, 12>(5);
        wide_matches_xmm::<1, 12>(5);
        wide_matches_xmm::<4, 4>(5);
        wide_matches_xmm::<6, 12>(5);
        wide_matches_xmm::<7, 12>(5);
    }
}
