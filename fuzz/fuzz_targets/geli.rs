//! libFuzzer entry point of the `geli` target; the harness is `sectorcrypt_fuzz::geli`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::geli(data));
