//! The command line, as clap definitions. The flags are an interface scripts rely on.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const EXIT_CODES: &str =
    "Exit codes: 0 success, 1 runtime failure (I/O), 2 bad usage or bad input \
(nothing is written to the output then).";

/// sectorcrypt: a userspace storage-encryption engine (AES-XTS/CBC/CTR/ECB at the speed of
/// the hardware, dm-crypt compatible sector formats).
#[derive(Debug, Parser)]
#[command(name = "sectorcrypt", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Encrypt or decrypt a stream with a dm-crypt cipher string or a raw AES mode.
    #[command(after_long_help = CIPHER_EXAMPLES)]
    Cipher(CipherArgs),
    /// Show the CPU features seen and the backend chosen for each algorithm.
    #[command(after_long_help = BACKENDS_HELP)]
    Backends,
    /// Measure sectorcrypt against OpenSSL, in the same process (build with --release).
    #[command(after_long_help = BENCH_HELP)]
    Bench(BenchArgs),
    /// Run a short built-in demonstration: known-answer check, sector round trip.
    Demo,
    /// Serve the plaintext of a volume over NBD (a Unix socket or a loopback TCP port).
    #[command(after_long_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Show the plaintext of a volume as the file MOUNTPOINT/disk (FUSE, direct I/O).
    #[command(after_long_help = MOUNT_HELP)]
    Mount(MountArgs),
    /// Unmount what `sectorcrypt mount` mounted (the volume is flushed first).
    Umount(UmountArgs),
}

const CIPHER_EXAMPLES: &str = "\
Examples:
  # Encrypt 8 sectors of 512 bytes the way dm-crypt does (IV = sector number):
  sectorcrypt cipher encrypt --cipher aes-xts-plain64 --key-file volume.key \\
      --sector 2048 --input plain.bin --output cipher.bin

  # One XTS data unit with an explicit tweak (ciphertext stealing for odd lengths):
  sectorcrypt cipher decrypt --cipher aes-xts --key 00112233...(64 hex digits) \\
      --iv 00000000000000000000000000000000 < unit.bin

  # CTR over any length:
  printf 'hello' | sectorcrypt cipher encrypt --cipher aes-ctr --key $(cat k.hex) --iv $(cat iv.hex)

Cipher strings (dm-crypt / cryptsetup): aes-xts-plain64, aes-xts-plain, aes-cbc-plain64,
aes-cbc-plain, aes-cbc-essiv:sha256, aes-ecb. The input must be a whole number of sectors;
--sector gives the IV number of the first sector, which advances by sector-size/512 per
sector (dm-crypt's default) or by 1 with --iv-large-sectors.
Raw modes: aes-ecb, aes-cbc, aes-ctr, aes-xts, with --iv (16 bytes, hex): the whole input
is one message (one XTS data unit).
AES-GCM: --cipher aes-gcm --iv HEX (any non-empty length; 12 bytes is standard) [--aad HEX]
[--tag-len N]. Encryption writes the ciphertext followed by the tag; decryption reads
ciphertext||tag and writes the plaintext only if the tag verifies, otherwise it prints
'authentication failed' and exits 1 with nothing written.
The key length picks AES-128/192/256 (for XTS, both halves together: 32, 48 or 64 bytes).";

const BACKENDS_HELP: &str = "\
SECTORCRYPT_BACKEND=soft|aesni|vaes forces a backend for every algorithm that has it; a
name that does not exist or that this CPU cannot run is an error (exit 2).";

const BENCH_HELP: &str = "\
Run it from a release build: cargo run --release -p sectorcrypt -- bench
Each case runs sectorcrypt and OpenSSL's EVP interleaved on the same buffers, at least 7
runs, and reports median, min, max, the ratio to OpenSSL and cycles per byte at a clock
measured in the same process.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Direction {
    Encrypt,
    Decrypt,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("keysrc").required(true).args(["key", "key_file"])))]
pub struct CipherArgs {
    /// encrypt or decrypt.
    #[arg(value_enum)]
    pub direction: Direction,
    /// A dm-crypt cipher string (aes-xts-plain64, ...), a raw mode (aes-ecb, aes-cbc,
    /// aes-ctr, aes-xts) or aes-gcm.
    #[arg(long, value_name = "SPEC")]
    pub cipher: String,
    /// The key as hex digits.
    #[arg(long, value_name = "HEX")]
    pub key: Option<String>,
    /// A file holding the raw key bytes.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Raw modes: the 16-byte IV (CBC), initial counter block (CTR) or tweak (XTS), hex.
    #[arg(long, value_name = "HEX")]
    pub iv: Option<String>,
    /// aes-gcm: additional authenticated data, hex.
    #[arg(long, value_name = "HEX")]
    pub aad: Option<String>,
    /// aes-gcm: tag length in bytes (16, 15, 14, 13, 12; 8 and 4 only for protocols that
    /// require them).
    #[arg(long, value_name = "N")]
    pub tag_len: Option<usize>,
    /// Cipher strings: the IV number of the first sector.
    #[arg(long, value_name = "S")]
    pub sector: Option<u64>,
    /// Cipher strings: bytes per sector (512, 1024, 2048, 4096, or a multiple of 16 up to
    /// 65536 with --iv-large-sectors).
    #[arg(long, value_name = "N")]
    pub sector_size: Option<usize>,
    /// Cipher strings: the IV counts sectors, not 512-byte units.
    #[arg(long)]
    pub iv_large_sectors: bool,
    /// Read from FILE instead of standard input.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Write to FILE instead of standard output (replaced only on success).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Only cases whose name contains SUBSTRING.
    #[arg(long, value_name = "SUBSTRING")]
    pub filter: Option<String>,
    /// Run sectorcrypt on this backend (soft, aesni, vaes).
    #[arg(long, value_name = "NAME")]
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
}

const SERVE_HELP: &str = "\
Examples:
  sectorcrypt serve disk.img --socket /tmp/disk.sock --key-file pass.txt
  nbdcopy nbd+unix:///?socket=/tmp/disk.sock plain.raw
  sectorcrypt serve scratch.img --listen 127.0.0.1:10809 --onetime

Only a Unix socket or a loopback address is served. The server speaks the fixed newstyle
NBD protocol with several connections (multi-conn) and many requests in flight; SIGINT or
SIGTERM stops it after the requests in flight are done and the volume is flushed.
--onetime: a headerless volume (aes-xts-plain64, 512-bit key, 512-byte sectors) under a
fresh random key that is never stored (GELI's one-time mode, for swap or scratch space):
whatever is written is unreadable once the server stops.";

/// How a volume is opened (shared by `serve` and `mount`).
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// The volume: a file or a block device.
    #[arg(value_name = "IMAGE")]
    pub image: PathBuf,
    /// Read the passphrase from FILE (its bytes, as cryptsetup does; `-` = standard input)
    /// instead of prompting.
    #[arg(long, value_name = "FILE", conflicts_with = "onetime")]
    pub key_file: Option<PathBuf>,
    /// A headerless volume under a fresh random key that is never stored.
    #[arg(long)]
    pub onetime: bool,
    /// Refuse writes.
    #[arg(long)]
    pub read_only: bool,
    /// Threads the engine uses for one large request (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("where").required(true).args(["socket", "listen"])))]
pub struct ServeArgs {
    #[command(flatten)]
    pub open: OpenArgs,
    /// Listen on a Unix socket at PATH.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Listen on a loopback TCP address (127.0.0.1:PORT or [::1]:PORT).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// The export's name (clients asking for the default name "" get it too).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub export_name: String,
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
}

#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Where the volume is mounted.
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,
}
