//! `sectorcrypt cipher` refusing bad usage and bad input with the AES ciphers: exit 2, one
//! line on stderr, nothing written (the GOST ones are in `cipher_gost.rs`).

#[path = "support/cipher.rs"]
mod cipher;
mod support;

use cipher::refused;
use support::{code, s, sc};

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let k32 = "00112233445566778899aabbccddeeff".repeat(2);
    let k64 = format!("{}{}", "11".repeat(32), "22".repeat(32));
    let equal = "ab".repeat(64);
    let iv = "00".repeat(16);
    // `cipher encrypt --cipher CIPHER --key KEY OPTIONS` of LEN bytes.
    let cases: [(&str, &str, &[&str], usize, &str); 16] = [
        ("aes-xts-plain64", "zz", &[], 512, "not valid hex"),
        (
            "aes-xts-plain64",
            &k32[..30],
            &[],
            512,
            "invalid key length",
        ),
        ("aes-cbc-plain64", &k64, &[], 512, "invalid key length"),
        ("aes-xts-plain64", &equal, &[], 512, "equal"),
        ("aes-xts-plain64", &k64, &[], 700, "whole number of sectors"),
        ("aes-cbc", &k32, &["--iv", &iv], 33, "multiple of 16"),
        ("aes-xts", &k64, &["--iv", &iv], 15, "at least 16 bytes"),
        ("aes-cbc", &k32, &[], 32, "needs --iv"),
        ("aes-cbc", &k32, &["--iv", "0011"], 32, "16 bytes"),
        ("blowfish-xts-plain64", &k64, &[], 512, "unknown cipher"),
        ("serpent-lrw-benbi", &k32, &[], 512, "unknown cipher"),
        (
            "kuznyechik-xts-plain64",
            &k32,
            &[],
            512,
            "invalid key length",
        ),
        ("serpent-cbc-plain64", &k64, &[], 512, "invalid key length"),
        (
            "aes-xts-plain64",
            &k64,
            &["--sector-size", "100"],
            100,
            "sector size",
        ),
        ("aes-xts-plain64", &k64, &["--iv", &iv], 512, "--iv"),
        (
            "aes-ctr",
            &k32,
            &["--iv", &iv, "--sector", "3"],
            5,
            "--sector",
        ),
    ];
    for (cipher, key, options, len, msg) in cases {
        let args = ["cipher", "encrypt", "--cipher", cipher, "--key", key];
        refused(&[&args[..], options].concat(), &vec![0; len], msg);
    }
    // Both key options, or neither: a usage error from the parser (also exit 2).
    let out = sc(&["cipher", "encrypt", "--cipher", "aes-ecb"], b"");
    assert_eq!(code(&out), 2);
    let both = ["--key", &k32, "--key-file", "/dev/null"];
    let out = sc(
        &[&["cipher", "encrypt", "--cipher", "aes-ecb"][..], &both].concat(),
        b"",
    );
    assert_eq!(code(&out), 2);
}

/// A key file is read as the volume commands read theirs: at most 8 MiB (a key file of
/// /dev/zero used to be read until memory ran out), never from the standard input that
/// carries the data.
#[test]
fn key_files_are_bounded_and_not_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.key");
    std::fs::write(&big, vec![7u8; (8 << 20) + 1]).unwrap();
    let base = ["cipher", "encrypt", "--cipher", "aes-ecb", "--key-file"];
    let out = sc(&[&base[..], &[s(&big)]].concat(), &[0; 16]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("larger than 8 MiB"), "{said}");
    let out = sc(&[&base[..], &["-"]].concat(), &[0; 16]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("standard input"), "{said}");
    assert!(out.stdout.is_empty());
}
