//! The status codes every call returns, their fixed messages, and [`Failure`]: a code with
//! the detail of one failure (what failed, on which file, at which offset), built from the
//! image library's classified errors and the crypto crate's. Details come from those errors' messages, which never
//! hold a passphrase or key bytes, and from this crate's own words; nothing here formats a
//! secret.

use sectorcrypt_image::{Class, Error as ImageError};
use std::ffi::CStr;
use std::io;

/// What a call did: `SECTORCRYPT_OK` (0), or why it failed. `sectorcrypt_strerror` gives a
/// fixed message for each code; `sectorcrypt_last_error` the detail of the last failure on
/// the calling thread. New codes may be added at the end; treat an unknown code as an
/// error.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    non_camel_case_types,
    reason = "the C header's names, which cbindgen prefixes with SECTORCRYPT_"
)]
pub enum Status {
    /// Success.
    OK = 0,
    /// A pointer argument that must not be NULL is NULL.
    ERR_NULL = 1,
    /// An argument the call cannot take: unknown flag bits, a length larger than the
    /// address space, a sector size the cipher does not accept, a misaligned output pointer.
    ERR_INVALID_ARGUMENT = 2,
    /// A file does not exist.
    ERR_NOT_FOUND = 3,
    /// Reading, writing or syncing a file failed (the detail names the file and the
    /// operating system's error).
    ERR_IO = 4,
    /// The file holds no volume of a known format (LUKS2, LUKS1, GELI).
    ERR_NO_HEADER = 5,
    /// The volume's header is damaged or cut short.
    ERR_CORRUPT_HEADER = 6,
    /// No keyslot opens with this passphrase.
    ERR_WRONG_PASSPHRASE = 7,
    /// A valid volume that uses something sectorcrypt does not implement.
    ERR_UNSUPPORTED = 8,
    /// The volume is in use by another process that is erasing it or replacing its
    /// header (`sectorcrypt erase`, `header restore`, `format`).
    ERR_IN_USE = 9,
    /// A write to a volume opened read-only.
    ERR_READ_ONLY = 10,
    /// A request that goes beyond the end of the volume.
    ERR_OUT_OF_RANGE = 11,
    /// A cipher string that is not known (see `sectorcrypt_cipher_new`).
    ERR_UNKNOWN_CIPHER = 12,
    /// A key the cipher does not accept: a wrong length, or XTS with two equal halves.
    ERR_BAD_KEY = 13,
    /// A buffer that is not a whole number of sectors.
    ERR_LENGTH = 14,
    /// A sector of an authenticated volume (GELI `-a`) whose tag does not verify; nothing
    /// of it was returned.
    ERR_AUTHENTICATION = 15,
    /// The volume has no keyslot that can be used (it was erased).
    ERR_KEYSLOT = 16,
    /// A handle that was closed or freed, or that this library never returned.
    ERR_BAD_HANDLE = 17,
    /// A bug in sectorcrypt (a panic, caught before it reached the caller).
    ERR_INTERNAL = 18,
    /// A remote store (an NBD export, an RBD image) that cannot be reached or refuses the
    /// connection.
    ERR_UNREACHABLE = 19,
}

/// Every code, in order.
const ALL: [Status; 20] = [
    Status::OK,
    Status::ERR_NULL,
    Status::ERR_INVALID_ARGUMENT,
    Status::ERR_NOT_FOUND,
    Status::ERR_IO,
    Status::ERR_NO_HEADER,
    Status::ERR_CORRUPT_HEADER,
    Status::ERR_WRONG_PASSPHRASE,
    Status::ERR_UNSUPPORTED,
    Status::ERR_IN_USE,
    Status::ERR_READ_ONLY,
    Status::ERR_OUT_OF_RANGE,
    Status::ERR_UNKNOWN_CIPHER,
    Status::ERR_BAD_KEY,
    Status::ERR_LENGTH,
    Status::ERR_AUTHENTICATION,
    Status::ERR_KEYSLOT,
    Status::ERR_BAD_HANDLE,
    Status::ERR_INTERNAL,
    Status::ERR_UNREACHABLE,
];

impl Status {
    /// The code with this number, if there is one.
    pub fn from_code(code: i64) -> Option<Status> {
        ALL.into_iter().find(|s| *s as i64 == code)
    }

    /// The fixed message of the code (static, NUL-terminated).
    pub fn message(self) -> &'static CStr {
        match self {
            Status::OK => c"success",
            Status::ERR_NULL => c"a required pointer argument is NULL",
            Status::ERR_INVALID_ARGUMENT => c"invalid argument",
            Status::ERR_NOT_FOUND => c"no such file",
            Status::ERR_IO => c"input/output error",
            Status::ERR_NO_HEADER => c"not a volume of a known format",
            Status::ERR_CORRUPT_HEADER => c"corrupt or truncated volume header",
            Status::ERR_WRONG_PASSPHRASE => c"no keyslot opens with this passphrase",
            Status::ERR_UNSUPPORTED => c"unsupported volume",
            Status::ERR_IN_USE => c"the volume is in use by another process",
            Status::ERR_READ_ONLY => c"the volume is open read-only",
            Status::ERR_OUT_OF_RANGE => c"request beyond the end of the volume",
            Status::ERR_UNKNOWN_CIPHER => c"unknown cipher",
            Status::ERR_BAD_KEY => c"invalid key",
            Status::ERR_LENGTH => c"buffer is not a whole number of sectors",
            Status::ERR_AUTHENTICATION => c"authentication failed",
            Status::ERR_KEYSLOT => c"no usable keyslot",
            Status::ERR_BAD_HANDLE => c"invalid or closed handle",
            Status::ERR_INTERNAL => c"internal error in sectorcrypt",
            Status::ERR_UNREACHABLE => c"the remote store cannot be reached",
        }
    }
}

/// The message for a number that is no code.
pub const UNKNOWN: &CStr = c"unknown sectorcrypt status code";

/// A failed call: its code and what exactly failed.
#[derive(Debug)]
pub struct Failure {
    /// The code returned to the caller.
    pub status: Status,
    /// The detail kept for `sectorcrypt_last_error`.
    pub detail: String,
}

impl Failure {
    /// A failure with this code and detail.
    pub fn new(status: Status, detail: impl Into<String>) -> Failure {
        Failure {
            status,
            detail: detail.into(),
        }
    }

    /// A NULL pointer given for the argument `what`.
    pub fn null(what: &str) -> Failure {
        Failure::new(Status::ERR_NULL, format!("{what} is NULL"))
    }

    /// [`Status::ERR_INVALID_ARGUMENT`].
    pub fn invalid(detail: impl Into<String>) -> Failure {
        Failure::new(Status::ERR_INVALID_ARGUMENT, detail)
    }

    /// An I/O error of the engine's data path, `doing` what (e.g. `reading 4096 bytes at
    /// offset 0`).
    pub fn data_path(doing: &str, e: io::Error) -> Failure {
        let status = match e.kind() {
            io::ErrorKind::InvalidData => Status::ERR_AUTHENTICATION,
            io::ErrorKind::NotFound => Status::ERR_NOT_FOUND,
            _ => Status::ERR_IO,
        };
        Failure::new(status, format!("{doing}: {e}"))
    }
}

/// The image library's classes, each to its code (a file that exists but cannot be opened
/// is `ERR_IO`, as before remote stores were known).
impl From<ImageError> for Failure {
    fn from(e: ImageError) -> Failure {
        let status = match e.class() {
            Class::InvalidArgument => Status::ERR_INVALID_ARGUMENT,
            Class::NotFound => Status::ERR_NOT_FOUND,
            Class::CannotOpen | Class::Io => Status::ERR_IO,
            Class::Unreachable => Status::ERR_UNREACHABLE,
            Class::NoHeader => Status::ERR_NO_HEADER,
            Class::CorruptHeader => Status::ERR_CORRUPT_HEADER,
            Class::WrongPassphrase => Status::ERR_WRONG_PASSPHRASE,
            Class::Unsupported => Status::ERR_UNSUPPORTED,
            Class::InUse => Status::ERR_IN_USE,
            Class::Keyslot => Status::ERR_KEYSLOT,
            Class::Authentication => Status::ERR_AUTHENTICATION,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<sectorcrypt_crypto::Error> for Failure {
    fn from(e: sectorcrypt_crypto::Error) -> Failure {
        use sectorcrypt_crypto::Error as E;
        let status = match &e {
            E::Key(_) => Status::ERR_BAD_KEY,
            E::UnknownName { .. } => Status::ERR_UNKNOWN_CIPHER,
            E::Input(_) => Status::ERR_INVALID_ARGUMENT,
            E::Backend(_) => Status::ERR_UNSUPPORTED,
            E::AuthenticationFailed => Status::ERR_AUTHENTICATION,
            _ => Status::ERR_INTERNAL,
        };
        Failure::new(status, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_their_position_and_each_has_its_own_message() {
        for (i, s) in ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i);
            assert_eq!(Status::from_code(i as i64), Some(s));
        }
        assert_eq!(Status::from_code(ALL.len() as i64), None);
        assert_eq!(Status::from_code(-1), None);
        let mut messages: Vec<_> = ALL.iter().map(|s| s.message()).collect();
        messages.sort();
        messages.dedup();
        assert_eq!(messages.len(), ALL.len());
    }
}
