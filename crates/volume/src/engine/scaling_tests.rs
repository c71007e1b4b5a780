//! Threads working on disjoint ranges of one volume meet on no lock of the engine's data
//! path: counted (which thread took each lock last), not timed, so the check cannot be
//! flaky. The timed check is the bench case `engine-xts-2threads` and
//! scripts/check-scaling.sh.

use super::*;
use crate::{FileStore, Geometry, IvRule};
use std::sync::Barrier;
use std::thread;

#[test]
fn threads_on_disjoint_ranges_take_no_buffer_lock_another_thread_took() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("volume.img");
    let size = 4usize << 20;
    std::fs::write(&path, vec![0u8; size]).unwrap();
    let geometry = Geometry {
        sector_size: 512,
        data_offset: 0,
        size: size as u64,
        iv: IvRule::Units512 { first: 0 },
        metadata: None,
    };
    let key: Vec<u8> = (0..64u8).collect();
    let layout = Layout::single(geometry, "aes-xts-plain64".parse().unwrap(), &key).unwrap();
    let store = Box::new(FileStore::open(&path, true).unwrap());
    let opts = EngineOptions {
        threads: Some(1),
        ..EngineOptions::default()
    };
    let vol = Volume::new(store, layout, opts).unwrap();
    let half = size / 2;
    let len = 70_000;
    // Both threads stay alive until both are done (a thread's shelf is its own while it
    // lives).
    let done = Barrier::new(2);
    thread::scope(|s| {
        for t in 0..2u8 {
            let (vol, done) = (&vol, &done);
            s.spawn(move || {
                let base = usize::from(t) * half;
                let data = vec![t + 1; len];
                let mut back = vec![0u8; len];
                for i in 0..20 {
                    // Unaligned (read-modify-write edges, a pooled buffer each) and
                    // aligned (a pooled buffer for the ciphertext), then read back.
                    let at = base + (i * 100_003) % (half - len);
                    vol.write_at(&data, at as u64).unwrap();
                    vol.read_at(&mut back, at as u64).unwrap();
                    assert!(back == data);
                    let aligned = (at / 4096 * 4096) as u64;
                    vol.write_at(&data[..65536], aligned).unwrap();
                }
                done.wait();
            });
        }
    });
    assert_eq!(
        vol.buffers.handovers(),
        0,
        "a buffer lock passed between the two threads"
    );
}
