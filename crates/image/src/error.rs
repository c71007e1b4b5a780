//! The one error of opening a volume by locator, classified once. Every front end maps
//! [`Class`] one-to-one onto what it reports: the command line's exit codes
//! ([`Class::exit_code`]), the Python package's exceptions and the C library's status
//! codes. Messages name what failed (a path, a redacted locator, a keyslot) and never hold
//! a passphrase, key bytes or a locator's secret options.

use sectorcrypt_volume::{Error as VolumeError, HeaderError};
use std::fmt;
use std::io;

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// An argument or option the locator, the format or the engine cannot take (a URI or
    /// spec that does not parse, a detached header opened without its data, a size that
    /// is not the export's).
    InvalidArgument,
    /// A local file that does not exist, or a remote image or pool that does not.
    NotFound,
    /// A local file that exists but cannot be opened: unreadable, a directory.
    CannotOpen,
    /// A remote store that cannot be reached, or that refuses the connection.
    Unreachable,
    /// Reading, writing or locking a store that opened failed.
    Io,
    /// The store holds no volume of a known format.
    NoHeader,
    /// A damaged or cut-short header.
    CorruptHeader,
    /// No keyslot opens with the passphrase given.
    WrongPassphrase,
    /// A valid volume or request using something sectorcrypt does not implement.
    Unsupported,
    /// Another user of the volume holds a claim that conflicts with this one; the same
    /// request succeeds once it is done.
    InUse,
    /// A keyslot operation the volume's keyslots do not allow.
    Keyslot,
    /// An authenticated sector whose tag does not verify.
    Authentication,
}

impl Class {
    /// The command line's exit code: 3 a wrong passphrase; 1 a runtime condition (I/O on
    /// a store that opened, a volume in use, a sector that fails its tag: the same
    /// command may succeed later); 2 bad usage or bad input (nothing was written).
    pub fn exit_code(self) -> i32 {
        match self {
            Class::WrongPassphrase => 3,
            Class::Io | Class::InUse | Class::Authentication => 1,
            Class::InvalidArgument
            | Class::NotFound
            | Class::CannotOpen
            | Class::Unreachable
            | Class::NoHeader
            | Class::CorruptHeader
            | Class::Unsupported
            | Class::Keyslot => 2,
        }
    }
}

/// A failure to locate, open, claim or unlock a volume.
#[derive(Debug)]
pub struct Error {
    class: Class,
    message: String,
    os: Option<io::Error>,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `class` saying `message`.
    pub fn new(class: Class, message: impl fmt::Display) -> Error {
        Error {
            class,
            message: message.to_string(),
            os: None,
        }
    }

    /// [`Class::InvalidArgument`].
    pub fn invalid(message: impl fmt::Display) -> Error {
        Error::new(Class::InvalidArgument, message)
    }

    /// [`Class::Unsupported`].
    pub fn unsupported(message: impl fmt::Display) -> Error {
        Error::new(Class::Unsupported, message)
    }

    /// [`Class::InUse`].
    pub fn in_use(message: impl fmt::Display) -> Error {
        Error::new(Class::InUse, message)
    }

    /// A local file `name` that cannot be opened: [`Class::NotFound`] when it does not
    /// exist, [`Class::CannotOpen`] otherwise.
    pub fn cannot_open(name: impl fmt::Display, e: io::Error) -> Error {
        let class = match e.kind() {
            io::ErrorKind::NotFound => Class::NotFound,
            _ => Class::CannotOpen,
        };
        Error::with_os(class, format!("{name}: {e}"), e)
    }

    /// [`Class::Io`]: `doing` what failed with `e`.
    pub fn io(doing: impl fmt::Display, e: io::Error) -> Error {
        Error::with_os(Class::Io, format!("{doing}: {e}"), e)
    }

    /// The operating system's `e` as an error of `class`, saying what `e` says.
    pub fn os(class: Class, e: io::Error) -> Error {
        Error::with_os(class, e.to_string(), e)
    }

    /// An error of `class` saying `message`, caused by the operating system's `e`.
    pub fn with_os(class: Class, message: impl fmt::Display, e: io::Error) -> Error {
        Error {
            class,
            message: message.to_string(),
            os: Some(e),
        }
    }

    /// What kind of failure this is.
    pub fn class(&self) -> Class {
        self.class
    }

    /// What failed.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The operating system's error behind this one, when there is one (its errno).
    pub fn os_error(&self) -> Option<&io::Error> {
        self.os.as_ref()
    }

    /// The command line's exit code ([`Class::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        self.class.exit_code()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.os.as_ref().map(|e| e as _)
    }
}

/// The volume crate's errors, classified.
impl From<VolumeError> for Error {
    fn from(e: VolumeError) -> Error {
        let message = e.to_string();
        let class = match &e {
            VolumeError::Io { .. } => Class::Io,
            VolumeError::Header(HeaderError::Unrecognised(_)) => Class::NoHeader,
            VolumeError::Header(_) => Class::CorruptHeader,
            VolumeError::WrongPassphrase => Class::WrongPassphrase,
            VolumeError::Keyslot(_) => Class::Keyslot,
            VolumeError::Unsupported(_) => Class::Unsupported,
            VolumeError::Invalid(_) | VolumeError::Crypto(_) => Class::InvalidArgument,
            VolumeError::InUse(_) => Class::InUse,
            VolumeError::Authentication(_) => Class::Authentication,
            _ => Class::Io,
        };
        let os = match e {
            VolumeError::Io { source, .. } => Some(source),
            _ => None,
        };
        Error { class, message, os }
    }
}

/// The crypto core refused a key or a cipher: the input is wrong.
impl From<sectorcrypt_crypto::Error> for Error {
    fn from(e: sectorcrypt_crypto::Error) -> Error {
        Error::invalid(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_errors_keep_their_message_and_class() {
        let e = Error::from(VolumeError::io(
            "reading x",
            io::Error::from_raw_os_error(libc_eio()),
        ));
        assert_eq!(e.class(), Class::Io);
        assert_eq!(e.exit_code(), 1);
        assert!(e.message().starts_with("reading x: "), "{e}");
        assert_eq!(e.os_error().and_then(io::Error::raw_os_error), Some(5));
        let e = Error::from(VolumeError::WrongPassphrase);
        assert_eq!((e.class(), e.exit_code()), (Class::WrongPassphrase, 3));
        let e = Error::from(VolumeError::corrupt("bad magic"));
        assert_eq!((e.class(), e.exit_code()), (Class::CorruptHeader, 2));
        let e = Error::cannot_open("/nope", io::Error::from(io::ErrorKind::NotFound));
        assert_eq!((e.class(), e.exit_code()), (Class::NotFound, 2));
    }

    fn libc_eio() -> i32 {
        5
    }
}
