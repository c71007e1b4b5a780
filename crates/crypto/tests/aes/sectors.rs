//! The sector API against OpenSSL doing one EVP call per sector with IVs computed here,
//! independently: plain64, plain (32-bit, wraps), essiv:sha256; IV numbers in 512-byte
//! units, in sectors (large-sector IVs) or in bytes (GELI's byte-offset tweaks).

use crate::differential::rng;
use crate::harness::backends;
use openssl::symm::Mode;
use rand::{Rng, RngCore};
use sectorcrypt_crypto::InputError;
use sectorcrypt_crypto::KeyError;
use sectorcrypt_crypto::{
    dmcrypt::{CipherSpec, IvStep, SectorCipher, SectorLayout},
    Error,
};
use sectorcrypt_testkit::reference::dm_crypt;

#[test]
fn cipher_strings_match_openssl_per_sector() {
    crate::harness::each_width(cipher_strings_match_openssl_per_sector_under_each_width);
}

fn cipher_strings_match_openssl_per_sector_under_each_width() {
    let mut rng = rng("cipher_strings_match_openssl_per_sector");
    for b in backends() {
        for spec_name in CipherSpec::ALL
            .into_iter()
            .filter(|s| s.starts_with("aes-"))
        {
            let spec: CipherSpec = spec_name.parse().unwrap();
            let key_lens: &[usize] = match spec_name {
                "aes-ecb" => &[32],
                s if s.starts_with("aes-xts") => &[32, 64],
                _ => &[16, 24, 32],
            };
            for &key_len in key_lens {
                let mut key = vec![0u8; key_len];
                rng.fill_bytes(&mut key);
                for (size, unit) in [
                    (512, IvStep::Units512),
                    (1024, IvStep::Units512),
                    (2048, IvStep::Units512),
                    (4096, IvStep::Units512),
                    (4096, IvStep::Sector),
                    (16, IvStep::Sector),
                    (4112, IvStep::Sector),
                    (512, IvStep::Bytes),
                    (4096, IvStep::Bytes),
                ] {
                    let lay = SectorLayout::with_step(size, unit).unwrap();
                    let step = match unit {
                        IvStep::Units512 => size as u64 / 512,
                        IvStep::Sector => 1,
                        IvStep::Bytes => size as u64,
                    };
                    // Sector counts: random small ones, and runs that wrap the 32-bit
                    // (plain) and 64-bit (plain64) IV numbers within the call.
                    for (first, count) in [
                        (0u64, rng.gen_range(1..=5)),
                        (rng.gen::<u32>() as u64, rng.gen_range(1..=5)),
                        (rng.gen::<u64>(), 2),
                        (u32::MAX as u64 + 1 - 2 * step, 5),
                        (u64::MAX - 2 * step + 1, 5),
                    ] {
                        let mut data = vec![0u8; size * count];
                        rng.fill_bytes(&mut data);
                        let c = SectorCipher::with_backend(spec, &key, lay, b).unwrap();
                        let want =
                            dm_crypt(spec_name, &key, size, step, first, &data, Mode::Encrypt);
                        let mut got = vec![0u8; data.len()];
                        c.encrypt_to(first, &data, &mut got).unwrap();
                        assert_eq!(got, want, "{spec_name} key {key_len} {count}x{size} iv step {unit:?} first {first} on {b}");
                        let mut inplace = data.clone();
                        c.encrypt(first, &mut inplace).unwrap();
                        assert_eq!(inplace, want, "{spec_name} in place on {b}");
                        let mut back = vec![0u8; data.len()];
                        c.decrypt_to(first, &got, &mut back).unwrap();
                        assert_eq!(back, data);
                        let want =
                            dm_crypt(spec_name, &key, size, step, first, &data, Mode::Decrypt);
                        c.decrypt(first, &mut data).unwrap();
                        assert_eq!(data, want, "{spec_name} decrypt on {b}");
                    }
                }
            }
        }
    }
}

/// More sectors than one batch of IVs (the sector code computes IVs 256 at a time), with
/// the IV numbers wrapping inside the second batch, and counts around one batch.
#[test]
fn long_runs_match_openssl_per_sector() {
    crate::harness::each_width(long_runs_match_openssl_per_sector_under_each_width);
}

fn long_runs_match_openssl_per_sector_under_each_width() {
    let mut rng = rng("long_runs_match_openssl_per_sector");
    for b in backends() {
        for spec_name in [
            "aes-xts-plain64",
            "aes-xts-plain",
            "aes-cbc-essiv:sha256",
            "aes-cbc-plain",
        ] {
            let spec: CipherSpec = spec_name.parse().unwrap();
            let mut key = vec![0u8; 32];
            rng.fill_bytes(&mut key);
            let lay = SectorLayout::new(512, false).unwrap();
            for (first, count) in [
                (u32::MAX as u64 - 300, 531usize),
                (u64::MAX - 270, 529),
                (7, 255),
                (7, 256),
                (7, 257),
            ] {
                let mut data = vec![0u8; 512 * count];
                rng.fill_bytes(&mut data);
                let c = SectorCipher::with_backend(spec, &key, lay, b).unwrap();
                let mut got = data.clone();
                c.encrypt(first, &mut got).unwrap();
                let want = dm_crypt(spec_name, &key, 512, 1, first, &data, Mode::Encrypt);
                assert_eq!(got, want, "{spec_name} {count} sectors from {first} on {b}");
                c.decrypt(first, &mut got).unwrap();
                assert_eq!(got, data, "{spec_name} decrypt {count} sectors on {b}");
            }
        }
    }
}

#[test]
fn sector_layout_and_lengths_are_checked() {
    crate::harness::each_width(sector_layout_and_lengths_are_checked_under_each_width);
}

fn sector_layout_and_lengths_are_checked_under_each_width() {
    for bad in [0usize, 8, 100, 65552, 1 << 20] {
        assert!(
            matches!(
                SectorLayout::new(bad, true),
                Err(Error::Input(InputError::SectorSize(_)))
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        SectorLayout::new(4112, false),
        Err(Error::Input(InputError::SectorSizeNeedsLargeIv(4112)))
    ));
    assert_eq!(SectorLayout::new(4096, false).unwrap().iv_step(), 8);
    assert_eq!(SectorLayout::new(4096, true).unwrap().iv_step(), 1);
    assert!(matches!(
        "aes-xts-essiv:sha256".parse::<CipherSpec>(),
        Err(Error::UnknownName { what: "cipher", .. })
    ));
    for b in backends() {
        let c = SectorCipher::with_backend(
            "aes-xts-plain64".parse().unwrap(),
            &(0..64).collect::<Vec<u8>>(),
            SectorLayout::new(512, false).unwrap(),
            b,
        )
        .unwrap();
        let mut buf = vec![1u8; 700];
        assert!(matches!(
            c.encrypt(0, &mut buf),
            Err(Error::Input(InputError::Length { .. }))
        ));
        assert!(buf.iter().all(|&v| v == 1));
        assert!(matches!(
            SectorCipher::with_backend(
                "aes-xts-plain64".parse().unwrap(),
                &[5u8; 64],
                SectorLayout::new(512, false).unwrap(),
                b
            ),
            Err(Error::Key(KeyError::XtsEqualHalves))
        ));
        assert!(matches!(
            SectorCipher::with_backend(
                "aes-cbc-plain64".parse().unwrap(),
                &[5u8; 64],
                SectorLayout::new(512, false).unwrap(),
                b
            ),
            Err(Error::Key(KeyError::Length { .. }))
        ));
    }
}
