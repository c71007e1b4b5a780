//! libFuzzer entry point of the `nbd_client` target; the harness is `sectorcrypt_fuzz::nbd_client`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sectorcrypt_fuzz::nbd_client(data));
