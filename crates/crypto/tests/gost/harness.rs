//! What the GOST tests share: the backends under test, the vector file, hex.

use sectorcrypt_crypto::GostBackend;
use std::path::PathBuf;

/// Every GOST backend this CPU can run, soft first; the others are skipped with a printed
/// reason. Soft must always be usable.
pub fn backends() -> Vec<GostBackend> {
    let table = GostBackend::ALL
        .into_iter()
        .rev()
        .map(|b| (b, b.ensure_usable().map_err(|e| e.to_string())))
        .collect();
    sectorcrypt_testkit::usable("gost", GostBackend::Soft, table)
}

/// The vectors folder (`sectorcrypt_testkit::vectors`).
pub fn vectors() -> PathBuf {
    sectorcrypt_testkit::vectors("gost")
}

pub use sectorcrypt_testkit::unhex;

/// A deterministic pseudo-random buffer (xorshift), so failures reproduce.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
