//! [`RbdStore`]: an RBD image as a [`Store`]. Every request is one librbd aio request
//! (librbd splits it over the image's objects and sends those in parallel), waited for on
//! the calling thread; the engine's worker threads and the NBD server's connections each
//! have their own requests in flight at once, none serialised behind a lock here.
//!
//! - A read that comes back short (past the end of the image) is `UnexpectedEof`, never
//!   decrypted as if it were whole; reads beyond the size are refused before being sent.
//! - A write can also be started ([`Store::start_write`]): librbd calls back when it is
//!   over, and the buffer comes back then, so that no thread waits through it (the NBD
//!   server's reader starts them and its replier answers).
//! - Writes to a snapshot, or to an image opened read-only, fail with `PermissionDenied`.
//! - `sync` is `rbd_aio_flush`: it completes once every write acknowledged before it is
//!   stable on the OSDs. librbd's cache is turned off (`rbd_cache=false`, as qemu does for
//!   `cache=none`; librbd's own default is on), so writes are stable when acknowledged
//!   anyway; the spec's `:rbd_cache=true` turns the cache back on.
//! - `discard` is `rbd_aio_discard`: the range then reads as zeros.

use crate::ffi::{Image, Target};
use crate::spec::Spec;
use sectorcrypt_volume::{Store, WriteDone};
use std::io;
use std::ops::Range;

/// An open RBD image.
#[derive(Debug)]
pub struct RbdStore {
    image: Image,
    name: String,
    read_only: bool,
    object_size: u64,
}

impl RbdStore {
    /// Connects and opens the image `spec` names; for writing too when `write`. A snapshot
    /// cannot be opened for writing.
    pub fn open(spec: &Spec, write: bool) -> io::Result<RbdStore> {
        let name = spec.to_string();
        if write && spec.snap.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{name}: a snapshot is read-only"),
            ));
        }
        let target = Target {
            user: spec.user.as_deref(),
            conf: spec.conf.as_deref(),
            options: &spec.options,
            pool: &spec.pool,
            namespace: spec.namespace.as_deref(),
            image: &spec.image,
            snap: spec.snap.as_deref(),
            read_only: !write,
        };
        let image =
            Image::open(&target).map_err(|e| io::Error::new(e.kind(), format!("{name}: {e}")))?;
        let object_size = image.object_size()?;
        Ok(RbdStore {
            image,
            name,
            read_only: !write,
            object_size,
        })
    }

    /// Parses `spec` (`rbd:pool/image...`) and opens it; a bad spec is `InvalidInput`.
    pub fn open_spec(spec: &str, write: bool) -> io::Result<RbdStore> {
        let spec = Spec::parse(spec)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        RbdStore::open(&spec, write)
    }

    /// The value of the librados/librbd option `key` for this image's client (e.g.
    /// `rbd_cache`), as the spec's options and the conf file left it.
    pub fn option(&self, key: &str) -> io::Result<String> {
        self.image.conf_get(key)
    }

    fn refuse_write(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is open read-only", self.name),
            ));
        }
        Ok(())
    }
}

impl Store for RbdStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> io::Result<u64> {
        self.image.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        let size = self.image.size()?;
        if end.is_none_or(|e| e > size) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: reading {} bytes at {offset}, past the end ({size} bytes)",
                    self.name,
                    buf.len()
                ),
            ));
        }
        let n = self.image.read(buf, offset)?;
        if n != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: a short read, {n} of {} bytes at {offset}",
                    self.name,
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.refuse_write()?;
        self.image.write(buf, offset)
    }

    fn starts_writes(&self) -> bool {
        !self.read_only
    }

    fn start_write(&self, buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        match self.refuse_write() {
            Ok(()) => self.image.start_write(buf, range, offset, done),
            Err(e) => done(buf, Err(e)),
        }
    }

    fn sync(&self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.image.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.refuse_write()?;
        self.image.discard(offset, len)
    }

    fn object_size(&self) -> Option<u64> {
        Some(self.object_size)
    }
}
