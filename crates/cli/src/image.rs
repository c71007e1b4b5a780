//! The one image opener: every command that opens a volume (dump, test-key, add-key,
//! change-key, remove-key, header backup/restore, erase, read, write, serve, mount) goes
//! through here: open the file, read and detect its header (any format the volume crate
//! knows), get the passphrase, unlock, start the engine. The same failure therefore gives
//! the same message and exit code in every command (see `failure.rs`): an image that
//! cannot be opened (missing, unreadable, a directory) or that holds no valid header is
//! bad input (2), an I/O error while reading an image that opened is a runtime failure
//! (1), a wrong passphrase is 3.

use crate::args::KeyArgs;
use crate::failure::Failure;
use crate::passphrase::{self, Secret};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::{FileStore, Header, Unlocked};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// An image whose header was read.
#[derive(Debug)]
pub struct Image {
    /// The path given.
    pub path: PathBuf,
    /// The file.
    pub store: FileStore,
    /// Its header.
    pub header: Header,
}

/// Opens `path` (read-write when `write`) as a store. A file that cannot be opened, or a
/// directory, is bad input.
pub fn open_store(path: &Path, write: bool) -> Result<FileStore, Failure> {
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| Failure::cannot_open(path, e))?;
    let meta = file.metadata().map_err(|e| Failure::cannot_open(path, e))?;
    if meta.is_dir() {
        return Err(Failure::cannot_open(path, "is a directory"));
    }
    Ok(FileStore::new(file, path.display().to_string()))
}

/// Opens `path` and reads its header (never writing).
pub fn open(path: &Path, write: bool) -> Result<Image, Failure> {
    let store = open_store(path, write)?;
    let header = Header::read(&store)?;
    Ok(Image {
        path: path.to_path_buf(),
        store,
        header,
    })
}

impl Image {
    /// The passphrase of this image, as `key` says (key file, prompt, standard input).
    pub fn passphrase(&self, key: &KeyArgs) -> Result<Secret, Failure> {
        passphrase::existing(key, &self.path)
    }

    /// Gets the passphrase and unlocks (only `--key-slot` when given).
    pub fn unlock(&self, key: &KeyArgs) -> Result<Unlocked, Failure> {
        let pass = self.passphrase(key)?;
        Ok(self.header.unlock_slot(&self.store, &pass, key.key_slot)?)
    }

    /// The engine over the data area of the volume `unlocked` opened.
    pub fn engine(self, unlocked: &Unlocked, opts: EngineOptions) -> Result<Volume, Failure> {
        Ok(unlocked.engine(Box::new(self.store), opts)?)
    }
}

/// Opens `path`, unlocks it with `key` and starts the engine (read-write when `write`).
pub fn open_volume(
    path: &Path,
    key: &KeyArgs,
    opts: EngineOptions,
) -> Result<(Volume, Unlocked), Failure> {
    let image = open(path, !opts.read_only)?;
    let unlocked = image.unlock(key)?;
    let volume = image.engine(&unlocked, opts)?;
    Ok((volume, unlocked))
}
