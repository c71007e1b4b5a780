//! The GOST 28147-89 / Magma test suite, one binary: the 49 vectors of
//! `tests/vectors/gost` on every backend, regression tests for the bugs of other
//! libraries, the byte-order mapping, differential tests between backends, and OpenSSL's
//! gost engine when it is installed.
//!
//! The vectors of 3 to 4 GiB run only on request, in release mode:
//! `SECTORCRYPT_GOST_HUGE=1 cargo test --release -p sectorcrypt-crypto --test gost -- --ignored huge`

mod differential;
mod harness;
mod openssl_engine;
mod vectors;

/// Prints which GOST backends the tests run under and why any is skipped.
#[test]
fn gost_backends_under_test() {
    let tested = harness::backends();
    assert_eq!(tested[0], sectorcrypt_crypto::GostBackend::Soft);
    for b in sectorcrypt_crypto::GostBackend::ALL {
        if let Err(e) = b.ensure_usable() {
            assert!(
                b.check_cpu().is_err(),
                "{b} runs on this cpu but is unusable: {e}"
            );
        }
    }
}
