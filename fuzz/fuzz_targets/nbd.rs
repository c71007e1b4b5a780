//! libFuzzer entry point of the `nbd` target; the harness is `sectorcrypt_fuzz::nbd`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::nbd(data));
