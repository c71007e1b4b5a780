//! PLACEHOLDER while the vaes kernels are written: delegates to the soft backend.

use crate::aes::{AesKernels, Block, RoundKeys};
use crate::buf::InOut;
use crate::Backend;

pub(crate) struct Keys(crate::aes::soft::Keys);

impl Keys {
    pub(crate) fn new(rk: &RoundKeys) -> Keys {
        Keys(crate::aes::soft::Keys::new(rk))
    }
}

impl AesKernels for Keys {
    fn backend(&self) -> Backend {
        Backend::Vaes
    }
    fn ecb_encrypt(&self, d: InOut<'_>) { self.0.ecb_encrypt(d) }
    fn ecb_decrypt(&self, d: InOut<'_>) { self.0.ecb_decrypt(d) }
    fn cbc_encrypt(&self, iv: &mut Block, d: InOut<'_>) { self.0.cbc_encrypt(iv, d) }
    fn cbc_decrypt(&self, iv: &mut Block, d: InOut<'_>) { self.0.cbc_decrypt(iv, d) }
    fn ctr(&self, c: &mut u128, d: InOut<'_>) { self.0.ctr(c, d) }
    fn xts_encrypt(&self, t: &[Block], d: InOut<'_>) { self.0.xts_encrypt(t, d) }
    fn xts_decrypt(&self, t: &[Block], d: InOut<'_>) { self.0.xts_decrypt(t, d) }
}
