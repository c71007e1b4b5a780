//! libFuzzer entry point of the `cli_values` target; the harness is `sectorcrypt_fuzz::cli_values`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::cli_values(data));
