//! One layer's block cipher under one key, in ECB over whole blocks: what the sectors' CBC
//! modes of the other ciphers than AES run on (`serpent-cbc-essiv:sha256`, ...). Each runs on
//! its family's selected backend (many blocks per step), as in the XTS layers.

use super::{camellia, kuznyechik, serpent, twofish, Layer};
use crate::error::KeyError;
use crate::Error;

enum Keyed {
    Serpent(Box<serpent::Serpent>),
    Camellia(Box<camellia::Camellia>),
    Twofish(Box<twofish::Twofish>),
    Kuznyechik(Box<kuznyechik::Kuznyechik>),
}

/// A block cipher of a cascade layer (not AES: the sectors run AES on the AES backends)
/// under one key of a length the cipher takes: 16, 24 or 32 bytes for Serpent, Twofish
/// and Camellia, 32 for Kuznyechik. `Debug` names the cipher only.
pub struct LayerCipher {
    layer: Layer,
    keyed: Keyed,
}

impl std::fmt::Debug for LayerCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerCipher")
            .field("layer", &self.layer.name())
            .finish_non_exhaustive()
    }
}

impl LayerCipher {
    /// `layer` under `key`, on the selected backend.
    pub fn new(layer: Layer, key: &[u8]) -> Result<LayerCipher, Error> {
        let keyed = match layer {
            Layer::Aes => {
                return Err(Error::Key(KeyError::Length {
                    what: "layer cipher",
                    got: key.len(),
                    expected: "a key of another cipher than aes (aes has its own backends)",
                }))
            }
            Layer::Serpent => Keyed::Serpent(Box::new(serpent::Serpent::new(key, None)?)),
            Layer::Camellia => Keyed::Camellia(Box::new(camellia::Camellia::new(key, None)?)),
            Layer::Twofish => Keyed::Twofish(Box::new(twofish::Twofish::new(key, None)?)),
            Layer::Kuznyechik => {
                Keyed::Kuznyechik(Box::new(kuznyechik::Kuznyechik::new(key, None)?))
            }
        };
        Ok(LayerCipher { layer, keyed })
    }

    /// The cipher.
    pub fn layer(&self) -> Layer {
        self.layer
    }

    /// Encrypts or decrypts every whole 16-byte block of `data` in place.
    pub fn ecb(&self, encrypt: bool, data: &mut [u8]) {
        match &self.keyed {
            Keyed::Serpent(c) => c.ecb(encrypt, data),
            Keyed::Camellia(c) => c.ecb(encrypt, data),
            Keyed::Twofish(c) => c.ecb(encrypt, data),
            Keyed::Kuznyechik(c) => c.ecb(encrypt, data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers through the wrapper, both ways: NESSIE's Serpent set 1 vector 0 with
    /// a 128-bit key, RFC 3713's 128-bit Camellia vector, the Twofish paper's first
    /// 128-bit vector (zero key, zero block) and GOST R 34.12-2015 A.1.
    #[test]
    fn known_answers() {
        let cases = [
            (
                Layer::Serpent,
                "80000000000000000000000000000000",
                "00000000000000000000000000000000",
                "264e5481eff42a4606abda06c0bfda3d",
            ),
            (
                Layer::Camellia,
                "0123456789abcdeffedcba9876543210",
                "0123456789abcdeffedcba9876543210",
                "67673138549669730857065648eabe43",
            ),
            (
                Layer::Twofish,
                "00000000000000000000000000000000",
                "00000000000000000000000000000000",
                "9f589f5cf6122c32b6bfec2f2ae8c35a",
            ),
            (
                Layer::Kuznyechik,
                "8899aabbccddeeff0011223344556677fedcba98765432100123456789abcdef",
                "1122334455667700ffeeddccbbaa9988",
                "7f679d90bebc24305a468d42b9d4edcd",
            ),
        ];
        for (layer, key, plain, cipher) in cases {
            let c = LayerCipher::new(layer, &hex::decode(key).unwrap()).unwrap();
            let mut b = hex::decode(plain).unwrap().repeat(3);
            c.ecb(true, &mut b);
            assert_eq!(hex::encode(&b[32..]), cipher, "{}", layer.name());
            c.ecb(false, &mut b);
            assert_eq!(hex::encode(&b[..16]), plain, "{}", layer.name());
        }
        assert!(LayerCipher::new(Layer::Aes, &[0; 16]).is_err());
        assert!(LayerCipher::new(Layer::Kuznyechik, &[0; 16]).is_err());
        assert!(LayerCipher::new(Layer::Serpent, &[0; 20]).is_err());
    }
}
