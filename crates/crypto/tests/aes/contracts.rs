//! Contracts every backend keeps: bulk equals block by block (101 blocks: no multiple of
//! any parallel width), every backend equals soft at every block count around the
//! parallel widths (4, 8, 12, 16 blocks) and for 1 to 17 sectors, and every refusal comes
//! with the right error and leaves the output buffer untouched.

use crate::differential::rng;
use crate::harness::backends;
use rand::{Rng, RngCore};
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::KeyError;
use sectorcrypt_crypto::{
    aes::{Cbc, Ctr, Ecb, Xts},
    dmcrypt::{CipherMode, CipherSpec, SectorCipher, SectorLayout},
    Backend, Error, Mode,
};

const BLOCKS: usize = 101;

#[test]
fn bulk_equals_block_by_block() {
    crate::harness::each_width(bulk_equals_block_by_block_under_each_width);
}

fn bulk_equals_block_by_block_under_each_width() {
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
        for (i, s) in bulk.chunks_exact_mut(512).enumerate() {
            let mut t = [0u8; 16];
            t[..8].copy_from_slice(&(1000 + i as u64).to_le_bytes());
            x.decrypt(&t, s).unwrap();
        }
        let mut back = data.clone();
        sc.decrypt(1000, &mut back).unwrap();
        assert_eq!(bulk, back, "xts sector decrypt vs units on {b}");
    }
}

/// Runs the mode `m` (a fresh key) one way over `d`.
fn mode<M: Mode>(m: Result<M, Error>, encrypt: bool, iv: &[u8], d: &mut [u8]) {
    m.unwrap().apply(encrypt, iv, d).unwrap()
}

#[test]
fn every_backend_equals_soft() {
    crate::harness::each_width(every_backend_equals_soft_under_each_width);
}

fn every_backend_equals_soft_under_each_width() {
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
            // Each mode through the `Mode` trait (which the trait tests check against the
            // types' own methods): (encrypt, iv).
            pair(&|be, d| mode(Ecb::with_backend(&key[..32], be), true, &[], d));
            pair(&|be, d| mode(Ecb::with_backend(&key[..16], be), false, &[], d));
            pair(&|be, d| mode(Cbc::with_backend(&key[..32], be), true, &iv, d));
            pair(&|be, d| mode(Cbc::with_backend(&key[..24], be), false, &iv, d));
            pair(&|be, d| {
                Ctr::with_backend(&key[..32], be)
                    .unwrap()
                    .apply_keystream(&iv, 3, d)
            });
            if n > 0 {
                pair(&|be, d| mode(Xts::with_backend(&key, be), true, &iv, d));
                pair(&|be, d| mode(Xts::with_backend(&key[..32], be), false, &iv, d));
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
        for spec in CipherSpec::ALL.iter().filter(|s| s.starts_with("aes-")) {
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

/// `f` must fail with `want` and leave `buf` as it was.
fn refused(
    what: &str,
    want: &Error,
    buf: &mut [u8],
    f: impl FnOnce(&mut [u8]) -> Result<(), Error>,
) {
    let before = buf.to_vec();
    match f(buf) {
        Err(e) => assert_eq!(&e, want, "{what}"),
        Ok(()) => panic!("{what}: accepted, expected {want:?}"),
    }
    assert!(buf == before.as_slice(), "{what}: output written on error");
}

fn partial_blocks(len: usize) -> Error {
    Error::Input(InputError::Length {
        got: len,
        why: "must be a multiple of 16 bytes",
    })
}

#[test]
fn partial_blocks_are_refused_untouched() {
    crate::harness::each_width(partial_blocks_are_refused_untouched_under_each_width);
}

fn partial_blocks_are_refused_untouched_under_each_width() {
    for b in backends() {
        let key: Vec<u8> = (1..=32).collect();
        let ecb = Ecb::with_backend(&key, b).unwrap();
        let cbc = Cbc::with_backend(&key[..24], b).unwrap();
        let iv = [0x42u8; 16];
        for len in [1usize, 8, 15, 17, 31, 33, 100, 4095, 4097] {
            let src = vec![0x11u8; len];
            let mut buf = vec![0x77u8; len];
            let want = partial_blocks(len);
            let at = |m: &str| format!("{m} of {len} bytes on {b}");
            refused(&at("ecb encrypt"), &want, &mut buf, |d| ecb.encrypt(d));
            refused(&at("ecb decrypt"), &want, &mut buf, |d| ecb.decrypt(d));
            refused(&at("ecb encrypt_to"), &want, &mut buf, |d| {
                ecb.encrypt_to(&src, d)
            });
            refused(&at("ecb decrypt_to"), &want, &mut buf, |d| {
                ecb.decrypt_to(&src, d)
            });
            refused(&at("cbc encrypt"), &want, &mut buf, |d| cbc.encrypt(&iv, d));
            refused(&at("cbc decrypt"), &want, &mut buf, |d| cbc.decrypt(&iv, d));
            refused(&at("cbc encrypt_to"), &want, &mut buf, |d| {
                cbc.encrypt_to(&iv, &src, d)
            });
            refused(&at("cbc decrypt_to"), &want, &mut buf, |d| {
                cbc.decrypt_to(&iv, &src, d)
            });
        }
    }
}

#[test]
fn length_mismatch_is_refused_untouched() {
    crate::harness::each_width(length_mismatch_is_refused_untouched_under_each_width);
}

fn length_mismatch_is_refused_untouched_under_each_width() {
    for b in backends() {
        let key: Vec<u8> = (1..=64).collect();
        let ecb = Ecb::with_backend(&key[..16], b).unwrap();
        let cbc = Cbc::with_backend(&key[..32], b).unwrap();
        let ctr = Ctr::with_backend(&key[..32], b).unwrap();
        let xts = Xts::with_backend(&key, b).unwrap();
        let spec: CipherSpec = "aes-xts-plain64".parse().unwrap();
        let sc = SectorCipher::with_backend(spec, &key, SectorLayout::new(512, false).unwrap(), b)
            .unwrap();
        let iv = [9u8; 16];
        let sizes: [(usize, usize); 5] = [(32, 48), (48, 32), (16, 0), (512, 1024), (1024, 512)];
        for (s, d) in sizes {
            let src = vec![0x33u8; s];
            let mut dst = vec![0x55u8; d];
            let want = Error::Input(InputError::LengthMismatch { src: s, dst: d });
            let at = |m: &str| format!("{m} {s} -> {d} bytes on {b}");
            refused(&at("ecb encrypt_to"), &want, &mut dst, |o| {
                ecb.encrypt_to(&src, o)
            });
            refused(&at("ecb decrypt_to"), &want, &mut dst, |o| {
                ecb.decrypt_to(&src, o)
            });
            refused(&at("cbc encrypt_to"), &want, &mut dst, |o| {
                cbc.encrypt_to(&iv, &src, o)
            });
            refused(&at("cbc decrypt_to"), &want, &mut dst, |o| {
                cbc.decrypt_to(&iv, &src, o)
            });
            refused(&at("ctr apply_keystream_to"), &want, &mut dst, |o| {
                ctr.apply_keystream_to(&iv, 5, &src, o)
            });
            refused(&at("xts encrypt_to"), &want, &mut dst, |o| {
                xts.encrypt_to(&iv, &src, o)
            });
            refused(&at("xts decrypt_to"), &want, &mut dst, |o| {
                xts.decrypt_to(&iv, &src, o)
            });
            refused(&at("sectors encrypt_to"), &want, &mut dst, |o| {
                sc.encrypt_to(7, &src, o)
            });
            refused(&at("sectors decrypt_to"), &want, &mut dst, |o| {
                sc.decrypt_to(7, &src, o)
            });
        }
    }
}

#[test]
fn xts_unit_sizes_are_checked() {
    crate::harness::each_width(xts_unit_sizes_are_checked_under_each_width);
}

fn xts_unit_sizes_are_checked_under_each_width() {
    for b in backends() {
        let key: Vec<u8> = (0..48).map(|i| i * 3).collect();
        let x = Xts::with_backend(&key, b).unwrap();
        let t = [1u8; 16];
        for len in [0usize, 1, 8, 15] {
            let want = Error::Input(InputError::Length {
                got: len,
                why: "an xts data unit needs at least 16 bytes",
            });
            let src = vec![0u8; len];
            let mut buf = vec![0x66u8; len];
            refused(&format!("xts encrypt {len} on {b}"), &want, &mut buf, |d| {
                x.encrypt(&t, d)
            });
            refused(&format!("xts decrypt {len} on {b}"), &want, &mut buf, |d| {
                x.decrypt(&t, d)
            });
            refused(
                &format!("xts encrypt_to {len} on {b}"),
                &want,
                &mut buf,
                |d| x.encrypt_to(&t, &src, d),
            );
        }
        // IEEE 1619-2007 section 5.1: at most 2^20 blocks per data unit.
        let max = 16usize << 20;
        let mut big = vec![0u8; max + 1];
        assert!(
            matches!(x.encrypt(&t, &mut big), Err(Error::Input(InputError::Length { got, .. })) if got == max + 1),
            "2^20 blocks + 1 byte on {b}"
        );
        assert!(big.iter().all(|&v| v == 0), "written on error on {b}");
        let mut at_max = vec![0u8; max];
        x.encrypt(&t, &mut at_max).unwrap();
        x.decrypt(&t, &mut at_max).unwrap();
        assert!(
            at_max.iter().all(|&v| v == 0),
            "2^20 blocks round trip on {b}"
        );
    }
}

#[test]
fn wrong_key_lengths_are_refused() {
    crate::harness::each_width(wrong_key_lengths_are_refused_under_each_width);
}

fn wrong_key_lengths_are_refused_under_each_width() {
    for b in backends() {
        for len in [0usize, 1, 8, 15, 17, 20, 23, 25, 31, 33, 48, 64] {
            let key = vec![0xa5u8; len];
            let is_len = |r: Result<(), Error>| matches!(r, Err(Error::Key(KeyError::Length { got, .. })) if got == len);
            assert!(
                is_len(Ecb::with_backend(&key, b).map(drop)),
                "ecb {len} on {b}"
            );
            assert!(
                is_len(Cbc::with_backend(&key, b).map(drop)),
                "cbc {len} on {b}"
            );
            assert!(
                is_len(Ctr::with_backend(&key, b).map(drop)),
                "ctr {len} on {b}"
            );
        }
        for len in [0usize, 16, 24, 31, 33, 40, 47, 49, 63, 65, 96, 128] {
            let key: Vec<u8> = (0..len as u32).map(|i| i as u8).collect();
            assert!(
                matches!(Xts::with_backend(&key, b), Err(Error::Key(KeyError::Length { got, .. })) if got == len),
                "xts {len} on {b}"
            );
        }
        for len in [32usize, 48, 64] {
            let half: Vec<u8> = (0..len as u8 / 2).collect();
            let key = [half.clone(), half].concat();
            assert_eq!(
                Xts::with_backend(&key, b).unwrap_err(),
                Error::Key(KeyError::XtsEqualHalves),
                "xts {len} equal halves on {b}"
            );
            let mut other = key.clone();
            other[len - 1] ^= 1;
            assert!(Xts::with_backend(&other, b).is_ok(), "xts {len} on {b}");
        }
        for len in [16usize, 24, 32] {
            assert!(Ecb::with_backend(&vec![1u8; len], b).is_ok());
            assert!(Cbc::with_backend(&vec![1u8; len], b).is_ok());
            assert!(Ctr::with_backend(&vec![1u8; len], b).is_ok());
        }
    }
}
