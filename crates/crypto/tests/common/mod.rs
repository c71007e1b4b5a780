//! What the crypto test binaries (aes, gcm, gost) share, included by each with
//! `#[path = "../common/mod.rs"] mod common;`: the vectors folder and the choice of
//! backends under test.

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Once;

/// `$SECTORCRYPT_VECTORS`, or `shared/vectors` beside the repository; fails with a clear
/// message unless it holds the subfolder `sub`.
pub fn vectors(sub: &str) -> PathBuf {
    let dir = match std::env::var_os("SECTORCRYPT_VECTORS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vectors"),
    };
    assert!(
        dir.join(sub).is_dir(),
        "test vectors not found at {} (set SECTORCRYPT_VECTORS to the shared/vectors folder)",
        dir.display()
    );
    dir
}

/// The usable backends of `table` (each with whether it can run here), in its order. The
/// first call prints which ones are tested and why any is skipped; the portable backend
/// `soft` must be usable, or the calling test fails.
pub fn usable<B: Copy + PartialEq + Display>(
    what: &str,
    soft: B,
    table: Vec<(B, Result<(), String>)>,
) -> Vec<B> {
    static REPORT: Once = Once::new();
    match table.iter().find(|(b, _)| *b == soft) {
        Some((_, Ok(()))) => {}
        Some((_, Err(e))) => panic!("the soft {what} backend must always be usable: {e}"),
        None => panic!("the {what} backends lack the soft backend"),
    }
    REPORT.call_once(|| {
        for (b, r) in &table {
            match r {
                Ok(()) => eprintln!("{what} backend {b}: tested"),
                Err(e) => eprintln!("{what} backend {b}: SKIPPED ({e})"),
            }
        }
    });
    table
        .into_iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(b, _)| b)
        .collect()
}
