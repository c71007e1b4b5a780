//! What the GOST tests share: the backends under test, the vector file, hex.

use sectorcrypt_crypto::GostBackend;
use std::path::PathBuf;
use std::sync::Once;

/// Every GOST backend this CPU can run, soft first; the others are skipped with a printed
/// reason. Soft must always be usable.
pub fn backends() -> Vec<GostBackend> {
    static REPORT: Once = Once::new();
    let table: Vec<(GostBackend, Result<(), String>)> = GostBackend::ALL
        .into_iter()
        .rev()
        .map(|b| (b, b.ensure_usable().map_err(|e| e.to_string())))
        .collect();
    assert!(
        table[0].0 == GostBackend::Soft && table[0].1.is_ok(),
        "the soft gost backend must always be usable"
    );
    REPORT.call_once(|| {
        for (b, r) in &table {
            match r {
                Ok(()) => eprintln!("gost backend {b}: tested"),
                Err(e) => eprintln!("gost backend {b}: SKIPPED ({e})"),
            }
        }
    });
    table
        .into_iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(b, _)| b)
        .collect()
}

/// `$SECTORCRYPT_VECTORS`, or `shared/vectors` beside the repository.
pub fn vectors() -> PathBuf {
    let dir = match std::env::var_os("SECTORCRYPT_VECTORS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vectors"),
    };
    assert!(
        dir.join("gost").is_dir(),
        "test vectors not found at {} (set SECTORCRYPT_VECTORS to the shared/vectors folder)",
        dir.display()
    );
    dir
}

pub fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim()).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

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
