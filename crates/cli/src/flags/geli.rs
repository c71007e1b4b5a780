//! The command line of `sectorcrypt geli VERB`: geli(8)'s verbs and flag letters
//! (`lib/geom/eli/geom_eli.c`, `class_commands`; `geli.8`), as clap definitions.
//! `commands/geli_front.rs` translates them into the other commands' arguments.

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
hashed whole, in order. Nothing asks for confirmation (geli does not). init writes its
metadata backup to /var/backups/<prov>.eli as geli does (-B FILE elsewhere, -B none not at
all). `geli VERB --help` names the sectorcrypt command each verb is; -v prints it before it
runs. The kernel's verbs (detach, stop, suspend, resume, list, status, load, unload) have no
kernel here: each says what to do instead. Not supported yet: authenticated providers (-a).";

/// Where `init` writes its metadata backup unless `-B` says otherwise (geli's
/// `GELI_BACKUP_DIR`); the environment variable [`BACKUP_DIR_VAR`] replaces it.
pub const BACKUP_DIR: &str = "/var/backups/";
/// The environment variable naming another folder for `init`'s default backups.
pub const BACKUP_DIR_VAR: &str = "SECTORCRYPT_GELI_BACKUP_DIR";

#[derive(Debug, Args)]
pub struct GeliArgs {
    /// Verbose: print the sectorcrypt command the verb is before running it.
    #[arg(short = 'v', global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Initialize a provider: write GELI metadata to its last sector (format --type geli).
    #[command(visible_alias = "label", after_help = INIT_HERE)]
    Init(InitArgs),
    /// Serve the decrypted provider over NBD on a socket (geli attach; runs until stopped).
    #[command(after_help = ATTACH_HERE)]
    Attach(AttachArgs),
    /// Serve the provider over NBD under a random key never stored (geli onetime).
    #[command(after_help = ONETIME_HERE)]
    Onetime(OnetimeArgs),
    /// Change the flags in the metadata (geli configure).
    #[command(after_help = CONFIGURE_HERE)]
    Configure(ConfigureArgs),
    /// Change (or, with -n N, set) a master-key slot's key (geli setkey).
    #[command(after_help = SETKEY_HERE)]
    Setkey(SetkeyArgs),
    /// Destroy a master-key slot, no passphrase needed (geli delkey).
    #[command(after_help = DELKEY_HERE)]
    Delkey(DelkeyArgs),
    /// Destroy the metadata: the sector overwritten 5 times (geli kill).
    #[command(after_help = "Here: sectorcrypt erase PROV --batch")]
    Kill(Prov),
    /// Copy the metadata sector to FILE (geli backup).
    #[command(after_help = "Here: sectorcrypt header backup PROV FILE (FILE must not exist)")]
    Backup(BackupArgs),
    /// Write a backup FILE onto the provider's last sector (geli restore).
    #[command(
        after_help = "Here: sectorcrypt header restore PROV FILE --batch (-f: the \
                            provider's size written into the metadata)"
    )]
    Restore(RestoreArgs),
    /// Move the metadata after the provider grew (geli resize -s oldsize).
    #[command(after_help = "Here: sectorcrypt resize --old-size OLDSIZE PROV")]
    Resize(GeliResizeArgs),
    /// Zero the metadata sector, no passphrase needed (geli clear).
    #[command(after_help = CLEAR_HERE)]
    Clear(Provs),
    /// Print the metadata (geli dump).
    #[command(after_help = "Here: sectorcrypt dump PROV (--json for geli's field names)")]
    Dump(Prov),
    /// Print the metadata versions this program reads and writes, or each provider's.
    #[command(after_help = "Here: sectorcrypt dump PROV shows the version among the fields")]
    Version(VersionArgs),
    /// Kernel only (geli detach): stop the serving process instead.
    Detach(KernelArgs),
    /// Kernel only (geli stop, an alias for detach): stop the serving process instead.
    Stop(KernelArgs),
    /// Kernel only (geli suspend): stop the serving process instead.
    Suspend(KernelArgs),
    /// Kernel only (geli resume): attach again instead.
    Resume(KernelArgs),
    /// Kernel only (geli list): the serving processes are the attached providers.
    List(KernelArgs),
    /// Kernel only (geli status): the serving processes are the attached providers.
    Status(KernelArgs),
    /// Kernel only (geli load): there is no kernel module to load.
    Load(KernelArgs),
    /// Kernel only (geli unload): there is no kernel module to unload.
    Unload(KernelArgs),
}

const INIT_HERE: &str = "\
Here: sectorcrypt format --type geli PROV [--cipher EALGO] [--key-size KEYLEN]
  [--sector-size N] [--pbkdf-force-iterations N] [--key-file PASSFILE]
  [--keyfile-component KEYFILE]... [--no-passphrase] [--geli-version V] [--geli-boot]
  [--geli-display-pass] [--geli-boot-loader] [--geli-no-trim] [--geli-no-autoresize]
then, as geli init does, a metadata backup (sectorcrypt header backup PROV FILE): to
/var/backups/<prov>.eli by default, each '/' of the provider's name an '_' (a leading /dev/
dropped); the folder is $SECTORCRYPT_GELI_BACKUP_DIR when set; an older backup of that name
is replaced; -B FILE writes it to FILE, -B none writes none. When the backup cannot be
written, the provider is initialized all the same and the command fails (exit 1).
A provider that already holds a volume (a LUKS header, GELI metadata) is overwritten only
after confirmation (--batch, -q: without asking); every LUKS and GELI signature on it is
wiped first, so that no old header stays live beside the new metadata.";

const ATTACH_HERE: &str = "\
Here: sectorcrypt serve PROV --socket PATH [--key-file PASSFILE] [--keyfile-component
  KEYFILE]... [--no-passphrase] [--read-only]
There is no /dev/PROV.eli: an NBD client (nbd-client, qemu, nbdfuse, nbdcopy) reads and
writes the decrypted provider (or use sectorcrypt mount). The server runs until SIGINT or
SIGTERM (geli detach), or with -d until its last client has disconnected (geli's detach on
last close; a connection that closes before its NBD handshake is over is no client).
-C: sectorcrypt test-key PROV (nothing served); -n N: only slot N is tried (--key-slot N).
Authentication: the AUTH flag (geli init -a) is part of the metadata, whose MD5 is a
checksum, not a MAC: whoever can write the provider can clear the flag, recompute the MD5,
and the provider then attaches without checking any tag (FreeBSD behaves the same).
--integrity (serve --integrity) refuses a provider whose AUTH flag is clear.";

const ONETIME_HERE: &str = "\
Here: sectorcrypt serve --onetime PROV --socket PATH (which takes AES-XTS with 256-bit keys
and 512-byte sectors). geli's defaults: AES-XTS, a 128-bit key, 512-byte sectors. -d stops
serving after the last client has disconnected. -a HMAC/SHA256 (or another HMAC) tags every
sector: a sector not written since the provider was attached fails its tag (EIO).";

const CONFIGURE_HERE: &str = "\
Here: sectorcrypt dump PROV shows the flags. The flags word of the metadata is rewritten in
place (the MD5 recomputed) under the exclusive header lock, as geli writes it; a flag
already as asked changes nothing.";

const SETKEY_HERE: &str = "\
Here: sectorcrypt change-key PROV NEWPASSFILE --key-file PASSFILE [--keyfile-component
KEYFILE]... (with -n N: sectorcrypt add-key PROV NEWPASSFILE --key-slot N ...). The current
key (-j, -k, -p) opens any slot; the new key (-J, -K, -P) is sealed into slot -n, or into
the slot the current key opened. The salt is kept; -i changes the iteration count, which
both slots share.";

const DELKEY_HERE: &str = "\
Here: sectorcrypt remove-key PROV --key-slot N (which asks for a passphrase; geli delkey does
not, and neither does this verb).";

const CLEAR_HERE: &str = "\
Here: sectorcrypt erase PROV --batch overwrites the metadata 5 times (geli kill); clear
zeroes the sector once. Neither asks for a passphrase; a provider in use is refused.";

/// A kernel-only verb's arguments, whatever they are: the verb only says what to do.
#[derive(Debug, Args)]
pub struct KernelArgs {
    /// geli's flags and providers for this verb.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Providers (one or more).
#[derive(Debug, Args)]
pub struct Provs {
    /// The providers.
    #[arg(required = true)]
    pub prov: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ConfigureArgs {
    /// Set the BOOT flag.
    #[arg(short = 'b')]
    pub boot: bool,
    /// Clear the BOOT flag.
    #[arg(short = 'B')]
    pub noboot: bool,
    /// Set GELIDISPLAYPASS (the boot prompt shows the passphrase's length).
    #[arg(short = 'd')]
    pub displaypass: bool,
    /// Clear GELIDISPLAYPASS.
    #[arg(short = 'D')]
    pub nodisplaypass: bool,
    /// Set GELIBOOT (the boot loader may attach it).
    #[arg(short = 'g')]
    pub geliboot: bool,
    /// Clear GELIBOOT.
    #[arg(short = 'G')]
    pub nogeliboot: bool,
    /// Set AUTORESIZE.
    #[arg(short = 'r')]
    pub autoresize: bool,
    /// Clear AUTORESIZE.
    #[arg(short = 'R')]
    pub noautoresize: bool,
    /// Pass TRIM through (NODELETE cleared).
    #[arg(short = 't')]
    pub trim: bool,
    /// Do not pass TRIM through (NODELETE set).
    #[arg(short = 'T')]
    pub notrim: bool,
    /// The providers.
    #[arg(required = true)]
    pub prov: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct Prov {
    /// The provider (an image file or block device).
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Authenticated provider with this HMAC: HMAC/SHA1, HMAC/RIPEMD160, HMAC/SHA256,
    /// HMAC/SHA384 or HMAC/SHA512.
    #[arg(short = 'a', value_name = "AALGO")]
    pub aalgo: Option<String>,
    /// Ask for the passphrase on boot (BOOT flag).
    #[arg(short = 'b')]
    pub boot: bool,
    /// Write the metadata backup to FILE ("none": no backup) [default:
    /// /var/backups/<prov>.eli].
    #[arg(short = 'B', value_name = "FILE")]
    pub backup: Option<PathBuf>,
    /// Show the passphrase length while booting (GELIDISPLAYPASS).
    #[arg(short = 'd')]
    pub displaypass: bool,
    /// Encryption: AES-XTS (default), AES-CBC, CAMELLIA-CBC, or NULL (with -a only).
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
    /// Key length in bits (AES-XTS 128 or 256, default 128; AES-CBC and CAMELLIA-CBC 128,
    /// 192 or 256).
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
    /// Overwrite a provider that holds a volume (a LUKS header, GELI metadata) without
    /// asking; without it, init over an existing volume asks for confirmation.
    #[arg(long, short = 'q')]
    pub batch: bool,
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
    pub tls: crate::flags::tls::TlsArgs,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Dry run: check the key opens the provider, serve nothing.
    #[arg(short = 'C')]
    pub dryrun: bool,
    /// Stop serving once the last client has disconnected (detach on last close).
    #[arg(short = 'd')]
    pub detach: bool,
    /// Try only this master-key slot (0 or 1).
    #[arg(short = 'n', value_name = "KEYNO")]
    pub keyno: Option<usize>,
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
    /// Refuse a provider without data authentication (AUTH flag clear). The AUTH flag is
    /// not itself authenticated, here as on FreeBSD: whoever can write the metadata can
    /// clear it (recomputing its MD5), and an -a provider then attaches without checking
    /// any tag. Give --integrity when the provider must be an authenticated one.
    #[arg(long)]
    pub integrity: bool,
    #[command(flatten)]
    pub listen: Listen,
    /// The provider.
    pub prov: PathBuf,
}

#[derive(Debug, Args)]
pub struct OnetimeArgs {
    /// Authenticated sectors with this HMAC: HMAC/SHA1, HMAC/RIPEMD160, HMAC/SHA256,
    /// HMAC/SHA384 or HMAC/SHA512 (sectors never written since then fail their tags).
    #[arg(short = 'a', value_name = "AALGO")]
    pub aalgo: Option<String>,
    /// Stop serving once the last client has disconnected (detach on last close).
    #[arg(short = 'd')]
    pub detach: bool,
    /// Encryption: AES-XTS (default), AES-CBC, CAMELLIA-CBC, or NULL (with -a only).
    #[arg(short = 'e', value_name = "EALGO")]
    pub ealgo: Option<String>,
    /// Key length in bits (AES-XTS 128 or 256, default 128; AES-CBC and CAMELLIA-CBC 128,
    /// 192 or 256).
    #[arg(short = 'l', value_name = "KEYLEN")]
    pub keylen: Option<u16>,
    /// No automatic resize (accepted; a served provider keeps its size anyway).
    #[arg(short = 'R')]
    pub noautoresize: bool,
    /// The GELI sector size (a power of two, a multiple of 512; default 512).
    #[arg(short = 's', value_name = "SECTORSIZE")]
    pub sectorsize: Option<u32>,
    /// Do not pass TRIM through (the default here: TRIM is never offered).
    #[arg(short = 'T')]
    pub notrim: bool,
    #[command(flatten)]
    pub listen: Listen,
    /// The provider: all of it is data (no metadata sector).
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
    /// A keyfile of the new key; repeatable, in order.
    #[arg(short = 'K', value_name = "NEWKEYFILE")]
    pub newkeyfile: Vec<PathBuf>,
    /// The master-key slot to write (0 or 1; default: the one the current key opens).
    #[arg(short = 'n', value_name = "KEYNO")]
    pub keyno: Option<usize>,
    /// The current key has no passphrase.
    #[arg(short = 'p')]
    pub no_passphrase: bool,
    /// The new key has no passphrase: the -K keyfiles alone.
    #[arg(short = 'P')]
    pub no_new_passphrase: bool,
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
