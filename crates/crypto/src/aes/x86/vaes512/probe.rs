//! The zmm half of `sectorcrypt bench --probe`: loops of independent zmm instructions,
//! timed, that show what the AVX-512 GCM kernel's design rests on (on Zen 4, which splits
//! a 512-bit operation in two): a VAESENC zmm per cycle (the same bytes per cycle as two
//! ymm), a VPCLMULQDQ zmm per 2 cycles (twice the ymm rate per byte), and how much of the
//! AES rate a multiply, an XOR or a byte shuffle beside the rounds costs.
#![allow(unsafe_code)]

use core::arch::x86_64::*;
use std::time::Instant;

/// Independent chains per kind: 8 AES (latency ~5 x one per cycle), 4 multiplies, 8 others.
const CHAINS: usize = 8;

/// What a loop step runs beside (or instead of) 8 VAESENC.
#[derive(Clone, Copy)]
enum Mix {
    AesOnly,
    ClmulOnly,
    Clmul,
    Xor,
    Shuffle,
}

/// Steps of 8 VAESENC zmm (unless `ClmulOnly`) and the `mix` instructions.
#[target_feature(enable = "avx512f,avx512bw,vaes,vpclmulqdq")]
fn run(mix: Mix, steps: u64) -> __m512i {
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
                for v in c.iter_mut().take(4) {
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
    let mut r = k;
    for v in a.iter().chain(c.iter()) {
        r = _mm512_xor_si512(r, *v);
    }
    r
}

/// Seconds per step of each mix (best of five), with its name. Panics on a CPU without the
/// avx512 backend's features.
pub(crate) fn probe(steps: u64) -> Vec<(&'static str, f64)> {
    assert!(
        crate::Backend::Avx512.check_cpu().is_ok(),
        "probe needs avx512"
    );
    let mixes = [
        ("8 VAESENC zmm", Mix::AesOnly),
        ("4 VPCLMULQDQ zmm", Mix::ClmulOnly),
        ("8 VAESENC + 4 VPCLMULQDQ zmm", Mix::Clmul),
        ("8 VAESENC + 8 VPXORQ zmm", Mix::Xor),
        ("8 VAESENC + 8 VPSHUFB zmm", Mix::Shuffle),
    ];
    mixes
        .iter()
        .map(|&(name, mix)| {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                // SAFETY: checked above: the avx512 backend's CPU features (avx512f/bw,
                // vaes, vpclmulqdq with the OS saving zmm state), those `run` is built for.
                std::hint::black_box(unsafe { run(mix, steps) });
                best = best.min(t.elapsed().as_secs_f64() / steps as f64);
            }
            (name, best)
        })
        .collect()
}
