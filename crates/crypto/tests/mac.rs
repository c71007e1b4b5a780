//! GELI's sector tags (`sectorcrypt_crypto::mac`) on every backend this CPU runs (and on
//! `shani` with 1, 2 and 4 interleaved units); a backend this CPU lacks is skipped with a
//! printed reason.
//!
//! - the lane kernels alone: FIPS 180-4 digests, RFC 4231 (HMAC-SHA256) and RFC 2202
//!   (HMAC-SHA1), many messages of different lengths per call so that lanes differ;
//! - whole runs of units against OpenSSL (its SHA-256 for the unit key, its HMAC for the
//!   tag) for all five algorithms: every message length from 0 to a whole unit, runs of 1
//!   to 33 units (no multiple of any lane count), random offsets past 2^32;
//! - `verify` names the first bad unit whichever lane holds it;
//! - shapes and offsets that do not fit are refused, never a panic;
//! - `SECTORCRYPT_BACKEND`'s rule across the three families.

use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;
use rand::{Rng, SeedableRng};
use sectorcrypt_crypto::hazmat::lane_digests;
use sectorcrypt_crypto::mac::{MacAlgorithm, MacBackend, SectorMac, UnitShape};
use sectorcrypt_crypto::{Backend, GostBackend};
use sectorcrypt_testkit::hex;

const ALL: [MacAlgorithm; 5] = [
    MacAlgorithm::HmacSha1,
    MacAlgorithm::HmacRipemd160,
    MacAlgorithm::HmacSha256,
    MacAlgorithm::HmacSha384,
    MacAlgorithm::HmacSha512,
];

/// Every backend this CPU runs, soft first, each with the lane counts to test (0: the
/// backend's own).
fn variants() -> Vec<(MacBackend, usize)> {
    let report = |b: MacBackend| (b, b.ensure_usable().map_err(|e| e.to_string()));
    let slowest_first = MacBackend::ALL.into_iter().rev().map(report).collect();
    let mut out = vec![];
    for b in sectorcrypt_testkit::usable("mac", MacBackend::Soft, slowest_first) {
        match b {
            MacBackend::Shani => out.extend([1, 2, 4].map(|l| (b, l))),
            _ => out.push((b, 0)),
        }
    }
    out
}

/// The tag maker of `variant`.
fn mac(alg: MacAlgorithm, akey: &[u8], (b, lanes): (MacBackend, usize)) -> SectorMac {
    if lanes == 0 {
        SectorMac::with_backend(alg, akey, b).unwrap()
    } else {
        SectorMac::with_shani_lanes(alg, akey, lanes).unwrap()
    }
}

fn digest(alg: MacAlgorithm) -> MessageDigest {
    match alg {
        MacAlgorithm::HmacSha1 => MessageDigest::sha1(),
        MacAlgorithm::HmacRipemd160 => MessageDigest::ripemd160(),
        MacAlgorithm::HmacSha256 => MessageDigest::sha256(),
        MacAlgorithm::HmacSha384 => MessageDigest::sha384(),
        MacAlgorithm::HmacSha512 => MessageDigest::sha512(),
    }
}

/// OpenSSL's tag of the unit at `offset` over `msg` (GELI's formulas: the unit key is
/// SHA-256(akey || le64(offset))).
fn openssl_tag(alg: MacAlgorithm, akey: &[u8], offset: u64, msg: &[u8]) -> Vec<u8> {
    let mut h = openssl::sha::Sha256::new();
    h.update(akey);
    h.update(&offset.to_le_bytes());
    let key = PKey::hmac(&h.finish()).unwrap();
    let mut s = Signer::new(digest(alg), &key).unwrap();
    s.update(msg).unwrap();
    s.sign_to_vec().unwrap()
}

/// Checks every tag of the signed `units` against OpenSSL; the message of unit `i` is
/// `shape.msg_len_of(i)` bytes after its tag.
fn check_against_openssl(
    what: &str,
    alg: MacAlgorithm,
    akey: &[u8],
    units: &[u8],
    shape: UnitShape,
    first: u64,
) {
    let t = alg.tag_len();
    for (i, u) in units.chunks_exact(shape.unit_len).enumerate() {
        let off = first + (i * shape.unit_len) as u64;
        let want = openssl_tag(alg, akey, off, &u[t..t + shape.msg_len_of(i)]);
        assert_eq!(
            hex(&u[..t]),
            hex(&want),
            "{what}: {alg:?} unit {i} of {} at offset {off:#x}, {shape:?}",
            units.len() / shape.unit_len
        );
    }
}

#[test]
fn fips_180_4_digests_through_every_lane_kernel() {
    let million = vec![b'a'; 1_000_000];
    let two_blocks = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    let cases: [(&[u8], &str, &str); 4] = [
        (
            b"abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "a9993e364706816aba3e25717850c26c9cd0d89d",
        ),
        (
            b"",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        ),
        (
            two_blocks,
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
        (
            &million,
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f",
        ),
    ];
    // 19 messages per call: every case in several lanes, next to messages of other lengths.
    let order: Vec<usize> = (0..19).map(|i| (i * 7 + i / 4) % 4).collect();
    let msgs: Vec<&[u8]> = order.iter().map(|&c| cases[c].0).collect();
    for (b, lanes) in variants() {
        for (alg, col) in [(MacAlgorithm::HmacSha256, 1), (MacAlgorithm::HmacSha1, 2)] {
            let got = lane_digests(b, lanes, alg, None, &msgs).unwrap();
            for (i, &c) in order.iter().enumerate() {
                let want = if col == 1 { cases[c].1 } else { cases[c].2 };
                assert_eq!(hex(&got[i]), want, "{b} x{lanes} {alg:?} message {i}");
            }
        }
    }
}

/// RFC 4231 (HMAC-SHA256) and RFC 2202 (HMAC-SHA1), one case a line: key|data|HMAC-SHA256
/// (case 5 truncated to 128 bits)|HMAC-SHA1 (empty: not a case of that RFC). Keys and data are
/// text, or `xx*n` (the byte 0xxx n times), or `1..=25` (the bytes 1 to 25). Keys longer
/// than a block are hashed first, as HMAC does.
const RFC: &str = "\
0b*20|Hi There|b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7|b617318655057264e28bc0b6fb378c8ef146be00
Jefe|what do ya want for nothing?|5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843|effcdf6ae5eb2fa2d27416d5f184df9c259a7c79
aa*20|dd*50|773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe|125d7342b9ac11cd91a39af48aa17b4f63f175d3
1..=25|cd*50|82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b|4c9007f4026250c6bc8414f9bf50c86c2d7235da
0c*20|Test With Truncation|a3b6167473100ee06e0c796c2955552b|4c1a03424b55e07fe7f27be1d58bb9324a9a5a04
aa*131|Test Using Larger Than Block-Size Key - Hash Key First|60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54|
aa*131|This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.|9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2|
aa*80|Test Using Larger Than Block-Size Key - Hash Key First||aa4ae5e15272d00e95705637ce8a3b55ed402112
aa*80|Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data||e8e99d0f45237d786d6bbaa7965c7808bbff1a91
";

/// The bytes of a key or data field of [`RFC`].
fn field(spec: &str) -> Vec<u8> {
    if spec == "1..=25" {
        return (1..=25).collect();
    }
    match spec.split_once('*') {
        Some((byte, n)) if byte.len() == 2 => {
            vec![u8::from_str_radix(byte, 16).unwrap(); n.parse().unwrap()]
        }
        _ => spec.as_bytes().to_vec(),
    }
}

fn rfc_cases() -> Vec<(Vec<u8>, Vec<u8>, &'static str, &'static str)> {
    RFC.lines()
        .map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            (field(f[0]), field(f[1]), f[2], f[3])
        })
        .collect()
}

#[test]
fn rfc_4231_and_rfc_2202_hmacs_through_every_lane_kernel() {
    let cases = rfc_cases();
    for (b, lanes) in variants() {
        for alg in [MacAlgorithm::HmacSha256, MacAlgorithm::HmacSha1] {
            let cases: Vec<_> = cases
                .iter()
                .filter(|c| {
                    !(if alg == MacAlgorithm::HmacSha256 {
                        c.2
                    } else {
                        c.3
                    })
                    .is_empty()
                })
                .collect();
            // Keys longer than 32 bytes are hashed first (by the kernel under test), as
            // HMAC does for keys longer than a block; the RFC keys in between do not occur.
            let long: Vec<&[u8]> = cases.iter().map(|c| &c.0[..]).collect();
            let hashed = lane_digests(b, lanes, alg, None, &long).unwrap();
            let keys: Vec<&[u8]> = cases
                .iter()
                .zip(&hashed)
                .map(|(c, h)| if c.0.len() > 32 { &h[..] } else { &c.0[..] })
                .collect();
            let data: Vec<&[u8]> = cases.iter().map(|c| &c.1[..]).collect();
            let got = lane_digests(b, lanes, alg, Some(&keys), &data).unwrap();
            for (c, g) in cases.iter().zip(got) {
                let want = if alg == MacAlgorithm::HmacSha256 {
                    c.2
                } else {
                    c.3
                };
                assert_eq!(hex(&g[..want.len() / 2]), want, "{b} x{lanes} {alg:?}");
            }
        }
    }
}

#[test]
fn every_message_length_matches_openssl() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let akey: Vec<u8> = (0..64).map(|_| rng.gen()).collect();
    let variants = variants();
    for alg in ALL {
        let room = 512 - alg.tag_len();
        for len in 0..=room {
            // Three units: two of `len` message bytes and a last one of another length.
            let shape = UnitShape {
                unit_len: 512,
                units_per_group: 3,
                msg_len: len,
                last_msg_len: (len * 7 + 3) % (room + 1),
            };
            let first = rng.gen_range(0..1u64 << 40) * 512;
            let plain: Vec<u8> = (0..3 * 512).map(|_| rng.gen()).collect();
            let mut want = plain.clone();
            SectorMac::with_backend(alg, &akey, MacBackend::Soft)
                .unwrap()
                .sign(&mut want, shape, first)
                .unwrap();
            if len % 37 == 0 || len == room {
                check_against_openssl("soft", alg, &akey, &want, shape, first);
            }
            for &v in &variants {
                let mut units = plain.clone();
                mac(alg, &akey, v).sign(&mut units, shape, first).unwrap();
                assert!(units == want, "{v:?} {alg:?} message length {len}");
            }
        }
    }
}

#[test]
fn runs_of_1_to_33_units_match_openssl() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(33);
    let akey: Vec<u8> = (0..64).map(|_| rng.gen()).collect();
    for v in variants() {
        for alg in ALL {
            let room = 512 - alg.tag_len();
            // Whole groups of 1 unit, then of 3 (the last shorter), up to 33 units.
            for (per, last) in [(1, room), (3, 256)] {
                let shape = UnitShape {
                    unit_len: 512,
                    units_per_group: per,
                    msg_len: room,
                    last_msg_len: last,
                };
                for n in (per..=33).step_by(per) {
                    let first = match n % 3 {
                        0 => rng.gen_range(1u64 << 32..1 << 50) * 512,
                        1 => rng.gen_range(0..1u64 << 23) * 512,
                        _ => u64::MAX / 512 * 512 - (n as u64 + 1) * 512,
                    };
                    let mut units: Vec<u8> = (0..n * 512).map(|_| rng.gen()).collect();
                    let m = mac(alg, &akey, v);
                    m.sign(&mut units, shape, first).unwrap();
                    let what = format!("{v:?}");
                    check_against_openssl(&what, alg, &akey, &units, shape, first);
                    assert_eq!(m.verify(&units, shape, first).unwrap(), None, "{what}");
                }
            }
        }
    }
}

#[test]
fn verify_names_the_first_bad_unit_whatever_its_lane() {
    let akey = [0x5a; 64];
    let shape = UnitShape {
        unit_len: 512,
        units_per_group: 11,
        msg_len: 480,
        last_msg_len: 112,
    };
    for v in variants() {
        for alg in [MacAlgorithm::HmacSha256, MacAlgorithm::HmacSha1] {
            let m = mac(alg, &akey, v);
            let t = alg.tag_len();
            let mut units = sectorcrypt_testkit::pattern(33 * 512, 3);
            let first = 7 << 33;
            m.sign(&mut units, shape, first).unwrap();
            assert_eq!(m.verify(&units, shape, first).unwrap(), None);
            for i in 0..33 {
                let base = i * 512;
                for at in [base + i % t, base + t + (i * 13) % shape.msg_len_of(i)] {
                    units[at] ^= 0x10;
                    let got = m.verify(&units, shape, first).unwrap();
                    assert_eq!(got, Some(i), "{v:?} {alg:?} byte {at}");
                    // A later bad unit does not hide this one.
                    let later = (i + 5).min(32) * 512 + 1;
                    units[later] ^= 1;
                    assert_eq!(m.verify(&units, shape, first).unwrap(), Some(i));
                    units[later] ^= 1;
                    units[at] ^= 0x10;
                }
            }
            assert_eq!(m.verify(&units, shape, first).unwrap(), None);
            // The same bytes at another offset do not verify.
            assert_eq!(m.verify(&units, shape, first + 512).unwrap(), Some(0));
        }
    }
}

#[test]
fn shapes_and_offsets_that_do_not_fit_are_refused() {
    let m = SectorMac::new(MacAlgorithm::HmacSha256, &[1; 64]).unwrap();
    let mut units = vec![0u8; 2 * 512];
    let huge = UnitShape {
        unit_len: 512,
        units_per_group: usize::MAX / 256,
        msg_len: 480,
        last_msg_len: 480,
    };
    assert!(m.sign(&mut units, huge, 0).is_err());
    assert!(m.verify(&units, huge, 0).is_err());
    let one = UnitShape {
        units_per_group: 1,
        ..huge
    };
    // The second unit would lie past the last byte a u64 offset can name.
    let last = u64::MAX - 300;
    assert!(m.sign(&mut units, one, last).is_err());
    assert!(m.verify(&units, one, last).is_err());
    assert_eq!(units, vec![0u8; 2 * 512], "nothing written on an error");
    m.sign(&mut units, one, u64::MAX - 1023).unwrap();
    assert_eq!(m.verify(&units, one, u64::MAX - 1023).unwrap(), None);
}

#[test]
fn the_backend_variable_is_shared_with_aes_and_gost() {
    let report = |b: MacBackend| (b, b.ensure_usable().map_err(|e| e.to_string()));
    let usable = sectorcrypt_testkit::usable(
        "mac",
        MacBackend::Soft,
        MacBackend::ALL.into_iter().map(report).collect(),
    );
    assert_eq!(
        MacBackend::for_forced_name("soft").unwrap(),
        MacBackend::Soft
    );
    assert!(MacBackend::for_forced_name("nonsense").is_err());
    let shani = MacBackend::for_forced_name("shani");
    if usable.contains(&MacBackend::Shani) {
        assert_eq!(shani.unwrap(), MacBackend::Shani);
        // A name only the sector tags have gives AES and GOST their portable backends.
        assert_eq!(Backend::for_forced_name("shani").unwrap(), Backend::Soft);
        assert_eq!(
            GostBackend::for_forced_name("shani").unwrap(),
            GostBackend::Soft
        );
    } else {
        eprintln!("SKIPPED the shani half: shani cannot run here");
        assert!(shani.is_err());
    }
    // Names of the other families give the sector tags their portable backend.
    if Backend::Aesni.ensure_usable().is_ok() {
        assert_eq!(
            MacBackend::for_forced_name("aesni").unwrap(),
            MacBackend::Soft
        );
    }
    if usable.contains(&MacBackend::Avx512) {
        assert_eq!(
            MacBackend::for_forced_name("avx512").unwrap(),
            MacBackend::Avx512
        );
    }
    let unknown = Backend::from_name("nonsense").unwrap_err().to_string();
    assert!(unknown.contains("shani"), "{unknown}");
}

/// The lane kernels' speed on long messages (one message per lane of every call): not a
/// check, a measurement. `cargo test --release -p sectorcrypt-crypto --test mac --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn kernel_throughput() {
    let data = vec![7u8; 256 << 10];
    for (b, lanes) in variants() {
        for alg in [MacAlgorithm::HmacSha256, MacAlgorithm::HmacSha1] {
            let width = match (b, lanes) {
                (MacBackend::Avx512, _) => 16,
                (MacBackend::Shani, l) => l,
                _ => 1,
            };
            let msgs: Vec<&[u8]> = vec![&data[..]; width];
            let mut best = f64::MAX;
            for _ in 0..30 {
                let t = std::time::Instant::now();
                std::hint::black_box(lane_digests(b, lanes, alg, None, &msgs).unwrap());
                best = best.min(t.elapsed().as_secs_f64());
            }
            let gbs = (width * data.len()) as f64 / best / 1e9;
            eprintln!("{b} x{width} {alg:?}: {gbs:.2} GB/s hashed (best of 30)");
        }
    }
}
