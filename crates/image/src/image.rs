//! The files of a volume and their claims: every front end that opens a volume (the
//! command line's dump, test-key, keyslot changes, header backup and restore, erase, read,
//! write, serve and mount; the Python package; the C library) goes through here: open the
//! stores the locator names, take the locks the use needs, read and detect the header (any
//! format the volume crate knows), unlock, start the engine. The same failure is therefore
//! the same [`Error`] everywhere: an image that cannot be opened (missing, unreadable, a
//! directory, an export that cannot be reached) or that holds no valid header is bad
//! input, an I/O error while reading an image that opened is a runtime failure.
//!
//! **Detached headers** (as cryptsetup's `--header`): the header and keyslots are read and
//! written in the header's file, the data in the image from the header's data offset on
//! (0 for the headers `cryptsetup luksFormat --header` makes). The same file given twice
//! is an attached header. A header whose data starts inside its own metadata (data offset
//! 0), used alone, opens its keyslots (as `cryptsetup open --test-passphrase` does) but
//! never its data: [`Image::engine`] refuses it, since writing the data would overwrite
//! the header.
//!
//! **Locks** (`sectorcrypt_volume::lock`): the header lock (`flock`, cryptsetup's) on the
//! header's file is shared while a header is read and a keyslot opened, exclusive while a
//! keyslot changes; every change reads the header again under the exclusive lock, so two
//! processes changing keyslots run one after the other and both results survive. The use
//! claim is shared by every data user on every file of the volume for as long as it runs;
//! erase and header restore (and format) claim the files they write exclusively and refuse
//! a volume in use ([`Class::InUse`]: the same request succeeds once the other user is
//! done). Keyslot changes need no claim: they are allowed on a served volume, as
//! cryptsetup allows them on an active device. Beside the use claim, data users take the
//! writer claim on every file of the volume, never waiting: one writer at a time, and no
//! read-only use beside a writer unless it is `shared` (as cryptsetup's `--shared`).
//!
//! **Waiting.** A shared use claim meeting an exclusive one (a header being replaced), and
//! a header lock meeting another process's, wait when the [`Context`] has an `on_wait`
//! hook (called first with what is waited for: the command line prints it); without one,
//! the use claim is refused at once and the header lock waits silently.
//!
//! **Remote stores** (`crate::store`): their locks are held in this process only.

use crate::error::{Class, Error, Result};
use crate::locator::{self, redacted, RemoteOptions};
use crate::store::{Guard, ImageStore};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::formats::{self, Requested};
use sectorcrypt_volume::lock::{self, Mode};
use sectorcrypt_volume::{FileStore, Header, Placement, Store, Unlocked};
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// How a volume is used: what is opened for writing and which locks are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads the header: dump, test-key, header backup.
    Inspect,
    /// Changes keyslots (allowed while the volume is in use).
    Keyslots,
    /// Replaces or destroys the header (refused while the volume is in use): erase,
    /// header restore.
    Replace,
    /// Rewrites the header and the data alone (refused while the volume is in use):
    /// re-encryption.
    Rewrite,
    /// Reads or writes the data.
    Data {
        /// Whether the data is written.
        write: bool,
        /// Read-only beside a writer is accepted.
        shared: bool,
    },
}

/// How stores are reached and what happens when a lock must be waited for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// How remote stores are reached.
    pub remote: RemoteOptions,
    /// Called with what is waited for (e.g. `waiting for another process to finish with
    /// the header of disk.img`) before a wait; `None`: a shared use claim is refused at
    /// once instead, a header lock waited for silently.
    pub on_wait: Option<fn(&str)>,
}

/// The use claims held while a volume is used; released when dropped.
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
/// finds for a URI or spec. A file that cannot be opened or a directory is
/// [`Class::NotFound`] or [`Class::CannotOpen`].
pub fn open_store(path: &Path, write: bool, remote: &RemoteOptions) -> Result<ImageStore> {
    if let Some(store) = locator::open_remote(path, write, remote)? {
        return Ok(store);
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| Error::cannot_open(path.display(), e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::cannot_open(path.display(), e))?;
    if meta.is_dir() {
        let e = io::Error::new(io::ErrorKind::IsADirectory, "is a directory");
        return Err(Error::cannot_open(path.display(), e));
    }
    Ok(ImageStore::File(FileStore::new(
        file,
        path.display().to_string(),
    )))
}

/// Claims the use of `store` (the file `path`) in `mode`. An exclusive claim never waits:
/// a volume in use is refused. A shared claim meeting an exclusive one (a header being
/// replaced) waits when `on_wait` is given (see the module doc), otherwise is refused.
pub fn claim(
    store: &ImageStore,
    path: &Path,
    mode: Mode,
    on_wait: Option<fn(&str)>,
) -> Result<Guard> {
    let name = redacted(path);
    let failed = |e| Error::io(format!("locking {name}"), e);
    if let Some(c) = store.claim_use(mode, false).map_err(failed)? {
        return Ok(c);
    }
    if mode == Mode::Exclusive {
        return Err(Error::in_use(format!(
            "{name} is in use: another process is serving, mounting, reading or writing it; \
             stop it first"
        )));
    }
    let Some(on_wait) = on_wait else {
        return Err(Error::in_use(format!(
            "{name} is in use by another process that is replacing or erasing its header"
        )));
    };
    on_wait(&format!(
        "waiting: another process is replacing the header of {name}"
    ));
    Ok(store
        .claim_use(mode, true)
        .map_err(failed)?
        .expect("a waiting claim"))
}

/// Takes the writer claim `access` needs on `store`, never waiting: a conflicting claim
/// held elsewhere is [`Class::InUse`], its holder named.
pub fn claim_access(store: &ImageStore, access: lock::Access) -> Result<Option<Guard>> {
    store
        .claim_access(access)
        .map_err(|e| Error::io(format!("locking {}", store.name()), e))?
        .map_err(Error::in_use)
}

/// Takes the header lock on `store` (the file `path`) in `mode`, waiting for another
/// process's conflicting lock to be released (saying so through `on_wait`).
pub fn lock_header(
    store: &ImageStore,
    path: &Path,
    mode: Mode,
    on_wait: Option<fn(&str)>,
) -> Result<Guard> {
    let name = redacted(path);
    let failed = |e| Error::io(format!("locking the header of {name}"), e);
    if let Some(l) = store.lock_header(mode, false).map_err(failed)? {
        return Ok(l);
    }
    if let Some(on_wait) = on_wait {
        on_wait(&format!(
            "waiting for another process to finish with the header of {name}"
        ));
    }
    Ok(store
        .lock_header(mode, true)
        .map_err(failed)?
        .expect("a waiting lock"))
}

/// The files of a volume, opened for an [`Access`] with its use claims.
#[derive(Debug)]
pub struct Files {
    /// The image as given: the data, and the header too unless it is detached.
    pub path: PathBuf,
    /// Where the header is: `path`, or the detached header's file.
    pub header_path: PathBuf,
    /// The header's store.
    pub store: ImageStore,
    /// The data's store, when the header is detached.
    data: Option<ImageStore>,
    claims: Claims,
    on_wait: Option<fn(&str)>,
}

impl Files {
    /// Opens the files of the volume at `path` (with its header in `header` when given)
    /// and claims them as `access` needs.
    pub fn open(path: &Path, header: Option<&Path>, access: Access, cx: &Context) -> Result<Files> {
        let data_write = matches!(access, Access::Data { write: true, .. } | Access::Rewrite);
        let header_write = matches!(access, Access::Keyslots | Access::Replace | Access::Rewrite);
        let attached = |path: &Path| open_store(path, header_write || data_write, &cx.remote);
        let (store, header_path, data) = match header {
            Some(h) => {
                let data = open_store(path, data_write, &cx.remote)?;
                // A writer's exclusive claim on the header's file needs it open for
                // writing (an OFD write lock does).
                let hdr = open_store(h, header_write || data_write, &cx.remote)?;
                if hdr.same_as(&data) {
                    (attached(path)?, path.to_path_buf(), None)
                } else {
                    (hdr, h.to_path_buf(), Some(data))
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
            on_wait: cx.on_wait,
        };
        match access {
            Access::Data { write, shared } => {
                let role = match (write, shared) {
                    (true, _) => lock::Access::Writer,
                    (false, false) => lock::Access::Reader,
                    (false, true) => lock::Access::SharedReader,
                };
                let c = claim(&files.store, &files.header_path, Mode::Shared, cx.on_wait)?;
                files.claims.0.push(c);
                files.claims.0.extend(claim_access(&files.store, role)?);
                if let Some(d) = &files.data {
                    files
                        .claims
                        .0
                        .push(claim(d, &files.path, Mode::Shared, cx.on_wait)?);
                    files.claims.0.extend(claim_access(d, role)?);
                }
            }
            Access::Replace | Access::Rewrite => {
                let c = claim(
                    &files.store,
                    &files.header_path,
                    Mode::Exclusive,
                    cx.on_wait,
                )?;
                files.claims.0.push(c);
                if let (Access::Rewrite, Some(d)) = (access, &files.data) {
                    let c = claim(d, &files.path, Mode::Exclusive, cx.on_wait)?;
                    files.claims.0.push(c);
                }
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
    pub fn lock(&self, mode: Mode) -> Result<Guard> {
        lock_header(&self.store, &self.header_path, mode, self.on_wait)
    }

    /// Reads the header under the shared header lock (never writing).
    pub fn read_header(&self) -> Result<Header> {
        self.read_header_as(None)
    }

    /// [`Files::read_header`], or the header of the format `requested` names (a format
    /// without a signature, never detected: VeraCrypt and TrueCrypt).
    pub fn read_header_as(&self, requested: Option<&Requested>) -> Result<Header> {
        let _lock = self.lock(Mode::Shared)?;
        Ok(formats::read_as(&self.store, requested)?)
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
    keyfiles: Vec<Zeroizing<Vec<u8>>>,
    /// Whether the key has no passphrase component (GELI's `-p`).
    no_passphrase: bool,
    /// The format asked for by name, when not detected (VeraCrypt and TrueCrypt).
    requested: Option<Requested>,
}

impl Image {
    /// Opens the volume at `path` (header in `header` when given) for `access` and reads
    /// its header (never writing).
    pub fn open(path: &Path, header: Option<&Path>, access: Access, cx: &Context) -> Result<Image> {
        Image::open_as(path, header, access, cx, None)
    }

    /// [`Image::open`], reading the header as the format `requested` names when given (a
    /// format without a signature, never detected: VeraCrypt and TrueCrypt), here and at
    /// every later read.
    pub fn open_as(
        path: &Path,
        header: Option<&Path>,
        access: Access,
        cx: &Context,
        requested: Option<Requested>,
    ) -> Result<Image> {
        let files = Files::open(path, header, access, cx)?;
        let header = files.read_header_as(requested.as_ref())?;
        Ok(Image {
            files,
            header,
            keyfiles: Vec::new(),
            no_passphrase: false,
            requested,
        })
    }

    /// The parts of the key other than the passphrase (GELI's keyfile components, or no
    /// passphrase at all), for every later unlock and header update.
    pub fn set_key_parts(&mut self, keyfiles: Vec<Zeroizing<Vec<u8>>>, no_passphrase: bool) {
        self.keyfiles = keyfiles;
        self.no_passphrase = no_passphrase;
    }

    /// Reads the header again and gives it the key parts of [`Image::set_key_parts`].
    fn reread_header(&mut self) -> Result<()> {
        self.header = formats::read_as(&self.files.store, self.requested.as_ref())?;
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
    pub fn unlock_with(&mut self, pass: &[u8], slot: Option<usize>) -> Result<Unlocked> {
        let _lock = self.files.lock(Mode::Shared)?;
        self.reread_header()?;
        Ok(self.header.unlock_at(self.files.placement(), pass, slot)?)
    }

    /// Runs `change` on the header under the exclusive header lock, after reading the
    /// header again: a change made by another process meanwhile is kept.
    pub fn update<T, E: From<Error>>(
        &mut self,
        change: impl FnOnce(&mut Header, &ImageStore) -> Result<T, E>,
    ) -> Result<T, E> {
        let _lock = self.files.lock(Mode::Exclusive)?;
        self.reread_header()?;
        change(&mut self.header, &self.files.store)
    }

    /// The engine over the data area of the volume `unlocked` opened, and the use claims
    /// to hold while it runs. A detached header used on its own is refused.
    pub fn engine(self, unlocked: &Unlocked, opts: EngineOptions) -> Result<(Volume, Claims)> {
        if let Some((offset, end)) = unlocked.data_inside_header() {
            return Err(Error::invalid(format!(
                "{} holds a detached header: its data offset is {offset}, inside its own \
                 {end} bytes of metadata and keyslots (\"Reduced data offset is allowed only \
                 for detached LUKS header\", cryptsetup says); give the data device as the \
                 image and this file with --header",
                redacted(&self.files.path)
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

/// Refuses, when `integrity` asks for data authentication, a volume (`name`, of `format`)
/// whose sectors are not authenticated.
pub fn require_integrity(
    integrity: bool,
    name: &Path,
    unlocked: &Unlocked,
    format: &str,
) -> Result<()> {
    if !integrity || unlocked.authenticated() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{} ({format}) has no data authentication, and --integrity asks for it: {}",
        redacted(name),
        if format == "geli" {
            "its metadata's AUTH flag is clear (made without geli init -a, or cleared by \
             whoever could write the metadata: the flag is not itself authenticated)"
        } else {
            "its sectors carry no authentication tags"
        }
    )))
}

/// Opens `path` for formatting, or creates it when missing: an image with `size` bytes
/// (required), or with `header` an empty file (a detached header's file, which grows to
/// the header's size). Either is created readable by its owner only, as key material
/// should be (an existing file or device keeps its mode: format changes contents, not
/// access). A remote store is never created: its size is the export's, and a `size` that
/// differs is refused. Returns the store and whether it was created.
pub fn open_or_create(
    path: &Path,
    size: Option<u64>,
    header: bool,
    remote: &RemoteOptions,
) -> Result<(ImageStore, bool)> {
    let needs_size = !header;
    if let Some(store) = locator::open_remote(path, true, remote)? {
        let have = store.size().map_err(|e| Error::os(Class::Io, e))?;
        if let Some(s) = size.filter(|&s| needs_size && s != have) {
            return Err(Error::invalid(format!(
                "{} is an export of {have} bytes, not {s}: its size comes from the export \
                 (leave the size out)",
                redacted(path)
            )));
        }
        return Ok((store, false));
    }
    if path.exists() {
        let store = open_store(path, true, remote)?;
        let file = store.as_file().expect("a path opens as a file");
        let meta = file
            .file()
            .metadata()
            .map_err(|e| Error::os(Class::Io, e))?;
        if let Some(s) = size.filter(|_| needs_size) {
            if meta.is_file() && meta.len() != s {
                return Err(Error::invalid(format!(
                    "{} exists ({} bytes); a size is only for creating a new image",
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
            return Err(Error::invalid(format!(
                "{} does not exist: give a size to create it",
                path.display()
            )))
        }
    };
    let created = |e: io::Error| Error::io(path.display(), e);
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = OpenOptions::new()
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
