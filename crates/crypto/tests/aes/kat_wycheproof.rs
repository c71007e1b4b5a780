//! Project Wycheproof: `aes_xts_test.json` (iv = the tweak, zero-padded to 16 bytes;
//! 256-, 384- and 512-bit keys) and `aes_cbc_pkcs5_test.json` (this crate's CBC has no
//! padding: the test applies and strips PKCS#5 around raw CBC, and its unpad must catch
//! every bad padding).

use crate::harness::{backends, block, read, unhex, Report};
use sectorcrypt_crypto::aes::Cbc;
use sectorcrypt_crypto::aes::Xts;
use sectorcrypt_crypto::Backend;

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

/// Runs `case` on every test of the Wycheproof `file` under every backend (the avx512
/// backend on each width), and reports the count under `label`.
fn each_case(file: &str, label: &str, case: impl Fn(Backend, &serde_json::Value)) {
    crate::harness::each_width(|| each_case_once(file, label, &case));
}

fn each_case_once(file: &str, label: &str, case: &impl Fn(Backend, &serde_json::Value)) {
    let doc = wycheproof(file);
    let mut report = Report::new(label);
    for b in backends() {
        for t in tests_of(&doc) {
            case(b, t);
            report.passed += 1;
        }
    }
    report.finish();
}

fn hexfield(t: &serde_json::Value, k: &str) -> Vec<u8> {
    unhex(t[k].as_str().expect(k))
}

#[test]
fn wycheproof_xts() {
    let file = "aes_xts_test.json";
    each_case(file, "wycheproof/aes_xts_test.json", |b, t| {
        let (key, msg, ct) = (hexfield(t, "key"), hexfield(t, "msg"), hexfield(t, "ct"));
        let mut tweak = [0u8; 16];
        let iv = hexfield(t, "iv");
        tweak[..iv.len()].copy_from_slice(&iv);
        let id = &t["tcId"];
        // "acceptable" cases must work like valid ones (none in the current file).
        let valid = match t["result"].as_str() {
            Some("valid") | Some("acceptable") => true,
            Some("invalid") => false,
            other => panic!("tc {id}: unknown result {other:?}"),
        };
        let x = match Xts::with_backend(&key, b) {
            Ok(x) => x,
            Err(e) => {
                assert!(!valid, "tc {id}: valid key refused: {e}");
                return;
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
    });
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
    let file = "aes_cbc_pkcs5_test.json";
    let label = "wycheproof/aes_cbc_pkcs5_test.json (padding done by the test)";
    each_case(file, label, |b, t| {
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
        let valid = match t["result"].as_str() {
            Some("valid") => true,
            Some("invalid") => false,
            other => panic!("tc {id}: unexpected result {other:?}"),
        };
        if valid {
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
    });
}
