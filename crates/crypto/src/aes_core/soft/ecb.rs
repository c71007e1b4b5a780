//! ECB on the soft backend: groups of four blocks.

use super::Keys;
use crate::buf::InOut;

pub(super) fn encrypt(k: &Keys, data: InOut<'_>) {
    run(data, |b| k.encrypt4(b))
}

pub(super) fn decrypt(k: &Keys, data: InOut<'_>) {
    run(data, |b| k.decrypt4(b))
}

fn run(mut data: InOut<'_>, f: impl Fn(&mut [u8; 64])) {
    let mut buf = [0u8; 64];
    let mut off = 0;
    while off < data.len() {
        let n = (data.len() - off).min(64);
        data.load(off, &mut buf[..n]);
        f(&mut buf);
        data.store(off, &buf[..n]);
        off += n;
    }
}
