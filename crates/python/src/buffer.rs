//! The one file with `unsafe`: Python objects' memory seen as Rust byte slices through the
//! buffer protocol (PEP 3118), so that a `bytearray`, a `memoryview`, an `mmap` or a numpy
//! array is read, decrypted or filled where it lies, with no copy across the boundary.
//!
//! Contract kept here so that nothing above needs `unsafe`:
//! - a view holds its buffer export (`PyUntypedBuffer`, released on drop) for as long as
//!   the slice it lends can live: the slice borrows the view, and while an export is held
//!   the exporter may not move or resize the memory (a `bytearray` refuses to resize);
//! - only C-contiguous buffers are taken, so `len_bytes` bytes from the start pointer are
//!   exactly the buffer's memory; a writable view is taken only of a buffer the exporter
//!   says is writable;
//! - bytes have no invalid values, so whatever the memory holds is a valid `[u8]`.
//!
//! The slices are handed to code that runs with the GIL released. Python code in another
//! thread could then write to the same object (as it could during `hashlib`'s or `zlib`'s
//! work on a buffer, which release the GIL the same way): the bytes it then reads or
//! leaves are unspecified, as there, and nothing here depends on their values.
#![allow(
    unsafe_code,
    reason = "the buffer protocol hands out a raw pointer: the one place it becomes a slice"
)]

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;

/// A Python object's memory, contiguous, for reading.
pub struct Bytes {
    buf: PyUntypedBuffer,
}

/// A Python object's memory, contiguous and writable, for reading and writing.
pub struct BytesMut {
    buf: PyUntypedBuffer,
}

fn export(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PyUntypedBuffer> {
    let buf = PyUntypedBuffer::get(obj).map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a bytes-like object (bytes, bytearray, memoryview, array), not {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })?;
    if !buf.is_c_contiguous() {
        return Err(PyBufferError::new_err(format!(
            "{what} must be a contiguous buffer"
        )));
    }
    Ok(buf)
}

impl Bytes {
    /// The memory of `obj` (`what` names it in errors).
    pub fn get(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Bytes> {
        Ok(Bytes {
            buf: export(obj, what)?,
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the export is held by `self` for the slice's lifetime; the buffer is
        // C-contiguous (checked in `export`), so `len_bytes` bytes from `buf_ptr` are its
        // memory, non-null as it is not empty; any byte value is a valid u8.
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr().cast::<u8>(), len) }
    }
}

impl BytesMut {
    /// The memory of `obj`, which must be writable (`what` names it in errors).
    pub fn get(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<BytesMut> {
        let buf = export(obj, what)?;
        if buf.readonly() {
            return Err(PyTypeError::new_err(format!(
                "{what} must be a writable buffer (bytearray, memoryview of one, numpy array), \
                 not a read-only one such as bytes"
            )));
        }
        Ok(BytesMut { buf })
    }

    /// The bytes, for writing.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &mut [];
        }
        // SAFETY: as in `Bytes::as_slice`; the exporter said the memory is writable, and
        // `&mut self` makes this the only slice lent from this view at a time.
        unsafe { std::slice::from_raw_parts_mut(self.buf.buf_ptr().cast::<u8>(), len) }
    }
}
