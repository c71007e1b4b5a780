//! The cases of one cascade layer in XTS against libgcrypt: `serpent-256-xts/4096`,
//! `camellia-256-xts/4096` and `twofish-256-xts/4096`. Each runs the cipher in XTS (two
//! 256-bit keys), 4096-byte data units numbered from 0, through the crypto core's cascade
//! (one layer, on the backend the crate selects; the side's name says which). The peer is
//! libgcrypt (the cipher's `GCRY_CIPHER_*` in `GCRY_CIPHER_MODE_XTS`, the tweak set per
//! unit), loaded at run time; both produce the same bytes, checked when the case is built.

use super::{Built, ENGINE_SIDE};
use crate::peers::gcrypt::{Gcrypt, CAMELLIA256, MODE_XTS, SERPENT256, TWOFISH};
use crate::Side;
use sectorcrypt_crypto::cascade::{Cascade, Layer};
use std::ffi::c_int;

const UNIT: usize = 4096;
/// Bytes per call: 64 units (256 KiB, in L2).
const BYTES: usize = 64 * UNIT;

fn e(err: impl std::fmt::Display) -> String {
    err.to_string()
}

/// libgcrypt's algorithm for the 256-bit key of `layer`.
fn algorithm(layer: Layer) -> Result<c_int, String> {
    match layer {
        Layer::Serpent => Ok(SERPENT256),
        Layer::Camellia => Ok(CAMELLIA256),
        Layer::Twofish => Ok(TWOFISH),
        other => Err(format!("no libgcrypt XTS case for {}", other.name())),
    }
}

/// The backend the cascade's `layer` runs on.
fn backend_name(c: &Cascade, layer: Layer) -> &'static str {
    let name = match layer {
        Layer::Serpent => c.serpent_backend().map(|b| b.name()),
        Layer::Camellia => c.camellia_backend().map(|b| b.name()),
        Layer::Twofish => c.twofish_backend().map(|b| b.name()),
        _ => None,
    };
    name.unwrap_or("none")
}

/// The case `<layer>-256-xts/4096`.
pub(crate) fn case(layer: Layer) -> Result<Built, String> {
    let cipher = layer.name();
    let key: Vec<u8> = (0..64u32).map(|i| (i * 73 + 19) as u8).collect();
    let ours = Cascade::new(&[layer], &key).map_err(e)?;
    let backend = backend_name(&ours, layer);
    let src: Vec<u8> = (0..BYTES)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let mut a = src.clone();
    ours.encrypt(0, UNIT, &mut a).map_err(e)?;
    let peer = match Gcrypt::open(algorithm(layer)?, MODE_XTS, &key) {
        Ok(mut g) => {
            let mut b = src.clone();
            encrypt_units(&mut g, UNIT, &mut b)?;
            if a != b {
                return Err(format!("{cipher}-256-xts: libgcrypt and the engine differ"));
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
            eprintln!("{cipher}-256-xts: no peer: {why}");
            None
        }
    };
    Ok(Built {
        ours: Side {
            version: None,
            output: None,
            name: format!("{ENGINE_SIDE}{cipher}-{backend}"),
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

/// A backend's name, and the cascade on it, or why the CPU cannot run it.
#[cfg(test)]
type OnBackend = (&'static str, Result<Cascade, String>);

/// Each backend of `layer`'s family, with the cascade of that layer under `key` on it.
#[cfg(test)]
fn each_backend(layer: Layer, key: &[u8]) -> Result<Vec<OnBackend>, String> {
    use sectorcrypt_crypto::cascade::{CamelliaBackend, SerpentBackend, TwofishBackend};
    macro_rules! family {
        ($backend:ty, $with:ident) => {
            <$backend>::ALL
                .into_iter()
                .map(|b| {
                    let on = match b.ensure_usable() {
                        Err(why) => Err(why.to_string()),
                        Ok(()) => Ok(Cascade::$with(&[layer], key, b).map_err(e)?),
                    };
                    Ok((b.name(), on))
                })
                .collect()
        };
    }
    match layer {
        Layer::Serpent => family!(SerpentBackend, with_serpent_backend),
        Layer::Camellia => family!(CamelliaBackend, with_camellia_backend),
        Layer::Twofish => family!(TwofishBackend, with_twofish_backend),
        other => Err(format!("no libgcrypt XTS case for {}", other.name())),
    }
}

/// Every backend of `layer` this CPU runs against libgcrypt, encrypting and decrypting
/// units of 512 and 4096 bytes; returns the backends compared (the others are printed as
/// skipped, with the feature the CPU lacks).
#[cfg(test)]
pub(crate) fn every_backend_agrees_with_libgcrypt(
    layer: Layer,
) -> Result<Vec<&'static str>, String> {
    let key: Vec<u8> = (0..64u32).map(|i| (i * 41 + 7) as u8).collect();
    let mut g = Gcrypt::open(algorithm(layer)?, MODE_XTS, &key)?;
    let mut compared = Vec::new();
    for (b, ours) in each_backend(layer, &key)? {
        let ours = match ours {
            Ok(c) => c,
            Err(why) => {
                eprintln!("skipped: {} backend {b}: {why}", layer.name());
                continue;
            }
        };
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
        compared.push(b);
    }
    Ok(compared)
}
