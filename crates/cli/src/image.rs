//! The one image opener: every command that opens a volume (dump, test-key, add-key,
//! change-key, remove-key, header backup/restore, erase, read, write, serve, mount) goes
//! through here: open the files, take the locks the command needs, read and detect the
//! header (any format the volume crate knows), get the passphrase, unlock, start the
//! engine. The same failure therefore gives the same message and exit code in every
//! command (see `failure.rs`): an image that cannot be opened (missing, unreadable, a
//! directory) or that holds no valid header is bad input (2), an I/O error while reading an
//! image that opened is a runtime failure (1), a wrong passphrase is 3.
//!
//! **Detached headers** (`--header FILE`, as cryptsetup's): the header and keyslots are
//! read and written in FILE, the data in IMAGE from the header's data offset on (0 for
//! the headers `cryptsetup luksFormat --header` makes). The same file given twice is an
//! attached header. A header whose data starts inside its own metadata (data offset 0),
//! used without `--header`, opens its keyslots (as `cryptsetup open --test-passphrase`
//! does) but never its data: read, write, serve and mount refuse it (2), since writing
//! the data would overwrite the header.
//!
//! **Locks** (`sectorcrypt_volume::lock`): the header lock (`flock`, cryptsetup's) on the
//! header's file is shared while a header is read and a keyslot opened, exclusive while a
//! keyslot changes; every change reads the header again under the exclusive lock, so two
//! processes changing keyslots run one after the other and both results survive. The use
//! claim is shared by read, write, serve and mount on every file of the volume for as long
//! as they run; erase and header restore (and format, in its own command) claim the files
//! they write exclusively and refuse, with exit 1, a volume in use: the image and the
//! arguments are right, and the same command succeeds once the other process is done (a
//! runtime condition, like an I/O error, not bad input). Keyslot changes need no claim:
//! they are allowed on a served volume, as cryptsetup allows them on an active device.
//! Beside the use claim, read, write, serve and mount take the writer claim on every file
//! of the volume, never waiting: one writer at a time (a second `serve`, `open`, `write`,
//! or a Python or C program writing the same image, is refused with exit 1 and the
//! holder's PID and command line), and no read-only use beside a writer unless `--shared`
//! says that data changing under the reader is accepted (as cryptsetup's `--shared`).
//!
//! **Remote stores.** Every path argument goes through the store locator
//! (`locator.rs`), so an NBD URI works wherever a path does. Their locks are held in
//! this process only (`image_store.rs` says why and what that guards).

use crate::args::{HeaderArg, KeyArgs};
use crate::failure::Failure;
use crate::image_store::{Guard, ImageStore};
use crate::locator;
use crate::passphrase::{self, Secret};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::lock::{self, Mode};
use sectorcrypt_volume::{FileStore, Header, Placement, Store, Unlocked};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// How a command uses a volume: what it opens for writing and which locks it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads the header: dump, test-key, header backup.
    Inspect,
    /// Changes keyslots (allowed while the volume is in use): add-key, change-key,
    /// remove-key.
    Keyslots,
    /// Replaces or destroys the header (refused while the volume is in use): erase,
    /// header restore.
    Replace,
    /// Reads or writes the data: read, write, serve, mount.
    Data {
        /// Whether the data is written.
        write: bool,
        /// Read-only beside a writer is accepted (`--shared`).
        shared: bool,
    },
}

/// The use claims a command holds while it uses a volume; released when dropped.
#[derive(Debug, Default)]
pub struct Claims(Vec<Guard>);

impl Claims {
    /// Holds `c` too (nothing for `None`).
    pub fn push(&mut self, c: Option<Guard>) {
        self.0.extend(c);
    }
}

impl From<Guard> for Claims {
    fn from(c: Guard) -> Claims {
        Claims(vec![c])
    }
}

/// Opens `path` (read-write when `write`) as a store: a file, or what the store locator
/// finds for a URI. A file that cannot be opened, a directory, or a remote store that
/// cannot be reached is bad input.
pub fn open_store(path: &Path, write: bool) -> Result<ImageStore, Failure> {
    if let Some(remote) = locator::open_remote(path, write)? {
        return Ok(remote);
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| Failure::cannot_open(path, e))?;
    let meta = file.metadata().map_err(|e| Failure::cannot_open(path, e))?;
    if meta.is_dir() {
        return Err(Failure::cannot_open(path, "is a directory"));
    }
    Ok(ImageStore::File(FileStore::new(
        file,
        path.display().to_string(),
    )))
}

/// Claims the use of `store` (the file `path`) in `mode`. A shared claim waits for an
/// exclusive one to end (a header being replaced); an exclusive claim never waits: a
/// volume in use is refused (exit 1, see the module doc).
pub fn claim(store: &ImageStore, path: &Path, mode: Mode) -> Result<Guard, Failure> {
    let failed = |e| Failure::runtime(format!("locking {}: {e}", crate::locator::redacted(path)));
    if let Some(c) = store.claim_use(mode, false).map_err(failed)? {
        return Ok(c);
    }
    if mode == Mode::Exclusive {
        return Err(Failure::runtime(format!(
            "{} is in use: another process is serving, mounting, reading or writing it; \
             stop it first",
            crate::locator::redacted(path)
        )));
    }
    eprintln!(
        "sectorcrypt: waiting: another process is replacing the header of {}",
        crate::locator::redacted(path)
    );
    Ok(store
        .claim_use(mode, true)
        .map_err(failed)?
        .expect("a waiting claim"))
}

/// Takes the writer claim `access` needs on `store` (the file `path`), never waiting: a
/// conflicting claim held elsewhere is refused (exit 1) with its holder named.
pub fn claim_access(store: &ImageStore, access: lock::Access) -> Result<Option<Guard>, Failure> {
    let failed = |e| Failure::runtime(format!("locking {}: {e}", store.name()));
    store
        .claim_access(access)
        .map_err(failed)?
        .map_err(Failure::runtime)
}

/// Takes the header lock on `store` (the file `path`) in `mode`, waiting for another
/// process's conflicting lock to be released (saying so).
pub fn lock_header(store: &ImageStore, path: &Path, mode: Mode) -> Result<Guard, Failure> {
    let failed = |e| {
        Failure::runtime(format!(
            "locking the header of {}: {e}",
            crate::locator::redacted(path)
        ))
    };
    if let Some(l) = store.lock_header(mode, false).map_err(failed)? {
        return Ok(l);
    }
    eprintln!(
        "sectorcrypt: waiting for another process to finish with the header of {}",
        crate::locator::redacted(path)
    );
    Ok(store
        .lock_header(mode, true)
        .map_err(failed)?
        .expect("a waiting lock"))
}

/// Whether two open files are one file (a `--header` naming the image itself).
pub fn same_file(a: &ImageStore, b: &ImageStore) -> bool {
    a.same_as(b)
}

/// The files of a volume, opened for a command's [`Access`] with its use claims.
#[derive(Debug)]
pub struct Files {
    /// The image as given: the data, and the header too unless it is detached.
    pub path: PathBuf,
    /// Where the header is: `path`, or the `--header` file.
    pub header_path: PathBuf,
    /// The header's store.
    pub store: ImageStore,
    /// The data's store, when the header is detached.
    data: Option<ImageStore>,
    claims: Claims,
}

impl Files {
    /// Opens the files of the volume at `path` (with its header in `header` when given)
    /// and claims them as `access` needs.
    pub fn open(path: &Path, header: &HeaderArg, access: Access) -> Result<Files, Failure> {
        let data_write = matches!(access, Access::Data { write: true, .. });
        let header_write = matches!(access, Access::Keyslots | Access::Replace);
        let attached = |path: &Path| open_store(path, header_write || data_write);
        let (store, header_path, data) = match &header.file {
            Some(h) => {
                let data = open_store(path, data_write)?;
                // A writer's exclusive claim on the header's file needs it open for
                // writing (an OFD write lock does), as the library opens it.
                let hdr = open_store(h, header_write || data_write)?;
                if same_file(&hdr, &data) {
                    (attached(path)?, path.to_path_buf(), None)
                } else {
                    (hdr, h.clone(), Some(data))
                }
            }
            None => (attached(path)?, path.to_path_buf(), None),
        };
        let mut files = Files {
            path: path.to_path_buf(),
            header_path,
            store,
            data,
            claims: Claims::default(),
        };
        match access {
            Access::Data { write, shared } => {
                let role = match (write, shared) {
                    (true, _) => lock::Access::Writer,
                    (false, false) => lock::Access::Reader,
                    (false, true) => lock::Access::SharedReader,
                };
                let c = claim(&files.store, &files.header_path, Mode::Shared)?;
                files.claims.0.push(c);
                files.claims.0.extend(claim_access(&files.store, role)?);
                if let Some(d) = &files.data {
                    files.claims.0.push(claim(d, &files.path, Mode::Shared)?);
                    files.claims.0.extend(claim_access(d, role)?);
                }
            }
            Access::Replace => {
                let c = claim(&files.store, &files.header_path, Mode::Exclusive)?;
                files.claims.0.push(c);
            }
            Access::Inspect | Access::Keyslots => {}
        }
        Ok(files)
    }

    /// Where the header and the data are.
    pub fn placement(&self) -> Placement<'_> {
        match &self.data {
            None => Placement::Attached(&self.store),
            Some(data) => Placement::Detached {
                header: &self.store,
                data,
            },
        }
    }

    /// Takes the header lock in `mode` (see [`lock_header`]).
    pub fn lock(&self, mode: Mode) -> Result<Guard, Failure> {
        lock_header(&self.store, &self.header_path, mode)
    }

    /// Reads the header under the shared header lock (never writing).
    pub fn read_header(&self) -> Result<Header, Failure> {
        let _lock = self.lock(Mode::Shared)?;
        Ok(Header::read(&self.store)?)
    }
}

/// A volume whose header was read.
#[derive(Debug)]
pub struct Image {
    /// Its files.
    pub files: Files,
    /// Its header, as last read.
    pub header: Header,
    /// Keyfile components (GELI), given to the header each time it is read.
    keyfiles: Vec<zeroize::Zeroizing<Vec<u8>>>,
    /// Whether the key has no passphrase component (GELI's `-p`).
    no_passphrase: bool,
}

/// Opens the volume at `path` (header in `header` when given) for `access` and reads its
/// header (never writing).
pub fn open(path: &Path, header: &HeaderArg, access: Access) -> Result<Image, Failure> {
    let files = Files::open(path, header, access)?;
    let header = files.read_header()?;
    Ok(Image {
        files,
        header,
        keyfiles: Vec::new(),
        no_passphrase: false,
    })
}

impl Image {
    /// The passphrase of this volume, as `key` says (key file, prompt, standard input).
    pub fn passphrase(&self, key: &KeyArgs) -> Result<Secret, Failure> {
        passphrase::existing(key, &self.files.path)
    }

    /// Gets the passphrase and unlocks (only `--key-slot` when given).
    pub fn unlock(&mut self, key: &KeyArgs) -> Result<Unlocked, Failure> {
        self.use_key_parts(key)?;
        let pass = self.passphrase(key)?;
        self.unlock_with(&pass, key.key_slot)
    }

    /// Takes the parts of the key other than the passphrase from `key` (GELI's keyfile
    /// components, or no passphrase at all) for every later unlock and header update.
    pub fn use_key_parts(&mut self, key: &KeyArgs) -> Result<(), Failure> {
        self.keyfiles = passphrase::keyfiles(key)?;
        self.no_passphrase = key.no_passphrase;
        Ok(())
    }

    /// Reads the header again and gives it the key parts of [`Image::use_key_parts`].
    fn reread_header(&mut self) -> Result<(), Failure> {
        self.header = Header::read(&self.files.store)?;
        if !self.keyfiles.is_empty() {
            self.header.set_keyfiles(self.keyfiles.clone())?;
        }
        if self.no_passphrase {
            self.header.set_passphrase_component(false)?;
        }
        Ok(())
    }

    /// Unlocks with `pass` (only keyslot `slot` when given) under the shared header lock,
    /// after reading the header again: the keyslot opened is one no other process is
    /// changing.
    pub fn unlock_with(&mut self, pass: &[u8], slot: Option<usize>) -> Result<Unlocked, Failure> {
        let _lock = self.files.lock(Mode::Shared)?;
        self.reread_header()?;
        Ok(self.header.unlock_at(self.files.placement(), pass, slot)?)
    }

    /// Runs `change` on the header under the exclusive header lock, after reading the
    /// header again: a change made by another process meanwhile is kept.
    pub fn update<T>(
        &mut self,
        change: impl FnOnce(&mut Header, &ImageStore) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let _lock = self.files.lock(Mode::Exclusive)?;
        self.reread_header()?;
        change(&mut self.header, &self.files.store)
    }

    /// The engine over the data area of the volume `unlocked` opened, and the use claims
    /// to hold while it runs. A detached header used on its own is refused.
    pub fn engine(
        self,
        unlocked: &Unlocked,
        opts: EngineOptions,
    ) -> Result<(Volume, Claims), Failure> {
        if let Some((offset, end)) = unlocked.data_inside_header() {
            return Err(Failure::usage(format!(
                "{} holds a detached header: its data offset is {offset}, inside its own \
                 {end} bytes of metadata and keyslots (\"Reduced data offset is allowed only \
                 for detached LUKS header\", cryptsetup says); give the data device as the \
                 image and this file with --header",
                crate::locator::redacted(&self.files.path)
            )));
        }
        let Files {
            store,
            data,
            claims,
            ..
        } = self.files;
        let data = data.unwrap_or(store);
        Ok((unlocked.engine(Box::new(data), opts)?, claims))
    }
}

/// An open volume: the engine, what unlocking found, and the claims to hold while the
/// engine runs.
#[derive(Debug)]
pub struct Opened {
    /// The engine.
    pub volume: Volume,
    /// The unlocked volume.
    pub unlocked: Unlocked,
    /// The format's name.
    pub format: &'static str,
    /// The use claims (drop them after the engine).
    pub claims: Claims,
}

/// Opens the volume at `path` (header in `header` when given), unlocks it with `key` and
/// starts the engine (read-write unless `opts.read_only`; read-only beside a writer when
/// `shared`).
pub fn open_volume(
    path: &Path,
    header: &HeaderArg,
    key: &KeyArgs,
    opts: EngineOptions,
    shared: bool,
) -> Result<Opened, Failure> {
    let access = Access::Data {
        write: !opts.read_only,
        shared,
    };
    let mut image = open(path, header, access)?;
    let unlocked = image.unlock(key)?;
    let format = image.header.name();
    let (volume, claims) = image.engine(&unlocked, opts)?;
    Ok(Opened {
        volume,
        unlocked,
        format,
        claims,
    })
}

/// Opens `path` for formatting, or creates it when missing: an image with `size` bytes
/// (`--size`, required), or with `header` an empty file (a detached header's file, which
/// grows to the header's size). Either is created readable by its owner only, as key
/// material should be (an existing file or device keeps its mode: format changes contents,
/// not access). A remote store is never created: its size is the export's, and a `--size`
/// that differs is refused. Returns the store and whether it was created.
pub fn open_or_create(
    path: &Path,
    size: Option<u64>,
    header: bool,
) -> Result<(ImageStore, bool), Failure> {
    let needs_size = !header;
    if let Some(store) = locator::open_remote(path, true)? {
        let have = store.size().map_err(|e| Failure::runtime(e.to_string()))?;
        if let Some(s) = size.filter(|&s| needs_size && s != have) {
            return Err(Failure::usage(format!(
                "{} is an export of {have} bytes, not {s}: its size comes from the export \
                 (leave out --size)",
                crate::locator::redacted(path)
            )));
        }
        return Ok((store, false));
    }
    if path.exists() {
        let store = open_store(path, true)?;
        let file = store.as_file().expect("a path opens as a file");
        let meta = file
            .file()
            .metadata()
            .map_err(|e| Failure::runtime(e.to_string()))?;
        if let Some(s) = size.filter(|_| needs_size) {
            if meta.is_file() && meta.len() != s {
                return Err(Failure::usage(format!(
                    "{} exists ({} bytes); --size is only for creating a new image",
                    path.display(),
                    meta.len()
                )));
            }
        }
        return Ok((store, false));
    }
    let size = match size {
        Some(s) => s,
        None if !needs_size => 0,
        None => {
            return Err(Failure::usage(format!(
                "{} does not exist: give --size to create it",
                path.display()
            )))
        }
    };
    let created = |e: std::io::Error| Failure::runtime(format!("{}: {e}", path.display()));
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(created)?;
    let store = FileStore::new(file, path.display().to_string());
    store.file().set_len(size).map_err(created)?;
    Ok((ImageStore::File(store), true))
}
