//! A timing test of constant time for `scripts/gost-ct-timing.sh`, for the backends
//! valgrind cannot run (`avx512`): fixed-versus-random classes in the manner of dudect.
//! Class 0 always encrypts the same data (zeros) under the same key and IV (zeros); class 1
//! random data under random keys and IVs. Both classes do the same work around a sample:
//! each picks one of 64 prepared keys and one of 64 prepared buffers (class 0's are 64
//! copies of its fixed ones, so the memory traffic is the same) and copies the buffer into
//! the one encrypted. The classes alternate in a random order, each sample is the time of
//! one call (GOST 28147-89 CNT with key meshing, ECB, CBC
//! decryption, Magma CTR, each on 4 KiB), and Welch's t statistic compares the classes
//! after the slowest 10% of each are dropped (interrupts, the other helpers' work). A
//! secret-dependent branch, loop count or memory address shows as a large |t| once enough
//! samples are taken; dudect calls |t| > 10 a leak.
//!
//! A positive control runs first: ECB after a few nanoseconds of extra work when the first
//! plaintext byte is zero (a secret-dependent branch); it must show |t| > 10, or the
//! measurement is too noisy to say anything and the run fails.
//!
//! Usage: `gost_ct_timing BACKEND [SAMPLES]` (default 20000 per class). Prints one line per
//! mode with its t; exits 1 when any mode's |t| exceeds 10 or the control's does not.
#![forbid(unsafe_code)]

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::{gost89, magma, Error, GostBackend};
use std::time::Instant;

const LEN: usize = 4096;

/// The name of the positive control.
const CONTROL: &str = "control (leaks on purpose)";

/// One mode under test: runs once on (key index, data), key index 0 being class 0's key.
type Run = Box<dyn FnMut(usize, &mut [u8])>;

/// One mode object per key.
fn per_key<T>(keys: &[[u8; 32]], make: impl Fn(&[u8]) -> Result<T, Error>) -> Vec<T> {
    keys.iter().map(|k| make(k).expect("a key")).collect()
}

fn modes(b: GostBackend, keys: &[[u8; 32]], ivs: &[[u8; 8]]) -> Vec<(&'static str, Run)> {
    let s = Sbox::CryptoProA;
    let cnt = per_key(keys, |k| gost89::Cnt::with_backend(k, s, true, b));
    let ecb = per_key(keys, |k| gost89::Ecb::with_backend(k, s, false, b));
    let cbc = per_key(keys, |k| gost89::Cbc::with_backend(k, s, true, b));
    let ctr = per_key(keys, |k| magma::Ctr::with_backend(k, b));
    let (i1, i2, i3) = (ivs.to_vec(), ivs.to_vec(), ivs.to_vec());
    let control = gost89::Ecb::with_backend(&keys[0], s, false, b).expect("ecb");
    vec![
        (
            CONTROL,
            Box::new(move |_, d: &mut [u8]| {
                if d[0] == 0 {
                    for i in 0..40u32 {
                        std::hint::black_box(i);
                    }
                }
                control.encrypt(d).expect("ecb");
            }),
        ),
        (
            "gost89-cnt",
            Box::new(move |k, d: &mut [u8]| cnt[k].encrypt(&i1[k], d).expect("cnt")),
        ),
        (
            "gost89-ecb",
            Box::new(move |k, d: &mut [u8]| ecb[k].encrypt(d).expect("ecb")),
        ),
        (
            "gost89-cbc-dec",
            Box::new(move |k, d: &mut [u8]| cbc[k].decrypt(&i2[k], d).expect("cbc")),
        ),
        (
            "magma-ctr",
            Box::new(move |k, d: &mut [u8]| {
                let iv: [u8; 4] = i3[k][..4].try_into().expect("4 bytes");
                ctr[k].encrypt(&iv, d).expect("ctr")
            }),
        ),
    ]
}

/// Mean and variance of the fastest 90%.
fn cropped(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    v.truncate(v.len() * 9 / 10);
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var, n)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: gost_ct_timing BACKEND [SAMPLES]";
    let backend = GostBackend::from_name(&args.next().expect(usage)).expect(usage);
    if let Err(e) = backend.ensure_usable() {
        eprintln!("skipped {backend}: {e}");
        return;
    }
    let samples: usize = args.next().map_or(20000, |s| s.parse().expect(usage));
    let mut rng = StdRng::seed_from_u64(0x5eed);
    // Keys, IVs and buffers 0..64 are class 0's (zeros), 64..128 class 1's (random).
    let mut keys = vec![[0u8; 32]; 128];
    let mut ivs = vec![[0u8; 8]; 128];
    let mut bufs = vec![vec![0u8; LEN]; 128];
    for i in 64..128 {
        rng.fill_bytes(&mut keys[i]);
        rng.fill_bytes(&mut ivs[i]);
        rng.fill_bytes(&mut bufs[i]);
    }
    let mut leak = false;
    for (name, mut run) in modes(backend, &keys, &ivs) {
        let mut times = [Vec::with_capacity(samples), Vec::with_capacity(samples)];
        let mut data = vec![0u8; LEN];
        for _ in 0..samples * 2 {
            let class = rng.gen_range(0..2usize);
            if times[class].len() == samples {
                continue;
            }
            let k = 64 * class + rng.gen_range(0..64usize);
            data.copy_from_slice(&bufs[64 * class + rng.gen_range(0..64usize)]);
            let t = Instant::now();
            run(k, &mut data);
            times[class].push(t.elapsed().as_nanos() as f64);
        }
        let [a, b] = times;
        let ((ma, va, na), (mb, vb, nb)) = (cropped(a), cropped(b));
        let t = (ma - mb) / (va / na + vb / nb).sqrt();
        println!("{backend} {name}: t = {t:.2} (fixed {ma:.0} ns, random {mb:.0} ns)");
        if name == CONTROL {
            if t.abs() <= 10.0 {
                eprintln!("{backend}: the control's leak was not seen: too noisy to tell");
                std::process::exit(1);
            }
        } else {
            leak |= t.abs() > 10.0;
        }
    }
    if leak {
        eprintln!("{backend}: |t| > 10: the time depends on the secrets");
        std::process::exit(1);
    }
}
