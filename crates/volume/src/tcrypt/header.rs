//! The VeraCrypt/TrueCrypt volume header: where it lies, how its key is derived (the
//! PBKDF2 table and VeraCrypt's Argon2id, with VeraCrypt's PIM formulas, the keyfile
//! pool), which cipher chains may encrypt it, and the fields of a decrypted header with
//! their two CRC-32s.
//!
//! Facts from VeraCrypt's `Volumes.c`/`Volumes.h`/`Pkcs5.c`/`Keyfiles.c` and its format
//! specification, and from cryptsetup's `lib/tcrypt/` (the oracle for what is tried and in
//! which order); /work/shared/research/foreign-formats.md sections 1.1 to 1.6 cites them.

use crate::error::{Error, Result};
use sectorcrypt_crypto::cascade::Layer;
pub use sectorcrypt_crypto::pbkdf::Prf;
use zeroize::Zeroizing;

/// Bytes of a header: 64 of salt, then 448 encrypted.
pub const HEADER_LEN: usize = 512;
/// Bytes of the salt at the start of a header.
pub const SALT_LEN: usize = 64;
/// Bytes PBKDF2 derives: the largest cascade's keys (three ciphers, two 32-byte keys each).
pub const DERIVED_LEN: usize = 192;
/// Where the master keys start in a header (all primary keys, then all secondary keys).
pub const KEYS_AT: usize = 256;
/// The keyfile pool of TrueCrypt and of VeraCrypt with passphrases of up to 64 bytes.
const POOL_LEN: usize = 64;
/// VeraCrypt's keyfile pool (and longest passphrase) when the passphrase is longer.
const VERA_POOL_LEN: usize = 128;
/// Bytes of a keyfile that count (VeraCrypt reads the first 1 MiB).
const KEYFILE_LEN: usize = 1 << 20;

/// The header offset of a system-encrypted drive: the last sector of the first track.
pub const SYSTEM_HEADER_AT: u64 = 31_744;
/// Where a hidden volume's header is, from the start.
pub const HIDDEN_HEADER_AT: u64 = 65_536;
/// TrueCrypt 5 and older: the hidden header 1536 bytes before the end.
pub const HIDDEN_LEGACY_FROM_END: u64 = 1_536;
/// The backup header, this far before the end.
pub const BACKUP_FROM_END: u64 = 131_072;
/// The backup hidden-volume header, this far before the end.
pub const BACKUP_HIDDEN_FROM_END: u64 = 65_536;

/// Which volumes a KDF row serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// TrueCrypt (no PIM).
    TrueCrypt,
    /// TrueCrypt 4.3 and older only (CBC and LRW volumes: [`super::legacy`]).
    TrueCryptLegacy,
    /// VeraCrypt, any volume: iterations `15000 + 1000 * PIM` with a PIM.
    VeraCrypt,
    /// VeraCrypt's MBR boot loader (system volumes only): `2048 * PIM` with a PIM.
    VeraCryptBoot,
}

/// The function of a KDF row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// PBKDF2-HMAC with this hash.
    Pbkdf2(Prf),
    /// Argon2id (version 0x13), one lane, the memory cost from the PIM
    /// ([`argon2id_costs`]).
    Argon2id,
}

/// One way a header key is derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kdf {
    /// PBKDF2 and its hash, or Argon2id.
    pub function: Function,
    /// Iterations (Argon2id: passes) without a PIM.
    pub iterations: u32,
    /// Which volumes use it.
    pub made: Made,
}

const fn kdf(prf: Prf, iterations: u32, made: Made) -> Kdf {
    Kdf {
        function: Function::Pbkdf2(prf),
        iterations,
        made,
    }
}

/// VeraCrypt's Argon2id row: 6 passes of 416 MiB without a PIM (the costs of PIM 12).
const ARGON2ID: Kdf = Kdf {
    function: Function::Argon2id,
    iterations: 6,
    made: Made::VeraCrypt,
};

/// Argon2id's memory cost without a PIM, in KiB: 416 MiB (cryptsetup's `tcrypt_kdf[]`).
pub const ARGON2ID_MEMORY_KIB: u32 = 416 * 1024;
/// Argon2id's largest memory cost, in KiB: 1 GiB (any PIM above 31).
pub const ARGON2ID_MAX_MEMORY_KIB: u32 = 1024 * 1024;

/// VeraCrypt's Argon2id costs for `pim`: (passes, memory in KiB), always one lane. PIM 1
/// to 31: `3 + (PIM - 1) / 3` passes of `64 + 32 * (PIM - 1)` MiB; above 31: `PIM - 18`
/// passes (13 + (PIM - 31)) of 1 GiB. No PIM: 6 passes of 416 MiB, as PIM 12. From
/// VeraCrypt's PIM documentation and cryptsetup's `lib/tcrypt/tcrypt.c`
/// (`TCRYPT_init_hdr`).
pub fn argon2id_costs(pim: Option<u32>) -> (u32, u32) {
    match pim {
        None => (ARGON2ID.iterations, ARGON2ID_MEMORY_KIB),
        Some(p) if p <= 31 => {
            let p = p.max(1);
            (3 + (p - 1) / 3, 1024 * (64 + 32 * (p - 1)))
        }
        Some(p) => (p - 18, ARGON2ID_MAX_MEMORY_KIB),
    }
}

/// The KDFs, in the order cryptsetup tries them (TrueCrypt's first; SHA-1 serves TrueCrypt
/// 4.3 and older, CBC and LRW volumes, only; Argon2id after the SHA-256 rows).
pub const KDFS: &[Kdf] = &[
    kdf(Prf::Ripemd160, 2_000, Made::TrueCrypt),
    kdf(Prf::Ripemd160, 1_000, Made::TrueCrypt),
    kdf(Prf::Sha512, 1_000, Made::TrueCrypt),
    kdf(Prf::Whirlpool, 1_000, Made::TrueCrypt),
    kdf(Prf::Sha1, 2_000, Made::TrueCryptLegacy),
    kdf(Prf::Sha512, 500_000, Made::VeraCrypt),
    kdf(Prf::Whirlpool, 500_000, Made::VeraCrypt),
    kdf(Prf::Sha256, 500_000, Made::VeraCrypt),
    kdf(Prf::Sha256, 200_000, Made::VeraCryptBoot),
    ARGON2ID,
    kdf(Prf::Blake2s256, 500_000, Made::VeraCrypt),
    kdf(Prf::Blake2s256, 200_000, Made::VeraCryptBoot),
    kdf(Prf::Ripemd160, 655_331, Made::VeraCrypt),
    kdf(Prf::Ripemd160, 327_661, Made::VeraCryptBoot),
    kdf(Prf::Streebog512, 500_000, Made::VeraCrypt),
];

impl Kdf {
    /// The iterations (Argon2id: passes) with `pim` (VeraCrypt rows only; `None` keeps
    /// the default).
    pub fn rounds(&self, pim: Option<u32>) -> u32 {
        match (pim, self.made, self.function) {
            (_, _, Function::Argon2id) => argon2id_costs(pim).0,
            (Some(p), Made::VeraCrypt, _) => 15_000u32.saturating_add(p.saturating_mul(1_000)),
            (Some(p), Made::VeraCryptBoot, _) => p.saturating_mul(2_048),
            _ => self.iterations,
        }
    }

    /// The memory cost in KiB with `pim` (Argon2id; `None` for PBKDF2).
    pub fn memory_kib(&self, pim: Option<u32>) -> Option<u32> {
        match self.function {
            Function::Argon2id => Some(argon2id_costs(pim).1),
            Function::Pbkdf2(_) => None,
        }
    }

    /// The name `--hash` matches: the PBKDF2 hash's (`sha512`, ...) or `argon2id`, as
    /// cryptsetup matches its KDF table.
    pub fn name(&self) -> &'static str {
        match self.function {
            Function::Pbkdf2(prf) => prf.name(),
            Function::Argon2id => "argon2id",
        }
    }

    /// Derives the 192-byte header key of `password` (the keyfile pool with the
    /// passphrase) and the header's 64-byte `salt` with `pim`. Argon2id holds its memory
    /// cost (up to 1 GiB) while it runs, and frees it before this returns.
    pub fn derive(
        &self,
        password: &[u8],
        salt: &[u8],
        pim: Option<u32>,
    ) -> Result<Zeroizing<Vec<u8>>> {
        let mut out = Zeroizing::new(vec![0u8; DERIVED_LEN]);
        match self.function {
            Function::Pbkdf2(prf) => prf.pbkdf2(password, salt, self.rounds(pim), &mut out),
            Function::Argon2id => {
                let (time, memory_kib) = argon2id_costs(pim);
                let argon2 = crate::kdf::Kdf::Argon2 {
                    kind: crate::kdf::KdfKind::Argon2id,
                    time,
                    memory_kib,
                    parallel: 1,
                };
                argon2.derive(password, salt, &mut out)?;
            }
        }
        Ok(out)
    }
}

/// A cipher chain of XTS layers, named as cryptsetup names it (the layers in the order they
/// encrypt; VeraCrypt displays the reverse: `serpent-twofish-aes` is "AES-Twofish-Serpent").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    /// cryptsetup's name.
    pub name: &'static str,
    /// The layers, in encryption order.
    pub layers: &'static [Layer],
}

const fn chain(name: &'static str, layers: &'static [Layer]) -> Chain {
    Chain { name, layers }
}

/// The XTS chains, in the order cryptsetup tries them.
pub const CHAINS: &[Chain] = {
    use Layer::*;
    &[
        chain("aes", &[Aes]),
        chain("serpent", &[Serpent]),
        chain("twofish", &[Twofish]),
        chain("twofish-aes", &[Twofish, Aes]),
        chain("serpent-twofish-aes", &[Serpent, Twofish, Aes]),
        chain("aes-serpent", &[Aes, Serpent]),
        chain("aes-twofish-serpent", &[Aes, Twofish, Serpent]),
        chain("serpent-twofish", &[Serpent, Twofish]),
        chain("camellia", &[Camellia]),
        chain("kuznyechik", &[Kuznyechik]),
        chain("kuznyechik-camellia", &[Kuznyechik, Camellia]),
        chain("twofish-kuznyechik", &[Twofish, Kuznyechik]),
        chain("serpent-camellia", &[Serpent, Camellia]),
        chain("aes-kuznyechik", &[Aes, Kuznyechik]),
        chain(
            "camellia-serpent-kuznyechik",
            &[Camellia, Serpent, Kuznyechik],
        ),
    ]
};

impl Chain {
    /// The master-key bytes the chain uses.
    pub fn key_len(&self) -> usize {
        64 * self.layers.len()
    }
}

/// CRC-32 (IEEE, reflected) of `data` continued from the raw register `crc` (no final
/// inversion): what VeraCrypt's keyfile pool takes after each byte.
fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    crc
}

/// CRC-32 as zlib computes it.
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_update(!0, data)
}

/// The password PBKDF2 is given: `passphrase` alone, or with keyfiles the keyfile pool
/// (each keyfile's first MiB through a running CRC-32 whose four bytes are added, most
/// significant first, at a cursor wrapping around the pool) with the passphrase added
/// byte by byte. The pool is 64 bytes, or 128 when the passphrase is longer than 64 bytes
/// and VeraCrypt is allowed. A passphrase longer than the pool is refused.
pub fn password(
    passphrase: &[u8],
    keyfiles: &[Zeroizing<Vec<u8>>],
    veracrypt: bool,
) -> Result<Zeroizing<Vec<u8>>> {
    let pool_len = if veracrypt && passphrase.len() > POOL_LEN {
        VERA_POOL_LEN
    } else {
        POOL_LEN
    };
    if passphrase.len() > pool_len {
        return Err(Error::invalid(format!(
            "the passphrase has {} bytes; {} volumes take at most {pool_len}",
            passphrase.len(),
            if veracrypt { "VeraCrypt" } else { "TrueCrypt" }
        )));
    }
    if keyfiles.is_empty() {
        return Ok(Zeroizing::new(passphrase.to_vec()));
    }
    let mut pool = Zeroizing::new(vec![0u8; pool_len]);
    for file in keyfiles {
        let mut crc = !0u32;
        let mut at = 0usize;
        for b in file.iter().take(KEYFILE_LEN) {
            crc = crc32_update(crc, std::slice::from_ref(b));
            for byte in crc.to_be_bytes() {
                pool[at] = pool[at].wrapping_add(byte);
                at += 1;
            }
            at %= pool_len;
        }
    }
    for (p, b) in pool.iter_mut().zip(passphrase) {
        *p = p.wrapping_add(*b);
    }
    Ok(pool)
}

/// The fields of a decrypted header (big-endian on disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    /// `VERA` or `TRUE`.
    pub magic: [u8; 4],
    /// Header format version (5 for TrueCrypt 7 and VeraCrypt).
    pub version: u16,
    /// The oldest program version that opens it (BCD: 0x010b is 1.11).
    pub min_program: u16,
    /// Size of the hidden volume this outer volume holds (0 when none or unknown).
    pub hidden_size: u64,
    /// Bytes of the volume.
    pub volume_size: u64,
    /// Where the encrypted data starts, in the host (512 when the field is 0).
    pub mk_offset: u64,
    /// Bytes of the encrypted area.
    pub mk_size: u64,
    /// Flags: bit 0 system encryption, bit 1 in-place encrypted non-system volume.
    pub flags: u32,
    /// Sector size (512 when the field is 0).
    pub sector_size: u32,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl Fields {
    /// The fields of the decrypted header `h`, when its magic and CRC-32s are right (the
    /// header CRC is checked from version 4 on, as VeraCrypt and cryptsetup do); `None`
    /// otherwise: the key or the cipher was wrong.
    pub fn parse(h: &[u8; HEADER_LEN]) -> Option<Fields> {
        let magic = [h[64], h[65], h[66], h[67]];
        if &magic != b"VERA" && &magic != b"TRUE" {
            return None;
        }
        let version = be16(h, 68);
        if crc32(&h[KEYS_AT..]) != be32(h, 72) {
            return None;
        }
        if version > 3 && crc32(&h[64..252]) != be32(h, 252) {
            return None;
        }
        let mk_offset = match be64(h, 108) {
            0 => 512,
            n => n,
        };
        let sector_size = match be32(h, 128) {
            0 => 512,
            n => n,
        };
        Some(Fields {
            magic,
            version,
            min_program: be16(h, 70),
            hidden_size: be64(h, 92),
            volume_size: be64(h, 100),
            mk_offset,
            mk_size: be64(h, 116),
            flags: be32(h, 124),
            sector_size,
        })
    }

    /// The plaintext header for these fields and the master keys `keys` (up to 256 bytes,
    /// written from byte 256 on; the rest of that area is zero): magic, version and the
    /// sizes big-endian at the offsets [`Fields::parse`] reads, both CRC-32s filled in.
    /// The salt area (bytes 0..64) is left zero for the caller, who writes the salt there
    /// and encrypts bytes 64..512 with the header key.
    pub fn encode(&self, keys: &[u8]) -> Option<Zeroizing<[u8; HEADER_LEN]>> {
        if keys.len() > HEADER_LEN - KEYS_AT {
            return None;
        }
        let mut h = Zeroizing::new([0u8; HEADER_LEN]);
        h[64..68].copy_from_slice(&self.magic);
        h[68..70].copy_from_slice(&self.version.to_be_bytes());
        h[70..72].copy_from_slice(&self.min_program.to_be_bytes());
        h[92..100].copy_from_slice(&self.hidden_size.to_be_bytes());
        h[100..108].copy_from_slice(&self.volume_size.to_be_bytes());
        h[108..116].copy_from_slice(&self.mk_offset.to_be_bytes());
        h[116..124].copy_from_slice(&self.mk_size.to_be_bytes());
        h[124..128].copy_from_slice(&self.flags.to_be_bytes());
        h[128..132].copy_from_slice(&self.sector_size.to_be_bytes());
        h[KEYS_AT..KEYS_AT + keys.len()].copy_from_slice(keys);
        let keys_crc = crc32(&h[KEYS_AT..]);
        h[72..76].copy_from_slice(&keys_crc.to_be_bytes());
        let header_crc = crc32(&h[64..252]);
        h[252..256].copy_from_slice(&header_crc.to_be_bytes());
        Some(h)
    }

    /// `VERA` or `TRUE`, as text.
    pub fn magic_str(&self) -> &'static str {
        if &self.magic == b"VERA" {
            "VERA"
        } else {
            "TRUE"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_check_value() {
        // The CRC-32 check value of "123456789".
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn pim_iterations_follow_veracrypt() {
        let row = |prf, made| {
            *KDFS
                .iter()
                .find(|k| k.function == Function::Pbkdf2(prf) && k.made == made)
                .unwrap()
        };
        let sha512 = row(Prf::Sha512, Made::VeraCrypt);
        assert_eq!(sha512.rounds(None), 500_000);
        assert_eq!(sha512.rounds(Some(485)), 500_000);
        let boot = row(Prf::Sha256, Made::VeraCryptBoot);
        assert_eq!(boot.rounds(Some(98)), 200_704);
        assert_eq!(KDFS[0].rounds(Some(5)), 2_000);
    }

    /// VeraCrypt's Argon2id costs ("Personal Iterations Multiplier (PIM)" in its
    /// documentation; cryptsetup's `TCRYPT_init_hdr`): PIM 1 to 31 grow the memory by
    /// 32 MiB from 64 MiB and the passes by one every three PIMs from 3; from PIM 32 on
    /// the memory stays at 1 GiB and each PIM adds a pass; no PIM costs as PIM 12.
    #[test]
    fn argon2id_costs_follow_the_pim_as_veracrypt_defines_them() {
        let mib = |m: u32| m * 1024;
        let table = [
            (1, 3, mib(64)),
            (2, 3, mib(96)),
            (3, 3, mib(128)),
            (4, 4, mib(160)),
            (8, 5, mib(288)),
            (12, 6, mib(416)),
            (30, 12, mib(992)),
            (31, 13, mib(1024)),
            (32, 14, mib(1024)),
            (33, 15, mib(1024)),
            (100, 82, mib(1024)),
        ];
        for (pim, passes, kib) in table {
            assert_eq!(argon2id_costs(Some(pim)), (passes, kib), "PIM {pim}");
        }
        assert_eq!(argon2id_costs(None), argon2id_costs(Some(12)));
        assert_eq!(argon2id_costs(None), (6, 425_984));
        // The table row: one lane, found by `--hash argon2id`, its costs from the PIM.
        let row: Vec<&Kdf> = KDFS.iter().filter(|k| k.name() == "argon2id").collect();
        assert_eq!(row.len(), 1);
        assert_eq!(row[0].made, Made::VeraCrypt);
        assert_eq!(row[0].rounds(None), 6);
        assert_eq!(row[0].rounds(Some(33)), 15);
        assert_eq!(row[0].memory_kib(Some(8)), Some(mib(288)));
        assert_eq!(KDFS[4].memory_kib(Some(8)), None);
    }

    /// Argon2id is the RustCrypto crate's under the costs of the PIM: the same bytes as
    /// the crate's KDF module gives for them (one lane, 192 bytes, the 64-byte salt).
    #[test]
    fn argon2id_derives_with_the_pim_costs() {
        let row = KDFS.iter().find(|k| k.name() == "argon2id").unwrap();
        let salt = [7u8; SALT_LEN];
        let got = row.derive(b"pool", &salt, Some(1)).unwrap();
        assert_eq!(got.len(), DERIVED_LEN);
        let mut want = [0u8; DERIVED_LEN];
        crate::kdf::Kdf::Argon2 {
            kind: crate::kdf::KdfKind::Argon2id,
            time: 3,
            memory_kib: 64 * 1024,
            parallel: 1,
        }
        .derive(b"pool", &salt, &mut want)
        .unwrap();
        assert_eq!(&got[..], &want[..]);
    }

    #[test]
    fn keyfile_pool_adds_the_crc_bytes() {
        // One keyfile of one byte 0x00: the CRC register after it is 0x2dfd1072, its
        // bytes added at the start of the pool; the passphrase "a" is added on top.
        let pw = password(b"a", &[Zeroizing::new(vec![0])], true).unwrap();
        assert_eq!(pw.len(), 64);
        assert_eq!(&pw[..4], &[0x2d + b'a', 0xfd, 0x10, 0x72]);
        assert!(pw[4..].iter().all(|&b| b == 0));
        // Order does not matter (addition commutes).
        let a = Zeroizing::new(b"first".to_vec());
        let b = Zeroizing::new(b"second keyfile".to_vec());
        assert_eq!(
            password(b"x", &[a.clone(), b.clone()], true).unwrap(),
            password(b"x", &[b, a], true).unwrap()
        );
    }

    #[test]
    fn encoded_headers_parse_back() {
        let f = Fields {
            magic: *b"VERA",
            version: 5,
            min_program: 0x010b,
            hidden_size: 0,
            volume_size: 1 << 20,
            mk_offset: 131_072,
            mk_size: 1 << 20,
            flags: 0,
            sector_size: 512,
        };
        let keys = [0x5au8; 64];
        let h = f.encode(&keys).unwrap();
        assert_eq!(Fields::parse(&h), Some(f.clone()));
        assert_eq!(&h[KEYS_AT..KEYS_AT + 64], &keys[..]);
        assert!(
            h[..64].iter().all(|&b| b == 0),
            "the salt area is the caller's"
        );
        // A changed key byte breaks the keys' CRC, so the header no longer parses.
        let mut bad = *h;
        bad[KEYS_AT] ^= 1;
        assert_eq!(Fields::parse(&bad), None);
        assert!(f.encode(&[0u8; 257]).is_none());
    }

    #[test]
    fn long_passphrases_need_veracrypt() {
        assert!(password(&[b'a'; 72], &[], true).is_ok());
        assert!(password(&[b'a'; 72], &[], false).is_err());
        assert!(password(&[b'a'; 129], &[], true).is_err());
    }
}
