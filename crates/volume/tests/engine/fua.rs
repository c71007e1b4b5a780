//! Durable writes ([`Volume::write_at_fua`]): on a store that makes single writes durable
//! (`Store::can_fua`) every store write of the request, its read-modify-write edges and
//! every chunk, is a FUA write and nothing is synced; on any other store the request is
//! written plainly and the store synced once. The bytes are the same either way.

use crate::fixture::*;
use sectorcrypt_volume::engine::Volume;
use sectorcrypt_volume::{FileStore, Store};
use std::io;
use std::sync::{Arc, Mutex};

/// What reached a store: plain writes, FUA writes, syncs.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Seen {
    writes: usize,
    fua_writes: usize,
    syncs: usize,
}

/// A file store that counts writes and syncs, and takes FUA when `fua`.
#[derive(Debug)]
struct Counting {
    file: FileStore,
    fua: bool,
    seen: Arc<Mutex<Seen>>,
}

impl Counting {
    fn count(&self, f: impl FnOnce(&mut Seen)) {
        f(&mut self.seen.lock().unwrap());
    }
}

impl Store for Counting {
    fn name(&self) -> &str {
        self.file.name()
    }
    fn size(&self) -> io::Result<u64> {
        self.file.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.count(|s| s.writes += 1);
        self.file.write_at(buf, offset)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.count(|s| s.fua_writes += 1);
        self.file.write_at_fua(buf, offset)
    }
    fn can_fua(&self) -> bool {
        self.fua
    }
    fn sync(&self) -> io::Result<()> {
        self.count(|s| s.syncs += 1);
        self.file.sync()
    }
}

#[test]
fn a_durable_write_is_fua_writes_or_writes_and_one_sync() {
    let cfg = Config::xts(512, 8192);
    // 324 bytes of a sector, three chunks of 64 KiB, 100 bytes of a sector; two threads.
    let (offset, len) = (700u64, 324 + (3 << 16) + 100);
    for fua in [true, false] {
        let fx = Fixture::new(cfg, 5);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let store = Counting {
            file: FileStore::open(&fx.path, true).unwrap(),
            fua,
            seen: Arc::clone(&seen),
        };
        let layout = cfg.layout_of(&fx.key, 0, cfg.size()).unwrap();
        let vol = Volume::new(Box::new(store), layout, engine(2, Some(1 << 16))).unwrap();
        assert_eq!(vol.can_fua(), fua);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        vol.write_at_fua(&data, offset).unwrap();
        let got = *seen.lock().unwrap();
        // Two edges and three chunks.
        let want = if fua {
            Seen {
                writes: 0,
                fua_writes: 5,
                syncs: 0,
            }
        } else {
            Seen {
                writes: 5,
                fua_writes: 0,
                syncs: 1,
            }
        };
        assert_eq!(got, want, "a store with FUA: {fua}");
        let mut back = vec![0u8; len];
        vol.read_at(&mut back, offset).unwrap();
        assert!(back == data, "read back differs (FUA: {fua})");
        // The file decrypted by the reference holds them too.
        let off = offset as usize;
        assert!(fx.plaintext()[off..off + len] == data[..]);
    }
}
