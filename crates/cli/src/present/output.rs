//! Where `--output` goes (`read`, `cipher`; `bench --svg` too), as `dd`, `nbdcopy` and `qemu-img` treat an
//! output path:
//! - an existing FIFO, character device or block device is written through: opened for
//!   writing as it is (a FIFO waits for its reader; nothing is truncated), and a block
//!   device is synced at the end. What was written before a failure stays written;
//! - a symbolic link is refused (exit 2, nothing written): replacing it would lose the
//!   link, following it would write where the command line does not say;
//! - a new path or a regular file is replaced atomically, only on success
//!   ([`sectorcrypt_volume::atomic`]: a private temporary file, synced, renamed);
//! - a directory or a socket is refused.

use crate::failure::Failure;
use sectorcrypt_volume::atomic::AtomicFile;
use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// An output being written.
#[derive(Debug)]
pub enum Output {
    /// A regular file, replaced on [`Output::commit`].
    Replace(AtomicFile),
    /// A FIFO or a device, written in place; `sync` for a block device.
    Through { file: File, sync: bool },
}

/// Whether `t` is written through rather than replaced.
fn is_device_or_fifo(t: FileType) -> bool {
    t.is_fifo() || t.is_char_device() || t.is_block_device()
}

impl Output {
    /// Opens `path` for writing, as the module documentation says.
    pub fn open(path: &Path) -> Result<Output, Failure> {
        Output::open_for("--output", path)
    }

    /// [`Output::open`] for the option `flag` (which a refusal names).
    pub fn open_for(flag: &str, path: &Path) -> Result<Output, Failure> {
        let failed = |e: io::Error| Failure::runtime(format!("{}: {e}", path.display()));
        let kind = match std::fs::symlink_metadata(path) {
            Ok(m) => Some(m.file_type()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(failed(e)),
        };
        let refuse = |why: &str| {
            Err(Failure::usage(format!(
                "{flag} {}: {why}; nothing was written",
                path.display()
            )))
        };
        match kind {
            Some(t) if t.is_symlink() => {
                refuse("is a symbolic link, which would be replaced: give the path of its target")
            }
            Some(t) if t.is_dir() => refuse("is a directory"),
            Some(t) if t.is_socket() => refuse("is a socket"),
            Some(t) if is_device_or_fifo(t) => {
                // O_NOFOLLOW: a link put in its place since is refused, not followed.
                let file = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)
                    .map_err(failed)?;
                let now = file.metadata().map_err(failed)?.file_type();
                if !is_device_or_fifo(now) {
                    return refuse("changed while it was being opened");
                }
                Ok(Output::Through {
                    file,
                    sync: now.is_block_device(),
                })
            }
            _ => Ok(Output::Replace(AtomicFile::create(path).map_err(failed)?)),
        }
    }

    /// Finishes: a regular file is put in place, a block device is synced.
    pub fn commit(self) -> io::Result<()> {
        match self {
            Output::Replace(f) => f.commit(),
            Output::Through { mut file, sync } => {
                file.flush()?;
                if sync {
                    file.sync_all()?;
                }
                Ok(())
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Replace(f) => f.write(buf),
            Output::Through { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Replace(f) => f.flush(),
            Output::Through { file, .. } => file.flush(),
        }
    }
}
