//! OpenSSL's evp test data (FIPS-197 and SP 800-38A ECB/CBC, RFC 3686 CTR, IEEE 1619 XTS)
//! and Mbed TLS's SP 800-38A CTR data.

use crate::harness::{backends, block, field, read, records, unhex, Report};
use sectorcrypt_crypto::KeyError;
use sectorcrypt_crypto::{
    aes::{Cbc, Ctr, Ecb, Xts},
    Error, Mode,
};

#[test]
fn openssl_evp_file() {
    crate::harness::each_width(openssl_evp_file_under_each_width);
}

fn openssl_evp_file_under_each_width() {
    let name = "openssl-3.0.22/evpciph_aes_common.txt";
    let mut report = Report::new(name);
    let recs = records(&read(&format!("aes/{name}")));
    for b in backends() {
        for (_, rec) in &recs {
            let Some(cipher) = field(rec, "Cipher") else {
                continue;
            };
            let cipher = cipher.to_ascii_lowercase();
            let mode = cipher.rsplit('-').next().unwrap_or("");
            if !["ecb", "cbc", "ctr", "xts"].contains(&mode) {
                // Not a failed case: a cipher type this test does not cover. GCM has its
                // own test binary (tests/gcm); CFB, OFB and CCM are not implemented.
                report.skip(&format!("not our mode: {mode}"));
                continue;
            }
            let key = unhex(field(rec, "Key").expect("Key"));
            let (pt, ct) = (
                unhex(field(rec, "Plaintext").unwrap_or("")),
                unhex(field(rec, "Ciphertext").unwrap_or("")),
            );
            let op = field(rec, "Operation").unwrap_or("BOTH");
            let iv = field(rec, "IV").map(block);
            let expect_key_error = match field(rec, "Result") {
                None => false,
                // IEEE vector 1 (Key1 == Key2): OpenSSL refuses the key; so must we. The
                // values themselves are still checked below, through the constructor that
                // accepts equal halves.
                Some("KEY_SET_ERROR") => true,
                Some(other) => panic!("unexpected Result = {other} for {cipher}: {rec:?}"),
            };
            if expect_key_error {
                assert_eq!(mode, "xts", "{rec:?}");
                assert_eq!(
                    Xts::with_backend(&key, b).unwrap_err(),
                    Error::Key(KeyError::XtsEqualHalves),
                    "{rec:?} on {b}"
                );
            }
            let run = |input: &[u8], encrypt: bool| -> Vec<u8> {
                let mut out = vec![0u8; input.len()];
                let iv = iv.unwrap_or_default();
                match mode {
                    // Through the `Mode` trait (checked against each type's own methods by
                    // the trait tests).
                    "ecb" => one_way(&Ecb::with_backend(&key, b), encrypt, &[], input, &mut out),
                    "cbc" => one_way(&Cbc::with_backend(&key, b), encrypt, &iv, input, &mut out),
                    "ctr" => {
                        Ctr::with_backend(&key, b)
                            .expect("key")
                            .apply_keystream_to(&iv, 0, input, &mut out)
                            .expect("ctr");
                    }
                    _ => {
                        let (k1, k2) = key.split_at(key.len() / 2);
                        let x = if k1 == k2 {
                            Xts::with_backend_allowing_equal_halves(&key, b)
                        } else {
                            Xts::with_backend(&key, b)
                        };
                        one_way(&x, encrypt, &iv, input, &mut out);
                    }
                }
                out
            };
            if op != "DECRYPT" {
                assert_eq!(run(&pt, true), ct, "{cipher} encrypt on {b}: {rec:?}");
            }
            if op != "ENCRYPT" {
                assert_eq!(run(&ct, false), pt, "{cipher} decrypt on {b}: {rec:?}");
            }
            report.passed += 1;
        }
    }
    report.finish();
}

#[test]
fn sp800_38a_ctr_mbedtls() {
    crate::harness::each_width(sp800_38a_ctr_mbedtls_under_each_width);
}

fn sp800_38a_ctr_mbedtls_under_each_width() {
    let name = "sp800-38a/mbedtls-3.6.6/test_suite_aes.ctr.data";
    let mut report = Report::new(name);
    for b in backends() {
        for line in read(&format!("aes/{name}"))
            .lines()
            .filter(|l| l.starts_with("aes_ctr:"))
        {
            let parts: Vec<&str> = line["aes_ctr:".len()..].split(':').collect();
            let (key, iv, pt, ct) = (
                unhex(parts[0].trim_matches('"')),
                block(parts[1].trim_matches('"')),
                unhex(parts[2].trim_matches('"')),
                unhex(parts[3].trim_matches('"')),
            );
            // The last field says whether the vector is expected to match (the file
            // includes a deliberately corrupted key).
            let should_match = parts[4].trim() == "0";
            let mut out = vec![0u8; pt.len()];
            Ctr::with_backend(&key, b)
                .expect("key")
                .apply_keystream_to(&iv, 0, &pt, &mut out)
                .expect("ctr");
            assert_eq!(out == ct, should_match, "{line} on {b}");
            report.passed += 1;
        }
    }
    report.finish();
}

/// One direction of the mode `m` (a fresh key) from `input` into `out`.
fn one_way<M: Mode>(m: &Result<M, Error>, encrypt: bool, iv: &[u8], input: &[u8], out: &mut [u8]) {
    let m = m.as_ref().expect("key");
    match encrypt {
        true => m.encrypt_to(iv, input, out),
        false => m.decrypt_to(iv, input, out),
    }
    .expect("cipher");
}
