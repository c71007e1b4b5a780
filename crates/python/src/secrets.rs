//! Passphrases and keys from Python: copied at once into secret memory (`SecretBytes`:
//! locked, out of core dumps, wiped when dropped), never kept in a Rust `String` or `Vec`,
//! never part of a message. The Python objects they came from are the caller's.

use crate::buffer::Bytes;
use crate::errors::{os_error, InvalidArgument};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use sectorcrypt_crypto::secret::SecretBytes;
use std::io::Read;
use std::path::Path;

/// cryptsetup's limit for a key file (and so for a passphrase given here).
const MAX_KEY_FILE: usize = 8 << 20;

/// The bytes of `obj`: a `str` (as UTF-8) or any bytes-like object.
pub fn from_object(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<SecretBytes> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(SecretBytes::from_slice(s.to_str()?.as_bytes()));
    }
    let bytes = Bytes::get(obj, what)
        .map_err(|_| PyTypeError::new_err(format!("{what} must be str or bytes")))?;
    Ok(SecretBytes::from_slice(bytes.as_slice()))
}

/// The whole content of the file at `path` (cryptsetup's `--key-file`: every byte, a
/// newline included); `what` names it in errors. Empty files and files over 8 MiB are
/// refused.
pub fn from_file(path: &Path, what: &str) -> PyResult<SecretBytes> {
    let failed = |e: std::io::Error| os_error(&e, format!("{what} {}: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(failed)?;
    let mut s = SecretBytes::with_capacity(4096);
    loop {
        if s.spare_capacity_mut().is_empty() {
            if s.len() > MAX_KEY_FILE {
                return Err(InvalidArgument::new_err(format!(
                    "{what} {} is larger than 8 MiB",
                    path.display()
                )));
            }
            s.reserve(s.capacity());
        }
        let n = match file.read(s.spare_capacity_mut()) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed(e)),
        };
        s.set_len(s.len() + n);
    }
    if s.len() > MAX_KEY_FILE {
        return Err(InvalidArgument::new_err(format!(
            "{what} {} is larger than 8 MiB",
            path.display()
        )));
    }
    if s.is_empty() {
        return Err(InvalidArgument::new_err(format!(
            "{what} {} is empty",
            path.display()
        )));
    }
    Ok(s)
}

/// The passphrase of a call taking `passphrase=` or `key_file=` (exactly one of them).
pub fn passphrase(
    passphrase: Option<&Bound<'_, PyAny>>,
    key_file: Option<&Path>,
) -> PyResult<SecretBytes> {
    match (passphrase, key_file) {
        (Some(p), None) => from_object(p, "passphrase"),
        (None, Some(f)) => from_file(f, "key file"),
        (Some(_), Some(_)) => Err(InvalidArgument::new_err(
            "give passphrase= or key_file=, not both",
        )),
        (None, None) => Err(InvalidArgument::new_err(
            "a passphrase is needed: give passphrase= or key_file=",
        )),
    }
}
