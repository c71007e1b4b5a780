//! A store over the fuzzer's bytes: zeros around them up to a claimed size, so a small
//! input stands for the start of a large image (or, [`MemStore::ending_with`], its end).
//! Read-only unless made writable (for `repair`): a write to a read-only store is a
//! broken rule.

use sectorcrypt_volume::Store;
use std::io;
use std::sync::Mutex;

/// The bytes of an image's start, and the image's size.
#[derive(Debug)]
pub(crate) struct MemStore {
    data: Mutex<Vec<u8>>,
    /// Where `data` starts in the image (0 but for [`MemStore::ending_with`]).
    base: u64,
    size: u64,
    writable: bool,
    /// Bytes written so far.
    written: Mutex<u64>,
}

impl MemStore {
    /// A read-only image of `size` bytes (at least `data.len()`) that starts with `data`.
    pub(crate) fn new(data: Vec<u8>, size: u64) -> MemStore {
        let size = size.max(data.len() as u64);
        MemStore {
            data: Mutex::new(data),
            base: 0,
            size,
            writable: false,
            written: Mutex::new(0),
        }
    }

    /// A read-only image of `size` bytes (at least `data.len()`) that ends with `data`.
    pub(crate) fn ending_with(data: Vec<u8>, size: u64) -> MemStore {
        let size = size.max(data.len() as u64);
        MemStore {
            base: size - data.len() as u64,
            ..MemStore::new(data, size)
        }
    }

    /// The same image, writable within its size.
    pub(crate) fn writable(data: Vec<u8>, size: u64) -> MemStore {
        MemStore {
            writable: true,
            ..MemStore::new(data, size)
        }
    }

    /// [`MemStore::ending_with`], writable where `data` is (a write elsewhere is an I/O
    /// error: the image around the input is not kept).
    pub(crate) fn writable_ending_with(data: Vec<u8>, size: u64) -> MemStore {
        MemStore {
            writable: true,
            ..MemStore::ending_with(data, size)
        }
    }

    /// How many bytes were written.
    pub(crate) fn written(&self) -> u64 {
        *self.written.lock().unwrap()
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
        let data = self.data.lock().unwrap();
        // The overlap of [offset, offset + buf.len()) with [base, base + data.len()).
        let (start, end) = (offset, offset + buf.len() as u64);
        let (from, to) = (start.max(self.base), end.min(self.base + data.len() as u64));
        if from < to {
            let (b, d) = ((from - start) as usize, (from - self.base) as usize);
            let n = (to - from) as usize;
            buf[b..b + n].copy_from_slice(&data[d..d + n]);
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        assert!(
            self.writable,
            "a read-only path wrote {} bytes at {offset}",
            buf.len()
        );
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.size) {
            return Err(io::Error::other("a write past the end of the image"));
        }
        let mut data = self.data.lock().unwrap();
        // An image that ends with the input is written only where the input is.
        if self.base > 0
            && (offset < self.base || offset - self.base + buf.len() as u64 > data.len() as u64)
        {
            return Err(io::Error::other("a write outside the fuzz input"));
        }
        let offset = offset - self.base;
        let (at, end) = (offset as usize, offset as usize + buf.len());
        if data.len() < end {
            data.resize(end, 0);
        }
        data[at..end].copy_from_slice(buf);
        *self.written.lock().unwrap() += buf.len() as u64;
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}
