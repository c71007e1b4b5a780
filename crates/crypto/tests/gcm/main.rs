//! AES-GCM and GHASH tests: published vectors (Wycheproof, McGrew-Viega via Gladman's
//! gcm.1, OpenSSL's evp test data), differential tests against OpenSSL and between GHASH
//! backends, streaming, the short-tag API, and wiping on failure. Every AES backend the CPU
//! can run is tested with its own GHASH, and once with every other GHASH backend; a backend
//! that cannot run is skipped with a printed reason (soft always runs).

mod api;
mod differential;
mod onepass;
mod vectors;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sectorcrypt_crypto::hazmat::GhashBackend;
use sectorcrypt_crypto::Backend;
use std::path::PathBuf;
use std::sync::Once;

/// The AES vectors folder (`sectorcrypt_testkit::vectors`).
pub fn vectors_dir() -> PathBuf {
    sectorcrypt_testkit::vectors("aes").join("aes")
}

/// The backends this CPU can run, soft first; the others are reported and skipped.
pub fn backends() -> Vec<Backend> {
    let table = Backend::ALL
        .into_iter()
        .rev()
        .map(|b| (b, b.ensure_usable().map_err(|e| e.to_string())))
        .collect();
    sectorcrypt_testkit::usable("gcm", Backend::Soft, table)
}

/// The GHASH backends this CPU can run, soft first; the first call prints which are tested
/// and why any is skipped (soft must be usable).
pub fn ghash_backends() -> Vec<GhashBackend> {
    static REPORT: Once = Once::new();
    let table: Vec<_> = GhashBackend::ALL
        .into_iter()
        .rev()
        .map(|b| (b, b.ensure_usable().map_err(|e| e.to_string())))
        .collect();
    REPORT.call_once(|| {
        for (b, r) in &table {
            match r {
                Ok(()) => eprintln!("ghash backend {b}: tested"),
                Err(e) => eprintln!("ghash backend {b}: SKIPPED ({e})"),
            }
        }
    });
    assert!(table[0].1.is_ok(), "the soft ghash backend must be usable");
    table
        .into_iter()
        .filter_map(|(b, r)| r.ok().map(|()| b))
        .collect()
}

/// A seeded generator; `GCM_TEST_SEED` reproduces a run.
pub fn rng() -> StdRng {
    let seed = std::env::var("GCM_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("gcm tests: seed {seed} (set GCM_TEST_SEED to repeat)");
    StdRng::seed_from_u64(seed)
}

pub fn random_bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..]);
    v
}

pub use sectorcrypt_testkit::unhex;
