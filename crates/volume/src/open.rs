//! Opening a volume kept in files, for programs that link this library rather than run
//! the `sectorcrypt` command (the Python package, the C library): one call takes the
//! paths and the passphrase and returns the running engine, holding the same locks as the
//! command line does, so that a volume opened here and a `sectorcrypt erase` or `header
//! restore` in another process cannot meet.
//!
//! The steps: open the image (and a detached header's file) for reading, or reading and
//! writing; claim their use, shared (an exclusive claim by another process, an erase in
//! progress, is refused at once rather than waited for); take the writer claim on each
//! (`crate::lock`): a read-write open is refused while another process writes the volume
//! or reads it without [`OpenOptions::shared`], a read-only open while another process
//! writes it, unless [`OpenOptions::shared`]; the error names the holder; read the header and open a
//! keyslot under the shared header lock (a keyslot being changed by another process is
//! waited for); start the engine over the data area. Every format the registry knows
//! (LUKS2, LUKS1, GELI) opens this way.

use crate::engine::{EngineOptions, Volume};
use crate::lock::{Access, Mode, UseClaim};
use crate::{Error, FileStore, Header, Placement, Result, Unlocked};
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// How to open a volume with [`open`].
#[derive(Debug, Default, Clone)]
pub struct OpenOptions {
    /// The file holding the header and keyslots, when it is not the image (a detached
    /// header).
    pub header: Option<PathBuf>,
    /// Open read-only: the files are opened for reading and the engine refuses writes.
    pub read_only: bool,
    /// With `read_only`: open even while another process writes the volume (cryptsetup's
    /// `--shared`), accepting that data read may be changing. Without it, a read-only
    /// open beside a writer is refused ([`Error::InUse`]), and keeps writers out while it
    /// lasts. Ignored for a read-write open (there is never a second writer).
    pub shared: bool,
    /// Try only this keyslot.
    pub key_slot: Option<usize>,
    /// Key files (GELI's keyfile components, in order), read by the caller.
    pub keyfiles: Vec<Zeroizing<Vec<u8>>>,
    /// GELI: the key has no passphrase component (the volume was made with `-P`/`-p`).
    pub no_passphrase: bool,
    /// The engine's tuning.
    pub engine: EngineOptions,
}

/// A volume opened by [`open`]: its engine, what unlocking found, and the use claims held
/// until it is dropped.
#[derive(Debug)]
pub struct Opened {
    /// The engine over the data area: plaintext reads and writes at any offset.
    pub volume: Volume,
    /// The unlocked volume (cipher, sector size, data offset and size, the keyslot).
    pub unlocked: Unlocked,
    /// The format's name (`luks2`, `luks1`, `geli`).
    pub format: &'static str,
    /// Held for as long as the volume is open; released after the engine.
    _claims: Vec<UseClaim>,
}

/// Opens the volume in `image` (header in `opts.header` when given) with `passphrase` and
/// starts its engine. Errors: [`Error::Io`] for files that cannot be opened or read,
/// [`Error::Header`] for an image without a valid header, [`Error::WrongPassphrase`],
/// [`Error::InUse`] for a volume that an erase or header restore is replacing, or that
/// another process writes (or, for a read-write open, reads without `shared`),
/// [`Error::Invalid`] for a detached header opened without its data device.
pub fn open(image: &Path, passphrase: &[u8], opts: &OpenOptions) -> Result<Opened> {
    let write = !opts.read_only;
    let open_file =
        |p: &Path| FileStore::open(p, write).map_err(|e| Error::io(format!("{}", p.display()), e));
    let data = open_file(image)?;
    let header = opts.header.as_deref().map(open_file).transpose()?;
    // A header "detached" into the image itself is the attached header: one claim.
    let header = header.filter(|h| !same_file(h, &data));
    let access = match (opts.read_only, opts.shared) {
        (false, _) => Access::Writer,
        (true, false) => Access::Reader,
        (true, true) => Access::SharedReader,
    };
    let mut claims = claim(&data, image, access)?;
    if let (Some(h), Some(path)) = (&header, &opts.header) {
        claims.extend(claim(h, path, access)?);
    }
    let header_store = header.as_ref().unwrap_or(&data);
    let unlocked = {
        let _lock = header_store
            .lock_header(Mode::Shared, true)
            .map_err(|e| Error::io("locking the header", e))?;
        let mut parsed = Header::read(header_store)?;
        if !opts.keyfiles.is_empty() {
            parsed.set_keyfiles(opts.keyfiles.clone())?;
        }
        if opts.no_passphrase {
            parsed.set_passphrase_component(false)?;
        }
        let at = match &header {
            Some(h) => Placement::Detached {
                header: h,
                data: &data,
            },
            None => Placement::Attached(&data),
        };
        let unlocked = parsed.unlock_at(at, passphrase, opts.key_slot)?;
        (unlocked, parsed.name())
    };
    let (unlocked, format) = unlocked;
    let mut engine_opts = opts.engine.clone();
    engine_opts.read_only = opts.read_only;
    let volume = unlocked.engine(Box::new(data), engine_opts)?;
    Ok(Opened {
        volume,
        unlocked,
        format,
        _claims: claims,
    })
}

/// A shared use claim on `store` and the writer claim of `access`; a conflicting claim
/// held elsewhere is an error naming `path` (and the holder of a writer claim).
fn claim(store: &FileStore, path: &Path, access: Access) -> Result<Vec<UseClaim>> {
    let failed = |e| Error::io(format!("claiming {}", path.display()), e);
    let used = store
        .claim_use(Mode::Shared, false)
        .map_err(failed)?
        .ok_or_else(|| {
            Error::InUse(format!(
                "{} is in use by another process that is replacing or erasing its header",
                path.display()
            ))
        })?;
    let writer = store
        .claim_access(access)
        .map_err(failed)?
        .map_err(Error::InUse)?;
    Ok([Some(used), writer].into_iter().flatten().collect())
}

/// Whether two open files are one (same device and inode).
fn same_file(a: &FileStore, b: &FileStore) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (a.file().metadata(), b.file().metadata()) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}
