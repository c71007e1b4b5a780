//! Stores cut into objects (an RBD image) pay per request, not per byte: the engine's
//! default chunk there spans an object (at most 4 MiB), so a large aligned request reaches
//! the store as one request per object rather than one per 512 KiB; decryption is the
//! same (checked against the file's own plaintext).

use crate::fixture::*;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::{FileStore, Store};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A file store that says it is cut into `object` bytes and counts reads and writes.
#[derive(Debug)]
struct Objects {
    file: FileStore,
    object: u64,
    calls: Arc<AtomicUsize>,
}

impl Store for Objects {
    fn name(&self) -> &str {
        self.file.name()
    }
    fn size(&self) -> io::Result<u64> {
        self.file.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.file.write_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync()
    }
    fn object_size(&self) -> Option<u64> {
        Some(self.object)
    }
}

#[test]
fn requests_on_a_store_of_objects_go_whole_objects_at_a_time() {
    // 16 MiB of 4096-byte sectors at offset 0.
    let cfg = Config::xts(4096, 4096);
    let fx = Fixture::new(cfg, 77);
    for (object, per_4m) in [(4u64 << 20, 1), (32 << 20, 1), (1 << 20, 4), (4096, 8)] {
        let calls = Arc::new(AtomicUsize::new(0));
        let store = Objects {
            file: FileStore::open(&fx.path, true).unwrap(),
            object,
            calls: Arc::clone(&calls),
        };
        let layout = cfg.layout_of(&fx.key, 0, cfg.size()).unwrap();
        let vol = Volume::new(Box::new(store), layout, EngineOptions::default()).unwrap();
        let mut buf = vec![0u8; 4 << 20];
        vol.read_at(&mut buf, 4 << 20).unwrap();
        assert_eq!(
            calls.swap(0, Ordering::Relaxed),
            per_4m,
            "reads of a 4 MiB request on {object}-byte objects"
        );
        assert!(buf[..] == fx.plaintext()[4 << 20..8 << 20]);
        vol.write_at(&buf, 8 << 20).unwrap();
        assert_eq!(calls.swap(0, Ordering::Relaxed), per_4m, "writes, {object}");
    }
}
