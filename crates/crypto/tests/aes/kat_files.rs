//! OpenSSL's evp test data (SP 800-38A, FIPS-197, RFC 3686, IEEE 1619), Mbed TLS's
//! SP 800-38A CTR data, and Wycheproof's XTS and CBC-PKCS#5 files.

use crate::harness::{backends, block, field, read, records, unhex, Report};
use sectorcrypt_crypto::{Backend, Cbc, Ctr, Ecb, Error, Xts};

#[test]
fn openssl_evp_file() {
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
                report.skip("not applicable: cfb, ofb and ccm are not implemented; gcm is checked by the gcm test binary");
                continue;
            }
            let key = unhex(field(rec, "Key").expect("Key"));
            let (pt, ct) = (
                unhex(field(rec, "Plaintext").unwrap_or("")),
                unhex(field(rec, "Ciphertext").unwrap_or("")),
            );
            let op = field(rec, "Operation").unwrap_or("BOTH");
            let iv = field(rec, "IV").map(block);
            if field(rec, "Result") == Some("KEY_SET_ERROR") {
                // XTS with Key1 == Key2.
                assert_eq!(mode, "xts");
                assert_eq!(Xts::with_backend(&key, b).unwrap_err(), Error::XtsEqualKeys);
                report.passed += 1;
                continue;
            }
            let run = |input: &[u8], encrypt: bool| -> Vec<u8> {
                let mut out = vec![0u8; input.len()];
                match mode {
                    "ecb" => {
                        let c = Ecb::with_backend(&key, b).expect("key");
                        if encrypt {
                            c.encrypt_to(input, &mut out)
                        } else {
                            c.decrypt_to(input, &mut out)
                        }
                        .expect("ecb");
                    }
                    "cbc" => {
                        let c = Cbc::with_backend(&key, b).expect("key");
                        let iv = iv.expect("IV");
                        if encrypt {
                            c.encrypt_to(&iv, input, &mut out)
                        } else {
                            c.decrypt_to(&iv, input, &mut out)
                        }
                        .expect("cbc");
                    }
                    "ctr" => {
                        Ctr::with_backend(&key, b)
                            .expect("key")
                            .apply_keystream_to(&iv.expect("IV"), 0, input, &mut out)
                            .expect("ctr");
                    }
                    _ => {
                        let (k1, k2) = key.split_at(key.len() / 2);
                        let x = if k1 == k2 {
                            Xts::with_backend_allowing_equal_halves(&key, b)
                        } else {
                            Xts::with_backend(&key, b)
                        }
                        .expect("key");
                        let iv = iv.expect("IV");
                        if encrypt {
                            x.encrypt_to(&iv, input, &mut out)
                        } else {
                            x.decrypt_to(&iv, input, &mut out)
                        }
                        .expect("xts");
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

fn wycheproof(file: &str) -> serde_json::Value {
    serde_json::from_str(&read(&format!("aes/wycheproof/testvectors_v1/{file}"))).expect("json")
}

fn tests_of(doc: &serde_json::Value) -> Vec<&serde_json::Value> {
    doc["testGroups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["tests"].as_array().expect("tests"))
        .collect()
}

fn hexfield(t: &serde_json::Value, k: &str) -> Vec<u8> {
    unhex(t[k].as_str().expect(k))
}

#[test]
fn wycheproof_xts() {
    let doc = wycheproof("aes_xts_test.json");
    let mut report = Report::new("wycheproof/aes_xts_test.json");
    for b in backends() {
        for t in tests_of(&doc) {
            let (key, msg, ct) = (hexfield(t, "key"), hexfield(t, "msg"), hexfield(t, "ct"));
            let mut tweak = [0u8; 16];
            let iv = hexfield(t, "iv");
            tweak[..iv.len()].copy_from_slice(&iv);
            let id = &t["tcId"];
            let valid = t["result"] != "invalid";
            let x = match Xts::with_backend(&key, b) {
                Ok(x) => x,
                Err(e) => {
                    assert!(!valid, "tc {id}: valid key refused: {e}");
                    report.passed += 1;
                    continue;
                }
            };
            let mut out = vec![0u8; msg.len()];
            let enc = x.encrypt_to(&tweak, &msg, &mut out);
            if valid {
                enc.expect("encrypt");
                assert_eq!(out, ct, "tc {id} on {b}");
                x.decrypt(&tweak, &mut out).expect("decrypt");
                assert_eq!(out, msg, "tc {id} decrypt on {b}");
            } else {
                assert!(
                    enc.is_err() || out != ct,
                    "tc {id}: invalid case accepted on {b}"
                );
            }
            report.passed += 1;
        }
    }
    report.finish();
}

fn pkcs7_pad(m: &[u8]) -> Vec<u8> {
    let n = 16 - m.len() % 16;
    let mut v = m.to_vec();
    v.extend(std::iter::repeat_n(n as u8, n));
    v
}

fn pkcs7_unpad(m: &[u8]) -> Option<Vec<u8>> {
    let n = *m.last()? as usize;
    if n == 0 || n > 16 || n > m.len() || !m[m.len() - n..].iter().all(|&v| v as usize == n) {
        return None;
    }
    Some(m[..m.len() - n].to_vec())
}

#[test]
fn wycheproof_cbc_pkcs5() {
    let doc = wycheproof("aes_cbc_pkcs5_test.json");
    let mut report = Report::new("wycheproof/aes_cbc_pkcs5_test.json (padding done by the test)");
    for b in backends() {
        for t in tests_of(&doc) {
            let (key, iv, msg, ct) = (
                hexfield(t, "key"),
                block(t["iv"].as_str().expect("iv")),
                hexfield(t, "msg"),
                hexfield(t, "ct"),
            );
            let id = &t["tcId"];
            let c = Cbc::with_backend(&key, b).expect("key");
            let mut pt = vec![0u8; ct.len()];
            let opened = c
                .decrypt_to(&iv, &ct, &mut pt)
                .ok()
                .and_then(|()| pkcs7_unpad(&pt));
            if t["result"] == "valid" {
                let padded = pkcs7_pad(&msg);
                let mut out = vec![0u8; padded.len()];
                c.encrypt_to(&iv, &padded, &mut out).expect("encrypt");
                assert_eq!(out, ct, "tc {id} on {b}");
                assert_eq!(
                    opened.as_deref(),
                    Some(msg.as_slice()),
                    "tc {id} decrypt on {b}"
                );
            } else {
                assert!(opened.is_none(), "tc {id}: invalid padding accepted on {b}");
            }
            report.passed += 1;
        }
    }
    report.finish();
}

/// The error paths every backend shares.
#[test]
fn bad_sizes_are_refused_and_nothing_is_written() {
    for b in backends() {
        let key = [3u8; 32];
        let mut odd = vec![0x77u8; 33];
        assert!(matches!(
            Ecb::with_backend(&key, b).unwrap().encrypt(&mut odd),
            Err(Error::Length { .. })
        ));
        assert!(matches!(
            Cbc::with_backend(&key, b)
                .unwrap()
                .decrypt(&[0; 16], &mut odd),
            Err(Error::Length { .. })
        ));
        assert!(odd.iter().all(|&v| v == 0x77));
        let mut dst = vec![0x55u8; 32];
        assert!(matches!(
            Ecb::with_backend(&key, b)
                .unwrap()
                .encrypt_to(&[0; 16], &mut dst),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(dst.iter().all(|&v| v == 0x55));
        for bad in [0usize, 8, 15, 17, 31, 33, 64] {
            assert!(
                matches!(
                    Ecb::with_backend(&vec![1; bad], b),
                    Err(Error::KeyLength { .. })
                ),
                "aes key of {bad} bytes"
            );
        }
        for bad in [16usize, 24, 40, 63, 65] {
            assert!(
                matches!(
                    Xts::with_backend(&vec![1; bad], b),
                    Err(Error::KeyLength { .. })
                ),
                "xts key of {bad} bytes"
            );
        }
        let k: Vec<u8> = (0..64).collect();
        let x = Xts::with_backend(&k, b).unwrap();
        let mut short = [9u8; 15];
        assert!(matches!(
            x.encrypt(&[0; 16], &mut short),
            Err(Error::Length { .. })
        ));
        assert_eq!(short, [9u8; 15]);
        let _: Backend = x.backend();
    }
}
