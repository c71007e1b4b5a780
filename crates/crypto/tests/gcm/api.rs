//! The API contracts: streaming equals one-shot, failures release nothing, argument checks.

use crate::{backends, random_bytes, rng};
use rand::Rng;
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::KeyError;
use sectorcrypt_crypto::{aes::Gcm, Backend, Error};

/// Random cut points of `0..n` (sorted, may repeat, which gives empty pieces).
fn cuts(rng: &mut impl Rng, n: usize) -> Vec<usize> {
    let k = rng.gen_range(0..8);
    let mut v: Vec<usize> = (0..k).map(|_| rng.gen_range(0..=n)).collect();
    if rng.gen_bool(0.3) && n > 20 {
        // Single bytes around a block boundary too.
        v.extend([15, 16, 17]);
    }
    v.push(0);
    v.push(n);
    v.sort_unstable();
    v
}

#[test]
fn streaming_matches_one_shot() {
    let mut rng = rng();
    for backend in backends() {
        for trial in 0..150 {
            let key = random_bytes(&mut rng, [16, 24, 32][trial % 3]);
            let gcm = Gcm::with_backend(&key, backend).unwrap();
            let iv = random_bytes(&mut rng, if trial % 4 == 0 { 1 + trial % 40 } else { 12 });
            let aad_len = rng.gen_range(0..100);
            let aad = random_bytes(&mut rng, aad_len);
            let n = match trial % 3 {
                0 => rng.gen_range(0..100),
                1 => rng.gen_range(0..5000),
                _ => rng.gen_range(8000..20000),
            };
            let pt = random_bytes(&mut rng, n);
            let mut ct = pt.clone();
            let tag = gcm.seal(&iv, &aad, &mut ct).unwrap();

            let c = cuts(&mut rng, n);
            let in_place = rng.gen::<bool>();
            let mut enc = gcm.encryptor(&iv, &aad).unwrap();
            let mut out = pt.clone();
            for w in c.windows(2) {
                if in_place {
                    enc.update_in_place(&mut out[w[0]..w[1]]).unwrap();
                } else {
                    enc.update(&pt[w[0]..w[1]], &mut out[w[0]..w[1]]).unwrap();
                }
            }
            assert!(out == ct, "{backend}: streamed ciphertext, cuts {c:?}");
            assert_eq!(enc.finish(), tag, "{backend}: streamed tag, cuts {c:?}");

            let c = cuts(&mut rng, n);
            let mut dec = gcm.decryptor(&iv, &aad).unwrap();
            let mut back = vec![0u8; n];
            for w in c.windows(2) {
                if in_place {
                    back[w[0]..w[1]].copy_from_slice(&ct[w[0]..w[1]]);
                    dec.update_in_place(&mut back[w[0]..w[1]]).unwrap();
                } else {
                    dec.update(&ct[w[0]..w[1]], &mut back[w[0]..w[1]]).unwrap();
                }
            }
            assert!(back == pt, "{backend}: streamed plaintext, cuts {c:?}");
            let tag_len = 12 + trial % 5;
            dec.finish(&tag[..tag_len]).unwrap();

            // A wrong tag fails the streaming decryptor too.
            let mut dec = gcm.decryptor(&iv, &aad).unwrap();
            let mut scratch = ct.clone();
            dec.update_in_place(&mut scratch).unwrap();
            let mut bad = tag;
            bad[trial % 16] ^= 0x40;
            assert_eq!(dec.finish(&bad), Err(Error::AuthenticationFailed));
        }
    }
}

/// (iv, aad, ciphertext, tag) with one of them changed.
type Tampered = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

#[test]
fn wrong_tag_wipes_the_output_in_place_and_out_of_place() {
    let mut rng = rng();
    for backend in backends() {
        for n in [0usize, 1, 16, 17, 100, 256, 512, 4096, 5000] {
            let key = random_bytes(&mut rng, 32);
            let gcm = Gcm::with_backend(&key, backend).unwrap();
            let iv = random_bytes(&mut rng, 12);
            let aad = random_bytes(&mut rng, 20);
            let pt = random_bytes(&mut rng, n);
            let mut ct = pt.clone();
            let tag = gcm.seal(&iv, &aad, &mut ct).unwrap();
            // Each kind of tampering: tag, ciphertext, aad, iv, truncated-tag bit.
            let mut tampered: Vec<Tampered> = Vec::new();
            let mut t = tag.to_vec();
            t[0] ^= 1;
            tampered.push((iv.clone(), aad.clone(), ct.clone(), t));
            if n > 0 {
                let mut c = ct.clone();
                c[n - 1] ^= 0x80;
                tampered.push((iv.clone(), aad.clone(), c, tag.to_vec()));
            }
            let mut a = aad.clone();
            a[3] ^= 2;
            tampered.push((iv.clone(), a, ct.clone(), tag.to_vec()));
            let mut v = iv.clone();
            v[11] ^= 4;
            tampered.push((v, aad.clone(), ct.clone(), tag.to_vec()));
            let mut t = tag[..12].to_vec();
            t[11] ^= 1;
            tampered.push((iv.clone(), aad.clone(), ct.clone(), t));
            // Refused, and the output (in place: the buffer; out of place: `dst`) all zero.
            let refused = |r: Result<(), Error>, out: &[u8], what: &str| {
                assert_eq!(r, Err(Error::AuthenticationFailed), "{backend}: {what}");
                let wiped = out.iter().all(|&b| b == 0);
                assert!(wiped, "{backend}: {what} of {n} not wiped");
            };
            for (iv, aad, c, t) in tampered {
                let mut buf = c.clone();
                refused(gcm.open(&iv, &aad, &mut buf, &t), &buf, "buffer");
                let mut dst = vec![0x5Au8; n];
                refused(gcm.open_to(&iv, &aad, &c, &mut dst, &t), &dst, "dst");
            }
        }
    }
}

#[test]
fn argument_checks() {
    let gcm = Gcm::with_backend(&[1; 16], Backend::Soft).unwrap();
    let iv = [2u8; 12];
    let mut buf = [0u8; 40];
    // Key sizes.
    assert!(matches!(
        Gcm::with_backend(&[0; 20], Backend::Soft),
        Err(Error::Key(KeyError::Length { .. }))
    ));
    // IV length 0.
    assert!(matches!(
        gcm.seal(&[], b"", &mut buf),
        Err(Error::Input(InputError::IvLength { got: 0, .. }))
    ));
    assert!(matches!(
        gcm.encryptor(&[], b""),
        Err(Error::Input(InputError::IvLength { .. }))
    ));
    // Tag lengths: 12..=16 on the normal API, 4 and 8 only on the short-tag API.
    let tag = gcm.seal(&iv, b"", &mut buf).unwrap();
    for bad in [0usize, 4, 8, 11, 17] {
        let mut t = tag.to_vec();
        t.resize(bad, 0);
        let mut b = buf;
        assert!(
            matches!(
                gcm.open(&iv, b"", &mut b, &t),
                Err(Error::Input(InputError::TagLength { .. }))
            ),
            "{bad}"
        );
        assert_eq!(b, buf, "a tag length error must not touch the buffer");
        let mut dst = [0u8; 40];
        assert!(matches!(
            gcm.open_to(&iv, b"", &buf, &mut dst, &t),
            Err(Error::Input(InputError::TagLength { .. }))
        ));
    }
    for bad in [0usize, 2, 12, 16] {
        let mut t = vec![0u8; bad];
        let mut b = [0u8; 8];
        assert!(matches!(
            gcm.seal_short_tag(&iv, b"", &mut b, &mut t),
            Err(Error::Input(InputError::TagLength { .. }))
        ));
        assert_eq!(b, [0u8; 8], "a tag length error must not encrypt");
        assert!(matches!(
            gcm.open_short_tag(&iv, b"", &mut b, &t),
            Err(Error::Input(InputError::TagLength { .. }))
        ));
    }
    // Short tags round-trip, are prefixes of the full tag, and only the short API takes them.
    for len in [4usize, 8] {
        let pt = *b"short tags are weak";
        let mut full_ct = pt;
        let full = gcm.seal(&iv, b"x", &mut full_ct).unwrap();
        let mut ct = pt;
        let mut t = vec![0u8; len];
        gcm.seal_short_tag(&iv, b"x", &mut ct, &mut t).unwrap();
        assert_eq!(ct, full_ct);
        assert_eq!(t, full[..len]);
        let mut c = ct;
        gcm.open_short_tag(&iv, b"x", &mut c, &t).unwrap();
        assert_eq!(c, pt);
        let mut dec = gcm.decryptor(&iv, b"x").unwrap();
        let mut c = ct;
        dec.update_in_place(&mut c).unwrap();
        assert!(
            matches!(
                dec.finish(&t),
                Err(Error::Input(InputError::TagLength { .. }))
            ),
            "short tag on finish"
        );
        let mut dec = gcm.decryptor(&iv, b"x").unwrap();
        let mut c = ct;
        dec.update_in_place(&mut c).unwrap();
        dec.finish_short_tag(&t).unwrap();
        let mut bad = t.clone();
        bad[0] ^= 1;
        let mut c = ct;
        assert_eq!(
            gcm.open_short_tag(&iv, b"x", &mut c, &bad),
            Err(Error::AuthenticationFailed)
        );
        assert!(c.iter().all(|&x| x == 0));
    }
    // Out-of-place length mismatch.
    let mut small = [0u8; 39];
    assert!(matches!(
        gcm.seal_to(&iv, b"", &buf, &mut small),
        Err(Error::Input(InputError::LengthMismatch { .. }))
    ));
    let mut enc = gcm.encryptor(&iv, b"").unwrap();
    assert!(matches!(
        enc.update(&buf, &mut small),
        Err(Error::Input(InputError::LengthMismatch { .. }))
    ));
    // Debug shows the backend and never key material.
    let dbg = format!("{gcm:?}");
    assert!(dbg.contains("Soft") && !dbg.contains("01, 01"), "{dbg}");
}

/// A Gcm built with a backend really uses that backend (and its GHASH: the constructor
/// fails rather than silently falling back).
#[test]
fn backend_is_the_one_asked_for() {
    for b in backends() {
        assert_eq!(Gcm::with_backend(&[3; 24], b).unwrap().backend(), b);
    }
    for b in Backend::ALL {
        if let Err(e) = b.ensure_usable() {
            let r = Gcm::with_backend(&[3; 16], b);
            assert!(r.is_err(), "{b} unusable ({e}) but Gcm built");
        }
    }
    if sectorcrypt_crypto::cpu::features().vpclmulqdq && sectorcrypt_crypto::cpu::features().vaes {
        assert_eq!(
            Gcm::with_backend(&[3; 32], Backend::Vaes)
                .unwrap()
                .backend(),
            Backend::Vaes
        );
    }
}
