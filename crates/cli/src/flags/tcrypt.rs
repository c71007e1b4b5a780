//! The flags of VeraCrypt and TrueCrypt volumes (cryptsetup's TCRYPT names, and the
//! hidden-volume protection cryptsetup lacks) and `--type` (which also names FileVault 2),
//! taken by `dump`, `test-key`, `read`, `write`, `serve` and `mount`, and what `--help`
//! says of them.

use crate::failure::Failure;
use crate::flags::bitlk::BITLK_HELP;
use crate::flags::fvault2::FVAULT2_HELP;
use clap::{Args, ValueEnum};
use sectorcrypt_volume::formats::Requested;
use sectorcrypt_volume::tcrypt::Options;
use std::path::PathBuf;

/// A format named on the command line: one that has no signature and is opened only
/// when named, or FileVault 2 (detected when its header is intact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Named {
    /// A VeraCrypt or TrueCrypt volume (both kinds of KDF tried).
    Tcrypt,
    /// A VeraCrypt volume (VeraCrypt's KDFs only).
    Veracrypt,
    /// A FileVault 2 volume (read-only).
    Fvault2,
}

/// How to look for a VeraCrypt or TrueCrypt header.
#[derive(Debug, Args, Clone, Default)]
pub struct TcryptArgs {
    /// tcrypt or veracrypt: open IMAGE as a VeraCrypt/TrueCrypt volume (veracrypt: VeraCrypt
    /// KDFs only). These volumes have no signature and are never detected. Keyfiles go
    /// with --keyfile-component, in order; the passphrase with --key-file or the prompt.
    /// fvault2: open IMAGE as FileVault 2 (detected anyway when its header is intact;
    /// named, a damaged header says what is wrong).
    #[arg(long = "type", value_enum, value_name = "TYPE")]
    pub named: Option<Named>,
    /// VeraCrypt: the volume's PIM (personal iterations multiplier); only VeraCrypt KDFs
    /// are tried.
    #[arg(long = "veracrypt-pim", value_name = "PIM")]
    pub pim: Option<u32>,
    /// VeraCrypt/TrueCrypt: open the hidden volume (its header at 64 KiB).
    #[arg(long = "tcrypt-hidden")]
    pub hidden: bool,
    /// VeraCrypt/TrueCrypt: use the backup header near the end of IMAGE.
    #[arg(long = "tcrypt-backup")]
    pub backup: bool,
    /// VeraCrypt/TrueCrypt: a system-encrypted drive or partition image (header at byte
    /// 31744).
    #[arg(long = "tcrypt-system")]
    pub system: bool,
    /// VeraCrypt/TrueCrypt: try only the KDFs whose hash name contains HASH (sha512,
    /// sha256, whirlpool, ripemd160, stribog512, blake2s-256; argon2id: VeraCrypt's
    /// Argon2id alone), as cryptsetup's --hash.
    #[arg(long = "hash", value_name = "HASH")]
    pub hash: Option<String>,
    /// VeraCrypt/TrueCrypt: try only the cipher chains whose cryptsetup name contains
    /// CIPHER (aes, serpent-twofish-aes, ...), as cryptsetup's --cipher.
    #[arg(long = "cipher", value_name = "CIPHER")]
    pub cipher: Option<String>,
    /// VeraCrypt/TrueCrypt: open the outer volume with the hidden volume inside it
    /// protected, as VeraCrypt's "protect hidden volume": FILE holds the hidden volume's
    /// passphrase (its exact bytes). Writes that touch the hidden volume are refused whole
    /// (nothing of them is written; EPERM over NBD); reads stay allowed. A passphrase that
    /// opens no hidden volume refuses the open.
    #[arg(long = "protect-hidden-key-file", value_name = "FILE")]
    pub protect_key_file: Option<PathBuf>,
    /// VeraCrypt/TrueCrypt: a keyfile of the protected hidden volume, in order; repeatable.
    #[arg(
        long = "protect-hidden-keyfile-component",
        value_name = "FILE",
        requires = "protect_key_file"
    )]
    pub protect_keyfile_component: Vec<PathBuf>,
    /// VeraCrypt: the protected hidden volume's PIM.
    #[arg(
        long = "protect-hidden-veracrypt-pim",
        value_name = "PIM",
        requires = "protect_key_file"
    )]
    pub protect_pim: Option<u32>,
}

impl TcryptArgs {
    /// The format asked for, or `None` (detect); the TCRYPT flags without `--type` are a
    /// usage error.
    pub fn requested(&self) -> Result<Option<Requested>, Failure> {
        let tcrypt_flags = self.pim.is_some()
            || self.hidden
            || self.backup
            || self.system
            || self.hash.is_some()
            || self.cipher.is_some()
            || self.protect_key_file.is_some();
        if self.named == Some(Named::Fvault2) {
            if tcrypt_flags {
                return Err(Failure::usage(
                    "--veracrypt-pim, --tcrypt-hidden, --tcrypt-backup, --tcrypt-system, \
                     --hash, --cipher and --protect-hidden-key-file are VeraCrypt/TrueCrypt \
                     flags: FileVault 2 takes none",
                ));
            }
            return Ok(Some(Requested::Fvault2));
        }
        let Some(named) = self.named else {
            if tcrypt_flags {
                return Err(Failure::usage(
                    "--veracrypt-pim, --tcrypt-hidden, --tcrypt-backup, --tcrypt-system, \
                     --hash, --cipher and --protect-hidden-key-file open VeraCrypt/TrueCrypt \
                     volumes here: add --type tcrypt (or veracrypt)",
                ));
            }
            return Ok(None);
        };
        Ok(Some(Requested::Tcrypt(Options {
            truecrypt: named == Named::Tcrypt,
            pim: self.pim,
            hidden: self.hidden,
            backup: self.backup,
            system: self.system,
            hash: self.hash.clone(),
            cipher: self.cipher.clone(),
            // Read by the volumes module (`--protect-hidden-key-file`): flags read no file.
            protect: None,
            ..Options::default()
        })))
    }
}

/// What `--help` says of VeraCrypt and TrueCrypt volumes.
pub const TCRYPT_HELP: &str = "\
VeraCrypt and TrueCrypt (TCRYPT) volumes, existing ones: dump, test-key, read, write and \
mount with --type tcrypt (VeraCrypt and TrueCrypt) or --type veracrypt (VeraCrypt only). They \
have no signature, so they are never detected. The passphrase comes from --key-file or the \
prompt; keyfiles with --keyfile-component, in any order (--no-passphrase: keyfiles only); \
--veracrypt-pim N, --tcrypt-hidden, --tcrypt-backup, --tcrypt-system as in cryptsetup; \
--hash and --cipher limit the search (slow without them: up to a few seconds per KDF).
KDFs: PBKDF2 with SHA-512, SHA-256, Whirlpool, RIPEMD-160, Streebog-512, BLAKE2s-256, and \
VeraCrypt's Argon2id (--hash argon2id; tried after SHA-256, as cryptsetup does). Argon2id is \
memory-hard, one lane: without a PIM 6 passes over 416 MiB; with --veracrypt-pim N (1-31) \
3 + (N-1)/3 passes over 64 + 32 x (N-1) MiB, above 31 N - 18 passes over 1 GiB. Each try \
holds that memory while it runs (the tries run one after another, never two at once): a \
search without --hash needs up to 1 GiB free, and with a large PIM takes minutes (N = 485, \
SHA-512's default count, is 467 passes over 1 GiB); give --hash to skip it. \
Ciphers, in XTS: AES, Serpent, Twofish, Camellia, Kuznyechik and VeraCrypt's cascades.
TrueCrypt 4.3 and older volumes open read-only (dump, test-key, read; serve, mount and open \
read-only; write refused): LRW (4.1 to 4.3) and CBC (1.0 to 4.0) with AES, Serpent, Twofish \
and their cascades, Blowfish, CAST5 and 3DES, PBKDF2 with SHA-1 too.
write, serve and mount write normal and hidden volumes; system volumes are read-only. An outer \
volume's writes can overwrite a hidden volume inside it unless it is protected: \
--protect-hidden-key-file FILE (the hidden volume's passphrase; its keyfiles with \
--protect-hidden-keyfile-component, its PIM with --protect-hidden-veracrypt-pim) refuses every \
write that touches the hidden volume, whole, writing nothing of it (write exits 1 with a \
message, NBD answers EPERM); a passphrase that opens no hidden volume refuses the open (exit 2; \
its header is searched with every KDF and chain, as --tcrypt-hidden without --hash and --cipher, \
so a wrong one takes a while). \
New VeraCrypt volumes, with a hidden volume: format --type veracrypt (see format --help).
Not supported: writing system volumes, making Argon2id volumes, writing TrueCrypt 4.3 and \
older volumes (CBC, LRW).";

/// The after-help of the commands that open BitLocker, VeraCrypt/TrueCrypt and FileVault 2
/// volumes.
pub fn foreign_help() -> String {
    format!("{BITLK_HELP}\n\n{TCRYPT_HELP}\n\n{FVAULT2_HELP}")
}
