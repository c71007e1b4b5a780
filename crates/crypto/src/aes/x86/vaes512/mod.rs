//! The `avx512` backend: the `vaes` (ymm) kernels for every mode but GCM, whose stitched
//! CTR + GHASH loop runs here on 512-bit zmm registers.
//!
//! # Why only GCM
//! On Zen 4 (this project's machines; the `sectorcrypt bench --probe` table) a 512-bit
//! operation is split in two 256-bit halves: a VAESENC zmm issues once per cycle where two
//! ymm issue, so AES alone runs at the same bytes per cycle in both widths, and XTS, CTR,
//! ECB and CBC keep the ymm kernels. VPCLMULQDQ, however, occupies the multiplier for 2
//! cycles on ymm and on zmm alike: zmm doubles GHASH's throughput per byte, and the 32 zmm
//! registers hold all round keys and the AES state of a 512-byte group with room for the
//! hash. That is what GCM, where the multiplications compete with the AES rounds, needs.
//!
//! Calling contract: every `unsafe fn` in this folder needs the CPU features of
//! [`Backend::Avx512`]; a [`Keys`] value exists only when they are present (checked in
//! [`Keys::new`]), which makes the safe trait methods sound.
#![allow(unsafe_code)]

mod gcm;
pub(crate) mod probe;
#[cfg(test)]
mod tests;

use super::common::gcm as gcm_glue;
use super::vaes;
use crate::aes::{AesKernels, Block, RoundKeys};
use crate::buf::InOut;
use crate::Backend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Bytes in one group of 8 zmm registers.
const GROUP: usize = 512;

/// The ymm keys of the `vaes` kernels, and the cipher's round keys broadcast to the four
/// lanes of a zmm register.
pub(crate) struct Keys {
    ymm: vaes::Keys,
    zmm: ZmmKeys,
}

#[repr(C, align(64))]
struct ZmmKeys {
    enc: [[u64; 8]; 15],
    rounds: usize,
}

impl Drop for ZmmKeys {
    fn drop(&mut self) {
        self.enc.zeroize();
    }
}

impl ZmmKeys {
    /// Round key `i` of the cipher in all four lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn key(&self, i: usize) -> __m512i {
        _mm512_load_si512(self.enc[i].as_ptr().cast())
    }
}

impl Keys {
    pub(crate) fn new(rk: &RoundKeys) -> Keys {
        assert!(
            Backend::Avx512.check_cpu().is_ok(),
            "avx512 keys requested on a cpu without avx512/vaes"
        );
        let mut zmm = ZmmKeys {
            enc: [[0; 8]; 15],
            rounds: rk.rounds,
        };
        for (slot, key) in zmm.enc.iter_mut().zip(&rk.rk).take(rk.rounds + 1) {
            let lo = u64::from_le_bytes(key[..8].try_into().unwrap());
            let hi = u64::from_le_bytes(key[8..].try_into().unwrap());
            *slot = [lo, hi, lo, hi, lo, hi, lo, hi];
        }
        Keys {
            ymm: vaes::Keys::new(rk),
            zmm,
        }
    }
}

impl AesKernels for Keys {
    fn backend(&self) -> Backend {
        Backend::Avx512
    }
    fn ecb_encrypt(&self, data: InOut<'_>) {
        self.ymm.ecb_encrypt(data)
    }
    fn ecb_decrypt(&self, data: InOut<'_>) {
        self.ymm.ecb_decrypt(data)
    }
    fn cbc_encrypt(&self, iv: &mut Block, data: InOut<'_>) {
        self.ymm.cbc_encrypt(iv, data)
    }
    fn cbc_decrypt(&self, iv: &mut Block, data: InOut<'_>) {
        self.ymm.cbc_decrypt(iv, data)
    }
    fn encrypt_block(&self, block: &mut Block) {
        self.ymm.encrypt_block(block)
    }
    fn cbc_encrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        self.ymm.cbc_encrypt_sectors(ivs, data)
    }
    fn cbc_decrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        self.ymm.cbc_decrypt_sectors(ivs, data)
    }
    fn ctr(&self, counter: &mut u128, data: InOut<'_>) {
        self.ymm.ctr(counter, data)
    }
    fn xts_encrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        self.ymm.xts_encrypt(tweaks, data)
    }
    fn xts_decrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        self.ymm.xts_decrypt(tweaks, data)
    }
    fn gcm_stitched(
        &self,
        g: &crate::ghash::Key,
        ctr: &mut u128,
        y: &mut u128,
        data: InOut<'_>,
        decrypt: bool,
        j0: Option<&mut Block>,
    ) -> usize {
        let crate::ghash::Key::Vpclmul512(g) = g else {
            return 0;
        };
        gcm_glue::stitched::<GROUP>(ctr, y, data, j0, self.gcm_kernel(g, decrypt))
    }
    fn gcm_message(
        &self,
        g: &crate::ghash::Key,
        y: u128,
        data: InOut<'_>,
        decrypt: bool,
        j0: &mut Block,
        lens: u128,
    ) -> bool {
        let crate::ghash::Key::Vpclmul512(g) = g else {
            return false;
        };
        gcm_glue::message::<GROUP, true>(y, data, j0, lens, self.gcm_kernel(g, decrypt))
    }
}

impl Keys {
    /// The stitched GCM kernel for this key and `g`, for the shared glue.
    fn gcm_kernel<'k>(
        &'k self,
        g: &'k crate::ghash::vpclmul512::Key,
        decrypt: bool,
    ) -> impl gcm_glue::Kernel + 'k {
        move |ctr, y, src, dst, len, j0, lens| {
            // SAFETY: `self` and `g` prove the avx512 features; the glue passes pointers
            // covering `len` bytes (whole groups, or any length with `lens`, which this
            // kernel finishes with a masked group) and a counter that does not wrap its low
            // 32 bits within them.
            unsafe { gcm::gcm_vaes_avx512(&self.zmm, g, ctr, y, src, dst, len, decrypt, j0, lens) }
        }
    }
}
