//! libFuzzer entry point of the `fvault2` target; the harness is `sectorcrypt_fuzz::fvault2`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::fvault2(data));
