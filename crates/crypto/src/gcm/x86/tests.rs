//! The masked loads and stores of the avx512 backend's GCM (the zmm GHASH's short last
//! group and the stitched kernel's shorter last group) must touch nothing outside the
//! caller's bytes. Each
//! buffer here ends exactly where an inaccessible page begins, so a read or write past the
//! end faults, and the results are compared with the soft backend. (The other behaviour of
//! the backend is covered by the GCM test suite, which runs every backend.)
#![allow(unsafe_code)]

use crate::aes_core::Backend;
use crate::gcm::Gcm;
use crate::ghash::{Ghash, GhashBackend};
use crate::guarded::Guarded;

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (s >> 56) as u8
        })
        .collect()
}

#[test]
fn masked_tails_stay_inside_the_buffers() {
    if let Err(e) = Backend::Avx512.ensure_usable() {
        eprintln!("avx512 guard-page test SKIPPED: {e}");
        return;
    }
    let (mut a, mut b) = (Guarded::new(3), Guarded::new(3));
    // GHASH: every block count up to three groups and a bit, ending at the guard page.
    let h: [u8; 16] = bytes(16, 1).try_into().unwrap();
    let (zmm, soft) = (
        Ghash::with_backend(&h, GhashBackend::Vpclmul512).unwrap(),
        Ghash::with_backend(&h, GhashBackend::Soft).unwrap(),
    );
    for blocks in 0..=100 {
        let data = bytes(16 * blocks, blocks as u64);
        let t = a.tail(data.len());
        t.copy_from_slice(&data);
        assert_eq!(
            zmm.update(&[7; 16], t).unwrap(),
            soft.update(&[7; 16], &data).unwrap(),
            "ghash of {blocks} blocks"
        );
    }
    // GCM one pass: messages (and AAD) ending at the guard page, in place and out of place
    // (source and destination each ending at one).
    let key = bytes(32, 2);
    let (fast, reference) = (
        Gcm::with_backend(&key, Backend::Avx512).unwrap(),
        Gcm::with_backend(&key, Backend::Soft).unwrap(),
    );
    let iv = [9u8; 12];
    let lens = (1..=600)
        .chain((4096..=4096 + 64).step_by(3))
        .chain([8192, 8191]);
    for len in lens {
        let pt = bytes(len, len as u64);
        let aad = bytes(len % 50, 3);
        let mut want = pt.clone();
        let tag = reference.seal(&iv, &aad, &mut want).unwrap();
        let t = a.tail(len);
        t.copy_from_slice(&pt);
        assert_eq!(fast.seal(&iv, &aad, t).unwrap(), tag, "seal {len}");
        assert!(*t == want[..], "seal {len}");
        fast.open(&iv, &aad, t, &tag).unwrap();
        assert!(*t == pt[..], "open {len}");
        a.tail(len).copy_from_slice(&pt);
        let (src, dst) = (a.tail(len), b.tail(len));
        assert_eq!(
            fast.seal_to(&iv, &aad, src, dst).unwrap(),
            tag,
            "seal_to {len}"
        );
        assert!(*dst == want[..], "seal_to {len}");
        let (src, dst) = (b.tail(len), a.tail(len));
        fast.open_to(&iv, &aad, src, dst, &tag).unwrap();
        assert!(*dst == pt[..], "open_to {len}");
    }
}

/// Throwaway throughput figures of one-pass GCM (AES-256, 16 KiB and 512-byte messages,
/// seal and open out of place) on the vaes and avx512 backends: many runs of about a
/// millisecond each, whose median and 90th percentile are the undisturbed rate on a loaded
/// machine (one such run rarely loses its time slice). Release mode only gives meaningful
/// numbers; `SECTORCRYPT_TIMING_BACKEND` names the one backend to time.
#[test]
#[ignore = "timing, not a test: run with --release --ignored --nocapture"]
fn timing() {
    use std::time::Instant;
    let key = bytes(32, 2);
    let iv = [9u8; 12];
    for b in [Backend::Vaes, Backend::Avx512] {
        if std::env::var("SECTORCRYPT_TIMING_BACKEND").is_ok_and(|v| v != b.to_string()) {
            continue;
        }
        if let Err(e) = b.ensure_usable() {
            eprintln!("{b}: SKIPPED ({e})");
            continue;
        }
        let gcm = Gcm::with_backend(&key, b).unwrap();
        for len in [16384, 512] {
            let src = bytes(len, 3);
            let mut dst = vec![0u8; len];
            let tag = gcm.seal_to(&iv, &[], &src, &mut dst).unwrap();
            let ct = dst.clone();
            for open in [false, true] {
                let mut call = || {
                    if open {
                        gcm.open_to(&iv, &[], &ct, &mut dst, &tag).unwrap();
                    } else {
                        gcm.seal_to(&iv, &[], &src, &mut dst).unwrap();
                    }
                };
                for _ in 0..200 {
                    call();
                }
                let iters = (16 << 20) / len;
                let mut runs: Vec<f64> = (0..300)
                    .map(|_| {
                        let start = Instant::now();
                        for _ in 0..iters {
                            call();
                        }
                        (len * iters) as f64 / start.elapsed().as_secs_f64() / 1e9
                    })
                    .collect();
                runs.sort_by(|a, b| a.total_cmp(b));
                let name = format!("gcm-{}/{len}", if open { "dec" } else { "enc" });
                println!(
                    "{b:<7} {name:<16} median {:6.2} GB/s  p90 {:6.2} GB/s",
                    runs[runs.len() / 2],
                    runs[runs.len() * 9 / 10],
                );
            }
        }
    }
}
