//! libFuzzer entry point of the `nbd_uri` target; the harness is `sectorcrypt_fuzz::nbd_uri`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::nbd_uri(data));
