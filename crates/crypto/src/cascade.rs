//! XTS (IEEE 1619-2007) over any 128-bit block cipher, and cascades of such layers: the
//! ciphers of VeraCrypt and TrueCrypt volumes (AES, Serpent, Twofish, Camellia, Kuznyechik
//! and their chains, such as VeraCrypt's "AES-Twofish-Serpent").
//!
//! A cascade encrypts a data unit with each layer in turn, every layer a full XTS pass over
//! the unit with its own two keys and the same unit number; decrypting runs the layers in
//! reverse. The key is laid out as VeraCrypt keeps it in a volume header: the primary
//! (data) keys of all layers in order, then their secondary (tweak) keys in the same order,
//! 32 bytes each. A call runs a stretch of whole units (about 16 KiB, in L1) through every
//! layer before the next stretch, so that a layer sees many units at once.
//!
//! The AES layer is this crate's own [`Xts`] (AES-NI and VAES where the CPU has them).
//! Serpent is this crate's own bitsliced code (`serpent`) on three backends
//! ([`SerpentBackend`]): portable (`soft`), AVX2 (8 blocks per step in ymm registers) and
//! AVX-512 (32 blocks per step in zmm registers, the S-boxes as `vpternlogd`), all
//! constant-time. Camellia (`camellia`) has two ([`CamelliaBackend`]): AVX-512 with GFNI
//! (64 blocks per step, byte-sliced, each S-box two GFNI instructions, constant-time) and
//! the portable RustCrypto crate (`soft`). Twofish (`twofish`) has two ([`TwofishBackend`]):
//! AVX-512 with VBMI and GFNI (64 blocks per step, the key-dependent S-boxes looked up in
//! registers, constant-time) and this crate's portable full-keying tables (`soft`,
//! table-driven and so not constant-time, as Linux's and libgcrypt's Twofish). Kuznyechik
//! (`kuznyechik`) has two ([`KuznyechikBackend`]): AVX-512 with GFNI and VBMI (64 blocks
//! per step, byte-sliced, the S-box as `vpermi2b`, the linear map as a GF(2^8) matrix
//! applied with GFNI, constant-time) and the portable RustCrypto crate (`soft`,
//! table-driven). The families are chosen as the crate chooses every family's backend
//! (measured, or `SECTORCRYPT_BACKEND`); their XTS encrypts the tweaks of a batch of units
//! in one call and runs many units per call. Data units must be whole blocks:
//! VeraCrypt's are 512 bytes, so no ciphertext stealing is needed or offered.

use crate::block::BLOCK;
use crate::error::{InputError, KeyError};
use crate::modes::Xts;
use crate::{Error, Mode};
#[cfg(test)]
use cipher::generic_array::GenericArray;
#[cfg(test)]
use cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use std::fmt;
use zeroize::Zeroize;

mod camellia;
mod ecb;
mod kuznyechik;
mod serpent;
mod twofish;

pub use camellia::CamelliaBackend;
pub(crate) use camellia::WORKLOAD as CAMELLIA_WORKLOAD;
pub use ecb::LayerCipher;
pub use kuznyechik::KuznyechikBackend;
pub(crate) use kuznyechik::WORKLOAD as KUZNYECHIK_WORKLOAD;
pub use serpent::SerpentBackend;
pub(crate) use serpent::WORKLOAD as SERPENT_WORKLOAD;
pub use twofish::TwofishBackend;
pub(crate) use twofish::WORKLOAD as TWOFISH_WORKLOAD;

/// Bytes of one layer's primary or secondary key (every supported cipher is used with
/// 256-bit keys).
pub const LAYER_KEY: usize = 32;

/// One cipher of a cascade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// AES-256 (this crate's backends).
    Aes,
    /// Serpent-256.
    Serpent,
    /// Twofish-256.
    Twofish,
    /// Camellia-256.
    Camellia,
    /// Kuznyechik (GOST R 34.12-2015, 128-bit block).
    Kuznyechik,
}

impl Layer {
    /// Every layer.
    pub const ALL: [Layer; 5] = [
        Layer::Aes,
        Layer::Serpent,
        Layer::Twofish,
        Layer::Camellia,
        Layer::Kuznyechik,
    ];

    /// The name as cryptsetup and the Linux crypto API write it: `aes`, `serpent`.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Aes => "aes",
            Layer::Serpent => "serpent",
            Layer::Twofish => "twofish",
            Layer::Camellia => "camellia",
            Layer::Kuznyechik => "kuznyechik",
        }
    }

    /// The layer named `name` (case-insensitive), as [`Layer::name`] writes it.
    pub fn parse(name: &str) -> Option<Layer> {
        Layer::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(name))
    }
}

/// A 128-bit block cipher under one key (the tests' reference XTS runs over it).
#[cfg(test)]
trait Block128: Send + Sync {
    fn encrypt(&self, block: &mut [u8; BLOCK]);
    fn decrypt(&self, block: &mut [u8; BLOCK]);

    /// Encrypts or decrypts every whole block of `data` in place.
    fn apply_blocks(&self, encrypt: bool, data: &mut [u8]) {
        for chunk in data.chunks_exact_mut(BLOCK) {
            let block: &mut [u8; BLOCK] = chunk.try_into().expect("a whole block");
            if encrypt {
                self.encrypt(block);
            } else {
                self.decrypt(block);
            }
        }
    }
}

/// A RustCrypto block cipher of 128-bit blocks.
#[cfg(test)]
struct Rc<C>(C);

#[cfg(test)]
impl<C> Block128 for Rc<C>
where
    C: BlockEncrypt + BlockDecrypt + Send + Sync,
{
    fn encrypt(&self, block: &mut [u8; BLOCK]) {
        self.0
            .encrypt_block(GenericArray::from_mut_slice(&mut block[..]));
    }

    fn decrypt(&self, block: &mut [u8; BLOCK]) {
        self.0
            .decrypt_block(GenericArray::from_mut_slice(&mut block[..]));
    }
}

#[cfg(test)]
fn rc<C>(key: &[u8]) -> Result<Box<dyn Block128>, Error>
where
    C: KeyInit + BlockEncrypt + BlockDecrypt + Send + Sync + 'static,
{
    let cipher = C::new_from_slice(key).map_err(|_| {
        Error::Key(KeyError::Length {
            what: "cascade layer",
            got: key.len(),
            expected: match C::key_size() {
                32 if key.len() < 32 => "32 bytes (this cipher takes 256-bit keys only)",
                _ => "16, 24 or 32 bytes",
            },
        })
    })?;
    Ok(Box::new(Rc(cipher)))
}

/// Bytes of data whose XTS tweaks are made ahead of one multi-block call (a 512-byte
/// VeraCrypt data unit is one stretch).
#[cfg(test)]
const TWEAK_STRETCH: usize = 32 * BLOCK;

/// One keyed XTS layer.
enum Keyed {
    /// AES-XTS on this crate's backends.
    Aes(Xts),
    /// Serpent-XTS on this crate's backends (boxed: two expanded keys, 1 KiB).
    Serpent(Box<serpent::SerpentXts>),
    /// Camellia-XTS on this crate's backends (boxed: two expanded keys).
    Camellia(Box<camellia::CamelliaXts>),
    /// Twofish-XTS on this crate's backends (boxed: two expanded keys).
    Twofish(Box<twofish::TwofishXts>),
    /// Kuznyechik-XTS on this crate's backends (boxed: two expanded keys).
    Kuznyechik(Box<kuznyechik::KuznyechikXts>),
    /// XTS over a portable block cipher: the data key (K1) and the tweak key (K2); every
    /// layer has its own XTS, so only the tests build this (their reference).
    #[cfg(test)]
    Generic {
        data: Box<dyn Block128>,
        tweak: Box<dyn Block128>,
    },
}

/// Multiplies an XTS tweak by the primitive element α of GF(2^128) (IEEE 1619-2007 section
/// 5.2: little-endian, reduction by x^128 + x^7 + x^2 + x + 1, hence 0x87).
fn mul_alpha(t: &mut [u8; BLOCK]) {
    let v = u128::from_le_bytes(*t);
    let carry = (v >> 127) as u8;
    let shifted = (v << 1) ^ u128::from(0x87 * carry);
    *t = shifted.to_le_bytes();
}

/// The backends a cascade's layers are asked to run on (tests and benchmarks); `None`:
/// the selected one.
#[derive(Debug, Clone, Copy, Default)]
struct Backends {
    serpent: Option<SerpentBackend>,
    camellia: Option<CamelliaBackend>,
    twofish: Option<TwofishBackend>,
    kuznyechik: Option<KuznyechikBackend>,
}

impl Keyed {
    fn new(layer: Layer, k1: &[u8], k2: &[u8], backends: Backends) -> Result<Keyed, Error> {
        if layer == Layer::Aes {
            let mut both = [0u8; 2 * LAYER_KEY];
            let len = k1.len() + k2.len();
            if k1.len() != k2.len() || len > both.len() {
                return Err(Error::Key(KeyError::Length {
                    what: "xts layer",
                    got: len,
                    expected: "two keys of one size",
                }));
            }
            both[..k1.len()].copy_from_slice(k1);
            both[k1.len()..len].copy_from_slice(k2);
            let xts = Xts::new(&both[..len]);
            both.zeroize();
            return Ok(Keyed::Aes(xts?));
        }
        if layer == Layer::Serpent {
            return Ok(Keyed::Serpent(Box::new(serpent::SerpentXts::new(
                k1,
                k2,
                backends.serpent,
            )?)));
        }
        if layer == Layer::Camellia {
            return Ok(Keyed::Camellia(Box::new(camellia::CamelliaXts::new(
                k1,
                k2,
                backends.camellia,
            )?)));
        }
        if layer == Layer::Twofish {
            return Ok(Keyed::Twofish(Box::new(twofish::TwofishXts::new(
                k1,
                k2,
                backends.twofish,
            )?)));
        }
        if layer == Layer::Kuznyechik {
            return Ok(Keyed::Kuznyechik(Box::new(kuznyechik::KuznyechikXts::new(
                k1,
                k2,
                backends.kuznyechik,
            )?)));
        }
        unreachable!("every layer has its own XTS above ({layer:?})")
    }

    /// XTS over the data units of `buf`, `unit_len` bytes each (whole blocks, dividing
    /// `buf.len()`), numbered from `first`.
    fn apply(
        &self,
        encrypt: bool,
        first: u64,
        unit_len: usize,
        buf: &mut [u8],
    ) -> Result<(), Error> {
        match self {
            Keyed::Serpent(xts) => {
                xts.apply(encrypt, first, unit_len, buf);
                return Ok(());
            }
            Keyed::Camellia(xts) => {
                xts.apply(encrypt, first, unit_len, buf);
                return Ok(());
            }
            Keyed::Twofish(xts) => {
                xts.apply(encrypt, first, unit_len, buf);
                return Ok(());
            }
            Keyed::Kuznyechik(xts) => {
                xts.apply(encrypt, first, unit_len, buf);
                return Ok(());
            }
            Keyed::Aes(_) => {}
            #[cfg(test)]
            Keyed::Generic { .. } => {}
        }
        for (i, unit) in buf.chunks_exact_mut(unit_len).enumerate() {
            self.apply_unit(encrypt, first.wrapping_add(i as u64), unit)?;
        }
        Ok(())
    }

    /// XTS over the whole-block data unit `unit` numbered `number` (AES and the portable
    /// layers).
    fn apply_unit(&self, encrypt: bool, number: u64, unit: &mut [u8]) -> Result<(), Error> {
        let mut t = [0u8; BLOCK];
        t[..8].copy_from_slice(&number.to_le_bytes());
        match self {
            Keyed::Aes(xts) => xts.apply(encrypt, &t, unit),
            Keyed::Serpent(xts) => {
                xts.apply(encrypt, number, unit.len(), unit);
                Ok(())
            }
            Keyed::Camellia(xts) => {
                xts.apply(encrypt, number, unit.len(), unit);
                Ok(())
            }
            Keyed::Twofish(xts) => {
                xts.apply(encrypt, number, unit.len(), unit);
                Ok(())
            }
            Keyed::Kuznyechik(xts) => {
                xts.apply(encrypt, number, unit.len(), unit);
                Ok(())
            }
            #[cfg(test)]
            Keyed::Generic { data, tweak } => {
                tweak.encrypt(&mut t);
                // A stretch of blocks at a time: XOR the tweaks in, run the block cipher
                // over the whole stretch (many blocks side by side), XOR them out.
                let mut tweaks = [0u8; TWEAK_STRETCH];
                for stretch in unit.chunks_mut(TWEAK_STRETCH) {
                    let tw = &mut tweaks[..stretch.len()];
                    for (tb, c) in tw
                        .chunks_exact_mut(BLOCK)
                        .zip(stretch.chunks_exact_mut(BLOCK))
                    {
                        tb.copy_from_slice(&t);
                        for (x, k) in c.iter_mut().zip(t.iter()) {
                            *x ^= k;
                        }
                        mul_alpha(&mut t);
                    }
                    data.apply_blocks(encrypt, stretch);
                    for (x, k) in stretch.iter_mut().zip(tw.iter()) {
                        *x ^= k;
                    }
                }
                tweaks.zeroize();
                t.zeroize();
                Ok(())
            }
        }
    }
}

/// Bytes of whole units a call runs through every layer before the next stretch (in L1).
const STRETCH: usize = 16 * 1024;

/// A cascade of XTS layers under their keys. `Debug` names the layers only.
pub struct Cascade {
    layers: Vec<(Layer, Keyed)>,
}

impl fmt::Debug for Cascade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.layers.iter().map(|(l, _)| l.name()).collect();
        f.debug_struct("Cascade")
            .field("layers", &names)
            .finish_non_exhaustive()
    }
}

impl Cascade {
    /// The key bytes a cascade of `layers` takes: two 32-byte keys per layer.
    pub fn key_len(layers: &[Layer]) -> usize {
        2 * LAYER_KEY * layers.len()
    }

    /// `layers` (in the order they encrypt) under `key`: the primary keys of all layers,
    /// then their secondary keys ([`Cascade::key_len`] bytes). Refuses an empty cascade, a
    /// key of another length and (AES) equal halves.
    pub fn new(layers: &[Layer], key: &[u8]) -> Result<Cascade, Error> {
        Cascade::build(layers, key, Backends::default())
    }

    /// [`Cascade::new`] with the Serpent layers on a named backend, which must be usable
    /// here (tests and benchmarks).
    pub fn with_serpent_backend(
        layers: &[Layer],
        key: &[u8],
        backend: SerpentBackend,
    ) -> Result<Cascade, Error> {
        let backends = Backends {
            serpent: Some(backend),
            ..Backends::default()
        };
        Cascade::build(layers, key, backends)
    }

    /// [`Cascade::new`] with the Camellia layers on a named backend, which must be usable
    /// here (tests and benchmarks).
    pub fn with_camellia_backend(
        layers: &[Layer],
        key: &[u8],
        backend: CamelliaBackend,
    ) -> Result<Cascade, Error> {
        let backends = Backends {
            camellia: Some(backend),
            ..Backends::default()
        };
        Cascade::build(layers, key, backends)
    }

    /// [`Cascade::new`] with the Twofish layers on a named backend, which must be usable
    /// here (tests and benchmarks).
    pub fn with_twofish_backend(
        layers: &[Layer],
        key: &[u8],
        backend: TwofishBackend,
    ) -> Result<Cascade, Error> {
        let backends = Backends {
            twofish: Some(backend),
            ..Backends::default()
        };
        Cascade::build(layers, key, backends)
    }

    /// [`Cascade::new`] with the Kuznyechik layers on a named backend, which must be usable
    /// here (tests and benchmarks).
    pub fn with_kuznyechik_backend(
        layers: &[Layer],
        key: &[u8],
        backend: KuznyechikBackend,
    ) -> Result<Cascade, Error> {
        let backends = Backends {
            kuznyechik: Some(backend),
            ..Backends::default()
        };
        Cascade::build(layers, key, backends)
    }

    fn build(layers: &[Layer], key: &[u8], backends: Backends) -> Result<Cascade, Error> {
        let n = layers.len();
        if n == 0 || key.len() != Cascade::key_len(layers) {
            return Err(Error::Key(KeyError::Length {
                what: "xts cascade",
                got: key.len(),
                expected: "64 bytes per layer, at least one layer",
            }));
        }
        let (primary, secondary) = key.split_at(n * LAYER_KEY);
        let keyed = layers
            .iter()
            .enumerate()
            .map(|(i, &layer)| {
                let at = i * LAYER_KEY..(i + 1) * LAYER_KEY;
                Ok((
                    layer,
                    Keyed::new(layer, &primary[at.clone()], &secondary[at], backends)?,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Cascade { layers: keyed })
    }

    /// One layer in XTS under `key` = Key1 || Key2, two keys of one size the cipher takes
    /// (dm-crypt's `serpent-xts-plain64` with `-s 256`, 384 or 512): 16, 24 or 32 bytes
    /// each for AES, Serpent, Twofish and Camellia, 32 for Kuznyechik.
    pub fn single(layer: Layer, key: &[u8]) -> Result<Cascade, Error> {
        let half = key.len() / 2;
        if !key.len().is_multiple_of(2) || ![16, 24, 32].contains(&half) {
            return Err(Error::Key(KeyError::Length {
                what: "xts",
                got: key.len(),
                expected: "32, 48 or 64 bytes (two keys of one size)",
            }));
        }
        let (k1, k2) = key.split_at(half);
        let keyed = Keyed::new(layer, k1, k2, Backends::default())?;
        Ok(Cascade {
            layers: vec![(layer, keyed)],
        })
    }

    /// The layers, in the order they encrypt.
    pub fn layers(&self) -> Vec<Layer> {
        self.layers.iter().map(|(l, _)| *l).collect()
    }

    /// The backend the Serpent layers run on; `None` without a Serpent layer.
    pub fn serpent_backend(&self) -> Option<SerpentBackend> {
        self.layers.iter().find_map(|(_, k)| match k {
            Keyed::Serpent(x) => Some(x.backend()),
            _ => None,
        })
    }

    /// The backend the Camellia layers run on; `None` without a Camellia layer.
    pub fn camellia_backend(&self) -> Option<CamelliaBackend> {
        self.layers.iter().find_map(|(_, k)| match k {
            Keyed::Camellia(x) => Some(x.backend()),
            _ => None,
        })
    }

    /// The backend the Twofish layers run on; `None` without a Twofish layer.
    pub fn twofish_backend(&self) -> Option<TwofishBackend> {
        self.layers.iter().find_map(|(_, k)| match k {
            Keyed::Twofish(x) => Some(x.backend()),
            _ => None,
        })
    }

    /// The backend the Kuznyechik layers run on; `None` without a Kuznyechik layer.
    pub fn kuznyechik_backend(&self) -> Option<KuznyechikBackend> {
        self.layers.iter().find_map(|(_, k)| match k {
            Keyed::Kuznyechik(x) => Some(x.backend()),
            _ => None,
        })
    }

    fn check(buf: &[u8], unit_len: usize) -> Result<(), Error> {
        if unit_len < BLOCK || !unit_len.is_multiple_of(BLOCK) {
            return Err(Error::Input(InputError::Length {
                got: unit_len,
                why: "a cascade data unit is a whole number of 16-byte blocks",
            }));
        }
        if !buf.len().is_multiple_of(unit_len) {
            return Err(Error::Input(InputError::Length {
                got: buf.len(),
                why: "a cascade buffer is a whole number of data units",
            }));
        }
        Ok(())
    }

    fn run(&self, encrypt: bool, first: u64, unit_len: usize, buf: &mut [u8]) -> Result<(), Error> {
        Cascade::check(buf, unit_len)?;
        let units = (STRETCH / unit_len).max(1);
        for (i, stretch) in buf.chunks_mut(units * unit_len).enumerate() {
            let number = first.wrapping_add((i * units) as u64);
            if encrypt {
                for (_, k) in &self.layers {
                    k.apply(true, number, unit_len, stretch)?;
                }
            } else {
                for (_, k) in self.layers.iter().rev() {
                    k.apply(false, number, unit_len, stretch)?;
                }
            }
        }
        Ok(())
    }

    /// Encrypts `buf` in place: data units of `unit_len` bytes numbered from `first`.
    pub fn encrypt(&self, first: u64, unit_len: usize, buf: &mut [u8]) -> Result<(), Error> {
        self.run(true, first, unit_len, buf)
    }

    /// Decrypts `buf` in place: data units of `unit_len` bytes numbered from `first`.
    pub fn decrypt(&self, first: u64, unit_len: usize, buf: &mut [u8]) -> Result<(), Error> {
        self.run(false, first, unit_len, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_doubles_and_reduces() {
        let mut t = [0u8; BLOCK];
        t[0] = 1;
        mul_alpha(&mut t);
        assert_eq!(t[0], 2);
        let mut t = [0u8; BLOCK];
        t[15] = 0x80;
        mul_alpha(&mut t);
        let mut want = [0u8; BLOCK];
        want[0] = 0x87;
        assert_eq!(t, want);
    }

    /// GOST R 34.12-2015 appendix A.1 (Kuznyechik): the block cipher of the cascade's
    /// Kuznyechik layer on every backend this CPU runs, both ways.
    #[test]
    fn kuznyechik_block_matches_the_standard() {
        let key = hex::decode("8899aabbccddeeff0011223344556677fedcba98765432100123456789abcdef")
            .unwrap();
        for backend in KuznyechikBackend::ALL {
            if let Err(e) = backend.ensure_usable() {
                eprintln!("skipped: kuznyechik backend {backend}: {e}");
                continue;
            }
            let k = kuznyechik::Kuznyechik::new(&key, Some(backend)).unwrap();
            let mut b = hex::decode("1122334455667700ffeeddccbbaa9988").unwrap();
            k.ecb(true, &mut b);
            assert_eq!(
                hex::encode(&b),
                "7f679d90bebc24305a468d42b9d4edcd",
                "{backend}"
            );
            k.ecb(false, &mut b);
            assert_eq!(
                hex::encode(&b),
                "1122334455667700ffeeddccbbaa9988",
                "{backend}"
            );
        }
    }

    #[test]
    fn generic_xts_over_aes_matches_the_aes_xts() {
        // The generic path run over AES itself (RustCrypto's `aes` is not a dependency:
        // the crate's ECB stands in as the block cipher) gives the same bytes as `Xts`.
        struct EcbBlock(crate::modes::Ecb);
        impl Block128 for EcbBlock {
            fn encrypt(&self, b: &mut [u8; BLOCK]) {
                self.0.encrypt(&mut b[..]).unwrap();
            }
            fn decrypt(&self, b: &mut [u8; BLOCK]) {
                self.0.decrypt(&mut b[..]).unwrap();
            }
        }
        let key: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        let generic = Keyed::Generic {
            data: Box::new(EcbBlock(crate::modes::Ecb::new(&key[..32]).unwrap())),
            tweak: Box::new(EcbBlock(crate::modes::Ecb::new(&key[32..]).unwrap())),
        };
        let own = Keyed::new(Layer::Aes, &key[..32], &key[32..], Backends::default()).unwrap();
        // Units shorter and longer than one stretch of tweaks, with every remainder.
        for blocks in [1usize, 7, 31, 32, 33, 64, 65, 70] {
            let plain: Vec<u8> = (0..16 * blocks as u32).map(|i| (i * 7 + 3) as u8).collect();
            let (mut a, mut b) = (plain.clone(), plain.clone());
            generic.apply_unit(true, 0x1234_5678_9abc, &mut a).unwrap();
            own.apply_unit(true, 0x1234_5678_9abc, &mut b).unwrap();
            assert_eq!(a, b, "{blocks} blocks");
            assert_ne!(a, plain);
            generic.apply_unit(false, 0x1234_5678_9abc, &mut a).unwrap();
            assert_eq!(a, plain, "{blocks} blocks");
        }
    }

    /// The Serpent layer on every backend this CPU runs (many blocks and units per call)
    /// against XTS over the RustCrypto `serpent` crate one block at a time, on unit
    /// lengths leaving every remainder of the steps (8, 16, 32 blocks) and of a stretch.
    #[test]
    fn serpent_layer_matches_the_rustcrypto_crate() {
        let key: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(29) ^ 0xa5).collect();
        let theirs = Keyed::Generic {
            data: rc::<::serpent::Serpent>(&key[..32]).unwrap(),
            tweak: rc::<::serpent::Serpent>(&key[32..]).unwrap(),
        };
        let usable = SerpentBackend::usable();
        assert!(usable.contains(&SerpentBackend::Soft));
        for b in usable {
            let on = Backends {
                serpent: Some(b),
                ..Backends::default()
            };
            let ours = Keyed::new(Layer::Serpent, &key[..32], &key[32..], on).unwrap();
            for blocks in 1..=2 * 32 + 8 + 1 {
                let unit = 16 * blocks;
                let plain: Vec<u8> = (0..3 * unit as u32).map(|i| (i * 11 + 5) as u8).collect();
                let (mut a, mut b2) = (plain.clone(), plain.clone());
                let first = 0xffff_ffff_ffff_fffe;
                ours.apply(true, first, unit, &mut a).unwrap();
                theirs.apply(true, first, unit, &mut b2).unwrap();
                assert_eq!(a, b2, "{b}: encrypt, 3 units of {blocks} blocks");
                ours.apply(false, first, unit, &mut a).unwrap();
                assert_eq!(a, plain, "{b}: decrypt, 3 units of {blocks} blocks");
            }
        }
    }
}
