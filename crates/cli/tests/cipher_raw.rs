//! `sectorcrypt cipher` with the raw AES modes (one message, an explicit IV) against
//! OpenSSL under every backend, and `aes-ecb` without a sector option: any whole number
//! of 16-byte blocks.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/cipher.rs"]
mod cipher;
mod support;

use sectorcrypt_testkit::reference;

use cipher::refused;
use openssl::symm::Mode;
use sectorcrypt_testkit::{hex, pattern};
use support::{ok_bytes, sc_on};

/// Encrypts `data` with the raw mode `name` (`aes-MODE`) on `backend`, compares the
/// result with OpenSSL's, and decrypts it back; `iv` is `None` for ECB.
fn matches_openssl(backend: &str, name: &str, key: &[u8], iv: Option<&[u8]>, data: &[u8]) {
    let mode = name.strip_prefix("aes-").expect("an aes mode");
    let (k, v) = (hex(key), iv.map(hex));
    let mut args = vec!["cipher", "encrypt", "--cipher", name, "--key", &k];
    if let Some(v) = &v {
        args.extend(["--iv", v]);
    }
    let enc = ok_bytes(sc_on(&args, data, Some(backend)));
    let cipher = reference::aes(mode, key.len());
    let want = reference::evp(cipher, Mode::Encrypt, key, iv, data);
    assert_eq!(enc, want, "{name} {} bytes on {backend}", data.len());
    args[1] = "decrypt";
    let back = ok_bytes(sc_on(&args, &enc, Some(backend)));
    assert_eq!(
        back,
        data,
        "{name} decrypt of {} bytes on {backend}",
        data.len()
    );
}

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
            let iv = (name != "aes-ecb").then(|| pattern(16, seed + 1));
            let data = pattern(len, seed + 2);
            matches_openssl(b, name, &pattern(key_len, seed), iv.as_deref(), &data);
        }
    }
}

/// ECB has no IV, so without a sector option `aes-ecb` takes whole blocks, not whole
/// 512-byte sectors; anything else is refused before a byte is written.
#[test]
fn aes_ecb_takes_whole_blocks_without_a_sector_option() {
    for b in backends::aes() {
        for (len, key_len) in [(16, 16), (32, 24), (48, 32), (4112, 16)] {
            let key = pattern(key_len, len as u64);
            matches_openssl(b, "aes-ecb", &key, None, &pattern(len, 1));
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
