//! The flags of `convert` and what its `--help` teaches.

use super::HeaderArg;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// The LUKS version to convert to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConvertType {
    Luks1,
    Luks2,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The image file or block device (not in use: not served, opened or mounted).
    pub image: PathBuf,
    /// The LUKS version to convert to.
    #[arg(long = "type", value_enum)]
    pub luks_type: ConvertType,
    #[command(flatten)]
    pub header: HeaderArg,
    /// Answer the confirmation with yes (for scripts).
    #[arg(long, short = 'q', visible_alias = "batch-mode")]
    pub batch: bool,
}

/// Shown after `convert --help`.
pub const CONVERT_HELP: &str = "\
Converts the header in place, as `cryptsetup convert --type luks1|luks2` does, with its rules:
both tools open the result with the same passphrases, and the data is not touched. No
passphrase is asked: the keyslots are moved, never opened.

To LUKS2: the LUKS1 keyslots must start at 4 KiB (cryptsetup's layout) and there must be 28 KiB
free between the last keyslot and the data (cryptsetup's default layout has exactly that).
The keyslots keep PBKDF2; add an Argon2 keyslot afterwards with add-key if you want one.
To LUKS1, everything must be something LUKS1 can say: 512-byte sectors, PBKDF2 keyslots with
the digest's hash (not Argon2), keyslots 0 to 7 only, no tokens, one data segment, no
unfinished reencryption. A volume that breaks a rule is refused (exit 2) and left as it was.

Each keyslot moves on its own, its new place written into the header before the next one
moves, so a crash at any point leaves a volume that opens (as the old or the new version);
running the same convert again completes an interrupted one.
When every keyslot is in use and there is no free room to move one through, the conversion
is refused: remove a keyslot first. A header backup before converting is still wise:
  sectorcrypt header backup disk.img disk.hdr
  sectorcrypt convert disk.img --type luks2
Detached headers (--header) are not converted yet: use cryptsetup convert --header.";
