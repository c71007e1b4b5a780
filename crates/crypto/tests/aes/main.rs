//! The AES test suite, one binary: known-answer files, differential tests against
//! OpenSSL, contracts between backends, the sector API. Every test runs under every
//! backend this CPU has (`harness::backends`), which prints what ran and what was skipped.

mod contracts;
mod differential;
mod harness;
mod kat_cavp;
mod kat_files;
mod kat_ieee1619;
mod sectors;

#[test]
fn backends_under_test() {
    let tested = harness::backends();
    assert_eq!(tested[0], sectorcrypt_crypto::Backend::Soft);
    eprintln!(
        "backends tested: {}",
        tested
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
}
