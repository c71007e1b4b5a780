//! The command line, as clap definitions. The flags are an interface scripts rely on.

use crate::flags::listed::Listed;
use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

pub const EXIT_CODES: &str =
    "Exit codes: 0 success, 1 runtime failure (I/O), 2 bad usage or bad input \
(nothing is written to the output then), 3 wrong passphrase (no keyslot opens with it).";

/// sectorcrypt: a userspace storage-encryption engine (AES-XTS/CBC/CTR/ECB at the speed of
/// the hardware, dm-crypt compatible sector formats).
#[derive(Debug, Parser)]
#[command(name = "sectorcrypt", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Progress of long work (read, write, erase, the GELI wipe, KDF calibration and
    /// derivation) on standard error: auto (a line on a terminal, nothing otherwise), none,
    /// or json (one JSON object a line, once a second).
    #[arg(long, global = true, value_enum, value_name = "WHEN",
          default_value_t = crate::present::progress::ProgressMode::Auto)]
    pub progress: crate::present::progress::ProgressMode,
}

/// How volumes on remote stores are reached: global, as every volume command takes an
/// NBD URI (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH, nbds:// and
/// nbds+unix:// over TLS) or an rbd:POOL/IMAGE spec in place of IMAGE.
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// NBD: connections to open when the server allows multi-conn (1 otherwise).
    #[arg(long, global = true, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub connections: u16,
    /// NBD: seconds opening a connection (connect, TLS and handshake together), or a
    /// request (from its sending to its whole reply), may take before it fails (0: no
    /// limit).
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30)]
    pub remote_timeout: u64,
    /// NBD: after a connection fails, send each request again on a new connection up to
    /// N times (flushes are never sent again).
    #[arg(long, global = true, value_name = "N", default_value_t = 0)]
    pub retry: u32,
}

impl RemoteArgs {
    /// The options of the store locator.
    pub fn options(&self) -> sectorcrypt_image::RemoteOptions {
        sectorcrypt_image::RemoteOptions {
            connections: usize::from(self.connections),
            timeout_secs: self.remote_timeout,
            retry: self.retry,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Encrypt, decrypt or MAC a stream: dm-crypt cipher strings, raw AES modes, AES-GCM,
    /// GOST 28147-89 and Magma.
    #[command(after_long_help = crate::flags::ciphers::help::EXAMPLES)]
    Cipher(CipherArgs),
    /// Show the CPU features seen and the backend chosen for each algorithm.
    #[command(after_long_help = BACKENDS_HELP)]
    Backends(BackendsArgs),
    /// Measure sectorcrypt against OpenSSL, in the same process (build with --release).
    #[command(after_long_help = BENCH_HELP)]
    Bench(BenchArgs),
    /// Run a short built-in demonstration: known-answer check, sector round trip.
    Demo,
    /// Create a LUKS2 or LUKS1 volume (the image is created when missing).
    #[command(after_long_help = FORMAT_HELP)]
    Format(FormatArgs),
    /// Show a volume's header (no passphrase needed, except for VeraCrypt/TrueCrypt).
    #[command(after_long_help = crate::flags::tcrypt::foreign_help())]
    Dump(DumpArgs),
    /// Add a passphrase in a free keyslot (asks for an existing one first).
    AddKey(AddKeyArgs),
    /// Destroy the keyslot the given passphrase opens.
    RemoveKey(RemoveKeyArgs),
    /// Replace the passphrase of the keyslot the old passphrase opens.
    ChangeKey(AddKeyArgs),
    /// Check a passphrase: exit 0 and name the keyslot when it opens the volume, 3 when not.
    #[command(after_long_help = crate::flags::tcrypt::foreign_help())]
    TestKey(TestKeyArgs),
    /// Back up or restore the headers and keyslot areas.
    #[command(subcommand)]
    Header(HeaderCommand),
    /// Rebuild a damaged or stale header copy from the good one (as `cryptsetup repair`).
    #[command(after_long_help = REPAIR_HELP)]
    Repair(RepairArgs),
    /// Destroy every keyslot: the data can never be opened again without a header backup.
    Erase(EraseArgs),
    /// Re-key a LUKS2 volume in place (cipher, key size, sector size too), resumably, as
    /// `cryptsetup reencrypt` does.
    #[command(after_long_help = crate::flags::reencrypt::REENCRYPT_HELP)]
    Reencrypt(crate::flags::reencrypt::ReencryptArgs),
    /// Convert a LUKS volume to LUKS1 or LUKS2 in place, as `cryptsetup convert`.
    #[command(after_long_help = crate::flags::convert::CONVERT_HELP)]
    Convert(crate::flags::convert::ConvertArgs),
    /// GELI: after the image grew, move its metadata to the new last sector (geli resize).
    #[command(after_long_help = RESIZE_HELP)]
    Resize(ResizeArgs),
    /// geli(8)'s verbs with its own flag letters: init, attach, onetime, setkey, delkey,
    /// kill, backup, restore, resize, dump, version.
    #[command(after_long_help = crate::flags::geli::HELP)]
    Geli(crate::flags::geli::GeliArgs),
    /// Write a volume's plaintext to standard output or a file.
    #[command(after_long_help = crate::flags::tcrypt::foreign_help())]
    Read(ReadArgs),
    /// Store plaintext from standard input or a file into a volume.
    #[command(after_long_help = crate::flags::tcrypt::foreign_help())]
    Write(WriteArgs),
    /// Serve the plaintext of a volume over NBD (a Unix socket or a loopback TCP port).
    #[command(after_long_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Show the plaintext of a volume as the file MOUNTPOINT/disk (FUSE, direct I/O).
    #[command(after_long_help = MOUNT_HELP)]
    Mount(MountArgs),
    /// Unmount what `sectorcrypt mount` mounted (the volume is flushed first).
    Umount(UmountArgs),
    /// Unlock a volume under NAME and serve it in the background: NBD, and on request a
    /// FUSE file and a loop device.
    #[command(after_long_help = crate::flags::open::OPEN_HELP)]
    Open {
        #[command(flatten)]
        open: OpenArgs,
        #[command(flatten)]
        named: crate::flags::open::NamedArgs,
    },
    /// Stop what `open` started under NAME: detach, unmount, flush, stop the server.
    Close(crate::flags::open::CloseArgs),
    /// List the volumes `open` serves (format, cipher, size, URI, mount, loop device) and
    /// the gateways `serve --config` runs, with their exports and clients.
    Status(crate::flags::open::StatusArgs),
    /// Ask a running gateway (`serve --config`) to read its configuration again.
    #[command(after_long_help = GATEWAY_HELP)]
    Gateway(GatewayArgs),
    /// Print the completion script of a shell (bash, zsh or fish) for sectorcrypt.
    #[command(after_long_help = crate::flags::manuals::COMPLETIONS_HELP)]
    Completions(crate::flags::manuals::CompletionsArgs),
    /// Write the manual pages of sectorcrypt and of each of its commands into a folder.
    #[command(after_long_help = crate::flags::manuals::MAN_HELP)]
    Man(crate::flags::manuals::ManArgs),
}

const FORMAT_HELP: &str = "\
Defaults are cryptsetup 2.6's: --type luks2, --cipher aes-xts-plain64, --key-size 512,
--pbkdf argon2id calibrated to --iter-time 2000 ms with --pbkdf-memory up to 1 GiB (at most
half the RAM) and --pbkdf-parallel min(4, cores); LUKS1 uses pbkdf2-sha256. LUKS2 reserves
16 MiB for the two header copies and the keyslots; LUKS1 2 MiB. The data area is not wiped.
--sector-size defaults to 4096 for LUKS2 (as cryptsetup picks for files) when the data area
is a multiple of 4096 bytes, else 512.
Passphrases: prompted twice without echo on a terminal, else one line from standard input,
or --key-file F (the file's bytes, all of them, are the passphrase; '-' reads stdin).
VeraCrypt (--type veracrypt): the header at 0 and its backup 128 KiB before the end, each \
128 KiB header area filled with random bytes first; data from 128 KiB to 128 KiB before the \
end, 512-byte sectors, XTS under random master keys, --cipher a chain (default aes), PBKDF2 \
with --hash (default sha512): 500000 iterations (RIPEMD-160: 655331), or 15000 + 1000 x PIM \
with --veracrypt-pim PIM (Argon2id, which VeraCrypt 1.26.27 and later can use, is opened \
but never made here: --hash argon2id is refused). Keyfiles with --keyfile-component, in \
order (--no-passphrase: keyfiles only). --hidden-size SIZE --hidden-key-file FILE also makes a hidden volume, as \
VeraCrypt does: its header at 64 KiB (backup 64 KiB before the end), its data at the end of \
the outer data area, the same cipher and hash, its own passphrase (--hidden-keyfile-component \
and --hidden-veracrypt-pim for its keyfiles and PIM). It is at least 40 KiB, and the outer \
volume keeps at least 36 KiB (VeraCrypt's limits); a size that does not fit is refused \
before anything is written. Open it with --type veracrypt --tcrypt-hidden; protect it while \
the outer volume is written with --protect-hidden-key-file (read, write, serve, mount).
Examples:
  sectorcrypt format disk.img --size 1G
  sectorcrypt format disk.img --type luks1 --cipher aes-cbc-essiv:sha256 --key-size 256
  sectorcrypt format data.img --header hdr.img   # detached header, data from byte 0
  printf secret | sectorcrypt format disk.img --size 64M --key-file - --batch
  sectorcrypt format vc.img --size 64M --type veracrypt --key-file outer.pass \\
      --hidden-size 16M --hidden-key-file hidden.pass";

/// A detached header: every volume command takes it.
#[derive(Debug, Args, Clone, Default)]
pub struct HeaderArg {
    /// The volume's header and keyslots are in FILE, detached from IMAGE, which then holds
    /// only data (cryptsetup's --header; `format` creates FILE when it does not exist).
    #[arg(long = "header", id = "header", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// Where passphrases come from.
#[derive(Debug, Args, Clone)]
pub struct KeyArgs {
    /// Read the passphrase from FILE (its exact bytes; '-' for standard input) instead of
    /// prompting.
    #[arg(long, short = 'd', value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// GELI: a keyfile that is part of the key (geli's -k), in order; VeraCrypt/TrueCrypt:
    /// a keyfile (cryptsetup's --key-file there); repeatable.
    #[arg(long = "keyfile-component", value_name = "FILE")]
    pub keyfile_component: Vec<PathBuf>,
    /// GELI: the key is made of keyfiles only (geli's -P); BitLocker: open a clear key;
    /// VeraCrypt/TrueCrypt: keyfiles only. No passphrase is read.
    #[arg(long)]
    pub no_passphrase: bool,
    /// BitLocker: open with this startup key file (.BEK) instead of a passphrase (a
    /// 48-digit recovery password is given as the passphrase, told apart by its form).
    #[arg(long = "bitlk-startup-key", value_name = "FILE")]
    pub bitlk_startup_key: Option<PathBuf>,
    /// add-key: the keyslot for the new passphrase; other commands: only try this keyslot.
    #[arg(long, short = 'S', value_name = "N")]
    pub key_slot: Option<usize>,
    /// Answer confirmations with yes (for scripts).
    #[arg(long, short = 'q', visible_alias = "batch-mode")]
    pub batch: bool,
}

/// KDF choice for new keyslots.
#[derive(Debug, Args, Clone)]
pub struct PbkdfArgs {
    /// pbkdf2, argon2i or argon2id (default argon2id for LUKS2, pbkdf2 for LUKS1).
    #[arg(long, value_name = "KDF")]
    pub pbkdf: Option<String>,
    /// Hash for pbkdf2 and the AF splitter: sha1, sha256, sha512, whirlpool, ripemd160 or
    /// streebog512 (default sha256). VeraCrypt:
    /// PBKDF2's hash, sha512 (default), sha256, whirlpool, ripemd160, stribog512 or
    /// blake2s-256 (Argon2id is not made here).
    #[arg(long, value_name = "HASH")]
    pub hash: Option<String>,
    /// Milliseconds one unlock should take on this machine (calibration target).
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub iter_time: u32,
    /// Argon2 memory cost in KiB.
    #[arg(long, value_name = "KIB")]
    pub pbkdf_memory: Option<u32>,
    /// Argon2 parallel cost (lanes).
    #[arg(long, value_name = "N")]
    pub pbkdf_parallel: Option<u32>,
    /// Skip calibration: pbkdf2 iterations or the argon2 time cost.
    #[arg(long, value_name = "N")]
    pub pbkdf_force_iterations: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LuksType {
    Luks2,
    Luks1,
    Geli,
    // A VeraCrypt volume (with a hidden volume on request: --hidden-size).
    Veracrypt,
}

/// What only `format --type veracrypt` takes.
#[derive(Debug, Args, Clone, Default)]
pub struct VeracryptFormatArgs {
    /// VeraCrypt: the PIM; PBKDF2 then runs 15000 + 1000 x PIM iterations (without it:
    /// 500000 for SHA-512 and the others, 655331 for RIPEMD-160).
    #[arg(long = "veracrypt-pim", value_name = "PIM")]
    pub pim: Option<u32>,
    /// VeraCrypt: also make a hidden volume of SIZE bytes (or with K, M, G, T) at the end
    /// of the outer volume's data, opened by its own passphrase (--hidden-key-file).
    #[arg(
        long = "hidden-size",
        value_name = "SIZE",
        requires = "hidden_key_file"
    )]
    pub hidden_size: Option<String>,
    /// VeraCrypt: the hidden volume's passphrase is this file's bytes ('-' for standard
    /// input); it must differ from the outer volume's.
    #[arg(
        long = "hidden-key-file",
        value_name = "FILE",
        requires = "hidden_size"
    )]
    pub hidden_key_file: Option<PathBuf>,
    /// VeraCrypt: a keyfile of the hidden volume, in order; repeatable.
    #[arg(
        long = "hidden-keyfile-component",
        value_name = "FILE",
        requires = "hidden_size"
    )]
    pub hidden_keyfile_component: Vec<PathBuf>,
    /// VeraCrypt: the hidden volume's PIM.
    #[arg(
        long = "hidden-veracrypt-pim",
        value_name = "PIM",
        requires = "hidden_size"
    )]
    pub hidden_pim: Option<u32>,
}

#[derive(Debug, Args)]
pub struct FormatArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Size of the image to create when it does not exist (bytes, or with K, M, G, T).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// luks2, luks1, geli or veracrypt.
    #[arg(long = "type", value_enum, default_value_t = LuksType::Luks2)]
    pub luks_type: LuksType,
    /// Segment cipher: aes-xts-plain64, aes-xts-plain, aes-cbc-plain64, aes-cbc-essiv:sha256;
    /// serpent-, twofish-, camellia- and kuznyechik- with xts-plain64, xts-plain,
    /// cbc-plain64, cbc-plain or cbc-essiv:sha256 (kuznyechik: 512-bit XTS and 256-bit CBC
    /// keys only; mainline Linux's dm-crypt has no kuznyechik)
    /// (GELI: aes-xts, aes-cbc, camellia-cbc, or null with --integrity; VeraCrypt: a chain
    /// as cryptsetup names it, aes, serpent, twofish, camellia, kuznyechik,
    /// serpent-twofish-aes, ..., in XTS; the default is aes).
    #[arg(
        long,
        short = 'c',
        value_name = "SPEC",
        default_value = "aes-xts-plain64"
    )]
    pub cipher: String,
    /// Volume key size in bits (xts: 256, 384 or 512, kuznyechik 512; cbc: 128, 192 or
    /// 256).
    #[arg(long, short = 's', value_name = "BITS")]
    pub key_size: Option<usize>,
    /// Encryption sector size (LUKS2): 512, 1024, 2048 or 4096.
    #[arg(long, value_name = "N")]
    pub sector_size: Option<usize>,
    /// LUKS2 label.
    #[arg(long, value_name = "L")]
    pub label: Option<String>,
    /// Lay the volume out for an RBD image of this object size (a power of two, 4K to
    /// 32M), as `rbd encryption format` does: data aligned to an object. Automatic on an
    /// rbd: image.
    #[arg(long, value_name = "BYTES")]
    pub rbd_object_size: Option<String>,
    /// GELI: the metadata version to write (geli's -V), 1 to 7.
    #[arg(long, value_name = "N", default_value_t = 7)]
    pub geli_version: u32,
    /// GELI: ask for the passphrase while booting (geli init -b, the BOOT flag).
    #[arg(long)]
    pub geli_boot: bool,
    /// GELI: the loader may attach it (geli init -g, GELIBOOT).
    #[arg(long)]
    pub geli_boot_loader: bool,
    /// GELI: show the passphrase length while booting (geli init -d, GELIDISPLAYPASS).
    #[arg(long)]
    pub geli_display_pass: bool,
    /// GELI: do not pass TRIM through (geli init -T, NODELETE).
    #[arg(long)]
    pub geli_no_trim: bool,
    /// GELI: no automatic resize (geli init -R: AUTORESIZE, set by default, cleared).
    #[arg(long)]
    pub geli_no_autoresize: bool,
    /// GELI: authenticated sectors (geli init -a): hmac-sha256, hmac-sha1, hmac-ripemd160,
    /// hmac-sha384 or hmac-sha512 (geli's HMAC/SHA256 ... too).
    #[arg(long, value_name = "ALG")]
    pub integrity: Option<String>,
    /// GELI with --integrity: do not write every sector now (unwritten sectors then fail
    /// their tags when read).
    #[arg(long)]
    pub no_wipe: bool,
    /// Ask for confirmation only when the image holds a known format's signature (`geli
    /// init`, which overwrites a blank provider without asking, as geli does).
    #[arg(skip)]
    pub ask_only_over_a_volume: bool,
    #[command(flatten)]
    pub veracrypt: VeracryptFormatArgs,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Print JSON: the format's own metadata (LUKS2: its document, as cryptsetup's
    /// --dump-json-metadata), or with --json=common the fields every format shares, the
    /// metadata under "metadata" (docs/JSON.md).
    #[arg(long, value_enum, value_name = "FORM", num_args = 0..=1, require_equals = true,
          default_missing_value = "metadata")]
    pub json: Option<DumpJson>,
    /// VeraCrypt/TrueCrypt volumes (their header is encrypted whole: dump asks for the
    /// passphrase).
    #[command(flatten)]
    pub tcrypt: tcrypt::TcryptArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

/// `dump --json=FORM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DumpJson {
    /// The format's own metadata document.
    Metadata,
    /// The fields every format shares, with the metadata document under "metadata".
    Common,
}

#[derive(Debug, Args)]
pub struct AddKeyArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// A file holding the new passphrase (its exact bytes); prompted otherwise.
    #[arg(value_name = "NEW_KEY_FILE")]
    pub new_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

#[derive(Debug, Args)]
pub struct RemoveKeyArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    #[command(flatten)]
    pub key: KeyArgs,
}

#[derive(Debug, Args)]
pub struct TestKeyArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Print the outcome as JSON: the keyslot that opened, or why none did (the exit
    /// code is the same).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub tcrypt: tcrypt::TcryptArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

#[derive(Debug, Subcommand)]
pub enum HeaderCommand {
    /// Copy the headers and keyslot areas of IMAGE to FILE (which must not exist).
    Backup {
        /// The image file or block device.
        image: PathBuf,
        /// The backup file to create.
        file: PathBuf,
        #[command(flatten)]
        header: HeaderArg,
    },
    /// Write the headers and keyslot areas from FILE onto IMAGE (after confirmation).
    Restore {
        /// The image file or block device.
        image: PathBuf,
        /// A backup made by `header backup` or `cryptsetup luksHeaderBackup`.
        file: PathBuf,
        /// Answer confirmations with yes (for scripts).
        #[arg(long, short = 'q', visible_alias = "batch-mode")]
        batch: bool,
        #[command(flatten)]
        header: HeaderArg,
    },
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    #[command(flatten)]
    pub key: KeyArgs,
}

const REPAIR_HELP: &str = "\
LUKS2 keeps two copies of its header: a copy that is damaged, or older than the other, is
rewritten from the valid one (its metadata byte for byte, the same sequence id). LUKS1 has
one copy: inactive keyslots that point outside cryptsetup's standard layout are reset there
(active keyslots are never moved). A header with nothing valid to rebuild from is refused
(exit 2) and left as it is. Exit 0 also when nothing needed repair.

A LUKS2 re-encryption interrupted inside a hotzone (by a crash or a kill) is recovered from
its resilience data, as `cryptsetup repair` does; that needs the passphrase. Afterwards the
re-encryption is stopped cleanly: resume it with `sectorcrypt reencrypt`.";

#[derive(Debug, Args)]
pub struct EraseArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Answer confirmations with yes (for scripts).
    #[arg(long, short = 'q', visible_alias = "batch-mode")]
    pub batch: bool,
}

const RESIZE_HELP: &str = "\
As `geli resize -s OLDSIZE`: grow the image first (truncate -s, qemu-img resize), then name the
size it had. The metadata is read from the last sector of the old size, must name that size
as its provider size, and is written with the new size to the new last sector; the old
metadata sector is then zeroed. Nothing is written when the metadata is not there or the sizes
make no sense (exit 2). LUKS volumes are refused. Example:
  truncate -s 2G disk.img && sectorcrypt resize disk.img --old-size 1G";

#[derive(Debug, Args)]
pub struct ResizeArgs {
    /// The GELI image, already grown.
    pub image: PathBuf,
    /// The image's size before it grew (bytes, or with K, M, G, T), geli's -s oldsize.
    #[arg(long, value_name = "SIZE")]
    pub old_size: String,
}

#[derive(Debug, Args)]
pub struct BackendsArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

const BACKENDS_HELP: &str = "\
SECTORCRYPT_BACKEND=soft|aesni|vaes|avx512|avx2|shani forces a backend for every algorithm that
has it and the portable backend for those that do not (avx2: AES, Camellia and Twofish soft,
GOST and Serpent avx2, GELI tags soft; aesni or vaes: GOST, Serpent, Camellia, Twofish and tags
soft; avx512: AES, GOST, Serpent, Camellia, Twofish and tags avx512 (GOST's needs VBMI,
Camellia's GFNI and VPCLMULQDQ, Twofish's VBMI and GFNI); shani: tags shani, AES, GOST,
Serpent, Camellia and Twofish soft); a name that does not exist or that
this CPU cannot run is an error (exit 2).
On avx512, each AES mode runs on ymm or zmm registers, whichever measured faster at first use;
SECTORCRYPT_AES_WIDTH=ymm|zmm forces one (another value is an error). The report also shows the
unit probe's AES rates and the core's physical AES limit in cycles per byte.";

const BENCH_HELP: &str = "\
Run it from a release build: cargo run --release -p sectorcrypt -- bench
Each case runs sectorcrypt and OpenSSL's EVP interleaved on the same buffers, at least 7
runs, and reports median, min, max, the ratio to OpenSSL and cycles per byte at a clock
measured in the same process; AES cases also the fraction of the core's AES limit they reach
(the best register width the unit probe measured, whatever the backend).
AES cases also run, in the same rotation, on the newest OpenSSL release and on AWS-LC where
scripts/bench-peers.sh has built them (libraries next to the binary, or the paths in
SECTORCRYPT_PEER_OPENSSL4 and SECTORCRYPT_PEER_AWSLC); an absent one is named in the report
(an error under SECTORCRYPT_STRICT=1). Every peer's output is checked against ours first.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Direction {
    Encrypt,
    Decrypt,
    /// Compute a MAC (with a cipher that says `cipher mac`) and print it as lowercase hex.
    Mac,
}

/// `cipher`: which option goes with which cipher is in the cipher table
/// (`ciphers::CIPHERS`), which the `--cipher` help lists and the command checks.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("keysrc").required(true).args(["key", "key_file"])))]
pub struct CipherArgs {
    /// encrypt, decrypt, or mac.
    #[arg(value_enum)]
    pub direction: Direction,
    /// The cipher: a dm-crypt cipher string, a raw AES mode, AES-GCM, GOST 28147-89 or
    /// Magma.
    #[arg(long, value_name = "SPEC", value_parser = crate::flags::ciphers::help::CIPHER_NAMES)]
    pub cipher: String,
    /// The key as hex digits.
    #[arg(long, value_name = "HEX")]
    pub key: Option<String>,
    /// A file holding the raw key bytes (at most 8 MiB; read into locked memory).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// The IV, hex: the initial counter block (CTR), the tweak (XTS) or the nonce (AEADs);
    /// its length is the cipher's.
    #[arg(long, value_name = "HEX")]
    pub iv: Option<String>,
    /// Additional authenticated data, hex.
    #[arg(long, value_name = "HEX")]
    pub aad: Option<String>,
    /// The length in bytes of the tag or of the MAC (for AES-GCM, 8 and 4 only for
    /// protocols that require them).
    #[arg(long, value_name = "N")]
    pub tag_len: Option<usize>,
    /// The GOST 28147-89 S-box parameter set by OID name or dotted OID (required, no
    /// default).
    #[arg(long, value_name = "NAME", value_parser = crate::flags::ciphers::help::SBOX_NAMES)]
    pub sbox: Option<String>,
    /// CryptoPro key meshing (RFC 4357) every 1024 bytes.
    #[arg(long)]
    pub key_meshing: bool,
    /// dm-crypt sectors: the IV number of the first sector.
    #[arg(long, value_name = "S")]
    pub sector: Option<u64>,
    /// dm-crypt sectors: bytes per sector (512, 1024, 2048, 4096, or a multiple of 16 up to
    /// 65536 with --iv-large-sectors).
    #[arg(long, value_name = "N")]
    pub sector_size: Option<usize>,
    /// dm-crypt sectors: the IV counts sectors, not 512-byte units.
    #[arg(long)]
    pub iv_large_sectors: bool,
    /// Read from FILE instead of standard input.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Write to FILE instead of standard output (replaced only on success).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `bench --backend`: the crypto crate's AES backends.
const BACKEND_NAMES: Listed = Listed(|| {
    sectorcrypt_crypto::Backend::ALL
        .iter()
        .map(|b| PossibleValue::new(b.name()))
        .collect()
});

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Only cases whose name contains SUBSTRING.
    #[arg(long, value_name = "SUBSTRING")]
    pub filter: Option<String>,
    /// Run sectorcrypt on this backend.
    #[arg(long, value_name = "NAME", value_parser = BACKEND_NAMES)]
    pub backend: Option<String>,
    /// A short smoke run (for CI): fewer runs, smaller totals.
    #[arg(long)]
    pub quick: bool,
    /// Threads for the multi-threaded cases (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the run as a chart into FILE (SVG; replaced only on success): GB/s of
    /// sectorcrypt and its peer per case, the spread of the runs, the machine's limit.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Instead of the cases, probe how the AES and carry-less multiply units share the
    /// core (cycles per VAESENC, per VPCLMULQDQ, and per mix of both): the GCM ceiling.
    #[arg(long, conflicts_with_all = ["filter", "json", "svg"])]
    pub probe: bool,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Plaintext byte offset to start at.
    #[arg(long, value_name = "N")]
    pub offset: Option<u64>,
    /// Bytes to read (default: to the end of the volume).
    #[arg(long, value_name = "N")]
    pub length: Option<u64>,
    /// Write to FILE instead of standard output (replaced only on success).
    #[arg(long, short = 'o', value_name = "F")]
    pub output: Option<PathBuf>,
    /// Read even while another process writes the volume (as cryptsetup's --shared),
    /// accepting that the data read may change meanwhile; without it `read` beside a
    /// writer is refused.
    #[arg(long)]
    pub shared: bool,
    #[command(flatten)]
    pub tcrypt: tcrypt::TcryptArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

#[derive(Debug, Args)]
pub struct WriteArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Plaintext byte offset to start at.
    #[arg(long, value_name = "N")]
    pub offset: Option<u64>,
    /// Read from FILE instead of standard input (then the passphrase needs --key-file or a
    /// terminal).
    #[arg(long, short = 'i', value_name = "F")]
    pub input: Option<PathBuf>,
    /// VeraCrypt/TrueCrypt volumes (normal and hidden ones; system volumes are read-only).
    #[command(flatten)]
    pub tcrypt: tcrypt::TcryptArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

const SERVE_HELP: &str = "\
Examples:
  sectorcrypt serve disk.img --socket /tmp/disk.sock --key-file pass.txt
  nbdcopy nbd+unix:///?socket=/tmp/disk.sock plain.raw
  sectorcrypt serve scratch.img --listen 127.0.0.1:10809 --onetime
  sectorcrypt serve vc.img --type veracrypt --key-file outer.pass \\
      --protect-hidden-key-file hidden.pass --socket /tmp/outer.sock

VeraCrypt/TrueCrypt volumes are served when named (--type tcrypt or veracrypt, with the \
TCRYPT flags of read and write); with --protect-hidden-key-file, a write, zeroing or trim \
that touches the hidden volume is answered EPERM and nothing of it is written.
Only a Unix socket or a loopback address is served. Without --socket and --listen, the
server takes the one listening socket systemd passes (socket activation: a .socket unit
with one ListenStream=; see contrib/systemd/; a gateway takes every socket passed and
serves the same exports on each), and says READY=1 to systemd under
Type=notify once it accepts clients. The server speaks the fixed newstyle
NBD protocol with several connections (multi-conn) and many requests in flight; SIGINT or
SIGTERM stops it after the requests in flight are done and the volume is flushed. A second
SIGINT or SIGTERM stops it at once, without waiting for them or flushing (over an NBD
export with --remote-timeout 0, requests an upstream never answers are waited for
forever).
Who may connect: a Unix socket is created mode 0600 whatever the umask (its owner and
root); --socket-mode 0660 lets its group in too. A TCP port has no access control: any
local user can connect, and the server says so when it starts (as it does for a socket
others may write in directories they may enter), unless TLS is required with
--tls-verify-peer. The socket's path is at most 107 bytes; if the socket is removed while
serving, the clients connected are still served, and the server stops when the last leaves.
Slow and idle clients: once a request has begun, its header, and a write's payload, must
arrive within --timeout seconds, or the connection is closed. A connection with no request
in flight is closed after --idle-timeout seconds (default: never). Up to 64 connections are
served; when all are taken, a new one takes the slot of the connection idle longest, once
it has finished its handshake (TLS included, the export chosen): connections still in
their handshake (at most 64 more, 10 seconds each at most) close no client.
After a failed flush every later flush fails, on every connection, until the server is
restarted: writes acknowledged before it may not have reached the disk.
TLS: --tls-certificates DIR (server-cert.pem, server-key.pem; ca-cert.pem for
--tls-verify-peer) requires TLS of every client; --tls on lets clients choose. Clients use
nbds+unix:///?socket=S&tls-certificates=DIR (libnbd) or qemu's tls-creds-x509 object.
--onetime: a GELI one-time provider (AES-XTS with 256-bit AES keys, 512-byte sectors,
`sectorcrypt geli onetime` for geli's other choices) under a fresh random master key that
is never stored (for swap or scratch space): no metadata is written and no sector reserved,
every byte of the file is data; whatever is written is unreadable once the server stops.

Many volumes, one server (a gateway): --config FILE, or --export NAME=LOCATOR repeated,
serves each volume under its name instead of IMAGE; clients pick one by name
(nbd+unix:///NAME?socket=S) and `nbdinfo --list` shows the names a client may use. With
--export, --key-file (a file, read for every export), --keyfile-component, --no-passphrase
and --read-only apply to every export:
  sectorcrypt serve --export vm1=vm1.img --export vm2=vm2.img --key-file pass \\
      --socket gw.sock
A configuration file (TOML) gives each export its own key, header and access:
  listen = [\"/run/sectorcrypt/gw.sock\", \"127.0.0.1:10809\"]  # each serves every export;
                                          # none: the sockets systemd passes
  metrics = \"127.0.0.1:9560\"              # per-export series, labelled export=\"NAME\"
  max_connections = 256                   # all exports together (default 64)
  max_connections_per_export = 128        # one export's (default: 3/4 of max_connections
                                          # with several exports; 0: no limit of its own)
  [tls]                                   # optional, for every export
  certificates = \"/etc/sectorcrypt/tls\"
  verify_peer = true                      # needed for tls_subjects
  [[export]]
  name = \"vm1\"
  image = \"/srv/vm1.img\"                  # a path, nbd:// URI or rbd: spec
  header = \"/srv/vm1.hdr\"                 # optional detached header
  key_file = \"/etc/sectorcrypt/vm1.pass\"  # or credential = \"vm1\" ($CREDENTIALS_DIRECTORY)
  allow_uids = [1000]                     # Unix clients by SO_PEERCRED; or allow_gids
  tls_subjects = [\"CN=backup,O=Example\"]  # TLS clients by certificate subject (RFC 4514)
  [[export]]
  name = \"geli0\"
  image = \"/srv/geli0.img\"
  no_passphrase = true
  keyfile_components = [\"/etc/sectorcrypt/geli0.key\"]
  read_only = true
An export with no allow_uids, allow_gids or tls_subjects admits every client that reaches
the socket; one with lists admits a client any of them admits. A client refused an export
is told nothing of it: it is not listed, and asking for it by name fails as for a name that
does not exist. Every export is opened before the server starts: an export that cannot be
opened (a wrong passphrase, a missing key file, a volume in use) is a misconfiguration, and
the server does not start; the error names the export (exit 3 for a wrong passphrase).
Unknown keys in the file are errors, with their line. --socket or --listen on the command
line take the place of the file's listen. With several addresses, removing the Unix socket
does not stop the server (the other addresses still reach it).
SIGHUP reads the --config file again: new exports are opened and offered; removed ones take
no new client, and each is flushed and closed once its last client has left; new access
lists apply from the next client on; a changed volume (image, header, key, read_only) is
refused, said on standard error with the fields, and served as before; unchanged exports'
clients notice nothing. listen, metrics and [tls] keep their values until a restart. A file
that does not parse changes nothing. Under a service manager a reload says RELOADING=1, then
READY=1 with what changed (or a STATUS= line with why a file was refused). `sectorcrypt
gateway reload [NAME]` does the same and prints what changed.
A gateway answers on a control socket, RUNTIME/NAME.sock (RUNTIME as for `open`; NAME from
--name, gateway-PID by default; mode 0600): `sectorcrypt status` lists its exports with
their clients (uid, gid and pid of a Unix peer, a TCP address, a TLS certificate subject)
and their request and byte counts. Without a usable runtime directory (no XDG_RUNTIME_DIR)
it serves all the same, with a warning, and `status` does not see it; with --name that is an
error.
--log-format json writes one JSON object per line on standard error: ts, event (connect,
disconnect, error, reload, message), export, peer, and errno and message for errors (a
failing export is logged once a second at most, with how many more failed). No line holds
a secret. For gateways only.
Each connection has its own reader thread and workers (the store's threads besides):
the operating system shares the cores between connections, whichever export they use, and
an export whose store stalls holds up its own connections only. PSK (TLS 1.3 external
pre-shared keys, nbdkit's --tls-psk) is not offered: rustls has no server-side external
PSK.";

const GATEWAY_HELP: &str = "\
Examples:
  sectorcrypt gateway reload            # the only gateway running
  sectorcrypt gateway reload backup     # serve --config ... --name backup

The gateway reads its --config file again, as on SIGHUP: new exports are opened and
offered, removed ones drain, changed volumes are refused and served as before. The command
prints what changed, and exits 1 when the file was refused (nothing changed then).";

/// How a volume is opened (shared by `serve`, `mount` and `open`).
#[derive(Debug, Args, Clone)]
pub struct OpenArgs {
    /// The volume: a file or a block device.
    #[arg(value_name = "IMAGE")]
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Read the passphrase from FILE (its bytes, as cryptsetup does; `-` = standard input)
    /// instead of prompting.
    #[arg(long, value_name = "FILE", conflicts_with = "onetime")]
    pub key_file: Option<PathBuf>,
    /// GELI: a keyfile that is part of the key (geli's -k), in order; repeatable.
    #[arg(
        long = "keyfile-component",
        value_name = "FILE",
        conflicts_with = "onetime"
    )]
    pub keyfile_component: Vec<PathBuf>,
    /// GELI: the key is made of keyfiles only (geli's -P); BitLocker: open a clear key. No
    /// passphrase is read.
    #[arg(long, conflicts_with = "onetime")]
    pub no_passphrase: bool,
    /// BitLocker: open with this startup key file (.BEK) instead of a passphrase.
    #[arg(
        long = "bitlk-startup-key",
        value_name = "FILE",
        conflicts_with = "onetime"
    )]
    pub bitlk_startup_key: Option<PathBuf>,
    /// A headerless volume under a fresh random key that is never stored.
    #[arg(long, conflicts_with = "header")]
    pub onetime: bool,
    /// Refuse writes.
    #[arg(long)]
    pub read_only: bool,
    /// With --read-only: open even while another process writes the volume (as
    /// cryptsetup's --shared), accepting that the data read may change under it. Without
    /// it a read-only open beside a writer is refused, and one writer at a time is allowed.
    #[arg(long, requires = "read_only")]
    pub shared: bool,
    /// Refuse a volume whose sectors carry no authentication tags (a GELI provider made
    /// without --integrity / geli init -a). GELI's AUTH flag is not itself authenticated:
    /// whoever can write the metadata can clear it (and recompute its MD5), and the
    /// provider then opens without tag checks, on FreeBSD too. This option turns that
    /// into an error.
    #[arg(long)]
    pub integrity: bool,
    /// Threads the engine uses for one large request (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Only this keyslot is tried (`geli attach -n`).
    #[arg(skip)]
    pub key_slot: Option<usize>,
    /// A GELI one-time provider's algorithm, key length and sector size (`geli onetime`);
    /// `--onetime` alone takes AES-XTS-256 with 512-byte sectors.
    #[arg(skip)]
    pub onetime_geli: Option<sectorcrypt_volume::geli::onetime::OnetimeOptions>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("where").required(false).args(["socket", "listen"])))]
// IMAGE is left out when the exports come from --config or --export (empty then).
#[command(mut_arg("image", |a| {
    a.required(false)
        .default_value("")
        .hide_default_value(true)
        .value_parser(clap::builder::TypedValueParser::map(
            clap::builder::OsStringValueParser::new(),
            PathBuf::from,
        ))
}))]
pub struct ServeArgs {
    #[command(flatten)]
    pub open: OpenArgs,
    /// Serve the exports of a gateway configuration (TOML; see below), each volume under
    /// its name, instead of IMAGE.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["export", "export_name", "onetime"])]
    pub config: Option<PathBuf>,
    /// Serve the volume at LOCATOR as export NAME, instead of IMAGE; repeatable. The key
    /// options given (--key-file, --keyfile-component, --no-passphrase) and --read-only
    /// apply to every export.
    #[arg(long, value_name = "NAME=LOCATOR", conflicts_with_all = ["export_name", "onetime"])]
    pub export: Vec<String>,
    /// Listen on a Unix socket at PATH.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Listen on a loopback TCP address (127.0.0.1:PORT or [::1]:PORT).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// The export's name (clients asking for the default name "" get it too).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub export_name: String,
    /// Offer NBD TRIM and pass it on as discards (holes in the image), as cryptsetup's
    /// --allow-discards: it reveals which areas of the volume are unused.
    #[arg(long)]
    pub allow_discards: bool,
    /// The Unix socket's permissions, in octal [default: 0600, only the owner may connect].
    #[arg(long, value_name = "MODE", value_parser = socket_mode, conflicts_with = "listen")]
    pub socket_mode: Option<u32>,
    /// Seconds a request's header, and a write's payload, may take to arrive once begun
    /// (0: no limit).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// Seconds a connection may stay with no request in flight before it is closed
    /// (0: no limit).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub idle_timeout: u64,
    /// Stop once the last client past its handshake has disconnected (`geli attach -d`).
    #[arg(skip)]
    pub exit_after_last: bool,
    /// LUKS2: re-key the volume while serving it (a new volume key, same cipher and
    /// sector size), hotzone by hotzone with cryptsetup's metadata; resumes one in
    /// progress, after recovering a crash, including an encryption or decryption in place
    /// with --header that `reencrypt --encrypt|--decrypt --init-only` started. Clients see
    /// their data throughout.
    #[arg(long)]
    pub reencrypt: bool,
    /// With --reencrypt: checksum (the default), journal or none.
    #[arg(long, value_name = "MODE", requires = "reencrypt")]
    pub resilience: Option<String>,
    /// With --reencrypt: the largest hotzone [default: 4M]; requests wait while one is
    /// rewritten.
    #[arg(long, value_name = "SIZE", requires = "reencrypt")]
    pub hotzone_size: Option<String>,
    #[command(flatten)]
    pub tls: crate::flags::tls::TlsArgs,
    /// Serve Prometheus metrics (GET /metrics) on a loopback HOST:PORT or a Unix socket
    /// PATH: requests, bytes and errors by type, latency histograms, requests in flight,
    /// the crypto backend and the unlock time.
    #[arg(long, value_name = "ADDR:PORT|PATH")]
    pub metrics: Option<String>,
    /// A gateway's name for `sectorcrypt status` and `sectorcrypt gateway reload NAME`
    /// (its control socket is RUNTIME/NAME.sock) [default: gateway-PID].
    #[arg(long, value_name = "NAME", conflicts_with_all = ["export_name", "onetime"])]
    pub name: Option<String>,
    /// A gateway's log on standard error: text, or json (one object per line: connect,
    /// disconnect, error, reload, message).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// VeraCrypt/TrueCrypt volumes (never detected: --type names them).
    #[command(flatten)]
    pub tcrypt: tcrypt::TcryptArgs,
}

/// `sectorcrypt gateway`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    #[command(subcommand)]
    pub command: GatewayCommand,
}

/// What `sectorcrypt gateway` does to a running gateway (`serve --config`).
#[derive(Debug, clap::Subcommand)]
pub enum GatewayCommand {
    /// Read the gateway's configuration file again (as SIGHUP does) and say what changed.
    Reload {
        /// The gateway (`serve --name`); may be left out when only one runs.
        #[arg(value_name = "NAME")]
        name: Option<String>,
    },
}

/// A file mode in octal: permission bits only (at most 0777).
fn socket_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(m) if m <= 0o777 && !s.starts_with('+') => Ok(m),
        _ => Err("expected permission bits in octal, such as 0600 or 0660".into()),
    }
}

const MOUNT_HELP: &str = "\
Examples:
  sectorcrypt mount disk.img /mnt/plain --key-file pass.txt
  losetup -f --show /mnt/plain/disk        # a block device over the plaintext
  sectorcrypt umount /mnt/plain

The volume appears as one regular file, MOUNTPOINT/disk, of the volume's size, opened with
direct I/O (no page cache of the plaintext). Without --foreground the command returns once
the mount is in place and a background process serves it until `sectorcrypt umount`
(or fusermount3 -u) or SIGINT/SIGTERM, which unmount after flushing.";

#[derive(Debug, Args)]
pub struct MountArgs {
    #[command(flatten)]
    pub open: OpenArgs,
    /// An existing empty directory.
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,
    /// Stay in the foreground until unmounted.
    #[arg(long)]
    pub foreground: bool,
    /// VeraCrypt/TrueCrypt volumes (system ones with --read-only).
    #[command(flatten)]
    pub tcrypt: tcrypt::TcryptArgs,
}

#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Where the volume is mounted.
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,
}

pub mod bitlk;
pub mod ciphers;
pub mod convert;
pub mod fvault2;
pub mod geli;
pub mod listed;
pub mod manuals;
pub mod open;
pub mod reencrypt;
pub mod tcrypt;
pub mod tls;
