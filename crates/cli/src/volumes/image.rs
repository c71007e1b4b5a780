//! How the commands open volumes: the library's opener (`sectorcrypt_image`: locators,
//! stores, claims, header locks, unlocking, the engine) with what only a command has
//! added: the global remote flags, the passphrase from the key arguments (key file,
//! prompt, standard input), wait messages on standard error, and the exit codes of
//! `failure.rs`. The same failure therefore gives the same message and exit code in every
//! command, and the same class in Python and C: an image that cannot be opened (missing,
//! unreadable, a directory, an export that cannot be reached) or that holds no valid
//! header is bad input (2), an I/O error while reading an image that opened is a runtime
//! failure (1), a volume in use is 1, a wrong passphrase is 3.
//!
//! What the locks and claims are, and how detached headers are handled, is described in
//! `sectorcrypt_image::image`; which flags set what, in `args.rs`.

use crate::failure::Failure;
use crate::flags::tcrypt::TcryptArgs;
use crate::flags::{HeaderArg, KeyArgs};
use crate::passphrase::{self, Secret};
use sectorcrypt_image::image as lib;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::formats::Requested;
use sectorcrypt_volume::lock::{self, Mode};
use sectorcrypt_volume::tcrypt::Protect;
use sectorcrypt_volume::{Header, Unlocked};
use std::path::Path;
use std::sync::OnceLock;

pub use sectorcrypt_image::{Access, Claims, Files, Guard, Image, ImageStore, RemoteOptions};

static REMOTE: OnceLock<RemoteOptions> = OnceLock::new();
static REQUESTED: OnceLock<Requested> = OnceLock::new();

/// Sets the remote options of this command (the global flags; the first call wins).
pub fn configure(o: RemoteOptions) {
    let _ = REMOTE.set(o);
}

/// Makes this command read headers as the format `args` names (VeraCrypt/TrueCrypt, which
/// is never detected; FileVault 2, also when its header is damaged), when it names one
/// (the first call wins).
pub fn request(args: &TcryptArgs) -> Result<(), Failure> {
    if let Some(mut r) = args.requested()? {
        if let Requested::Tcrypt(o) = &mut r {
            o.protect = protect(args)?;
        }
        let _ = REQUESTED.set(r);
    }
    Ok(())
}

/// The hidden volume's secret of `--protect-hidden-key-file` and its companions, read
/// from their files.
fn protect(args: &TcryptArgs) -> Result<Option<Protect>, Failure> {
    let Some(file) = &args.protect_key_file else {
        return Ok(None);
    };
    if file == Path::new("-") {
        return Err(Failure::usage(
            "--protect-hidden-key-file takes a file, not standard input (the outer \
             volume's passphrase or the data may come from there)",
        ));
    }
    let keys = KeyArgs {
        key_file: None,
        keyfile_component: args.protect_keyfile_component.clone(),
        no_passphrase: false,
        bitlk_startup_key: None,
        key_slot: None,
        batch: true,
    };
    Ok(Some(Protect {
        passphrase: zeroize::Zeroizing::new(passphrase::from_file(file)?.to_vec()),
        keyfiles: passphrase::keyfiles(&keys)?,
        pim: args.protect_pim,
    }))
}

/// How this command reaches stores and reports waits: the remote flags, and a wait
/// message on standard error before every wait for another process.
pub fn context() -> lib::Context {
    lib::Context {
        remote: REMOTE.get().copied().unwrap_or_default(),
        on_wait: Some(say_waiting),
    }
}

fn say_waiting(what: &str) {
    eprintln!("sectorcrypt: {what}");
}

/// Opens `path` (read-write when `write`) as a store (see `sectorcrypt_image::image`).
pub fn open_store(path: &Path, write: bool) -> Result<ImageStore, Failure> {
    Ok(lib::open_store(path, write, &context().remote)?)
}

/// Claims the use of `store` (the file `path`) in `mode`, waiting (saying so) for a
/// header being replaced; an exclusive claim on a volume in use is refused (exit 1).
pub fn claim(store: &ImageStore, path: &Path, mode: Mode) -> Result<Guard, Failure> {
    Ok(lib::claim(store, path, mode, context().on_wait)?)
}

/// Takes the writer claim `access` needs on `store`, never waiting (exit 1 when refused).
pub fn claim_access(store: &ImageStore, access: lock::Access) -> Result<Option<Guard>, Failure> {
    Ok(lib::claim_access(store, access)?)
}

/// Takes the header lock on `store` (the file `path`) in `mode`, waiting (saying so).
pub fn lock_header(store: &ImageStore, path: &Path, mode: Mode) -> Result<Guard, Failure> {
    Ok(lib::lock_header(store, path, mode, context().on_wait)?)
}

/// Opens the files of the volume at `path` (header in `header` when given) for `access`.
pub fn files(path: &Path, header: &HeaderArg, access: Access) -> Result<Files, Failure> {
    Ok(Files::open(
        path,
        header.file.as_deref(),
        access,
        &context(),
    )?)
}

/// Opens the volume at `path` (header in `header` when given) for `access` and reads its
/// header (never writing).
pub fn open(path: &Path, header: &HeaderArg, access: Access) -> Result<Image, Failure> {
    Ok(Image::open_as(
        path,
        header.file.as_deref(),
        access,
        &context(),
        REQUESTED.get().cloned(),
    )?)
}

/// What the key arguments add to an [`Image`]: the passphrase, and the other parts of
/// the key.
pub trait Keys {
    /// The passphrase of this volume, as `key` says (key file, prompt, standard input).
    fn passphrase(&self, key: &KeyArgs) -> Result<Secret, Failure>;
    /// Takes the parts of the key other than the passphrase from `key` (GELI's keyfile
    /// components, or no passphrase at all) for every later unlock and header update.
    fn use_key_parts(&mut self, key: &KeyArgs) -> Result<(), Failure>;
    /// Gets the passphrase and unlocks (only `--key-slot` when given).
    fn unlock(&mut self, key: &KeyArgs) -> Result<Unlocked, Failure>;
    /// [`Image::update`] with a command's failures.
    fn change<T>(
        &mut self,
        change: impl FnOnce(&mut Header, &ImageStore) -> Result<T, Failure>,
    ) -> Result<T, Failure>;
}

impl Keys for Image {
    fn passphrase(&self, key: &KeyArgs) -> Result<Secret, Failure> {
        passphrase::existing(key, &self.files.path)
    }

    fn use_key_parts(&mut self, key: &KeyArgs) -> Result<(), Failure> {
        let format = self.header.name();
        if key.bitlk_startup_key.is_some() && format != "bitlk" {
            return Err(Failure::usage(format!(
                "--bitlk-startup-key opens BitLocker volumes; {} is {format}",
                crate::present::locator::redacted(&self.files.path)
            )));
        }
        self.set_key_parts(passphrase::keyfiles(key)?, key.no_passphrase);
        Ok(())
    }

    fn unlock(&mut self, key: &KeyArgs) -> Result<Unlocked, Failure> {
        self.use_key_parts(key)?;
        let pass = self.passphrase(key)?;
        Ok(self.unlock_with(&pass, key.key_slot)?)
    }

    fn change<T>(
        &mut self,
        change: impl FnOnce(&mut Header, &ImageStore) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        self.update(change)
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
/// `shared`). The passphrase is asked for after the image opened and its header was read.
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
