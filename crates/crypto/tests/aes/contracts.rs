//! Contracts every backend keeps: bulk equals block by block (101 blocks: no multiple of
//! any parallel width), every backend equals soft at every block count around the
//! parallel widths (4, 8, 16 blocks) and for 1 to 17 sectors.

use crate::differential::rng;
use crate::harness::backends;
use rand::{Rng, RngCore};
use sectorcrypt_crypto::{
    Backend, Cbc, CipherMode, CipherSpec, Ctr, Ecb, SectorCipher, SectorLayout, Xts,
};

const BLOCKS: usize = 101;

#[test]
fn bulk_equals_block_by_block() {
    let mut rng = rng("bulk_equals_block_by_block");
    for b in backends() {
        let mut key = [0u8; 64];
        rng.fill_bytes(&mut key);
        let iv: [u8; 16] = rng.gen();
        let mut pt = vec![0u8; BLOCKS * 16];
        rng.fill_bytes(&mut pt);

        let ecb = Ecb::with_backend(&key[..32], b).unwrap();
        let mut bulk = pt.clone();
        ecb.encrypt(&mut bulk).unwrap();
        let mut one = pt.clone();
        one.chunks_exact_mut(16)
            .for_each(|c| ecb.encrypt(c).unwrap());
        assert_eq!(bulk, one, "ecb on {b}");

        let cbc = Cbc::with_backend(&key[..24], b).unwrap();
        let mut bulk = pt.clone();
        cbc.encrypt(&iv, &mut bulk).unwrap();
        let mut one = pt.clone();
        let mut chain = iv;
        for c in one.chunks_exact_mut(16) {
            cbc.encrypt(&chain, c).unwrap();
            chain.copy_from_slice(c);
        }
        assert_eq!(bulk, one, "cbc encrypt on {b}");
        let mut back = bulk.clone();
        cbc.decrypt(&iv, &mut back).unwrap();
        let mut chain = iv;
        for (i, c) in bulk.chunks_exact_mut(16).enumerate() {
            let saved: [u8; 16] = c.try_into().unwrap();
            cbc.decrypt(&chain, c).unwrap();
            chain = saved;
            assert_eq!(c, &pt[16 * i..16 * i + 16], "cbc decrypt block {i} on {b}");
        }
        assert_eq!(back, pt, "cbc decrypt on {b}");

        let ctr = Ctr::with_backend(&key[..16], b).unwrap();
        let mut bulk = pt.clone();
        ctr.apply_keystream(&iv, 0, &mut bulk);
        let mut pieces = pt.clone();
        let mut off = 0;
        while off < pieces.len() {
            let n = rng.gen_range(1..=40).min(pieces.len() - off);
            ctr.apply_keystream(&iv, off as u64, &mut pieces[off..off + n]);
            off += n;
        }
        assert_eq!(bulk, pieces, "ctr in random pieces on {b}");

        // XTS: one call over many 512-byte sectors equals one call per sector.
        let spec: CipherSpec = "aes-xts-plain64".parse().unwrap();
        let lay = SectorLayout::new(512, false).unwrap();
        let sc = SectorCipher::with_backend(spec, &key, lay, b).unwrap();
        let x = Xts::with_backend(&key, b).unwrap();
        let mut data = vec![0u8; 512 * 13];
        rng.fill_bytes(&mut data);
        let mut bulk = data.clone();
        sc.encrypt(1000, &mut bulk).unwrap();
        for (i, s) in data.chunks_exact_mut(512).enumerate() {
            let mut t = [0u8; 16];
            t[..8].copy_from_slice(&(1000 + i as u64).to_le_bytes());
            x.encrypt(&t, s).unwrap();
        }
        assert_eq!(bulk, data, "xts sectors vs units on {b}");
    }
}

#[test]
fn every_backend_equals_soft() {
    let mut rng = rng("every_backend_equals_soft");
    let mut key = [0u8; 64];
    rng.fill_bytes(&mut key);
    for b in backends().into_iter().filter(|&b| b != Backend::Soft) {
        for n in 0..=40usize {
            let len = n * 16;
            let mut data = vec![0u8; len + 7];
            rng.fill_bytes(&mut data);
            let inp = &data[7..];
            let iv: [u8; 16] = rng.gen();
            let pair = |f: &dyn Fn(Backend, &mut [u8])| {
                let (mut a, mut s) = (inp.to_vec(), inp.to_vec());
                f(b, &mut a);
                f(Backend::Soft, &mut s);
                assert_eq!(a, s, "{n} blocks on {b}");
            };
            pair(&|be, d| {
                Ecb::with_backend(&key[..32], be)
                    .unwrap()
                    .encrypt(d)
                    .unwrap()
            });
            pair(&|be, d| {
                Ecb::with_backend(&key[..16], be)
                    .unwrap()
                    .decrypt(d)
                    .unwrap()
            });
            pair(&|be, d| {
                Cbc::with_backend(&key[..32], be)
                    .unwrap()
                    .encrypt(&iv, d)
                    .unwrap()
            });
            pair(&|be, d| {
                Cbc::with_backend(&key[..24], be)
                    .unwrap()
                    .decrypt(&iv, d)
                    .unwrap()
            });
            pair(&|be, d| {
                Ctr::with_backend(&key[..32], be)
                    .unwrap()
                    .apply_keystream(&iv, 3, d)
            });
            if n > 0 {
                pair(&|be, d| {
                    Xts::with_backend(&key, be)
                        .unwrap()
                        .encrypt(&iv, d)
                        .unwrap()
                });
                pair(&|be, d| {
                    Xts::with_backend(&key[..32], be)
                        .unwrap()
                        .decrypt(&iv, d)
                        .unwrap()
                });
                // With stealing: a partial last block.
                let cut = &inp[..len - 5 * usize::from(n > 1)];
                let (mut a, mut s) = (cut.to_vec(), cut.to_vec());
                Xts::with_backend(&key, b)
                    .unwrap()
                    .encrypt(&iv, &mut a)
                    .unwrap();
                Xts::with_backend(&key, Backend::Soft)
                    .unwrap()
                    .encrypt(&iv, &mut s)
                    .unwrap();
                assert_eq!(a, s, "xts {} bytes on {b}", cut.len());
            }
        }
        for spec in CipherSpec::ALL {
            let spec: CipherSpec = spec.parse().unwrap();
            let k = if spec.mode == CipherMode::Xts {
                &key[..]
            } else {
                &key[..32]
            };
            for size in [512usize, 4096] {
                let lay = SectorLayout::new(size, false).unwrap();
                for count in 1..=17usize {
                    let mut data = vec![0u8; size * count];
                    rng.fill_bytes(&mut data);
                    let first = rng.gen::<u32>() as u64;
                    let (mut a, mut s) = (data.clone(), data.clone());
                    SectorCipher::with_backend(spec, k, lay, b)
                        .unwrap()
                        .encrypt(first, &mut a)
                        .unwrap();
                    SectorCipher::with_backend(spec, k, lay, Backend::Soft)
                        .unwrap()
                        .encrypt(first, &mut s)
                        .unwrap();
                    assert_eq!(a, s, "{spec} {count}x{size} encrypt on {b}");
                    SectorCipher::with_backend(spec, k, lay, b)
                        .unwrap()
                        .decrypt(first, &mut a)
                        .unwrap();
                    assert_eq!(a, data, "{spec} {count}x{size} decrypt on {b}");
                }
            }
        }
    }
}
