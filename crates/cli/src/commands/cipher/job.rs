//! A `cipher` command checked against the table: [`Job::parse`] refuses (exit 2) every
//! option the cipher does not take and every bad key, IV, AAD, tag length or S-box before
//! a byte of input is read, and returns the job with its key expanded; [`Job::run`] then
//! transforms the whole input in memory.

use crate::failure::Failure;
use crate::flags::ciphers::{
    self as table, AesMode, Cipher, Flag, Gost89Mode, Iv, Kind, MagmaMode,
};
use crate::flags::{CipherArgs, Direction};
use crate::passphrase::{self, Secret};
use sectorcrypt_cli::decode_hex;
use sectorcrypt_crypto::{
    aes::{Cbc, Ctr, Ecb, Gcm, Xts},
    dmcrypt::{CipherSpec, SectorCipher, SectorLayout},
    gost89::{self, Sbox},
    magma, Aead, Error, Mode,
};
use zeroize::Zeroizing;

/// The CTR-ACPKM section size (RFC 8645): 1 KiB, as OpenSSL's gost provider uses.
const ACPKM_SECTION: usize = 1024;

/// A checked command: what to do to the input.
pub struct Job {
    /// Encrypt (or seal) rather than decrypt (or open); a MAC has no direction.
    encrypt: bool,
    work: Work,
}

enum Work {
    /// dm-crypt sectors, the first with IV number `first`.
    Sectors { cipher: SectorCipher, first: u64 },
    /// One message in a block or stream mode (AES, GOST 28147-89, Magma) with its IV
    /// (empty for ECB).
    Mode { mode: Box<dyn Mode>, iv: Vec<u8> },
    /// Ciphertext followed by a `tag_len`-byte tag.
    Aead {
        sealer: Sealer,
        nonce: Vec<u8>,
        aad: Vec<u8>,
        tag_len: usize,
    },
    /// The first `tag_len` bytes of a MAC, printed as a line of hex.
    Mac { mac: Mac, tag_len: usize },
}

/// An AEAD through the crypto crate's trait, or GCM with a short tag (8 or 4 bytes), which
/// SP 800-38D appendix C restricts and the crypto crate keeps behind entry points of their
/// own.
enum Sealer {
    Aead(Box<dyn Aead>),
    GcmShortTag(Gcm),
}

enum Mac {
    Gost89(gost89::Mac),
    Magma(magma::Mac),
}

/// The command line's values, each checked against the cipher's row.
struct Checked {
    key: Secret,
    /// Empty for a cipher without `--iv`.
    iv: Vec<u8>,
    aad: Vec<u8>,
    /// 0 for a cipher without `--tag-len`.
    tag_len: usize,
    /// The gost89 ciphers' `--sbox`; Magma's set for the others.
    sbox: Sbox,
    key_meshing: bool,
}

impl Job {
    /// Checks the arguments against the cipher's row of the table, in this order: the
    /// cipher and the direction, the options it does not take, the S-box, the key, the IV,
    /// the AAD, the tag length; then builds the cipher (which checks what only the crypto
    /// crate knows: equal XTS halves, the sector size, the backend).
    pub fn parse(a: &CipherArgs) -> Result<Job, Failure> {
        let c = cipher(a)?;
        refuse_options_not_taken(a, c)?;
        let sbox = if c.sbox { sbox(a, c)? } else { Sbox::Tc26Z };
        let checked = Checked {
            sbox,
            key_meshing: a.key_meshing,
            key: key(a, c)?,
            iv: iv(a, c)?,
            aad: match &a.aad {
                Some(h) => decode_hex(h, "--aad")?,
                None => vec![],
            },
            tag_len: tag_len(a, c)?,
        };
        Ok(Job {
            encrypt: a.direction == Direction::Encrypt,
            work: Work::build(a, c, checked)?,
        })
    }

    /// The output for the whole input `data`: the transformed data, ciphertext || tag when
    /// sealing, the plaintext only when the tag verifies, or a MAC as a line of hex.
    pub fn run(self, mut data: Vec<u8>) -> Result<Vec<u8>, Failure> {
        let enc = self.encrypt;
        match &self.work {
            Work::Sectors { cipher, first } if enc => cipher.encrypt(*first, &mut data)?,
            Work::Sectors { cipher, first } => cipher.decrypt(*first, &mut data)?,
            Work::Mode { mode, iv } => mode.apply(enc, iv, &mut data)?,
            Work::Aead {
                sealer,
                nonce,
                aad,
                tag_len,
            } if enc => sealer.seal(nonce, aad, &mut data, *tag_len)?,
            Work::Aead {
                sealer,
                nonce,
                aad,
                tag_len,
            } => return sealer.open(nonce, aad, data, *tag_len),
            Work::Mac { mac, tag_len } => return mac.line(&data, *tag_len),
        }
        Ok(data)
    }
}

impl Work {
    /// The cipher of row `c` with its key expanded.
    fn build(a: &CipherArgs, c: &Cipher, v: Checked) -> Result<Work, Failure> {
        let (key, iv, sbox, mesh) = (&v.key[..], v.iv, v.sbox, v.key_meshing);
        let mode = |mode: Box<dyn Mode>, iv: Vec<u8>| Work::Mode { mode, iv };
        let aead = |sealer, nonce| Work::Aead {
            sealer,
            nonce,
            aad: v.aad,
            tag_len: v.tag_len,
        };
        Ok(match c.kind {
            Kind::Ecb if !Flag::SECTOR.into_iter().any(|f| given(a, f)) => {
                mode(Box::new(Ecb::new(key)?), iv)
            }
            Kind::Sectors | Kind::Ecb => {
                let spec: CipherSpec = c.name.parse()?;
                let layout = SectorLayout::new(a.sector_size.unwrap_or(512), a.iv_large_sectors)?;
                Work::Sectors {
                    cipher: SectorCipher::new(spec, key, layout)?,
                    first: a.sector.unwrap_or(0),
                }
            }
            Kind::Aes(m) => {
                let m: Box<dyn Mode> = match m {
                    AesMode::Cbc => Box::new(Cbc::new(key)?),
                    AesMode::Ctr => Box::new(Ctr::new(key)?),
                    AesMode::Xts => Box::new(Xts::new(key)?),
                };
                mode(m, iv)
            }
            Kind::Gcm if v.tag_len < 12 => aead(Sealer::GcmShortTag(Gcm::new(key)?), iv),
            Kind::Gcm => aead(Sealer::Aead(Box::new(Gcm::new(key)?)), iv),
            Kind::Mgm => aead(Sealer::Aead(Box::new(magma::Mgm::new(key)?)), iv),
            Kind::Gost89(m) => {
                let m: Box<dyn Mode> = match m {
                    Gost89Mode::Ecb => Box::new(gost89::Ecb::new(key, sbox, mesh)?),
                    Gost89Mode::Cnt => Box::new(gost89::Cnt::new(key, sbox, mesh)?),
                    Gost89Mode::Cfb => Box::new(gost89::Cfb::new(key, sbox, mesh)?),
                    Gost89Mode::Cbc => Box::new(gost89::Cbc::new(key, sbox, mesh)?),
                };
                mode(m, iv)
            }
            Kind::Magma(m) => {
                let m: Box<dyn Mode> = match m {
                    MagmaMode::Ecb => Box::new(magma::Ecb::new(key)?),
                    MagmaMode::Ctr => Box::new(magma::Ctr::new(key)?),
                    MagmaMode::CtrAcpkm => Box::new(magma::CtrAcpkm::new(key, ACPKM_SECTION)?),
                    MagmaMode::Ofb => Box::new(magma::Ofb::new(key)?),
                    MagmaMode::Cbc => Box::new(magma::Cbc::new(key)?),
                    MagmaMode::Cfb => Box::new(magma::Cfb::new(key)?),
                };
                mode(m, iv)
            }
            Kind::Gost89Mac => Work::Mac {
                mac: Mac::Gost89(gost89::Mac::new(key, sbox, mesh)?),
                tag_len: v.tag_len,
            },
            Kind::MagmaMac => Work::Mac {
                mac: Mac::Magma(magma::Mac::new(key)?),
                tag_len: v.tag_len,
            },
        })
    }
}

/// The row of `--cipher`, if it exists and suits the direction.
fn cipher(a: &CipherArgs) -> Result<&'static Cipher, Failure> {
    let name = a.cipher.as_str();
    let found = table::find(name);
    if a.direction == Direction::Mac {
        return found.filter(|c| c.is_mac()).ok_or_else(|| {
            Failure::usage(format!(
                "cipher mac takes --cipher {}, not {name}",
                table::names(Cipher::is_mac)
            ))
        });
    }
    match found {
        Some(c) if c.is_mac() => Err(Failure::usage(format!(
            "{name} is a mac: use `sectorcrypt cipher mac --cipher {name}`"
        ))),
        Some(c) => Ok(c),
        None => Err(Failure::usage(format!(
            "unknown cipher {name:?}; use one of: {}",
            table::names(|c| !c.is_mac())
        ))),
    }
}

/// Refuses the first option given that the cipher does not take, naming the ciphers that
/// do.
fn refuse_options_not_taken(a: &CipherArgs, c: &Cipher) -> Result<(), Failure> {
    let Some(f) = Flag::ALL.into_iter().find(|&f| given(a, f) && !c.takes(f)) else {
        return Ok(());
    };
    let why = match (f, c.iv) {
        (Flag::Iv, Iv::FromSector) => "; it computes its IVs from --sector",
        (Flag::Iv, Iv::None) => "; it has no IV",
        _ => "",
    };
    Err(Failure::usage(format!(
        "{} goes with {}, not {}{why}",
        f.name(),
        table::names(|d| d.takes(f)),
        c.name
    )))
}

/// Whether the command line gives `flag`.
fn given(a: &CipherArgs, flag: Flag) -> bool {
    match flag {
        Flag::Iv => a.iv.is_some(),
        Flag::Aad => a.aad.is_some(),
        Flag::TagLen => a.tag_len.is_some(),
        Flag::Sbox => a.sbox.is_some(),
        Flag::KeyMeshing => a.key_meshing,
        Flag::Sector => a.sector.is_some(),
        Flag::SectorSize => a.sector_size.is_some(),
        Flag::IvLargeSectors => a.iv_large_sectors,
    }
}

/// `--sbox`, required: libraries disagree on the default.
fn sbox(a: &CipherArgs, c: &Cipher) -> Result<Sbox, Failure> {
    let names: Vec<&str> = Sbox::ALL.iter().map(|s| s.name()).collect();
    let name = a.sbox.as_deref().ok_or_else(|| {
        Failure::usage(format!(
            "{} needs --sbox NAME (no default; libraries disagree): {}",
            c.name,
            names.join(", ")
        ))
    })?;
    Sbox::from_name(name).map_err(|_| {
        Failure::usage(format!(
            "unknown --sbox {name:?}; use one of: {}",
            names.join(", ")
        ))
    })
}

/// The key, of one of the row's lengths.
fn key(a: &CipherArgs, c: &Cipher) -> Result<Secret, Failure> {
    let key = read_key(a)?;
    if !c.key.contains(key.len()) {
        return Err(Failure::usage(format!(
            "invalid key length {} bytes for {} (expected {})",
            key.len(),
            c.name,
            c.key
        )));
    }
    Ok(key)
}

/// `--tag-len` or the row's default; 0 for a cipher without a tag.
fn tag_len(a: &CipherArgs, c: &Cipher) -> Result<usize, Failure> {
    let Some(t) = c.tag else {
        return Ok(0);
    };
    let n = a.tag_len.unwrap_or(t.default);
    if !t.lengths.contains(n) {
        return Err(Failure::usage(format!(
            "--tag-len {n}: {} tags are {}",
            c.name, t.lengths
        )));
    }
    Ok(n)
}

/// `--iv` decoded and checked against the row; empty for a cipher that takes none.
fn iv(a: &CipherArgs, c: &Cipher) -> Result<Vec<u8>, Failure> {
    let Iv::Hex(lengths) = c.iv else {
        return Ok(vec![]);
    };
    let hex =
        a.iv.as_deref()
            .ok_or_else(|| Failure::usage(format!("{} needs --iv ({lengths}, hex)", c.name)))?;
    let iv = decode_hex(hex, "--iv")?;
    if !lengths.contains(iv.len()) {
        return Err(Failure::usage(format!(
            "--iv for {} must be {lengths}, got {} bytes",
            c.name,
            iv.len()
        )));
    }
    Ok(iv)
}

/// `--key HEX` or the bytes of `--key-file` (at most 8 MiB), in secret memory.
fn read_key(a: &CipherArgs) -> Result<Secret, Failure> {
    match (&a.key, &a.key_file) {
        (Some(hex), None) => {
            let bytes = Zeroizing::new(decode_hex(hex, "--key")?);
            Ok(Secret::from_slice(&bytes))
        }
        (None, Some(path)) if path.as_os_str() == "-" => Err(Failure::usage(
            "--key-file -: standard input carries the data; give the key in a file",
        )),
        (None, Some(path)) => passphrase::from_file(path),
        _ => Err(Failure::usage("give exactly one of --key and --key-file")),
    }
}

impl Sealer {
    /// Encrypts `data` and appends the tag.
    fn seal(
        &self,
        nonce: &[u8],
        aad: &[u8],
        data: &mut Vec<u8>,
        tag_len: usize,
    ) -> Result<(), Error> {
        let mut tag = [0u8; 16];
        let tag = &mut tag[..tag_len];
        match self {
            Sealer::Aead(a) => a.seal(nonce, aad, data, tag)?,
            Sealer::GcmShortTag(g) => g.seal_short_tag(nonce, aad, data, tag)?,
        }
        data.extend_from_slice(tag);
        Ok(())
    }

    /// Splits the tag off `data` and returns the plaintext only if the tag verifies.
    fn open(
        &self,
        nonce: &[u8],
        aad: &[u8],
        mut data: Vec<u8>,
        tag_len: usize,
    ) -> Result<Vec<u8>, Failure> {
        if data.len() < tag_len {
            return Err(Failure::usage(format!(
                "input is {} bytes, shorter than the {tag_len}-byte tag",
                data.len()
            )));
        }
        let tag = data.split_off(data.len() - tag_len);
        let opened = match self {
            Sealer::Aead(a) => a.open(nonce, aad, &mut data, &tag),
            Sealer::GcmShortTag(g) => g.open_short_tag(nonce, aad, &mut data, &tag),
        };
        match opened {
            Ok(()) => Ok(data),
            Err(Error::AuthenticationFailed) => Err(Failure::runtime("authentication failed")),
            Err(e) => Err(e.into()),
        }
    }
}

impl Mac {
    /// The first `tag_len` bytes of the MAC of `data`, as lowercase hex and a newline.
    fn line(&self, data: &[u8], tag_len: usize) -> Result<Vec<u8>, Failure> {
        let mut out = vec![0u8; tag_len];
        match self {
            Mac::Gost89(m) => m.mac_to(data, &mut out)?,
            Mac::Magma(m) => m.mac_to(data, &mut out)?,
        }
        Ok(format!("{}\n", hex::encode(&out)).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::{Cli, Command};
    use clap::Parser;

    /// `sectorcrypt cipher ARGS` as parsed by clap.
    fn args(words: &[&str]) -> CipherArgs {
        let argv = ["sectorcrypt", "cipher"].iter().chain(words);
        match Cli::try_parse_from(argv)
            .expect("a valid command line")
            .command
        {
            Command::Cipher(a) => a,
            _ => unreachable!("a cipher command"),
        }
    }

    /// A key with unequal halves (XTS refuses equal ones).
    fn key(len: usize) -> String {
        hex::encode((1..=len).map(|i| i as u8).collect::<Vec<u8>>())
    }

    /// The least a cipher needs besides its key: an IV of its shortest length, an S-box.
    fn needs(c: &Cipher) -> Vec<String> {
        let mut words = vec![];
        if let Iv::Hex(lengths) = c.iv {
            let n = (1..).find(|&n| lengths.contains(n)).expect("a length");
            words.extend(["--iv".to_string(), "00".repeat(n)]);
        }
        if c.sbox {
            words.extend(["--sbox".to_string(), Sbox::CryptoProA.name().to_string()]);
        }
        words
    }

    fn parse(c: &Cipher, key_len: usize, more: &[&str]) -> Result<Job, Failure> {
        let dir = if c.is_mac() { "mac" } else { "encrypt" };
        let k = key(key_len);
        let needs = needs(c);
        let mut words = vec![dir, "--cipher", c.name, "--key", &k];
        words.extend(needs.iter().map(String::as_str));
        words.extend(more);
        Job::parse(&args(&words))
    }

    fn usage(r: Result<Job, Failure>) -> String {
        match r {
            Err(Failure::Usage(m)) => m,
            Err(f) => panic!("not a usage failure: {}", f.message()),
            Ok(_) => panic!("accepted"),
        }
    }

    /// Every key length of the table is one the crypto crate accepts, and the lengths
    /// around them are refused with a message that lists the table's.
    #[test]
    fn the_key_lengths_are_the_crypto_crates() {
        for c in table::CIPHERS {
            for n in 1..=80 {
                let r = parse(c, n, &[]);
                if c.key.contains(n) {
                    assert!(r.is_ok(), "{} with a {n}-byte key", c.name);
                } else {
                    let msg = usage(r);
                    assert!(msg.contains(&c.key.to_string()), "{msg}");
                }
            }
        }
    }

    /// Every option a cipher does not take is refused, naming the option.
    #[test]
    fn options_a_cipher_does_not_take_are_refused() {
        for c in table::CIPHERS {
            let len = (1..).find(|&n| c.key.contains(n)).expect("a key length");
            for f in Flag::ALL.into_iter().filter(|&f| !c.takes(f)) {
                let mut more = vec![f.name()];
                match f {
                    Flag::KeyMeshing | Flag::IvLargeSectors => {}
                    Flag::Sbox => more.push(Sbox::Tc26Z.name()),
                    _ => more.push("10"),
                }
                let msg = usage(parse(c, len, &more));
                assert!(
                    msg.starts_with(&format!("{} goes with ", f.name())),
                    "{msg}"
                );
            }
        }
    }

    #[test]
    fn ivs_and_tags_are_checked_against_the_table() {
        let cbc = |more: &[&str]| {
            let k = key(16);
            let mut words = vec!["encrypt", "--cipher", "aes-cbc", "--key", &k];
            words.extend(more);
            usage(Job::parse(&args(&words)))
        };
        assert_eq!(cbc(&[]), "aes-cbc needs --iv (16 bytes, hex)");
        assert_eq!(
            cbc(&["--iv", "00"]),
            "--iv for aes-cbc must be 16 bytes, got 1 bytes"
        );
        let mgm = table::find("magma-mgm").unwrap();
        let m = usage(parse(mgm, 32, &["--tag-len", "9"]));
        assert_eq!(m, "--tag-len 9: magma-mgm tags are 4 to 8 bytes");
        let m = usage(Job::parse(&args(&[
            "mac", "--cipher", "aes-ctr", "--key", "00",
        ])));
        assert_eq!(
            m,
            "cipher mac takes --cipher gost89-mac or magma-mac, not aes-ctr"
        );
    }
}
