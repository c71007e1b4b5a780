//! `sectorcrypt cipher` refusing bad usage and bad input with the AES ciphers: exit 2, one
//! line on stderr, nothing written (the GOST ones are in `cipher_gost.rs`).

#[path = "support/cipher.rs"]
mod cipher;
mod support;

use cipher::refused;
use support::{code, sc};

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let k32 = "00112233445566778899aabbccddeeff".repeat(2);
    let k64 = format!("{}{}", "11".repeat(32), "22".repeat(32));
    let equal = "ab".repeat(64);
    let iv = "00".repeat(16);
    let cases: [(&[&str], usize, &str); 13] = [
        (
            &["--cipher", "aes-xts-plain64", "--key", "zz"],
            512,
            "not valid hex",
        ),
        (
            &["--cipher", "aes-xts-plain64", "--key", &k32[..30]],
            512,
            "invalid key length",
        ),
        (
            &["--cipher", "aes-cbc-plain64", "--key", &k64],
            512,
            "invalid key length",
        ),
        (
            &["--cipher", "aes-xts-plain64", "--key", &equal],
            512,
            "equal",
        ),
        (
            &["--cipher", "aes-xts-plain64", "--key", &k64],
            700,
            "whole number of sectors",
        ),
        (
            &["--cipher", "aes-cbc", "--key", &k32, "--iv", &iv],
            33,
            "multiple of 16",
        ),
        (
            &["--cipher", "aes-xts", "--key", &k64, "--iv", &iv],
            15,
            "at least 16 bytes",
        ),
        (&["--cipher", "aes-cbc", "--key", &k32], 32, "needs --iv"),
        (
            &["--cipher", "aes-cbc", "--key", &k32, "--iv", "0011"],
            32,
            "16 bytes",
        ),
        (
            &["--cipher", "serpent-xts-plain64", "--key", &k64],
            512,
            "unknown cipher",
        ),
        (
            &[
                "--cipher",
                "aes-xts-plain64",
                "--key",
                &k64,
                "--sector-size",
                "100",
            ],
            100,
            "sector size",
        ),
        (
            &["--cipher", "aes-xts-plain64", "--key", &k64, "--iv", &iv],
            512,
            "--iv",
        ),
        (
            &[
                "--cipher", "aes-ctr", "--key", &k32, "--iv", &iv, "--sector", "3",
            ],
            5,
            "--sector",
        ),
    ];
    for (extra, len, msg) in cases {
        let args = [&["cipher", "encrypt"][..], extra].concat();
        refused(&args, &vec![0; len], msg);
    }
    // Both key options, or neither: a usage error from the parser (also exit 2).
    let out = sc(&["cipher", "encrypt", "--cipher", "aes-ecb"], b"");
    assert_eq!(code(&out), 2);
}
