//! The sector engine against two references: `SectorCipher` applied directly to the file's
//! data area, and OpenSSL (aes-xts with plain64 tweaks, aes-cbc with essiv:sha256 IVs)
//! sector by sector. Alignment matrix, concurrency, errors, full disk.

use openssl::symm::{Cipher, Crypter, Mode};
use rand::{Rng, RngCore, SeedableRng};
use sectorcrypt_crypto::{
    aes::Ctr,
    dmcrypt::{CipherSpec, SectorCipher, SectorLayout},
};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One volume configuration.
#[derive(Debug, Clone, Copy)]
struct Config {
    spec: &'static str,
    key_len: usize,
    sector: usize,
    large_iv: bool,
    iv_offset: u64,
    data_offset: u64,
    sectors: u64,
}

impl Config {
    fn size(&self) -> u64 {
        self.sectors * self.sector as u64
    }

    fn cipher(&self, key: &[u8]) -> SectorCipher {
        let spec: CipherSpec = self.spec.parse().unwrap();
        let layout = SectorLayout::new(self.sector, self.large_iv).unwrap();
        SectorCipher::new(spec, key, layout).unwrap()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    cfg: Config,
    key: Vec<u8>,
}

impl Fixture {
    /// A file of random bytes holding the data area after `data_offset` random bytes and
    /// followed by 1000 random bytes (which must never change).
    fn new(cfg: Config, seed: u64) -> Fixture {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("volume.img");
        let mut content = vec![0u8; (cfg.data_offset + cfg.size()) as usize + 1000];
        fill(&mut rng, &mut content);
        std::fs::write(&path, &content).unwrap();
        let mut key = vec![0u8; cfg.key_len];
        fill(&mut rng, &mut key);
        Fixture {
            _dir: dir,
            path,
            cfg,
            key,
        }
    }

    fn open(&self, opts: EngineOptions) -> Volume {
        let file = OpenOptions::new()
            .read(true)
            .write(!opts.read_only)
            .open(&self.path)
            .unwrap();
        Volume::new(
            file,
            self.cfg.cipher(&self.key),
            self.cfg.data_offset,
            self.cfg.size(),
            self.cfg.iv_offset,
            opts,
        )
        .unwrap()
    }

    fn raw(&self) -> Vec<u8> {
        std::fs::read(&self.path).unwrap()
    }

    /// The data area decrypted by `SectorCipher` directly, all at once.
    fn plaintext(&self) -> Vec<u8> {
        let raw = self.raw();
        let start = self.cfg.data_offset as usize;
        let mut area = raw[start..start + self.cfg.size() as usize].to_vec();
        self.cfg
            .cipher(&self.key)
            .decrypt(self.cfg.iv_offset, &mut area)
            .unwrap();
        area
    }

    /// The data area decrypted by OpenSSL, sector by sector.
    fn plaintext_openssl(&self) -> Vec<u8> {
        let raw = self.raw();
        let cfg = self.cfg;
        let start = cfg.data_offset as usize;
        let area = &raw[start..start + cfg.size() as usize];
        let step = if cfg.large_iv {
            1
        } else {
            (cfg.sector / 512) as u64
        };
        let mut out = Vec::with_capacity(area.len());
        for (s, sector) in area.chunks(cfg.sector).enumerate() {
            let number = cfg.iv_offset.wrapping_add(s as u64 * step);
            let mut plain64 = [0u8; 16];
            plain64[..8].copy_from_slice(&number.to_le_bytes());
            let (cipher, key, iv) = match cfg.spec {
                "aes-xts-plain64" => {
                    let c = if cfg.key_len == 32 {
                        Cipher::aes_128_xts()
                    } else {
                        Cipher::aes_256_xts()
                    };
                    (c, self.key.clone(), plain64)
                }
                "aes-cbc-essiv:sha256" => {
                    assert_eq!(cfg.key_len, 32);
                    let salt = openssl::sha::sha256(&self.key);
                    let iv =
                        openssl_run(Cipher::aes_256_ecb(), Mode::Encrypt, &salt, None, &plain64);
                    (
                        Cipher::aes_256_cbc(),
                        self.key.clone(),
                        iv.try_into().unwrap(),
                    )
                }
                other => panic!("no openssl reference for {other}"),
            };
            out.extend(openssl_run(cipher, Mode::Decrypt, &key, Some(&iv), sector));
        }
        out
    }
}

/// Fills `buf` with pseudo-random bytes fast (an AES-CTR keystream keyed from `rng`): the
/// tests run unoptimised, where `rand` fills only tens of MB/s.
fn fill(rng: &mut impl RngCore, buf: &mut [u8]) {
    let mut key = [0u8; 32];
    let mut iv = [0u8; 16];
    rng.fill_bytes(&mut key);
    rng.fill_bytes(&mut iv);
    buf.fill(0);
    Ctr::new(&key).unwrap().apply_keystream(&iv, 0, buf);
}

fn openssl_run(cipher: Cipher, mode: Mode, key: &[u8], iv: Option<&[u8]>, data: &[u8]) -> Vec<u8> {
    let mut c = Crypter::new(cipher, mode, key, iv).unwrap();
    c.pad(false);
    let mut out = vec![0; data.len() + 32];
    let mut n = c.update(data, &mut out).unwrap();
    n += c.finalize(&mut out[n..]).unwrap();
    out.truncate(n);
    out
}

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
    let vol = fx.open(EngineOptions {
        threads: Some(3),
        read_only: false,
        chunk_bytes: Some(chunk),
    });
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
            let mut data = vec![0u8; len];
            fill(&mut rng, &mut data);
            vol.write_at(&data, off).unwrap();
            model[off as usize..][..len].copy_from_slice(&data);
            assert!(fx.plaintext() == model, "file contents after write, {what}");
            let mut back = vec![0x5a; len];
            vol.read_at(&mut back, off).unwrap();
            assert!(back == data, "read back, {what}");
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
            key_len: 64,
            sector: 512,
            large_iv: false,
            iv_offset: 0xffff_fff0,
            data_offset: 0,
            sectors: 64,
        };
        let fx = Fixture::new(cfg, 99 + threads as u64);
        let vol = fx.open(EngineOptions {
            threads: Some(threads),
            read_only: false,
            chunk_bytes: Some(1536), // rounded down to 3 sectors
        });
        let mut model = fx.plaintext();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let off = rng.gen_range(0..cfg.size());
            let len = rng.gen_range(0..=((cfg.size() - off) as usize).min(9000));
            let mut data = vec![0; len];
            fill(&mut rng, &mut data);
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
        let cfg = Config {
            spec: "aes-xts-plain64",
            key_len: 64,
            sector,
            large_iv: true,
            iv_offset: 77,
            data_offset: 4096,
            sectors: (3 << 20) / sector as u64, // 3 MiB: more than one 1 MiB zero piece
        };
        let fx = Fixture::new(cfg, 50 + sector as u64);
        let vol = fx.open(EngineOptions {
            threads: Some(2),
            ..EngineOptions::default()
        });
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
        let ro = fx.open(EngineOptions {
            read_only: true,
            ..EngineOptions::default()
        });
        let e = ro.write_zeroes(0, 512).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    }
}

#[test]
fn discard_punches_whole_sectors_only() {
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 4096,
        large_iv: true,
        iv_offset: 3,
        data_offset: 4096,
        sectors: 64,
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
    let ro = fx.open(EngineOptions {
        read_only: true,
        ..EngineOptions::default()
    });
    assert_eq!(
        ro.discard(0, 4096).unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}

/// Splits `[0, size)` into `n` interleaved sets of byte ranges with random boundaries (most
/// of them inside sectors, so neighbouring ranges of different writers share sectors).
fn random_partition(rng: &mut impl Rng, size: u64, pieces: usize) -> Vec<(u64, usize)> {
    let mut cuts: Vec<u64> = (0..pieces - 1).map(|_| rng.gen_range(1..size)).collect();
    cuts.push(0);
    cuts.push(size);
    cuts.sort();
    cuts.dedup();
    cuts.windows(2)
        .map(|w| (w[0], (w[1] - w[0]) as usize))
        .collect()
}

#[test]
fn concurrent_writers_on_disjoint_unaligned_ranges_lose_nothing() {
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 512,
        large_iv: false,
        iv_offset: 5,
        data_offset: 1024,
        sectors: 2048, // 1 MiB
    };
    let fx = Fixture::new(cfg, 42);
    let vol = Arc::new(fx.open(EngineOptions {
        threads: Some(3),
        read_only: false,
        chunk_bytes: Some(8192),
    }));
    let mut rng = rand::rngs::StdRng::seed_from_u64(4242);
    let writers = 4;
    let ranges = random_partition(&mut rng, cfg.size(), 600);
    // Writer w owns ranges w, w + writers, ...; each writes its ranges 3 times in a random
    // order with fresh data; the final model holds each range's last data.
    let mut model = fx.plaintext();
    let mut plans = Vec::new();
    for w in 0..writers {
        let mut plan = Vec::new();
        for round in 0..3 {
            let mut mine: Vec<(u64, usize)> =
                ranges.iter().copied().skip(w).step_by(writers).collect();
            for i in (1..mine.len()).rev() {
                mine.swap(i, rng.gen_range(0..=i));
            }
            for (off, len) in mine {
                let mut data = vec![0; len];
                fill(&mut rng, &mut data);
                if round == 2 {
                    model[off as usize..][..len].copy_from_slice(&data);
                }
                plan.push((round, off, data));
            }
        }
        // Each range's rounds stay in order within one writer.
        plan.sort_by_key(|p| p.0);
        plans.push(plan);
    }
    let handles: Vec<_> = plans
        .into_iter()
        .map(|plan| {
            let vol = Arc::clone(&vol);
            std::thread::spawn(move || {
                for (_, off, data) in plan {
                    vol.write_at(&data, off).unwrap();
                }
            })
        })
        .collect();
    // A reader running alongside must never fail.
    let reader = {
        let vol = Arc::clone(&vol);
        std::thread::spawn(move || {
            let mut buf = vec![0; 100_000];
            for i in 0..50 {
                vol.read_at(&mut buf, (i * 7919) as u64).unwrap();
            }
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    reader.join().unwrap();
    assert!(
        fx.plaintext() == model,
        "byte-exact after concurrent disjoint writes"
    );
    let mut all = vec![0; cfg.size() as usize];
    vol.read_at(&mut all, 0).unwrap();
    assert!(all == model);
}

#[test]
fn concurrent_large_aligned_writers_and_readers() {
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 4096,
        large_iv: true,
        iv_offset: 0,
        data_offset: 4096,
        sectors: 1024, // 4 MiB
    };
    let fx = Fixture::new(cfg, 43);
    let vol = Arc::new(fx.open(EngineOptions {
        threads: Some(2),
        read_only: false,
        chunk_bytes: Some(64 * 1024),
    }));
    let quarter = cfg.size() as usize / 4;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let datas: Vec<Vec<u8>> = (0..4)
        .map(|_| {
            let mut d = vec![0; quarter];
            fill(&mut rng, &mut d);
            d
        })
        .collect();
    let handles: Vec<_> = datas
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, d)| {
            let vol = Arc::clone(&vol);
            std::thread::spawn(move || {
                for _ in 0..3 {
                    vol.write_at(&d, (i * quarter) as u64).unwrap();
                    let mut back = vec![0; d.len()];
                    vol.read_at(&mut back, (i * quarter) as u64).unwrap();
                    assert!(back == d, "quarter {i} reads back");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(fx.plaintext() == datas.concat());
}

#[test]
fn overlapping_unaligned_writers_leave_one_serial_order_per_sector() {
    let cfg = Config {
        spec: "aes-cbc-essiv:sha256",
        key_len: 32,
        sector: 512,
        large_iv: false,
        iv_offset: 0,
        data_offset: 0,
        sectors: 64,
    };
    let fx = Fixture::new(cfg, 44);
    let vol = Arc::new(fx.open(EngineOptions {
        threads: Some(2),
        read_only: false,
        chunk_bytes: None,
    }));
    let original = fx.plaintext();
    // In every sector k, writer A writes [k*512+10, k*512+300) and writer B
    // [k*512+200, k*512+500), each 20 times with its own byte value per round.
    let run = |writer: u8, from: u64, to: u64| {
        let vol = Arc::clone(&vol);
        std::thread::spawn(move || {
            for round in 0..20u8 {
                for k in 0..64u64 {
                    let data =
                        vec![writer.wrapping_mul(50).wrapping_add(round); (to - from) as usize];
                    vol.write_at(&data, k * 512 + from).unwrap();
                }
            }
        })
    };
    let a = run(1, 10, 300);
    let b = run(2, 200, 500);
    a.join().unwrap();
    b.join().unwrap();
    let last_a = 50 + 19;
    let last_b = 100 + 19;
    let got = fx.plaintext();
    for k in 0..64usize {
        let s = &got[k * 512..][..512];
        let o = &original[k * 512..][..512];
        assert_eq!(s[..10], o[..10], "sector {k} head untouched");
        assert_eq!(s[500..], o[500..], "sector {k} tail untouched");
        assert!(
            s[10..200].iter().all(|&x| x == last_a),
            "sector {k}: A's own bytes"
        );
        assert!(
            s[300..500].iter().all(|&x| x == last_b),
            "sector {k}: B's own bytes"
        );
        let overlap = &s[200..300];
        assert!(
            overlap.iter().all(|&x| x == last_a) || overlap.iter().all(|&x| x == last_b),
            "sector {k}: the overlap is one writer's, whole"
        );
    }
}

fn small_fixture(seed: u64) -> Fixture {
    Fixture::new(
        Config {
            spec: "aes-xts-plain64",
            key_len: 64,
            sector: 512,
            large_iv: false,
            iv_offset: 0,
            data_offset: 512,
            sectors: 16,
        },
        seed,
    )
}

#[test]
fn out_of_range_requests_are_refused_and_change_nothing() {
    let fx = small_fixture(45);
    let vol = fx.open(EngineOptions::default());
    let size = vol.size();
    let before = fx.raw();
    let mut buf = vec![0; 600];
    for (off, len) in [
        (size - 599, 600),
        (size, 1),
        (size + 1, 0),
        (u64::MAX, 1),
        (u64::MAX - 10, 600),
    ] {
        let e = vol.read_at(&mut buf[..len], off).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "read {off}+{len}");
        assert!(e.to_string().contains("beyond the end"), "{e}");
        let e = vol.write_at(&buf[..len], off).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "write {off}+{len}");
    }
    // The exact end is fine.
    vol.read_at(&mut buf[..0], size).unwrap();
    vol.read_at(&mut buf[..1], size - 1).unwrap();
    assert_eq!(fx.raw(), before);
}

#[test]
fn read_only_volume_refuses_writes() {
    let fx = small_fixture(46);
    let before = fx.raw();
    let vol = fx.open(EngineOptions {
        read_only: true,
        ..EngineOptions::default()
    });
    let mut buf = vec![0; 1000];
    vol.read_at(&mut buf, 3).unwrap();
    assert!(buf == fx.plaintext()[3..1003]);
    for (off, len) in [(0, 512), (3, 1000), (0, 0)] {
        let e = vol.write_at(&buf[..len], off).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("read-only"), "{e}");
    }
    vol.flush().unwrap();
    assert_eq!(fx.raw(), before);
}

#[test]
fn bad_geometry_is_refused_at_open() {
    let fx = small_fixture(47);
    let cfg = fx.cfg;
    let open = |data_offset: u64, size: u64, threads: Option<usize>| {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fx.path)
            .unwrap();
        Volume::new(
            file,
            cfg.cipher(&fx.key),
            data_offset,
            size,
            0,
            EngineOptions {
                threads,
                ..EngineOptions::default()
            },
        )
    };
    let file_len = fx.raw().len() as u64;
    // Fits exactly.
    open(file_len - 1024, 1024, None).unwrap();
    // One sector too long for the file.
    let e = open(file_len - 1024, 1536, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("shorter"), "{e}");
    // Not whole sectors.
    let e = open(0, 1000, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // Overflow.
    let e = open(u64::MAX - 511, 1024, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = open(0, 1024, Some(0)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn volume_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Volume>();
}

/// Writes `prefix` then a large write that cannot fit; checks the large write fails and the
/// prefix (and a later small write's neighbours) read back intact.
fn fill_until_error(path: &Path, size: u64) -> std::io::Error {
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 512,
        large_iv: false,
        iv_offset: 0,
        data_offset: 4096,
        sectors: size / 512,
    };
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(7) ^ 0x3c).collect();
    let open = || {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        Volume::new(
            file,
            cfg.cipher(&key),
            cfg.data_offset,
            size,
            0,
            EngineOptions {
                threads: Some(2),
                read_only: false,
                chunk_bytes: Some(64 * 1024),
            },
        )
        .unwrap()
    };
    let vol = open();
    let prefix: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    vol.write_at(&prefix, 0).unwrap();
    vol.flush().unwrap();
    let big = vec![0x77u8; (size - 300_000) as usize];
    let err = vol
        .write_at(&big, 300_000 - 17)
        .expect_err("a write larger than the free space must fail");
    // A small unaligned write into a hole that cannot be allocated fails too or succeeds;
    // either way the prefix is intact.
    let _ = vol.write_at(&[1, 2, 3], size - 700);
    let mut back = vec![0; prefix.len()];
    vol.read_at(&mut back, 0).unwrap();
    assert!(
        back == prefix,
        "data written before the disk filled is intact"
    );
    drop(vol);
    // And through a fresh engine.
    let vol = open();
    let mut back = vec![0; prefix.len()];
    vol.read_at(&mut back, 0).unwrap();
    assert!(back == prefix, "intact after reopening");
    err
}

struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let ok = std::process::Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a failed assertion with the file open): detach it lazily.
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
}

#[test]
fn full_disk_returns_enospc_and_keeps_written_data() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m"])
        .arg("tmpfs")
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        eprintln!("skipped: cannot mount a 1 MiB tmpfs here (needs root / CAP_SYS_ADMIN)");
        return;
    }
    let _guard = Unmount(mnt.clone());
    let path = mnt.join("volume.img");
    let size = 4 << 20;
    // A sparse file larger than the file system.
    File::create(&path).unwrap().set_len(4096 + size).unwrap();
    let err = fill_until_error(&path, size);
    assert_eq!(err.raw_os_error(), Some(28), "ENOSPC expected, got {err}");
}

#[test]
fn file_size_limit_returns_efbig_and_keeps_written_data() {
    // RLIMIT_FSIZE in a child process (SIGXFSZ ignored, so the write fails with EFBIG).
    if std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: prlimit (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("volume.img");
    let size: u64 = 2 << 20;
    File::create(&path).unwrap().set_len(4096 + size).unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; exec prlimit --fsize=1048576 -- "$@""#)
        .arg("sh")
        .arg(&exe)
        .args([
            "--ignored",
            "--exact",
            "file_size_limit_child",
            "--nocapture",
        ])
        .env("SECTORCRYPT_FSIZE_CHILD", &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed: {stdout}\n{stderr}"
    );
    assert!(stderr.contains("child saw EFBIG"), "{stderr}");
}

#[test]
#[ignore = "run by file_size_limit_returns_efbig_and_keeps_written_data under prlimit"]
fn file_size_limit_child() {
    let Some(path) = std::env::var_os("SECTORCRYPT_FSIZE_CHILD").map(PathBuf::from) else {
        eprintln!("skipped: runs only as the child of file_size_limit_returns_efbig_...");
        return;
    };
    let size = std::fs::metadata(&path).unwrap().len() - 4096;
    let err = fill_until_error(&path, size);
    assert_eq!(err.raw_os_error(), Some(27), "EFBIG expected, got {err}");
    eprintln!("child saw EFBIG");
}

struct LoopDevice(String);

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

#[test]
fn block_device_through_a_loop_device() {
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 4096,
        large_iv: false,
        iv_offset: 8,
        data_offset: 8192,
        sectors: 255,
    };
    // The fixture file is data_offset + size + 1000 bytes; a loop device wants whole
    // 512-byte sectors, so the backing file is cut to data_offset + size.
    let fx = Fixture::new(cfg, 60);
    let end = cfg.data_offset + cfg.size();
    OpenOptions::new()
        .write(true)
        .open(&fx.path)
        .unwrap()
        .set_len(end)
        .unwrap();
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&fx.path)
        .output();
    let dev = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => {
            eprintln!(
                "skipped: losetup failed (needs root and loop devices): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: losetup not available: {e}");
            return;
        }
    };
    let _guard = LoopDevice(dev.clone());
    let open = |size: u64| {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&dev)
            .unwrap();
        Volume::new(
            file,
            cfg.cipher(&fx.key),
            cfg.data_offset,
            size,
            cfg.iv_offset,
            EngineOptions {
                threads: Some(2),
                read_only: false,
                chunk_bytes: Some(64 * 1024),
            },
        )
    };
    // The device's length (metadata says 0 for block devices) bounds the volume.
    let e = open(cfg.size() + 4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{e}");
    let vol = open(cfg.size()).unwrap();
    let mut model = fx.plaintext();
    let mut rng = rand::rngs::StdRng::seed_from_u64(61);
    for (off, len) in [(0u64, cfg.size() as usize), (4095, 3), (100_000, 500_000)] {
        let mut data = vec![0; len];
        fill(&mut rng, &mut data);
        vol.write_at(&data, off).unwrap();
        model[off as usize..][..len].copy_from_slice(&data);
    }
    vol.flush().unwrap();
    let mut all = vec![0; cfg.size() as usize];
    vol.read_at(&mut all, 0).unwrap();
    assert!(all == model, "reads back through the device");
    drop(vol);
    drop(_guard);
    assert!(
        fx.plaintext() == model,
        "the backing file holds the ciphertext"
    );
}

#[test]
fn callers_inside_another_rayon_pool_are_served() {
    // An NBD server might serve requests from rayon's global pool: the engine's scope then
    // waits from a worker of another pool. Every request must complete, byte-exact.
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 512,
        large_iv: false,
        iv_offset: 0,
        data_offset: 0,
        sectors: 8192, // 4 MiB
    };
    let fx = Fixture::new(cfg, 70);
    let vol = fx.open(EngineOptions {
        threads: Some(2),
        read_only: false,
        chunk_bytes: Some(32 * 1024),
    });
    let model = fx.plaintext();
    let outer = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    outer.install(|| {
        use rayon::prelude::*;
        (0..64u64).into_par_iter().for_each(|i| {
            let off = (i * 61_000) % (cfg.size() - 300_000);
            let mut buf = vec![0; 300_000];
            vol.read_at(&mut buf, off).unwrap();
            assert!(buf == model[off as usize..][..300_000], "request {i}");
            vol.write_at(&buf, off).unwrap();
        });
    });
    assert!(fx.plaintext() == model);
}

/// A reader that yields `data` in uneven pieces, then fails if `fail` says so.
struct Uneven {
    data: Vec<u8>,
    at: usize,
    fail: bool,
    calls: usize,
}

impl std::io::Read for Uneven {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.data.len() {
            return if self.fail {
                Err(std::io::Error::other("the input broke"))
            } else {
                Ok(0)
            };
        }
        // 1, 1000, 70000, ... bytes at a time, and an interruption now and then.
        self.calls += 1;
        if self.calls % 7 == 3 {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let step = [1, 1000, 70_000, 3_000_000][self.calls % 4];
        let n = step.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn pipe_fixture(seed: u64) -> (Fixture, Volume) {
    let cfg = Config {
        spec: "aes-xts-plain64",
        key_len: 64,
        sector: 512,
        large_iv: false,
        iv_offset: 9,
        data_offset: 4096,
        sectors: 48 * 1024, // 24 MiB: several 8 MiB pieces
    };
    let fx = Fixture::new(cfg, seed);
    let vol = fx.open(EngineOptions {
        threads: Some(2),
        ..EngineOptions::default()
    });
    (fx, vol)
}

#[test]
fn write_from_a_reader_stores_everything_byte_exact() {
    let (fx, vol) = pipe_fixture(90);
    let mut model = fx.plaintext();
    let mut rng = rand::rngs::StdRng::seed_from_u64(91);
    for (off, len) in [(0u64, 0usize), (777, 20 << 20), (0, 24 << 20), (5, 1)] {
        let mut data = vec![0; len];
        fill(&mut rng, &mut data);
        let mut input = Uneven {
            data: data.clone(),
            at: 0,
            fail: false,
            calls: 0,
        };
        let n = vol.write_from(&mut input, off).unwrap();
        assert_eq!(n, len as u64);
        model[off as usize..][..len].copy_from_slice(&data);
        assert!(fx.plaintext() == model, "write_from {off}+{len}");
    }
    // Too long: what fits is stored, then an error.
    let size = vol.size();
    let mut data = vec![0; 3 << 20];
    fill(&mut rng, &mut data);
    let off = size - (1 << 20) - 3;
    let e = vol.write_from(&mut &data[..], off).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("beyond the end"), "{e}");
    model[off as usize..].copy_from_slice(&data[..(size - off) as usize]);
    assert!(fx.plaintext() == model, "what fits was stored");
    // A failing reader: its error, and what it gave before is stored.
    let mut data = vec![0; 9 << 20];
    fill(&mut rng, &mut data);
    let mut input = Uneven {
        data: data.clone(),
        at: 0,
        fail: true,
        calls: 0,
    };
    let e = vol.write_from(&mut input, 100).unwrap_err();
    assert!(e.to_string().contains("the input broke"), "{e}");
    model[100..][..data.len()].copy_from_slice(&data);
    assert!(
        fx.plaintext() == model,
        "the input before the failure was stored"
    );
    drop(vol);
    let ro = fx.open(EngineOptions {
        read_only: true,
        ..EngineOptions::default()
    });
    let e = ro.write_from(&mut &[1u8][..], 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
}

/// A writer that accepts `limit` bytes, then fails like a closed pipe.
struct Closing {
    got: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Closing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.got.len() >= self.limit {
            return Err(ErrorKind::BrokenPipe.into());
        }
        let n = buf.len().min(self.limit - self.got.len()).min(100_000);
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn read_to_a_writer_gives_the_plaintext_and_its_errors() {
    let (fx, vol) = pipe_fixture(92);
    let model = fx.plaintext();
    for (off, len) in [
        (0u64, 0u64),
        (0, vol.size()),
        (513, 17 << 20),
        (vol.size() - 1, 1),
    ] {
        let mut out = Vec::new();
        vol.read_to(&mut out, off, len).unwrap();
        assert!(
            out == model[off as usize..][..len as usize],
            "read_to {off}+{len}"
        );
    }
    let mut closing = Closing {
        got: Vec::new(),
        limit: 10 << 20,
    };
    let e = vol.read_to(&mut closing, 3, 20 << 20).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BrokenPipe);
    assert!(closing.got == model[3..][..10 << 20]);
    let e = vol.read_to(&mut Vec::new(), vol.size() - 5, 6).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}
