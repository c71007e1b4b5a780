//! The case `engine-xts-2threads` (its ratio: two threads over one): two threads writing and reading disjoint ranges of one
//! volume (AES-256-XTS, 512-byte sectors, through the engine's `write_at` and `read_at`
//! in 64 KiB requests), against one thread doing one thread's share alone, in the same
//! run. Its ratio is the engine's scaling from one core to two: a lock, a counter or a
//! cache line that both threads touch per request (a hidden serialisation) shows as a
//! ratio below 2. scripts/check-scaling.sh runs it several times and fails below 1.9.
//!
//! The store is memory cut into 1 MiB regions, each under its own lock (padded apart),
//! so the store itself serialises nothing between the two ranges; the engine runs each
//! request on its calling thread (one thread per request, no fan-out). The second thread
//! is started once per case and woken per call through a channel; a call is 16 MiB per
//! thread, so a wake-up (tens of microseconds here) costs well under 1%.

use super::{Built, ENGINE_SIDE};
use crate::Side;
use sectorcrypt_crypto::Backend;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::{Geometry, IvRule, Layout, Store};
use std::io;
use std::sync::{mpsc, Arc, Mutex};

/// Bytes of each thread's range.
const RANGE: usize = 2 << 20;
/// Bytes per request.
const REQUEST: usize = 64 << 10;
/// Passes over its range per call, each a write and a read of every request.
const REPEAT: usize = 4;
/// Bytes of one region of the store.
const REGION: usize = 1 << 20;

/// One region of the store, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct Region(Mutex<Vec<u8>>);

/// Memory as a store, one lock per region.
#[derive(Debug)]
struct Regions(Vec<Region>);

impl Regions {
    /// Calls `f(region bytes, range within it, range within the request)` for each piece
    /// of `len` bytes at `offset`.
    fn pieces(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(&mut [u8], std::ops::Range<usize>),
    ) -> io::Result<()> {
        let mut done = 0;
        while done < len {
            let at = offset as usize + done;
            let region = self
                .0
                .get(at / REGION)
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
            let within = at % REGION;
            let n = (len - done).min(REGION - within);
            let mut bytes = region.0.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut bytes[within..within + n], done..done + n);
            done += n;
        }
        Ok(())
    }
}

impl Store for Regions {
    fn name(&self) -> &str {
        "memory regions"
    }
    fn size(&self) -> io::Result<u64> {
        Ok((self.0.len() * REGION) as u64)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.pieces(offset, buf.len(), |bytes, r| buf[r].copy_from_slice(bytes))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.pieces(offset, buf.len(), |bytes, r| bytes.copy_from_slice(&buf[r]))
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes and reads back thread `t`'s range, `REPEAT` times.
fn work(volume: &Volume, t: usize, data: &[u8], back: &mut [u8]) {
    let base = (t * RANGE) as u64;
    for _ in 0..REPEAT {
        for i in 0..RANGE / REQUEST {
            let at = base + (i * REQUEST) as u64;
            volume.write_at(data, at).expect("engine write");
        }
        for i in 0..RANGE / REQUEST {
            let at = base + (i * REQUEST) as u64;
            volume.read_at(back, at).expect("engine read");
        }
    }
}

/// Bytes one thread moves per call (written and read).
const PER_THREAD: usize = 2 * RANGE * REPEAT;

/// The case: two threads against one.
pub(crate) fn engine_xts_2threads() -> Result<Built, String> {
    fn e(err: impl std::fmt::Display) -> String {
        err.to_string()
    }
    let geometry = Geometry {
        sector_size: 512,
        data_offset: 0,
        size: (2 * RANGE) as u64,
        iv: IvRule::Units512 { first: 0 },
        metadata: None,
    };
    let key: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
    let layout =
        Layout::single(geometry, "aes-xts-plain64".parse().map_err(e)?, &key).map_err(e)?;
    let regions = (0..2 * RANGE / REGION)
        .map(|_| Region(Mutex::new(vec![0u8; REGION])))
        .collect();
    let opts = EngineOptions {
        threads: Some(1),
        ..EngineOptions::default()
    };
    let volume = Arc::new(Volume::new(Box::new(Regions(regions)), layout, opts).map_err(e)?);
    let data: Arc<Vec<u8>> = Arc::new((0..REQUEST).map(|i| (i * 7 + 3) as u8).collect());

    // Check once that a range reads back what was written through the engine.
    let mut back = vec![0u8; REQUEST];
    work(&volume, 1, &data, &mut back);
    if back != *data {
        return Err("engine-xts-2threads: a range reads back something else".into());
    }

    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (v, d) = (volume.clone(), data.clone());
    std::thread::spawn(move || {
        let mut back = vec![0u8; REQUEST];
        // Ends when the case is over and the sender is dropped.
        while go_rx.recv().is_ok() {
            work(&v, 1, &d, &mut back);
            if done_tx.send(()).is_err() {
                break;
            }
        }
    });
    let (v, d) = (volume.clone(), data.clone());
    let mut own_back = vec![0u8; REQUEST];
    // The report's backend column: the engine's selected backend.
    let backend = Backend::selected().map_err(e)?;
    let ours = Side {
        name: format!("{ENGINE_SIDE}{}", backend.name()),
        bytes: 2 * PER_THREAD,
        version: None,
        output: None,
        call: Box::new(move || {
            go_tx.send(()).expect("second thread alive");
            work(&v, 0, &d, &mut own_back);
            done_rx.recv().expect("second thread alive");
        }),
    };
    let mut back = vec![0u8; REQUEST];
    let peer = Side {
        name: "sectorcrypt-engine-1thread".into(),
        bytes: PER_THREAD,
        version: None,
        output: None,
        call: Box::new(move || work(&volume, 0, &data, &mut back)),
    };
    Ok(Built {
        ours,
        peer: Some(peer),
        job: None,
    })
}
