//! The command line of `sectorcrypt geli VERB`: geli(8)'s verbs and flag letters
//! (`lib/geom/eli/geom_eli.c`, `class_commands`; `geli.8`), as clap definitions.
//! `cmd_geli_front` translates them into the other commands' arguments.

use clap::{Args, Subcommand};
use std::path::PathBuf;

pub const HELP: &str = "\
geli(8)'s verbs and flag letters, on image files (a provider here is a file or a block
device; there is no kernel: `attach` serves the decrypted provider over NBD on a socket).
A FreeBSD session works as typed:
  truncate -s 64M disk.img
  sectorcrypt geli init -J pass.txt -s 4096 -B disk.eli disk.img
  sectorcrypt geli attach -j pass.txt --socket /tmp/disk.sock disk.img   # NBD
  sectorcrypt geli setkey -j pass.txt -J new.txt disk.img
  sectorcrypt geli backup disk.img disk.eli
  sectorcrypt geli kill disk.img
  sectorcrypt geli restore disk.eli disk.img
  truncate -s 128M disk.img && sectorcrypt geli resize -s 64M disk.img
Passphrase files (-j, -J) count up to their first newline, as geli's; keyfiles (-k, -K) are
hashed whole, in order. Nothing asks for confirmation (geli does not); init writes no backup
unless -B FILE is given (geli's default /var/backups is not used). Not supported yet:
authenticated providers (-a), attach -d, configure, suspend/resume, clear, label.";

#[derive(Debug, Args)]
pub struct GeliArgs {
    /// Accepted for geli's command lines (-v, verbose); the output is the same.
    #[arg(short = 'v', global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Initialize a provider: write GELI metadata to its last sector (format --type geli).
    Init(InitArgs),
    /// Serve the decrypted provider over NBD on a socket (geli attach; runs until stopped).
    Attach(AttachArgs),
    /// Serve the provider over NBD under a random key never stored (geli onetime).
    Onetime(OnetimeArgs),
    /// Change (or, with -n N, set) a master-key slot's passphrase (geli setkey).
    Setkey(SetkeyArgs),
    /// Destroy a master-key slot, no passphrase needed (geli delkey).
    Delkey(DelkeyArgs),
    /// Destroy the metadata: the sector overwritten 5 times (geli kill).
    Kill(Prov),
    /// Copy the metadata sector to FILE (geli backup).
    Backup(BackupArgs),
    /// Write a backup FILE onto the provider's last sector (geli restore).
    Restore(RestoreArgs),
    /// Move the metadata after the provider grew (geli resize -s oldsize).
    Resize(GeliResizeArgs),
    /// Print the metadata (geli dump).
    Dump(Prov),
    /// Print the metadata versions this program reads and writes, or each provider's.
    Version(VersionArgs),
}

#[derive(Debug, Args)]
pub struct Prov {
    /// The provider (an image file or block device).
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Authenticated provider with this HMAC (not supported yet: refused).
    #[arg(short = 'a', value_name = "AALGO")]
    pub aalgo: Option<String>,
    /// Ask for the passphrase on boot (BOOT flag).
    #[arg(short = 'b')]
    pub boot: bool,
    /// Also write the metadata to FILE ("none": no backup, the default here).
    #[arg(short = 'B', value_name = "FILE")]
    pub backup: Option<PathBuf>,
    /// Show the passphrase length while booting (GELIDISPLAYPASS).
    #[arg(short = 'd')]
    pub displaypass: bool,
    /// Encryption: AES-XTS (default) or AES-CBC.
    #[arg(short = 'e', value_name = "EALGO")]
    pub ealgo: Option<String>,
    /// The boot loader may attach it (GELIBOOT).
    #[arg(short = 'g')]
    pub geliboot: bool,
    /// PBKDF2 iterations (0: none, the salt and passphrase hashed; default: calibrated).
    #[arg(short = 'i', value_name = "N")]
    pub iterations: Option<u32>,
    /// The new passphrase's file (up to its first newline); prompted otherwise.
    #[arg(short = 'J', value_name = "PASSFILE")]
    pub passfile: Option<PathBuf>,
    /// A keyfile that is part of the key; repeatable, in order.
    #[arg(short = 'K', value_name = "KEYFILE")]
    pub keyfile: Vec<PathBuf>,
    /// Key length in bits (AES-XTS 128 or 256, default 128; AES-CBC 128, 192 or 256).
    #[arg(short = 'l', value_name = "KEYLEN")]
    pub keylen: Option<usize>,
    /// No passphrase: the key is made of the -K keyfiles only.
    #[arg(short = 'P')]
    pub no_passphrase: bool,
    /// No automatic resize (AUTORESIZE cleared).
    #[arg(short = 'R')]
    pub noautoresize: bool,
    /// The GELI sector size (a power of two, a multiple of 512; default 512).
    #[arg(short = 's', value_name = "SECTORSIZE")]
    pub sectorsize: Option<usize>,
    /// Do not pass TRIM through (NODELETE).
    #[arg(short = 'T')]
    pub notrim: bool,
    /// Metadata version to write, 1 to 7 (default 7).
    #[arg(short = 'V', value_name = "VERSION")]
    pub version: Option<u32>,
    /// The provider (an image file or block device; it must exist).
    pub prov: PathBuf,
}

/// Where the decrypted provider is served (`serve`'s options of the same names).
#[derive(Debug, Args)]
pub struct Listen {
    /// Serve NBD on a Unix socket at PATH.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Serve NBD on a loopback TCP address (127.0.0.1:PORT or [::1]:PORT).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    #[command(flatten)]
    pub tls: crate::args::TlsArgs,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Dry run: check the key opens the provider, serve nothing.
    #[arg(short = 'C')]
    pub dryrun: bool,
    /// The passphrase's file (up to its first newline); prompted otherwise.
    #[arg(short = 'j', value_name = "PASSFILE")]
    pub passfile: Option<PathBuf>,
    /// A keyfile that is part of the key; repeatable, in order.
    #[arg(short = 'k', value_name = "KEYFILE")]
    pub keyfile: Vec<PathBuf>,
    /// No passphrase: the key is made of the -k keyfiles only.
    #[arg(short = 'p')]
    pub no_passphrase: bool,
    /// Read-only: writes are refused.
    #[arg(short = 'r')]
    pub readonly: bool,
    #[command(flatten)]
    pub listen: Listen,
    /// The provider.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct OnetimeArgs {
    #[command(flatten)]
    pub listen: Listen,
    /// The provider: all of it is data (no metadata sector), AES-XTS-256, 512-byte sectors.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct SetkeyArgs {
    /// PBKDF2 iterations for the new key (both slots share it; default: kept).
    #[arg(short = 'i', value_name = "N")]
    pub iterations: Option<u32>,
    /// The current passphrase's file (up to its first newline).
    #[arg(short = 'j', value_name = "PASSFILE")]
    pub passfile: Option<PathBuf>,
    /// The new passphrase's file (up to its first newline).
    #[arg(short = 'J', value_name = "NEWPASSFILE")]
    pub newpassfile: Option<PathBuf>,
    /// A keyfile of the current key; repeatable, in order.
    #[arg(short = 'k', value_name = "KEYFILE")]
    pub keyfile: Vec<PathBuf>,
    /// A keyfile of the new key; only the same list as -k is supported.
    #[arg(short = 'K', value_name = "NEWKEYFILE")]
    pub newkeyfile: Vec<PathBuf>,
    /// The master-key slot to write (0 or 1; default: the one the current key opens).
    #[arg(short = 'n', value_name = "KEYNO")]
    pub keyno: Option<usize>,
    /// The current key has no passphrase.
    #[arg(short = 'p')]
    pub no_passphrase: bool,
    /// The provider.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct DelkeyArgs {
    /// Destroy both master-key slots.
    #[arg(short = 'a')]
    pub all: bool,
    /// Also the last slot in use (the data then never opens again without a backup).
    #[arg(short = 'f')]
    pub force: bool,
    /// The slot to destroy (0 or 1).
    #[arg(short = 'n', value_name = "KEYNO", required_unless_present = "all")]
    pub keyno: Option<usize>,
    /// The provider.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The provider.
    pub prov: PathBuf,
    /// The backup file to create (one sector).
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Restore even when the provider's size is not the one in the backup (its size is
    /// then written into the metadata).
    #[arg(short = 'f')]
    pub force: bool,
    /// The backup file.
    pub file: PathBuf,
    /// The provider.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct GeliResizeArgs {
    /// The provider's size before it grew (bytes, or with K, M, G, T).
    #[arg(short = 's', value_name = "OLDSIZE")]
    pub oldsize: String,
    /// The provider.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Providers whose metadata version to print.
    pub prov: Vec<PathBuf>,
}
