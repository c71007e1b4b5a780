//! The sector API: many consecutive sectors in one call, with dm-crypt's cipher strings and
//! IV generators (`plain64`, `plain`, `essiv:sha256`).
//!
//! AES runs on this crate's AES backends. Serpent, Twofish, Camellia and Kuznyechik run in
//! XTS with `plain64` or `plain` IVs (`serpent-xts-plain64`, as cryptsetup users make them
//! with the kernel's ciphers), on the cascade module's ciphers, with 128-, 192- or 256-bit
//! keys (an XTS key of 256, 384 or 512 bits; Kuznyechik 256 only): `plain64` sectors numbered one IV apart in one call (the sectors are
//! then the cascade's consecutive data units), the others one sector per call.
//!
//! The same four ciphers run in CBC with `plain64`, `plain` and `essiv:sha256` IVs
//! (`serpent-cbc-essiv:sha256`; 128-, 192- or 256-bit keys, Kuznyechik 256), each sector
//! its own chain as dm-crypt has it; the ESSIV cipher is the same cipher under SHA-256 of
//! the key, as the kernel's `essiv` template keys it. Encryption runs block by block;
//! decryption a stretch of blocks per cipher call (Serpent and Camellia on their SIMD
//! backends).
//!
//! IVs are produced in batches of [`BATCH`] sectors into a small array on the stack; for XTS
//! the batch of tweaks is encrypted in one ECB call under Key2 (for ESSIV likewise under the
//! ESSIV key), then the whole batch of sectors goes to the backend's kernel in one call, so
//! the pipeline stays full across sector boundaries and nothing is allocated.

use crate::block::Block;
use crate::buf::InOut;
use crate::cascade::{Cascade, Layer, LayerCipher};
use crate::error::{InputError, KeyError};
use crate::modes::{split, AesKey, Direction, Xts};
use crate::{Backend, Error};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;
use zeroize::{Zeroize, Zeroizing};

/// Sectors whose IVs are prepared together (256 x 16 bytes of stack): fewer, longer kernel
/// calls (512-byte sectors ran faster than with 64: docs/PERFORMANCE.md).
const BATCH: usize = 256;

/// The block cipher mode of a dm-crypt cipher string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CipherMode {
    /// XTS (IEEE 1619), key = Key1 || Key2.
    Xts,
    /// CBC, each sector its own chain.
    Cbc,
    /// ECB, no IV.
    Ecb,
}

/// dm-crypt's IV generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IvMode {
    /// The IV number as 64-bit little-endian, zero-padded to 16 bytes.
    Plain64,
    /// The low 32 bits of the IV number, little-endian, zero-padded (wraps at 2^32).
    Plain,
    /// The `plain64` block encrypted (ECB) under SHA-256(key) with the same cipher, a 256-bit
    /// key (CBC only; the kernel's `essiv` template).
    EssivSha256,
    /// GELI's CBC IV: the first 16 bytes of SHA-256(IV key || le64(IV number)), the IV
    /// number being the sector's byte offset (FreeBSD `sys/geom/eli/g_eli_crypto.c`,
    /// `g_eli_crypto_ivgen`). CBC only, AES or Camellia; the key is the cipher key followed
    /// by the 64-byte IV key. No cipher string names it: formats build the spec directly.
    GeliSha256,
    /// No IV (ECB).
    None,
}

/// Bytes of GELI's IV key, appended to the AES key of an [`IvMode::GeliSha256`] cipher
/// (FreeBSD `sys/geom/eli/g_eli.h`, `G_ELI_IVKEYLEN`).
pub const GELI_IV_KEY_LEN: usize = 64;

/// A dm-crypt / cryptsetup cipher string such as `aes-xts-plain64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CipherSpec {
    /// The block cipher.
    pub cipher: Layer,
    /// The mode.
    pub mode: CipherMode,
    /// The IV generator.
    pub iv: IvMode,
}

/// Every supported cipher string with its cipher, mode and IV generator.
const SPECS: [(&str, Layer, CipherMode, IvMode); 26] = [
    (
        "aes-xts-plain64",
        Layer::Aes,
        CipherMode::Xts,
        IvMode::Plain64,
    ),
    ("aes-xts-plain", Layer::Aes, CipherMode::Xts, IvMode::Plain),
    (
        "aes-cbc-plain64",
        Layer::Aes,
        CipherMode::Cbc,
        IvMode::Plain64,
    ),
    ("aes-cbc-plain", Layer::Aes, CipherMode::Cbc, IvMode::Plain),
    (
        "aes-cbc-essiv:sha256",
        Layer::Aes,
        CipherMode::Cbc,
        IvMode::EssivSha256,
    ),
    ("aes-ecb", Layer::Aes, CipherMode::Ecb, IvMode::None),
    (
        "serpent-xts-plain64",
        Layer::Serpent,
        CipherMode::Xts,
        IvMode::Plain64,
    ),
    (
        "serpent-xts-plain",
        Layer::Serpent,
        CipherMode::Xts,
        IvMode::Plain,
    ),
    (
        "twofish-xts-plain64",
        Layer::Twofish,
        CipherMode::Xts,
        IvMode::Plain64,
    ),
    (
        "twofish-xts-plain",
        Layer::Twofish,
        CipherMode::Xts,
        IvMode::Plain,
    ),
    (
        "camellia-xts-plain64",
        Layer::Camellia,
        CipherMode::Xts,
        IvMode::Plain64,
    ),
    (
        "camellia-xts-plain",
        Layer::Camellia,
        CipherMode::Xts,
        IvMode::Plain,
    ),
    (
        "kuznyechik-xts-plain64",
        Layer::Kuznyechik,
        CipherMode::Xts,
        IvMode::Plain64,
    ),
    (
        "kuznyechik-xts-plain",
        Layer::Kuznyechik,
        CipherMode::Xts,
        IvMode::Plain,
    ),
    (
        "serpent-cbc-plain64",
        Layer::Serpent,
        CipherMode::Cbc,
        IvMode::Plain64,
    ),
    (
        "serpent-cbc-plain",
        Layer::Serpent,
        CipherMode::Cbc,
        IvMode::Plain,
    ),
    (
        "serpent-cbc-essiv:sha256",
        Layer::Serpent,
        CipherMode::Cbc,
        IvMode::EssivSha256,
    ),
    (
        "twofish-cbc-plain64",
        Layer::Twofish,
        CipherMode::Cbc,
        IvMode::Plain64,
    ),
    (
        "twofish-cbc-plain",
        Layer::Twofish,
        CipherMode::Cbc,
        IvMode::Plain,
    ),
    (
        "twofish-cbc-essiv:sha256",
        Layer::Twofish,
        CipherMode::Cbc,
        IvMode::EssivSha256,
    ),
    (
        "camellia-cbc-plain64",
        Layer::Camellia,
        CipherMode::Cbc,
        IvMode::Plain64,
    ),
    (
        "camellia-cbc-plain",
        Layer::Camellia,
        CipherMode::Cbc,
        IvMode::Plain,
    ),
    (
        "camellia-cbc-essiv:sha256",
        Layer::Camellia,
        CipherMode::Cbc,
        IvMode::EssivSha256,
    ),
    (
        "kuznyechik-cbc-plain64",
        Layer::Kuznyechik,
        CipherMode::Cbc,
        IvMode::Plain64,
    ),
    (
        "kuznyechik-cbc-plain",
        Layer::Kuznyechik,
        CipherMode::Cbc,
        IvMode::Plain,
    ),
    (
        "kuznyechik-cbc-essiv:sha256",
        Layer::Kuznyechik,
        CipherMode::Cbc,
        IvMode::EssivSha256,
    ),
];

impl CipherSpec {
    /// Camellia in CBC with GELI's IVs ([`IvMode::GeliSha256`]; no cipher string names it).
    pub const fn geli_camellia() -> CipherSpec {
        CipherSpec {
            cipher: Layer::Camellia,
            mode: CipherMode::Cbc,
            iv: IvMode::GeliSha256,
        }
    }

    /// AES in `mode` with IVs from `iv` (the formats that build their spec directly).
    pub const fn aes(mode: CipherMode, iv: IvMode) -> CipherSpec {
        CipherSpec {
            cipher: Layer::Aes,
            mode,
            iv,
        }
    }

    /// Every supported cipher string.
    pub const ALL: [&'static str; SPECS.len()] = {
        let mut all = [""; SPECS.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = SPECS[i].0;
            i += 1;
        }
        all
    };

    /// The accepted key lengths in bytes.
    pub fn key_lengths(&self) -> &'static [usize] {
        match (self.cipher, self.mode) {
            (Layer::Aes, _) => {}
            (Layer::Kuznyechik, CipherMode::Xts) => return &[64],
            (Layer::Kuznyechik, _) => return &[32],
            (_, CipherMode::Xts) => return &[32, 48, 64],
            _ if self.iv == IvMode::GeliSha256 => return &[80, 88, 96],
            _ => return &[16, 24, 32],
        }
        match self.mode {
            CipherMode::Xts => &[32, 48, 64],
            CipherMode::Cbc if self.iv == IvMode::GeliSha256 => &[80, 88, 96],
            CipherMode::Cbc | CipherMode::Ecb => &[16, 24, 32],
        }
    }
}

impl FromStr for CipherSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<CipherSpec, Error> {
        SPECS
            .iter()
            .find(|(name, ..)| *name == s)
            .map(|&(_, cipher, mode, iv)| CipherSpec { cipher, mode, iv })
            .ok_or_else(|| Error::unknown_name("cipher", s, CipherSpec::ALL))
    }
}

impl fmt::Display for CipherSpec {
    /// The cipher string (for a mode and IV generator that no string names, such as XTS
    /// with ESSIV, the one dm-crypt's naming would give).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            CipherMode::Xts => "xts",
            CipherMode::Cbc => "cbc",
            CipherMode::Ecb => "ecb",
        };
        let iv = match self.iv {
            IvMode::Plain64 => "-plain64",
            IvMode::Plain => "-plain",
            IvMode::EssivSha256 => "-essiv:sha256",
            IvMode::GeliSha256 => "-geli",
            IvMode::None => "",
        };
        write!(f, "{}-{mode}{iv}", self.cipher.name())
    }
}

/// How the IV number advances from one sector to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IvStep {
    /// By `sector_size / 512`: the IV counts 512-byte units whatever the sector size
    /// (dm-crypt's default, LUKS); the sector size must be a multiple of 512.
    Units512,
    /// By 1: the IV counts sectors (dm-crypt's `iv_large_sectors`).
    Sector,
    /// By `sector_size`: the IV number is a byte offset (GELI's XTS tweak).
    Bytes,
}

/// Sector size and how the IV number advances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectorLayout {
    sector_size: usize,
    step: IvStep,
}

impl SectorLayout {
    /// `sector_size`: a multiple of 16 from 16 to 65536. With `large_iv` the IV number
    /// advances by 1 per sector (dm-crypt's `iv_large_sectors`); otherwise it counts 512-byte
    /// units, advancing by `sector_size / 512`, and the size must then be a multiple of 512.
    pub fn new(sector_size: usize, large_iv: bool) -> Result<SectorLayout, Error> {
        let step = if large_iv {
            IvStep::Sector
        } else {
            IvStep::Units512
        };
        SectorLayout::with_step(sector_size, step)
    }

    /// `sector_size` (a multiple of 16 from 16 to 65536; of 512 for [`IvStep::Units512`])
    /// with the IV number advancing by `step`.
    pub fn with_step(sector_size: usize, step: IvStep) -> Result<SectorLayout, Error> {
        if !(16..=65536).contains(&sector_size) || !sector_size.is_multiple_of(16) {
            return Err(Error::Input(InputError::SectorSize(sector_size)));
        }
        if step == IvStep::Units512 && !sector_size.is_multiple_of(512) {
            return Err(Error::Input(InputError::SectorSizeNeedsLargeIv(
                sector_size,
            )));
        }
        Ok(SectorLayout { sector_size, step })
    }

    /// Bytes per sector.
    pub fn sector_size(&self) -> usize {
        self.sector_size
    }

    /// Whether the IV counts sectors (true) or another unit (false).
    pub fn large_iv(&self) -> bool {
        self.step == IvStep::Sector
    }

    /// The rule the IV number follows.
    pub fn step(&self) -> IvStep {
        self.step
    }

    /// How much the IV number grows from one sector to the next.
    pub fn iv_step(&self) -> u64 {
        match self.step {
            IvStep::Units512 => (self.sector_size / 512) as u64,
            IvStep::Sector => 1,
            IvStep::Bytes => self.sector_size as u64,
        }
    }
}

/// Where the CBC IVs of the other ciphers come from besides the IV number.
#[derive(Clone, Copy)]
struct Ivs<'a> {
    /// ESSIV's cipher.
    essiv: Option<&'a LayerCipher>,
    /// GELI's IV key.
    geli: Option<&'a [u8; GELI_IV_KEY_LEN]>,
}

/// The cipher key and, for [`IvMode::GeliSha256`], the IV key that follows it (the key
/// is checked first).
fn split_geli_key(
    spec: CipherSpec,
    key: &[u8],
) -> (&[u8], Option<Zeroizing<[u8; GELI_IV_KEY_LEN]>>) {
    if spec.iv != IvMode::GeliSha256 || key.len() < GELI_IV_KEY_LEN {
        return (key, None);
    }
    let (cipher, iv) = key.split_at(key.len() - GELI_IV_KEY_LEN);
    let mut iv_key = Zeroizing::new([0u8; GELI_IV_KEY_LEN]);
    iv_key.copy_from_slice(iv);
    (cipher, Some(iv_key))
}

enum Engine {
    Xts(Xts),
    /// Another cipher than AES in XTS (see the module documentation).
    Cascade(Cascade),
    /// Another cipher than AES in CBC, with its ESSIV key or GELI's IV key.
    LayerCbc {
        key: LayerCipher,
        essiv: Option<LayerCipher>,
        /// Boxed: the other engines stay small.
        geli_iv_key: Option<Box<Zeroizing<[u8; GELI_IV_KEY_LEN]>>>,
    },
    Cbc {
        key: AesKey,
        essiv: Option<AesKey>,
        geli_iv_key: Option<Zeroizing<[u8; GELI_IV_KEY_LEN]>>,
    },
    Ecb(AesKey),
}

/// Encrypts and decrypts runs of whole sectors the way dm-crypt does.
pub struct SectorCipher {
    spec: CipherSpec,
    layout: SectorLayout,
    engine: Engine,
}

impl fmt::Debug for SectorCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SectorCipher")
            .field("spec", &self.spec.to_string())
            .field("layout", &self.layout)
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl SectorCipher {
    /// A cipher on the selected backend.
    pub fn new(spec: CipherSpec, key: &[u8], layout: SectorLayout) -> Result<SectorCipher, Error> {
        SectorCipher::build(spec, key, layout, None)
    }

    /// A cipher on a named backend (tests and benchmarks).
    pub fn with_backend(
        spec: CipherSpec,
        key: &[u8],
        layout: SectorLayout,
        backend: Backend,
    ) -> Result<SectorCipher, Error> {
        SectorCipher::build(spec, key, layout, Some(backend))
    }

    fn build(
        spec: CipherSpec,
        key: &[u8],
        layout: SectorLayout,
        backend: Option<Backend>,
    ) -> Result<SectorCipher, Error> {
        let engine = match spec.mode {
            _ if spec.cipher != Layer::Aes => {
                let geli = spec.cipher == Layer::Camellia && spec.iv == IvMode::GeliSha256;
                if !geli && !CipherSpec::ALL.contains(&spec.to_string().as_str()) {
                    return Err(Error::unknown_name(
                        "cipher",
                        &spec.to_string(),
                        CipherSpec::ALL,
                    ));
                }
                spec.check_key(key)?;
                if spec.mode == CipherMode::Xts {
                    Engine::Cascade(Cascade::single(spec.cipher, key)?)
                } else {
                    // ESSIV: the same cipher under the hash of the key (a 256-bit key), as
                    // the kernel's essiv template keys it.
                    let essiv = if spec.iv == IvMode::EssivSha256 {
                        let mut salt: [u8; 32] = Sha256::digest(key).into();
                        let k = LayerCipher::new(spec.cipher, &salt);
                        salt.zeroize();
                        Some(k?)
                    } else {
                        None
                    };
                    let (key, geli_iv_key) = split_geli_key(spec, key);
                    Engine::LayerCbc {
                        key: LayerCipher::new(spec.cipher, key)?,
                        essiv,
                        geli_iv_key: geli_iv_key.map(Box::new),
                    }
                }
            }
            CipherMode::Xts => Engine::Xts(match backend {
                Some(b) => Xts::with_backend(key, b)?,
                None => Xts::new(key)?,
            }),
            CipherMode::Cbc => {
                if spec.iv == IvMode::GeliSha256 {
                    spec.check_key(key)?;
                }
                let (key, geli_iv_key) = split_geli_key(spec, key);
                let aes = AesKey::new(key, backend)?;
                let essiv = if spec.iv == IvMode::EssivSha256 {
                    let mut salt: [u8; 32] = Sha256::digest(key).into();
                    let k = AesKey::new(&salt, backend);
                    salt.zeroize();
                    Some(k?)
                } else {
                    None
                };
                Engine::Cbc {
                    key: aes,
                    essiv,
                    geli_iv_key,
                }
            }
            CipherMode::Ecb => Engine::Ecb(AesKey::new(key, backend)?),
        };
        Ok(SectorCipher {
            spec,
            layout,
            engine,
        })
    }

    /// The cipher string.
    pub fn spec(&self) -> CipherSpec {
        self.spec
    }

    /// The sector layout.
    pub fn layout(&self) -> SectorLayout {
        self.layout
    }

    /// The AES backend the data path runs on ([`Backend::Soft`] for the other ciphers:
    /// they have no AES backend).
    pub fn backend(&self) -> Backend {
        match &self.engine {
            Engine::Xts(x) => x.backend(),
            Engine::Cascade(_) | Engine::LayerCbc { .. } => Backend::Soft,
            Engine::Cbc { key, .. } | Engine::Ecb(key) => key.backend(),
        }
    }

    fn run(&self, first_iv: u64, mut data: InOut<'_>, dir: Direction) -> Result<(), Error> {
        let size = self.layout.sector_size;
        if !data.len().is_multiple_of(size) {
            return Err(Error::Input(InputError::Length {
                got: data.len(),
                why: "must be a whole number of sectors",
            }));
        }
        if let Engine::Ecb(key) = &self.engine {
            match dir {
                Direction::Encrypt => key.k().ecb_encrypt(data),
                Direction::Decrypt => key.k().ecb_decrypt(data),
            }
            return Ok(());
        }
        if let Engine::Cascade(c) = &self.engine {
            return self.run_cascade(c, first_iv, data, dir);
        }
        if let Engine::LayerCbc {
            key,
            essiv,
            geli_iv_key,
        } = &self.engine
        {
            let ivs = Ivs {
                essiv: essiv.as_ref(),
                geli: geli_iv_key.as_deref().map(|k| &**k),
            };
            self.run_layer_cbc(key, ivs, first_iv, data, dir);
            return Ok(());
        }
        let sectors = data.len() / size;
        let step = self.layout.iv_step();
        let mut ivs: [Block; BATCH] = [[0; 16]; BATCH];
        let mut done = 0;
        while done < sectors {
            let n = (sectors - done).min(BATCH);
            for (i, iv) in ivs[..n].iter_mut().enumerate() {
                let number = first_iv.wrapping_add(((done + i) as u64).wrapping_mul(step));
                *iv = [0; 16];
                match (self.spec.iv, &self.engine) {
                    (IvMode::Plain, _) => iv[..4].copy_from_slice(&(number as u32).to_le_bytes()),
                    (
                        IvMode::GeliSha256,
                        Engine::Cbc {
                            geli_iv_key: Some(k),
                            ..
                        },
                    ) => {
                        let hash = Sha256::new()
                            .chain_update(&k[..])
                            .chain_update(number.to_le_bytes())
                            .finalize();
                        iv.copy_from_slice(&hash[..16]);
                    }
                    _ => iv[..8].copy_from_slice(&number.to_le_bytes()),
                }
            }
            let ivs = &mut ivs[..n];
            let chunk = data.slice(done * size, (done + n) * size);
            match &self.engine {
                Engine::Xts(x) => {
                    x.k2.k().ecb_encrypt(InOut::InPlace(ivs.as_flattened_mut()));
                    match dir {
                        Direction::Encrypt => x.k1.k().xts_encrypt(ivs, chunk),
                        Direction::Decrypt => x.k1.k().xts_decrypt(ivs, chunk),
                    }
                }
                Engine::Cbc { key, essiv, .. } => {
                    if let Some(e) = essiv {
                        e.k().ecb_encrypt(InOut::InPlace(ivs.as_flattened_mut()));
                    }
                    match dir {
                        Direction::Encrypt => key.k().cbc_encrypt_sectors(ivs, chunk),
                        Direction::Decrypt => key.k().cbc_decrypt_sectors(ivs, chunk),
                    }
                }
                Engine::Ecb(_) | Engine::Cascade(_) | Engine::LayerCbc { .. } => {
                    unreachable!("handled above")
                }
            }
            done += n;
        }
        Ok(())
    }

    /// [`SectorCipher::run`] for the other ciphers than AES: each sector one XTS data
    /// unit whose tweak is its IV (`plain64`, or `plain`'s low 32 bits), in place (a
    /// separate output is copied first); one call for all when the IVs are consecutive.
    fn run_cascade(
        &self,
        c: &Cascade,
        first_iv: u64,
        data: InOut<'_>,
        dir: Direction,
    ) -> Result<(), Error> {
        let buf = match data {
            InOut::InPlace(b) => b,
            InOut::Split { src, dst } => {
                dst.copy_from_slice(src);
                dst
            }
        };
        let (size, step) = (self.layout.sector_size, self.layout.iv_step());
        if step == 1 && self.spec.iv == IvMode::Plain64 {
            // The sectors are the cascade's data units numbered from `first_iv`: one call,
            // so that each layer sees many units at once (the SIMD layers run several
            // 512-byte units per step and encrypt their tweaks together).
            return match dir {
                Direction::Encrypt => c.encrypt(first_iv, size, buf),
                Direction::Decrypt => c.decrypt(first_iv, size, buf),
            };
        }
        for (i, sector) in buf.chunks_exact_mut(size).enumerate() {
            let mut number = first_iv.wrapping_add((i as u64).wrapping_mul(step));
            if self.spec.iv == IvMode::Plain {
                number &= u64::from(u32::MAX);
            }
            match dir {
                Direction::Encrypt => c.encrypt(number, size, sector)?,
                Direction::Decrypt => c.decrypt(number, size, sector)?,
            }
        }
        Ok(())
    }

    /// [`SectorCipher::run`] for CBC over the other ciphers than AES, in place (a separate
    /// output is copied first): the IVs of a batch of sectors made (and for ESSIV
    /// encrypted) together; encryption block by block, each sector its own chain;
    /// decryption a stretch of blocks per cipher call, then each block XORed with the
    /// ciphertext before it.
    fn run_layer_cbc(
        &self,
        key: &LayerCipher,
        made: Ivs<'_>,
        first_iv: u64,
        data: InOut<'_>,
        dir: Direction,
    ) {
        const STRETCH: usize = 256 * 16;
        let buf = match data {
            InOut::InPlace(b) => b,
            InOut::Split { src, dst } => {
                dst.copy_from_slice(src);
                dst
            }
        };
        let (size, step) = (self.layout.sector_size, self.layout.iv_step());
        let mut ivs: [Block; BATCH] = [[0; 16]; BATCH];
        let mut saved = [0u8; STRETCH];
        for (b, batch) in buf.chunks_mut(BATCH * size).enumerate() {
            let n = batch.len() / size;
            for (i, iv) in ivs[..n].iter_mut().enumerate() {
                let number = first_iv.wrapping_add(((b * BATCH + i) as u64).wrapping_mul(step));
                *iv = [0; 16];
                if let Some(k) = made.geli {
                    let hash = Sha256::new()
                        .chain_update(k)
                        .chain_update(number.to_le_bytes())
                        .finalize();
                    iv.copy_from_slice(&hash[..16]);
                } else if self.spec.iv == IvMode::Plain {
                    iv[..4].copy_from_slice(&(number as u32).to_le_bytes());
                } else {
                    iv[..8].copy_from_slice(&number.to_le_bytes());
                }
            }
            if let Some(e) = made.essiv {
                e.ecb(true, ivs[..n].as_flattened_mut());
            }
            for (sector, iv) in batch.chunks_exact_mut(size).zip(&ivs[..n]) {
                let mut prev = *iv;
                match dir {
                    Direction::Encrypt => {
                        for block in sector.chunks_exact_mut(16) {
                            block.iter_mut().zip(&prev).for_each(|(x, p)| *x ^= p);
                            key.ecb(true, block);
                            prev.copy_from_slice(block);
                        }
                    }
                    Direction::Decrypt => {
                        for stretch in sector.chunks_mut(STRETCH) {
                            let copy = &mut saved[..stretch.len()];
                            copy.copy_from_slice(stretch);
                            key.ecb(false, stretch);
                            stretch[..16]
                                .iter_mut()
                                .zip(&prev)
                                .for_each(|(x, p)| *x ^= p);
                            stretch[16..]
                                .iter_mut()
                                .zip(&copy[..copy.len() - 16])
                                .for_each(|(x, c)| *x ^= c);
                            prev.copy_from_slice(&copy[copy.len() - 16..]);
                        }
                    }
                }
                prev.zeroize();
            }
        }
        ivs.as_flattened_mut().zeroize();
        saved.zeroize();
    }

    crate::modes::entry_points!(first_iv: u64);
}

impl CipherSpec {
    /// Checks `key` against this spec's lengths (the constructors do it too; the CLI calls
    /// this first for a clearer message).
    pub fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        if self.key_lengths().contains(&key.len()) {
            Ok(())
        } else {
            Err(Error::Key(KeyError::Length {
                what: match (self.cipher, self.mode) {
                    (Layer::Aes, CipherMode::Xts) => "aes-xts",
                    (Layer::Aes, _) => "aes",
                    (_, CipherMode::Xts) => "xts",
                    _ => "cbc",
                },
                got: key.len(),
                expected: match self.mode {
                    CipherMode::Xts if self.cipher == Layer::Kuznyechik => {
                        "64 bytes (two 256-bit keys)"
                    }
                    _ if self.cipher == Layer::Kuznyechik => "32 bytes",
                    CipherMode::Xts if self.cipher != Layer::Aes => {
                        "32, 48 or 64 bytes (two keys of 128, 192 or 256 bits)"
                    }
                    CipherMode::Xts => "32, 48 or 64 bytes (two aes keys)",
                    CipherMode::Cbc if self.iv == IvMode::GeliSha256 => {
                        "80, 88 or 96 bytes (a cipher key and the 64-byte iv key)"
                    }
                    _ => "16, 24 or 32 bytes",
                },
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key sizes of the other ciphers: XTS 256, 384 and 512 bits and CBC 128, 192 and
    /// 256 (Kuznyechik 512 and 256 only); other lengths are refused, naming the lengths.
    #[test]
    fn other_ciphers_take_their_key_sizes() {
        let layout = SectorLayout::new(512, false).unwrap();
        for name in [
            "serpent-xts-plain64",
            "twofish-xts-plain",
            "camellia-xts-plain64",
            "kuznyechik-xts-plain64",
            "serpent-cbc-essiv:sha256",
            "twofish-cbc-plain64",
            "camellia-cbc-plain",
            "kuznyechik-cbc-essiv:sha256",
        ] {
            let spec: CipherSpec = name.parse().unwrap();
            let kuz = spec.cipher == Layer::Kuznyechik;
            let xts = spec.mode == CipherMode::Xts;
            for len in [8usize, 16, 24, 32, 40, 48, 64, 96] {
                let ok = match (xts, len) {
                    (true, 64) | (false, 32) => true,
                    (true, 32 | 48) | (false, 16 | 24) => !kuz,
                    _ => false,
                };
                let got = SectorCipher::new(spec, &vec![0x5a; len], layout);
                match got {
                    Ok(_) => assert!(ok, "{name}: a {len}-byte key was accepted"),
                    Err(e) => {
                        assert!(!ok, "{name}, {len} bytes: {e}");
                        let want = match (xts, kuz) {
                            (true, true) => "64 bytes",
                            (true, false) => "32, 48 or 64 bytes",
                            (false, true) => "32 bytes",
                            (false, false) => "16, 24 or 32 bytes",
                        };
                        assert!(e.to_string().contains(want), "{name}, {len} bytes: {e}");
                    }
                }
            }
        }
        for name in [
            "serpent-ecb",
            "twofish-cbc-essiv:sha512",
            "camellia-lrw-benbi",
        ] {
            assert!(name.parse::<CipherSpec>().is_err(), "{name}");
        }
    }

    /// GOST R 34.13-2015 appendix A.1.4 (Kuznyechik in CBC, an IV of two blocks: two
    /// interleaved chains). Each chain is plain CBC with its half of the IV, so the
    /// sectors [P1, P3] under IV1 and [P2, P4] under IV2 must give [C1, C3] and [C2, C4]:
    /// the standard's vectors through `kuznyechik-cbc-plain64`, the sector number being
    /// the IV half's low 8 bytes and its high 8 bytes XORed into the first plaintext
    /// block (plain64's IV has them zero: CBC's first step then sees P1 ^ IV).
    #[test]
    fn kuznyechik_cbc_matches_gost_r_34_13() {
        let key = hex::decode("8899aabbccddeeff0011223344556677fedcba98765432100123456789abcdef")
            .unwrap();
        let iv = hex::decode("1234567890abcef0a1b2c3d4e5f0011223344556677889901213141516171819")
            .unwrap();
        let p = [
            "1122334455667700ffeeddccbbaa9988",
            "00112233445566778899aabbcceeff0a",
            "112233445566778899aabbcceeff0a00",
            "2233445566778899aabbcceeff0a0011",
        ];
        let c = [
            "689972d4a085fa4d90e52e3d6d7dcc27",
            "2826e661b478eca6af1e8e448d5ea5ac",
            "fe7babf1e91999e85640e8b0f49d90d0",
            "167688065a895c631a2d9a1560b63970",
        ];
        let cipher = LayerCipher::new(Layer::Kuznyechik, &key).unwrap();
        let spec: CipherSpec = "kuznyechik-cbc-plain64".parse().unwrap();
        let sc = SectorCipher::new(
            spec,
            &key,
            SectorLayout::with_step(32, IvStep::Sector).unwrap(),
        )
        .unwrap();
        for chain in 0..2 {
            let half = &iv[16 * chain..16 * chain + 16];
            // plain64 gives the IV le64(number) || 0: the chain's IV is reached by XORing
            // the difference into the first plaintext block (CBC's first step).
            let number = u64::from_le_bytes(half[..8].try_into().unwrap());
            let mut sector = hex::decode([p[chain], p[chain + 2]].concat()).unwrap();
            for (x, h) in sector[8..16].iter_mut().zip(&half[8..]) {
                *x ^= h;
            }
            sc.encrypt(number, &mut sector).unwrap();
            assert_eq!(
                hex::encode(&sector),
                [c[chain], c[chain + 2]].concat(),
                "chain {chain}"
            );
            // And the first block by the block cipher alone: E(P1 ^ IV1).
            let mut first = hex::decode(p[chain]).unwrap();
            first.iter_mut().zip(half).for_each(|(x, h)| *x ^= h);
            cipher.ecb(true, &mut first);
            assert_eq!(hex::encode(&first), c[chain], "chain {chain}: ecb");
            sc.decrypt(number, &mut sector).unwrap();
            let mut want = hex::decode([p[chain], p[chain + 2]].concat()).unwrap();
            for (x, h) in want[8..16].iter_mut().zip(&half[8..]) {
                *x ^= h;
            }
            assert_eq!(sector, want, "chain {chain}: decrypt");
        }
    }

    /// CBC over the other ciphers, many sectors per call (past one IV batch, sectors longer
    /// than one decryption stretch), against CBC written out here block by block over the
    /// layer's block cipher with dm-crypt's IVs (ESSIV: the IV number encrypted under
    /// SHA-256 of the key); both ways, in place and into a separate buffer.
    #[test]
    fn layer_cbc_sectors_match_block_by_block() {
        for (name, klen) in [
            ("serpent-cbc-essiv:sha256", 32usize),
            ("camellia-cbc-plain64", 16),
            ("twofish-cbc-plain", 24),
            ("kuznyechik-cbc-essiv:sha256", 32),
        ] {
            let spec: CipherSpec = name.parse().unwrap();
            let key: Vec<u8> = (0..klen as u8).map(|i| i.wrapping_mul(53) ^ 0x21).collect();
            let block = LayerCipher::new(spec.cipher, &key).unwrap();
            let essiv = LayerCipher::new(spec.cipher, &Sha256::digest(&key)).unwrap();
            for (size, sectors) in [(512usize, BATCH + 3), (8192, 3)] {
                let layout = SectorLayout::new(size, false).unwrap();
                let c = SectorCipher::new(spec, &key, layout).unwrap();
                let plain: Vec<u8> = (0..size * sectors).map(|i| (i * 7 + 1) as u8).collect();
                let first = u64::from(u32::MAX) - 5;
                let mut want = plain.clone();
                for (i, s) in want.chunks_exact_mut(size).enumerate() {
                    let number = first + (i * size / 512) as u64;
                    let mut prev = [0u8; 16];
                    if spec.iv == IvMode::Plain {
                        prev[..4].copy_from_slice(&(number as u32).to_le_bytes());
                    } else {
                        prev[..8].copy_from_slice(&number.to_le_bytes());
                    }
                    if spec.iv == IvMode::EssivSha256 {
                        essiv.ecb(true, &mut prev);
                    }
                    for b in s.chunks_exact_mut(16) {
                        b.iter_mut().zip(&prev).for_each(|(x, p)| *x ^= p);
                        block.ecb(true, b);
                        prev.copy_from_slice(b);
                    }
                }
                let what = format!("{name}, {sectors} sectors of {size}");
                let mut got = vec![0u8; plain.len()];
                c.encrypt_to(first, &plain, &mut got).unwrap();
                assert_eq!(got, want, "{what}");
                c.decrypt(first, &mut got).unwrap();
                assert_eq!(got, plain, "{what}: decrypt");
            }
        }
    }

    /// The ciphers other than AES, many sectors per call, against the same cascade one
    /// sector per call with each sector's own IV number: `plain64` on 512-byte sectors and
    /// on 4096-byte ones numbered per sector (one call for the whole buffer) and per 512
    /// bytes (one call per sector), `plain` across its 32-bit wrap; both ways, in place and
    /// into a separate buffer.
    #[test]
    fn cascade_sectors_match_one_sector_at_a_time() {
        let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(91) ^ 0x17).collect();
        for name in [
            "camellia-xts-plain64",
            "serpent-xts-plain64",
            "camellia-xts-plain",
        ] {
            let spec: CipherSpec = name.parse().unwrap();
            let cascade = Cascade::new(&[spec.cipher], &key).unwrap();
            for (size, large) in [(512usize, false), (4096, true), (4096, false)] {
                let layout = SectorLayout::new(size, large).unwrap();
                let c = SectorCipher::new(spec, &key, layout).unwrap();
                let sectors = 37;
                let plain: Vec<u8> = (0..size * sectors).map(|i| (i * 31 + 5) as u8).collect();
                let first = if spec.iv == IvMode::Plain {
                    u64::from(u32::MAX) - 3
                } else {
                    0xffff_ffff_ffff_fff0
                };
                let mut want = plain.clone();
                for (i, s) in want.chunks_exact_mut(size).enumerate() {
                    let mut n = first.wrapping_add(i as u64 * layout.iv_step());
                    if spec.iv == IvMode::Plain {
                        n &= u64::from(u32::MAX);
                    }
                    cascade.encrypt(n, size, s).unwrap();
                }
                let what = format!("{name}, {size}-byte sectors, large iv {large}");
                let mut got = plain.clone();
                c.encrypt(first, &mut got).unwrap();
                assert_eq!(got, want, "{what}");
                let mut back = vec![0u8; got.len()];
                c.decrypt_to(first, &got, &mut back).unwrap();
                assert_eq!(back, plain, "{what}: decrypt");
            }
        }
    }
}
