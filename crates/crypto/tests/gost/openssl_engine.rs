//! Against OpenSSL's GOST implementation (gost-engine's provider `gostprov`, Debian package
//! libengine-gost-openssl), driven through the `openssl` command: `enc` for gost89 (CFB,
//! CryptoPro-A, key meshing), gost89-cnt (CryptoPro-A, key meshing), gost89-cbc
//! (param-Z, no meshing), magma-ctr, magma-cbc and magma-ctr-acpkm (1 KiB sections), and
//! `mac` for gost-mac (CryptoPro-A, key meshing) and magma-mac; random keys, IVs and
//! lengths around the meshing and parallel boundaries, on every backend. When the
//! provider is missing the test prints `skipped: <reason>` and returns.

use crate::harness::{backends, bytes, mode, round_trip};
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::{gost89, magma};
use std::io::Write;
use std::process::{Command, Stdio};

fn provider_available() -> Result<(), String> {
    let out = Command::new("openssl")
        .args(["list", "-providers", "-provider", "gostprov"])
        .output()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && text.contains("gostprov") {
        Ok(())
    } else {
        Err(format!(
            "openssl cannot load the gostprov provider (install libengine-gost-openssl): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn openssl(args: &[&str], input: &[u8]) -> Vec<u8> {
    // The subcommand first, then the providers, then its options.
    let mut child = Command::new("openssl")
        .arg(args[0])
        .args(["-provider", "gostprov", "-provider", "default"])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn openssl");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let w = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    w.join().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn enc(cipher: &str, key: &[u8], iv: &[u8], input: &[u8]) -> Vec<u8> {
    let (k, i) = (hex::encode(key), hex::encode(iv));
    let c = format!("-{cipher}");
    openssl(&["enc", c.as_str(), "-K", &k, "-iv", &i, "-nopad"], input)
}

fn mac(alg: &str, key: &[u8], input: &[u8]) -> String {
    let k = format!("hexkey:{}", hex::encode(key));
    let out = openssl(&["mac", "-macopt", &k, alg], input);
    String::from_utf8_lossy(&out).trim().to_lowercase()
}

/// The `enc` ciphers compared: OpenSSL's name, ours (`harness::mode`), the S-box and
/// key meshing of GOST 28147-89, the IV length, and whether it takes whole blocks only.
const CIPHERS: [(&str, &str, Sbox, bool, usize, bool); 6] = [
    ("gost89", "gost89-cfb", Sbox::Tc26Z, true, 8, false),
    ("gost89-cnt", "gost89-cnt", Sbox::CryptoProA, true, 8, false),
    ("gost89-cbc", "gost89-cbc", Sbox::Tc26Z, false, 8, true),
    ("magma-ctr", "magma-ctr", Sbox::Tc26Z, false, 4, false),
    ("magma-cbc", "magma-cbc", Sbox::Tc26Z, false, 8, true),
    (
        "magma-ctr-acpkm",
        "magma-ctr-acpkm/1024",
        Sbox::Tc26Z,
        false,
        4,
        false,
    ),
];

#[test]
fn agrees_with_openssl_gost_provider() {
    if let Err(why) = provider_available() {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let mut checked = 0;
    for (n, len) in [0usize, 1, 7, 8, 9, 255, 256, 1023, 1024, 1025, 2048, 3001]
        .into_iter()
        .enumerate()
    {
        let key = bytes(32, 1000 + n as u64);
        let iv = bytes(8, 2000 + n as u64);
        let msg = bytes(len, 3000 + n as u64);
        let whole = &msg[..len / 8 * 8];
        let input = |whole_blocks: bool| if whole_blocks { whole } else { &msg[..] };
        let want: Vec<Vec<u8>> = CIPHERS
            .iter()
            .map(|&(ossl, _, _, _, ivl, w)| enc(ossl, &key, &iv[..ivl], input(w)))
            .collect();
        let want_gmac = mac("gost-mac", &key, &msg);
        let want_mmac = mac("magma-mac", &key, &msg);
        for b in backends() {
            let ctx = format!("len {len} backend {b}");
            for (&(ossl, ours, sbox, mesh, ivl, w), want) in CIPHERS.iter().zip(&want) {
                let m = mode(ours, &key, sbox, mesh, b);
                let got = round_trip(&*m, &iv[..ivl], input(w));
                assert_eq!(&got, want, "{ossl} {ctx}");
            }
            if len > 0 {
                let g = gost89::Mac::with_backend(&key, Sbox::CryptoProA, true, b)
                    .unwrap()
                    .mac(&msg);
                assert_eq!(hex::encode(g), want_gmac, "gost-mac {ctx}");
            }
            let m = magma::Mac::with_backend(&key, b).unwrap().mac(&msg);
            assert_eq!(hex::encode(m), want_mmac, "magma-mac {ctx}");
            checked += 1;
        }
    }
    eprintln!("openssl gostprov: {checked} (length, backend) pairs agree on 8 algorithms");
}
