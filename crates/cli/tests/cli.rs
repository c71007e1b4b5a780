//! The `sectorcrypt` binary end to end: `cipher` against OpenSSL for every raw mode and
//! cipher string under every backend, the bad inputs (exit 2, nothing written), `backends`,
//! `demo`.

use openssl::symm::{Cipher, Crypter, Mode};
use rand::{rngs::StdRng, Rng, RngCore, SeedableRng};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sectorcrypt")
}

fn run(args: &[&str], stdin: &[u8], backend: Option<&str>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match backend {
        Some(b) => cmd.env("SECTORCRYPT_BACKEND", b),
        None => cmd.env_remove("SECTORCRYPT_BACKEND"),
    };
    let mut child = cmd.spawn().expect("run sectorcrypt");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("stdin writer");
    out
}

/// The backends this CPU can run, by asking the binary; others are skipped with a reason.
fn backends() -> Vec<&'static str> {
    let out = run(&["backends"], b"", None);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut usable = vec![];
    for b in ["soft", "aesni", "vaes"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("backend {b} ")))
            .expect("backend line");
        if line.contains(" usable") && !line.contains("not usable") {
            usable.push(b);
        } else {
            eprintln!("SKIPPED backend {b}: {line}");
        }
    }
    assert!(usable.contains(&"soft"), "soft must always be usable");
    usable
}

fn openssl(cipher: Cipher, mode: Mode, key: &[u8], iv: Option<&[u8]>, input: &[u8]) -> Vec<u8> {
    let mut c = Crypter::new(cipher, mode, key, iv).expect("crypter");
    c.pad(false);
    let mut out = vec![0u8; input.len() + 32];
    let mut n = c.update(input, &mut out).expect("update");
    n += c.finalize(&mut out[n..]).expect("finalize");
    out.truncate(n);
    out
}

fn rng() -> StdRng {
    let seed: u64 = rand::thread_rng().gen();
    eprintln!("seed {seed}");
    StdRng::seed_from_u64(seed)
}

fn bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

fn xts(len: usize) -> Cipher {
    if len == 32 {
        Cipher::aes_128_xts()
    } else {
        Cipher::aes_256_xts()
    }
}

fn cbc(len: usize) -> Cipher {
    match len {
        16 => Cipher::aes_128_cbc(),
        24 => Cipher::aes_192_cbc(),
        _ => Cipher::aes_256_cbc(),
    }
}

/// What dm-crypt produces, computed with OpenSSL one sector at a time.
fn dm_crypt(
    spec: &str,
    key: &[u8],
    size: usize,
    step: u64,
    first: u64,
    data: &[u8],
    mode: Mode,
) -> Vec<u8> {
    let mut out = vec![];
    for (i, s) in data.chunks_exact(size).enumerate() {
        let n = first.wrapping_add(i as u64 * step);
        let mut iv = [0u8; 16];
        if spec.ends_with("-plain") {
            iv[..4].copy_from_slice(&(n as u32).to_le_bytes());
        } else {
            iv[..8].copy_from_slice(&n.to_le_bytes());
        }
        out.extend(match spec {
            "aes-ecb" => openssl(
                match key.len() {
                    16 => Cipher::aes_128_ecb(),
                    24 => Cipher::aes_192_ecb(),
                    _ => Cipher::aes_256_ecb(),
                },
                mode,
                key,
                None,
                s,
            ),
            s2 if s2.starts_with("aes-xts") => openssl(xts(key.len()), mode, key, Some(&iv), s),
            "aes-cbc-essiv:sha256" => {
                let salt = openssl::sha::sha256(key);
                let e = openssl(Cipher::aes_256_ecb(), Mode::Encrypt, &salt, None, &iv);
                openssl(cbc(key.len()), mode, key, Some(&e), s)
            }
            _ => openssl(cbc(key.len()), mode, key, Some(&iv), s),
        });
    }
    out
}

#[test]
fn cipher_strings_match_openssl_under_every_backend() {
    let mut rng = rng();
    for b in backends() {
        for spec in [
            "aes-xts-plain64",
            "aes-xts-plain",
            "aes-cbc-plain64",
            "aes-cbc-plain",
            "aes-cbc-essiv:sha256",
            "aes-ecb",
        ] {
            let key_len = if spec.starts_with("aes-xts") {
                [32, 64][rng.gen_range(0..2)]
            } else {
                [16, 24, 32][rng.gen_range(0..3)]
            };
            let key = bytes(&mut rng, key_len);
            for (size, large) in [(512usize, false), (4096, false), (4096, true)] {
                let first: u64 = rng.gen::<u32>() as u64;
                let count = rng.gen_range(1..6);
                let data = bytes(&mut rng, size * count);
                let mut args = vec!["cipher", "encrypt", "--cipher", spec];
                let (k, f, s) = (hex::encode(&key), first.to_string(), size.to_string());
                args.extend(["--key", &k, "--sector", &f, "--sector-size", &s]);
                if large {
                    args.push("--iv-large-sectors");
                }
                let out = run(&args, &data, Some(b));
                assert!(
                    out.status.success(),
                    "{spec} on {b}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let step = if large { 1 } else { size as u64 / 512 };
                assert_eq!(
                    out.stdout,
                    dm_crypt(spec, &key, size, step, first, &data, Mode::Encrypt),
                    "{spec} {size} large {large} on {b}"
                );
                args[1] = "decrypt";
                let back = run(&args, &out.stdout, Some(b));
                assert!(back.status.success());
                assert_eq!(back.stdout, data, "{spec} decrypt on {b}");
            }
        }
    }
}

#[test]
fn raw_modes_match_openssl_under_every_backend() {
    let mut rng = rng();
    for b in backends() {
        for (mode, key_len, len) in [
            ("aes-ecb", 16, 4096),
            ("aes-cbc", 24, 1024),
            ("aes-cbc", 32, 16),
            ("aes-ctr", 32, 1001),
            ("aes-ctr", 16, 0),
            ("aes-xts", 64, 4097),
            ("aes-xts", 32, 17),
        ] {
            let key = bytes(&mut rng, key_len);
            let iv = bytes(&mut rng, 16);
            let data = bytes(&mut rng, len);
            let (k, v) = (hex::encode(&key), hex::encode(&iv));
            let mut args = vec!["cipher", "encrypt", "--cipher", mode, "--key", &k];
            if mode != "aes-ecb" {
                args.extend(["--iv", &v]);
            }
            let out = run(&args, &data, Some(b));
            assert!(
                out.status.success(),
                "{mode} on {b}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let want = match mode {
                "aes-ecb" => openssl(Cipher::aes_128_ecb(), Mode::Encrypt, &key, None, &data),
                "aes-cbc" => openssl(cbc(key_len), Mode::Encrypt, &key, Some(&iv), &data),
                "aes-ctr" => openssl(
                    if key_len == 16 {
                        Cipher::aes_128_ctr()
                    } else {
                        Cipher::aes_256_ctr()
                    },
                    Mode::Encrypt,
                    &key,
                    Some(&iv),
                    &data,
                ),
                _ => openssl(xts(key_len), Mode::Encrypt, &key, Some(&iv), &data),
            };
            assert_eq!(out.stdout, want, "{mode} {len} bytes on {b}");
            args[1] = "decrypt";
            let back = run(&args, &out.stdout, Some(b));
            assert_eq!(back.stdout, data, "{mode} decrypt on {b}");
        }
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sectorcrypt-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

#[test]
fn files_and_key_files() {
    let mut rng = rng();
    let dir = tmpdir("files");
    let key = bytes(&mut rng, 64);
    let data = bytes(&mut rng, 8 * 512);
    let (kf, inf, outf) = (dir.join("key"), dir.join("in"), dir.join("out"));
    std::fs::write(&kf, &key).unwrap();
    std::fs::write(&inf, &data).unwrap();
    let out = run(
        &[
            "cipher",
            "encrypt",
            "--cipher",
            "aes-xts-plain64",
            "--key-file",
            kf.to_str().unwrap(),
            "--input",
            inf.to_str().unwrap(),
            "--output",
            outf.to_str().unwrap(),
        ],
        b"",
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let enc = std::fs::read(&outf).unwrap();
    assert_eq!(
        enc,
        dm_crypt("aes-xts-plain64", &key, 512, 1, 0, &data, Mode::Encrypt)
    );
    // Output files are private (they usually hold plaintext) and no temporary is left.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&outf).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "output mode {mode:o}");
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".sectorcrypt-")),
        "temporary left behind: {names:?}"
    );
    let back = run(
        &[
            "cipher",
            "decrypt",
            "--cipher",
            "aes-xts-plain64",
            "--key",
            &hex::encode(&key),
            "--input",
            outf.to_str().unwrap(),
        ],
        b"",
        None,
    );
    assert_eq!(back.stdout, data);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tmpdir("bad");
    let outf = dir.join("existing");
    std::fs::write(&outf, b"keep me").unwrap();
    let o = outf.to_str().unwrap().to_string();
    let k32 = "00112233445566778899aabbccddeeff".repeat(2);
    let k64 = format!("{}{}", "11".repeat(32), "22".repeat(32));
    let equal = "ab".repeat(64);
    let iv = "00".repeat(16);
    let cases: Vec<(Vec<&str>, Vec<u8>, &str)> = vec![
        (
            vec!["--cipher", "aes-xts-plain64", "--key", "zz"],
            vec![0; 512],
            "not valid hex",
        ),
        (
            vec!["--cipher", "aes-xts-plain64", "--key", &k32[..30]],
            vec![0; 512],
            "invalid key length",
        ),
        (
            vec!["--cipher", "aes-cbc-plain64", "--key", &k64],
            vec![0; 512],
            "invalid key length",
        ),
        (
            vec!["--cipher", "aes-xts-plain64", "--key", &equal],
            vec![0; 512],
            "equal",
        ),
        (
            vec!["--cipher", "aes-xts-plain64", "--key", &k64],
            vec![0; 700],
            "whole number of sectors",
        ),
        (
            vec!["--cipher", "aes-cbc", "--key", &k32, "--iv", &iv],
            vec![0; 33],
            "multiple of 16",
        ),
        (
            vec!["--cipher", "aes-xts", "--key", &k64, "--iv", &iv],
            vec![0; 15],
            "at least 16 bytes",
        ),
        (
            vec!["--cipher", "aes-cbc", "--key", &k32],
            vec![0; 32],
            "needs --iv",
        ),
        (
            vec!["--cipher", "aes-cbc", "--key", &k32, "--iv", "0011"],
            vec![0; 32],
            "16 bytes",
        ),
        (
            vec!["--cipher", "serpent-xts-plain64", "--key", &k64],
            vec![0; 512],
            "unknown cipher",
        ),
        (
            vec![
                "--cipher",
                "aes-xts-plain64",
                "--key",
                &k64,
                "--sector-size",
                "100",
            ],
            vec![0; 100],
            "sector size",
        ),
        (
            vec!["--cipher", "aes-xts-plain64", "--key", &k64, "--iv", &iv],
            vec![0; 512],
            "--iv",
        ),
        (
            vec![
                "--cipher", "aes-ctr", "--key", &k32, "--iv", &iv, "--sector", "3",
            ],
            vec![0; 5],
            "--sector",
        ),
    ];
    for (extra, input, msg) in cases {
        for to_file in [false, true] {
            let mut args = vec!["cipher", "encrypt"];
            args.extend(extra.iter().copied());
            if to_file {
                args.extend(["--output", &o]);
            }
            let out = run(&args, &input, None);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
            assert!(
                err.starts_with("sectorcrypt: ") && err.contains(msg),
                "{args:?}: {err:?} lacks {msg:?}"
            );
            assert_eq!(
                err.trim_end().lines().count(),
                1,
                "{args:?}: one line expected: {err:?}"
            );
            assert_eq!(
                std::fs::read(&outf).unwrap(),
                b"keep me",
                "{args:?} touched the output file"
            );
        }
    }
    // Both key options, or neither: a usage error from the parser (also exit 2).
    let out = run(&["cipher", "encrypt", "--cipher", "aes-ecb"], b"", None);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn backends_and_the_override() {
    let out = run(&["backends"], b"", None);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("backend soft   usable"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("aes: ")), "{text}");
    let forced = run(&["backends"], b"", Some("soft"));
    assert!(String::from_utf8_lossy(&forced.stdout)
        .contains("aes: soft (forced by SECTORCRYPT_BACKEND)"));
    let bad = run(&["backends"], b"", Some("nonsense"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown backend \"nonsense\""));
    let bad = run(
        &[
            "cipher",
            "encrypt",
            "--cipher",
            "aes-ecb",
            "--key",
            &"00".repeat(16),
        ],
        &[0; 16],
        Some("nonsense"),
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
}

#[test]
fn demo_runs_and_verifies() {
    let out = run(&["demo"], b"", None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("IEEE 1619-2007 vector 2 ok") && text.contains("round trip   : ok"),
        "{text}"
    );
}

#[test]
fn gcm_matches_openssl_and_refuses_a_bad_tag() {
    let mut rng = rng();
    for b in backends() {
        for (key_len, iv_len, len, tag_len) in [
            (16usize, 12usize, 0usize, 16usize),
            (32, 12, 1000, 16),
            (24, 8, 77, 12),
            (32, 60, 4097, 14),
        ] {
            let (key, iv, aad, data) = (
                bytes(&mut rng, key_len),
                bytes(&mut rng, iv_len),
                bytes(&mut rng, 20),
                bytes(&mut rng, len),
            );
            let (k, v, a, t) = (
                hex::encode(&key),
                hex::encode(&iv),
                hex::encode(&aad),
                tag_len.to_string(),
            );
            let mut args = vec![
                "cipher",
                "encrypt",
                "--cipher",
                "aes-gcm",
                "--key",
                &k,
                "--iv",
                &v,
                "--aad",
                &a,
                "--tag-len",
                &t,
            ];
            let out = run(&args, &data, Some(b));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let cipher = match key_len {
                16 => Cipher::aes_128_gcm(),
                24 => Cipher::aes_192_gcm(),
                _ => Cipher::aes_256_gcm(),
            };
            let mut tag = vec![0u8; tag_len];
            let ct = openssl::symm::encrypt_aead(cipher, &key, Some(&iv), &aad, &data, &mut tag)
                .expect("openssl gcm");
            assert_eq!(out.stdout, [ct, tag].concat(), "gcm {len} bytes on {b}");
            args[1] = "decrypt";
            let back = run(&args, &out.stdout, Some(b));
            assert!(back.status.success());
            assert_eq!(back.stdout, data);
            let mut forged = out.stdout.clone();
            let last = forged.len() - 1;
            forged[last] ^= 1;
            let bad = run(&args, &forged, Some(b));
            assert_eq!(bad.status.code(), Some(1), "forged tag on {b}");
            assert!(bad.stdout.is_empty());
            assert!(String::from_utf8_lossy(&bad.stderr).contains("authentication failed"));
        }
    }
}

/// GOST 28147-89 and Magma through `cipher encrypt|decrypt|mac`: known answers from the
/// shared vectors (RFC 8891, GOST R 34.13-2015, gost-engine), round trips for every
/// cipher under every GOST backend, and the usage errors (exit 2, nothing written).
#[test]
fn gost_ciphers() {
    let key_m = "ffeeddccbbaa99887766554433221100f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
    let pt_m =
        hex::decode("92def06b3c130a59db54c704f8189d204a98fb2e67a8024c8912409b17b57e41").unwrap();
    let gost_backends: Vec<&str> = {
        let out = run(&["backends"], b"", None);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains("gost28147-89/magma: "), "{text}");
        ["soft", "avx2"]
            .into_iter()
            .filter(|b| {
                let ok = text.lines().any(|l| {
                    l.starts_with(&format!("gost backend {b} ")) && l.contains(" usable (self-test")
                });
                if !ok {
                    eprintln!("SKIPPED gost backend {b}: not usable on this cpu");
                }
                ok
            })
            .collect()
    };
    assert!(gost_backends.contains(&"soft"));
    for b in &gost_backends {
        let be = Some(*b);
        // GOST R 34.13-2015 A.2.1 (ECB) and A.2.2 (CTR), A.2.6 (MAC, first 4 bytes).
        let out = run(
            &["cipher", "encrypt", "--cipher", "magma-ecb", "--key", key_m],
            &pt_m,
            be,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            hex::encode(&out.stdout),
            "2b073f0494f372a0de70e715d3556e4811d8d9e9eacfbc1e7c68260996c67efb"
        );
        let out = run(
            &[
                "cipher",
                "encrypt",
                "--cipher",
                "magma-ctr",
                "--key",
                key_m,
                "--iv",
                "12345678",
            ],
            &pt_m,
            be,
        );
        assert_eq!(
            hex::encode(&out.stdout),
            "4e98110c97b7b93c3e250d93d6e85d69136d868807b2dbef568eb680ab52a12d"
        );
        let out = run(
            &[
                "cipher",
                "mac",
                "--cipher",
                "magma-mac",
                "--key",
                key_m,
                "--tag-len",
                "4",
            ],
            &pt_m,
            be,
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "154e7210\n");
        // gost-engine testimit6-style: a 32-bit imitovstavka, lowercase hex.
        let out = run(
            &[
                "cipher",
                "mac",
                "--cipher",
                "gost89-mac",
                "--key",
                key_m,
                "--sbox",
                "id-Gost28147-89-CryptoPro-A-ParamSet",
                "--key-meshing",
            ],
            b"hello",
            be,
        );
        assert!(out.status.success());
        let m = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(m.len(), 9, "{m}");
        assert_eq!(m, m.to_lowercase());
        // Round trips of every cipher.
        let data: Vec<u8> = (0..2056u32).map(|i| (i * 31 % 251) as u8).collect();
        let sbox = ["--sbox", "id-Gost28147-89-CryptoPro-B-ParamSet"];
        for (c, iv) in [
            ("gost89-ecb", None),
            ("gost89-cnt", Some("0102030405060708")),
            ("gost89-cfb", Some("0102030405060708")),
            ("gost89-cbc", Some("0102030405060708")),
            ("magma-ecb", None),
            ("magma-ctr", Some("01020304")),
            ("magma-ofb", Some("0102030405060708090a0b0c0d0e0f10")),
            (
                "magma-cbc",
                Some("0102030405060708090a0b0c0d0e0f100102030405060708"),
            ),
            ("magma-cfb", Some("0102030405060708")),
            ("magma-ctr-acpkm", Some("01020304")),
            ("magma-mgm", Some("0102030405060708")),
        ] {
            let mut args = vec!["cipher", "encrypt", "--cipher", c, "--key", key_m];
            if let Some(iv) = iv {
                args.extend(["--iv", iv]);
            }
            if c.starts_with("gost89") {
                args.extend(sbox);
                args.push("--key-meshing");
            }
            let enc = run(&args, &data, be);
            assert!(
                enc.status.success(),
                "{c}: {}",
                String::from_utf8_lossy(&enc.stderr)
            );
            assert_ne!(enc.stdout[..16], data[..16], "{c}");
            args[1] = "decrypt";
            let dec = run(&args, &enc.stdout, be);
            assert!(
                dec.status.success(),
                "{c}: {}",
                String::from_utf8_lossy(&dec.stderr)
            );
            assert_eq!(dec.stdout, data, "{c} backend {b}");
        }
    }
    // Usage errors: exit 2, nothing on stdout.
    let k = key_m;
    for (args, msg) in [
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "gost89-cnt",
                "--key",
                k,
                "--iv",
                "0001020304050607",
            ],
            "id-Gost28147-89-CryptoPro-A-ParamSet",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "gost89-cnt",
                "--key",
                k,
                "--iv",
                "00",
                "--sbox",
                "id-tc26-gost-28147-param-Z",
            ],
            "must be 8 bytes",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "gost89-ecb",
                "--key",
                k,
                "--sbox",
                "nope",
            ],
            "id-Gost28147-89-CryptoPro-D-ParamSet",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "magma-ctr",
                "--key",
                k,
                "--iv",
                "0001020304050607",
            ],
            "must be 4 bytes",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "magma-ofb",
                "--key",
                k,
                "--iv",
                "000102030405",
            ],
            "multiple of 8",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "magma-ctr",
                "--key",
                k,
                "--iv",
                "00010203",
                "--sbox",
                "id-tc26-gost-28147-param-Z",
            ],
            "--sbox goes with gost89",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "magma-mgm",
                "--key",
                k,
                "--iv",
                "8001020304050607",
            ],
            "most significant bit",
        ),
        (
            vec!["cipher", "mac", "--cipher", "aes-ctr", "--key", k],
            "gost89-mac or magma-mac",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "gost89-mac",
                "--key",
                k,
                "--sbox",
                "id-tc26-gost-28147-param-Z",
            ],
            "cipher mac",
        ),
        (
            vec![
                "cipher",
                "encrypt",
                "--cipher",
                "magma-ecb",
                "--key",
                &k[..62],
            ],
            "invalid key length",
        ),
    ] {
        let out = run(&args, &[0u8; 16], None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    // ECB and CBC need whole blocks.
    let out = run(
        &["cipher", "encrypt", "--cipher", "magma-ecb", "--key", k],
        &[0u8; 9],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    // A wrong MGM tag: exit 1, nothing written.
    let enc = run(
        &[
            "cipher",
            "encrypt",
            "--cipher",
            "magma-mgm",
            "--key",
            k,
            "--iv",
            "0001020304050607",
            "--aad",
            "aabb",
        ],
        b"secret",
        None,
    );
    let mut ct = enc.stdout.clone();
    *ct.last_mut().unwrap() ^= 1;
    let dec = run(
        &[
            "cipher",
            "decrypt",
            "--cipher",
            "magma-mgm",
            "--key",
            k,
            "--iv",
            "0001020304050607",
            "--aad",
            "aabb",
        ],
        &ct,
        None,
    );
    assert_eq!(dec.status.code(), Some(1));
    assert!(dec.stdout.is_empty());
    assert!(String::from_utf8_lossy(&dec.stderr).contains("authentication failed"));
}

/// `SECTORCRYPT_BACKEND=avx2` forces GOST's avx2 and AES's portable backend; `vaes` gives
/// GOST the portable backend; the choice shows in `backends`.
#[test]
fn backend_override_across_algorithms() {
    let out = run(&["backends"], b"", Some("soft"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("gost28147-89/magma: soft (forced"), "{text}");
    let out = run(&["backends"], b"", None);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let avx2 = text
        .lines()
        .any(|l| l.starts_with("gost backend avx2 ") && l.contains(" usable (self-test"));
    let forced = run(&["backends"], b"", Some("avx2"));
    if avx2 {
        let t = String::from_utf8_lossy(&forced.stdout).to_string();
        assert!(
            forced.status.success(),
            "{}",
            String::from_utf8_lossy(&forced.stderr)
        );
        assert!(t.contains("aes: soft (forced"), "{t}");
        assert!(t.contains("gost28147-89/magma: avx2 (forced"), "{t}");
    } else {
        eprintln!("SKIPPED the avx2 half: this cpu cannot run the gost avx2 backend");
        assert_eq!(forced.status.code(), Some(2));
    }
    let vaes = text
        .lines()
        .any(|l| l.starts_with("backend vaes ") && l.contains(" usable"));
    let forced = run(&["backends"], b"", Some("vaes"));
    if vaes {
        let t = String::from_utf8_lossy(&forced.stdout).to_string();
        assert!(t.contains("aes: vaes (forced"), "{t}");
        assert!(t.contains("gost28147-89/magma: soft (forced"), "{t}");
    } else {
        eprintln!("SKIPPED the vaes half: this cpu cannot run vaes");
    }
}
