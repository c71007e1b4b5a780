//! Opening a volume in one call, for programs that link the library (the Python package,
//! the C library) and for the command line's data commands once they have a passphrase:
//! [`open`] takes a locator (a path, an NBD URI, an `rbd:` spec), the passphrase and
//! [`OpenOptions`], and returns the running engine, holding the same locks and claims as
//! every other user (`crate::image`), so that a volume opened here and a `sectorcrypt
//! erase` or `header restore` in another process cannot meet.
//!
//! The steps: open the image (and a detached header's file) for reading, or reading and
//! writing; claim their use, shared; take the writer claim on each: a read-write open is
//! refused while another user writes the volume or reads it without
//! [`OpenOptions::shared`], a read-only open while another user writes it, unless
//! [`OpenOptions::shared`], and the error names the holder; read the header and open a
//! keyslot under the shared header lock; start the engine over the data area. Every
//! format the registry knows opens this way: those it detects (LUKS2, LUKS1, GELI,
//! BitLocker, FileVault 2), and VeraCrypt and TrueCrypt when [`OpenOptions::requested`]
//! names them.

use crate::error::Result;
use crate::image::{require_integrity, Access, Claims, Context, Image};
use crate::locator::RemoteOptions;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::formats::Requested;
use sectorcrypt_volume::Unlocked;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// How to open a volume with [`open`].
#[derive(Debug, Default, Clone)]
pub struct OpenOptions {
    /// The file (or locator) holding the header and keyslots, when it is not the image (a
    /// detached header).
    pub header: Option<PathBuf>,
    /// Open read-only: the stores are opened for reading and the engine refuses writes.
    pub read_only: bool,
    /// With `read_only`: open even while another user writes the volume (cryptsetup's
    /// `--shared`), accepting that data read may be changing. Without it, a read-only
    /// open beside a writer is refused ([`crate::Class::InUse`]), and keeps writers out
    /// while it lasts. Ignored for a read-write open (there is never a second writer).
    pub shared: bool,
    /// Try only this keyslot.
    pub key_slot: Option<usize>,
    /// Key files (GELI's keyfile components, in order), read by the caller.
    pub keyfiles: Vec<Zeroizing<Vec<u8>>>,
    /// GELI: the key has no passphrase component (the volume was made with `-P`/`-p`).
    pub no_passphrase: bool,
    /// Refuse a volume whose sectors are not authenticated.
    pub integrity: bool,
    /// The format asked for by name, for those that have no signature and are never
    /// detected (VeraCrypt and TrueCrypt, with their options: PIM, hidden or backup
    /// header, system encryption, hidden-volume protection), or FileVault 2 with a
    /// damaged header; `None`: detected. VeraCrypt keyfiles go in [`Self::keyfiles`].
    pub requested: Option<Requested>,
    /// The engine's tuning (threads); its `read_only` is set from [`Self::read_only`].
    pub engine: EngineOptions,
    /// How remote stores are reached, and waits are reported.
    pub context: Context,
}

impl OpenOptions {
    /// How remote stores are reached.
    pub fn remote(&self) -> &RemoteOptions {
        &self.context.remote
    }
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
    /// The header's UUID, when the format has one.
    pub uuid: Option<String>,
    /// Held for as long as the volume is open; declared last, so released after the
    /// engine.
    pub claims: Claims,
}

/// Opens the volume `locator` names (header in `opts.header` when given) with
/// `passphrase` and starts its engine. Errors are classified ([`crate::Class`]): a file
/// that does not exist or cannot be opened, an export that cannot be reached, no or a
/// damaged header, a wrong passphrase, a volume in use (an erase or header restore
/// running, another writer, or a reader without `shared` beside a writer), a detached
/// header opened without its data.
pub fn open(locator: &Path, passphrase: &[u8], opts: &OpenOptions) -> Result<Opened> {
    let access = Access::Data {
        write: !opts.read_only,
        shared: opts.shared,
    };
    let mut image = Image::open_as(
        locator,
        opts.header.as_deref(),
        access,
        &opts.context,
        opts.requested.clone(),
    )?;
    image.set_key_parts(opts.keyfiles.clone(), opts.no_passphrase);
    let unlocked = image.unlock_with(passphrase, opts.key_slot)?;
    let format = image.header.name();
    let uuid = image.header.uuid().map(str::to_owned);
    require_integrity(opts.integrity, locator, &unlocked, format)?;
    let mut engine = opts.engine.clone();
    engine.read_only = opts.read_only;
    let (volume, claims) = image.engine(&unlocked, engine)?;
    Ok(Opened {
        volume,
        unlocked,
        format,
        uuid,
        claims,
    })
}
