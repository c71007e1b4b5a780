//! The case `twofish-256-xts/4096`: Twofish-256 in XTS (two 256-bit keys), 4096-byte data
//! units numbered from 0, through the crypto core's cascade (one Twofish layer, on the
//! backend the crate selects: `avx512` or the portable `soft`; the side's name says which).
//! The peer is libgcrypt (`GCRY_CIPHER_TWOFISH`, `GCRY_CIPHER_MODE_XTS`, the tweak set
//! per unit), loaded at run time; both produce the same bytes, checked when the case is
//! built.

use super::{Built, ENGINE_SIDE};
use crate::peers::gcrypt::{Gcrypt, MODE_XTS, TWOFISH};
use crate::Side;
use sectorcrypt_crypto::cascade::{Cascade, Layer};

const UNIT: usize = 4096;
/// Bytes per call: 64 units (256 KiB, in L2).
const BYTES: usize = 64 * UNIT;

fn e(err: impl std::fmt::Display) -> String {
    err.to_string()
}

pub(crate) fn twofish_256_xts() -> Result<Built, String> {
    let key: Vec<u8> = (0..64u32).map(|i| (i * 73 + 19) as u8).collect();
    let ours = Cascade::new(&[Layer::Twofish], &key).map_err(e)?;
    let backend = ours.twofish_backend().map_or("none", |b| b.name());
    let src: Vec<u8> = (0..BYTES)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let mut a = src.clone();
    ours.encrypt(0, UNIT, &mut a).map_err(e)?;
    let peer = match Gcrypt::open(TWOFISH, MODE_XTS, &key) {
        Ok(mut g) => {
            let mut b = src.clone();
            encrypt_units(&mut g, UNIT, &mut b)?;
            if a != b {
                return Err("twofish-256-xts: libgcrypt and the engine differ".into());
            }
            let version = format!("libgcrypt {}", g.version);
            let mut buf = src.clone();
            Some(Side {
                version: Some(version),
                output: None,
                name: "libgcrypt".into(),
                bytes: BYTES,
                call: Box::new(move || encrypt_units(&mut g, UNIT, &mut buf).expect("libgcrypt")),
            })
        }
        Err(why) => {
            eprintln!("twofish-256-xts: no peer: {why}");
            None
        }
    };
    Ok(Built {
        ours: Side {
            version: None,
            output: None,
            name: format!("{ENGINE_SIDE}twofish-{backend}"),
            bytes: BYTES,
            call: Box::new(move || ours.encrypt(0, UNIT, &mut a).expect("engine")),
        },
        peer,
        job: None,
    })
}

/// libgcrypt's XTS over the `unit`-byte units of `buf`, numbered from 0.
fn encrypt_units(g: &mut Gcrypt, unit: usize, buf: &mut [u8]) -> Result<(), String> {
    for (i, u) in buf.chunks_exact_mut(unit).enumerate() {
        let mut tweak = [0u8; 16];
        tweak[..8].copy_from_slice(&(i as u64).to_le_bytes());
        g.encrypt_unit(&tweak, u)?;
    }
    Ok(())
}

/// Every Twofish backend this CPU runs against libgcrypt, encrypting and decrypting
/// units of 512 and 4096 bytes; returns the backends compared (the others are printed as
/// skipped, with the feature the CPU lacks).
#[cfg(test)]
pub(crate) fn every_backend_agrees_with_libgcrypt() -> Result<Vec<&'static str>, String> {
    use sectorcrypt_crypto::cascade::TwofishBackend;
    let key: Vec<u8> = (0..64u32).map(|i| (i * 41 + 7) as u8).collect();
    let mut g = Gcrypt::open(TWOFISH, MODE_XTS, &key)?;
    let mut compared = Vec::new();
    for b in TwofishBackend::ALL {
        if let Err(why) = b.ensure_usable() {
            eprintln!("skipped: twofish backend {b}: {why}");
            continue;
        }
        let ours = Cascade::with_twofish_backend(&[Layer::Twofish], &key, b).map_err(e)?;
        for unit in [512usize, UNIT] {
            let src: Vec<u8> = (0..8 * unit).map(|i| (i * 7 + 1) as u8).collect();
            let mut a = src.clone();
            ours.encrypt(0, unit, &mut a).map_err(e)?;
            let mut want = src.clone();
            encrypt_units(&mut g, unit, &mut want)?;
            if a != want {
                return Err(format!("{b}: libgcrypt differs on {unit}-byte units"));
            }
            ours.decrypt(0, unit, &mut a).map_err(e)?;
            if a != src {
                return Err(format!("{b}: decryption differs on {unit}-byte units"));
            }
        }
        compared.push(b.name());
    }
    Ok(compared)
}
