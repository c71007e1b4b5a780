//! `sectorcrypt cipher encrypt|decrypt|mac` with GOST 28147-89 and Magma: known answers
//! from the shared vectors (GOST R 34.13-2015), round trips of every mode under every
//! GOST backend, and the refusals (exit 2, nothing written; a wrong MGM tag, exit 1).

#[path = "support/backends.rs"]
mod backends;
#[path = "support/cipher.rs"]
mod cipher;
mod support;

use cipher::refused;
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_testkit::{hex, pattern, unhex, vectors};
use serde_json::Value;
use support::{code, ok, ok_bytes, sc, sc_on};

/// A key for the round trips and the refusals.
const KEY: &str = "ffeeddccbbaa99887766554433221100f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/// The vector `name` of the shared GOST vectors.
fn vector(name: &str) -> Value {
    let path = vectors("gost").join("gost/vectors.json");
    let text = std::fs::read_to_string(&path).expect("the gost vectors");
    let all: Vec<Value> = serde_json::from_str(&text).expect("json");
    all.into_iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

/// A hex field of a vector.
fn field<'a>(v: &'a Value, name: &str) -> &'a str {
    v[name].as_str().expect("a string field")
}

/// More than 2 KiB, so that CryptoPro key meshing and the ACPKM sections (1 KiB) both
/// change the key twice; no multiple of 8, so that the stream modes end mid-block.
fn data() -> Vec<u8> {
    pattern(2056 + 3, 28147)
}

/// Encrypts `data` with `cipher` and the options `extra` on `backend`, checks that the
/// output differs from the input, and decrypts it back.
fn round_trip(backend: &str, cipher: &str, extra: &[&str], data: &[u8]) {
    let mut args = vec!["cipher", "encrypt", "--cipher", cipher, "--key", KEY];
    args.extend(extra);
    let enc = ok_bytes(sc_on(&args, data, Some(backend)));
    assert_ne!(enc[..16], data[..16], "{cipher} on {backend}");
    args[1] = "decrypt";
    let dec = ok_bytes(sc_on(&args, &enc, Some(backend)));
    assert_eq!(dec, data, "{cipher} on {backend}");
}

/// GOST R 34.13-2015 A.2.1 (ECB), A.2.2 (CTR) and A.2.6 (MAC, 4 bytes) through the binary.
#[test]
fn magma_known_answers_under_every_gost_backend() {
    for b in backends::gost() {
        for (name, cipher) in [
            ("gost3413-A.2.1-magma-ecb", "magma-ecb"),
            ("gost3413-A.2.2-magma-ctr", "magma-ctr"),
        ] {
            let v = vector(name);
            let mut args = vec!["cipher", "encrypt", "--cipher", cipher];
            args.extend(["--key", field(&v, "key")]);
            if !field(&v, "iv").is_empty() {
                args.extend(["--iv", field(&v, "iv")]);
            }
            let out = ok_bytes(sc_on(&args, &unhex(field(&v, "plaintext")), Some(b)));
            assert_eq!(hex(&out), field(&v, "ciphertext"), "{name} on {b}");
        }
        let v = vector("gost3413-A.2.6-magma-mac");
        let tag_len = (field(&v, "ciphertext").len() / 2).to_string();
        let args = [
            "cipher",
            "mac",
            "--cipher",
            "magma-mac",
            "--key",
            field(&v, "key"),
        ];
        let args = [&args[..], &["--tag-len", &tag_len]].concat();
        let out = ok(sc_on(&args, &unhex(field(&v, "plaintext")), Some(b)));
        assert_eq!(out, format!("{}\n", field(&v, "ciphertext")), "mac on {b}");
    }
}

#[test]
fn gost89_modes_round_trip_under_every_gost_backend() {
    let data = data();
    for b in backends::gost() {
        let sbox = ["--sbox", Sbox::CryptoProB.name(), "--key-meshing"];
        let iv = ["--iv", "0102030405060708"];
        round_trip(b, "gost89-ecb", &sbox, &data[..2056]);
        for cipher in ["gost89-cnt", "gost89-cfb"] {
            round_trip(b, cipher, &[&sbox[..], &iv].concat(), &data);
        }
        round_trip(b, "gost89-cbc", &[&sbox[..], &iv].concat(), &data[..2056]);
        // gost-engine's testimit6 form: a 32-bit imitovstavka as a line of lowercase hex.
        let sbox = Sbox::CryptoProA.name();
        let args = [
            "cipher",
            "mac",
            "--cipher",
            "gost89-mac",
            "--key",
            KEY,
            "--sbox",
            sbox,
        ];
        let mac = ok(sc_on(
            &[&args[..], &["--key-meshing"]].concat(),
            b"hello",
            Some(b),
        ));
        assert_eq!(mac.len(), 9, "{mac}");
        assert_eq!(mac, mac.to_lowercase());
    }
}

#[test]
fn magma_modes_round_trip_under_every_gost_backend() {
    let data = data();
    let two_blocks = "0102030405060708090a0b0c0d0e0f10";
    let three_blocks = "0102030405060708090a0b0c0d0e0f100102030405060708";
    for b in backends::gost() {
        round_trip(b, "magma-ecb", &[], &data[..2056]);
        round_trip(b, "magma-ctr", &["--iv", "01020304"], &data);
        round_trip(b, "magma-ofb", &["--iv", two_blocks], &data);
        round_trip(b, "magma-cbc", &["--iv", three_blocks], &data[..2056]);
        round_trip(b, "magma-cfb", &["--iv", "0102030405060708"], &data);
        round_trip(b, "magma-ctr-acpkm", &["--iv", "01020304"], &data);
        round_trip(b, "magma-mgm", &["--iv", "0102030405060708"], &data);
    }
}

#[test]
fn gost_usage_errors_exit_2_and_write_nothing() {
    let z = Sbox::Tc26Z.name();
    let iv8 = "0001020304050607";
    // `cipher encrypt --cipher CIPHER --key KEY OPTIONS` of 16 bytes.
    let cases: [(&str, &[&str], &str); 8] = [
        ("gost89-cnt", &["--iv", iv8], Sbox::CryptoProA.name()),
        (
            "gost89-cnt",
            &["--iv", "00", "--sbox", z],
            "must be 8 bytes",
        ),
        ("gost89-ecb", &["--sbox", "nope"], Sbox::CryptoProD.name()),
        ("magma-ctr", &["--iv", iv8], "must be 4 bytes"),
        ("magma-ofb", &["--iv", "000102030405"], "multiple of 8"),
        (
            "magma-ctr",
            &["--iv", "00010203", "--sbox", z],
            "--sbox goes with gost89",
        ),
        (
            "magma-mgm",
            &["--iv", "8001020304050607"],
            "most significant bit",
        ),
        ("gost89-mac", &["--sbox", z], "cipher mac"),
    ];
    for (cipher, options, msg) in cases {
        let args = ["cipher", "encrypt", "--cipher", cipher, "--key", KEY];
        refused(&[&args[..], options].concat(), &[0u8; 16], msg);
    }
    let args = ["cipher", "mac", "--cipher", "aes-ctr", "--key", KEY];
    refused(&args, &[0u8; 16], "gost89-mac or magma-mac");
    let args = [
        "cipher",
        "encrypt",
        "--cipher",
        "magma-ecb",
        "--key",
        &KEY[..62],
    ];
    refused(&args, &[0u8; 16], "invalid key length");
    // ECB and CBC take whole blocks.
    let args = ["cipher", "encrypt", "--cipher", "magma-ecb", "--key", KEY];
    refused(&args, &[0u8; 9], "multiple of 8");
}

/// A wrong MGM tag: exit 1, nothing written.
#[test]
fn magma_mgm_refuses_a_wrong_tag() {
    let mut args = vec!["cipher", "encrypt", "--cipher", "magma-mgm", "--key", KEY];
    args.extend(["--iv", "0001020304050607", "--aad", "aabb"]);
    let mut sealed = ok_bytes(sc(&args, b"secret"));
    *sealed.last_mut().expect("a tag") ^= 1;
    args[1] = "decrypt";
    let out = sc(&args, &sealed);
    assert_eq!(code(&out), 1);
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("authentication failed"));
}
