//! The `avx512` backend's kernel object: the keys of both widths (the ymm kernels of
//! `vaes/`, built with AVX-512VL where that helps, and the zmm kernels of `zmm/`) and the
//! width each mode runs on ([`crate::aes_core::width`]), and the real work the width
//! choice times. No `unsafe`: the kernels are reached through the key containers, which
//! checked the CPU when they were made.

use super::{vaes, zmm};
use crate::aes_core::width::{self, Width, WidthChoice, WidthMode, Widths, SECTOR, SECTORS};
use crate::aes_core::{expand_key, AesKernels, Backend, RoundKeys};
use crate::block::Block;
use crate::buf::InOut;
use crate::Error;

/// The avx512 backend's kernels for one key.
pub(crate) struct Avx512Kernels {
    ymm: vaes::Keys,
    zmm: zmm::Keys,
    widths: Widths,
}

impl Avx512Kernels {
    /// The kernels of `rk` with each mode on its width in `widths`. Panics if this CPU
    /// cannot run the avx512 backend (the key containers check).
    pub(crate) fn new(rk: &RoundKeys, widths: Widths) -> Avx512Kernels {
        Avx512Kernels {
            ymm: vaes::Keys::new(rk, Backend::Avx512),
            zmm: zmm::Keys::new(rk, Backend::Avx512),
            widths,
        }
    }

    /// The kernels of `mode`'s width.
    #[inline(always)]
    fn of(&self, mode: WidthMode) -> &dyn AesKernels {
        match self.widths.get(mode) {
            Width::Ymm => &self.ymm,
            Width::Zmm => &self.zmm,
        }
    }
}

impl AesKernels for Avx512Kernels {
    fn backend(&self) -> Backend {
        Backend::Avx512
    }
    fn ecb_encrypt(&self, data: InOut<'_>) {
        self.of(WidthMode::Ecb).ecb_encrypt(data)
    }
    fn ecb_decrypt(&self, data: InOut<'_>) {
        self.of(WidthMode::Ecb).ecb_decrypt(data)
    }
    fn cbc_encrypt(&self, iv: &mut Block, data: InOut<'_>) {
        // One chain: latency bound, xmm at every width.
        self.ymm.cbc_encrypt(iv, data)
    }
    fn cbc_decrypt(&self, iv: &mut Block, data: InOut<'_>) {
        self.of(WidthMode::CbcDecrypt).cbc_decrypt(iv, data)
    }
    fn encrypt_block(&self, block: &mut Block) {
        self.ymm.encrypt_block(block)
    }
    fn cbc_encrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        self.of(WidthMode::CbcEncryptSectors)
            .cbc_encrypt_sectors(ivs, data)
    }
    fn cbc_decrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        self.of(WidthMode::CbcDecrypt)
            .cbc_decrypt_sectors(ivs, data)
    }
    fn ctr(&self, counter: &mut u128, data: InOut<'_>) {
        self.of(WidthMode::Ctr).ctr(counter, data)
    }
    fn xts_encrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        self.of(WidthMode::Xts).xts_encrypt(tweaks, data)
    }
    fn xts_decrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        self.of(WidthMode::Xts).xts_decrypt(tweaks, data)
    }
}

/// The widths new avx512 keys take: [`width::with_width`]'s on this thread (tests), else
/// the process's choice (`SECTORCRYPT_AES_WIDTH`, or measured now the first time).
/// Only called where the avx512 backend runs.
pub(crate) fn current() -> Result<Widths, Error> {
    if let Some(w) = width::overridden() {
        return Ok(Widths::all(w));
    }
    width::process_choice(measure).map(|c| c.widths)
}

/// The process's choice of widths, `None` where the avx512 backend cannot run (for the
/// reports).
pub(crate) fn choice() -> Option<Result<&'static WidthChoice, Error>> {
    Backend::Avx512.check_cpu().ok()?;
    Some(width::process_choice(measure))
}

/// The measured choice: each mode on each width over its bytes of zeros
/// ([`width::bytes`]), with an AES-256 key of a fixed public pattern (nothing secret is
/// timed).
fn measure() -> WidthChoice {
    let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(0x3b) ^ 0x5c).collect();
    let rk = expand_key(&key).expect("a 32-byte key");
    let ymm = vaes::Keys::new(&rk, Backend::Avx512);
    let zmm = zmm::Keys::new(&rk, Backend::Avx512);
    let mut buf = vec![0u8; SECTORS * SECTOR];
    // 4 XTS units of 4096 bytes; 32 CBC sectors of 4096 bytes (one turn of the zmm
    // kernel's 32 chains, two of the ymm kernel's 16).
    let tweaks: Vec<Block> = (0..SECTORS as u8).map(|i| [i; 16]).collect();
    let mut run = |mode: WidthMode, w: Width| {
        let k: &dyn AesKernels = match w {
            Width::Ymm => &ymm,
            Width::Zmm => &zmm,
        };
        let d = InOut::InPlace(&mut buf[..width::bytes(mode)]);
        match mode {
            WidthMode::Ecb => k.ecb_encrypt(d),
            WidthMode::Ctr => k.ctr(&mut 0, d),
            WidthMode::CbcDecrypt => k.cbc_decrypt(&mut [0; 16], d),
            WidthMode::CbcEncryptSectors => k.cbc_encrypt_sectors(&tweaks, d),
            WidthMode::Xts => k.xts_encrypt(&tweaks[..width::BYTES / 4096], d),
        }
    };
    width::choose(&crate::backend::monotonic, &mut run)
}
