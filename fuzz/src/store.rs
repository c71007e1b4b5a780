//! A store over the fuzzer's bytes: zeros after them up to a claimed size, so a
//! small input stands for the start of a large image. Nothing may write to it.

use sectorcrypt_volume::Store;
use std::io;

/// The bytes of an image's start, and the image's size.
#[derive(Debug)]
pub(crate) struct MemStore {
    data: Vec<u8>,
    size: u64,
}

impl MemStore {
    /// An image of `size` bytes (at least `data.len()`) that starts with `data`.
    pub(crate) fn new(data: Vec<u8>, size: u64) -> MemStore {
        let size = size.max(data.len() as u64);
        MemStore { data, size }
    }
}

impl Store for MemStore {
    fn name(&self) -> &str {
        "fuzz input"
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.size)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.size) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.fill(0);
        let len = self.data.len() as u64;
        if offset < len {
            let n = (len - offset).min(buf.len() as u64) as usize;
            let at = offset as usize;
            buf[..n].copy_from_slice(&self.data[at..at + n]);
        }
        Ok(())
    }

    /// Reading a header and unlocking never write: a write is a broken rule.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        panic!("a read-only path wrote {} bytes at {offset}", buf.len())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}
