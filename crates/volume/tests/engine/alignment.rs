//! Every alignment of reads and writes against both references, IV wrap-around, a
//! pool-less engine, write_zeroes and discard.

use crate::fixture::*;
use rand::{Rng, SeedableRng};
use sectorcrypt_volume::engine::EngineOptions;
use std::io::ErrorKind;

/// Offsets and lengths around sector boundaries, chunks and the whole volume.
fn interesting(cfg: &Config, chunk: usize) -> (Vec<u64>, Vec<usize>) {
    let ss = cfg.sector as u64;
    let size = cfg.size();
    let mut offsets = vec![0, 1, 511, 512, 513, ss - 1, ss, ss + 1, 3 * ss + 7];
    offsets.extend([size - ss - 1, size - ss, size - 1, size]);
    let c = chunk;
    let mut lengths = vec![
        0,
        1,
        511,
        512,
        513,
        cfg.sector - 1,
        cfg.sector,
        cfg.sector + 1,
    ];
    lengths.extend([
        c - 1,
        c,
        c + 1,
        2 * c + cfg.sector,
        3 * c + 5,
        size as usize,
    ]);
    offsets.sort();
    offsets.dedup();
    lengths.sort();
    lengths.dedup();
    (offsets, lengths)
}

fn run_matrix(cfg: Config, seed: u64) {
    let fx = Fixture::new(cfg, seed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
    let chunk = 4 * cfg.sector;
    let vol = fx.open(engine(3, Some(chunk)));
    assert_eq!(vol.size(), cfg.size());
    assert_eq!(vol.sector_size(), cfg.sector);
    let raw_before = fx.raw();
    let mut model = fx.plaintext();
    let (offsets, lengths) = interesting(&cfg, chunk);
    for &off in &offsets {
        for &len in &lengths {
            if off + len as u64 > cfg.size() {
                continue;
            }
            let what = format!("{cfg:?} offset {off} length {len}");
            // Read before writing: the engine sees what SectorCipher sees.
            let mut got = vec![0xa5; len];
            vol.read_at(&mut got, off).unwrap();
            assert!(
                got == model[off as usize..][..len],
                "read before write, {what}"
            );
            let data = random_bytes(&mut rng, len);
            vol.write_at(&data, off).unwrap();
            model[off as usize..][..len].copy_from_slice(&data);
            assert!(fx.plaintext() == model, "file contents after write, {what}");
            let mut back = vec![0x5a; len];
            vol.read_at(&mut back, off).unwrap();
            assert!(back == data, "read back, {what}");
            // The same through a lent buffer, with bytes on either side left alone.
            let (lent, r) = vol.read_owned(vec![0x3c; len + 24], 16..16 + len, off);
            r.unwrap();
            assert!(lent[16..16 + len] == data[..], "read_owned, {what}");
            assert!(
                lent[..16]
                    .iter()
                    .chain(&lent[16 + len..])
                    .all(|&b| b == 0x3c),
                "read_owned margins, {what}"
            );
            // And written from a lent buffer (which the engine may encrypt in place).
            let again = random_bytes(&mut rng, len);
            let mut lent = vec![0x3c; len + 24];
            lent[16..16 + len].copy_from_slice(&again);
            let (lent, r) = vol.write_owned(lent, 16..16 + len, off);
            r.unwrap();
            assert_eq!(lent.len(), len + 24);
            model[off as usize..][..len].copy_from_slice(&again);
            assert!(
                fx.plaintext() == model,
                "contents after write_owned, {what}"
            );
        }
    }
    // Random windows.
    for _ in 0..50 {
        let off = rng.gen_range(0..cfg.size());
        let len = rng.gen_range(0..=(cfg.size() - off) as usize);
        let mut got = vec![0; len];
        vol.read_at(&mut got, off).unwrap();
        assert!(
            got == model[off as usize..][..len],
            "{cfg:?} window {off}+{len}"
        );
    }
    vol.flush().unwrap();
    assert!(
        fx.plaintext_openssl() == model,
        "openssl reference, {cfg:?}"
    );
    // Nothing outside the data area changed.
    let raw = fx.raw();
    let (a, b) = (
        cfg.data_offset as usize,
        (cfg.data_offset + cfg.size()) as usize,
    );
    assert_eq!(raw[..a], raw_before[..a], "bytes before the data area");
    assert_eq!(raw[b..], raw_before[b..], "bytes after the data area");
}

#[test]
fn every_alignment_against_sector_cipher_and_openssl() {
    let mut seed = 1;
    for (spec, key_len) in [
        ("aes-xts-plain64", 64),
        ("aes-xts-plain64", 32),
        ("aes-cbc-essiv:sha256", 32),
    ] {
        for sector in [512, 4096] {
            for large_iv in [false, true] {
                for iv_offset in [0, 0x1_0000_0000 - 3] {
                    let cfg = Config {
                        spec,
                        key_len,
                        sector,
                        large_iv,
                        iv_offset,
                        data_offset: 3 * 4096 + 512,
                        sectors: 40,
                    };
                    run_matrix(cfg, seed);
                    seed += 1;
                }
            }
        }
    }
}

#[test]
fn xts_plain_wraps_and_single_thread_matches() {
    // aes-xts-plain (32-bit IV) and a pool-less engine, checked against SectorCipher.
    for threads in [1, 2] {
        let cfg = Config {
            spec: "aes-xts-plain",
            iv_offset: 0xffff_fff0,
            ..Config::xts(512, 64)
        };
        let fx = Fixture::new(cfg, 99 + threads as u64);
        // 1536 bytes: rounded down to 3 sectors.
        let vol = fx.open(engine(threads, Some(1536)));
        let mut model = fx.plaintext();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let off = rng.gen_range(0..cfg.size());
            let len = rng.gen_range(0..=((cfg.size() - off) as usize).min(9000));
            let data = random_bytes(&mut rng, len);
            vol.write_at(&data, off).unwrap();
            model[off as usize..][..len].copy_from_slice(&data);
        }
        assert!(fx.plaintext() == model);
        let mut all = vec![0; cfg.size() as usize];
        vol.read_at(&mut all, 0).unwrap();
        assert!(all == model);
    }
}

#[test]
fn write_zeroes_matches_writing_a_zero_buffer() {
    for sector in [512, 4096] {
        // 3 MiB: more than one 1 MiB zero piece.
        let cfg = Config {
            large_iv: true,
            iv_offset: 77,
            data_offset: 4096,
            ..Config::xts(sector, (3 << 20) / sector as u64)
        };
        let fx = Fixture::new(cfg, 50 + sector as u64);
        let vol = fx.open(engine(2, None));
        let mut model = fx.plaintext();
        let size = cfg.size();
        let mut random = fx.raw()[..size as usize].to_vec();
        for (off, len) in [
            (0, size),
            (1, size - 2),
            (sector as u64 - 1, 2),
            (1000, 0),
            (5, 3),
            (size - 1, 1),
            (12345, (1 << 20) + 4321),
        ] {
            // Refill with random data first so zeroes are visible.
            random.rotate_left(4099);
            let r = &random;
            vol.write_at(r, 0).unwrap();
            model.copy_from_slice(r);
            vol.write_zeroes(off, len).unwrap();
            model[off as usize..][..len as usize].fill(0);
            assert!(
                fx.plaintext() == model,
                "sector {sector}: zeroes at {off}+{len}"
            );
        }
        let e = vol.write_zeroes(size - 10, 11).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        drop(vol);
        let ro = fx.open(read_only());
        let e = ro.write_zeroes(0, 512).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    }
}

#[test]
fn discard_punches_whole_sectors_only() {
    let cfg = Config {
        large_iv: true,
        iv_offset: 3,
        data_offset: 4096,
        ..Config::xts(4096, 64)
    };
    let fx = Fixture::new(cfg, 80);
    let vol = fx.open(EngineOptions::default());
    let (off, len) = (4096 * 5 + 100, 4096 * 10);
    match vol.discard(off, len) {
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            eprintln!("skipped: this file system cannot punch holes: {e}");
            return;
        }
        r => r.unwrap(),
    }
    // Sectors 6..15 are whole inside the range: zero ciphertext now; 5 and 15 keep theirs.
    let raw_before = {
        let f = Fixture::new(cfg, 80); // same seed: the original contents
        f.raw()
    };
    let raw = fx.raw();
    let at = |s: usize| cfg.data_offset as usize + s * 4096;
    assert!(
        raw[at(6)..at(15)].iter().all(|&b| b == 0),
        "whole sectors punched"
    );
    assert_eq!(raw[..at(6)], raw_before[..at(6)], "before the hole");
    assert_eq!(raw[at(15)..], raw_before[at(15)..], "after the hole");
    assert_eq!(raw.len(), raw_before.len(), "size kept");
    // They read as the decryption of zero ciphertext, like any engine read.
    let mut zeros = vec![0u8; 9 * 4096];
    cfg.cipher(&fx.key)
        .decrypt(cfg.iv_offset + 6, &mut zeros)
        .unwrap();
    let mut got = vec![0; 9 * 4096];
    vol.read_at(&mut got, 6 * 4096).unwrap();
    assert!(got == zeros);
    // Nothing whole inside: nothing happens; out of range and read-only are refused.
    vol.discard(4096 * 20 + 1, 4096).unwrap();
    assert!(fx.raw()[at(20)..at(22)] == raw_before[at(20)..at(22)]);
    assert_eq!(
        vol.discard(cfg.size() - 1, 2).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    drop(vol);
    let ro = fx.open(read_only());
    assert_eq!(
        ro.discard(0, 4096).unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}
