//! `sectorcrypt geli VERB ...`: geli(8)'s command lines, with its own flag letters, as a
//! FreeBSD user types them (`lib/geom/eli/geom_eli.c`, `class_commands`). Each verb is
//! translated into the arguments of the command that does the same thing here and runs
//! that command: init = `format --type geli`, attach = `serve`, onetime = `serve
//! --onetime`, setkey = `change-key` (or `add-key -S N` with `-n N`), kill = `erase`,
//! backup/restore = `header backup/restore`, resize = `resize`, dump = `dump`. delkey
//! removes master-key slots without a passphrase, as geli does. Passphrase files (`-j`,
//! `-J`) count up to their first newline, as every GELI passphrase does here
//! (`geli::keys`).

use crate::args::{
    AddKeyArgs, DumpArgs, EraseArgs, FormatArgs, HeaderArg, HeaderCommand, KeyArgs, LuksType,
    OpenArgs, PbkdfArgs, ResizeArgs, ServeArgs, TestKeyArgs,
};
use crate::failure::Failure;
use crate::image::{self, Access};
use crate::{cmd_geli, cmd_serve, cmd_volume};
use clap::{Args, Subcommand};
use sectorcrypt_volume::geli::{self, resize};
use sectorcrypt_volume::lock::Mode;
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

fn key(passfile: Option<PathBuf>, keyfiles: Vec<PathBuf>, no_pass: bool) -> KeyArgs {
    KeyArgs {
        key_file: passfile,
        keyfile_component: keyfiles,
        no_passphrase: no_pass,
        key_slot: None,
        batch: true,
    }
}

fn pbkdf(iterations: Option<u32>) -> PbkdfArgs {
    PbkdfArgs {
        pbkdf: None,
        hash: None,
        iter_time: 2000,
        pbkdf_memory: None,
        pbkdf_parallel: None,
        pbkdf_force_iterations: iterations,
    }
}

fn serve(open: OpenArgs, listen: Listen) -> Result<(), Failure> {
    cmd_serve::run(ServeArgs {
        open,
        socket: listen.socket,
        listen: listen.listen,
        export_name: String::new(),
        allow_discards: false,
        socket_mode: None,
        timeout: 30,
        idle_timeout: 0,
    })
}

/// Runs one geli verb.
pub fn run(a: GeliArgs) -> Result<(), Failure> {
    match a.verb {
        Verb::Init(a) => init(a),
        Verb::Attach(a) => {
            let key = key(a.passfile, a.keyfile, a.no_passphrase);
            if a.dryrun {
                return cmd_volume::test_key(TestKeyArgs {
                    image: a.prov,
                    header: HeaderArg::default(),
                    key,
                });
            }
            let open = OpenArgs {
                image: a.prov,
                header: HeaderArg::default(),
                key_file: key.key_file,
                keyfile_component: key.keyfile_component,
                no_passphrase: key.no_passphrase,
                onetime: false,
                read_only: a.readonly,
                threads: None,
            };
            serve(open, a.listen)
        }
        Verb::Onetime(a) => {
            let open = OpenArgs {
                image: a.prov,
                header: HeaderArg::default(),
                key_file: None,
                keyfile_component: Vec::new(),
                no_passphrase: false,
                onetime: true,
                read_only: false,
                threads: None,
            };
            serve(open, a.listen)
        }
        Verb::Setkey(a) => setkey(a),
        Verb::Delkey(a) => delkey(a),
        Verb::Kill(p) => cmd_volume::erase(EraseArgs {
            image: p.prov,
            header: HeaderArg::default(),
            batch: true,
        }),
        Verb::Backup(a) => cmd_volume::header(HeaderCommand::Backup {
            image: a.prov,
            file: a.file,
            header: HeaderArg::default(),
        }),
        Verb::Restore(a) if a.force => restore_forced(a),
        Verb::Restore(a) => cmd_volume::header(HeaderCommand::Restore {
            image: a.prov,
            file: a.file,
            batch: true,
            header: HeaderArg::default(),
        }),
        Verb::Resize(a) => cmd_geli::resize(ResizeArgs {
            image: a.prov,
            old_size: a.oldsize,
        }),
        Verb::Dump(p) => cmd_volume::dump(DumpArgs {
            image: p.prov,
            header: HeaderArg::default(),
            json: false,
        }),
        Verb::Version(a) => version(a),
    }
}

fn init(a: InitArgs) -> Result<(), Failure> {
    if let Some(aalgo) = a.aalgo {
        return Err(Failure::usage(format!(
            "geli init -a {aalgo}: authenticated providers are not supported yet"
        )));
    }
    if a.no_passphrase && (a.passfile.is_some() || a.iterations.is_some()) {
        return Err(Failure::usage(
            "options -P and -J (or -i) are mutually exclusive",
        ));
    }
    let version = a.version.unwrap_or(geli::metadata::VERSION);
    let cipher = match a.ealgo {
        Some(e) => e,
        // geli's default before version 5, which has no AES-XTS.
        None if version < 5 => "aes-cbc".into(),
        None => "aes-xts".into(),
    };
    let prov = a.prov.clone();
    cmd_volume::format(FormatArgs {
        image: a.prov,
        header: HeaderArg::default(),
        size: None,
        luks_type: LuksType::Geli,
        cipher,
        key_size: a.keylen.filter(|&n| n != 0),
        sector_size: a.sectorsize.filter(|&n| n != 0),
        label: None,
        geli_version: version,
        geli_boot: a.boot,
        geli_boot_loader: a.geliboot,
        geli_display_pass: a.displaypass,
        geli_no_trim: a.notrim,
        geli_no_autoresize: a.noautoresize,
        pbkdf: pbkdf(a.iterations),
        key: key(a.passfile, a.keyfile, a.no_passphrase),
    })?;
    match a.backup {
        Some(file) if file.as_os_str() != "none" => {
            cmd_volume::header(HeaderCommand::Backup {
                image: prov.clone(),
                file: file.clone(),
                header: HeaderArg::default(),
            })?;
            println!(
                "It can be restored with: sectorcrypt geli restore {} {}",
                file.display(),
                prov.display()
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

fn setkey(a: SetkeyArgs) -> Result<(), Failure> {
    if !a.newkeyfile.is_empty() && a.newkeyfile != a.keyfile {
        return Err(Failure::usage(
            "geli setkey -K: new keyfiles other than the current ones (-k) are not supported \
             yet",
        ));
    }
    let mut key = key(a.passfile, a.keyfile, a.no_passphrase);
    key.key_slot = a.keyno;
    let args = AddKeyArgs {
        image: a.prov,
        header: HeaderArg::default(),
        new_key_file: a.newpassfile,
        pbkdf: pbkdf(a.iterations),
        key,
    };
    // -n N writes slot N whichever slot the current key opens: add-key's -S.
    match a.keyno {
        Some(_) => cmd_volume::add_key(args),
        None => cmd_volume::change_key(args),
    }
}

/// geli delkey: no passphrase; the last slot in use only with -f; -a destroys both.
fn delkey(a: DelkeyArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.prov, &HeaderArg::default(), Access::Keyslots)?;
    if img.header.name() != geli::NAME {
        return Err(Failure::usage(format!(
            "{} is not a GELI provider",
            a.prov.display()
        )));
    }
    let removed = img.update(|h, store| {
        let active = h.active_keyslots()?;
        let slots = match a.keyno {
            _ if a.all => active.clone(),
            Some(n) if !active.contains(&n) => {
                return Err(Failure::usage(format!("master key {n} is not set")))
            }
            Some(n) => vec![n],
            None => unreachable!("clap requires -n without -a"),
        };
        if !a.force && !a.all && active.iter().all(|s| slots.contains(s)) {
            return Err(Failure::usage(
                "this is the last master key: use -f to remove it",
            ));
        }
        for &n in &slots {
            h.remove_key(store, n)?;
        }
        Ok(slots)
    })?;
    for n in removed {
        println!("master key {n} destroyed");
    }
    Ok(())
}

/// geli restore -f: the backup onto a provider of another size, its size written in.
fn restore_forced(a: RestoreArgs) -> Result<(), Failure> {
    let backup = image::open_store(&a.file, false)?;
    let store = image::open_store(&a.prov, true)?;
    let _claim = image::claim(&store, &a.prov, Mode::Exclusive)?;
    let _lock = image::lock_header(&store, &a.prov, Mode::Exclusive)?;
    let g = resize::restore_resized(&store, &backup)?;
    println!(
        "metadata of {} restored from {} (provider size {})",
        a.prov.display(),
        a.file.display(),
        g.metadata().provsize
    );
    Ok(())
}

fn version(a: VersionArgs) -> Result<(), Failure> {
    if a.prov.is_empty() {
        println!(
            "sectorcrypt {}: GELI metadata versions 0 to {v} read, 1 to {v} written \
             (default {v})",
            env!("CARGO_PKG_VERSION"),
            v = geli::metadata::VERSION
        );
        return Ok(());
    }
    for p in &a.prov {
        let h = image::open(p, &HeaderArg::default(), Access::Inspect)?;
        let g = h
            .header
            .downcast_ref::<geli::Geli>()
            .ok_or_else(|| Failure::usage(format!("{} is not a GELI provider", p.display())))?;
        println!("{}: {}", p.display(), g.metadata().version);
    }
    Ok(())
}
