//! Positional I/O on the image with the errors this layer reports: a short read is a
//! truncated image, every metadata write is followed by `fdatasync` when asked.

use super::error::{Error, Result};
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;

/// Reads exactly `buf.len()` bytes at `offset`; running into the end of the image is
/// [`Error::Truncated`], naming `what`.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64, what: &str) -> Result<()> {
    match file.read_exact_at(buf, offset) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::Truncated(format!(
            "the image ends before the {what} (bytes {offset}..{})",
            offset + buf.len() as u64
        ))),
        Err(e) => Err(Error::Io(e)),
    }
}

/// Writes all of `buf` at `offset`.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> Result<()> {
    file.write_all_at(buf, offset).map_err(Error::Io)
}

/// `fdatasync`.
pub fn sync(file: &File) -> Result<()> {
    file.sync_data().map_err(Error::Io)
}

/// The size of a file or block device (seek to the end: block devices report 0 in their
/// metadata).
pub fn image_size(file: &File) -> Result<u64> {
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    let mut f: &File = file;
    Ok(f.seek(SeekFrom::End(0))?)
}

/// Overwrites `len` bytes at `offset` with random bytes (keyslot areas being destroyed).
pub fn wipe(file: &File, offset: u64, len: u64, random: bool) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        if random {
            super::random(&mut buf[..n])?;
        }
        write_all_at(file, &buf[..n], offset + done)?;
        done += n as u64;
    }
    Ok(())
}

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
        .map_err(|_| Error::Corrupt(format!("{what} field is not valid text")))
}

/// Stores `s` NUL-padded into `field` (which must have room for a terminating NUL).
pub fn put_cstr(field: &mut [u8], s: &str, what: &str) -> Result<()> {
    if s.len() >= field.len() {
        return Err(Error::Invalid(format!(
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
