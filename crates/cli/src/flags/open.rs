//! The command line of `open`, `close` and `status`: volumes served in the background
//! under a name, as cryptsetup's `open`/`close`/`status` keep mappings.

use clap::Args;
use std::path::PathBuf;

pub const OPEN_HELP: &str = "\
Examples:
  sectorcrypt open disk.img vault --key-file pass.txt    # prints nbd+unix:///?socket=...
  nbdcopy 'nbd+unix:///?socket=/run/sectorcrypt/vault.sock' - | head -c 512 | xxd
  sectorcrypt open disk.img vault --loop                 # root: prints /dev/loopN too
  mkfs.ext4 /dev/loopN && mount /dev/loopN /mnt
  sectorcrypt status vault --json
  sectorcrypt close vault

The volume is unlocked as `serve` and `mount` unlock it, then one background process
serves it over NBD at RUNTIME/NAME.sock (mode 0600): RUNTIME is /run/sectorcrypt for root,
$XDG_RUNTIME_DIR/sectorcrypt otherwise, or $SECTORCRYPT_RUNTIME_DIR when set. The same
process shows the plaintext as DIR/disk with --mount DIR (FUSE), and with --loop attaches
a loop device to that file (on a private mount point when --mount is not given). The
command returns once all of it is ready and prints, one per line: the NBD URI, the disk
file (--mount) and the loop device (--loop). RUNTIME/NAME.json records what is open;
`close NAME` detaches the loop device, unmounts, stops the server (which flushes) and
removes it; it refuses while the loop device or the disk file is in use anywhere (a file
system mounted on it in any mount namespace, a device stacked on it, a process with it
open or mapped). An entry whose process died is cleaned up by the next open, close or
status. RUNTIME must be a directory of your own that no other user can write or rename
(nor any directory above it), or open, close and status refuse it. SIGINT or SIGTERM
stops an open that is still unlocking.
NAME: 1 to 64 of the characters A-Z a-z 0-9 . _ -, not starting with '.' or '-'.";

/// `sectorcrypt open IMAGE NAME`: what follows IMAGE and the ways to unlock it.
#[derive(Debug, Args)]
pub struct NamedArgs {
    /// The name the volume is open under (for `close` and `status`).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Also show the plaintext as the file DIR/disk (FUSE); DIR is an existing directory.
    #[arg(long, value_name = "DIR")]
    pub mount: Option<PathBuf>,
    /// Also attach a loop device to the plaintext (root only) and print it.
    #[arg(long = "loop")]
    pub loop_device: bool,
    /// Offer NBD TRIM and pass it on as discards (holes in the image), as `serve`'s flag.
    #[arg(long)]
    pub allow_discards: bool,
    /// Serve in this process (the background process is started with it).
    #[arg(long, hide = true)]
    pub foreground: bool,
}

/// `sectorcrypt close NAME`.
#[derive(Debug, Args)]
pub struct CloseArgs {
    /// The name given to `open`.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Close even while the volume is in use (a file system mounted on its loop device,
    /// a process holding it open or mapped): the loop device and the disk file are pulled
    /// from under their users, and a file system on them gets I/O errors and loses the
    /// writes it has acknowledged but not yet written back.
    #[arg(long)]
    pub force: bool,
}

/// `sectorcrypt status [NAME]`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this name (exit 2 when it is not open).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// JSON: an array of the open volumes and running gateways, or the one object of
    /// NAME.
    #[arg(long)]
    pub json: bool,
}
