//! AES key wrap (RFC 3394, NIST SP 800-38F's KW with the default initial value
//! `A6A6A6A6A6A6A6A6`): how FileVault 2 wraps its key-encrypting key under the
//! passphrase's key, and the volume key under that.
//!
//! - Keys of 16, 24 or 32 bytes; wrapped data of 24 bytes or more, a multiple of 8 (a
//!   key of at least 16 bytes plus the 8-byte integrity check).
//! - [`unwrap`] checks the integrity value in constant time and releases nothing when it
//!   is wrong ([`Error::AuthenticationFailed`]): that is how a wrong passphrase shows.
//! - Six passes of one AES block per 8-byte half-block: serial and meant for keys, never
//!   on a data path.

use crate::block::BLOCK;
use crate::error::InputError;
use crate::modes::Ecb;
use crate::Error;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, Zeroizing};

/// RFC 3394 section 2.2.3.1, the default initial value.
const IV: [u8; 8] = [0xa6; 8];

/// Checks the length of wrapped (`wrapped`) or plain key data.
fn check(len: usize, wrapped: bool) -> Result<usize, Error> {
    let min = if wrapped { 24 } else { 16 };
    if len < min || !len.is_multiple_of(8) {
        return Err(Error::Input(InputError::Length {
            got: len,
            why: if wrapped {
                "aes key wrap: wrapped data is at least 24 bytes, a multiple of 8"
            } else {
                "aes key wrap: key data is at least 16 bytes, a multiple of 8"
            },
        }));
    }
    Ok(if wrapped { len / 8 - 1 } else { len / 8 })
}

/// Wraps `key` (16 bytes or more, a multiple of 8) under the AES key `kek`: `key.len() + 8`
/// bytes.
pub fn wrap(kek: &[u8], key: &[u8]) -> Result<Vec<u8>, Error> {
    let n = check(key.len(), false)?;
    let ecb = Ecb::new(kek)?;
    let mut a = IV;
    let mut r = Zeroizing::new(key.to_vec());
    let mut b = Zeroizing::new([0u8; BLOCK]);
    for j in 0..6u64 {
        for i in 0..n {
            b[..8].copy_from_slice(&a);
            b[8..].copy_from_slice(&r[i * 8..i * 8 + 8]);
            ecb.encrypt(&mut b[..])?;
            let t = (n as u64) * j + i as u64 + 1;
            a.copy_from_slice(&b[..8]);
            for (x, y) in a.iter_mut().zip(t.to_be_bytes()) {
                *x ^= y;
            }
            r[i * 8..i * 8 + 8].copy_from_slice(&b[8..]);
        }
    }
    let mut out = Vec::with_capacity(key.len() + 8);
    out.extend_from_slice(&a);
    out.extend_from_slice(&r);
    Ok(out)
}

/// Unwraps `wrapped` under the AES key `kek`: the key (`wrapped.len() - 8` bytes), or
/// [`Error::AuthenticationFailed`] when the integrity check fails (the wrong `kek`, or
/// damaged data).
pub fn unwrap(kek: &[u8], wrapped: &[u8]) -> Result<Zeroizing<Vec<u8>>, Error> {
    let n = check(wrapped.len(), true)?;
    let ecb = Ecb::new(kek)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(&wrapped[..8]);
    let mut r = Zeroizing::new(wrapped[8..].to_vec());
    let mut b = Zeroizing::new([0u8; BLOCK]);
    for j in (0..6u64).rev() {
        for i in (0..n).rev() {
            let t = (n as u64) * j + i as u64 + 1;
            for (x, y) in a.iter_mut().zip(t.to_be_bytes()) {
                *x ^= y;
            }
            b[..8].copy_from_slice(&a);
            b[8..].copy_from_slice(&r[i * 8..i * 8 + 8]);
            ecb.decrypt(&mut b[..])?;
            a.copy_from_slice(&b[..8]);
            r[i * 8..i * 8 + 8].copy_from_slice(&b[8..]);
        }
    }
    let ok = bool::from(a.ct_eq(&IV));
    a.zeroize();
    if !ok {
        return Err(Error::AuthenticationFailed);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// RFC 3394 section 4: the six published vectors (KEK size, key size, wrapped).
    const RFC3394: [(&str, &str, &str); 6] = [
        (
            "000102030405060708090A0B0C0D0E0F",
            "00112233445566778899AABBCCDDEEFF",
            "1FA68B0A8112B447AEF34BD8FB5A7B829D3E862371D2CFE5",
        ),
        (
            "000102030405060708090A0B0C0D0E0F1011121314151617",
            "00112233445566778899AABBCCDDEEFF",
            "96778B25AE6CA435F92B5B97C050AED2468AB8A17AD84E5D",
        ),
        (
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "00112233445566778899AABBCCDDEEFF",
            "64E8C3F9CE0F5BA263E9777905818A2A93C8191E7D6E8AE7",
        ),
        (
            "000102030405060708090A0B0C0D0E0F1011121314151617",
            "00112233445566778899AABBCCDDEEFF0001020304050607",
            "031D33264E15D33268F24EC260743EDCE1C6C7DDEE725A936BA814915C6762D2",
        ),
        (
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "00112233445566778899AABBCCDDEEFF0001020304050607",
            "A8F9BC1612C68B3FF6E6F4FBE30E71E4769C8B80A32CB8958CD5D17D6B254DA1",
        ),
        (
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F",
            "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21",
        ),
    ];

    #[test]
    fn rfc3394_vectors_wrap_and_unwrap() {
        for (kek, key, wrapped) in RFC3394 {
            assert_eq!(wrap(&h(kek), &h(key)).unwrap(), h(wrapped), "wrap {kek}");
            assert_eq!(
                &unwrap(&h(kek), &h(wrapped)).unwrap()[..],
                &h(key)[..],
                "unwrap {kek}"
            );
        }
    }

    #[test]
    fn a_wrong_kek_or_damaged_data_fails_the_integrity_check() {
        let (kek, _, wrapped) = RFC3394[0];
        let mut other = h(kek);
        other[0] ^= 1;
        assert!(matches!(
            unwrap(&other, &h(wrapped)),
            Err(Error::AuthenticationFailed)
        ));
        let mut bad = h(wrapped);
        bad[23] ^= 0x80;
        assert!(matches!(
            unwrap(&h(kek), &bad),
            Err(Error::AuthenticationFailed)
        ));
    }

    #[test]
    fn lengths_that_are_no_wrapped_key_are_refused() {
        let kek = [7u8; 16];
        for len in [0, 8, 16, 23, 25, 31] {
            assert!(
                matches!(unwrap(&kek, &vec![0; len]), Err(Error::Input(_))),
                "{len}"
            );
        }
        assert!(matches!(wrap(&kek, &[0; 8]), Err(Error::Input(_))));
        assert!(matches!(unwrap(&[0; 15], &[0; 24]), Err(Error::Key(_))));
    }
}
