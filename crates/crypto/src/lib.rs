//! sectorcrypt's crypto core.
//!
//! # Algorithms and modes
//! AES-128/192/256 (FIPS-197, [`aes`]) with the modes storage uses: [`aes::Ecb`],
//! [`aes::Cbc`], [`aes::Ctr`] (random access into the keystream), [`aes::Xts`] (IEEE
//! 1619-2007, with ciphertext stealing), and [`dmcrypt::SectorCipher`], which encrypts many
//! dm-crypt sectors in one call with the `plain64`, `plain` and `essiv:sha256` IV
//! generators. [`aes::Gcm`] is AES-GCM (SP 800-38D) with one-shot and streaming APIs.
//! [`Mode`] and [`Aead`] are two small traits over the mode types of every family.
//!
//! GOST 28147-89 ([`gost89`]: ECB, CNT, CFB, CBC and the MAC, little-endian as its
//! libraries, any of eight S-box sets, optional CryptoPro key meshing) and Magma
//! ([`magma`]: ECB, CTR, OFB, CBC, CFB, the MAC, CTR-ACPKM and MGM, big-endian) are one
//! cipher with two byte conventions; both families share one implementation of each chain
//! mode, and every in-place and out-of-place method goes through one code path. Their
//! backends are [`GostBackend`]s: `soft` (portable, constant-time, the S-boxes evaluated
//! inside registers), `avx512` (AVX-512 with VBMI: 16 blocks per zmm pair, the S-boxes as
//! `vpermb` tables, CNT/CTR counters made in registers) and `avx2` (32 blocks byte-sliced
//! per group), for everything built on independent blocks; the sequential chains run on
//! the portable code.
//!
//! VeraCrypt's and TrueCrypt's ciphers ([`cascade`]): XTS over any 128-bit block cipher
//! (this crate's AES-XTS, its bitsliced Serpent on [`cascade::SerpentBackend`]s: portable,
//! AVX2 and AVX-512, its byte-sliced Camellia on [`cascade::CamelliaBackend`]s: AVX-512 with
//! GFNI, or the portable RustCrypto crate, Twofish on [`cascade::TwofishBackend`]s:
//! AVX-512 with VBMI and GFNI, or portable full-keying tables, and Kuznyechik on
//! [`cascade::KuznyechikBackend`]s: AVX-512 with GFNI and VBMI, or the portable RustCrypto
//! crate) and cascades of such layers, and one layer's block cipher for the sectors' CBC
//! modes ([`cascade::LayerCipher`]); and their PBKDF2 hashes and plain digests
//! ([`pbkdf`]: SHA-512, SHA-256, Whirlpool, RIPEMD-160, Streebog-512, BLAKE2s-256, SHA-1,
//! also LUKS's `--hash`), here because this crate is always built optimised.
//!
//! # Backends
//! Every AES mode is a whole-buffer kernel of a backend ([`Backend`]):
//! - `soft`: portable, bitsliced, constant-time, `#![forbid(unsafe_code)]`; the reference;
//! - `aesni`: AES-NI + PCLMULQDQ on xmm registers;
//! - `vaes`: VAES + VPCLMULQDQ on 256-bit ymm registers (no AVX-512 needed);
//! - `avx512`: the `vaes` kernels, with GCM's stitched loop on 512-bit zmm registers
//!   (AVX-512F/BW/VL and the OS saving the AVX-512 state).
//!
//! GCM pairs each AES backend with the GHASH of the same instruction set (soft, PCLMULQDQ,
//! VPCLMULQDQ on ymm or on zmm); `vaes` and `avx512` run CTR and GHASH stitched in one loop.
//!
//! GELI's authenticated-sector tags ([`mac`]) have backends of their own ([`mac::MacBackend`]):
//! `avx512` (16 units hashed side by side in zmm lanes), `shani` (the SHA extensions, units
//! interleaved) and `soft`.
//!
//! The CPU is probed once ([`cpu::features`]); each backend runs a known-answer self-test
//! before its first use and is never used if it fails. New keys take the fastest usable
//! backend, unless `SECTORCRYPT_BACKEND` names one: a backend name of any family (`soft`,
//! `aesni`, `vaes`, `avx512`, `avx2`, `shani`), which every family that has it uses and
//! the others replace by their portable backend; an unknown name, or one this CPU cannot run,
//! is an error, never a silent fallback. Where more than one backend is usable, the first
//! choice of each family (and of AES-GCM apart from the other AES modes) times each on a
//! few KiB of real work and takes the fastest ([`Measurement`], shown by `sectorcrypt
//! backends`): the static order is only the default. `with_backend` constructors pick one explicitly,
//! which is how the tests run every backend.
//!
//! # Inside
//! The public modes (`modes`, `gcm`) sit on the AES core (`aes_core`: key schedule, the
//! kernel trait, the backends) and on GHASH (`ghash`); the rules that check and choose a
//! backend, for every algorithm, are in `backend`. Dependencies point one way, from the
//! modes down to those and to the neutral `block`, `buf`, `cpu` and `error`
//! (`scripts/module-deps.sh` lists them and fails on a cycle).
//!
//! # Test hooks
//! The `hazmat-testing` feature (off by default) adds the `hazmat` module and a few
//! constructors for the tests and benchmarks: the internal kernels on a named backend,
//! nothing a user of the modes needs.
//!
//! # Secrets
//! Expanded keys are zeroized on drop and never appear in `Debug` output or errors. The
//! AES and GHASH key schedules and the GOST key-meshing chains live in [`secret`] memory
//! (`memfd_secret` pages, or locked pages kept out of core dumps), as do the passphrases
//! and volume keys of the crates above, through [`secret::SecretBytes`].
//!
//! # Unsafe
//! `unsafe` is denied crate-wide and allowed only in the x86 backend leaf files, the CPUID
//! probe and the two leaves of [`secret`] (the system calls that map, lock and unmap
//! secret pages, and the typed value in them), each block with a `// SAFETY:` comment.

pub mod cascade;
pub mod cpu;

mod aes_core;
mod backend;
mod block;
mod buf;
mod ccm;
mod error;
mod gcm;
mod ghash;
mod gost;
#[cfg(all(test, target_arch = "x86_64"))]
mod guarded;
mod kw;
pub mod mac;
mod modes;
pub mod pbkdf;
pub mod secret;
mod sector;
mod traits;
mod workload;

pub use aes_core::Backend;
pub use backend::Measurement;
pub use error::{BackendError, Error, InputError, KeyError};
pub use gost::GostBackend;
pub use traits::{Aead, IvLen, Mode};

// `SECTORCRYPT_BACKEND` is one setting for every algorithm family (AES, GOST, the sector
// tags), and a name only some of them have gives the others their portable backend: each
// family's choice asks about the others. They are introduced to each other here, at the
// crate root, so that no family module (nor the shared rules in `backend`) names another.
const SHARING: &[backend::Sharer] = &[
    backend::Sharer::of::<Backend>(),
    backend::Sharer::of::<GostBackend>(),
    backend::Sharer::of::<mac::MacBackend>(),
    backend::Sharer::of::<cascade::SerpentBackend>(),
    backend::Sharer::of::<cascade::CamelliaBackend>(),
    backend::Sharer::of::<cascade::TwofishBackend>(),
    backend::Sharer::of::<cascade::KuznyechikBackend>(),
];
impl backend::Selectable for Backend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = workload::AES;
}
impl backend::Selectable for GostBackend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = workload::GOST;
}
impl backend::Selectable for mac::MacBackend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = workload::MAC;
}
impl backend::Selectable for cascade::SerpentBackend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = cascade::SERPENT_WORKLOAD;
}
impl backend::Selectable for cascade::CamelliaBackend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = cascade::CAMELLIA_WORKLOAD;
}
impl backend::Selectable for cascade::TwofishBackend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = cascade::TWOFISH_WORKLOAD;
}
impl backend::Selectable for cascade::KuznyechikBackend {
    const SHARING: &'static [backend::Sharer] = SHARING;
    const WORKLOAD: backend::Workload<Self> = cascade::KUZNYECHIK_WORKLOAD;
}

/// AES (FIPS-197) with the modes storage uses: ECB, CBC, CTR (random access into the
/// keystream), XTS (IEEE 1619-2007), GCM (SP 800-38D), CCM (SP 800-38C, for key wraps) and
/// the key wrap of RFC 3394.
pub mod aes {
    pub use crate::aes_core::width::{Width, WidthChoice, WidthMode, Widths};
    pub use crate::block::BLOCK;
    pub use crate::ccm::Ccm;
    pub use crate::gcm::{Gcm, GcmDecryptor, GcmEncryptor, GCM_MAX_PLAINTEXT};
    /// AES key wrap (RFC 3394).
    pub use crate::kw::{unwrap as key_unwrap, wrap as key_wrap};
    pub use crate::modes::{Cbc, Ctr, Ecb, Xts};

    /// The register width each mode runs on with the `avx512` backend, and how it was
    /// chosen (forced by `SECTORCRYPT_AES_WIDTH`, or measured once per process, here if
    /// not yet): `None` where the avx512 backend cannot run; an error for an unknown
    /// `SECTORCRYPT_AES_WIDTH`.
    pub fn width_choice() -> Option<Result<WidthChoice, crate::Error>> {
        #[cfg(target_arch = "x86_64")]
        return crate::aes_core::x86::avx512::choice().map(|r| r.cloned());
        #[cfg(not(target_arch = "x86_64"))]
        None
    }
}

/// dm-crypt compatible sectors: many sectors per call, with dm-crypt's IV generators
/// (`aes-xts-plain64`, `aes-cbc-essiv:sha256`, ...).
pub mod dmcrypt {
    pub use crate::sector::{
        CipherMode, CipherSpec, IvMode, IvStep, SectorCipher, SectorLayout, GELI_IV_KEY_LEN,
    };
}

pub use gost::{gost89, magma};

/// Test and benchmark hooks (the `hazmat-testing` feature, off by default): the internal
/// kernels on a named backend, for this crate's tests and `sectorcrypt bench`. Not a
/// stable interface, and nothing a caller of the modes above needs.
#[cfg(feature = "hazmat-testing")]
pub mod hazmat {
    pub use crate::aes_core::width::with_width;
    pub use crate::ghash::{Ghash, GhashBackend};
    pub use crate::mac::lane_digests;

    /// Measures how the AES and carry-less multiply units share the core (`sectorcrypt
    /// bench --probe`): seconds per loop step of named mixes of independent instructions,
    /// on xmm (8 AESENC, when the CPU can run the `aesni` backend), on ymm (when it can
    /// run `vaes`) and on zmm (when it can run `avx512`); empty on other CPUs.
    pub fn probe_units() -> Vec<(&'static str, f64)> {
        #[cfg(target_arch = "x86_64")]
        return crate::aes_core::x86::probe::aesenc_xmm()
            .into_iter()
            .chain(crate::gcm::probe_units())
            .collect();
        #[cfg(not(target_arch = "x86_64"))]
        Vec::new()
    }
}
