//! The pairing of an AES key with its GHASH key, and the GCM self-test of each pair.
//!
//! A stitched kernel takes the AES round keys of one width and the GHASH key of the same
//! width; [`Pair`] holds them as concrete types in one variant per kernel, so a kernel can
//! only ever be handed the keys it was written for: a mismatched pair is not a value of
//! any stitched variant. Every other combination, the backends without a stitched kernel
//! (soft, aesni) and the test-only pairs of any AES backend with any GHASH backend, is the
//! explicit two-pass variant, which runs CTR and GHASH one after the other and has no
//! stitched kernel to misuse.

#![forbid(unsafe_code)]

use super::hash_key::with_hash_key;
use super::Gcm;
use crate::aes_core::{self, AesKernels, Backend};
use crate::backend::{self, Algorithm};
use crate::block::Block;
use crate::buf::InOut;
use crate::ghash::{self, GhashBackend};
use crate::secret::Secret;
use crate::Error;

#[cfg(target_arch = "x86_64")]
use super::x86::{glue, ymm, zmm};

/// An AES key and the GHASH key that goes with it.
pub(crate) enum Pair {
    /// Any AES backend with any GHASH backend, as two passes.
    TwoPass {
        aes: Box<dyn AesKernels>,
        ghash: ghash::Key,
    },
    /// The vaes kernels with the ymm GHASH: the stitched kernel on ymm.
    #[cfg(target_arch = "x86_64")]
    Ymm(Secret<ymm::Pair>),
    /// The avx512 backend with the zmm GHASH: the stitched kernel on zmm.
    #[cfg(target_arch = "x86_64")]
    Zmm(Secret<zmm::Pair>),
}

/// The GHASH backend that goes with each AES backend (the one of the same instruction
/// set and width).
pub(crate) fn matching_ghash(aes: Backend) -> GhashBackend {
    match aes {
        Backend::Soft => GhashBackend::Soft,
        Backend::Aesni => GhashBackend::Clmul,
        Backend::Vaes => GhashBackend::Vpclmul,
        Backend::Avx512 => GhashBackend::Vpclmul512,
    }
}

impl Pair {
    /// The keys for `key` on the AES backend `aes` and its matching GHASH backend, or, with
    /// `ghash`, any GHASH backend (the two-pass variant unless it is the matching one).
    /// Both backends must be usable (the caller checked `aes`; `ghash` is checked here).
    pub(crate) fn new(
        key: &[u8],
        aes: Backend,
        ghash: Option<GhashBackend>,
    ) -> Result<Pair, Error> {
        let ghash = ghash.unwrap_or(matching_ghash(aes));
        #[cfg(target_arch = "x86_64")]
        match (aes, ghash) {
            (Backend::Vaes, GhashBackend::Vpclmul) => {
                return Ok(Pair::Ymm(Secret::new(ymm::Pair::new(key)?)))
            }
            (Backend::Avx512, GhashBackend::Vpclmul512) => {
                return Ok(Pair::Zmm(Secret::new(zmm::Pair::new(key)?)))
            }
            _ => {}
        }
        // (Unchecked: a wrong SECTORCRYPT_AES_WIDTH must not fail AES-GCM's self-test, which
        // builds these pairs; GCM's own kernels have no width to choose.)
        let aes = aes_core::kernels_unchecked(aes, key)?;
        let ghash = with_hash_key(aes.as_ref(), |h| ghash::Key::new(h, ghash))?;
        Ok(Pair::TwoPass { aes, ghash })
    }

    /// The AES kernels (CTR, E_K(J0) and every part of a message outside a stitched loop).
    pub(crate) fn aes(&self) -> &dyn AesKernels {
        match self {
            Pair::TwoPass { aes, .. } => aes.as_ref(),
            #[cfg(target_arch = "x86_64")]
            Pair::Ymm(p) => &p.aes,
            #[cfg(target_arch = "x86_64")]
            Pair::Zmm(p) => &p.aes,
        }
    }

    /// Folds whole blocks into the GHASH state `y`.
    pub(crate) fn ghash(&self, y: &mut u128, blocks: &[u8]) {
        if blocks.is_empty() {
            // Common for GCM (no AAD): skip the call into the backend.
            return;
        }
        match self {
            Pair::TwoPass { ghash, .. } => ghash.update(y, blocks),
            #[cfg(target_arch = "x86_64")]
            Pair::Ymm(p) => p.ghash.update(y, blocks),
            #[cfg(target_arch = "x86_64")]
            Pair::Zmm(p) => p.ghash.update(y, blocks),
        }
    }

    /// The bulk of a streamed piece in one pass: CTR with the 32-bit counter `ctr`
    /// stitched with GHASH (state `y`) over the ciphertext, on a prefix of `data` (whole
    /// groups of the kernel, never across a wrap of the low 32 bits of `ctr`); returns its
    /// length, and `ctr` and `y` advance over it. If `j0` is given and the length is not 0,
    /// the block has been replaced by E_K(J0), computed alongside the bulk so that its
    /// latency chain overlaps it. The two-pass variant does nothing and returns 0.
    pub(crate) fn stitched(
        &self,
        ctr: &mut u128,
        y: &mut u128,
        data: InOut<'_>,
        decrypt: bool,
        j0: Option<&mut Block>,
    ) -> usize {
        match self {
            Pair::TwoPass { .. } => 0,
            #[cfg(target_arch = "x86_64")]
            Pair::Ymm(p) => glue::stitched(p.as_ref(), ctr, y, data, decrypt, j0),
            #[cfg(target_arch = "x86_64")]
            Pair::Zmm(p) => glue::stitched(p.as_ref(), ctr, y, data, decrypt, j0),
        }
    }

    /// A whole message in one pass, where the stitched kernel takes it (the message is
    /// whole groups of the kernel, or any length on zmm, and the low 32 bits of the counter
    /// do not wrap): CTR over `data` with the counters from `inc32(J0)`, GHASH of the
    /// ciphertext from the state `y` (the hashed AAD) followed by the length block `lens`,
    /// and the tag GHASH ^ E_K(J0), which replaces `j0`. False, having changed nothing,
    /// when it does not take the message (always, in the two-pass variant).
    pub(crate) fn message(
        &self,
        y: u128,
        data: InOut<'_>,
        decrypt: bool,
        j0: &mut Block,
        lens: u128,
    ) -> bool {
        match self {
            Pair::TwoPass { .. } => false,
            #[cfg(target_arch = "x86_64")]
            Pair::Ymm(p) => glue::message(p.as_ref(), y, data, decrypt, j0, lens),
            #[cfg(target_arch = "x86_64")]
            Pair::Zmm(p) => glue::message(p.as_ref(), y, data, decrypt, j0, lens),
        }
    }
}

/// `Ok` when AES-GCM on `aes` with its matching GHASH passed its self-test (run once, before
/// the backend's first GCM key): the AES and GHASH self-tests check the kernels one by one,
/// but a stitched kernel (CTR and GHASH in one loop, the one-pass path with the length
/// block and the tag) is code of its own. A backend that fails is refused.
pub(crate) fn ensure_usable(aes: Backend) -> Result<(), Error> {
    aes.ensure_usable()?;
    matching_ghash(aes).ensure_usable()?;
    backend::self_test_passed(Algorithm::AesGcm, backend::index(aes), aes.name(), || {
        self_test(aes).unwrap_or(false)
    })
}

/// McGrew-Viega test case 2 (key, IV and plaintext of zeros: the ciphertext and tag
/// below), then messages of 0 to 1605 bytes (whole groups of 256 and 512 bytes, and not)
/// with AAD, sealed in place and out of place and opened, against the soft backend.
fn self_test(backend: Backend) -> Result<bool, Error> {
    let gcm = |key: &[u8], b: Backend| Gcm::from_pair(Pair::new(key, b, None)?);
    let mut block = [0u8; 16];
    let tag = gcm(&[0; 16], backend)?.seal(&[0; 12], &[], &mut block)?;
    if u128::from_be_bytes(block) != 0x0388_dace_60b6_a392_f328_c2b9_71b2_fe78
        || u128::from_be_bytes(tag) != 0xab6e_47d4_2cec_13bd_f53a_67b2_1257_bddf
    {
        return Ok(false);
    }
    let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(0x9d) ^ 0x3c).collect();
    Backend::Soft.ensure_usable()?;
    let (ours, soft) = (gcm(&key, backend)?, gcm(&key, Backend::Soft)?);
    let data: Vec<u8> = (0..1700u32).map(|i| (i * 131 + 7) as u8).collect();
    let (iv, aad) = ([0x5a; 12], &data[..37]);
    for len in [0usize, 16, 240, 256, 272, 512, 528, 1024, 1536, 1600, 1605] {
        let pt = &data[..len];
        let mut want = pt.to_vec();
        let want_tag = soft.seal(&iv, aad, &mut want)?;
        let mut got = pt.to_vec();
        let mut got_to = vec![0u8; pt.len()];
        let ok = ours.seal(&iv, aad, &mut got)? == want_tag
            && ours.seal_to(&iv, aad, pt, &mut got_to)? == want_tag
            && got == want
            && got_to == want
            && ours.open(&iv, aad, &mut got, &want_tag).is_ok()
            && got == pt;
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}
