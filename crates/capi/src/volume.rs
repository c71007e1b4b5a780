//! The volume behind a `sectorcrypt_volume` handle, in safe Rust: opening by locator (a
//! path, an NBD URI, an `rbd:` spec) with [`sectorcrypt_image::open()`] (the command line's
//! stores, locks and use claims), plaintext
//! reads and writes at any offset and length, flush, and the facts `sectorcrypt_info`
//! reports. Every failure is a [`Failure`] with its own code; the checks a C caller most
//! often trips (a range past the end, a write to a read-only volume) are made here, before
//! the engine, so each has its code and a detail naming the numbers.

use crate::status::{Failure, Status};
use sectorcrypt_image::{open, OpenOptions, Opened};
use sectorcrypt_volume::engine::Volume;
use std::ffi::c_char;
use std::path::Path;

/// Bytes of `sectorcrypt_volume_info.format`, the terminating NUL included.
pub const FORMAT_LEN: usize = 16;
/// Bytes of `sectorcrypt_volume_info.cipher`, the terminating NUL included.
pub const CIPHER_LEN: usize = 64;

/// What `sectorcrypt_info` reports about an open volume.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// Plaintext bytes: what `sectorcrypt_pread` and `sectorcrypt_pwrite` reach.
    pub size: u64,
    /// Byte offset of the data area in the image file.
    pub data_offset: u64,
    /// Bytes per encryption sector (512, or larger where the volume was made so).
    pub sector_size: u32,
    /// The keyslot the passphrase opened.
    pub keyslot: u32,
    /// Whether the volume was opened read-only.
    pub read_only: bool,
    /// The format, NUL-terminated: `luks2`, `luks1` or `geli`.
    pub format: [c_char; FORMAT_LEN],
    /// The cipher string, NUL-terminated, e.g. `aes-xts-plain64`.
    pub cipher: [c_char; CIPHER_LEN],
}

/// An open volume.
#[derive(Debug)]
pub struct OpenVolume {
    opened: Opened,
}

impl OpenVolume {
    /// Opens the volume `locator` names with `passphrase` as `opts` says.
    pub fn open(
        locator: &Path,
        passphrase: &[u8],
        opts: &OpenOptions,
    ) -> Result<OpenVolume, Failure> {
        Ok(OpenVolume {
            opened: open(locator, passphrase, opts)?,
        })
    }

    fn volume(&self) -> &Volume {
        &self.opened.volume
    }

    /// Fills `buf` with the plaintext at `offset`.
    pub fn read(&self, buf: &mut [u8], offset: u64) -> Result<(), Failure> {
        self.check_range(buf.len(), offset)?;
        self.volume()
            .read_at(buf, offset)
            .map_err(|e| Failure::data_path(&doing("reading", buf.len(), offset), e))
    }

    /// Stores the plaintext `buf` at `offset`.
    pub fn write(&self, buf: &[u8], offset: u64) -> Result<(), Failure> {
        if self.volume().read_only() {
            return Err(Failure::new(
                Status::ERR_READ_ONLY,
                format!(
                    "{}: the volume is open read-only",
                    doing("writing", buf.len(), offset)
                ),
            ));
        }
        self.check_range(buf.len(), offset)?;
        self.volume()
            .write_at(buf, offset)
            .map_err(|e| Failure::data_path(&doing("writing", buf.len(), offset), e))
    }

    /// Makes every completed write durable.
    pub fn flush(&self) -> Result<(), Failure> {
        self.volume()
            .flush()
            .map_err(|e| Failure::data_path("flushing the volume", e))
    }

    /// Plaintext bytes.
    pub fn size(&self) -> u64 {
        self.volume().size()
    }

    /// Bytes per sector.
    pub fn sector_size(&self) -> u32 {
        self.volume().sector_size() as u32
    }

    /// Whether writes are refused.
    pub fn read_only(&self) -> bool {
        self.volume().read_only()
    }

    /// The facts `sectorcrypt_info` reports.
    pub fn info(&self) -> Info {
        let u = &self.opened.unlocked;
        Info {
            size: self.size(),
            data_offset: u.data_offset,
            sector_size: self.sector_size(),
            keyslot: u.keyslot as u32,
            read_only: self.read_only(),
            format: c_text(self.opened.format),
            cipher: c_text(&u.cipher),
        }
    }

    fn check_range(&self, len: usize, offset: u64) -> Result<(), Failure> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(Failure::new(
                Status::ERR_OUT_OF_RANGE,
                format!(
                    "a request of {len} bytes at offset {offset} goes beyond the end of the \
                     volume ({} bytes)",
                    self.size()
                ),
            )),
        }
    }
}

fn doing(what: &str, len: usize, offset: u64) -> String {
    format!("{what} {len} bytes at offset {offset}")
}

/// `s` as a NUL-terminated C array, cut to fit.
fn c_text<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out[..N - 1]
        .iter_mut()
        .zip(s.bytes().take_while(|&b| b != 0))
    {
        *o = b as c_char;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_text_is_cut_to_fit_and_always_terminated() {
        let t: [c_char; 4] = c_text("luks2");
        assert_eq!(t, [b'l' as c_char, b'u' as c_char, b'k' as c_char, 0]);
        let t: [c_char; 8] = c_text("ab\0cd");
        assert_eq!(&t[..3], &[b'a' as c_char, b'b' as c_char, 0]);
        assert!(t[3..].iter().all(|&c| c == 0));
    }
}
