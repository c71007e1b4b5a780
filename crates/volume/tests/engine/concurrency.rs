//! Many threads at once: disjoint unaligned writers lose nothing, large aligned writers and
//! readers, overlapping unaligned writers leave one serial order per sector, callers from
//! inside another rayon pool.

use crate::fixture::*;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Splits `[0, size)` into `n` interleaved sets of byte ranges with random boundaries (most
/// of them inside sectors, so neighbouring ranges of different writers share sectors).
fn random_partition(rng: &mut impl Rng, size: u64, pieces: usize) -> Vec<(u64, usize)> {
    let mut cuts: Vec<u64> = (0..pieces - 1).map(|_| rng.gen_range(1..size)).collect();
    cuts.push(0);
    cuts.push(size);
    cuts.sort();
    cuts.dedup();
    cuts.windows(2)
        .map(|w| (w[0], (w[1] - w[0]) as usize))
        .collect()
}

#[test]
fn concurrent_writers_on_disjoint_unaligned_ranges_lose_nothing() {
    // 1 MiB.
    let cfg = Config::xts(512, 2048).at(1024, 5);
    let fx = Fixture::new(cfg, 42);
    let vol = Arc::new(fx.open(engine(3, Some(8192))));
    let mut rng = rand::rngs::StdRng::seed_from_u64(4242);
    let writers = 4;
    let ranges = random_partition(&mut rng, cfg.size(), 600);
    // Writer w owns ranges w, w + writers, ...; each writes its ranges 3 times in a random
    // order with fresh data; the final model holds each range's last data.
    let mut model = fx.plaintext();
    let mut plans = Vec::new();
    for w in 0..writers {
        let mut plan = Vec::new();
        for round in 0..3 {
            let mut mine: Vec<(u64, usize)> =
                ranges.iter().copied().skip(w).step_by(writers).collect();
            for i in (1..mine.len()).rev() {
                mine.swap(i, rng.gen_range(0..=i));
            }
            for (off, len) in mine {
                let data = random_bytes(&mut rng, len);
                if round == 2 {
                    model[off as usize..][..len].copy_from_slice(&data);
                }
                plan.push((round, off, data));
            }
        }
        // Each range's rounds stay in order within one writer.
        plan.sort_by_key(|p| p.0);
        plans.push(plan);
    }
    let handles: Vec<_> = plans
        .into_iter()
        .map(|plan| {
            let vol = Arc::clone(&vol);
            std::thread::spawn(move || {
                for (_, off, data) in plan {
                    vol.write_at(&data, off).unwrap();
                }
            })
        })
        .collect();
    // A reader running alongside must never fail.
    let reader = {
        let vol = Arc::clone(&vol);
        std::thread::spawn(move || {
            let mut buf = vec![0; 100_000];
            for i in 0..50 {
                vol.read_at(&mut buf, (i * 7919) as u64).unwrap();
            }
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    reader.join().unwrap();
    assert!(
        fx.plaintext() == model,
        "byte-exact after concurrent disjoint writes"
    );
    let mut all = vec![0; cfg.size() as usize];
    vol.read_at(&mut all, 0).unwrap();
    assert!(all == model);
}

#[test]
fn concurrent_large_aligned_writers_and_readers() {
    // 4 MiB.
    let cfg = Config {
        large_iv: true,
        data_offset: 4096,
        ..Config::xts(4096, 1024)
    };
    let fx = Fixture::new(cfg, 43);
    let vol = Arc::new(fx.open(engine(2, Some(64 * 1024))));
    let quarter = cfg.size() as usize / 4;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let datas: Vec<Vec<u8>> = (0..4).map(|_| random_bytes(&mut rng, quarter)).collect();
    let handles: Vec<_> = datas
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, d)| {
            let vol = Arc::clone(&vol);
            std::thread::spawn(move || {
                for _ in 0..3 {
                    vol.write_at(&d, (i * quarter) as u64).unwrap();
                    let mut back = vec![0; d.len()];
                    vol.read_at(&mut back, (i * quarter) as u64).unwrap();
                    assert!(back == d, "quarter {i} reads back");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(fx.plaintext() == datas.concat());
}

#[test]
fn overlapping_unaligned_writers_leave_one_serial_order_per_sector() {
    let cfg = Config {
        spec: "aes-cbc-essiv:sha256",
        key_len: 32,
        ..Config::xts(512, 64)
    };
    let fx = Fixture::new(cfg, 44);
    let vol = Arc::new(fx.open(engine(2, None)));
    let original = fx.plaintext();
    // In every sector k, writer A writes [k*512+10, k*512+300) and writer B
    // [k*512+200, k*512+500), each 20 times with its own byte value per round.
    let run = |writer: u8, from: u64, to: u64| {
        let vol = Arc::clone(&vol);
        std::thread::spawn(move || {
            for round in 0..20u8 {
                for k in 0..64u64 {
                    let data =
                        vec![writer.wrapping_mul(50).wrapping_add(round); (to - from) as usize];
                    vol.write_at(&data, k * 512 + from).unwrap();
                }
            }
        })
    };
    let a = run(1, 10, 300);
    let b = run(2, 200, 500);
    a.join().unwrap();
    b.join().unwrap();
    let last_a = 50 + 19;
    let last_b = 100 + 19;
    let got = fx.plaintext();
    for k in 0..64usize {
        let s = &got[k * 512..][..512];
        let o = &original[k * 512..][..512];
        assert_eq!(s[..10], o[..10], "sector {k} head untouched");
        assert_eq!(s[500..], o[500..], "sector {k} tail untouched");
        assert!(
            s[10..200].iter().all(|&x| x == last_a),
            "sector {k}: A's own bytes"
        );
        assert!(
            s[300..500].iter().all(|&x| x == last_b),
            "sector {k}: B's own bytes"
        );
        let overlap = &s[200..300];
        assert!(
            overlap.iter().all(|&x| x == last_a) || overlap.iter().all(|&x| x == last_b),
            "sector {k}: the overlap is one writer's, whole"
        );
    }
}

#[test]
fn callers_inside_another_rayon_pool_are_served() {
    // An NBD server might serve requests from rayon's global pool: the engine's scope then
    // waits from a worker of another pool. Every request must complete, byte-exact.
    let cfg = Config::xts(512, 8192); // 4 MiB
    let fx = Fixture::new(cfg, 70);
    let vol = fx.open(engine(2, Some(32 * 1024)));
    let model = fx.plaintext();
    let outer = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    outer.install(|| {
        use rayon::prelude::*;
        (0..64u64).into_par_iter().for_each(|i| {
            let off = (i * 61_000) % (cfg.size() - 300_000);
            let mut buf = vec![0; 300_000];
            vol.read_at(&mut buf, off).unwrap();
            assert!(buf == model[off as usize..][..300_000], "request {i}");
            vol.write_at(&buf, off).unwrap();
        });
    });
    assert!(fx.plaintext() == model);
}
