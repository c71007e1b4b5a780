//! The ymm half of the probe of how the AES and carry-less multiply units share the core:
//! three loops of independent instructions (8 VAESENC ymm per step, 4 VPCLMULQDQ ymm per
//! step, and both), each timed, so that `sectorcrypt bench --probe` can report cycles per
//! step with its own clock (the zmm half is `aes/x86/vaes512/probe.rs`). It explains the GCM ceiling in docs/PERFORMANCE.md: if the units were separate,
//! the mixed loop would cost the slower of the two; if the multiplies hold the AES pipes,
//! the sum.
#![allow(unsafe_code)]

use core::arch::x86_64::*;
use std::time::Instant;

/// Independent AES chains per loop: latency (4) x issue rate (2 per cycle); with the four
/// multiply chains and the key, 13 of the 16 ymm registers, so nothing spills.
const AES_CHAINS: usize = 8;
const CLMUL_CHAINS: usize = 4;

/// One loop step: `AES` VAESENC on `AES_CHAINS` chains (if `AES`), and one VPCLMULQDQ on
/// each of `CLMUL_CHAINS` chains (if `CLMUL`).
#[target_feature(enable = "avx2,vaes,vpclmulqdq")]
fn run<const AES: bool, const CLMUL: bool>(steps: u64) -> __m256i {
    let k = _mm256_set1_epi32(0x0123_4567);
    let mut a = [_mm256_set1_epi32(1); AES_CHAINS];
    let mut c = [_mm256_set1_epi32(3); CLMUL_CHAINS];
    for _ in 0..steps {
        if AES {
            for v in a.iter_mut() {
                *v = _mm256_aesenc_epi128(*v, k);
            }
        }
        if CLMUL {
            for v in c.iter_mut() {
                *v = _mm256_clmulepi64_epi128::<0x01>(*v, k);
            }
        }
    }
    let mut r = k;
    for v in a.iter().chain(c.iter()) {
        r = _mm256_xor_si256(r, *v);
    }
    r
}

/// Seconds per loop step for [8 VAESENC, 4 VPCLMULQDQ, both], each the best of five
/// timings. Panics on a CPU without the vaes backend's features.
pub(crate) fn probe(steps: u64) -> [f64; 3] {
    assert!(crate::Backend::Vaes.check_cpu().is_ok(), "probe needs vaes");
    let mut out = [f64::MAX; 3];
    for _ in 0..5 {
        for (kind, best) in out.iter_mut().enumerate() {
            let t = Instant::now();
            // SAFETY: checked above: the vaes backend's CPU features (vaes, vpclmulqdq,
            // avx2 with the OS saving ymm state), the features `run` is compiled for.
            let r = unsafe {
                match kind {
                    0 => run::<true, false>(steps),
                    1 => run::<false, true>(steps),
                    _ => run::<true, true>(steps),
                }
            };
            std::hint::black_box(r);
            *best = best.min(t.elapsed().as_secs_f64() / steps as f64);
        }
    }
    out
}
