//! CBC on AES-NI: parallel decryption (8 blocks per group), serial encryption of one
//! chain, and encryption of many sectors with 8 independent chains interleaved.
#![allow(unsafe_code)]

use super::{crypt_aesni, tail_through_buffer, Keys, GROUP};
use crate::aes::Block;
use core::arch::x86_64::*;

/// One CBC chain (latency bound by definition).
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn cbc_encrypt_aesni(
    k: &Keys,
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let mut c = [_mm_loadu_si128(iv.as_ptr().cast())];
    for off in (0..len).step_by(16) {
        c[0] = _mm_xor_si128(c[0], _mm_loadu_si128(src.add(off).cast()));
        crypt_aesni::<1, false>(k, &mut c);
        _mm_storeu_si128(dst.add(off).cast(), c[0]);
    }
    _mm_storeu_si128(iv.as_mut_ptr().cast(), c[0]);
}

/// Decrypts one group of 8 blocks whose predecessor is `chain`.
#[target_feature(enable = "aes,sse4.1")]
unsafe fn decrypt_group(k: &Keys, chain: __m128i, src: *const u8, dst: *mut u8) {
    let mut x = [_mm_setzero_si128(); 8];
    for (i, v) in x.iter_mut().enumerate() {
        *v = _mm_loadu_si128(src.add(16 * i).cast());
    }
    crypt_aesni::<8, true>(k, &mut x);
    // All predecessors are read before the first store (in place is safe).
    let mut prev = [chain; 8];
    for (i, p) in prev.iter_mut().enumerate().skip(1) {
        *p = _mm_loadu_si128(src.add(16 * i - 16).cast());
    }
    for i in 0..8 {
        _mm_storeu_si128(dst.add(16 * i).cast(), _mm_xor_si128(x[i], prev[i]));
    }
}

/// One CBC chain, decrypted 8 blocks at a time; `len` is a multiple of 16.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn cbc_decrypt_aesni(
    k: &Keys,
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    if len == 0 {
        return;
    }
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

/// `N` sectors of `size` bytes, each its own chain, one per register.
#[target_feature(enable = "aes,sse4.1")]
unsafe fn encrypt_sectors_n<const N: usize>(
    k: &Keys,
    ivs: &[Block],
    src: *const u8,
    dst: *mut u8,
    size: usize,
) {
    let mut x = [_mm_setzero_si128(); N];
    for (s, v) in x.iter_mut().enumerate() {
        *v = _mm_loadu_si128(ivs[s].as_ptr().cast());
    }
    for off in (0..size).step_by(16) {
        for (s, v) in x.iter_mut().enumerate() {
            *v = _mm_xor_si128(*v, _mm_loadu_si128(src.add(s * size + off).cast()));
        }
        crypt_aesni::<N, false>(k, &mut x);
        for (s, v) in x.iter().enumerate() {
            _mm_storeu_si128(dst.add(s * size + off).cast(), *v);
        }
    }
}

/// Independent chains, one per sector, 8 at a time.
#[target_feature(enable = "aes,sse4.1")]
pub(super) unsafe fn cbc_encrypt_sectors_aesni(
    k: &Keys,
    ivs: &[Block],
    src: *const u8,
    dst: *mut u8,
    size: usize,
) {
    let mut s = 0;
    while ivs.len() - s >= 8 {
        let at = s * size;
        encrypt_sectors_n::<8>(k, &ivs[s..s + 8], src.add(at), dst.add(at), size);
        s += 8;
    }
    let (rest, at) = (&ivs[s..], s * size);
    match rest.len() {
        7 => encrypt_sectors_n::<7>(k, rest, src.add(at), dst.add(at), size),
        6 => encrypt_sectors_n::<6>(k, rest, src.add(at), dst.add(at), size),
        5 => encrypt_sectors_n::<5>(k, rest, src.add(at), dst.add(at), size),
        4 => encrypt_sectors_n::<4>(k, rest, src.add(at), dst.add(at), size),
        3 => encrypt_sectors_n::<3>(k, rest, src.add(at), dst.add(at), size),
        2 => encrypt_sectors_n::<2>(k, rest, src.add(at), dst.add(at), size),
        1 => encrypt_sectors_n::<1>(k, rest, src.add(at), dst.add(at), size),
        _ => {}
    }
}
