//! CBC on the soft backend. Decryption runs four blocks at once; encryption of one chain is
//! serial by definition, but independent sectors are interleaved four at a time, one per
//! lane.

use super::{xor_into, Keys, LANES};
use crate::block::Block;
use crate::buf::InOut;

pub(super) fn encrypt(k: &Keys, iv: &mut Block, mut data: InOut<'_>) {
    let mut buf = [0u8; 64];
    for off in (0..data.len()).step_by(16) {
        data.load(off, &mut buf[..16]);
        xor_into(&mut buf[..16], iv);
        k.encrypt4(&mut buf);
        iv.copy_from_slice(&buf[..16]);
        data.store(off, &buf[..16]);
    }
}

pub(super) fn decrypt(k: &Keys, iv: &mut Block, mut data: InOut<'_>) {
    let mut ct = [0u8; 64];
    let mut off = 0;
    while off < data.len() {
        let n = (data.len() - off).min(64);
        data.load(off, &mut ct[..n]);
        let mut pt = ct;
        k.decrypt4(&mut pt);
        xor_into(&mut pt[..16], iv);
        xor_into(&mut pt[16..n], &ct[..n - 16]);
        iv.copy_from_slice(&ct[n - 16..n]);
        data.store(off, &pt[..n]);
        off += n;
    }
}

/// Four sectors at a time, block `j` of each sector in one lane.
pub(super) fn encrypt_sectors(k: &Keys, ivs: &[Block], mut data: InOut<'_>) {
    if ivs.is_empty() {
        return;
    }
    let size = data.len() / ivs.len();
    for (group, group_ivs) in ivs.chunks(LANES).enumerate() {
        let first = group * LANES;
        let mut chain: [Block; LANES] = [[0; 16]; LANES];
        chain[..group_ivs.len()].copy_from_slice(group_ivs);
        let mut buf = [0u8; 64];
        for block in (0..size).step_by(16) {
            for (lane, iv) in chain.iter().enumerate().take(group_ivs.len()) {
                let at = (first + lane) * size + block;
                let b = &mut buf[16 * lane..16 * lane + 16];
                data.load(at, b);
                xor_into(b, iv);
            }
            k.encrypt4(&mut buf);
            for (lane, iv) in chain.iter_mut().enumerate().take(group_ivs.len()) {
                let at = (first + lane) * size + block;
                let b = &buf[16 * lane..16 * lane + 16];
                iv.copy_from_slice(b);
                data.store(at, b);
            }
        }
    }
}
