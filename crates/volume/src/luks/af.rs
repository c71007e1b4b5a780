//! The anti-forensic information splitter (LUKS1 on-disk format specification 1.2.3,
//! section 2.4 "AF-Splitting"; LUKS2 keeps it as `"af": {"type": "luks1"}`).
//!
//! A key of n bytes becomes `stripes` blocks of n bytes: all but the last are random, each
//! is XORed into an accumulator that is then diffused with the hash; the last block is the
//! accumulator XOR the key. Destroying any one block destroys the key.

use crate::error::Result;
use crate::hash::HashAlg;
use zeroize::{Zeroize, Zeroizing};

/// cryptsetup's stripe count (and the only one it writes).
pub const STRIPES: usize = 4000;

/// The diffusion function H of the specification: the buffer is cut into digest-sized
/// blocks, block i replaced by hash(be32(i) || block) (a short last block by the prefix of
/// its hash).
fn diffuse(hash: HashAlg, buf: &mut [u8]) {
    let ds = hash.output_len();
    for (i, block) in buf.chunks_mut(ds).enumerate() {
        let mut h = hash.digest(&[&(i as u32).to_be_bytes(), block]);
        let n = block.len();
        block.copy_from_slice(&h[..n]);
        h.zeroize();
    }
}

/// Splits `key` into `stripes` blocks (random from the OS).
pub fn split(key: &[u8], stripes: usize, hash: HashAlg) -> Result<Zeroizing<Vec<u8>>> {
    let n = key.len();
    let mut out = Zeroizing::new(vec![0u8; n * stripes]);
    crate::random(&mut out[..n * (stripes - 1)])?;
    let mut acc = Zeroizing::new(vec![0u8; n]);
    for s in out[..n * (stripes - 1)].chunks(n) {
        for (a, b) in acc.iter_mut().zip(s) {
            *a ^= b;
        }
        diffuse(hash, &mut acc);
    }
    let last = &mut out[n * (stripes - 1)..];
    for ((o, a), k) in last.iter_mut().zip(acc.iter()).zip(key) {
        *o = a ^ k;
    }
    Ok(out)
}

/// Recovers the key of `key_len` bytes from `stripes` blocks.
pub fn merge(material: &[u8], key_len: usize, stripes: usize, hash: HashAlg) -> Zeroizing<Vec<u8>> {
    let n = key_len;
    let mut acc = Zeroizing::new(vec![0u8; n]);
    for s in material[..n * (stripes - 1)].chunks(n) {
        for (a, b) in acc.iter_mut().zip(s) {
            *a ^= b;
        }
        diffuse(hash, &mut acc);
    }
    for (a, b) in acc
        .iter_mut()
        .zip(&material[n * (stripes - 1)..n * stripes])
    {
        *a ^= b;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_merge_returns_the_key_and_every_stripe_matters() {
        for hash in [HashAlg::Sha1, HashAlg::Sha256, HashAlg::Sha512] {
            // 33 bytes: diffusion with a partial last block for every hash.
            let key: Vec<u8> = (0u8..33).collect();
            let mut m = split(&key, 50, hash).unwrap();
            assert_eq!(*merge(&m, 33, 50, hash), key);
            m[33 * 7 + 3] ^= 1;
            assert_ne!(*merge(&m, 33, 50, hash), key);
        }
    }

    #[test]
    fn diffuse_matches_the_specification_by_hand() {
        // Two stripes: key = H(s0) XOR s1, with H over one sha256 block of index 0.
        let s0 = [7u8; 32];
        let s1 = [9u8; 32];
        let h = HashAlg::Sha256.digest(&[&0u32.to_be_bytes(), &s0]);
        let material = [s0, s1].concat();
        let want: Vec<u8> = h.iter().zip(&s1).map(|(a, b)| a ^ b).collect();
        assert_eq!(*merge(&material, 32, 2, HashAlg::Sha256), want);
    }
}
