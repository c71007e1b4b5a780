//! Binary header fields: big-endian integers, NUL-padded strings, alignment.

use crate::error::{Error, Result};

/// Big-endian field readers for the binary headers.
pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// See [`be16`].
pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// See [`be16`].
pub fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A NUL-padded string field (up to the first NUL); invalid UTF-8 is corrupt.
pub fn cstr(b: &[u8], what: &str) -> Result<String> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8(b[..end].to_vec())
        .map_err(|_| Error::corrupt(format!("{what} field is not valid text")))
}

/// Stores `s` NUL-padded into `field` (which must have room for a terminating NUL).
pub fn put_cstr(field: &mut [u8], s: &str, what: &str) -> Result<()> {
    if s.len() >= field.len() {
        return Err(Error::invalid(format!(
            "{what} is too long: at most {} bytes",
            field.len() - 1
        )));
    }
    field.fill(0);
    field[..s.len()].copy_from_slice(s.as_bytes());
    Ok(())
}

/// Rounds `x` up to a multiple of `to`.
pub fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}
