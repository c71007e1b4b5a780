//! `sectorcrypt cipher` with AES-GCM against OpenSSL under every backend: ciphertext then
//! tag, tags of 16 to 12 bytes, IVs of any length, and a forged tag refused (exit 1,
//! nothing written).

#[path = "support/backends.rs"]
mod backends;
mod support;

use sectorcrypt_testkit::reference;

use sectorcrypt_testkit::{hex, pattern};
use support::{code, ok_bytes, sc_on};

#[test]
fn gcm_matches_openssl_and_refuses_a_bad_tag() {
    for b in backends::aes() {
        for (i, (key_len, iv_len, len, tag_len)) in [
            (16usize, 12usize, 0usize, 16usize),
            (32, 12, 1000, 16),
            (24, 8, 77, 12),
            (32, 60, 4097, 14),
            // Short tags (SP 800-38D appendix C), behind their own entry points.
            (16, 12, 100, 8),
            (32, 12, 33, 4),
        ]
        .into_iter()
        .enumerate()
        {
            let seed = 10 * i as u64;
            let (key, iv, aad, data) = (
                pattern(key_len, seed),
                pattern(iv_len, seed + 1),
                pattern(20, seed + 2),
                pattern(len, seed + 3),
            );
            let (k, v, a, t) = (hex(&key), hex(&iv), hex(&aad), tag_len.to_string());
            let mut args = vec!["cipher", "encrypt", "--cipher", "aes-gcm", "--key", &k];
            args.extend(["--iv", &v, "--aad", &a, "--tag-len", &t]);
            let sealed = ok_bytes(sc_on(&args, &data, Some(b)));
            let mut tag = vec![0u8; tag_len];
            let cipher = reference::aes("gcm", key_len);
            let ct = openssl::symm::encrypt_aead(cipher, &key, Some(&iv), &aad, &data, &mut tag)
                .expect("openssl gcm");
            assert_eq!(sealed, [ct, tag].concat(), "gcm {len} bytes on {b}");
            args[1] = "decrypt";
            assert_eq!(ok_bytes(sc_on(&args, &sealed, Some(b))), data);
            let mut forged = sealed.clone();
            *forged.last_mut().expect("a tag") ^= 1;
            let bad = sc_on(&args, &forged, Some(b));
            assert_eq!(code(&bad), 1, "forged tag on {b}");
            assert!(bad.stdout.is_empty());
            assert!(String::from_utf8_lossy(&bad.stderr).contains("authentication failed"));
        }
    }
}
