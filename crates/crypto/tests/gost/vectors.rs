//! The 49 vectors of `tests/vectors/gost/vectors.json` on every backend, the byte-order
//! mapping between GOST 28147-89 and Magma, and regression tests for the bugs the README
//! names in other libraries.

use crate::harness::{backends, bytes, mode, round_trip, unhex, vectors};
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::KeyError;
use sectorcrypt_crypto::{gost89, magma, Error, GostBackend};
use serde_json::Value;

/// Inputs above this size are "huge" (the 3-4 GiB vectors): run only with
/// `SECTORCRYPT_GOST_HUGE=1 cargo test --release ... -- --ignored huge`.
const HUGE: u64 = 1 << 30;

fn load() -> Vec<Value> {
    let path = vectors().join("gost/vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("vectors.json is json");
    v.as_array().expect("an array").clone()
}

/// The vector whose name contains `part`.
fn named(part: &str) -> Value {
    let all = load();
    let v = all.iter().find(|v| s(v, "name").contains(part));
    v.unwrap_or_else(|| panic!("no vector named *{part}*"))
        .clone()
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

fn extra<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
    v["extra"].get(k)
}

fn meshing(v: &Value) -> bool {
    extra(v, "key_meshing")
        .and_then(|m| m.as_str())
        .is_some_and(|m| m.starts_with("cryptopro"))
}

fn zero_len(v: &Value) -> Option<u64> {
    extra(v, "plaintext_zero_bytes").and_then(|n| {
        n.as_u64()
            .or_else(|| n.as_str().and_then(|s| s.parse().ok()))
    })
}

fn is_magma(v: &Value) -> bool {
    extra(v, "byte_order")
        .and_then(|b| b.as_str())
        .is_some_and(|b| b.starts_with("magma"))
}

/// The name of a vector's block or stream mode in `harness::mode`, if it has one.
fn mode_name(v: &Value) -> Option<String> {
    let section = extra(v, "acpkm_section_bytes")
        .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()));
    match (s(v, "mode"), is_magma(v)) {
        ("block" | "ecb", true) => Some("magma-ecb".into()),
        ("block" | "ecb", false) => Some("gost89-ecb".into()),
        ("ctr-acpkm", _) => Some(format!("magma-ctr-acpkm/{}", section.expect("a section"))),
        (m @ ("ctr" | "ofb" | "cbc" | "cfb"), _) => Some(format!("magma-{m}")),
        (m @ ("gost89-cnt" | "gost89-cfb" | "gost89-cbc"), _) => Some(m.into()),
        _ => None,
    }
}

/// Runs one vector on one backend; returns the output to compare with `ciphertext`. Block
/// and stream modes also decrypt, in place and out of place ([`round_trip`]).
fn run(v: &Value, b: GostBackend) -> Vec<u8> {
    let key = unhex(s(v, "key"));
    let iv = unhex(s(v, "iv"));
    let pt = unhex(s(v, "plaintext"));
    let sbox = Sbox::from_name(s(v, "sbox")).expect("a known sbox");
    let mesh = meshing(v);
    if let Some(n) = zero_len(v) {
        return run_zeros(v, b, n);
    }
    if let Some(name) = mode_name(v) {
        return round_trip(&*mode(&name, &key, sbox, mesh, b), &iv, &pt);
    }
    match s(v, "mode") {
        "mac" => {
            let full = magma::Mac::with_backend(&key, b).unwrap().mac(&pt);
            if let Some(f) = extra(v, "full_64bit_mac_computed_here").and_then(|x| x.as_str()) {
                assert_eq!(hex::encode(full), f, "full 64-bit mac");
            }
            full[..s(v, "ciphertext").len() / 2].to_vec()
        }
        "mgm" => {
            let c = magma::Mgm::with_backend(&key, b).unwrap();
            let aad = unhex(extra(v, "aad").unwrap().as_str().unwrap());
            let want_tag = unhex(extra(v, "tag").unwrap().as_str().unwrap());
            let nonce: [u8; 8] = iv.try_into().unwrap();
            let mut out = pt.clone();
            let mut tag = vec![0u8; want_tag.len()];
            c.seal(&nonce, &aad, &mut out, &mut tag).unwrap();
            assert_eq!(hex::encode(&tag), hex::encode(&want_tag), "mgm tag");
            // Out of place: the same ciphertext and tag, and back.
            let (mut ct, mut tag2) = (vec![0u8; pt.len()], vec![0u8; tag.len()]);
            c.seal_to(&nonce, &aad, &pt, &mut ct, &mut tag2).unwrap();
            assert_eq!((&ct, &tag2), (&out, &tag), "mgm seal_to");
            let mut back = vec![0u8; pt.len()];
            c.open_to(&nonce, &aad, &ct, &mut back, &tag).unwrap();
            assert_eq!(back, pt, "mgm open_to");
            c.open(&nonce, &aad, &mut ct, &tag).unwrap();
            assert_eq!(ct, pt, "mgm open");
            // A wrong tag: the in-place buffer is wiped, a separate destination untouched.
            tag2[0] ^= 1;
            let mut dst = vec![0x5a; pt.len()];
            let failed = c.open_to(&nonce, &aad, &out, &mut dst, &tag2);
            assert_eq!(failed, Err(Error::AuthenticationFailed));
            assert!(dst.iter().all(|&x| x == 0x5a), "open_to left dst alone");
            let mut wiped = out.clone();
            let failed = c.open(&nonce, &aad, &mut wiped, &tag2);
            assert_eq!(failed, Err(Error::AuthenticationFailed));
            assert!(
                wiped.iter().all(|&x| x == 0),
                "a failed open wipes the buffer"
            );
            out
        }
        "gost89-imit" => {
            let c = gost89::Mac::with_backend(&key, sbox, mesh, b).unwrap();
            c.mac(&pt).to_vec()
        }
        m => panic!("unknown mode {m}"),
    }
}

/// The next piece of a long stream, encrypted in place.
type Next = Box<dyn FnMut(&mut [u8])>;

/// The long vectors: `n` zero bytes streamed in 1 MiB pieces; the result is the last 16
/// output bytes (or the MAC).
fn run_zeros(v: &Value, b: GostBackend, n: u64) -> Vec<u8> {
    let key = unhex(s(v, "key"));
    let sbox = Sbox::from_name(s(v, "sbox")).unwrap();
    let mesh = meshing(v);
    let piece = 1usize << 20;
    let mut buf = vec![0u8; piece];
    let mut last = Vec::new();
    let mut left = n;
    match s(v, "mode") {
        "gost89-imit" => {
            let mut st = gost89::Mac::with_backend(&key, sbox, mesh, b)
                .unwrap()
                .start();
            while left > 0 {
                let k = left.min(piece as u64) as usize;
                st.update(&buf[..k]);
                left -= k as u64;
            }
            let mut out = [0u8; 4];
            st.finish_to(&mut out).unwrap();
            return out.to_vec();
        }
        m @ ("gost89-cnt" | "gost89-cfb") => {
            let iv: [u8; 8] = unhex(s(v, "iv")).try_into().unwrap();
            let mut next: Next = if m == "gost89-cnt" {
                let c = gost89::Cnt::with_backend(&key, sbox, mesh, b).unwrap();
                let mut st = c.stream(&iv);
                Box::new(move |x| st.apply(x))
            } else {
                let c = gost89::Cfb::with_backend(&key, sbox, mesh, b).unwrap();
                let mut st = c.stream(&iv);
                Box::new(move |x| st.encrypt(x).unwrap())
            };
            while left > 0 {
                let k = left.min(piece as u64) as usize;
                buf[..k].fill(0);
                next(&mut buf[..k]);
                last.extend_from_slice(&buf[k.saturating_sub(16)..k]);
                last.drain(..last.len().saturating_sub(16));
                left -= k as u64;
            }
        }
        m => panic!("no long form for {m}"),
    }
    last
}

fn check_all(huge: bool) -> usize {
    let all = load();
    assert_eq!(all.len(), 49, "vectors.json has 49 vectors");
    let mut passed = 0;
    for b in backends() {
        for v in &all {
            let n = zero_len(v).unwrap_or(0);
            if (n >= HUGE) != huge {
                continue;
            }
            let want = s(v, "ciphertext");
            let got = hex::encode(run(v, b));
            assert_eq!(got, want, "vector {} on backend {b}", s(v, "name"));
            passed += 1;
        }
    }
    passed
}

/// Every vector below 1 GiB of input, on every backend.
#[test]
fn all_vectors_every_backend() {
    let passed = check_all(false);
    let per = passed / backends().len();
    eprintln!("gost vectors: {passed} passed ({per} per backend; the 3-4 GiB ones: see `huge`)");
    assert!(per >= 43, "only {per} vectors ran");
}

/// The 3 to 4 GiB vectors (CNT and CFB with key meshing over 2^32 + 16 bytes, MACs over
/// 3-4 GiB). Minutes in release mode; run with
/// `SECTORCRYPT_GOST_HUGE=1 cargo test --release -p sectorcrypt-crypto --test gost -- --ignored huge`.
#[test]
#[ignore = "3-4 GiB inputs: SECTORCRYPT_GOST_HUGE=1, release mode, --ignored"]
fn huge_vectors_every_backend() {
    if std::env::var_os("SECTORCRYPT_GOST_HUGE").is_none() {
        eprintln!(
            "skipped: set SECTORCRYPT_GOST_HUGE=1 (and use --release) to run the 3-4 GiB vectors"
        );
        return;
    }
    let passed = check_all(true);
    eprintln!("huge gost vectors: {passed} passed");
    assert!(passed >= 6);
}

/// Magma(K, P) = rev8(GOST89_Z(wordrev(K), rev8(P))), for the RFC 8891 example and for
/// random keys and blocks, and in reverse for decryption.
#[test]
fn magma_gost89_byte_order_mapping() {
    let all = load();
    let v = all.iter().find(|v| s(v, "mode") == "block").unwrap();
    let eq = extra(v, "equivalent_gost89_le").unwrap();
    let c = gost89::Ecb::with_backend(&unhex(s(eq, "key")), Sbox::Tc26Z, false, GostBackend::Soft)
        .unwrap();
    let mut p = unhex(s(eq, "plaintext"));
    c.encrypt(&mut p).unwrap();
    assert_eq!(hex::encode(p), s(eq, "ciphertext"));
    for b in backends() {
        for seed in 0..20u64 {
            let key = bytes(32, seed);
            let pt = bytes(8 * 40, seed + 100);
            let wordrev: Vec<u8> = key
                .chunks(4)
                .flat_map(|w| w.iter().rev().copied())
                .collect();
            let rev8 = |x: &[u8]| -> Vec<u8> {
                x.chunks(8).flat_map(|w| w.iter().rev().copied()).collect()
            };
            let mut m = pt.clone();
            magma::Ecb::with_backend(&key, b)
                .unwrap()
                .encrypt(&mut m)
                .unwrap();
            let mut g = rev8(&pt);
            gost89::Ecb::with_backend(&wordrev, Sbox::Tc26Z, false, b)
                .unwrap()
                .encrypt(&mut g)
                .unwrap();
            assert_eq!(m, rev8(&g), "seed {seed} backend {b}");
        }
    }
}

/// gogost's CNT drops the end-around carry of N4 (+ C1 mod 2^32 - 1): the derived vector
/// crosses the carry at block 139; a CNT without the carry must differ from there on.
#[test]
fn regression_cnt_end_around_carry() {
    let v = &named("derived-gost89-cnt-N4-carry");
    for b in backends() {
        assert_eq!(hex::encode(run(v, b)), s(v, "ciphertext"));
    }
    // A model of the bug: the same keystream with N4 added modulo 2^32; it agrees with
    // ours before block 139 and not after, so the vector really exercises the carry.
    let key = unhex(s(v, "key"));
    let iv: [u8; 8] = unhex(s(v, "iv")).try_into().unwrap();
    let ct = unhex(s(v, "ciphertext"));
    let pt = unhex(s(v, "plaintext"));
    let ecb = gost89::Ecb::with_backend(&key, Sbox::CryptoProA, false, GostBackend::Soft).unwrap();
    let mut st = iv;
    ecb.encrypt(&mut st).unwrap();
    let mut n3 = u32::from_le_bytes(st[..4].try_into().unwrap());
    let mut n4 = u32::from_le_bytes(st[4..].try_into().unwrap());
    let mut buggy = Vec::new();
    for chunk in pt.chunks(8) {
        n3 = n3.wrapping_add(0x01010101);
        n4 = n4.wrapping_add(0x01010104);
        let mut g = [0u8; 8];
        g[..4].copy_from_slice(&n3.to_le_bytes());
        g[4..].copy_from_slice(&n4.to_le_bytes());
        ecb.encrypt(&mut g).unwrap();
        buggy.extend(chunk.iter().zip(g).map(|(a, b)| a ^ b));
    }
    assert_eq!(buggy[..139 * 8], ct[..139 * 8]);
    assert_ne!(buggy[139 * 8..140 * 8], ct[139 * 8..140 * 8]);
}

/// pygost and gogost omit the extra zero block of messages of at most 8 bytes: our MAC of
/// such a message must equal the 16-round state after the message block and a zero block,
/// not after the message block alone.
#[test]
fn regression_mac_extra_zero_block() {
    let all = load();
    let mut checked = 0;
    for v in all.iter().filter(|v| s(v, "mode") == "gost89-imit") {
        let pt = unhex(s(v, "plaintext"));
        if pt.is_empty() || pt.len() > 8 || zero_len(v).is_some() {
            continue;
        }
        let key = unhex(s(v, "key"));
        let sbox = Sbox::from_name(s(v, "sbox")).unwrap();
        let mac = gost89::Mac::with_backend(&key, sbox, false, GostBackend::Soft).unwrap();
        assert_eq!(
            hex::encode(mac.mac(&pt)),
            s(v, "ciphertext"),
            "{}",
            s(v, "name")
        );
        // Padding to 16 bytes explicitly gives the same MAC (the extra block is zero) ...
        let mut padded = pt.clone();
        padded.resize(16, 0);
        assert_eq!(mac.mac(&padded), mac.mac(&pt));
        // ... while a message of exactly 9..=16 bytes gets no extra block.
        let mut nine = pt.clone();
        nine.resize(9, 0);
        assert_eq!(mac.mac(&nine), mac.mac(&padded));
        checked += 1;
    }
    assert!(checked >= 2, "{checked} short-message vectors");
    let mac =
        gost89::Mac::with_backend(&[7; 32], Sbox::CryptoProA, true, GostBackend::Soft).unwrap();
    assert_eq!(mac.mac(&[]), [0; 4], "the empty message gives 00000000");
}

/// libgcrypt's MAC never applies key meshing: past 1024 bytes, the MAC with meshing must
/// differ from the one without, and equal the vector (testimit2, 1035 bytes).
#[test]
fn regression_mac_key_meshing() {
    let v = &named("testimit2");
    let key = unhex(s(v, "key"));
    let pt = unhex(s(v, "plaintext"));
    assert!(pt.len() > 1024);
    for b in backends() {
        let with = gost89::Mac::with_backend(&key, Sbox::CryptoProA, true, b).unwrap();
        let without = gost89::Mac::with_backend(&key, Sbox::CryptoProA, false, b).unwrap();
        assert_eq!(hex::encode(with.mac(&pt)), s(v, "ciphertext"));
        assert_ne!(with.mac(&pt), without.mac(&pt));
        // Up to 1024 bytes meshing changes nothing.
        assert_eq!(with.mac(&pt[..1024]), without.mac(&pt[..1024]));
    }
}

/// The streaming MAC equals the one-shot MAC for every split of a message.
#[test]
fn mac_stream_splits() {
    let key = bytes(32, 5);
    let msg = bytes(1100, 6);
    let mac = gost89::Mac::with_backend(&key, Sbox::CryptoProB, true, GostBackend::Soft).unwrap();
    for len in [0usize, 1, 7, 8, 9, 16, 17, 1024, 1025, 1100] {
        let want = mac.mac(&msg[..len]);
        for split in [0usize, 1, 3, 8, 9, 500] {
            let split = split.min(len);
            let mut st = mac.start();
            st.update(&msg[..split]);
            st.update(&msg[split..len]);
            let mut out = [0u8; 4];
            st.finish_to(&mut out).unwrap();
            assert_eq!(out, want, "len {len} split {split}");
        }
    }
}

/// Sbox names and OIDs parse; an unknown name gives an error that lists the names.
#[test]
fn sbox_names() {
    for sb in Sbox::ALL {
        assert_eq!(Sbox::from_name(sb.name()).unwrap(), sb);
        assert_eq!(Sbox::from_name(sb.oid()).unwrap(), sb);
    }
    let e = Sbox::from_name("nope").unwrap_err().to_string();
    assert!(
        e.contains("id-Gost28147-89-CryptoPro-A-ParamSet")
            && e.contains("id-tc26-gost-28147-param-Z")
    );
}

/// Bad input is refused with clear errors and leaves buffers untouched.
#[test]
fn contracts() {
    let key = [1u8; 32];
    assert!(matches!(
        gost89::Ecb::new(&key[..31], Sbox::CryptoProA, false),
        Err(Error::Key(KeyError::Length { got: 31, .. }))
    ));
    let e = gost89::Ecb::with_backend(&key, Sbox::CryptoProA, false, GostBackend::Soft).unwrap();
    let mut buf = vec![9u8; 12];
    assert!(matches!(
        e.encrypt(&mut buf),
        Err(Error::Input(InputError::Length { got: 12, .. }))
    ));
    assert_eq!(buf, vec![9u8; 12]);
    let mut dst = vec![0u8; 8];
    assert!(matches!(
        e.encrypt_to(&[0; 16], &mut dst),
        Err(Error::Input(InputError::LengthMismatch { .. }))
    ));
    let cbc = magma::Cbc::with_backend(&key, GostBackend::Soft).unwrap();
    let mut b = vec![0u8; 16];
    assert!(matches!(
        cbc.encrypt(&[0; 12], &mut b),
        Err(Error::Input(InputError::IvLength { got: 12, .. }))
    ));
    let mgm = magma::Mgm::with_backend(&key, GostBackend::Soft).unwrap();
    let mut tag = [0u8; 8];
    assert!(matches!(
        mgm.seal(&[0x80, 0, 0, 0, 0, 0, 0, 0], &[], &mut b, &mut tag),
        Err(Error::Input(InputError::Nonce(_)))
    ));
    let mut short = [0u8; 3];
    assert!(matches!(
        mgm.seal(&[0; 8], &[], &mut b, &mut short),
        Err(Error::Input(InputError::TagLength { .. }))
    ));
    assert!(matches!(
        magma::CtrAcpkm::new(&key, 12),
        Err(Error::Input(InputError::Length { .. }))
    ));
    let dbg = format!("{e:?}");
    assert!(
        !dbg.contains("16843009") && !dbg.contains("01010101"),
        "debug shows no key: {dbg}"
    );
}
