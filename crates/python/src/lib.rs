//! The native half of the `sectorcrypt` Python package (`sectorcrypt._native`, built by
//! maturin; the Python half, python/sectorcrypt/, makes the file object and re-exports):
//!
//! - `volume`: `open` and the open volume's positioned reads and writes, on the
//!   volume library's `open` and engine;
//! - `cipher`: `SectorCipher`, dm-crypt's sectors in place over any writable buffer;
//! - `format`: new LUKS2, LUKS1, GELI and VeraCrypt volumes (with a hidden volume);
//! - `errors`: the exceptions, and the library's errors mapped onto them;
//! - `secrets`: passphrases and keys copied into secret memory;
//! - `buffer`: the buffer protocol, the crate's one file with `unsafe`.
//!
//! Work (key derivation, I/O, encryption) runs with the GIL released.
#![deny(unsafe_code)]

mod buffer;
mod cipher;
mod errors;
mod format;
mod secrets;
mod volume;

use pyo3::prelude::*;

/// The module `sectorcrypt._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<volume::NativeVolume>()?;
    m.add_class::<cipher::PySectorCipher>()?;
    m.add_function(wrap_pyfunction!(volume::open, m)?)?;
    m.add_function(wrap_pyfunction!(format::format, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
