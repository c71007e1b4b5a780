//! libFuzzer entry point of the `luks1` target; the harness is `sectorcrypt_fuzz::luks1`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::luks1(data));
