//! libFuzzer entry point of the `tcrypt` target; the harness is `sectorcrypt_fuzz::tcrypt`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::tcrypt(data));
