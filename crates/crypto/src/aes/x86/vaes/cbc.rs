//! CBC on VAES.
//!
//! - Decryption is parallel: 16 blocks per group; the previous ciphertext blocks are read
//!   with loads shifted by one block, all before the group's stores (in place is safe).
//! - Encryption of one chain is serial (each block needs the previous ciphertext), so it is
//!   latency bound: plain AES-NI on xmm.
//! - Encryption of many sectors interleaves independent chains: two sectors per register
//!   (lane 0 and lane 1), up to 8 registers = 16 sectors advancing together.
#![allow(unsafe_code)]

use super::{crypt_vaes_avx2, tail_through_buffer, Keys, GROUP};
use crate::aes::Block;
use core::arch::x86_64::*;

/// One CBC chain on xmm registers.
#[target_feature(enable = "aes,sse2")]
pub(super) unsafe fn cbc_encrypt_aesni(
    k: &Keys,
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let mut c = _mm_loadu_si128(iv.as_ptr().cast());
    let last = k.rounds;
    for off in (0..len).step_by(16) {
        c = _mm_xor_si128(c, _mm_loadu_si128(src.add(off).cast()));
        c = _mm_xor_si128(c, k.key128(0));
        for r in 1..last {
            c = _mm_aesenc_si128(c, k.key128(r));
        }
        c = _mm_aesenclast_si128(c, k.key128(last));
        _mm_storeu_si128(dst.add(off).cast(), c);
    }
    _mm_storeu_si128(iv.as_mut_ptr().cast(), c);
}

/// Decrypts one group of 16 blocks whose predecessor is `chain`.
#[target_feature(enable = "avx2,vaes")]
unsafe fn decrypt_group(k: &Keys, chain: __m128i, src: *const u8, dst: *mut u8) {
    let mut x = [_mm256_setzero_si256(); 8];
    for (i, v) in x.iter_mut().enumerate() {
        *v = _mm256_loadu_si256(src.add(32 * i).cast());
    }
    crypt_vaes_avx2::<8, true>(k, &mut x);
    // The predecessors of blocks (2i, 2i+1) are (2i-1, 2i): a load one block back, except
    // for the first register, whose low lane is the chaining value.
    let mut prev = [_mm256_setzero_si256(); 8];
    prev[0] =
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(chain), _mm_loadu_si128(src.cast()));
    for (i, p) in prev.iter_mut().enumerate().skip(1) {
        *p = _mm256_loadu_si256(src.add(32 * i - 16).cast());
    }
    for i in 0..8 {
        _mm256_storeu_si256(dst.add(32 * i).cast(), _mm256_xor_si256(x[i], prev[i]));
    }
}

/// One CBC chain, decrypted 16 blocks at a time; `len` is a multiple of 16.
#[target_feature(enable = "avx2,vaes")]
pub(super) unsafe fn cbc_decrypt_vaes_avx2(
    k: &Keys,
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    if len == 0 {
        return;
    }
    // Read before any store: in place, the last ciphertext block is about to be overwritten.
    let next_iv = _mm_loadu_si128(src.add(len - 16).cast());
    let mut chain = _mm_loadu_si128(iv.as_ptr().cast());
    let mut off = 0;
    while off + GROUP <= len {
        let following = _mm_loadu_si128(src.add(off + GROUP - 16).cast());
        decrypt_group(k, chain, src.add(off), dst.add(off));
        chain = following;
        off += GROUP;
    }
    if off < len {
        // SAFETY (for the closure): the buffer pointers cover GROUP bytes.
        tail_through_buffer(src.add(off), dst.add(off), len - off, |s, d| unsafe {
            decrypt_group(k, chain, s, d)
        });
    }
    _mm_storeu_si128(iv.as_mut_ptr().cast(), next_iv);
}

/// `2 * N` sectors of `size` bytes, each its own chain: sector `2p + lane` in lane `lane`
/// of register `p`.
///
/// Sectors of 2 KiB and more start at addresses that are equal modulo 4 KiB, so 16 chains
/// at the same block offset would compete for one set of the 8-way L1 cache (measured: a
/// third of the speed). The chains are therefore skewed: register pair `p / 2` runs
/// `skew` blocks (one cache line per pair) behind the previous pair, and the few steps at
/// the start and end where some registers have no block left take a slower masked path.
#[target_feature(enable = "avx2,vaes")]
unsafe fn encrypt_sector_pairs<const N: usize>(
    k: &Keys,
    ivs: &[Block],
    src: *const u8,
    dst: *mut u8,
    size: usize,
    skew: usize,
) {
    let blocks = size / 16;
    let delay = |p: usize| (p / 2) * skew;
    let max_delay = delay(N - 1);
    let lo_at = |p: usize, block: usize| 2 * p * size + 16 * block;
    let mut x = [_mm256_setzero_si256(); N];
    for (p, v) in x.iter_mut().enumerate() {
        *v = _mm256_loadu2_m128i(ivs[2 * p + 1].as_ptr().cast(), ivs[2 * p].as_ptr().cast());
    }
    for step in 0..blocks + max_delay {
        if step >= max_delay && step < blocks {
            for (p, v) in x.iter_mut().enumerate() {
                let at = lo_at(p, step - delay(p));
                let input = _mm256_loadu2_m128i(src.add(at + size).cast(), src.add(at).cast());
                *v = _mm256_xor_si256(*v, input);
            }
            crypt_vaes_avx2::<N, false>(k, &mut x);
            for (p, v) in x.iter().enumerate() {
                let at = lo_at(p, step - delay(p));
                _mm256_storeu2_m128i(dst.add(at + size).cast(), dst.add(at).cast(), *v);
            }
        } else {
            let active = |p: usize| step >= delay(p) && step - delay(p) < blocks;
            let saved = x;
            for (p, v) in x.iter_mut().enumerate() {
                if active(p) {
                    let at = lo_at(p, step - delay(p));
                    let input = _mm256_loadu2_m128i(src.add(at + size).cast(), src.add(at).cast());
                    *v = _mm256_xor_si256(*v, input);
                }
            }
            crypt_vaes_avx2::<N, false>(k, &mut x);
            for (p, v) in x.iter_mut().enumerate() {
                if active(p) {
                    let at = lo_at(p, step - delay(p));
                    _mm256_storeu2_m128i(dst.add(at + size).cast(), dst.add(at).cast(), *v);
                } else {
                    *v = saved[p];
                }
            }
        }
    }
}

/// Independent chains, one per sector of `size` bytes, 16 at a time.
#[target_feature(enable = "avx2,vaes")]
pub(super) unsafe fn cbc_encrypt_sectors_vaes_avx2(
    k: &Keys,
    ivs: &[Block],
    src: *const u8,
    dst: *mut u8,
    size: usize,
) {
    // One cache line of skew between register pairs when sectors alias in the L1 cache.
    let skew = if size.is_multiple_of(2048) { 4 } else { 0 };
    let mut s = 0;
    while ivs.len() - s >= 16 {
        let at = s * size;
        encrypt_sector_pairs::<8>(k, &ivs[s..s + 16], src.add(at), dst.add(at), size, skew);
        s += 16;
    }
    let pairs = (ivs.len() - s) / 2;
    let (i, at) = (&ivs[s..s + 2 * pairs], s * size);
    match pairs {
        7 => encrypt_sector_pairs::<7>(k, i, src.add(at), dst.add(at), size, skew),
        6 => encrypt_sector_pairs::<6>(k, i, src.add(at), dst.add(at), size, skew),
        5 => encrypt_sector_pairs::<5>(k, i, src.add(at), dst.add(at), size, skew),
        4 => encrypt_sector_pairs::<4>(k, i, src.add(at), dst.add(at), size, skew),
        3 => encrypt_sector_pairs::<3>(k, i, src.add(at), dst.add(at), size, skew),
        2 => encrypt_sector_pairs::<2>(k, i, src.add(at), dst.add(at), size, skew),
        1 => encrypt_sector_pairs::<1>(k, i, src.add(at), dst.add(at), size, skew),
        _ => {}
    }
    s += 2 * pairs;
    if s < ivs.len() {
        let mut iv = ivs[s];
        let at = s * size;
        cbc_encrypt_aesni(k, &mut iv, src.add(at), dst.add(at), size);
    }
}
