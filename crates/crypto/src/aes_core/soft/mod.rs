//! The portable AES backend: bitsliced, constant-time, no `unsafe`. It is the reference the
//! SIMD backends are tested against and the fallback on CPUs without AES instructions.
//!
//! Four blocks are processed at once in eight 64-bit bit planes ([`bitslice`]); the modes
//! feed it whole groups of four blocks wherever the mode allows (ECB, CTR, XTS, CBC
//! decryption, and CBC encryption of four independent sectors at a time).
//!
//! Constant time: the bitsliced circuit computes the S-box with logic operations instead of
//! looking it up, so no memory address and no branch depends on the key or the data; the
//! XTS tweak doubling is branch-free; the only data-dependent control flow is on public
//! lengths. Speed is a few tens of MB/s: it exists to be right everywhere, not fast.
#![forbid(unsafe_code)]

mod bitslice;
mod cbc;
mod ctr;
mod ecb;
mod xts;

use super::{AesKernels, Block, RoundKeys};
use crate::aes_core::Backend;
use crate::buf::InOut;
use bitslice::State;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Four-block lanes processed by one call of the bitsliced cipher.
const LANES: usize = 4;

/// The round keys, each packed into bit planes and replicated over the four lanes.
#[derive(Zeroize, ZeroizeOnDrop)]
pub(crate) struct Keys {
    rk: [State; 15],
    rounds: usize,
}

impl Keys {
    pub(crate) fn new(rk: &RoundKeys) -> Keys {
        let mut packed = [[0u64; 8]; 15];
        for (p, key) in packed.iter_mut().zip(rk.rk.iter()).take(rk.rounds + 1) {
            let mut four = [0u8; 64];
            for lane in 0..LANES {
                four[16 * lane..16 * lane + 16].copy_from_slice(key);
            }
            *p = bitslice::pack(&four);
            four.zeroize();
        }
        Keys {
            rk: packed,
            rounds: rk.rounds,
        }
    }

    /// Encrypts four blocks.
    fn encrypt4(&self, blocks: &mut [u8; 64]) {
        let mut s = bitslice::pack(blocks);
        bitslice::encrypt(&self.rk, self.rounds, &mut s);
        *blocks = bitslice::unpack(&s);
    }

    /// Decrypts four blocks.
    fn decrypt4(&self, blocks: &mut [u8; 64]) {
        let mut s = bitslice::pack(blocks);
        bitslice::decrypt(&self.rk, self.rounds, &mut s);
        *blocks = bitslice::unpack(&s);
    }
}

/// SubWord of the key schedule, on the constant-time circuit.
pub(crate) fn sub_word(w: [u8; 4]) -> [u8; 4] {
    let mut b = [0u8; 64];
    b[..4].copy_from_slice(&w);
    let mut s = bitslice::pack(&b);
    bitslice::sub_bytes(&mut s);
    let out = bitslice::unpack(&s);
    [out[0], out[1], out[2], out[3]]
}

fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

impl AesKernels for Keys {
    fn backend(&self) -> Backend {
        Backend::Soft
    }
    fn ecb_encrypt(&self, data: InOut<'_>) {
        ecb::encrypt(self, data)
    }
    fn ecb_decrypt(&self, data: InOut<'_>) {
        ecb::decrypt(self, data)
    }
    fn cbc_encrypt(&self, iv: &mut Block, data: InOut<'_>) {
        cbc::encrypt(self, iv, data)
    }
    fn cbc_decrypt(&self, iv: &mut Block, data: InOut<'_>) {
        cbc::decrypt(self, iv, data)
    }
    fn cbc_encrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        cbc::encrypt_sectors(self, ivs, data)
    }
    fn ctr(&self, counter: &mut u128, data: InOut<'_>) {
        ctr::apply(self, counter, data)
    }
    fn xts_encrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        xts::crypt(self, tweaks, data, false)
    }
    fn xts_decrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        xts::crypt(self, tweaks, data, true)
    }
}
