//! Published known-answer vectors, on every usable backend.

use crate::{backends, unhex, vectors_dir};
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::{aes::Gcm, Backend, Error};

/// One AEAD case; `valid == false` means opening must fail.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    key: Vec<u8>,
    iv: Vec<u8>,
    aad: Vec<u8>,
    pt: Vec<u8>,
    ct: Vec<u8>,
    tag: Vec<u8>,
    valid: bool,
    /// Only the decryption direction is specified (OpenSSL `Operation = DECRYPT`).
    decrypt_only: bool,
}

/// Runs one case on one backend through every entry point.
fn check(case: &Case, backend: Backend) {
    let ctx = format!("{} on {backend}", case.name);
    let gcm = match Gcm::with_backend(&case.key, backend) {
        Ok(g) => g,
        Err(e) => panic!("{ctx}: key rejected: {e}"),
    };
    if case.iv.is_empty() {
        // Wycheproof ZeroLengthIv: must be refused on both sides.
        assert!(!case.valid, "{ctx}");
        let mut b = case.pt.clone();
        assert!(
            matches!(
                gcm.seal(&case.iv, &case.aad, &mut b),
                Err(Error::Input(InputError::IvLength { .. }))
            ),
            "{ctx}"
        );
        let mut b = case.ct.clone();
        assert!(
            gcm.open(&case.iv, &case.aad, &mut b, &case.tag).is_err(),
            "{ctx}"
        );
        return;
    }
    let short = matches!(case.tag.len(), 4 | 8);
    if case.valid && !case.decrypt_only {
        let mut b = case.pt.clone();
        let full = gcm.seal(&case.iv, &case.aad, &mut b).unwrap();
        assert_eq!(hex::encode(&b), hex::encode(&case.ct), "{ctx}: ciphertext");
        assert_eq!(
            hex::encode(&full[..case.tag.len()]),
            hex::encode(&case.tag),
            "{ctx}: tag"
        );
        let mut dst = vec![0u8; case.pt.len()];
        let full2 = gcm
            .seal_to(&case.iv, &case.aad, &case.pt, &mut dst)
            .unwrap();
        assert_eq!(dst, case.ct, "{ctx}: seal_to");
        assert_eq!(full2, full, "{ctx}: seal_to tag");
    }
    if case.valid && !short {
        // Streaming in uneven pieces (crosses the inc32 wrap of the CounterWrap cases
        // between calls).
        let pieces = [1usize, 16, 7, 33, 64, 2];
        let mut enc = gcm.encryptor(&case.iv, &case.aad).unwrap();
        let mut dec = gcm.decryptor(&case.iv, &case.aad).unwrap();
        let (mut ct, mut pt) = (vec![0u8; case.pt.len()], vec![0u8; case.pt.len()]);
        let (mut off, mut i) = (0, 0);
        while off < case.pt.len() {
            let end = (off + pieces[i % pieces.len()]).min(case.pt.len());
            if !case.decrypt_only {
                enc.update(&case.pt[off..end], &mut ct[off..end]).unwrap();
            }
            dec.update(&case.ct[off..end], &mut pt[off..end]).unwrap();
            off = end;
            i += 1;
        }
        if !case.decrypt_only {
            assert_eq!(ct, case.ct, "{ctx}: streamed ciphertext");
            assert_eq!(
                &enc.finish()[..case.tag.len()],
                &case.tag[..],
                "{ctx}: streamed tag"
            );
        }
        assert_eq!(pt, case.pt, "{ctx}: streamed plaintext");
        dec.finish(&case.tag)
            .unwrap_or_else(|e| panic!("{ctx}: streamed finish: {e}"));
    }
    // In place.
    let mut b = case.ct.clone();
    let r = if short {
        gcm.open_short_tag(&case.iv, &case.aad, &mut b, &case.tag)
    } else {
        gcm.open(&case.iv, &case.aad, &mut b, &case.tag)
    };
    opened(&ctx, "open", r, &b, case);
    if short {
        return;
    }
    // Out of place: dst wiped on failure.
    let mut dst = vec![0xA5u8; case.ct.len()];
    let r = gcm.open_to(&case.iv, &case.aad, &case.ct, &mut dst, &case.tag);
    opened(&ctx, "open_to", r, &dst, case);
}

/// The outcome `r` of opening `case` (`what`: open or open_to) into `out`: its plaintext if
/// the case is valid; otherwise an authentication failure with `out` wiped.
fn opened(ctx: &str, what: &str, r: Result<(), Error>, out: &[u8], case: &Case) {
    if case.valid {
        r.unwrap_or_else(|e| panic!("{ctx}: {what}: {e}"));
        assert_eq!(out, case.pt, "{ctx}: {what} plaintext");
    } else {
        assert_eq!(
            r,
            Err(Error::AuthenticationFailed),
            "{ctx}: {what}: forged tag accepted"
        );
        assert!(
            out.iter().all(|&x| x == 0),
            "{ctx}: {what} did not wipe its output"
        );
    }
}

fn run_all(cases: &[Case], what: &str) {
    let backends = backends();
    for b in &backends {
        for c in cases {
            check(c, *b);
        }
    }
    eprintln!(
        "{what}: {} cases x {} backends",
        cases.len(),
        backends.len()
    );
}

#[test]
fn wycheproof_aes_gcm() {
    let path = vectors_dir().join("wycheproof/testvectors_v1/aes_gcm_test.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut cases = Vec::new();
    let (mut valid, mut invalid) = (0, 0);
    for group in json["testGroups"].as_array().unwrap() {
        for t in group["tests"].as_array().unwrap() {
            let s = |k: &str| unhex(t[k].as_str().unwrap());
            let result = t["result"].as_str().unwrap();
            assert!(
                result == "valid" || result == "invalid",
                "unexpected result {result}"
            );
            let ok = result == "valid";
            if ok {
                valid += 1
            } else {
                invalid += 1
            }
            cases.push(Case {
                name: format!("wycheproof tcId {} ({:?})", t["tcId"], t["flags"]),
                key: s("key"),
                iv: s("iv"),
                aad: s("aad"),
                pt: s("msg"),
                ct: s("ct"),
                tag: s("tag"),
                valid: ok,
                decrypt_only: false,
            });
        }
    }
    assert_eq!(
        cases.len(),
        json["numberOfTests"].as_u64().unwrap() as usize
    );
    eprintln!("wycheproof: {valid} valid, {invalid} invalid");
    run_all(&cases, "wycheproof aes_gcm_test.json");
}

/// Gladman's `gcm.1`: McGrew-Viega test cases 1-18 as VEC 1-18, plus his VEC 19 and 20.
#[test]
fn mcgrew_viega_gcm1() {
    let path = vectors_dir().join("gcm-spec/gladman-modes/gcm.1");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        let (tag, value) = match line.split_once(' ') {
            Some((t, v)) => (t, v.trim()),
            None => (line, ""),
        };
        match tag {
            "VEC" => cases.push(Case {
                name: format!("gcm.1 VEC {value}"),
                key: vec![],
                iv: vec![],
                aad: vec![],
                pt: vec![],
                ct: vec![],
                tag: vec![],
                valid: true,
                decrypt_only: false,
            }),
            "KEY" | "IV" | "HDR" | "PTX" | "CTX" | "TAG" => {
                let c = cases.last_mut().expect("field before VEC");
                let bytes = unhex(value);
                // Long values continue on repeated lines with the same tag.
                let v: &mut Vec<u8> = match tag {
                    "KEY" => &mut c.key,
                    "IV" => &mut c.iv,
                    "HDR" => &mut c.aad,
                    "PTX" => &mut c.pt,
                    "CTX" => &mut c.ct,
                    _ => &mut c.tag,
                };
                v.extend_from_slice(&bytes);
            }
            _ => {}
        }
    }
    assert_eq!(cases.len(), 20, "expected VEC 1-20");
    for c in &cases {
        assert!(
            !c.key.is_empty() && !c.iv.is_empty() && c.tag.len() == 16,
            "{}",
            c.name
        );
        assert_eq!(c.pt.len(), c.ct.len(), "{}", c.name);
    }
    // A wrong tag for each as a negative case.
    let mut all = cases.clone();
    for c in &cases {
        let mut bad = c.clone();
        bad.name += " (tag bit flipped)";
        bad.tag[15] ^= 1;
        bad.valid = false;
        all.push(bad);
    }
    run_all(&all, "gcm.1");
}

/// OpenSSL 3.0's `evpciph_aes_common.txt`, every `aes-*-gcm` stanza.
#[test]
fn openssl_evp_gcm() {
    let path = vectors_dir().join("openssl-3.0.22/evpciph_aes_common.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cases = Vec::new();
    for stanza in text.split("\n\n") {
        let mut kv = std::collections::HashMap::new();
        for line in stanza.lines() {
            if line.starts_with('#') {
                continue;
            }
            if let Some((k, v)) = line.split_once('=') {
                kv.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        let Some(cipher) = kv.get("Cipher") else {
            continue;
        };
        if !cipher.ends_with("-gcm") {
            continue;
        }
        let get = |k: &str| kv.get(k).map(|v| unhex(v)).unwrap_or_default();
        let op = kv.get("Operation").map(String::as_str);
        let result = kv.get("Result").map(String::as_str);
        assert!(
            result.is_none() || result == Some("CIPHERFINAL_ERROR"),
            "{result:?}"
        );
        cases.push(Case {
            name: format!("openssl evp {cipher} iv {} tag {}", kv["IV"], kv["Tag"]),
            key: get("Key"),
            iv: get("IV"),
            aad: get("AAD"),
            pt: get("Plaintext"),
            ct: get("Ciphertext"),
            tag: get("Tag"),
            valid: result.is_none(),
            decrypt_only: op == Some("DECRYPT"),
        });
    }
    assert!(cases.len() >= 40, "only {} gcm stanzas found", cases.len());
    let tag_lens: std::collections::BTreeSet<usize> = cases.iter().map(|c| c.tag.len()).collect();
    eprintln!("openssl evp: tag lengths {tag_lens:?}");
    run_all(&cases, "openssl evpciph_aes_common.txt gcm");
}
