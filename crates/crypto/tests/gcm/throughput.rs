//! Throwaway timing (not a benchmark harness): `cargo test --release --test gcm -- --ignored
//! --nocapture throughput`. `sectorcrypt bench` is the place for real numbers.

use crate::backends;
use sectorcrypt_crypto::{Backend, Gcm, Ghash};
use std::time::Instant;

fn rate(bytes: usize, iters: usize, f: &mut dyn FnMut()) -> f64 {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    (bytes * iters) as f64 / best / 1e9
}

#[test]
#[ignore = "timing only; run with --release --ignored --nocapture"]
fn throughput() {
    let key = [7u8; 16];
    let iv = [9u8; 12];
    for backend in backends() {
        let iters_scale = if backend == Backend::Soft { 20 } else { 1 };
        let gcm = Gcm::with_backend(&key, backend).unwrap();
        for size in [16384usize, 512] {
            let iters = (200_000_000 / size) / iters_scale / 4;
            let mut buf = vec![0x11u8; size];
            let mut tag = [0u8; 16];
            let seal = rate(size, iters, &mut || {
                tag = gcm.seal(&iv, b"", &mut buf).unwrap()
            });
            let open = rate(size, iters, &mut || {
                let _ = gcm.open(&iv, b"", &mut buf, &tag);
            });
            let g = Ghash::with_backend(&[5; 16], backend).unwrap();
            let ghash = rate(size, iters, &mut || {
                std::hint::black_box(g.update(&[0; 16], &buf).unwrap());
            });
            let mut ctr_buf = vec![0u8; size];
            let ecb = sectorcrypt_crypto::Ctr::with_backend(&key, backend).unwrap();
            let ctr = rate(size, iters, &mut || {
                ecb.apply_keystream(&[0; 16], 0, &mut ctr_buf)
            });
            println!(
                "{backend:>5} {size:>6} B: seal {seal:6.3} GB/s, open {open:6.3} GB/s \
                 (ghash alone {ghash:6.3} GB/s, aes-ctr alone {ctr:6.3} GB/s)"
            );
        }
    }
}

#[test]
#[ignore = "timing only; run with --release --ignored --nocapture"]
fn ghash_throughput() {
    for backend in backends() {
        let g = Ghash::with_backend(&[5; 16], backend).unwrap();
        for size in [16384usize, 4096, 512] {
            let iters = if backend == Backend::Soft {
                2_000_000
            } else {
                100_000_000
            } / size;
            let buf = vec![0x11u8; size];
            let r = rate(size, iters, &mut || {
                std::hint::black_box(g.update(&[0; 16], std::hint::black_box(&buf)).unwrap());
            });
            println!("ghash {backend:>5} {size:>6} B: {r:6.3} GB/s");
        }
    }
}
