//! Differential tests: every backend against `soft`, for every mode, at every boundary:
//! all lengths 0..=129 bytes, the parallel widths (a 32-block avx2 group = 256 bytes, a
//! 16-block avx512 group = 128 bytes, the 128-block iteration of both = 1 KiB, the modes'
//! 4 KiB chunk) plus and minus a block or a byte,
//! 1023..=1025 bytes for key meshing, and random lengths up to ~4850 bytes; in place and
//! out of place agree.

use crate::harness::{backends, bytes, mode, round_trip};
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::{gost89, magma, Error, GostBackend};

fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=129).collect();
    for w in [256usize, 512, 384, 640, 1152] {
        v.extend([w - 8, w - 1, w, w + 1, w + 8]);
    }
    v.extend([
        135, 136, 137, 1016, 1023, 1024, 1025, 1032, 2047, 2048, 2049, 3072, 3080,
    ]);
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

/// Every GOST 28147-89 mode, with and without key meshing, for three S-box sets; block and
/// stream modes also in place against out of place and back ([`round_trip`]).
#[test]
fn gost89_modes_match_soft() {
    for mesh in [false, true] {
        for sb in [Sbox::CryptoProA, Sbox::Tc26Z, Sbox::GostR3411_94Test] {
            for (name, iv) in [
                ("gost89-ecb", &[][..]),
                ("gost89-cnt", &[0xfe; 8]),
                ("gost89-cfb", &[3; 8]),
                ("gost89-cbc", &[4; 8]),
            ] {
                let whole = name.ends_with("ecb") || name.ends_with("cbc");
                compare(name, whole, |b, x| {
                    round_trip(&*mode(name, &KEY, sb, mesh, b), iv, x)
                });
            }
            compare("gost89-mac", false, |b, x| {
                let mac = gost89::Mac::with_backend(&KEY, sb, mesh, b).unwrap();
                mac.mac(x).to_vec()
            });
        }
    }
}

/// Every Magma mode; OFB, CBC and CFB with registers of 1, 2 and 3 blocks, CTR-ACPKM with
/// four section sizes, CTR from near the 2^64 wrap of its counter and at an offset.
#[test]
fn magma_modes_match_soft() {
    let ecb = |b, x: &[u8]| round_trip(&*mode("magma-ecb", &KEY, Sbox::Tc26Z, false, b), &[], x);
    compare("magma-ecb", true, ecb);
    compare("magma-ctr", false, |b, x| {
        let c = magma::Ctr::with_backend(&KEY, b).unwrap();
        let o = round_trip(&c, &[0xff; 4], x);
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
        for name in ["magma-ofb", "magma-cbc", "magma-cfb"] {
            compare(name, name == "magma-cbc", |b, x| {
                round_trip(&*mode(name, &KEY, Sbox::Tc26Z, false, b), &iv, x)
            });
        }
    }
    compare("magma-mac", false, |b, x| {
        magma::Mac::with_backend(&KEY, b).unwrap().mac(x).to_vec()
    });
    for section in [8usize, 16, 256, 1024] {
        let name = format!("magma-ctr-acpkm/{section}");
        compare(&name, false, |b, x| {
            round_trip(&*mode(&name, &KEY, Sbox::Tc26Z, false, b), &[1, 2, 3, 4], x)
        });
    }
    compare("magma-mgm", false, |b, x| {
        let c = magma::Mgm::with_backend(&KEY, b).unwrap();
        let (aad, msg) = x.split_at(x.len() / 3);
        let mut o = msg.to_vec();
        let mut tag = [0u8; 8];
        c.seal(&[0x12; 8], aad, &mut o, &mut tag).unwrap();
        let mut back = vec![0u8; o.len()];
        c.open_to(&[0x12; 8], aad, &o, &mut back, &tag).unwrap();
        assert_eq!(back, msg);
        let mut back = o.clone();
        c.open(&[0x12; 8], aad, &mut back, &tag).unwrap();
        assert_eq!(back, msg);
        o.extend_from_slice(&tag);
        o
    });
}

/// Magma CTR where its counter carries: from the low word into the high one and across
/// the 2^64 wrap, at the start, inside and at the end of a kernel group, at byte offsets
/// (random access) and for lengths around the group and iteration widths.
#[test]
fn magma_ctr_counter_carries_match_soft() {
    let tested = backends();
    for (iv, first_block) in [
        ([0x00, 0x00, 0x00, 0x07], 0xffff_fff0u64),
        ([0xff, 0xff, 0xff, 0xff], 0xffff_fffa),
        ([0xff, 0xff, 0xff, 0xff], 0xffff_ff81),
        ([0x12, 0x34, 0x56, 0x78], 0xffff_ffff),
    ] {
        for len in [16usize, 127, 128, 200, 1024, 1031, 4100] {
            for skip in [0u64, 3] {
                let offset = first_block * 8 + skip;
                let x = bytes(len, offset ^ len as u64);
                let mut want = x.clone();
                let soft = magma::Ctr::with_backend(&KEY, GostBackend::Soft).unwrap();
                soft.apply_keystream(&iv, offset, &mut want);
                for &b in &tested[1..] {
                    let mut got = x.clone();
                    let c = magma::Ctr::with_backend(&KEY, b).unwrap();
                    c.apply_keystream(&iv, offset, &mut got);
                    assert_eq!(
                        got, want,
                        "iv {iv:02x?} offset {offset} len {len} backend {b}"
                    );
                }
            }
        }
    }
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

/// The types with `encrypt_sectors`: one `encrypt` per sector, or all sectors at once.
trait Sectors {
    fn one(&self, iv: &[u8; 8], sector: &mut [u8]);
    fn all(&self, ivs: &[[u8; 8]], data: &mut [u8]);
}

macro_rules! sectors {
    ($($t:ty),+) => {$(
        impl Sectors for $t {
            fn one(&self, iv: &[u8; 8], sector: &mut [u8]) {
                self.encrypt(iv, sector).unwrap();
            }
            fn all(&self, ivs: &[[u8; 8]], data: &mut [u8]) {
                self.encrypt_sectors(ivs, data).unwrap();
            }
        }
    )+};
}

sectors!(gost89::Cbc, gost89::Cfb, magma::Cbc, magma::Cfb);

/// Sector-interleaved CBC and CFB encryption equals one call per sector, on every backend,
/// with and without key meshing, for batch sizes around the interleave width.
#[test]
fn sectors_equal_one_call_per_sector() {
    let batches = [
        (1, 8),
        (3, 2048),
        (127, 64),
        (129, 512),
        (40, 1032),
        (130, 72),
    ];
    for b in backends() {
        for mesh in [false, true] {
            let cbc = gost89::Cbc::with_backend(&KEY, Sbox::CryptoProA, mesh, b).unwrap();
            let cfb = gost89::Cfb::with_backend(&KEY, Sbox::CryptoProA, mesh, b).unwrap();
            let mcbc = magma::Cbc::with_backend(&KEY, b).unwrap();
            let mcfb = magma::Cfb::with_backend(&KEY, b).unwrap();
            let mut modes: Vec<(&str, &dyn Sectors)> = vec![("cbc", &cbc), ("cfb", &cfb)];
            if !mesh {
                modes.extend([("magma cbc", &mcbc as &dyn Sectors), ("magma cfb", &mcfb)]);
            }
            for ((name, m), (count, size)) in modes.iter().flat_map(|m| batches.map(|x| (m, x))) {
                let data = bytes(count * size, (count * size) as u64);
                let ivs: Vec<[u8; 8]> =
                    (0..count as u64).map(|i| (i * 977).to_le_bytes()).collect();
                let mut want = data.clone();
                for (iv, sector) in ivs.iter().zip(want.chunks_mut(size)) {
                    m.one(iv, sector);
                }
                let mut got = data;
                m.all(&ivs, &mut got);
                assert_eq!(got, want, "{name} {count}x{size} mesh {mesh} backend {b}");
            }
            let mut odd = vec![0u8; 20];
            assert!(matches!(
                cbc.encrypt_sectors(&[[0; 8]; 2], &mut odd),
                Err(Error::Input(InputError::Length { .. }))
            ));
        }
    }
}
