//! libFuzzer entry point of the `cipher_spec` target; the harness is `sectorcrypt_fuzz::cipher_spec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::cipher_spec(data));
