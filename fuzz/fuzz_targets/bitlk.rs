//! libFuzzer entry point of the `bitlk` target; the harness is `sectorcrypt_fuzz::bitlk`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::bitlk(data));
