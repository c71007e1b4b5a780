//! The help of `sectorcrypt cipher`, generated from the table: `--cipher` lists every
//! cipher with its key lengths, IV, tag and options, `--sbox` every parameter set of the
//! crypto crate.
//!
//! Both options keep any value at parse time ([`Listed`]); the command refuses an unknown
//! one (`commands/cipher/job.rs`).

use super::{Cipher, Flag, Iv, CIPHERS};
use crate::flags::listed::Listed;
use clap::builder::PossibleValue;
use sectorcrypt_crypto::gost89::Sbox;

/// `--cipher`: the rows of the table.
pub const CIPHER_NAMES: Listed = Listed(|| {
    CIPHERS
        .iter()
        .map(|c| PossibleValue::new(c.name).help(summary(c)))
        .collect()
});

/// `--sbox`: the crypto crate's parameter sets, by OID name.
pub const SBOX_NAMES: Listed = Listed(|| {
    Sbox::ALL
        .iter()
        .map(|s| PossibleValue::new(s.name()).help(s.oid()))
        .collect()
});

/// One line of the `--cipher` help, e.g. "one CBC chain, whole blocks; key 16, 24 or 32
/// bytes; --iv 16 bytes".
fn summary(c: &Cipher) -> String {
    let mut parts = vec![c.about.to_string(), format!("key {}", c.key)];
    match c.iv {
        Iv::None => {}
        Iv::FromSector => parts.push("IVs from --sector".into()),
        Iv::Hex(lengths) => parts.push(format!("--iv {lengths}")),
    }
    if let Some(t) = c.tag {
        parts.push(format!("--tag-len {} (default {})", t.lengths, t.default));
    }
    if c.sbox {
        parts.push("--sbox (required)".into());
    }
    let others: Vec<&str> = Flag::ALL
        .into_iter()
        .filter(|&f| c.takes(f) && !matches!(f, Flag::Iv | Flag::TagLen | Flag::Sbox))
        .map(Flag::name)
        .collect();
    if !others.is_empty() {
        parts.push(others.join(", "));
    }
    parts.join("; ")
}

/// After the options in `sectorcrypt cipher --help`.
pub const EXAMPLES: &str = "\
Examples:
  # Encrypt 8 sectors of 512 bytes the way dm-crypt does (IV = sector number):
  sectorcrypt cipher encrypt --cipher aes-xts-plain64 --key-file volume.key \\
      --sector 2048 --input plain.bin --output cipher.bin

  # One XTS data unit with an explicit tweak (ciphertext stealing for odd lengths):
  sectorcrypt cipher decrypt --cipher aes-xts --key 00112233...(64 hex digits) \\
      --iv 00000000000000000000000000000000 < unit.bin

  # CTR over any length:
  printf 'hello' | sectorcrypt cipher encrypt --cipher aes-ctr --key $(cat k.hex) --iv $(cat iv.hex)

  # A GOST 28147-89 MAC, printed as hex:
  sectorcrypt cipher mac --cipher gost89-mac --sbox id-Gost28147-89-CryptoPro-A-ParamSet \\
      --key-file gost.key --input message.bin

dm-crypt cipher strings (those that take --sector) take a whole number of sectors; --sector
gives the IV number of the first sector, which advances by sector-size/512 per sector
(dm-crypt's default) or by 1 with --iv-large-sectors. aes-ecb without a sector option takes
any whole number of 16-byte blocks. The other ciphers take the whole input as one message.
The key length picks AES-128/192/256 (for XTS, both halves together).
The ciphers that take --aad write the ciphertext followed by the tag; decryption reads
ciphertext||tag and writes the plaintext only if the tag verifies, otherwise it prints
'authentication failed' and exits 1 with nothing written.
GOST 28147-89 (the gost89 ciphers) is little-endian, as in CryptoPro, gost-engine and
libgcrypt; Magma (the magma ciphers, RFC 8891) is big-endian, with the S-box set
id-tc26-gost-28147-param-Z.
--key-meshing is CryptoPro key meshing (RFC 4357) every 1024 bytes. Magma OFB, CBC and CFB
take z IV blocks for z interleaved chains. `cipher mac` prints the MAC as lowercase hex.";
