//! The ciphers of `sectorcrypt cipher`, as one table: each name with its key lengths, its
//! IV rule, its tag rule and the options it takes ([`CIPHERS`]).
//!
//! Everything else reads this table: the `cipher` command (`commands/cipher/job.rs`) checks the
//! command line against it, the error messages that list ciphers, lengths or options are
//! built from it, and so is the `--cipher` help ([`help`]). No other code lists the ciphers; the unit
//! tests tie the table to the crypto crate (its dm-crypt strings and what its constructors
//! accept).

pub mod help;

use std::fmt;

/// The job a cipher makes (see `commands/cipher/job.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A dm-crypt cipher string: the name parses as a `CipherSpec`; whole sectors, IVs
    /// computed from `--sector`.
    Sectors,
    /// `aes-ecb`: whole 16-byte blocks, or dm-crypt sectors when a sector option is given.
    Ecb,
    /// One message in a raw AES mode with an explicit IV.
    Aes(AesMode),
    /// AES-GCM: ciphertext then tag.
    Gcm,
    /// GOST 28147-89 (little-endian), with an S-box parameter set.
    Gost89(Gost89Mode),
    /// Magma (GOST R 34.12-2015, big-endian).
    Magma(MagmaMode),
    /// Magma-MGM (RFC 9058): ciphertext then tag.
    Mgm,
    /// The GOST 28147-89 MAC (imitovstavka).
    Gost89Mac,
    /// The Magma MAC (GOST R 34.13-2015 CMAC).
    MagmaMac,
}

/// The raw AES modes that take an IV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AesMode {
    Cbc,
    Ctr,
    Xts,
}

/// The modes of GOST 28147-89.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gost89Mode {
    Ecb,
    Cnt,
    Cfb,
    Cbc,
}

/// The modes of Magma besides MGM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MagmaMode {
    Ecb,
    Ctr,
    Ofb,
    Cbc,
    Cfb,
    CtrAcpkm,
}

/// A set of byte lengths (of keys, IVs or tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lengths {
    /// Exactly these, listed in this order.
    Of(&'static [usize]),
    /// From the first to the second, both included.
    Range(usize, usize),
    /// A non-zero multiple of this.
    MultipleOf(usize),
    /// This many or more.
    AtLeast(usize),
}

impl Lengths {
    pub fn contains(self, n: usize) -> bool {
        match self {
            Lengths::Of(list) => list.contains(&n),
            Lengths::Range(lo, hi) => (lo..=hi).contains(&n),
            Lengths::MultipleOf(m) => n > 0 && n.is_multiple_of(m),
            Lengths::AtLeast(lo) => n >= lo,
        }
    }
}

/// "16, 24 or 32 bytes", "4 to 8 bytes", "a multiple of 8 bytes", "1 or more bytes".
impl fmt::Display for Lengths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Lengths::Of(list) => write!(f, "{} bytes", or_list(list)),
            Lengths::Range(lo, hi) => write!(f, "{lo} to {hi} bytes"),
            Lengths::MultipleOf(m) => write!(f, "a multiple of {m} bytes"),
            Lengths::AtLeast(lo) => write!(f, "{lo} or more bytes"),
        }
    }
}

/// Where a cipher's IV comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iv {
    /// It has none.
    None,
    /// Computed for each sector from its number (`--sector`).
    FromSector,
    /// `--iv HEX`, required, of these lengths.
    Hex(Lengths),
}

/// The tag (or MAC) lengths a cipher accepts with `--tag-len`, and its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub lengths: Lengths,
    pub default: usize,
}

/// The options whose use depends on the cipher. The others (`--key`, `--key-file`,
/// `--input`, `--output`) go with every cipher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    Iv,
    Aad,
    TagLen,
    Sbox,
    KeyMeshing,
    Sector,
    SectorSize,
    IvLargeSectors,
}

impl Flag {
    /// In the order of the command line's help, which is the order they are checked in.
    pub const ALL: [Flag; 8] = [
        Flag::Iv,
        Flag::Aad,
        Flag::TagLen,
        Flag::Sbox,
        Flag::KeyMeshing,
        Flag::Sector,
        Flag::SectorSize,
        Flag::IvLargeSectors,
    ];

    /// The options that give dm-crypt sectors.
    pub const SECTOR: [Flag; 3] = [Flag::Sector, Flag::SectorSize, Flag::IvLargeSectors];

    /// The option as typed.
    pub fn name(self) -> &'static str {
        match self {
            Flag::Iv => "--iv",
            Flag::Aad => "--aad",
            Flag::TagLen => "--tag-len",
            Flag::Sbox => "--sbox",
            Flag::KeyMeshing => "--key-meshing",
            Flag::Sector => "--sector",
            Flag::SectorSize => "--sector-size",
            Flag::IvLargeSectors => "--iv-large-sectors",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Cipher {
    /// The `--cipher` name.
    pub name: &'static str,
    pub kind: Kind,
    /// What it does, for the help.
    pub about: &'static str,
    /// The key lengths.
    pub key: Lengths,
    pub iv: Iv,
    /// Takes `--tag-len` (AEADs and MACs).
    pub tag: Option<Tag>,
    /// Takes `--aad`.
    pub aad: bool,
    /// Needs `--sbox` and takes `--key-meshing`.
    pub sbox: bool,
    /// Takes `--sector`, `--sector-size` and `--iv-large-sectors`.
    pub sectors: bool,
}

impl Cipher {
    const fn new(name: &'static str, kind: Kind, key: Lengths, iv: Iv) -> Self {
        Cipher {
            name,
            kind,
            about: "",
            key,
            iv,
            tag: None,
            aad: false,
            sbox: false,
            sectors: false,
        }
    }

    const fn about(mut self, about: &'static str) -> Self {
        self.about = about;
        self
    }

    const fn sectors(mut self) -> Self {
        self.sectors = true;
        self
    }

    const fn tag(mut self, lengths: Lengths, default: usize) -> Self {
        self.tag = Some(Tag { lengths, default });
        self
    }

    const fn aad(mut self) -> Self {
        self.aad = true;
        self
    }

    const fn sbox(mut self) -> Self {
        self.sbox = true;
        self
    }

    /// Whether `flag` applies to this cipher.
    pub fn takes(&self, flag: Flag) -> bool {
        match flag {
            Flag::Iv => matches!(self.iv, Iv::Hex(_)),
            Flag::Aad => self.aad,
            Flag::TagLen => self.tag.is_some(),
            Flag::Sbox | Flag::KeyMeshing => self.sbox,
            Flag::Sector | Flag::SectorSize | Flag::IvLargeSectors => self.sectors,
        }
    }

    /// Whether it runs under `cipher mac` (rather than `cipher encrypt|decrypt`).
    pub fn is_mac(&self) -> bool {
        matches!(self.kind, Kind::Gost89Mac | Kind::MagmaMac)
    }
}

const AES_KEY: Lengths = Lengths::Of(&[16, 24, 32]);
/// Key1 || Key2: two AES keys of the same size.
const XTS_KEY: Lengths = Lengths::Of(&[32, 48, 64]);
/// Key1 || Key2 of Kuznyechik in XTS: two 256-bit keys.
const XTS_256_KEY: Lengths = Lengths::Of(&[64]);
/// Serpent, Twofish and Camellia in CBC: 128, 192 or 256 bits.
const BLOCK_KEY: Lengths = Lengths::Of(&[16, 24, 32]);
/// Kuznyechik in CBC: 256 bits.
const KUZNYECHIK_KEY: Lengths = Lengths::Of(&[32]);
const GOST_KEY: Lengths = Lengths::Of(&[32]);
const AES_IV: Iv = Iv::Hex(Lengths::Of(&[16]));
const GOST_IV: Iv = Iv::Hex(Lengths::Of(&[8]));
/// Magma CTR and CTR-ACPKM: half a block.
const MAGMA_CTR_IV: Iv = Iv::Hex(Lengths::Of(&[4]));
/// Magma OFB, CBC and CFB: z >= 1 blocks, z interleaved chains.
const MAGMA_CHAINS_IV: Iv = Iv::Hex(Lengths::MultipleOf(8));
/// GOST MACs: the first 1 to 8 bytes of the last cipher block.
const MAC_TAG: Lengths = Lengths::Range(1, 8);

/// Every cipher of `sectorcrypt cipher`, in the order the help lists them.
#[rustfmt::skip]
pub const CIPHERS: &[Cipher] = &[
    // dm-crypt cipher strings (`CipherSpec::ALL`).
    Cipher::new("aes-xts-plain64", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("dm-crypt XTS"),
    Cipher::new("aes-xts-plain", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("dm-crypt XTS, 32-bit sector numbers (they wrap)"),
    Cipher::new("aes-cbc-plain64", Kind::Sectors, AES_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC"),
    Cipher::new("aes-cbc-plain", Kind::Sectors, AES_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC, 32-bit sector numbers (they wrap)"),
    Cipher::new("aes-cbc-essiv:sha256", Kind::Sectors, AES_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC, IVs encrypted under SHA-256(key)"),
    Cipher::new("aes-ecb", Kind::Ecb, AES_KEY, Iv::None).sectors()
        .about("whole 16-byte blocks; with a sector option, whole dm-crypt sectors"),
    Cipher::new("serpent-xts-plain64", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("dm-crypt XTS with Serpent"),
    Cipher::new("serpent-xts-plain", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("twofish-xts-plain64", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("dm-crypt XTS with Twofish (table lookups: not constant-time)"),
    Cipher::new("twofish-xts-plain", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("camellia-xts-plain64", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("dm-crypt XTS with Camellia"),
    Cipher::new("camellia-xts-plain", Kind::Sectors, XTS_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("kuznyechik-xts-plain64", Kind::Sectors, XTS_256_KEY, Iv::FromSector).sectors()
        .about("dm-crypt XTS with Kuznyechik (GOST R 34.12-2015)"),
    Cipher::new("kuznyechik-xts-plain", Kind::Sectors, XTS_256_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("serpent-cbc-plain64", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC with Serpent"),
    Cipher::new("serpent-cbc-plain", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("serpent-cbc-essiv:sha256", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("the same, IVs encrypted under SHA-256(key)"),
    Cipher::new("twofish-cbc-plain64", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC with Twofish (not constant-time)"),
    Cipher::new("twofish-cbc-plain", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("twofish-cbc-essiv:sha256", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("the same, IVs encrypted under SHA-256(key)"),
    Cipher::new("camellia-cbc-plain64", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC with Camellia"),
    Cipher::new("camellia-cbc-plain", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("camellia-cbc-essiv:sha256", Kind::Sectors, BLOCK_KEY, Iv::FromSector).sectors()
        .about("the same, IVs encrypted under SHA-256(key)"),
    Cipher::new("kuznyechik-cbc-plain64", Kind::Sectors, KUZNYECHIK_KEY, Iv::FromSector).sectors()
        .about("dm-crypt CBC with Kuznyechik"),
    Cipher::new("kuznyechik-cbc-plain", Kind::Sectors, KUZNYECHIK_KEY, Iv::FromSector).sectors()
        .about("the same, 32-bit sector numbers (they wrap)"),
    Cipher::new("kuznyechik-cbc-essiv:sha256", Kind::Sectors, KUZNYECHIK_KEY, Iv::FromSector).sectors()
        .about("the same, IVs encrypted under SHA-256(key)"),
    // Raw AES: the whole input is one message.
    Cipher::new("aes-cbc", Kind::Aes(AesMode::Cbc), AES_KEY, AES_IV)
        .about("one CBC chain, whole blocks"),
    Cipher::new("aes-ctr", Kind::Aes(AesMode::Ctr), AES_KEY, AES_IV)
        .about("CTR, any length"),
    Cipher::new("aes-xts", Kind::Aes(AesMode::Xts), XTS_KEY, AES_IV)
        .about("one XTS data unit of 16 bytes or more (ciphertext stealing); the IV is the tweak"),
    Cipher::new("aes-gcm", Kind::Gcm, AES_KEY, Iv::Hex(Lengths::AtLeast(1)))
        .tag(Lengths::Of(&[16, 15, 14, 13, 12, 8, 4]), 16).aad()
        .about("ciphertext then tag; the IV is 12 bytes as a rule"),
    // GOST 28147-89, little-endian, with an S-box set.
    Cipher::new("gost89-ecb", Kind::Gost89(Gost89Mode::Ecb), GOST_KEY, Iv::None).sbox()
        .about("GOST 28147-89, whole 8-byte blocks"),
    Cipher::new("gost89-cnt", Kind::Gost89(Gost89Mode::Cnt), GOST_KEY, GOST_IV).sbox()
        .about("GOST 28147-89 counter (gamming), any length"),
    Cipher::new("gost89-cfb", Kind::Gost89(Gost89Mode::Cfb), GOST_KEY, GOST_IV).sbox()
        .about("GOST 28147-89 CFB, any length"),
    Cipher::new("gost89-cbc", Kind::Gost89(Gost89Mode::Cbc), GOST_KEY, GOST_IV).sbox()
        .about("GOST 28147-89 CBC, whole 8-byte blocks"),
    Cipher::new("gost89-mac", Kind::Gost89Mac, GOST_KEY, Iv::None).sbox().tag(MAC_TAG, 4)
        .about("GOST 28147-89 MAC (imitovstavka), with `cipher mac`"),
    // Magma, big-endian.
    Cipher::new("magma-ecb", Kind::Magma(MagmaMode::Ecb), GOST_KEY, Iv::None)
        .about("Magma, whole 8-byte blocks"),
    Cipher::new("magma-ctr", Kind::Magma(MagmaMode::Ctr), GOST_KEY, MAGMA_CTR_IV)
        .about("Magma CTR, any length"),
    Cipher::new("magma-ofb", Kind::Magma(MagmaMode::Ofb), GOST_KEY, MAGMA_CHAINS_IV)
        .about("Magma OFB, any length"),
    Cipher::new("magma-cbc", Kind::Magma(MagmaMode::Cbc), GOST_KEY, MAGMA_CHAINS_IV)
        .about("Magma CBC, whole 8-byte blocks"),
    Cipher::new("magma-cfb", Kind::Magma(MagmaMode::Cfb), GOST_KEY, MAGMA_CHAINS_IV)
        .about("Magma CFB, any length"),
    Cipher::new("magma-ctr-acpkm", Kind::Magma(MagmaMode::CtrAcpkm), GOST_KEY, MAGMA_CTR_IV)
        .about("Magma CTR with a new key every 1 KiB (RFC 8645)"),
    Cipher::new("magma-mgm", Kind::Mgm, GOST_KEY, GOST_IV).tag(Lengths::Range(4, 8), 8).aad()
        .about("ciphertext then tag (RFC 9058); the IV is the nonce, its top bit 0"),
    Cipher::new("magma-mac", Kind::MagmaMac, GOST_KEY, Iv::None).tag(MAC_TAG, 8)
        .about("Magma MAC (CMAC), with `cipher mac`"),
];

/// The row named `name`.
pub fn find(name: &str) -> Option<&'static Cipher> {
    CIPHERS.iter().find(|c| c.name == name)
}

/// The names of the rows that satisfy `pred`, as "a, b or c".
pub fn names(pred: impl Fn(&Cipher) -> bool) -> String {
    let names: Vec<&str> = CIPHERS.iter().filter(|c| pred(c)).map(|c| c.name).collect();
    or_list(&names)
}

/// "a", "a or b", "a, b or c".
pub fn or_list<T: fmt::Display>(items: &[T]) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == items.len() { " or " } else { ", " });
        }
        out.push_str(&item.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sectorcrypt_crypto::dmcrypt::CipherSpec;

    #[test]
    fn the_sector_rows_are_the_crypto_crates_cipher_strings() {
        let rows: Vec<&str> = CIPHERS
            .iter()
            .filter(|c| matches!(c.kind, Kind::Sectors | Kind::Ecb))
            .map(|c| c.name)
            .collect();
        assert_eq!(rows, CipherSpec::ALL);
        for c in CIPHERS.iter().filter(|c| c.sectors) {
            let spec: CipherSpec = c.name.parse().expect("a dm-crypt string");
            assert_eq!(Lengths::Of(spec.key_lengths()), c.key, "{}", c.name);
        }
    }

    #[test]
    fn names_are_unique_and_rules_consistent() {
        for (i, c) in CIPHERS.iter().enumerate() {
            assert!(CIPHERS[..i].iter().all(|d| d.name != c.name), "{}", c.name);
            if let Some(t) = c.tag {
                assert!(t.lengths.contains(t.default), "{}", c.name);
            }
            assert_eq!(
                c.iv == Iv::FromSector,
                c.kind == Kind::Sectors,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn lengths_read_as_english() {
        assert_eq!(Lengths::Of(&[32]).to_string(), "32 bytes");
        assert_eq!(Lengths::Of(&[16, 24, 32]).to_string(), "16, 24 or 32 bytes");
        assert_eq!(Lengths::Range(4, 8).to_string(), "4 to 8 bytes");
        assert!(Lengths::MultipleOf(8).contains(16) && !Lengths::MultipleOf(8).contains(0));
        assert!(!Lengths::AtLeast(1).contains(0));
    }
}
