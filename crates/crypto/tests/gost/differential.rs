//! Differential tests: every backend against `soft`, for every mode, at every boundary:
//! all lengths 0..=129 bytes, the parallel widths (a 32-block group = 256 bytes, the
//! 128-block iteration = 1 KiB, the modes' 4 KiB chunk) plus and minus a block or a byte,
//! 1023..=1025 bytes for key meshing, and random lengths up to ~4850 bytes; in place and
//! out of place agree.

use crate::harness::{backends, bytes};
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::{gost89, magma, Error, GostBackend};

fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=129).collect();
    for w in [256usize, 512] {
        v.extend([w - 8, w - 1, w, w + 1, w + 8]);
    }
    v.extend([1016, 1023, 1024, 1025, 1032, 2047, 2048, 2049, 3072, 3080]);
    // The 4 KiB chunk of the modes and two of them.
    v.extend([4088, 4095, 4096, 4097, 4104, 8192, 8200]);
    let r = bytes(40, 99);
    v.extend(
        r.chunks(2)
            .map(|c| (c[0] as usize) * 19 + c[1] as usize % 7),
    );
    v
}

/// Runs `f(backend, input) -> output` on soft and on every other backend and compares.
fn compare(what: &str, whole_blocks: bool, f: impl Fn(GostBackend, &[u8]) -> Vec<u8>) {
    let tested = backends();
    for len in lengths() {
        if whole_blocks && len % 8 != 0 {
            continue;
        }
        let input = bytes(len, len as u64 + 7);
        let want = f(GostBackend::Soft, &input);
        for &b in &tested[1..] {
            assert_eq!(f(b, &input), want, "{what}: len {len} backend {b}");
        }
    }
    if tested.len() == 1 {
        eprintln!("{what}: only soft is usable here; nothing to compare (skipped)");
    }
}

const KEY: [u8; 32] = [
    0x8a, 0x51, 0x3c, 0x07, 0xf2, 0x19, 0x66, 0xe0, 0x4d, 0x90, 0x2b, 0xc8, 0x13, 0x7e, 0xa5, 0x36,
    0xd9, 0x02, 0x6f, 0xbb, 0x48, 0x95, 0x1c, 0xe7, 0x70, 0x2a, 0xcd, 0x31, 0x84, 0x5f, 0xf6, 0x0b,
];

#[test]
fn gost89_modes_match_soft() {
    for mesh in [false, true] {
        for sb in [Sbox::CryptoProA, Sbox::Tc26Z, Sbox::GostR3411_94Test] {
            compare("gost89-ecb", true, |b, x| {
                let c = gost89::Ecb::with_backend(&KEY, sb, mesh, b).unwrap();
                let mut o = vec![0u8; x.len()];
                c.encrypt_to(x, &mut o).unwrap();
                let mut back = o.clone();
                c.decrypt(&mut back).unwrap();
                assert_eq!(back, x);
                o
            });
            compare("gost89-cnt", false, |b, x| {
                let c = gost89::Cnt::with_backend(&KEY, sb, mesh, b).unwrap();
                let mut o = x.to_vec();
                c.encrypt(&[0xfe; 8], &mut o).unwrap();
                let mut o2 = vec![0u8; x.len()];
                c.encrypt_to(&[0xfe; 8], x, &mut o2).unwrap();
                assert_eq!(o, o2);
                o
            });
            compare("gost89-cfb", false, |b, x| {
                let c = gost89::Cfb::with_backend(&KEY, sb, mesh, b).unwrap();
                let mut o = x.to_vec();
                c.encrypt(&[3; 8], &mut o).unwrap();
                let mut back = vec![0u8; x.len()];
                c.decrypt_to(&[3; 8], &o, &mut back).unwrap();
                assert_eq!(back, x);
                o
            });
            compare("gost89-cbc", true, |b, x| {
                let c = gost89::Cbc::with_backend(&KEY, sb, mesh, b).unwrap();
                let mut o = x.to_vec();
                c.encrypt(&[4; 8], &mut o).unwrap();
                let mut back = o.clone();
                c.decrypt(&[4; 8], &mut back).unwrap();
                assert_eq!(back, x);
                o
            });
            compare("gost89-mac", false, |b, x| {
                gost89::Mac::with_backend(&KEY, sb, mesh, b)
                    .unwrap()
                    .mac(x)
                    .to_vec()
            });
        }
    }
}

#[test]
fn magma_modes_match_soft() {
    compare("magma-ecb", true, |b, x| {
        let c = magma::Ecb::with_backend(&KEY, b).unwrap();
        let mut o = x.to_vec();
        c.encrypt(&mut o).unwrap();
        let mut back = o.clone();
        c.decrypt(&mut back).unwrap();
        assert_eq!(back, x);
        o
    });
    compare("magma-ctr", false, |b, x| {
        let c = magma::Ctr::with_backend(&KEY, b).unwrap();
        // Start near the 2^64 wrap of the counter.
        let mut o = x.to_vec();
        c.encrypt(&[0xff; 4], &mut o).unwrap();
        // Random access: the keystream at an offset equals the tail of the whole one.
        if x.len() > 11 {
            let mut part = x[11..].to_vec();
            c.apply_keystream(&[0xff; 4], 11, &mut part);
            assert_eq!(part, o[11..]);
        }
        o
    });
    for z in [1usize, 2, 3] {
        let iv = bytes(8 * z, z as u64);
        compare("magma-ofb", false, |b, x| {
            let mut o = x.to_vec();
            magma::Ofb::with_backend(&KEY, b)
                .unwrap()
                .encrypt(&iv, &mut o)
                .unwrap();
            o
        });
        compare("magma-cbc", true, |b, x| {
            let c = magma::Cbc::with_backend(&KEY, b).unwrap();
            let mut o = x.to_vec();
            c.encrypt(&iv, &mut o).unwrap();
            let mut back = o.clone();
            c.decrypt(&iv, &mut back).unwrap();
            assert_eq!(back, x);
            o
        });
        compare("magma-cfb", false, |b, x| {
            let c = magma::Cfb::with_backend(&KEY, b).unwrap();
            let mut o = x.to_vec();
            c.encrypt(&iv, &mut o).unwrap();
            let mut back = o.clone();
            c.decrypt(&iv, &mut back).unwrap();
            assert_eq!(back, x);
            o
        });
    }
    compare("magma-mac", false, |b, x| {
        magma::Mac::with_backend(&KEY, b).unwrap().mac(x).to_vec()
    });
    for section in [8usize, 16, 256, 1024] {
        compare("magma-ctr-acpkm", false, |b, x| {
            let mut o = x.to_vec();
            magma::CtrAcpkm::with_backend(&KEY, section, b)
                .unwrap()
                .encrypt(&[1, 2, 3, 4], &mut o)
                .unwrap();
            o
        });
    }
    compare("magma-mgm", false, |b, x| {
        let c = magma::Mgm::with_backend(&KEY, b).unwrap();
        let aad = &x[..x.len() / 3];
        let mut o = x[x.len() / 3..].to_vec();
        let mut tag = [0u8; 8];
        c.seal(&[0x12; 8], aad, &mut o, &mut tag).unwrap();
        let mut back = o.clone();
        c.open(&[0x12; 8], aad, &mut back, &tag).unwrap();
        assert_eq!(back, x[x.len() / 3..]);
        o.extend_from_slice(&tag);
        o
    });
}

/// The streaming CNT and CFB equal the one-shot calls for splits across the meshing
/// boundary.
#[test]
fn streams_equal_one_shot() {
    let msg = bytes(3000, 1);
    for b in backends() {
        let cnt = gost89::Cnt::with_backend(&KEY, Sbox::CryptoProA, true, b).unwrap();
        let mut want = msg.clone();
        cnt.encrypt(&[9; 8], &mut want).unwrap();
        for split in [1usize, 7, 8, 1023, 1024, 1025, 2999] {
            let mut got = msg.clone();
            let mut st = cnt.stream(&[9; 8]);
            let (x, y) = got.split_at_mut(split);
            st.apply(x);
            st.apply(y);
            assert_eq!(got, want, "cnt split {split} backend {b}");
        }
        let cfb = gost89::Cfb::with_backend(&KEY, Sbox::CryptoProA, true, b).unwrap();
        let mut want = msg.clone();
        cfb.encrypt(&[9; 8], &mut want).unwrap();
        for split in [8usize, 1016, 1024, 1032, 2992] {
            let mut got = msg.clone();
            let mut st = cfb.stream(&[9; 8]);
            let (x, y) = got.split_at_mut(split);
            st.encrypt(x).unwrap();
            st.encrypt(y).unwrap();
            assert_eq!(got, want, "cfb split {split} backend {b}");
        }
    }
}

/// Sector-interleaved CBC and CFB encryption equals one call per sector, on every backend,
/// with and without key meshing, for batch sizes around the interleave width.
#[test]
fn sectors_equal_one_call_per_sector() {
    for b in backends() {
        for mesh in [false, true] {
            let cbc = gost89::Cbc::with_backend(&KEY, Sbox::CryptoProA, mesh, b).unwrap();
            let cfb = gost89::Cfb::with_backend(&KEY, Sbox::CryptoProA, mesh, b).unwrap();
            for (count, size) in [
                (1usize, 8usize),
                (3, 2048),
                (127, 64),
                (129, 512),
                (40, 1032),
            ] {
                let data = bytes(count * size, (count * size) as u64);
                let ivs: Vec<[u8; 8]> =
                    (0..count as u64).map(|i| (i * 977).to_le_bytes()).collect();
                let mut want_cbc = data.clone();
                let mut want_cfb = data.clone();
                for (i, iv) in ivs.iter().enumerate() {
                    cbc.encrypt(iv, &mut want_cbc[i * size..(i + 1) * size])
                        .unwrap();
                    cfb.encrypt(iv, &mut want_cfb[i * size..(i + 1) * size])
                        .unwrap();
                }
                let mut got = data.clone();
                cbc.encrypt_sectors(&ivs, &mut got).unwrap();
                assert_eq!(got, want_cbc, "cbc {count}x{size} mesh {mesh} backend {b}");
                let mut got = data.clone();
                cfb.encrypt_sectors(&ivs, &mut got).unwrap();
                assert_eq!(got, want_cfb, "cfb {count}x{size} mesh {mesh} backend {b}");
            }
            if !mesh {
                let mcbc = magma::Cbc::with_backend(&KEY, b).unwrap();
                let mcfb = magma::Cfb::with_backend(&KEY, b).unwrap();
                let (count, size) = (130usize, 72usize);
                let data = bytes(count * size, 5);
                let ivs: Vec<[u8; 8]> = (0..count as u64).map(|i| (i * 31).to_be_bytes()).collect();
                let mut w1 = data.clone();
                let mut w2 = data.clone();
                for (i, iv) in ivs.iter().enumerate() {
                    mcbc.encrypt(iv, &mut w1[i * size..(i + 1) * size]).unwrap();
                    mcfb.encrypt(iv, &mut w2[i * size..(i + 1) * size]).unwrap();
                }
                let mut g1 = data.clone();
                mcbc.encrypt_sectors(&ivs, &mut g1).unwrap();
                assert_eq!(g1, w1, "magma cbc sectors backend {b}");
                let mut g2 = data.clone();
                mcfb.encrypt_sectors(&ivs, &mut g2).unwrap();
                assert_eq!(g2, w2, "magma cfb sectors backend {b}");
            }
            let mut odd = vec![0u8; 20];
            assert!(matches!(
                cbc.encrypt_sectors(&[[0; 8]; 2], &mut odd),
                Err(Error::Input(InputError::Length { .. }))
            ));
        }
    }
}
