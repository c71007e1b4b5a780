//! The package's exceptions and how the library's errors become them, one class of
//! `sectorcrypt_image::Class` to one exception: [`Error`] is the base of everything
//! sectorcrypt itself refuses ([`WrongPassphrase`], [`CorruptHeader`] and its subclass
//! [`NoHeader`], [`AuthenticationError`], [`Unsupported`], [`InvalidArgument`], [`InUse`],
//! [`KeyslotError`]); what the operating system refuses is Python's own `OSError` (its
//! subclass chosen by the errno, as `open()` raises `FileNotFoundError`), and a remote
//! store that cannot be reached is [`Unreachable`], a `ConnectionError`. Messages come
//! from the library, which never puts a passphrase, key bytes or a locator's secret
//! options in them.

use pyo3::create_exception;
use pyo3::exceptions::{PyConnectionError, PyException, PyOSError};
use pyo3::prelude::*;
use sectorcrypt_image::{Class, Error as ImageError};
use sectorcrypt_volume::Error as VolumeError;
use std::io;

create_exception!(
    sectorcrypt,
    Error,
    PyException,
    "Base of the errors sectorcrypt raises itself (I/O errors are OSError)."
);
create_exception!(
    sectorcrypt,
    WrongPassphrase,
    Error,
    "No keyslot opens with the passphrase (or key file) given."
);
create_exception!(
    sectorcrypt,
    CorruptHeader,
    Error,
    "Not a volume of a known format, or a damaged or truncated header."
);
create_exception!(
    sectorcrypt,
    AuthenticationError,
    Error,
    "An authenticated sector (GELI -a) whose tag does not verify: nothing of it is returned."
);
create_exception!(
    sectorcrypt,
    Unsupported,
    Error,
    "A valid volume or request that uses something sectorcrypt does not implement."
);
create_exception!(
    sectorcrypt,
    InvalidArgument,
    Error,
    "An option or locator the format, the cipher or the volume cannot take."
);
create_exception!(
    sectorcrypt,
    NoHeader,
    CorruptHeader,
    "The image holds no volume of a known format (LUKS2, LUKS1, GELI)."
);
create_exception!(
    sectorcrypt,
    InUse,
    Error,
    "Another user holds a claim on the volume (a writer, a reader, an erase or header restore): the message names it."
);
create_exception!(
    sectorcrypt,
    KeyslotError,
    Error,
    "A keyslot operation the volume's keyslots do not allow (none active, none free)."
);
create_exception!(
    sectorcrypt,
    Unreachable,
    PyConnectionError,
    "A remote store (NBD export, RBD image) that cannot be reached or refuses the connection."
);

/// Adds the exception types to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("WrongPassphrase", py.get_type::<WrongPassphrase>())?;
    m.add("CorruptHeader", py.get_type::<CorruptHeader>())?;
    m.add("AuthenticationError", py.get_type::<AuthenticationError>())?;
    m.add("Unsupported", py.get_type::<Unsupported>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("NoHeader", py.get_type::<NoHeader>())?;
    m.add("InUse", py.get_type::<InUse>())?;
    m.add("KeyslotError", py.get_type::<KeyslotError>())?;
    m.add("Unreachable", py.get_type::<Unreachable>())?;
    Ok(())
}

/// The exception for each class of the image library's errors.
pub fn image(e: ImageError) -> PyErr {
    let msg = e.to_string();
    let os = |default: io::ErrorKind| {
        let errno = e.os_error().map_or(errno(&default.into()), errno);
        (errno, msg.clone())
    };
    match e.class() {
        Class::NotFound => PyOSError::new_err(os(io::ErrorKind::NotFound)),
        Class::CannotOpen => PyOSError::new_err(os(io::ErrorKind::PermissionDenied)),
        Class::Io => PyOSError::new_err(os(io::ErrorKind::Other)),
        Class::Unreachable => Unreachable::new_err(os(io::ErrorKind::ConnectionRefused)),
        Class::NoHeader => NoHeader::new_err(msg),
        Class::CorruptHeader => CorruptHeader::new_err(msg),
        Class::WrongPassphrase => WrongPassphrase::new_err(msg),
        Class::Authentication => AuthenticationError::new_err(msg),
        Class::Unsupported => Unsupported::new_err(msg),
        Class::InvalidArgument => InvalidArgument::new_err(msg),
        Class::InUse => InUse::new_err(msg),
        Class::Keyslot => KeyslotError::new_err(msg),
    }
}

/// The exception for an error of the crypto core (a key or a cipher refused).
pub fn crypto(e: sectorcrypt_crypto::Error) -> PyErr {
    InvalidArgument::new_err(e.to_string())
}

/// The exception for an error of the engine's data path (`what`: the volume's name, for
/// the message): a tag that does not verify is [`AuthenticationError`], anything else an
/// `OSError` with the operating system's errno, or the nearest one.
pub fn data_path(e: io::Error, what: &str) -> PyErr {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<VolumeError>());
    if let Some(VolumeError::Authentication(a)) = inner {
        return AuthenticationError::new_err(format!("{what}: {a}"));
    }
    os_error(&e, format!("{what}: {e}"))
}

/// `OSError(errno, msg)`: Python picks the subclass (`FileNotFoundError`, ...) by errno.
pub fn os_error(e: &io::Error, msg: String) -> PyErr {
    PyOSError::new_err((errno(e), msg))
}

/// The errno of `e`: its own, or the one its kind stands for.
fn errno(e: &io::Error) -> i32 {
    use io::ErrorKind as K;
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        K::NotFound => libc::ENOENT,
        K::PermissionDenied => libc::EACCES,
        K::InvalidInput => libc::EINVAL,
        K::StorageFull => libc::ENOSPC,
        K::ReadOnlyFilesystem => libc::EROFS,
        K::ConnectionRefused => libc::ECONNREFUSED,
        K::IsADirectory => libc::EISDIR,
        _ => libc::EIO,
    }
}
