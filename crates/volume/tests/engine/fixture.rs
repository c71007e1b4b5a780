//! Volumes on temporary files and the two references the engine is checked against:
//! `SectorCipher` applied directly to the file's data area, and OpenSSL sector by sector.

use openssl::symm::Mode;
use rand::{RngCore, SeedableRng};
use sectorcrypt_crypto::{
    aes::Ctr,
    dmcrypt::{CipherSpec, SectorCipher, SectorLayout},
};
use sectorcrypt_testkit::reference;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::{FileStore, Geometry, IvRule, Layout};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// One volume configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub spec: &'static str,
    pub key_len: usize,
    pub sector: usize,
    pub large_iv: bool,
    pub iv_offset: u64,
    pub data_offset: u64,
    pub sectors: u64,
}

impl Config {
    /// aes-xts-plain64 with a 512-bit key, `sectors` sectors of `sector` bytes from offset
    /// 0, IVs in 512-byte units from 0.
    pub fn xts(sector: usize, sectors: u64) -> Config {
        Config {
            spec: "aes-xts-plain64",
            key_len: 64,
            sector,
            large_iv: false,
            iv_offset: 0,
            data_offset: 0,
            sectors,
        }
    }

    /// The same with the data at `data_offset` and IV number `iv_offset` for sector 0.
    pub fn at(self, data_offset: u64, iv_offset: u64) -> Config {
        Config {
            data_offset,
            iv_offset,
            ..self
        }
    }

    pub fn size(&self) -> u64 {
        self.sectors * self.sector as u64
    }

    pub fn cipher(&self, key: &[u8]) -> SectorCipher {
        let spec: CipherSpec = self.spec.parse().unwrap();
        let layout = SectorLayout::new(self.sector, self.large_iv).unwrap();
        SectorCipher::new(spec, key, layout).unwrap()
    }

    pub fn iv_rule(&self) -> IvRule {
        if self.large_iv {
            IvRule::Sectors {
                first: self.iv_offset,
            }
        } else {
            IvRule::Units512 {
                first: self.iv_offset,
            }
        }
    }

    /// The engine's layout of this configuration with `size` bytes of data.
    pub fn layout_of(
        &self,
        key: &[u8],
        data_offset: u64,
        size: u64,
    ) -> sectorcrypt_volume::Result<Layout> {
        let geometry = Geometry {
            sector_size: self.sector,
            data_offset,
            size,
            iv: self.iv_rule(),
            metadata: None,
        };
        Layout::single(geometry, self.spec.parse().unwrap(), key)
    }
}

/// Engine options with `threads` and a chunk size.
pub fn engine(threads: usize, chunk_bytes: Option<usize>) -> EngineOptions {
    EngineOptions {
        threads: Some(threads),
        read_only: false,
        chunk_bytes,
    }
}

/// Read-only engine options.
pub fn read_only() -> EngineOptions {
    EngineOptions {
        read_only: true,
        ..EngineOptions::default()
    }
}

/// Opens `path` read-write as a store.
pub fn store(path: &Path, write: bool) -> Box<FileStore> {
    Box::new(FileStore::open(path, write).unwrap())
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub cfg: Config,
    pub key: Vec<u8>,
}

impl Fixture {
    /// A file of random bytes holding the data area after `data_offset` random bytes and
    /// followed by 1000 random bytes (which must never change).
    pub fn new(cfg: Config, seed: u64) -> Fixture {
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

    /// A small aes-xts-plain64 volume of 16 sectors of 512 bytes at offset 512.
    pub fn small(seed: u64) -> Fixture {
        let cfg = Config {
            data_offset: 512,
            ..Config::xts(512, 16)
        };
        Fixture::new(cfg, seed)
    }

    pub fn open(&self, opts: EngineOptions) -> Volume {
        let layout = self
            .cfg
            .layout_of(&self.key, self.cfg.data_offset, self.cfg.size())
            .unwrap();
        Volume::new(store(&self.path, !opts.read_only), layout, opts).unwrap()
    }

    pub fn raw(&self) -> Vec<u8> {
        std::fs::read(&self.path).unwrap()
    }

    /// The data area decrypted by `SectorCipher` directly, all at once.
    pub fn plaintext(&self) -> Vec<u8> {
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
    pub fn plaintext_openssl(&self) -> Vec<u8> {
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
            out.extend(openssl_decrypt_sector(cfg.spec, &self.key, number, sector));
        }
        out
    }
}

/// Fills `buf` with pseudo-random bytes fast (an AES-CTR keystream keyed from `rng`): the
/// tests run unoptimised, where `rand` fills only tens of MB/s.
pub fn fill(rng: &mut impl RngCore, buf: &mut [u8]) {
    let mut key = [0u8; 32];
    let mut iv = [0u8; 16];
    rng.fill_bytes(&mut key);
    rng.fill_bytes(&mut iv);
    buf.fill(0);
    Ctr::new(&key).unwrap().apply_keystream(&iv, 0, buf);
}

/// `len` random bytes from `rng`.
pub fn random_bytes(rng: &mut impl RngCore, len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    fill(rng, &mut data);
    data
}

/// One sector decrypted by OpenSSL with IV number `number` (the testkit's dm-crypt
/// model: for XTS the number is the tweak, for CBC the IV or, with ESSIV, encrypted into
/// it).
pub fn openssl_decrypt_sector(spec: &str, key: &[u8], number: u64, sector: &[u8]) -> Vec<u8> {
    reference::dm_crypt(spec, key, sector.len(), 0, number, sector, Mode::Decrypt)
}

/// Opens a file read-write.
pub fn open_rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}
