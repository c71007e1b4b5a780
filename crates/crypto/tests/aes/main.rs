//! The AES test suite, one binary: known-answer files, differential tests against
//! OpenSSL, contracts between backends, the sector API. Every test runs under every
//! backend this CPU has (`harness::backends`), which prints what ran and what was skipped.

mod ccm;
mod contracts;
mod differential;
mod harness;
mod kat_cavp;
mod kat_ieee1619;
mod kat_openssl_evp;
mod kat_wycheproof;
mod sectors;

/// Prints which backends every test here runs under and why any is skipped; fails if the
/// soft backend is not among them or a backend the CPU supports failed its self-test.
#[test]
fn backends_under_test() {
    let tested = harness::backends();
    assert_eq!(tested[0], sectorcrypt_crypto::Backend::Soft);
    for (b, r) in harness::backend_table() {
        match r {
            Ok(()) => eprintln!("summary: backend {b}: tested"),
            Err(why) => {
                eprintln!("summary: backend {b}: SKIPPED ({why})");
                // Only a CPU that lacks the instructions is a reason to skip.
                assert!(
                    b.check_cpu().is_err(),
                    "backend {b} runs on this cpu but is unusable: {why}"
                );
            }
        }
    }
    eprintln!(
        "summary: backends tested: {}",
        tested
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// VAES on ymm needs the CPUID bits and the YMM state only: where the CPU has them, vaes is
/// usable whether or not the OS enables the AVX-512 state (some of this project's Zen 4
/// machines have XCR0 = 0x7, no AVX-512 state), and it is chosen first unless the avx512
/// backend (which needs that state) is usable too.
#[test]
fn vaes_is_chosen_without_avx512_state() {
    use sectorcrypt_crypto::Backend;
    let f = sectorcrypt_crypto::cpu::features();
    eprintln!("cpu: {:?}", f.names());
    let has = f.aes && f.avx2 && f.vaes && f.vpclmulqdq && f.os_ymm;
    assert_eq!(Backend::Vaes.check_cpu().is_ok(), has);
    let has512 = has && f.pclmulqdq && f.os_zmm && f.avx512f && f.avx512bw && f.avx512vl;
    assert_eq!(Backend::Avx512.check_cpu().is_ok(), has512);
    if !f.os_zmm {
        assert!(!has512, "avx512 usable without the AVX-512 register state");
    }
    match (has, has512) {
        (true, true) => assert_eq!(Backend::usable()[0], Backend::Avx512),
        (true, false) => {
            assert_eq!(Backend::usable()[0], Backend::Vaes);
            eprintln!(
                "vaes chosen; avx512 unavailable: {:?}",
                Backend::Avx512.check_cpu()
            );
        }
        _ => eprintln!("SKIPPED the vaes half: this CPU lacks vaes/vpclmulqdq/avx2 or ymm state"),
    }
}
