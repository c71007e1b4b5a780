//! AES-CCM: the published examples of NIST SP 800-38C (Appendix C) and RFC 3610 (section
//! 8), OpenSSL's CCM as a differential oracle over nonce, tag, AAD and message lengths,
//! and a wrong tag that zeroes the buffer.

use openssl::cipher::Cipher;
use openssl::cipher_ctx::CipherCtx;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sectorcrypt_crypto::aes::Ccm;
use sectorcrypt_crypto::Error;

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).unwrap()
}

/// (key, nonce, aad, plaintext, ciphertext || tag, tag length).
const VECTORS: &[(&str, &str, &str, &str, &str, usize)] = &[
    // SP 800-38C, C.1 (Example 1).
    (
        "404142434445464748494a4b4c4d4e4f",
        "10111213141516",
        "0001020304050607",
        "20212223",
        "7162015b 4dac255d",
        4,
    ),
    // SP 800-38C, C.2 (Example 2).
    (
        "404142434445464748494a4b4c4d4e4f",
        "1011121314151617",
        "000102030405060708090a0b0c0d0e0f",
        "202122232425262728292a2b2c2d2e2f",
        "d2a1f0e051ea5f62081a7792073d593d 1fc64fbfaccd",
        6,
    ),
    // SP 800-38C, C.3 (Example 3): a 12-byte nonce, as BitLocker's.
    (
        "404142434445464748494a4b4c4d4e4f",
        "101112131415161718191a1b",
        "000102030405060708090a0b0c0d0e0f10111213",
        "202122232425262728292a2b2c2d2e2f3031323334353637",
        "e3b201a9f5b71a7a9b1ceaeccd97e70b6176aad9a4428aa5 484392fbc1b09951",
        8,
    ),
    // RFC 3610, packet vector #1.
    (
        "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf",
        "00000003020100a0a1a2a3a4a5",
        "0001020304050607",
        "08090a0b0c0d0e0f101112131415161718191a1b1c1d1e",
        "588c979a61c663d2f066d0c2c0f989806d5f6b61dac384 17e8d12cfdf926e0",
        8,
    ),
];

#[test]
fn ccm_published_vectors_seal_and_open() {
    for &(key, nonce, aad, plain, sealed, tag_len) in VECTORS {
        let (key, nonce, aad, plain, sealed) = (h(key), h(nonce), h(aad), h(plain), h(sealed));
        let ccm = Ccm::new(&key).unwrap();
        let mut buf = plain.clone();
        let tag = ccm.seal(&nonce, &aad, &mut buf, tag_len).unwrap();
        buf.extend_from_slice(&tag);
        assert_eq!(
            hex::encode(&buf),
            hex::encode(&sealed),
            "nonce {}",
            hex::encode(&nonce)
        );
        let (ct, tag) = sealed.split_at(plain.len());
        let mut buf = ct.to_vec();
        ccm.open(&nonce, &aad, &mut buf, tag).unwrap();
        assert_eq!(buf, plain);
    }
}

#[test]
fn ccm_wrong_tag_zeroes_the_buffer() {
    let ccm = Ccm::new(&[7u8; 32]).unwrap();
    let nonce = [1u8; 12];
    let mut buf = vec![0x5au8; 44];
    let mut tag = ccm.seal(&nonce, &[], &mut buf, 16).unwrap();
    tag[15] ^= 1;
    let err = ccm.open(&nonce, &[], &mut buf, &tag).unwrap_err();
    assert!(matches!(err, Error::AuthenticationFailed), "{err}");
    assert!(
        buf.iter().all(|&b| b == 0),
        "unauthenticated output released"
    );
}

#[test]
fn ccm_refuses_bad_nonce_and_tag_lengths() {
    let ccm = Ccm::new(&[7u8; 16]).unwrap();
    let mut buf = [0u8; 16];
    assert!(ccm.seal(&[0; 6], &[], &mut buf, 16).is_err());
    assert!(ccm.seal(&[0; 14], &[], &mut buf, 16).is_err());
    assert!(ccm.seal(&[0; 12], &[], &mut buf, 5).is_err());
    assert!(ccm.seal(&[0; 12], &[], &mut buf, 18).is_err());
    // A 13-byte nonce leaves a 2-byte length field: 65536 bytes do not fit.
    let mut big = vec![0u8; 65536];
    assert!(ccm.seal(&[0; 13], &[], &mut big, 16).is_err());
}

#[test]
fn ccm_matches_openssl() {
    let mut rng = StdRng::seed_from_u64(0xcc3);
    for round in 0..300 {
        let key_len = [16, 24, 32][round % 3];
        let cipher = match key_len {
            16 => Cipher::aes_128_ccm(),
            24 => Cipher::aes_192_ccm(),
            _ => Cipher::aes_256_ccm(),
        };
        let nonce_len = rng.gen_range(7..=13);
        let tag_len = [4, 6, 8, 10, 12, 14, 16][rng.gen_range(0..7)];
        let aad_len = [0, 1, 15, 16, 17, 300, 65300][rng.gen_range(0..7)];
        let len = rng.gen_range(0..200);
        let key: Vec<u8> = (0..key_len).map(|_| rng.gen()).collect();
        let nonce: Vec<u8> = (0..nonce_len).map(|_| rng.gen()).collect();
        let aad: Vec<u8> = (0..aad_len).map(|_| rng.gen()).collect();
        let plain: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let (want, want_tag) = openssl_seal(cipher, &key, &nonce, &aad, &plain, tag_len);
        let ccm = Ccm::new(&key).unwrap();
        let mut buf = plain.clone();
        let tag = ccm.seal(&nonce, &aad, &mut buf, tag_len).unwrap();
        assert_eq!(buf, want, "round {round}");
        assert_eq!(tag, want_tag, "round {round}");
        ccm.open(&nonce, &aad, &mut buf, &tag).unwrap();
        assert_eq!(buf, plain, "round {round}");
    }
}

/// OpenSSL's CCM seal: (ciphertext, tag). The nonce and tag lengths are set before the
/// key, the message length before the AAD, as OpenSSL's CCM requires.
fn openssl_seal(
    cipher: &openssl::cipher::CipherRef,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    plain: &[u8],
    tag_len: usize,
) -> (Vec<u8>, Vec<u8>) {
    let mut ctx = CipherCtx::new().unwrap();
    ctx.encrypt_init(Some(cipher), None, None).unwrap();
    ctx.set_iv_length(nonce.len()).unwrap();
    ctx.set_tag_length(tag_len).unwrap();
    ctx.encrypt_init(None, Some(key), Some(nonce)).unwrap();
    ctx.set_data_len(plain.len()).unwrap();
    if !aad.is_empty() {
        ctx.cipher_update(aad, None).unwrap();
    }
    let mut out = vec![0u8; plain.len() + 16];
    let n = ctx.cipher_update(plain, Some(&mut out)).unwrap();
    let m = ctx.cipher_final(&mut out[n..]).unwrap();
    out.truncate(n + m);
    let mut tag = vec![0u8; tag_len];
    ctx.tag(&mut tag).unwrap();
    (out, tag)
}
