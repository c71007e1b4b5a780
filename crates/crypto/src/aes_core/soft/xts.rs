//! XTS over whole blocks on the soft backend: four blocks of a data unit at a time.

use super::{xor_into, Keys};
use crate::aes_core::xts_mul_alpha;
use crate::block::Block;
use crate::buf::InOut;

pub(super) fn crypt(k: &Keys, tweaks: &[Block], mut data: InOut<'_>, decrypt: bool) {
    if tweaks.is_empty() {
        return;
    }
    let unit = data.len() / tweaks.len();
    let mut buf = [0u8; 64];
    let mut tw = [0u8; 64];
    for (u, tweak) in tweaks.iter().enumerate() {
        let mut t = u128::from_le_bytes(*tweak);
        let mut off = 0;
        while off < unit {
            let n = (unit - off).min(64);
            for lane in 0..n / 16 {
                tw[16 * lane..16 * lane + 16].copy_from_slice(&t.to_le_bytes());
                t = xts_mul_alpha(t);
            }
            data.load(u * unit + off, &mut buf[..n]);
            xor_into(&mut buf[..n], &tw[..n]);
            if decrypt {
                k.decrypt4(&mut buf);
            } else {
                k.encrypt4(&mut buf);
            }
            xor_into(&mut buf[..n], &tw[..n]);
            data.store(u * unit + off, &buf[..n]);
            off += n;
        }
    }
}
