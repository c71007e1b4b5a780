//! `sectorcrypt cipher` with the raw AES modes (one message, an explicit IV) against
//! OpenSSL under every backend, and `aes-ecb` without a sector option: any whole number
//! of 16-byte blocks.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/cipher.rs"]
mod cipher;
#[path = "support/openssl.rs"]
mod reference;
mod support;

use cipher::refused;
use openssl::symm::Mode;
use reference::evp;
use sectorcrypt_testkit::{hex, pattern};
use support::{ok_bytes, sc_on};

#[test]
fn raw_modes_match_openssl_under_every_backend() {
    for b in backends::aes() {
        for (i, (name, key_len, len)) in [
            ("aes-ecb", 16, 4096),
            ("aes-cbc", 24, 1024),
            ("aes-cbc", 32, 16),
            ("aes-ctr", 32, 1001),
            ("aes-ctr", 16, 0),
            ("aes-xts", 64, 4097),
            ("aes-xts", 32, 17),
        ]
        .into_iter()
        .enumerate()
        {
            let seed = 10 * i as u64;
            let mode = name.strip_prefix("aes-").expect("an aes mode");
            let (key, iv, data) = (
                pattern(key_len, seed),
                pattern(16, seed + 1),
                pattern(len, seed + 2),
            );
            let (k, v) = (hex(&key), hex(&iv));
            let mut args = vec!["cipher", "encrypt", "--cipher", name, "--key", &k];
            let iv = if mode == "ecb" {
                None
            } else {
                args.extend(["--iv", &v]);
                Some(&iv[..])
            };
            let enc = ok_bytes(sc_on(&args, &data, Some(b)));
            let want = evp(
                reference::aes(mode, key_len),
                Mode::Encrypt,
                &key,
                iv,
                &data,
            );
            assert_eq!(enc, want, "{name} {len} bytes on {b}");
            args[1] = "decrypt";
            let back = ok_bytes(sc_on(&args, &enc, Some(b)));
            assert_eq!(back, data, "{name} decrypt on {b}");
        }
    }
}

/// ECB has no IV, so without a sector option `aes-ecb` takes whole blocks, not whole
/// 512-byte sectors; anything else is refused before a byte is written.
#[test]
fn aes_ecb_takes_whole_blocks_without_a_sector_option() {
    for b in backends::aes() {
        for (len, key_len) in [(16, 16), (32, 24), (48, 32), (4112, 16)] {
            let (key, data) = (pattern(key_len, len as u64), pattern(len, 1));
            let k = hex(&key);
            let mut args = vec!["cipher", "encrypt", "--cipher", "aes-ecb", "--key", &k];
            let enc = ok_bytes(sc_on(&args, &data, Some(b)));
            let want = evp(
                reference::aes("ecb", key_len),
                Mode::Encrypt,
                &key,
                None,
                &data,
            );
            assert_eq!(enc, want, "aes-ecb {len} bytes on {b}");
            args[1] = "decrypt";
            assert_eq!(ok_bytes(sc_on(&args, &enc, Some(b))), data, "{len} on {b}");
        }
    }
    let k = hex(&pattern(32, 2));
    for direction in ["encrypt", "decrypt"] {
        for len in [15, 17] {
            let args = ["cipher", direction, "--cipher", "aes-ecb", "--key", &k];
            refused(&args, &pattern(len, 3), "multiple of 16");
        }
    }
}
