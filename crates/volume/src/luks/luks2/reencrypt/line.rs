//! The progress line of an online re-encryption (see `online.rs`): a leaf both the run
//! (`rekey.rs`, which moves it) and the translating store (which reads it) share.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The progress line of an online re-encryption: the bytes of the data area under the
/// new layout (from its start in a forward run, from its end in a backward one).
#[derive(Debug, Default)]
pub struct Line(RwLock<u64>);

impl Line {
    /// A line at `done` bytes.
    pub fn new(done: u64) -> Line {
        Line(RwLock::new(done))
    }

    /// Where it is now.
    pub fn get(&self) -> u64 {
        *self.read()
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, u64> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Excludes every request until the guard is dropped (set the new line through it).
    pub(super) fn hold(&self) -> RwLockWriteGuard<'_, u64> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}
