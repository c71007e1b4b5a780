//! The edge locks: read-modify-write of a partial sector holds the lock of its stripe in a
//! small table keyed by sector number. Only edges take locks, so aligned writes never
//! serialize, and two writers that share a sector but not bytes (both edges, so both
//! locked) lose nothing. Writers whose *bytes* overlap get no guarantee, as with any block
//! device: in particular an aligned write of a sector that lands between an edge write's
//! read and write-back of the same sector is undone outside the edge's bytes, a result
//! neither order gives. Clients that overlap writes must order them (every filesystem and
//! NBD client does).

use crate::lock;
use std::sync::{Mutex, MutexGuard};

/// Stripes of the lock table (a power of two).
const STRIPES: usize = 256;

/// The striped lock table of one volume.
pub(super) struct EdgeLocks {
    stripes: Box<[Mutex<()>]>,
}

/// The locks of one or two edge sectors, released on drop.
pub(super) struct EdgeGuard<'a> {
    _low: MutexGuard<'a, ()>,
    _high: Option<MutexGuard<'a, ()>>,
}

impl EdgeLocks {
    pub(super) fn new() -> EdgeLocks {
        EdgeLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Locks the stripes of sectors `first` and `last` (equal, or neighbours).
    pub(super) fn lock(&self, first: u64, last: u64) -> EdgeGuard<'_> {
        let a = (first as usize) % STRIPES;
        let b = (last as usize) % STRIPES;
        // Always the lower stripe first, so two edges never wait on each other.
        let (lo, hi) = (a.min(b), a.max(b));
        let low = lock(&self.stripes[lo]);
        let high = (hi != lo).then(|| lock(&self.stripes[hi]));
        EdgeGuard {
            _low: low,
            _high: high,
        }
    }
}
