//! The store of an image as every front end holds it: a local file ([`FileStore`], with
//! the advisory locks of `sectorcrypt_volume::lock`) or a remote store (an NBD export, an
//! RBD image), behind one type so that the image opener treats both alike; and
//! [`Counted`], a store whose writes are counted for a progress display.
//!
//! **Locks on a remote store.** There is no `flock` on an NBD export and no lock in the
//! NBD protocol, so the header lock and the use claim of a remote store are held inside
//! this process only (keyed by the export's canonical URI): they order this process's
//! own header updates and keep its own commands from replacing a header under itself, but
//! nothing guards a header update against another process or another machine using the
//! same export. Run one header-changing command (or program) at a time per export (the same rule as
//! for any shared block storage without a cluster lock manager). The writer claim has the
//! same semantics here as on a file (one writer; readers refused beside it unless
//! `shared`), within this process only.

use sectorcrypt_volume::lock::{Access, HeaderLock, Mode, UseClaim};
use sectorcrypt_volume::{FileStore, Store};
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::{Condvar, Mutex, MutexGuard};

/// An image's store.
#[derive(Debug)]
pub enum ImageStore {
    /// A local file or block device.
    File(FileStore),
    /// A remote store; `key` names the export for the process-local locks.
    Remote {
        /// The store.
        store: Box<dyn Store>,
        /// A canonical name of what it reaches.
        key: String,
    },
}

/// A held lock or claim; released when dropped.
#[derive(Debug)]
pub enum Guard {
    /// A header lock on a file.
    Header {
        /// Released when dropped.
        _held: HeaderLock,
    },
    /// A use claim on a file.
    Use {
        /// Released when dropped.
        _held: UseClaim,
    },
    /// A lock held in this process (a remote store).
    Local {
        /// Released when dropped.
        _held: LocalGuard,
    },
}

impl ImageStore {
    /// A remote store, locked by `key` within this process.
    pub fn remote(store: Box<dyn Store>, key: String) -> ImageStore {
        ImageStore::Remote { store, key }
    }

    /// The local file, when it is one.
    pub fn as_file(&self) -> Option<&FileStore> {
        match self {
            ImageStore::File(f) => Some(f),
            ImageStore::Remote { .. } => None,
        }
    }

    fn inner(&self) -> &dyn Store {
        match self {
            ImageStore::File(f) => f,
            ImageStore::Remote { store, .. } => store.as_ref(),
        }
    }

    /// Takes the header lock (see the module doc for remote stores): waits when `wait`,
    /// otherwise `None` when a conflicting lock is held.
    pub fn lock_header(&self, mode: Mode, wait: bool) -> io::Result<Option<Guard>> {
        match self {
            ImageStore::File(f) => Ok(f
                .lock_header(mode, wait)?
                .map(|l| Guard::Header { _held: l })),
            ImageStore::Remote { key, .. } => Ok(local(Kind::Header, key, mode, wait)),
        }
    }

    /// Claims the use of the store (see the module doc for remote stores).
    pub fn claim_use(&self, mode: Mode, wait: bool) -> io::Result<Option<Guard>> {
        match self {
            ImageStore::File(f) => Ok(f.claim_use(mode, wait)?.map(|c| Guard::Use { _held: c })),
            ImageStore::Remote { key, .. } => Ok(local(Kind::Use, key, mode, wait)),
        }
    }

    /// Takes the writer claim `access` needs (see `sectorcrypt_volume::lock`; for a
    /// remote store, within this process), never waiting: `Err` with the refusal's
    /// message, naming the holder, when a conflicting claim is held.
    pub fn claim_access(&self, access: Access) -> io::Result<Result<Option<Guard>, String>> {
        match self {
            ImageStore::File(f) => Ok(f
                .claim_access(access)?
                .map(|c| c.map(|c| Guard::Use { _held: c }))),
            ImageStore::Remote { key, .. } => {
                let mode = match access {
                    Access::Writer => Mode::Exclusive,
                    Access::Reader => Mode::Shared,
                    Access::SharedReader => return Ok(Ok(None)),
                };
                Ok(match local(Kind::Writer, key, mode, false) {
                    Some(g) => Ok(Some(g)),
                    None if access == Access::Writer => Err(format!(
                        "{key} is already in use by this process: a second writer would \
                         lose writes; use one open of it"
                    )),
                    None => Err(format!(
                        "{key} is open for writing by this process: a read-only open \
                         beside a writer sees the data change under it; accept that with \
                         --shared"
                    )),
                })
            }
        }
    }

    /// Whether two stores are one (a `--header` naming the image itself).
    pub fn same_as(&self, other: &ImageStore) -> bool {
        match (self, other) {
            (ImageStore::File(a), ImageStore::File(b)) => {
                match (a.file().metadata(), b.file().metadata()) {
                    (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
                    _ => false,
                }
            }
            (ImageStore::Remote { key: a, .. }, ImageStore::Remote { key: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl Store for ImageStore {
    fn name(&self) -> &str {
        self.inner().name()
    }
    fn size(&self) -> io::Result<u64> {
        self.inner().size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner().read_at(buf, offset)
    }
    fn read_owned(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        self.inner().read_owned(buf, range, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner().write_at(buf, offset)
    }
    fn starts_writes(&self) -> bool {
        self.inner().starts_writes()
    }
    fn quick_reads(&self) -> bool {
        self.inner().quick_reads()
    }
    fn start_write(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
        done: sectorcrypt_volume::WriteDone,
    ) {
        self.inner().start_write(buf, range, offset, done)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner().sync()
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner().write_at_fua(buf, offset)
    }
    fn can_fua(&self) -> bool {
        self.inner().can_fua()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner().discard(offset, len)
    }
    fn object_size(&self) -> Option<u64> {
        self.inner().object_size()
    }
}

/// A store whose writes are counted: each write's length, once it succeeded, goes to
/// `done` (progress of a command that writes a header or its keyslot area: `erase`).
pub struct Counted<'a> {
    inner: &'a dyn Store,
    done: &'a (dyn Fn(u64) + Sync),
}

impl<'a> Counted<'a> {
    /// `inner`, its written bytes counted by `done`.
    pub fn new(inner: &'a dyn Store, done: &'a (dyn Fn(u64) + Sync)) -> Counted<'a> {
        Counted { inner, done }
    }
}

impl std::fmt::Debug for Counted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Store for Counted<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)?;
        (self.done)(buf.len() as u64);
        Ok(())
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at_fua(buf, offset)?;
        (self.done)(buf.len() as u64);
        Ok(())
    }
    fn can_fua(&self) -> bool {
        self.inner.can_fua()
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.discard(offset, len)
    }
    fn object_size(&self) -> Option<u64> {
        self.inner.object_size()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Header,
    Use,
    Writer,
}

/// Holders of one process-local lock: shared holders, or one exclusive.
#[derive(Debug, Default, Clone, Copy)]
struct Holders {
    shared: usize,
    exclusive: bool,
}

static LOCAL: Mutex<Option<HashMap<(Kind, String), Holders>>> = Mutex::new(None);
static RELEASED: Condvar = Condvar::new();

fn table() -> MutexGuard<'static, Option<HashMap<(Kind, String), Holders>>> {
    LOCAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A process-local lock, released when dropped.
#[derive(Debug)]
pub struct LocalGuard {
    at: (Kind, String),
    mode: Mode,
}

impl Drop for LocalGuard {
    fn drop(&mut self) {
        let mut t = table();
        if let Some(h) = t.get_or_insert_with(HashMap::new).get_mut(&self.at) {
            match self.mode {
                Mode::Shared => h.shared -= 1,
                Mode::Exclusive => h.exclusive = false,
            }
        }
        RELEASED.notify_all();
    }
}

fn local(kind: Kind, key: &str, mode: Mode, wait: bool) -> Option<Guard> {
    let at = (kind, key.to_string());
    let mut t = table();
    loop {
        let h = t
            .get_or_insert_with(HashMap::new)
            .entry(at.clone())
            .or_default();
        let free = match mode {
            Mode::Shared => !h.exclusive,
            Mode::Exclusive => !h.exclusive && h.shared == 0,
        };
        if free {
            match mode {
                Mode::Shared => h.shared += 1,
                Mode::Exclusive => h.exclusive = true,
            }
            return Some(Guard::Local {
                _held: LocalGuard { at, mode },
            });
        }
        if !wait {
            return None;
        }
        t = RELEASED.wait(t).unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_local_locks_exclude_as_file_locks_do() {
        let a = local(Kind::Header, "nbd://h:1/x", Mode::Exclusive, false).unwrap();
        assert!(local(Kind::Header, "nbd://h:1/x", Mode::Shared, false).is_none());
        assert!(local(Kind::Use, "nbd://h:1/x", Mode::Exclusive, false).is_some());
        assert!(local(Kind::Header, "nbd://h:1/y", Mode::Exclusive, false).is_some());
        drop(a);
        let s1 = local(Kind::Header, "nbd://h:1/x", Mode::Shared, false).unwrap();
        let s2 = local(Kind::Header, "nbd://h:1/x", Mode::Shared, false).unwrap();
        assert!(local(Kind::Header, "nbd://h:1/x", Mode::Exclusive, false).is_none());
        drop((s1, s2));
        assert!(local(Kind::Header, "nbd://h:1/x", Mode::Exclusive, true).is_some());
    }

    /// A store of 4 MiB objects that takes FUA writes, with nothing in it.
    #[derive(Debug)]
    struct Objects;

    impl Store for Objects {
        fn name(&self) -> &str {
            "objects"
        }
        fn size(&self) -> io::Result<u64> {
            Ok(0)
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            Ok(())
        }
        fn can_fua(&self) -> bool {
            true
        }
        fn object_size(&self) -> Option<u64> {
            Some(4 << 20)
        }
    }

    #[test]
    fn counted_writes_are_the_bytes_written() {
        let n = std::sync::atomic::AtomicU64::new(0);
        let add = |k: u64| {
            n.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
        };
        let c = Counted::new(&Objects, &add);
        c.write_at(&[0; 512], 0).unwrap();
        c.write_at_fua(&[0; 100], 512).unwrap();
        assert_eq!(n.load(std::sync::atomic::Ordering::Relaxed), 612);
        assert!(c.can_fua() && c.object_size() == Some(4 << 20));
    }

    #[test]
    fn a_remote_store_keeps_its_object_size_and_fua_through_the_wrappers() {
        let shared = std::sync::Arc::new(Objects);
        let s = ImageStore::remote(Box::new(shared), "objects".into());
        assert_eq!(s.object_size(), Some(4 << 20));
        assert!(s.can_fua());
    }
}
