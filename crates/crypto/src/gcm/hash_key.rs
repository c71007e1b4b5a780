//! GHASH's key H = E_K(0^128), derived from the AES kernels of a GCM key and wiped after
//! use. A leaf: the two-pass pair (`pair.rs`) and the stitched pairs (`x86/ymm.rs`,
//! `x86/zmm.rs`) each derive their GHASH key through it, and `pair.rs` calls the stitched
//! pairs, so the helper cannot live in either without a circle between the files.

use crate::aes_core::AesKernels;
use crate::block::Block;
use crate::buf::InOut;
use zeroize::Zeroize;

/// `f` of GHASH's key H = E_K(0^128) under `aes`, wiped afterwards.
pub(crate) fn with_hash_key<T>(aes: &dyn AesKernels, f: impl FnOnce(&Block) -> T) -> T {
    let mut h: Block = [0; 16];
    aes.ecb_encrypt(InOut::InPlace(&mut h));
    let out = f(&h);
    h.zeroize();
    out
}

#[cfg(test)]
mod tests {
    use super::with_hash_key;
    use crate::aes_core::{kernels, Backend};

    /// H for the all-zero AES-128 key is E_K(0) = 66e94bd4ef8a2c3b884cfa59ca342b2e (the
    /// McGrew-Viega test case 1 value of H).
    #[test]
    fn hash_key_is_the_encrypted_zero_block() {
        let aes = kernels(Backend::Soft, &[0; 16]).unwrap();
        let h = with_hash_key(aes.as_ref(), |h| u128::from_be_bytes(*h));
        assert_eq!(h, 0x66e9_4bd4_ef8a_2c3b_884c_fa59_ca34_2b2e);
    }
}
