//! The probe of how the AES and carry-less multiply units share the core, which the
//! stitched GCM kernels are designed around (`sectorcrypt bench --probe` prints it with its
//! own clock; docs/PERFORMANCE.md reads the table): loops of independent instructions,
//! timed. If two kinds of instruction issue on separate pipes, a loop of both costs the
//! slower of the two; if they compete for the same pipes, the sum.
//! - ymm (CPUs with the vaes backend): 8 VAESENC per step, 4 VPCLMULQDQ, and both;
//! - zmm (CPUs with the avx512 backend): 8 VAESENC zmm per step alone, 4 VPCLMULQDQ zmm
//!   alone, and 8 VAESENC beside 4 VPCLMULQDQ, 8 VPXORQ or 8 VPSHUFB.
#![allow(unsafe_code)]

use crate::aes_core::Backend;
use core::arch::x86_64::*;
use std::time::Instant;

/// Independent chains per kind of instruction: AES latency (4 to 5) x issue rate, which
/// with the multiply chains and the key leaves registers to spare (nothing spills).
const CHAINS: usize = 8;
/// Independent multiply chains.
const CLMUL_CHAINS: usize = 4;

/// What a step runs: 8 VAESENC unless `ClmulOnly`, and beside them the mix.
#[derive(Clone, Copy)]
enum Mix {
    AesOnly,
    ClmulOnly,
    Clmul,
    Xor,
    Shuffle,
}

/// Steps of the mix on ymm (`Xor` and `Shuffle` are probed on zmm only).
#[target_feature(enable = "avx2,vaes,vpclmulqdq")]
fn run_ymm(mix: Mix, steps: u64) -> __m256i {
    let k = _mm256_set1_epi32(0x0123_4567);
    let mut a = [_mm256_set1_epi32(1); CHAINS];
    let mut c = [_mm256_set1_epi32(3); CLMUL_CHAINS];
    for _ in 0..steps {
        if !matches!(mix, Mix::ClmulOnly) {
            for v in a.iter_mut() {
                *v = _mm256_aesenc_epi128(*v, k);
            }
        }
        if matches!(mix, Mix::Clmul | Mix::ClmulOnly) {
            for v in c.iter_mut() {
                *v = _mm256_clmulepi64_epi128::<0x01>(*v, k);
            }
        }
    }
    a.iter()
        .chain(c.iter())
        .fold(k, |r, v| _mm256_xor_si256(r, *v))
}

/// Steps of the mix on zmm.
#[target_feature(enable = "avx512f,avx512bw,vaes,vpclmulqdq")]
fn run_zmm(mix: Mix, steps: u64) -> __m512i {
    let k = _mm512_set1_epi32(0x0123_4567);
    let mut a = [_mm512_set1_epi32(1); CHAINS];
    let mut c = [_mm512_set1_epi32(3); CHAINS];
    for _ in 0..steps {
        if !matches!(mix, Mix::ClmulOnly) {
            for v in a.iter_mut() {
                *v = _mm512_aesenc_epi128(*v, k);
            }
        }
        match mix {
            Mix::AesOnly => {}
            Mix::Clmul | Mix::ClmulOnly => {
                for v in c.iter_mut().take(CLMUL_CHAINS) {
                    *v = _mm512_clmulepi64_epi128::<0x01>(*v, k);
                }
            }
            Mix::Xor => {
                for v in c.iter_mut() {
                    *v = _mm512_xor_si512(*v, k);
                }
            }
            Mix::Shuffle => {
                for v in c.iter_mut() {
                    *v = _mm512_shuffle_epi8(*v, k);
                }
            }
        }
    }
    a.iter()
        .chain(c.iter())
        .fold(k, |r, v| _mm512_xor_si512(r, *v))
}

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
    out
}
