//! How a command fails, and the exit code of each failure: 0 success, 1 a runtime failure
//! (an I/O error on an image that opened, a closed output), 2 bad usage or bad input (a
//! missing or unreadable image, a file that is no volume, a damaged or cut-short header,
//! options the volume cannot take; nothing was written), 3 a wrong passphrase. Volume
//! errors are mapped here and nowhere else.

use sectorcrypt_volume::Error as VolumeError;
use std::fmt::Display;
use std::path::Path;

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Bad usage or bad input (exit 2): nothing was written.
    Usage(String),
    /// A runtime failure such as an I/O error (exit 1).
    Runtime(String),
    /// No keyslot opens with the passphrase given (exit 3).
    WrongPassphrase(String),
}

impl Failure {
    pub fn usage(msg: impl Display) -> Failure {
        Failure::Usage(msg.to_string())
    }

    pub fn runtime(msg: impl Display) -> Failure {
        Failure::Runtime(msg.to_string())
    }

    /// An image or input file that cannot be opened (missing, unreadable, a directory):
    /// bad input.
    pub fn cannot_open(path: &Path, e: impl Display) -> Failure {
        Failure::usage(format!("{}: {e}", path.display()))
    }

    /// A command run as a child process (`mount` in the background) exited with `code`:
    /// the same failure here.
    pub fn from_exit_code(code: Option<i32>, msg: impl Display) -> Failure {
        match code {
            Some(2) => Failure::usage(msg),
            Some(3) => Failure::WrongPassphrase(msg.to_string()),
            _ => Failure::runtime(msg),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Usage(m) | Failure::Runtime(m) | Failure::WrongPassphrase(m) => m,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) => 1,
            Failure::WrongPassphrase(_) => 3,
        }
    }
}

/// Crypto errors are about the input (key, lengths, cipher names): usage failures.
impl From<sectorcrypt_crypto::Error> for Failure {
    fn from(e: sectorcrypt_crypto::Error) -> Failure {
        Failure::usage(e)
    }
}

/// The library's classified errors: the exit code of each class
/// (`sectorcrypt_image::Class::exit_code`).
impl From<sectorcrypt_image::Error> for Failure {
    fn from(e: sectorcrypt_image::Error) -> Failure {
        match e.exit_code() {
            3 => Failure::WrongPassphrase(e.to_string()),
            1 => Failure::runtime(e),
            _ => Failure::usage(e),
        }
    }
}

/// Volume errors: a wrong passphrase (exit 3), I/O on the store, a sector whose tag fails
/// or a volume in use by another process (exit 1: the same command succeeds later),
/// everything else is about the volume or the arguments (exit 2).
impl From<VolumeError> for Failure {
    fn from(e: VolumeError) -> Failure {
        match e {
            VolumeError::WrongPassphrase => Failure::WrongPassphrase(e.to_string()),
            VolumeError::Io { .. } | VolumeError::Authentication(_) | VolumeError::InUse(_) => {
                Failure::runtime(e)
            }
            _ => Failure::usage(e),
        }
    }
}
