//! The `vaes` backend: VAES + VPCLMULQDQ on 256-bit ymm registers, AVX2 integer operations.
//!
//! # Design
//! Target: x86-64 CPUs with VAES on ymm but not necessarily AVX-512 (AMD Zen 3 and Zen 4,
//! Intel Ice Lake and later, including VMs that expose VAES without the AVX-512 register
//! state, such as some of this project's Zen 4 machines with XCR0 = 0x7; where the state
//! is there, the `avx512` backend reuses these kernels and adds GCM on zmm). Nothing here
//! touches zmm or mask registers.
//!
//! Throughput model: a VAESENC on a ymm register encrypts one round of two blocks; Zen 4
//! issues two per cycle with a latency of about 4 cycles, so 8 independent registers (16
//! blocks) must be in flight to keep both units busy. Every parallel kernel therefore works
//! on groups of 8 ymm = 16 blocks = 256 bytes. AES-256 costs 14 rounds per block, i.e.
//! 16 x 14 / 4 = 56 cycles per group at best: 0.22 cycles per byte, ~12.8 GB/s at 2.8 GHz.
//!
//! Register budget (16 ymm): 8 data registers, 1 round key (round keys are broadcast to
//! both lanes once per key and streamed from L1, one load per round per group), the rest
//! for XTS tweaks / CTR counters / CBC chaining values; the compiler spills what does not
//! fit to L1, which costs loads, not latency.
//!
//! Tuned for: storage sectors (virtually all XTS inputs are 512 or 4096 bytes, handed over
//! many sectors per call), CTR and ECB over long buffers, CBC decryption, and CBC encryption
//! of many independent sectors (16 chains at once, two per register).
//!
//! Left out: single-stream CBC encryption is latency bound by definition and uses plain
//! AES-NI on xmm here; XTS ciphertext stealing is done by the generic layer
//! (`modes/xts.rs`); a group shorter than 16 blocks is run through a 256-byte stack
//! buffer rather than with narrower code, since it happens at most once per data unit.
//!
//! Calling contract: every `unsafe fn` in this folder needs the CPU features of
//! [`Backend::Vaes`]; a [`Keys`] value exists only when they are present (checked in
//! [`Keys::new`]), which is what makes the safe trait methods sound. Pointers passed to
//! the kernels come from an `InOut` of the stated length.
#![allow(unsafe_code)]

mod cbc;
mod ctr;
mod ecb;
mod gcm;
pub(crate) mod probe;
#[cfg(test)]
mod tests;
mod xts;

use super::common::gcm as gcm_glue;
use crate::aes::{AesKernels, Block, RoundKeys};
use crate::buf::InOut;
use crate::Backend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Bytes in one group of 8 ymm registers.
const GROUP: usize = 256;

/// Expanded keys broadcast to both 128-bit lanes: `enc` for the cipher, `dec` for the
/// equivalent inverse cipher (FIPS-197 section 5.3.5: InvMixColumns applied to the middle
/// round keys, order reversed).
#[repr(C, align(32))]
pub(crate) struct Keys {
    enc: [[u64; 4]; 15],
    dec: [[u64; 4]; 15],
    rounds: usize,
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.enc.zeroize();
        self.dec.zeroize();
    }
}

impl Keys {
    pub(crate) fn new(rk: &RoundKeys) -> Keys {
        assert!(
            Backend::Vaes.check_cpu().is_ok(),
            "vaes keys requested on a cpu without vaes"
        );
        let mut k = Keys {
            enc: [[0; 4]; 15],
            dec: [[0; 4]; 15],
            rounds: rk.rounds,
        };
        // SAFETY: the CPU features of the vaes backend were checked just above.
        unsafe { k.fill(rk) };
        k
    }

    #[target_feature(enable = "avx2,aes")]
    unsafe fn fill(&mut self, rk: &RoundKeys) {
        let n = self.rounds;
        let key = |i: usize| _mm_loadu_si128(rk.rk[i].as_ptr().cast());
        let put = |slot: &mut [u64; 4], x: __m128i| {
            _mm256_storeu_si256(slot.as_mut_ptr().cast(), _mm256_broadcastsi128_si256(x))
        };
        for i in 0..=n {
            put(&mut self.enc[i], key(i));
        }
        put(&mut self.dec[0], key(n));
        for i in 1..n {
            put(&mut self.dec[i], _mm_aesimc_si128(key(n - i)));
        }
        put(&mut self.dec[n], key(0));
    }

    /// Round key `i` of the cipher (`DEC = false`) or of the equivalent inverse cipher.
    #[inline(always)]
    unsafe fn key<const DEC: bool>(&self, i: usize) -> __m256i {
        let table = if DEC { &self.dec } else { &self.enc };
        _mm256_load_si256(table[i].as_ptr().cast())
    }

    /// Round key `i` of the cipher, low lane only (for the xmm single-stream paths).
    #[inline(always)]
    unsafe fn key128(&self, i: usize) -> __m128i {
        _mm_load_si128(self.enc[i].as_ptr().cast())
    }
}

/// All rounds of the cipher (or inverse cipher) on `N` registers of two blocks each,
/// round key by round key so that the `N` registers are independent in flight.
#[inline]
#[target_feature(enable = "avx2,vaes")]
unsafe fn crypt_vaes_avx2<const N: usize, const DEC: bool>(k: &Keys, x: &mut [__m256i; N]) {
    let k0 = k.key::<DEC>(0);
    for v in x.iter_mut() {
        *v = _mm256_xor_si256(*v, k0);
    }
    for r in 1..k.rounds {
        let kr = k.key::<DEC>(r);
        for v in x.iter_mut() {
            *v = if DEC {
                _mm256_aesdec_epi128(*v, kr)
            } else {
                _mm256_aesenc_epi128(*v, kr)
            };
        }
    }
    let kl = k.key::<DEC>(k.rounds);
    for v in x.iter_mut() {
        *v = if DEC {
            _mm256_aesdeclast_epi128(*v, kl)
        } else {
            _mm256_aesenclast_epi128(*v, kl)
        };
    }
}

/// All rounds but the last on `N` registers; the caller finishes with
/// [`last_round_vaes_avx2`], which lets it fold an XOR into the last round key.
#[inline]
#[target_feature(enable = "avx2,vaes")]
unsafe fn rounds_but_last_vaes_avx2<const N: usize, const DEC: bool>(
    k: &Keys,
    x: &mut [__m256i; N],
) {
    for r in 1..k.rounds {
        let kr = k.key::<DEC>(r);
        for v in x.iter_mut() {
            *v = if DEC {
                _mm256_aesdec_epi128(*v, kr)
            } else {
                _mm256_aesenc_epi128(*v, kr)
            };
        }
    }
}

/// The last round with round key `key` (which may have a whitening value folded in).
#[inline]
#[target_feature(enable = "avx2,vaes")]
unsafe fn last_round_vaes_avx2<const DEC: bool>(x: __m256i, key: __m256i) -> __m256i {
    if DEC {
        _mm256_aesdeclast_epi128(x, key)
    } else {
        _mm256_aesenclast_epi128(x, key)
    }
}

/// The short last group of a kernel, through a stack buffer of one group.
#[inline(always)]
unsafe fn tail_through_buffer(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    group: impl FnOnce(*const u8, *mut u8),
) {
    super::common::tail_through_buffer::<GROUP>(src, dst, len, group)
}

impl AesKernels for Keys {
    fn backend(&self) -> Backend {
        Backend::Vaes
    }
    fn ecb_encrypt(&self, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: `self` proves the vaes features; the pointers cover `len` bytes.
        unsafe { ecb::ecb_vaes_avx2::<false>(self, src, dst, len) }
    }
    fn ecb_decrypt(&self, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { ecb::ecb_vaes_avx2::<true>(self, src, dst, len) }
    }
    fn cbc_encrypt(&self, iv: &mut Block, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { cbc::cbc_encrypt_aesni(self, iv, src, dst, len) }
    }
    fn cbc_decrypt(&self, iv: &mut Block, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { cbc::cbc_decrypt_vaes_avx2(self, iv, src, dst, len) }
    }
    fn cbc_encrypt_sectors(&self, ivs: &[Block], mut data: InOut<'_>) {
        if ivs.is_empty() {
            return;
        }
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`; `len == ivs.len() * sector size`.
        unsafe { cbc::cbc_encrypt_sectors_vaes_avx2(self, ivs, src, dst, len / ivs.len()) }
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
        let crate::ghash::Key::Vpclmul(g) = g else {
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
        let crate::ghash::Key::Vpclmul(g) = g else {
            return false;
        };
        gcm_glue::message::<GROUP, false>(y, data, j0, lens, self.gcm_kernel(g, decrypt))
    }
    fn ctr(&self, counter: &mut u128, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { ctr::ctr_vaes_avx2(self, counter, src, dst, len) }
    }
    fn xts_encrypt(&self, tweaks: &[Block], mut data: InOut<'_>) {
        if tweaks.is_empty() {
            return;
        }
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`; `len == tweaks.len() * unit`.
        unsafe { xts::xts_vaes_avx2::<false>(self, tweaks, src, dst, len / tweaks.len()) }
    }
    fn xts_decrypt(&self, tweaks: &[Block], mut data: InOut<'_>) {
        if tweaks.is_empty() {
            return;
        }
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `xts_encrypt`.
        unsafe { xts::xts_vaes_avx2::<true>(self, tweaks, src, dst, len / tweaks.len()) }
    }
}

impl Keys {
    /// The stitched GCM kernel for this key and `g`, for the shared glue.
    fn gcm_kernel<'k>(
        &'k self,
        g: &'k crate::ghash::vpclmul::Key,
        decrypt: bool,
    ) -> impl gcm_glue::Kernel + 'k {
        move |ctr, y, src, dst, len, j0, lens| {
            // SAFETY: `self` and `g` prove the vaes and vpclmul features; the glue passes
            // pointers covering `len` bytes of whole groups and a counter that does not wrap
            // its low 32 bits within them.
            unsafe {
                if decrypt {
                    gcm::gcm_vaes_avx2::<true>(self, g, ctr, y, src, dst, len, j0, lens)
                } else {
                    gcm::gcm_vaes_avx2::<false>(self, g, ctr, y, src, dst, len, j0, lens)
                }
            }
        }
    }
}
