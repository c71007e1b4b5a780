//! Differential tests: against OpenSSL's EVP AES-GCM, and each GHASH backend against the
//! soft GHASH.

use crate::ghash_backends;
use crate::{backends, each_key, random_bytes, rng};
use openssl::symm::{decrypt_aead, encrypt_aead, Cipher};
use rand::Rng;
use sectorcrypt_crypto::aes::Gcm;
use sectorcrypt_crypto::hazmat::{Ghash, GhashBackend};

fn cipher(key_len: usize) -> Cipher {
    match key_len {
        16 => Cipher::aes_128_gcm(),
        24 => Cipher::aes_192_gcm(),
        32 => Cipher::aes_256_gcm(),
        _ => unreachable!(),
    }
}

/// The lengths every boundary test sweeps.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=129).collect();
    v.extend([4095, 4096, 4097, 16383, 16384, 16385]);
    v
}

/// Seals with `gcm` (in place, and out of place for full tags) and with OpenSSL, compares,
/// then opens each other's output.
pub(crate) fn compare(gcm: &Gcm, key: &[u8], iv: &[u8], aad: &[u8], pt: &[u8], tag_len: usize) {
    let ctx = format!(
        "{} key {} bytes, iv {} bytes, aad {} bytes, msg {} bytes, tag {tag_len}",
        gcm.backend(),
        key.len(),
        iv.len(),
        aad.len(),
        pt.len()
    );
    let mut want_tag = vec![0u8; tag_len];
    let want = encrypt_aead(cipher(key.len()), key, Some(iv), aad, pt, &mut want_tag).unwrap();
    let mut got = pt.to_vec();
    let tag = if tag_len >= 12 {
        gcm.seal(iv, aad, &mut got).unwrap()[..tag_len].to_vec()
    } else {
        let mut t = vec![0u8; tag_len];
        gcm.seal_short_tag(iv, aad, &mut got, &mut t).unwrap();
        t
    };
    assert!(got == want, "{ctx}: ciphertext differs from openssl");
    assert_eq!(
        hex::encode(&tag),
        hex::encode(&want_tag),
        "{ctx}: tag differs from openssl"
    );
    if tag_len >= 12 {
        let mut dst = vec![0x5a; pt.len()];
        let tag_to = gcm.seal_to(iv, aad, pt, &mut dst).unwrap();
        assert!(
            dst == want,
            "{ctx}: seal_to ciphertext differs from openssl"
        );
        assert_eq!(tag_to[..tag_len], want_tag[..], "{ctx}: seal_to tag");
    }
    let back = decrypt_aead(cipher(key.len()), key, Some(iv), aad, &got, &tag).unwrap();
    assert!(back == pt, "{ctx}: openssl cannot open ours");
    let mut buf = want.clone();
    if tag_len >= 12 {
        gcm.open(iv, aad, &mut buf, &want_tag).unwrap();
        let mut dst = vec![0u8; pt.len()];
        gcm.open_to(iv, aad, &want, &mut dst, &want_tag).unwrap();
        assert!(dst == pt, "{ctx}: open_to");
    } else {
        gcm.open_short_tag(iv, aad, &mut buf, &want_tag).unwrap();
    }
    assert!(buf == pt, "{ctx}: open");
}

#[test]
fn matches_openssl_at_boundary_lengths() {
    let mut rng = rng();
    let lens = lengths();
    for backend in backends() {
        let mut runs = 0;
        for key_len in [16, 24, 32] {
            let key = random_bytes(&mut rng, key_len);
            let gcm = Gcm::with_backend(&key, backend).unwrap();
            // Message lengths x a rotating AAD length, then AAD lengths x a rotating message.
            for (i, &n) in lens.iter().enumerate() {
                let aad_len = lens[(i * 7 + key_len) % lens.len()] % 200;
                let iv = random_bytes(&mut rng, 12);
                let aad = random_bytes(&mut rng, aad_len);
                let pt = random_bytes(&mut rng, n);
                compare(&gcm, &key, &iv, &aad, &pt, 16);
                let msg_len = lens[(i * 5 + key_len) % lens.len()] % 300;
                let aad = random_bytes(&mut rng, n);
                let pt = random_bytes(&mut rng, msg_len);
                compare(&gcm, &key, &iv, &aad, &pt, 16);
                runs += 2;
            }
        }
        eprintln!("openssl differential, {backend}: {runs} messages");
    }
}

/// Every AES backend with every GHASH backend (a pair of different backends runs CTR and
/// GHASH as two passes; a pair of the same one, the stitched kernel): lengths around every
/// group size and 16 KiB, with and without AAD, against OpenSSL.
#[test]
fn every_aes_and_ghash_backend_pair_matches_openssl() {
    let mut rng = rng();
    let (all, ghashes) = (backends(), ghash_backends());
    let lens = [
        0usize, 1, 15, 16, 17, 255, 256, 257, 511, 512, 513, 1024, 4095, 4096, 4097, 16383, 16384,
        16385,
    ];
    for &aes in &all {
        for &gh in &ghashes {
            let key = random_bytes(&mut rng, 32);
            let gcm = Gcm::with_backend_pair(&key, aes, gh).unwrap();
            for (i, &n) in lens.iter().enumerate() {
                let iv = random_bytes(&mut rng, 12);
                let aad = random_bytes(&mut rng, [0, 20, 129][i % 3]);
                let pt = random_bytes(&mut rng, n);
                compare(&gcm, &key, &iv, &aad, &pt, 16);
            }
        }
        eprintln!("aes {aes} x ghash {ghashes:?}: matches openssl");
    }
}

/// Messages of whole kernel groups (256 bytes for vaes, 512 for avx512), which take the
/// one-pass path: 1 to 9 groups (the avx512 kernel reduces two groups at a time, so odd and
/// even counts end differently, and a one-group message has its own code), each key size,
/// with and without AAD, and with a 12-byte and a 16-byte IV (the latter starts the counter
/// at an arbitrary 32-bit value), compared with OpenSSL in place and out of place.
#[test]
fn matches_openssl_for_whole_group_messages() {
    each_key(&[16, 24, 32], |rng, gcm, key| {
        for groups in 1..=9 {
            for (aad_len, iv_len) in [(0, 12), (13, 12), (0, 16), (40, 16)] {
                let iv = random_bytes(rng, iv_len);
                let aad = random_bytes(rng, aad_len);
                for group in [256, 512] {
                    let pt = random_bytes(rng, groups * group);
                    compare(gcm, key, &iv, &aad, &pt, 16);
                }
            }
        }
    });
}

#[test]
fn matches_openssl_with_other_iv_lengths_and_tags() {
    each_key(&[16, 24, 32], |rng, gcm, key| {
        for iv_len in [1, 8, 12, 16, 60, 64, 100] {
            for n in [0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4097] {
                let iv = random_bytes(rng, iv_len);
                let aad_len = rng.gen_range(0..40);
                let aad = random_bytes(rng, aad_len);
                let pt = random_bytes(rng, n);
                let tag_len = [16, 15, 14, 13, 12, 8, 4][(n + iv_len) % 7];
                compare(gcm, key, &iv, &aad, &pt, tag_len);
            }
        }
    });
}

/// Each backend's GHASH equals the soft GHASH on 0..=40 blocks (every group size and tail
/// of the aggregated kernels), random H and random starting state, one call and split.
#[test]
fn ghash_backends_match_soft() {
    let mut rng = rng();
    for backend in ghash_backends() {
        if backend == GhashBackend::Soft {
            continue;
        }
        for trial in 0..200 {
            let h: [u8; 16] = rng.gen();
            let y: [u8; 16] = if trial % 3 == 0 { [0; 16] } else { rng.gen() };
            let soft = Ghash::with_backend(&h, GhashBackend::Soft).unwrap();
            let fast = Ghash::with_backend(&h, backend).unwrap();
            let n = trial % 41;
            let data = random_bytes(&mut rng, 16 * n);
            let want = soft.update(&y, &data).unwrap();
            assert_eq!(
                fast.update(&y, &data).unwrap(),
                want,
                "{backend} ghash, {n} blocks"
            );
            let cut = 16 * rng.gen_range(0..=n);
            let mid = fast.update(&y, &data[..cut]).unwrap();
            assert_eq!(
                fast.update(&mid, &data[cut..]).unwrap(),
                want,
                "{backend} split at {cut}"
            );
        }
        // Long inputs: many full groups plus a tail.
        let h: [u8; 16] = rng.gen();
        let data = random_bytes(&mut rng, 16 * 1001);
        let soft = Ghash::with_backend(&h, GhashBackend::Soft).unwrap();
        let fast = Ghash::with_backend(&h, backend).unwrap();
        assert_eq!(
            fast.update(&[0; 16], &data).unwrap(),
            soft.update(&[0; 16], &data).unwrap()
        );
        // All-ones operands exercise every carry-less column at full height.
        let ones = vec![0xffu8; 16 * 40];
        let soft = Ghash::with_backend(&[0xff; 16], GhashBackend::Soft).unwrap();
        let fast = Ghash::with_backend(&[0xff; 16], backend).unwrap();
        assert_eq!(
            fast.update(&[0xff; 16], &ones).unwrap(),
            soft.update(&[0xff; 16], &ones).unwrap()
        );
        eprintln!("ghash {backend} == soft");
    }
}

/// Every backend gives the same result for the same inputs, including 101 blocks (no
/// multiple of any parallel width) and random lengths.
#[test]
fn backends_agree() {
    let mut rng = rng();
    let backends = backends();
    for _ in 0..30 {
        let key_len = [16, 24, 32][rng.gen_range(0..3)];
        let key = random_bytes(&mut rng, key_len);
        let iv_len = if rng.gen() { 12 } else { rng.gen_range(1..70) };
        let iv = random_bytes(&mut rng, iv_len);
        let aad_len = rng.gen_range(0..300);
        let aad = random_bytes(&mut rng, aad_len);
        let n = if rng.gen() {
            101 * 16
        } else {
            rng.gen_range(0..10000)
        };
        let pt = random_bytes(&mut rng, n);
        let mut results = Vec::new();
        for &b in &backends {
            let mut buf = pt.clone();
            let tag = Gcm::with_backend(&key, b)
                .unwrap()
                .seal(&iv, &aad, &mut buf)
                .unwrap();
            results.push((b, buf, tag));
        }
        for r in &results[1..] {
            assert!(
                r.1 == results[0].1 && r.2 == results[0].2,
                "{} != {}",
                r.0,
                results[0].0
            );
        }
    }
}

/// GF(2^128) product in GCM's bit order (SP 800-38D, Algorithm 1), on big-endian integers.
fn gf_mul(x: u128, y: u128) -> u128 {
    let (mut z, mut v) = (0u128, y);
    for i in 0..128 {
        if (x >> (127 - i)) & 1 == 1 {
            z ^= v;
        }
        v = if v & 1 == 1 {
            (v >> 1) ^ (0xE1 << 120)
        } else {
            v >> 1
        };
    }
    z
}

/// `h^-1 = h^(2^128 - 2)`, by square and multiply.
fn gf_inv(h: u128) -> u128 {
    let mut r = 1u128 << 127; // the field's one in this bit order
    for bit in (0..128).rev() {
        r = gf_mul(r, r);
        if bit != 0 {
            r = gf_mul(r, h);
        }
    }
    r
}

/// A 16-byte IV whose J0 = GHASH(IV || 0^64 || [128]_64) is `j0`: J0 = ((IV.H) ^ L).H, so
/// IV = ((J0.H^-1) ^ L).H^-1.
pub(crate) fn iv_for_j0(key: &[u8], j0: u128) -> [u8; 16] {
    let mut c = openssl::symm::Crypter::new(
        match key.len() {
            16 => Cipher::aes_128_ecb(),
            24 => Cipher::aes_192_ecb(),
            _ => Cipher::aes_256_ecb(),
        },
        openssl::symm::Mode::Encrypt,
        key,
        None,
    )
    .unwrap();
    c.pad(false);
    let mut h = [0u8; 32];
    c.update(&[0u8; 16], &mut h).unwrap();
    let h_inv = gf_inv(u128::from_be_bytes(h[..16].try_into().unwrap()));
    assert_eq!(
        gf_mul(h_inv, u128::from_be_bytes(h[..16].try_into().unwrap())),
        1u128 << 127
    );
    gf_mul(gf_mul(j0, h_inv) ^ 128, h_inv).to_be_bytes()
}

/// GCM's counter increments only its low 32 bits: a message whose counter wraps there, the
/// wrap placed at every position relative to the backends' groups of 8, 16 and 32 blocks
/// (and so the counter's last byte carrying at every position of a group), in one shot and
/// streamed, compared with OpenSSL.
#[test]
fn counter_wraps_its_low_32_bits() {
    let mut rng = rng();
    let key = random_bytes(&mut rng, 32);
    let positions =
        (1u128..=66).chain([100, 220, 221, 222, 223, 224, 255, 256, 257, 511, 512, 513]);
    for before_wrap in positions {
        // The first data block uses inc32(J0): `before_wrap` blocks until the low word wraps.
        let j0 = (0x0123_4567_89ab_cdef_0011_2233u128 << 32) | (0xFFFF_FFFF - before_wrap);
        let iv = iv_for_j0(&key, j0);
        for backend in backends() {
            let gcm = Gcm::with_backend(&key, backend).unwrap();
            // One-pass lengths (whole groups; on avx512 any length) must be declined when
            // the counter wraps inside the message and taken when it ends at the wrap.
            for len in [
                16 * before_wrap as usize,
                16 * before_wrap as usize + 1,
                512,
                8192,
                8192 + 5,
            ] {
                let pt = random_bytes(&mut rng, len);
                compare(&gcm, &key, &iv, b"aad", &pt, 16);
                // Streamed in uneven pieces.
                let mut enc = gcm.encryptor(&iv, b"aad").unwrap();
                let mut out = pt.clone();
                let mut at = 0;
                while at < len {
                    let n = rng.gen_range(1..=700).min(len - at);
                    enc.update_in_place(&mut out[at..at + n]).unwrap();
                    at += n;
                }
                let tag = enc.finish();
                let mut want_tag = [0u8; 16];
                let want = encrypt_aead(
                    Cipher::aes_256_gcm(),
                    &key,
                    Some(&iv),
                    b"aad",
                    &pt,
                    &mut want_tag,
                )
                .unwrap();
                assert!(
                    out == want,
                    "{backend}: streamed ciphertext, wrap after {before_wrap}"
                );
                assert_eq!(
                    tag, want_tag,
                    "{backend}: streamed tag, wrap after {before_wrap}"
                );
            }
        }
    }
}

/// Every message length 0..=600 (none, one and two groups of the vaes kernel, with every
/// tail), each key size, a 12-byte and a 13-byte IV: E_K(J0) is computed inside the stitched
/// kernel when the message has a whole group and separately otherwise; both must match
/// OpenSSL.
#[test]
fn matches_openssl_at_every_length_to_600() {
    each_key(&[16, 24, 32], |rng, gcm, key| {
        for iv_len in [12, 13] {
            let iv = random_bytes(rng, iv_len);
            let aad_len = rng.gen_range(0..40);
            let aad = random_bytes(rng, aad_len);
            for len in 0..=600 {
                let pt = random_bytes(rng, len);
                compare(gcm, key, &iv, &aad, &pt, 16);
            }
        }
    });
}

/// Streaming where the first piece has no whole group and a later one does (E_K(J0) then
/// comes from the later stitched call), and where no piece has one (from `finish`).
#[test]
fn streaming_computes_e_k_j0_in_a_later_piece() {
    each_key(&[32], |rng, gcm, key| {
        let backend = gcm.backend();
        let iv = random_bytes(rng, 12);
        for (len, cuts) in [
            (1000, vec![0, 100, 1000]),
            (1000, vec![0, 255, 256, 600, 1000]),
            (1000, vec![0, 1, 17, 700, 1000]),
            (600, vec![0, 200, 400, 600]),
            (300, vec![0, 16, 32, 300]),
        ] {
            let pt = random_bytes(rng, len);
            let mut want_tag = [0u8; 16];
            let want =
                encrypt_aead(cipher(32), key, Some(&iv), b"hdr", &pt, &mut want_tag).unwrap();
            let mut enc = gcm.encryptor(&iv, b"hdr").unwrap();
            let mut ct = vec![0u8; len];
            for w in cuts.windows(2) {
                enc.update(&pt[w[0]..w[1]], &mut ct[w[0]..w[1]]).unwrap();
            }
            assert!(ct == want, "{backend} {len} {cuts:?}: ciphertext");
            assert_eq!(enc.finish(), want_tag, "{backend} {len} {cuts:?}: tag");
            let mut dec = gcm.decryptor(&iv, b"hdr").unwrap();
            let mut back = vec![0u8; len];
            for w in cuts.windows(2) {
                dec.update(&want[w[0]..w[1]], &mut back[w[0]..w[1]])
                    .unwrap();
            }
            dec.finish(&want_tag).unwrap();
            assert!(back == pt, "{backend} {len} {cuts:?}: plaintext");
        }
    });
}
