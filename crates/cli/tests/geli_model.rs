//! The independent GELI model (`tests/geli_ref.py`) checked on what FreeBSD made, then used
//! to check sectorcrypt both ways.
//!
//! The model is trusted because it opens and decrypts public images made by FreeBSD's geli
//! (`tests/data/geli/`, see SOURCES.md there): their metadata fields and MD5 match the
//! `geli dump` output published with them, and the FAT filesystem inside (made by
//! FreeBSD's newfs_msdos) holds a file whose MD5 matches the list stored beside it. John
//! the Ripper's `$geli$` vectors (metadata of FreeBSD-made providers, iterations > 0, 128
//! and 256-bit keys) open with their passwords and refuse others.
//!
//! The sectorcrypt cases skip with a printed reason while the binary has no GELI support.

mod support;
#[macro_use]
#[path = "support/geli.rs"]
mod geli;

use geli::{body, data_dir, fixture, image, model, model_decrypt, model_ok, sectorcrypt_image};
use openssl::hash::{hash, MessageDigest};
use sectorcrypt_testkit::require;
use std::path::Path;
use support::{code, ok_bytes, s, sc};

/// The public images: name, key length, and the metadata MD5 `geli dump` printed.
const FREEBSD: [(&str, u64, &str); 4] = [
    ("aes-xts-128-0", 128, "2e54ee79f7a8e267f04fb180d4eead19"),
    ("aes-xts-128-100", 128, "46dc1c29848e51a30f6cd0976449e6fc"),
    ("aes-xts-256-0", 256, "99d2da7f96d43b843ef9428fcacc3028"),
    ("aes-xts-256-100", 256, "6227003a167b9e9f435f95eca2db5590"),
];
/// Their passphrase (the source's tests/key).
const FREEBSD_PASS: &[u8] = b"password";
/// Where the FAT partition of their decrypted provider starts (sector 9).
const FAT_AT: usize = 9 * 512;

fn md5_hex(data: &[u8]) -> String {
    hex::encode(hash(MessageDigest::md5(), data).expect("md5"))
}

/// The plaintext of a public image holds an MBR, a FAT volume made by newfs_msdos, and in
/// it a file `random` whose MD5 is the first word of the file `md5`.
fn check_freebsd_plaintext(name: &str, plain: &[u8], dir: &Path) {
    assert_eq!(plain.len(), (2 << 20) - 512, "{name}: data area");
    assert_eq!(&plain[510..512], &[0x55, 0xaa], "{name}: no MBR signature");
    assert_eq!(
        &plain[FAT_AT + 3..FAT_AT + 11],
        b"BSD4.4  ",
        "{name}: FAT OEM name"
    );
    let file = dir.join(format!("{name}.plain"));
    std::fs::write(&file, plain).expect("write plaintext");
    let random = geli::fat_file(&file, FAT_AT as u64, "random");
    let list = String::from_utf8(geli::fat_file(&file, FAT_AT as u64, "md5")).expect("md5 list");
    assert_eq!(random.len(), 524_288, "{name}: size of random");
    assert_eq!(
        list.trim(),
        format!("{} random", md5_hex(&random)),
        "{name}: MD5 of random"
    );
}

#[test]
fn model_reads_freebsd_images() {
    require!("xz", "mtype");
    require_model!();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let pass = d.join("pass");
    std::fs::write(&pass, FREEBSD_PASS).expect("passphrase file");
    for (name, keylen, md5) in FREEBSD {
        let img = fixture(name, d);
        let md = model_ok(&["info", s(&img)]);
        for (field, want) in [
            ("version", 7),
            ("flags", 0x200),
            ("ealgo", 22),
            ("keylen", keylen),
            ("aalgo", 0),
            ("provsize", 2 << 20),
            ("sectorsize", 512),
            ("keys", 1),
            ("iterations", 0),
        ] {
            assert_eq!(md[field].as_u64(), Some(want), "{name}: {field} in {md}");
        }
        assert_eq!(md["md5"].as_str(), Some(md5), "{name}: metadata MD5");
        let plain = model_decrypt(&img, &pass, d);
        check_freebsd_plaintext(name, &plain, d);

        // A wrong passphrase is refused (exit 3); a flipped metadata byte fails the MD5.
        let wrong = d.join("wrong");
        std::fs::write(&wrong, b"passwore").expect("write");
        let out = model(&["unlock", s(&img), "--passfile", s(&wrong)]);
        assert_eq!(code(&out), 3, "{name}: wrong passphrase");
        let mut bytes = std::fs::read(&img).expect("read");
        let n = bytes.len();
        bytes[n - 512 + 100] ^= 1;
        std::fs::write(&img, bytes).expect("write");
        let out = model(&["info", s(&img)]);
        assert_eq!(code(&out), 2, "{name}: flipped metadata byte");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("MD5"),
            "{name}: MD5 error"
        );
    }
}

#[test]
fn model_opens_john_the_ripper_vectors() {
    require_model!();
    let v = model_ok(&["john", s(&data_dir().join("john_vectors.json"))]);
    let list = v.as_array().expect("a list");
    assert_eq!(list.len(), 4);
    for (r, (iterations, keylen)) in
        list.iter()
            .zip([(256, 128), (512, 128), (100, 256), (1_073_769, 128)])
    {
        assert_eq!(r["iterations"].as_u64(), Some(iterations), "{r}");
        assert_eq!(r["keylen"].as_u64(), Some(keylen), "{r}");
        assert_eq!(r["slot"].as_u64(), Some(0), "{r}");
        assert_eq!(r["wrong_password"].as_str(), Some("refused"), "{r}");
    }
}

/// The model's images, every version, both ciphers, both sector sizes: its own decryption
/// gives back what it stored, with holes where nothing was stored.
#[test]
fn model_round_trips_its_images() {
    require_model!();
    let want = body(64 << 10, 3);
    let sc_dir = geli::scratch(b"round trip", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("geli.img");
    for version in 1..=7 {
        for (cipher, keylen, sector) in [("aes-xts", 256, 512), ("aes-cbc", 192, 4096)] {
            let c = image(cipher, keylen, sector, 3, version);
            let _ = std::fs::remove_file(&img);
            c.create(&img, (1 << 20) + 512, &[(8192, &data)], &pass);
            let plain = model_decrypt(&img, &pass, d);
            assert_eq!(plain.len(), 1 << 20);
            assert!(
                plain[8192..8192 + want.len()] == want[..],
                "v{version} {cipher}: data"
            );
        }
    }
}

#[test]
fn sectorcrypt_reads_freebsd_images() {
    require!("xz", "mtype");
    require_sectorcrypt_geli!();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let pass = d.join("pass");
    std::fs::write(&pass, FREEBSD_PASS).expect("passphrase file");
    for (name, _, _) in FREEBSD {
        let img = fixture(name, d);
        let plain = ok_bytes(sc(&["read", s(&img), "--key-file", s(&pass)], b""));
        check_freebsd_plaintext(name, &plain, d);
    }
}

/// Images written by sectorcrypt are decrypted by the model to what was written, and their
/// metadata carries the fields asked for.
#[test]
fn model_reads_sectorcrypt_images() {
    require_model!();
    require_sectorcrypt_geli!();
    let want = body(96 << 10, 5);
    let sc_dir = geli::scratch(b"cross check", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("geli.img");
    for (cipher, keylen, sector, iterations, ealgo) in [
        ("aes-xts", 128, 512, 0, 22),
        ("aes-xts", 256, 4096, 1000, 22),
        ("aes-cbc", 128, 4096, 0, 11),
        ("aes-cbc", 256, 512, 1000, 11),
    ] {
        let c = image(cipher, keylen, sector, iterations, 7);
        let what = format!("{cipher} {keylen} sector {sector} iterations {iterations}");
        let _ = std::fs::remove_file(&img);
        sectorcrypt_image(&c, &img, 4 << 20, &[(0, &data), (2 << 20, &data)], &pass);
        let md = model_ok(&["info", s(&img)]);
        for (field, want) in [
            ("version", 7),
            ("ealgo", ealgo),
            ("keylen", u64::from(keylen)),
            ("sectorsize", u64::from(sector)),
            ("iterations", u64::from(iterations)),
            ("provsize", 4 << 20),
        ] {
            assert_eq!(md[field].as_u64(), Some(want), "{what}: {field} in {md}");
        }
        let plain = model_decrypt(&img, &pass, d);
        assert!(plain[..want.len()] == want[..], "{what}: data at 0");
        assert!(
            plain[2 << 20..(2 << 20) + want.len()] == want[..],
            "{what}: data at 2 MiB"
        );
    }
}

/// Images made by the model (so not by sectorcrypt), every version, a zone boundary
/// crossed, are read by sectorcrypt to what the model stored.
#[test]
fn sectorcrypt_reads_model_images() {
    require_model!();
    require_sectorcrypt_geli!();
    let want = body(64 << 10, 9);
    let sc_dir = geli::scratch(b"not made by sectorcrypt", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("geli.img");
    // 32 KiB before the zone boundary and 32 KiB after it.
    let at = (512u64 << 20) - (32 << 10);
    for version in 1..=7 {
        let (cipher, keylen) = if version % 2 == 0 {
            ("aes-xts", 128)
        } else {
            ("aes-cbc", 256)
        };
        let c = image(cipher, keylen, 512, 0, version);
        let _ = std::fs::remove_file(&img);
        c.create(&img, (513 << 20) + 512, &[(at, &data)], &pass);
        let (off, len) = (at.to_string(), want.len().to_string());
        let got = ok_bytes(sc(
            &[
                "read",
                s(&img),
                "--key-file",
                s(&pass),
                "--offset",
                &off,
                "--length",
                &len,
            ],
            b"",
        ));
        assert!(
            got == want,
            "version {version} {cipher}: sectorcrypt's plaintext differs"
        );
    }
}

/// Authenticated images made by the model, every tag algorithm and both sector sizes: its
/// own decryption gives back what it stored with every tag verified, and one flipped
/// ciphertext bit fails exactly the sector that holds it.
#[test]
fn model_authenticated_round_trip_and_tamper() {
    require_model!();
    let want = body(20_000, 11);
    let sc_dir = geli::scratch(b"authenticated", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("auth.img");
    let out = d.join("out");
    let put = format!("4096:{}", s(&data));
    for aalgo in [
        "hmac-sha1",
        "hmac-ripemd160",
        "hmac-sha256",
        "hmac-sha384",
        "hmac-sha512",
    ] {
        for sector in ["512", "4096"] {
            let what = format!("{aalgo} sector {sector}");
            let size = ((256 << 10) + 512).to_string();
            let args = [
                "create",
                s(&img),
                "--size",
                &size,
                "--passfile",
                s(&pass),
                "--put",
                &put,
                "--aalgo",
                aalgo,
                "--sectorsize",
                sector,
                "--cipher",
                "aes-xts",
            ];
            model_ok(&args);
            let r = model_ok(&["decrypt", s(&img), "--passfile", s(&pass), "--out", s(&out)]);
            assert_eq!(
                r["bad_sectors"].as_array().map(Vec::len),
                Some(0),
                "{what}: {r}"
            );
            let plain = std::fs::read(&out).expect("read");
            assert!(plain[4096..4096 + want.len()] == want[..], "{what}: data");

            // Byte 100 of underlying sector 0 is ciphertext of decrypted sector 0.
            let mut bytes = std::fs::read(&img).expect("read");
            bytes[100] ^= 0x20;
            std::fs::write(&img, bytes).expect("write");
            let r = model_ok(&["decrypt", s(&img), "--passfile", s(&pass), "--out", s(&out)]);
            assert_eq!(r["bad_sectors"], serde_json::json!([0]), "{what}: {r}");
        }
    }
}

/// The authenticated combinations checked both ways: every tag algorithm with both GELI
/// sector sizes, the ciphers (AES-XTS 128/256, AES-CBC 128/256, NULL) in rotation so each
/// meets several algorithms: (integrity, sector size, cipher, key length).
fn auth_cases() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    let ciphers = [
        ("aes-xts", "128"),
        ("aes-cbc", "256"),
        ("null", "0"),
        ("aes-xts", "256"),
        ("aes-cbc", "128"),
    ];
    let mut cases = Vec::new();
    let algs = [
        "hmac-sha256",
        "hmac-sha1",
        "hmac-ripemd160",
        "hmac-sha384",
        "hmac-sha512",
    ];
    for (i, alg) in algs.into_iter().enumerate() {
        for (j, sector) in ["512", "4096"].into_iter().enumerate() {
            let (cipher, keylen) = ciphers[(2 * i + j + i / 2) % ciphers.len()];
            cases.push((alg, sector, cipher, keylen));
        }
    }
    cases
}

/// Authenticated images written by sectorcrypt carry the tags the model computes from the
/// formulas (its decryption verifies every tag of the data area), and decrypt to what was
/// written.
#[test]
fn model_verifies_sectorcrypt_authenticated_images() {
    require_model!();
    require_sectorcrypt_geli!();
    let help = sc(&["format", "--help"], b"");
    if !String::from_utf8_lossy(&help.stdout).contains("--integrity") {
        sectorcrypt_testkit::skipped!(
            "skipped: sectorcrypt cannot make authenticated GELI images yet"
        );
        return;
    }
    let want = body(40_000, 13);
    let sc_dir = geli::scratch(b"authenticated", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("auth.img");
    for (integrity, sector, cipher, keylen) in auth_cases() {
        let what = format!("{integrity} {sector} {cipher}-{keylen}");
        let f = std::fs::File::create(&img).expect("create");
        f.set_len(1 << 20).expect("size");
        drop(f);
        let mut args = vec![
            "format",
            s(&img),
            "--type",
            "geli",
            "--cipher",
            cipher,
            "--sector-size",
            sector,
            "--integrity",
            integrity,
            "--pbkdf-force-iterations",
            "0",
            "--key-file",
            s(&pass),
            "--batch",
        ];
        if keylen != "0" {
            args.extend(["--key-size", keylen]);
        }
        ok_bytes(sc(&args, b""));
        let write = [
            "write",
            s(&img),
            "--key-file",
            s(&pass),
            "--input",
            s(&data),
            "--offset",
            "8193",
        ];
        ok_bytes(sc(&write, b""));
        let out = d.join("out");
        let r = model_ok(&["decrypt", s(&img), "--passfile", s(&pass), "--out", s(&out)]);
        assert_eq!(r["bad_sectors"], serde_json::json!([]), "{what}: {r}");
        let plain = std::fs::read(&out).expect("read");
        assert!(plain[8193..8193 + want.len()] == want[..], "{what}: data");
        // Every sector was sealed on format: the rest reads as zeros.
        assert!(plain[..8193].iter().all(|&b| b == 0), "{what}: wiped");
        assert!(plain[8193 + want.len()..].iter().all(|&b| b == 0), "{what}");
        let md = model_ok(&["info", s(&img)]);
        assert_eq!(md["flags"].as_u64().map(|f| f & 0x10), Some(0x10), "{what}");
        let name = integrity.replace("hmac-", "HMAC/").to_uppercase();
        assert_eq!(md["aalgo_name"].as_str(), Some(name.as_str()), "{what}");
    }
}

/// The reverse: authenticated images sealed by the model open in sectorcrypt byte-exact.
#[test]
fn sectorcrypt_reads_model_authenticated_images() {
    require_model!();
    require_sectorcrypt_geli!();
    let want = body(30_000, 17);
    let sc_dir = geli::scratch(b"sealed by the model", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("model-auth.img");
    let put = format!("12288:{}", s(&data));
    for (integrity, sector, cipher, keylen) in auth_cases() {
        let what = format!("{integrity} {sector} {cipher}-{keylen}");
        let keylen = if keylen == "0" { "512" } else { keylen };
        model_ok(&[
            "create",
            s(&img),
            "--size",
            "524288",
            "--passfile",
            s(&pass),
            "--put",
            &put,
            "--aalgo",
            integrity,
            "--sectorsize",
            sector,
            "--cipher",
            cipher,
            "--keylen",
            keylen,
        ]);
        let out = sc(
            &[
                "read",
                s(&img),
                "--key-file",
                s(&pass),
                "--offset",
                "12288",
                "--length",
                &want.len().to_string(),
            ],
            b"",
        );
        assert!(
            out.stdout == want,
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// HMAC-SHA512 through OpenSSL, to recompute the model's known answers without Python.
fn hmac512(key: &[u8], data: &[u8]) -> Vec<u8> {
    use openssl::{pkey::PKey, sign::Signer};
    // OpenSSL refuses an empty key; HMAC pads keys with zeros to the block size, so one
    // zero byte is the same key.
    let key = PKey::hmac(if key.is_empty() { &[0] } else { key }).expect("hmac key");
    let mut s = Signer::new(MessageDigest::sha512(), &key).expect("signer");
    s.update(data).expect("update");
    s.sign_to_vec().expect("sign")
}

/// The model's known answers (`geli_ref.py vectors`, stored in model_vectors.json for the
/// implementation's tests) are stable, and those that need only HMAC-SHA512 are recomputed
/// here through OpenSSL: the master key is 0..128, the salt 0..64.
#[test]
fn model_known_answers() {
    require_model!();
    let got = model_ok(&["vectors"]);
    let stored: serde_json::Value = serde_json::from_slice(
        &std::fs::read(data_dir().join("model_vectors.json")).expect("model_vectors.json"),
    )
    .expect("JSON");
    assert_eq!(got, stored, "geli_ref.py vectors changed");
    let mkey: Vec<u8> = (0..128).collect();
    let (ivkey, datakey) = mkey.split_at(64);
    let zone1 = [b"ekey".as_slice(), &1u64.to_le_bytes()].concat();
    let hex = |k: &str| got[k].as_str().expect(k).to_string();
    // Before 5 one data key; 5 and 6 derive zone keys from the IV key; 7 from the data key.
    assert_eq!(hex("v4_zone1_key"), hex::encode(datakey));
    assert_eq!(hex("v5_zone1_key"), hex::encode(hmac512(ivkey, &zone1)));
    assert_eq!(hex("v6_zone1_key"), hex::encode(hmac512(ivkey, &zone1)));
    assert_eq!(hex("v7_zone1_key"), hex::encode(hmac512(datakey, &zone1)));
    let salt: Vec<u8> = (0..64).collect();
    let salted = [salt.as_slice(), b"password"].concat();
    assert_eq!(hex("userkey_i0"), hex::encode(hmac512(b"", &salted)));
    assert_eq!(hex("userkey_kf"), hex::encode(hmac512(b"", b"key1key2")));
}

/// The model (`geli_ref.py`) run by a Python with Botan's binding, whose Camellia-CBC it
/// uses; `None`, skipping, without one.
fn model_with_botan() -> Option<&'static str> {
    let found = support::python_with("botan2");
    if found.is_none() {
        sectorcrypt_testkit::skipped!("skipped: python3-botan is not installed");
    }
    found
}

/// GELI Camellia-CBC providers (geli init -e camellia-cbc, keys of 128, 192 and 256 bits)
/// both ways against the model, whose Camellia is Botan's: the slots (Camellia-CBC with a
/// zero IV) and the sectors (GELI's SHA-256 IVs, the model's own code from the published
/// format) of what `format --type geli --cipher camellia-cbc` made and `write` put there
/// decrypt in the model, and images the model made read in sectorcrypt, across a zone
/// boundary of version 7 and with version 4's single key.
#[test]
fn camellia_cbc_both_ways_with_the_model() {
    require_sectorcrypt_geli!();
    let Some(py) = model_with_botan() else { return };
    let run = |args: &[&str]| {
        let out = std::process::Command::new(py)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .arg(geli::model_script())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "geli_ref.py {args:?}: {out:?}");
    };
    let want = body(96 << 10, 21);
    let sc_dir = geli::scratch(b"camellia", &want);
    let (d, pass, data) = (sc_dir.dir.path(), sc_dir.pass.clone(), sc_dir.data.clone());
    let img = d.join("geli.img");
    for (keylen, sector) in [(128u32, 512u32), (192, 4096), (256, 512)] {
        let what = format!("camellia-cbc {keylen} sector {sector}");
        let c = image("camellia-cbc", keylen, sector, 1000, 7);
        let _ = std::fs::remove_file(&img);
        sectorcrypt_image(&c, &img, 4 << 20, &[(0, &data), (2 << 20, &data)], &pass);
        let md = model_ok(&["info", s(&img)]);
        assert_eq!(md["ealgo"].as_u64(), Some(21), "{what}: {md}");
        assert_eq!(md["keylen"].as_u64(), Some(u64::from(keylen)), "{what}");
        let out = d.join("model.plain");
        run(&["decrypt", s(&img), "--passfile", s(&pass), "--out", s(&out)]);
        let plain = std::fs::read(&out).unwrap();
        assert!(plain[..want.len()] == want[..], "{what}: data at 0");
        assert!(
            plain[2 << 20..(2 << 20) + want.len()] == want[..],
            "{what}: data at 2 MiB"
        );
    }
    let at = (512u64 << 20) - (32 << 10);
    for (version, keylen) in [(7u32, 192u32), (4, 256)] {
        let _ = std::fs::remove_file(&img);
        let (v, k, size, put) = (
            version.to_string(),
            keylen.to_string(),
            ((513u64 << 20) + 512).to_string(),
            format!("{at}:{}", s(&data)),
        );
        run(&[
            "create",
            s(&img),
            "--size",
            &size,
            "--put",
            &put,
            "--passfile",
            s(&pass),
            "--cipher",
            "camellia-cbc",
            "--keylen",
            &k,
            "--version",
            &v,
        ]);
        let (off, len) = (at.to_string(), want.len().to_string());
        let args = ["read", s(&img), "--key-file", s(&pass), "--offset", &off];
        let got = ok_bytes(sc(&[&args[..], &["--length", &len]].concat(), b""));
        assert!(
            got == want,
            "version {version} camellia-cbc {keylen}: sectorcrypt's plaintext differs"
        );
    }
}
