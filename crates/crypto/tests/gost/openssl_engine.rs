//! Against OpenSSL's GOST implementation (gost-engine's provider `gostprov`, Debian package
//! libengine-gost-openssl), driven through the `openssl` command: `enc` for gost89 (CFB,
//! CryptoPro-A, key meshing), gost89-cnt (CryptoPro-A, key meshing), gost89-cbc
//! (param-Z, no meshing), magma-ctr, magma-cbc and magma-ctr-acpkm (1 KiB sections), and
//! `mac` for gost-mac (CryptoPro-A, key meshing) and magma-mac; random keys, IVs and
//! lengths around the meshing and parallel boundaries, on every backend. When the
//! provider is missing the test prints `skipped: <reason>` and returns.

use crate::harness::{backends, bytes};
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

#[test]
fn agrees_with_openssl_gost_provider() {
    if let Err(why) = provider_available() {
        eprintln!("skipped: {why}");
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
        let want_cfb = enc("gost89", &key, &iv, &msg);
        let want_cnt = enc("gost89-cnt", &key, &iv, &msg);
        let want_cbc = enc("gost89-cbc", &key, &iv, whole);
        let want_mctr = enc("magma-ctr", &key, &iv[..4], &msg);
        let want_mcbc = enc("magma-cbc", &key, &iv, whole);
        let want_acpkm = enc("magma-ctr-acpkm", &key, &iv[..4], &msg);
        let want_gmac = mac("gost-mac", &key, &msg);
        let want_mmac = mac("magma-mac", &key, &msg);
        let iv8: [u8; 8] = iv.clone().try_into().unwrap();
        let iv4: [u8; 4] = iv[..4].try_into().unwrap();
        let a = Sbox::CryptoProA;
        for b in backends() {
            let ctx = format!("len {len} backend {b}");
            let mut x = msg.clone();
            gost89::Cfb::with_backend(&key, Sbox::Tc26Z, true, b)
                .unwrap()
                .encrypt(&iv8, &mut x)
                .unwrap();
            assert_eq!(x, want_cfb, "gost89 (cfb) {ctx}");
            let mut x = msg.clone();
            gost89::Cnt::with_backend(&key, a, true, b)
                .unwrap()
                .encrypt(&iv8, &mut x)
                .unwrap();
            assert_eq!(x, want_cnt, "gost89-cnt {ctx}");
            let mut x = whole.to_vec();
            gost89::Cbc::with_backend(&key, Sbox::Tc26Z, false, b)
                .unwrap()
                .encrypt(&iv8, &mut x)
                .unwrap();
            assert_eq!(x, want_cbc, "gost89-cbc {ctx}");
            let mut x = msg.clone();
            magma::Ctr::with_backend(&key, b)
                .unwrap()
                .encrypt(&iv4, &mut x)
                .unwrap();
            assert_eq!(x, want_mctr, "magma-ctr {ctx}");
            let mut x = whole.to_vec();
            magma::Cbc::with_backend(&key, b)
                .unwrap()
                .encrypt(&iv, &mut x)
                .unwrap();
            assert_eq!(x, want_mcbc, "magma-cbc {ctx}");
            let mut x = msg.clone();
            magma::CtrAcpkm::with_backend(&key, 1024, b)
                .unwrap()
                .encrypt(&iv4, &mut x)
                .unwrap();
            assert_eq!(x, want_acpkm, "magma-ctr-acpkm {ctx}");
            if len > 0 {
                let g = gost89::Mac::with_backend(&key, a, true, b)
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
