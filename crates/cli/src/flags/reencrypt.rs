//! The flags of `reencrypt`, with cryptsetup's names.

use super::{HeaderArg, KeyArgs, PbkdfArgs};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReencryptArgs {
    /// The image file or block device (a LUKS2 volume).
    pub image: PathBuf,
    #[command(flatten)]
    pub header: HeaderArg,
    /// The new cipher (the volume's by default): aes-xts-plain64, aes-cbc-essiv:sha256, ...
    #[arg(long, short = 'c', value_name = "SPEC")]
    pub cipher: Option<String>,
    /// The new volume key size in bits (the volume's by default).
    #[arg(long, short = 's', value_name = "BITS")]
    pub key_size: Option<usize>,
    /// The new encryption sector size: 512, 1024, 2048 or 4096 (the volume's by default).
    #[arg(long, value_name = "N")]
    pub sector_size: Option<usize>,
    /// How a hotzone is protected while it is rewritten: checksum (the default), journal
    /// or none.
    #[arg(long, value_name = "MODE")]
    pub resilience: Option<String>,
    /// The hash of the checksum resilience (sha256 by default).
    #[arg(long, value_name = "HASH")]
    pub resilience_hash: Option<String>,
    /// The largest hotzone (bytes, or with K, M, G), a multiple of 4096.
    #[arg(long, value_name = "SIZE")]
    pub hotzone_size: Option<String>,
    /// Encrypt plain data in place (IMAGE holds no volume), hotzone by hotzone: with
    /// --header FILE a new detached LUKS2 header goes to FILE (which must not exist), as
    /// `cryptsetup reencrypt --encrypt --header` does; with --reduce-device-size the header
    /// goes into IMAGE and the data moves to make room. The default sector size is 512.
    #[arg(long, conflicts_with = "decrypt")]
    pub encrypt: bool,
    /// The bytes at the end of the data that are free (shrink the file system on it by at
    /// least this much first), at most 1G. With --encrypt (and no --header): half of it
    /// becomes the LUKS2 header at IMAGE's start (so 32M for cryptsetup's default 16 MiB
    /// header) and the data moves that far on as it is encrypted; the volume holds SIZE
    /// bytes less. In a re-key: the data moves SIZE bytes on as it is re-encrypted (from
    /// the end backward, resilience datashift) and the keyslots area grows by SIZE (room
    /// for a larger header); the volume holds SIZE bytes less.
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with_all = ["header", "decrypt"]
    )]
    pub reduce_device_size: Option<String>,
    /// Decrypt the volume for good, in place, with --header: a detached header whose data
    /// starts at offset 0 is decrypted backward from the end; a volume whose header is in
    /// IMAGE gets its header moved to the new file --header names, and its data moves back
    /// over the old header as it is decrypted (cryptsetup's --decrypt --header NEW). At the
    /// end the image holds the plaintext alone and the header no keyslot.
    #[arg(long, requires = "header", conflicts_with_all = ["cipher", "key_size", "sector_size"])]
    pub decrypt: bool,
    /// Write the re-encryption metadata and the new keyslots, then stop: the data is
    /// untouched (resume later, with either tool).
    #[arg(long, conflicts_with = "resume_only")]
    pub init_only: bool,
    /// Resume the re-encryption in progress; never start one.
    #[arg(long)]
    pub resume_only: bool,
    /// Accepted for cryptsetup's command lines: sectorcrypt always re-encrypts offline,
    /// without device-mapper, holding the volume for itself.
    #[arg(long, hide = true)]
    pub force_offline_reencrypt: bool,
    /// Accepted for cryptsetup's command lines (sectorcrypt's locks are per file).
    #[arg(long, hide = true)]
    pub disable_locks: bool,
    /// Accepted for cryptsetup's command lines (sectorcrypt uses no kernel keyring).
    #[arg(long, hide = true)]
    pub disable_keyring: bool,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    #[command(flatten)]
    pub key: KeyArgs,
}

pub const REENCRYPT_HELP: &str = "\
Re-keys a LUKS2 volume in place: a new volume key, and the cipher, key size and sector size
given (the old ones otherwise). The volume must not be in use. Every keyslot the passphrase
opens gets the new key under the same passphrase; keyslots it does not open are refused
unless --key-slot names the one to carry over (the others are removed at the end).

The work goes hotzone by hotzone with cryptsetup's LUKS2 metadata (online-reencrypt-v2): a
run stopped with Ctrl-C (or SIGTERM) is resumed by `sectorcrypt reencrypt` or by
`cryptsetup reencrypt --resume-only --force-offline-reencrypt`, and one cryptsetup started is
resumed here. The global --progress shows how far it is, hotzone by hotzone. After a crash inside a hotzone run `sectorcrypt repair IMAGE` (or `cryptsetup
repair`) first.

Resilience (as cryptsetup's): checksum stores a hash of each 4096-byte block of the hotzone
before rewriting it (the default; needs block writes to be atomic), journal stores a copy
of the hotzone (every byte written twice), none stores nothing (a crash loses the hotzone
being rewritten).

--encrypt encrypts plain data in place with a detached header (--header FILE, created), or
with the header in the image (--reduce-device-size SIZE: the image's last SIZE bytes must be
free; the data moves SIZE/2 bytes on, the header takes the first SIZE/2; resilience datashift,
as cryptsetup's).
--decrypt decrypts a volume with a detached header (data at offset 0) in place, from the
end backward; or, when --header names a new file, a volume whose header is in the image,
moving the data back over it (resilience checksum or journal for the data's start). As
cryptsetup does; either tool resumes or recovers it.
Serving a volume while it is re-keyed: `sectorcrypt serve --reencrypt`. An encryption or
decryption with a detached header runs online too: --init-only here, then `sectorcrypt serve
IMAGE --header HDR --reencrypt` (the data-moving runs stay offline).

A re-key with --reduce-device-size SIZE moves the data SIZE bytes on (the data's last SIZE
bytes must be free) and grows the keyslots area by as much, as cryptsetup's does; it runs
offline.

Examples:
  sectorcrypt reencrypt disk.img --key-file pass
  sectorcrypt reencrypt disk.img --cipher aes-cbc-essiv:sha256 --key-size 256 --progress json
  sectorcrypt reencrypt disk.img --init-only; sectorcrypt reencrypt disk.img --resume-only
  sectorcrypt reencrypt disk.img --reduce-device-size 16M    (the keyslots area grows by 16M)
  sectorcrypt reencrypt --encrypt --header disk.hdr plain.img
  sectorcrypt reencrypt --encrypt --reduce-device-size 32M plain.img
  sectorcrypt reencrypt --decrypt --header disk.hdr disk.img
  sectorcrypt reencrypt --decrypt --header new.hdr disk.img     (header in disk.img)";
