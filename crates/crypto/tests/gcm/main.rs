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
use sectorcrypt_crypto::aes::Gcm;
use sectorcrypt_crypto::hazmat::GhashBackend;
use sectorcrypt_crypto::{Backend, Error};
use std::path::PathBuf;
use std::sync::Once;

/// The AES vectors folder (`sectorcrypt_testkit::vectors`).
pub fn vectors_dir() -> PathBuf {
    sectorcrypt_testkit::vectors("aes").join("aes")
}

/// Each backend of `all` (fastest first), soft first, with whether it can run here (or why
/// not).
fn usable_table<B: Copy>(
    all: &[B],
    usable: impl Fn(B) -> Result<(), Error>,
) -> Vec<(B, Result<(), String>)> {
    all.iter()
        .rev()
        .map(|&b| (b, usable(b).map_err(|e| e.to_string())))
        .collect()
}

/// The backends this CPU can run, soft first; the others are reported and skipped.
pub fn backends() -> Vec<Backend> {
    let table = usable_table(&Backend::ALL, Backend::ensure_usable);
    sectorcrypt_testkit::usable("gcm", Backend::Soft, table)
}

/// The GHASH backends this CPU can run, soft first; the first call prints which are tested
/// and why any is skipped (soft must be usable).
pub fn ghash_backends() -> Vec<GhashBackend> {
    static REPORT: Once = Once::new();
    let table = usable_table(&GhashBackend::ALL, GhashBackend::ensure_usable);
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

/// Runs `f` with the test's generator, a random key of each of `key_lens` bytes and its GCM,
/// on every backend (backends outermost).
pub fn each_key(key_lens: &[usize], mut f: impl FnMut(&mut StdRng, &Gcm, &[u8])) {
    let mut rng = rng();
    for backend in backends() {
        for &len in key_lens {
            let key = random_bytes(&mut rng, len);
            let gcm = Gcm::with_backend(&key, backend).unwrap();
            f(&mut rng, &gcm, &key);
        }
    }
}

pub fn random_bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..]);
    v
}

pub use sectorcrypt_testkit::unhex;
