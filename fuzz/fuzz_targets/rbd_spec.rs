//! libFuzzer entry point of the `rbd_spec` target; the harness is `sectorcrypt_fuzz::rbd_spec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::rbd_spec(data));
