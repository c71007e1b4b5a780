//! libFuzzer entry point of the `luks2` target; the harness is `sectorcrypt_fuzz::luks2`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::luks2(data));
