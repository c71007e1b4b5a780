//! The two ways a command fails, and their exit codes.

use std::fmt::Display;

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

/// LUKS errors: a wrong passphrase (exit 3), I/O (exit 1), everything else is about the
/// volume or the arguments (exit 2).
impl From<sectorcrypt_volume::luks::Error> for Failure {
    fn from(e: sectorcrypt_volume::luks::Error) -> Failure {
        use sectorcrypt_volume::luks::Error as E;
        match e {
            E::WrongPassphrase => Failure::WrongPassphrase(e.to_string()),
            E::Io(_) => Failure::runtime(e),
            _ => Failure::usage(e),
        }
    }
}
