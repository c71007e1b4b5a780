//! The case `kuznyechik-xts/4096`: Kuznyechik (GOST R 34.12-2015) in XTS (two 256-bit
//! keys), 4096-byte data units numbered from 0, through the crypto core's cascade (one
//! Kuznyechik layer, on the backend the crate selects: `avx512` or the portable `soft`,
//! the RustCrypto `kuznyechik` crate; the side's name says which).
//!
//! The peer is OpenSSL's gost provider (gost-engine, Debian `libengine-gost-openssl`), what
//! an OpenSSL user runs Kuznyechik with: libgcrypt 1.10 has no Kuznyechik
//! (`gcry_cipher_map_name("kuznyechik")` is 0), and the provider has no XTS, so the peer
//! runs `kuznyechik-ecb` over each whole unit, the tweak encrypted with a second ECB
//! context and the tweak sequence XORed in and out around it (a few percent of its
//! time). Both produce the same bytes, checked when the case is built.

use super::{gost_provider_cipher, system_openssl, Built, ENGINE_SIDE};
use crate::Side;
use openssl::cipher::CipherRef;
use openssl::cipher_ctx::CipherCtx;
use sectorcrypt_crypto::cascade::{Cascade, Layer};

const UNIT: usize = 4096;
/// Bytes per call: 64 units (256 KiB, in L2).
const BYTES: usize = 64 * UNIT;

fn e(err: impl std::fmt::Display) -> String {
    err.to_string()
}

/// XTS of the gost provider's Kuznyechik-ECB over the units of `buf`, numbered from 0:
/// `data` keyed with K1, `tweak` with K2, both encrypting.
struct GostXts {
    data: CipherCtx,
    tweak: CipherCtx,
    /// The unit's tweak sequence, then the ECB output.
    mask: Vec<u8>,
    out: Vec<u8>,
}

impl GostXts {
    fn new(ecb: &CipherRef, key: &[u8]) -> Result<GostXts, String> {
        let ctx = |k: &[u8]| -> Result<CipherCtx, String> {
            let mut c = CipherCtx::new().map_err(e)?;
            c.encrypt_init(Some(ecb), Some(k), None).map_err(e)?;
            c.set_padding(false);
            Ok(c)
        };
        Ok(GostXts {
            data: ctx(&key[..32])?,
            tweak: ctx(&key[32..])?,
            mask: vec![0u8; UNIT],
            out: vec![0u8; UNIT + 16],
        })
    }

    fn encrypt(&mut self, buf: &mut [u8]) -> Result<(), String> {
        for (i, u) in buf.chunks_exact_mut(UNIT).enumerate() {
            let mut n = [0u8; 16];
            n[..8].copy_from_slice(&(i as u64).to_le_bytes());
            let mut t = [0u8; 32];
            self.tweak.cipher_update(&n, Some(&mut t)).map_err(e)?;
            let mut v = u128::from_le_bytes(t[..16].try_into().expect("16 bytes"));
            for m in self.mask.chunks_exact_mut(16) {
                m.copy_from_slice(&v.to_le_bytes());
                v = (v << 1) ^ (0x87 * (v >> 127));
            }
            u.iter_mut().zip(&self.mask).for_each(|(x, m)| *x ^= m);
            let got = self.data.cipher_update(u, Some(&mut self.out)).map_err(e)?;
            if got != UNIT {
                return Err(format!("gost provider: {got} bytes out of {UNIT}"));
            }
            u.iter_mut()
                .zip(self.out.iter().zip(&self.mask))
                .for_each(|(x, (o, m))| *x = o ^ m);
        }
        Ok(())
    }
}

/// The version line of the peer: OpenSSL's, and gost-engine's package version where dpkg
/// knows it.
fn peer_version() -> Option<String> {
    let openssl = system_openssl()?;
    let engine = std::process::Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "libengine-gost-openssl"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty());
    Some(match engine {
        Some(v) => format!("{openssl}, gost-engine {v}"),
        None => format!("{openssl}, gost-engine (version unknown)"),
    })
}

pub(crate) fn kuznyechik_xts() -> Result<Built, String> {
    let key: Vec<u8> = (0..64u32).map(|i| (i * 73 + 19) as u8).collect();
    let ours = Cascade::new(&[Layer::Kuznyechik], &key).map_err(e)?;
    let backend = ours.kuznyechik_backend().map_or("none", |b| b.name());
    let src: Vec<u8> = (0..BYTES)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let mut a = src.clone();
    ours.encrypt(0, UNIT, &mut a).map_err(e)?;
    let peer = match gost_provider_cipher("kuznyechik-ecb") {
        Some(ecb) => {
            let mut g = GostXts::new(ecb, &key)?;
            let mut b = src.clone();
            g.encrypt(&mut b)?;
            if a != b {
                return Err("kuznyechik-xts: the gost provider and the engine differ".into());
            }
            let mut buf = src.clone();
            Some(Side {
                version: peer_version(),
                output: None,
                name: "openssl-gostprov".into(),
                bytes: BYTES,
                call: Box::new(move || g.encrypt(&mut buf).expect("gost provider")),
            })
        }
        None => {
            eprintln!("kuznyechik-xts: no peer: OpenSSL's gost provider is not installed");
            None
        }
    };
    Ok(Built {
        ours: Side {
            version: None,
            output: None,
            name: format!("{ENGINE_SIDE}kuznyechik-{backend}"),
            bytes: BYTES,
            call: Box::new(move || ours.encrypt(0, UNIT, &mut a).expect("engine")),
        },
        peer,
        job: None,
    })
}

/// Every Kuznyechik backend this CPU runs against the gost provider on 4096-byte units
/// (the case's work); returns the backends compared (the others are printed as skipped,
/// with the feature the CPU lacks).
#[cfg(test)]
pub(crate) fn every_backend_agrees_with_the_gost_provider() -> Result<Vec<&'static str>, String> {
    use sectorcrypt_crypto::cascade::KuznyechikBackend;
    let key: Vec<u8> = (0..64u32).map(|i| (i * 41 + 7) as u8).collect();
    let ecb = gost_provider_cipher("kuznyechik-ecb").ok_or("no gost provider")?;
    let mut compared = Vec::new();
    for b in KuznyechikBackend::ALL {
        if let Err(why) = b.ensure_usable() {
            eprintln!("skipped: kuznyechik backend {b}: {why}");
            continue;
        }
        let ours = Cascade::with_kuznyechik_backend(&[Layer::Kuznyechik], &key, b).map_err(e)?;
        let src: Vec<u8> = (0..8 * UNIT).map(|i| (i * 7 + 1) as u8).collect();
        let mut a = src.clone();
        ours.encrypt(0, UNIT, &mut a).map_err(e)?;
        let mut want = src.clone();
        GostXts::new(ecb, &key)?.encrypt(&mut want)?;
        if a != want {
            return Err(format!("{b}: the gost provider differs"));
        }
        ours.decrypt(0, UNIT, &mut a).map_err(e)?;
        if a != src {
            return Err(format!("{b}: decryption differs"));
        }
        compared.push(b.name());
    }
    Ok(compared)
}
