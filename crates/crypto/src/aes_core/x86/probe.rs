//! The xmm step of the unit probe (`sectorcrypt bench --probe`, the rest of which is in
//! `gcm/x86/probe.rs`): 8 independent AESENC chains on xmm registers, the rate that bounds
//! the aesni backend's kernels. A leaf file: intrinsics.
#![allow(unsafe_code)]

use super::super::Backend;
use core::arch::x86_64::*;
use std::time::Instant;

/// `steps` steps of 8 AESENC on 8 independent xmm chains, folded into one register so that
/// nothing is optimised away.
#[target_feature(enable = "aes,sse4.1")]
fn chains(steps: u64) -> __m128i {
    let k = _mm_set1_epi32(0x0123_4567);
    let mut a = [_mm_set1_epi32(1); 8];
    for _ in 0..steps {
        for v in a.iter_mut() {
            *v = _mm_aesenc_si128(*v, k);
        }
    }
    a.iter().fold(k, |r, v| _mm_xor_si128(r, *v))
}

/// Seconds per step of 8 AESENC xmm (the best of five timings), named as the probe names
/// its steps; `None` on a CPU without the aesni backend.
pub(crate) fn aesenc_xmm() -> Option<(&'static str, f64)> {
    Backend::Aesni.check_cpu().ok()?;
    const STEPS: u64 = 2_000_000;
    let best = (0..5)
        .map(|_| {
            let t = Instant::now();
            // SAFETY: checked above: the aesni backend's CPU features (AES-NI, SSE4.1),
            // those `chains` is compiled for.
            std::hint::black_box(unsafe { chains(STEPS) });
            t.elapsed().as_secs_f64() / STEPS as f64
        })
        .fold(f64::MAX, f64::min);
    Some(("8 AESENC xmm", best))
}
