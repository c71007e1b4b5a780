//! A file replaced atomically (the CLI's `--output` files, header backups): the data goes to
//! a new temporary file beside it (created exclusively, mode 0600: it usually holds
//! plaintext or key material), which is synced and renamed over the destination, and the
//! directory is synced. On any failure, or if the writer is dropped without
//! [`AtomicFile::commit`], the temporary file is removed and the destination is untouched.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct AtomicFile {
    file: File,
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

impl AtomicFile {
    /// Starts replacing `dest`.
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        let name = dest.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the output path names no file")
        })?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = dir_of(dest).join(format!(
            ".{}.sectorcrypt-{}-{nanos:09}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        Ok(AtomicFile {
            file,
            tmp,
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    /// The temporary file, for positioned writes.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Makes the data durable and puts it in place of the destination.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.sync_all()?;
        std::fs::rename(&self.tmp, &self.dest)?;
        self.committed = true;
        File::open(dir_of(&self.dest))?.sync_all()
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the file is ours and incomplete; a failure here leaves a hidden
            // temporary file, never a damaged destination.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
