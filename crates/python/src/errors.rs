//! The package's exceptions and how the library's errors become them: [`Error`] is the
//! base of everything sectorcrypt itself refuses ([`WrongPassphrase`], [`CorruptHeader`],
//! [`AuthenticationError`], [`Unsupported`], [`InvalidArgument`]); what the operating
//! system refuses is Python's own `OSError` (its subclass chosen by the errno, as `open()`
//! raises `FileNotFoundError`). Messages come from the library, which never puts a
//! passphrase or key bytes in them.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use sectorcrypt_volume::{Error as VolumeError, HeaderError};
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
    "An option the format, the cipher or the volume cannot take, or a volume in use."
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
    Ok(())
}

/// The exception for an error of the volume library.
pub fn volume(e: VolumeError) -> PyErr {
    let msg = e.to_string();
    match e {
        VolumeError::Io { source, .. } => os_error(&source, msg),
        VolumeError::Header(HeaderError::Unrecognised(_))
        | VolumeError::Header(HeaderError::Corrupt(_))
        | VolumeError::Header(HeaderError::Truncated(_)) => CorruptHeader::new_err(msg),
        VolumeError::WrongPassphrase => WrongPassphrase::new_err(msg),
        VolumeError::Authentication(_) => AuthenticationError::new_err(msg),
        VolumeError::Unsupported(_) => Unsupported::new_err(msg),
        VolumeError::Invalid(_) | VolumeError::Crypto(_) | VolumeError::InUse(_) => {
            InvalidArgument::new_err(msg)
        }
        _ => Error::new_err(msg),
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
        _ => libc::EIO,
    }
}
