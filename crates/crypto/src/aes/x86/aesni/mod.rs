//! The `aesni` backend: AES-NI + PCLMULQDQ on 128-bit xmm registers (SSE4.1 baseline).
//!
//! # Design
//! Target: every x86-64 CPU with AES-NI (Intel since Westmere, AMD since Bulldozer), and
//! the fallback on VAES CPUs when `SECTORCRYPT_BACKEND=aesni` is forced.
//!
//! Throughput model: AESENC has a latency of about 4 cycles and modern cores issue one or
//! two per cycle, so 8 independent blocks per round key are needed to keep the units busy;
//! every parallel kernel works on groups of 8 xmm registers = 8 blocks = 128 bytes. With two
//! AES units this is the same per-instruction rate as OpenSSL's AES-NI code, and its
//! advantage over OpenSSL comes only from keeping the pipeline full (many sectors per call,
//! tweaks in registers).
//!
//! Register budget (16 xmm): 8 data registers, 1 round key, the rest for tweaks, counters
//! and chaining values.
//!
//! Left out: XTS ciphertext stealing (generic layer, `modes/xts.rs`); a group shorter than
//! 8 blocks goes through a 128-byte stack buffer.
//!
//! Calling contract: every `unsafe fn` in this folder needs the CPU features of
//! [`Backend::Aesni`]; a [`Keys`] value exists only when they are present (checked in
//! [`Keys::new`]), which makes the safe trait methods sound. Pointers passed to the kernels
//! come from an `InOut` of the stated length.
#![allow(unsafe_code)]

mod cbc;
mod ctr;
mod ecb;
mod xts;

use crate::aes::{AesKernels, Block, RoundKeys};
use crate::buf::InOut;
use crate::Backend;
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// Bytes in one group of 8 xmm registers.
const GROUP: usize = 128;

/// Expanded keys: `enc` for the cipher, `dec` for the equivalent inverse cipher (FIPS-197
/// section 5.3.5).
#[repr(C, align(16))]
pub(crate) struct Keys {
    enc: [[u64; 2]; 15],
    dec: [[u64; 2]; 15],
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
            Backend::Aesni.check_cpu().is_ok(),
            "aesni keys requested on a cpu without aes-ni"
        );
        let mut k = Keys {
            enc: [[0; 2]; 15],
            dec: [[0; 2]; 15],
            rounds: rk.rounds,
        };
        // SAFETY: the CPU features of the aesni backend were checked just above.
        unsafe { k.fill(rk) };
        k
    }

    #[target_feature(enable = "aes,sse4.1")]
    unsafe fn fill(&mut self, rk: &RoundKeys) {
        let n = self.rounds;
        let key = |i: usize| _mm_loadu_si128(rk.rk[i].as_ptr().cast());
        let put = |slot: &mut [u64; 2], x: __m128i| _mm_storeu_si128(slot.as_mut_ptr().cast(), x);
        for i in 0..=n {
            put(&mut self.enc[i], key(i));
        }
        put(&mut self.dec[0], key(n));
        for i in 1..n {
            put(&mut self.dec[i], _mm_aesimc_si128(key(n - i)));
        }
        put(&mut self.dec[n], key(0));
    }

    #[inline(always)]
    unsafe fn key<const DEC: bool>(&self, i: usize) -> __m128i {
        let table = if DEC { &self.dec } else { &self.enc };
        _mm_load_si128(table[i].as_ptr().cast())
    }
}

/// All rounds but the last on `N` independent registers, round key by round key.
#[inline]
#[target_feature(enable = "aes,sse4.1")]
unsafe fn rounds_but_last_aesni<const N: usize, const DEC: bool>(k: &Keys, x: &mut [__m128i; N]) {
    for r in 1..k.rounds {
        let kr = k.key::<DEC>(r);
        for v in x.iter_mut() {
            *v = if DEC {
                _mm_aesdec_si128(*v, kr)
            } else {
                _mm_aesenc_si128(*v, kr)
            };
        }
    }
}

/// The last round with round key `key` (which may have a whitening value folded in).
#[inline]
#[target_feature(enable = "aes,sse4.1")]
unsafe fn last_round_aesni<const DEC: bool>(x: __m128i, key: __m128i) -> __m128i {
    if DEC {
        _mm_aesdeclast_si128(x, key)
    } else {
        _mm_aesenclast_si128(x, key)
    }
}

/// The whole cipher (or inverse cipher) on `N` registers.
#[inline]
#[target_feature(enable = "aes,sse4.1")]
unsafe fn crypt_aesni<const N: usize, const DEC: bool>(k: &Keys, x: &mut [__m128i; N]) {
    let k0 = k.key::<DEC>(0);
    for v in x.iter_mut() {
        *v = _mm_xor_si128(*v, k0);
    }
    rounds_but_last_aesni::<N, DEC>(k, x);
    let kl = k.key::<DEC>(k.rounds);
    for v in x.iter_mut() {
        *v = last_round_aesni::<DEC>(*v, kl);
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
        Backend::Aesni
    }
    fn ecb_encrypt(&self, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: `self` proves the aesni features; the pointers cover `len` bytes.
        unsafe { ecb::ecb_aesni::<false>(self, src, dst, len) }
    }
    fn ecb_decrypt(&self, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { ecb::ecb_aesni::<true>(self, src, dst, len) }
    }
    fn cbc_encrypt(&self, iv: &mut Block, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { cbc::cbc_encrypt_aesni(self, iv, src, dst, len) }
    }
    fn cbc_decrypt(&self, iv: &mut Block, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { cbc::cbc_decrypt_aesni(self, iv, src, dst, len) }
    }
    fn cbc_encrypt_sectors(&self, ivs: &[Block], mut data: InOut<'_>) {
        if ivs.is_empty() {
            return;
        }
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`; `len == ivs.len() * sector size`.
        unsafe { cbc::cbc_encrypt_sectors_aesni(self, ivs, src, dst, len / ivs.len()) }
    }
    fn ctr(&self, counter: &mut u128, mut data: InOut<'_>) {
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`.
        unsafe { ctr::ctr_aesni(self, counter, src, dst, len) }
    }
    fn xts_encrypt(&self, tweaks: &[Block], mut data: InOut<'_>) {
        if tweaks.is_empty() {
            return;
        }
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `ecb_encrypt`; `len == tweaks.len() * unit`.
        unsafe { xts::xts_aesni::<false>(self, tweaks, src, dst, len / tweaks.len()) }
    }
    fn xts_decrypt(&self, tweaks: &[Block], mut data: InOut<'_>) {
        if tweaks.is_empty() {
            return;
        }
        let (len, (src, dst)) = (data.len(), data.ptrs());
        // SAFETY: as in `xts_encrypt`.
        unsafe { xts::xts_aesni::<true>(self, tweaks, src, dst, len / tweaks.len()) }
    }
}
