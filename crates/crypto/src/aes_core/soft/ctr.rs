//! CTR on the soft backend: four counter blocks per call of the cipher.

use super::{xor_into, Keys};
use crate::buf::InOut;

pub(super) fn apply(k: &Keys, counter: &mut u128, mut data: InOut<'_>) {
    let mut ks = [0u8; 64];
    let mut buf = [0u8; 64];
    let mut off = 0;
    while off < data.len() {
        let n = (data.len() - off).min(64);
        for lane in 0..4 {
            let c = counter.wrapping_add(lane as u128);
            ks[16 * lane..16 * lane + 16].copy_from_slice(&c.to_be_bytes());
        }
        k.encrypt4(&mut ks);
        data.load(off, &mut buf[..n]);
        xor_into(&mut buf[..n], &ks[..n]);
        data.store(off, &buf[..n]);
        *counter = counter.wrapping_add((n / 16) as u128);
        off += n;
    }
}
