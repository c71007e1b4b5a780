//! `sectorcrypt cipher` with dm-crypt cipher strings: every string of the crypto crate
//! against OpenSSL one sector at a time under every backend, at 512- and 4096-byte
//! sectors with either IV count; key and data files; `aes-ecb` with a sector option.

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
        for spec in CipherSpec::ALL {
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
