//! The progress line of an online re-encryption (see `online.rs`): a leaf both the run
//! (`rekey.rs`, which moves it) and the translating store (which reads it) share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The progress line of an online re-encryption: the bytes of the data area under the
/// new layout (from its start in a forward run, from its end in a backward one), and
/// whether a hotzone step failed (the zone may be half rewritten: no request may be
/// served from it any more).
#[derive(Debug, Default)]
pub struct Line(RwLock<u64>, AtomicBool);

impl Line {
    /// A line at `done` bytes.
    pub fn new(done: u64) -> Line {
        Line(RwLock::new(done), AtomicBool::new(false))
    }

    /// Marks the run failed (set while its write lock is held, so no request sees the
    /// zone it failed in).
    pub(super) fn fail(&self) {
        self.1.store(true, Ordering::SeqCst);
    }

    /// Whether a hotzone step failed.
    pub fn failed(&self) -> bool {
        self.1.load(Ordering::SeqCst)
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
