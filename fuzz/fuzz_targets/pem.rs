//! libFuzzer entry point of the `pem` target; the harness is `sectorcrypt_fuzz::pem`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::pem(data));
