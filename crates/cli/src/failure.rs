//! The two ways a command fails, and their exit codes.

use std::fmt::Display;

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Bad usage or bad input (exit 2): nothing was written.
    Usage(String),
    /// A runtime failure such as an I/O error (exit 1).
    Runtime(String),
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
            Failure::Usage(m) | Failure::Runtime(m) => m,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }
}

/// Crypto errors are about the input (key, lengths, cipher names): usage failures.
impl From<sectorcrypt_crypto::Error> for Failure {
    fn from(e: sectorcrypt_crypto::Error) -> Failure {
        Failure::usage(e)
    }
}
