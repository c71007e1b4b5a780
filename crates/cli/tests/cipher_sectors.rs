//! `sectorcrypt cipher` with dm-crypt cipher strings: every AES string of the crypto crate
//! against OpenSSL one sector at a time under every backend, at 512- and 4096-byte
//! sectors with either IV count; the Serpent, Twofish and Camellia strings against Botan
//! (python3-botan), and LUKS volumes made with them opened by Botan and hashlib alone
//! (`data/luks-botan.py`); key and data files; `aes-ecb` with a sector option.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/cipher.rs"]
mod cipher;
mod support;

use cipher::refused;
use openssl::symm::Mode;
use sectorcrypt_crypto::dmcrypt::CipherSpec;
use sectorcrypt_testkit::reference::{self, dm_crypt, evp};
use sectorcrypt_testkit::{hex, pattern};
use support::{ok_bytes, s, sc, sc_on};

/// How dm-crypt lays out sectors: their size, and whether the IV number counts sectors
/// (`--iv-large-sectors`) or 512-byte units.
#[derive(Debug, Clone, Copy)]
struct Layout {
    size: usize,
    large_iv: bool,
}

impl Layout {
    /// How much the IV number grows from one sector to the next.
    fn step(self) -> u64 {
        if self.large_iv {
            1
        } else {
            self.size as u64 / 512
        }
    }
}

/// Sector layouts with the first sector's IV number: the last two cross 2^32, where
/// `plain` wraps and `plain64` does not.
const LAYOUTS: [(Layout, u64); 3] = [
    (
        Layout {
            size: 512,
            large_iv: false,
        },
        2048,
    ),
    (
        Layout {
            size: 4096,
            large_iv: false,
        },
        0xffff_fffe,
    ),
    (
        Layout {
            size: 4096,
            large_iv: true,
        },
        0x1_0000_0003,
    ),
];

#[test]
fn cipher_strings_match_openssl_under_every_backend() {
    for b in backends::aes() {
        for spec in CipherSpec::ALL
            .into_iter()
            .filter(|s| s.starts_with("aes-"))
        {
            // OpenSSL has no AES-192-XTS.
            let key_lens: &[usize] = if spec.starts_with("aes-xts") {
                &[32, 64]
            } else {
                &[16, 24, 32]
            };
            for (i, (layout, first)) in LAYOUTS.into_iter().enumerate() {
                let key = pattern(key_lens[i % key_lens.len()], i as u64);
                let data = pattern(layout.size * (i + 2), 10 + i as u64);
                let (k, f, n) = (hex(&key), first.to_string(), layout.size.to_string());
                let mut args = vec!["cipher", "encrypt", "--cipher", spec, "--key", &k];
                args.extend(["--sector", &f, "--sector-size", &n]);
                if layout.large_iv {
                    args.push("--iv-large-sectors");
                }
                let enc = ok_bytes(sc_on(&args, &data, Some(b)));
                let want = dm_crypt(
                    spec,
                    &key,
                    layout.size,
                    layout.step(),
                    first,
                    &data,
                    Mode::Encrypt,
                );
                assert_eq!(enc, want, "{spec} {layout:?} from {first} on {b}");
                args[1] = "decrypt";
                let back = ok_bytes(sc_on(&args, &enc, Some(b)));
                assert_eq!(back, data, "{spec} decrypt on {b}");
            }
        }
    }
}

/// A Python with Botan's binding (`import botan2`): the system's, where another Python
/// comes first in PATH. Fails the test (under SECTORCRYPT_STRICT=1) when there is none.
fn botan_python() -> Option<&'static str> {
    let found = support::python_with("botan2");
    if found.is_none() {
        sectorcrypt_testkit::skipped!("skipped: python3-botan is not installed");
    }
    found
}

/// Botan's `algo` in XTS decrypting `data`, sector `i` under the tweak le64(`ivs[i]`).
fn botan_xts_decrypt(py: &str, algo: &str, key: &[u8], ivs: &[u64], data: &[u8]) -> Vec<u8> {
    let script = "import sys, struct, botan2\n\
        algo, key, ivs, size = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], int(sys.argv[4])\n\
        data = sys.stdin.buffer.read()\n\
        out = bytearray()\n\
        for i, iv in enumerate(ivs.split(',')):\n\
        \x20   c = botan2.SymmetricCipher(algo, encrypt=False)\n\
        \x20   c.set_key(key)\n\
        \x20   c.start(struct.pack('<Q', int(iv)) + bytes(8))\n\
        \x20   out += c.finish(data[i * size:(i + 1) * size])\n\
        sys.stdout.buffer.write(out)\n";
    let ivs: Vec<String> = ivs.iter().map(u64::to_string).collect();
    let size = data.len() / ivs.len();
    let mut child = std::process::Command::new(py)
        .args([
            "-c",
            script,
            algo,
            &hex(key),
            &ivs.join(","),
            &size.to_string(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "botan: {out:?}");
    out.stdout
}

/// Serpent, Twofish and Camellia in XTS with dm-crypt's `plain64` and `plain` IVs, as
/// `sectorcrypt cipher` encrypts them, decrypt under Botan with the IVs dm-crypt's
/// formula gives (the sector numbers crossing 2^32, where `plain` wraps), with XTS keys of
/// 512, 256 and 384 bits in turn (each layout under another key size).
#[test]
fn other_xts_ciphers_match_botan_per_sector() {
    let Some(py) = botan_python() else { return };
    for name in ["serpent", "twofish", "camellia"] {
        for iv in ["plain64", "plain"] {
            let spec = format!("{name}-xts-{iv}");
            // LAYOUTS with 2 to 4 sectors, then 70 sectors of 512 bytes: past the 16 KiB
            // the cascade runs per stretch in one call (plain64's consecutive IVs).
            let many = (
                Layout {
                    size: 512,
                    large_iv: false,
                },
                0xffff_ffe0,
            );
            for (i, (layout, first)) in LAYOUTS.into_iter().chain([many]).enumerate() {
                let key_len = [64, 32, 48][i % 3];
                let key = pattern(key_len, 40 + i as u64);
                let algo = match name {
                    "serpent" => "Serpent/XTS".to_string(),
                    "twofish" => "Twofish/XTS".to_string(),
                    _ => format!("Camellia-{}/XTS", key_len * 4),
                };
                let n = if i < LAYOUTS.len() { i + 2 } else { 70 };
                let data = pattern(layout.size * n, 50 + i as u64);
                let (k, f, size) = (hex(&key), first.to_string(), layout.size.to_string());
                let mut args = vec!["cipher", "encrypt", "--cipher", &spec, "--key", &k];
                args.extend(["--sector", &f, "--sector-size", &size]);
                if layout.large_iv {
                    args.push("--iv-large-sectors");
                }
                let enc = ok_bytes(sc(&args, &data));
                let ivs: Vec<u64> = (0..n as u64)
                    .map(|j| {
                        let number = first + j * layout.step();
                        if iv == "plain" {
                            number & 0xffff_ffff
                        } else {
                            number
                        }
                    })
                    .collect();
                let back = botan_xts_decrypt(py, &algo, &key, &ivs, &enc);
                assert!(
                    back == data,
                    "{spec} {layout:?} from {first}, {key_len}-byte key: Botan reads other data"
                );
            }
        }
    }
}

/// Botan's block cipher `block` in CBC decrypting `data`, sector `i` under the IV
/// le64(`ivs[i]`) (`plain64`; the caller masks `plain`'s), encrypted first under
/// `essiv` keyed with SHA-256(`key`) when it is given (dm-crypt's ESSIV).
fn botan_cbc_decrypt(
    py: &str,
    block: &str,
    essiv: Option<&str>,
    key: &[u8],
    ivs: &[u64],
    data: &[u8],
) -> Vec<u8> {
    let script = "import sys, struct, hashlib, botan2\n\
        block, essiv, key = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])\n\
        ivs, size = sys.argv[4], int(sys.argv[5])\n\
        data = sys.stdin.buffer.read()\n\
        e = None\n\
        if essiv != '-':\n\
        \x20   e = botan2.BlockCipher(essiv)\n\
        \x20   e.set_key(hashlib.sha256(key).digest())\n\
        out = bytearray()\n\
        for i, iv in enumerate(ivs.split(',')):\n\
        \x20   iv = struct.pack('<Q', int(iv)) + bytes(8)\n\
        \x20   if e:\n\
        \x20       iv = e.encrypt(iv)\n\
        \x20   c = botan2.SymmetricCipher(block + '/CBC/NoPadding', encrypt=False)\n\
        \x20   c.set_key(key)\n\
        \x20   c.start(iv)\n\
        \x20   out += c.finish(data[i * size:(i + 1) * size])\n\
        sys.stdout.buffer.write(out)\n";
    let ivs: Vec<String> = ivs.iter().map(u64::to_string).collect();
    let size = data.len() / ivs.len();
    let mut child = std::process::Command::new(py)
        .args(["-c", script, block, essiv.unwrap_or("-"), &hex(key)])
        .args([ivs.join(","), size.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "botan: {out:?}");
    out.stdout
}

/// Serpent, Twofish and Camellia in CBC with dm-crypt's `plain64`, `plain` and
/// `essiv:sha256` IVs, as `sectorcrypt cipher` encrypts them, decrypt under Botan (the
/// ESSIV IVs encrypted by Botan with the same cipher under SHA-256 of the key), with
/// 128-, 192- and 256-bit keys in turn; the sector numbers cross 2^32, where `plain` wraps.
#[test]
fn other_cbc_ciphers_match_botan_per_sector() {
    let Some(py) = botan_python() else { return };
    for name in ["serpent", "twofish", "camellia"] {
        for iv in ["plain64", "plain", "essiv:sha256"] {
            let spec = format!("{name}-cbc-{iv}");
            let many = (
                Layout {
                    size: 512,
                    large_iv: false,
                },
                0xffff_ffe0,
            );
            for (i, (layout, first)) in LAYOUTS.into_iter().chain([many]).enumerate() {
                let key_len = [32, 16, 24, 32][i];
                let key = pattern(key_len, 60 + i as u64);
                let block = |bits: usize| match name {
                    "serpent" => "Serpent".to_string(),
                    "twofish" => "Twofish".to_string(),
                    _ => format!("Camellia-{bits}"),
                };
                let essiv = (iv == "essiv:sha256").then(|| block(256));
                let n = if i < LAYOUTS.len() { i + 2 } else { 40 };
                let data = pattern(layout.size * n, 70 + i as u64);
                let (k, f, size) = (hex(&key), first.to_string(), layout.size.to_string());
                let mut args = vec!["cipher", "encrypt", "--cipher", &spec, "--key", &k];
                args.extend(["--sector", &f, "--sector-size", &size]);
                if layout.large_iv {
                    args.push("--iv-large-sectors");
                }
                let enc = ok_bytes(sc(&args, &data));
                assert_ne!(enc, data);
                let ivs: Vec<u64> = (0..n as u64)
                    .map(|j| {
                        let number = first + j * layout.step();
                        if iv == "plain" {
                            number & 0xffff_ffff
                        } else {
                            number
                        }
                    })
                    .collect();
                let back =
                    botan_cbc_decrypt(py, &block(key_len * 8), essiv.as_deref(), &key, &ivs, &enc);
                assert!(
                    back == data,
                    "{spec} {layout:?} from {first}, {key_len}-byte key: Botan reads other data"
                );
            }
        }
    }
}

/// LUKS2 (4096-byte sectors) and LUKS1 volumes that `format` makes with Serpent, Twofish
/// and Camellia in XTS and CBC, with each key size (keyslots and data under the same
/// cipher, as cryptsetup makes them), and
/// data `write` put there, open without sectorcrypt: the header read by cryptsetup
/// (LUKS2's JSON) or the script, the keyslot, the key digest and the data by hashlib and
/// Botan. An AES volume cryptsetup made is the script's own control.
#[test]
fn luks_volumes_with_the_other_ciphers_open_with_botan() {
    sectorcrypt_testkit::require!("cryptsetup");
    let Some(py) = botan_python() else { return };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/luks-botan.py");
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pass");
    std::fs::write(&pass, b"correct horse").unwrap();
    let plain = pattern(1 << 20, 0x5e7);
    let plain_file = dir.path().join("plain");
    std::fs::write(&plain_file, &plain).unwrap();
    let fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
    let mut cases = vec![("aes-xts-plain64", "luks2", "512", true)];
    for name in ["serpent", "twofish", "camellia"] {
        for kind in ["luks2", "luks1"] {
            cases.push((name, kind, "512", false));
        }
    }
    // XTS keys of 256 and 384 bits (two 128- or 192-bit cipher keys); CBC with ESSIV
    // and plain64 IVs, keys of 128, 192 and 256 bits.
    cases.extend([
        ("serpent", "luks1", "256", false),
        ("camellia", "luks2", "256", false),
        ("twofish", "luks2", "384", false),
        ("camellia", "luks1", "384", false),
        ("serpent-cbc-essiv:sha256", "luks1", "256", false),
        ("twofish-cbc-essiv:sha256", "luks2", "128", false),
        ("camellia-cbc-plain64", "luks1", "192", false),
        ("camellia-cbc-essiv:sha256", "luks2", "128", false),
    ]);
    for (cipher, kind, bits, by_cryptsetup) in cases {
        let spec = if cipher.contains('-') {
            cipher.to_string()
        } else {
            format!("{cipher}-xts-plain64")
        };
        let img = dir.path().join(format!("{cipher}-{kind}-{bits}.img"));
        if by_cryptsetup {
            std::fs::File::create(&img)
                .unwrap()
                .set_len(20 << 20)
                .unwrap();
            let out = std::process::Command::new("cryptsetup")
                .args(["luksFormat", "-q", "--type", kind, "--cipher", &spec])
                .args(["--key-file", s(&pass), "--disable-locks"])
                .args(fast)
                .arg(&img)
                .output()
                .unwrap();
            assert!(out.status.success(), "cryptsetup luksFormat: {out:?}");
        } else {
            let mut args = vec!["format", s(&img), "--type", kind, "--size", "20M", "-q"];
            args.extend([
                "--cipher",
                &spec,
                "--key-size",
                bits,
                "--key-file",
                s(&pass),
            ]);
            args.extend(fast);
            ok_bytes(sc(&args, b""));
        }
        let args = [
            "write",
            s(&img),
            "--key-file",
            s(&pass),
            "--input",
            s(&plain_file),
        ];
        ok_bytes(sc(&args, b""));
        let out = std::process::Command::new(py)
            .args([script, s(&img), s(&pass), s(&plain_file)])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{spec} {kind} {bits}: {said}");
        // LUKS2 takes 4096-byte sectors here (the IV steps by 8), LUKS1 512-byte ones.
        let sector = if kind == "luks2" { 4096 } else { 512 };
        assert_eq!(said.trim(), format!("{spec} {sector}"), "{kind}");
        let read = ok_bytes(sc(&["read", s(&img), "--key-file", s(&pass)], b""));
        assert!(
            read[..plain.len()] == plain[..],
            "{spec} {kind} {bits}: sectorcrypt reads other data"
        );
    }
}

#[test]
fn files_and_key_files() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key = pattern(64, 1);
    let data = pattern(8 * 512, 2);
    let (kf, inf, outf) = (
        dir.path().join("key"),
        dir.path().join("in"),
        dir.path().join("out"),
    );
    std::fs::write(&kf, &key).unwrap();
    std::fs::write(&inf, &data).unwrap();
    let spec = "aes-xts-plain64";
    let mut args = vec!["cipher", "encrypt", "--cipher", spec, "--key-file", s(&kf)];
    args.extend(["--input", s(&inf), "--output", s(&outf)]);
    assert!(ok_bytes(sc(&args, b"")).is_empty());
    let enc = std::fs::read(&outf).unwrap();
    assert_eq!(enc, dm_crypt(spec, &key, 512, 1, 0, &data, Mode::Encrypt));
    // Output files are private (they usually hold plaintext) and no temporary is left.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&outf).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "output mode {mode:o}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".sectorcrypt-")),
        "temporary left behind: {names:?}"
    );
    let k = hex(&key);
    let args = [
        "cipher",
        "decrypt",
        "--cipher",
        spec,
        "--key",
        &k,
        "--input",
        s(&outf),
    ];
    assert_eq!(ok_bytes(sc(&args, b"")), data);
}

/// With any sector option `aes-ecb` is the dm-crypt cipher string: whole sectors (512
/// bytes unless `--sector-size` says otherwise), never a partial one.
#[test]
fn aes_ecb_with_a_sector_option_takes_whole_sectors() {
    let key = pattern(16, 3);
    let k = hex(&key);
    let base = ["cipher", "encrypt", "--cipher", "aes-ecb", "--key", &k];
    for option in [
        &["--sector-size", "512"][..],
        &["--sector", "7"],
        &["--iv-large-sectors"],
    ] {
        let args = [&base[..], option].concat();
        let data = pattern(4096, 4);
        let want = evp(reference::aes("ecb", 16), Mode::Encrypt, &key, None, &data);
        assert_eq!(ok_bytes(sc(&args, &data)), want, "{option:?}");
        refused(&args, &pattern(4112, 5), "whole number of sectors");
    }
    let args = [&base[..], &["--sector-size", "4096"]].concat();
    refused(&args, &pattern(512, 6), "whole number of sectors");
}

/// LUKS1 and LUKS2 volumes with PBKDF2 and the AF splitter over Whirlpool and RIPEMD-160
/// (`--hash`), both ways with cryptsetup: volumes cryptsetup made open in sectorcrypt and
/// read back what sectorcrypt wrote; volumes sectorcrypt made carry the hash's name as
/// cryptsetup writes it, open in cryptsetup (`--test-passphrase`), and cryptsetup's
/// volume key decrypts the data sectorcrypt wrote (OpenSSL over dm-crypt's sectors).
/// (cryptsetup's OpenSSL backend here has no Streebog: that one is checked by its
/// vector in the volume crate.)
#[test]
fn luks_hashes_agree_with_cryptsetup() {
    sectorcrypt_testkit::require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pass");
    std::fs::write(&pass, b"hash me").unwrap();
    let plain = pattern(64 << 10, 0x4a5);
    let plain_file = dir.path().join("plain");
    std::fs::write(&plain_file, &plain).unwrap();
    let spec = "aes-cbc-essiv:sha256";
    let fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
    let cryptsetup = |args: &[&str]| {
        let out = std::process::Command::new("cryptsetup")
            .args(args)
            .args(["--disable-locks", "--disable-keyring"])
            .output()
            .unwrap();
        assert!(out.status.success(), "cryptsetup {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    for kind in ["luks1", "luks2"] {
        for hash in ["whirlpool", "ripemd160"] {
            let what = format!("{kind} {hash}");
            // Made by cryptsetup, written and read by sectorcrypt.
            let theirs = dir.path().join(format!("cs-{kind}-{hash}.img"));
            std::fs::File::create(&theirs)
                .unwrap()
                .set_len(20 << 20)
                .unwrap();
            let mut args = vec!["luksFormat", "-q", "--type", kind, "--cipher", spec];
            args.extend(["--key-size", "256", "--hash", hash, "--key-file", s(&pass)]);
            args.extend(fast);
            args.push(s(&theirs));
            cryptsetup(&args);
            let io = ["--key-file", s(&pass)];
            ok_bytes(sc(
                &[&["write", s(&theirs), "--input", s(&plain_file)][..], &io].concat(),
                b"",
            ));
            let read = ok_bytes(sc(&[&["read", s(&theirs)][..], &io].concat(), b""));
            assert!(
                read[..plain.len()] == plain[..],
                "{what}: cryptsetup's volume"
            );
            // Made by sectorcrypt, opened by cryptsetup.
            let ours = dir.path().join(format!("sc-{kind}-{hash}.img"));
            let mut args = vec!["format", s(&ours), "--type", kind, "--size", "20M", "-q"];
            args.extend(["--cipher", spec, "--key-size", "256", "--hash", hash]);
            args.extend(["--key-file", s(&pass)]);
            args.extend(fast);
            ok_bytes(sc(&args, b""));
            ok_bytes(sc(
                &[&["write", s(&ours), "--input", s(&plain_file)][..], &io].concat(),
                b"",
            ));
            let dump = cryptsetup(&["luksDump", s(&ours)]);
            // LUKS1: "Hash spec"; LUKS2: the keyslot's "Hash", its "AF hash" and the
            // digest's "Hash".
            let named = dump
                .lines()
                .map(str::trim)
                .filter(|l| {
                    (l.starts_with("Hash") || l.starts_with("AF hash")) && l.ends_with(hash)
                })
                .count();
            let want = if kind == "luks1" { 1 } else { 3 };
            assert_eq!(
                named, want,
                "{what}: the dump names {hash} elsewhere:\n{dump}"
            );
            cryptsetup(&[
                "open",
                "--test-passphrase",
                "--key-file",
                s(&pass),
                s(&ours),
            ]);
            let vk = dir.path().join(format!("vk-{kind}-{hash}"));
            cryptsetup(&[
                "luksDump",
                "-q",
                "--dump-volume-key",
                "--volume-key-file",
                s(&vk),
                "--key-file",
                s(&pass),
                s(&ours),
            ]);
            let key = std::fs::read(&vk).unwrap();
            let image = std::fs::read(&ours).unwrap();
            let offset = if kind == "luks1" { 2 << 20 } else { 16 << 20 };
            let size = if kind == "luks1" { 512 } else { 4096 };
            let stored = &image[offset..offset + plain.len()];
            let back = dm_crypt(
                spec,
                &key,
                size,
                (size / 512) as u64,
                0,
                stored,
                Mode::Decrypt,
            );
            assert!(back == plain, "{what}: cryptsetup's key reads other data");
        }
    }
}
