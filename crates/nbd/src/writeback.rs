//! Flushes of the export, with a failure that sticks ([`Writeback`]).
//!
//! When a file's writeback fails, Linux reports the error to one `fsync` (per open file
//! description) and then forgets it: the next `fsync` succeeds although the pages it
//! failed to write are gone. Every connection flushes through one export, so a client that
//! retries its FLUSH, or a second connection, would be told that writes acknowledged
//! before the failure are durable when they may be lost. So once a flush has failed
//! (a FLUSH, or the flush of a FUA request), every later flush on every connection fails
//! too, and so does the flush at shutdown, until the export is opened again by a new
//! server. Reads and writes go on: a write that fails says so itself.
//!
//! Flushes run one at a time: a flush that started before another failed could otherwise
//! return success from the export after the failure had been reported elsewhere.
//!
//! A write the export makes durable by itself ([`Writeback::durable`], an export's FUA
//! write) counts as a flush for this: it is refused once a flush failed, and its own
//! failure sticks (its durability failing is a failed flush somewhere below, whose error
//! the layer that had it reports only once). Such writes run concurrently, with each
//! other and with flushes: each is durable on its own, and none reports for another.
//! (Opening one descriptor per connection, as nbdkit's file plugin can, would report the
//! error once on each connection and then succeed again: it does not help here.)

use crate::export::Export;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Serializes the export's flushes and remembers whether one failed.
#[derive(Debug, Default)]
pub(crate) struct Writeback {
    failed: AtomicBool,
    /// Held by a flush throughout.
    one_at_a_time: Mutex<()>,
}

impl Writeback {
    /// Flushes `export`, unless an earlier flush failed: then fails without calling it.
    pub(crate) fn flush(&self, export: &dyn Export) -> io::Result<()> {
        let _one = self.one_at_a_time.lock().unwrap_or_else(|e| e.into_inner());
        self.durable(|| export.flush())
    }

    /// Runs `durable` (a flush, or a write that makes itself durable), unless an earlier
    /// flush failed: then fails without calling it. Its failure sticks.
    pub(crate) fn durable(&self, durable: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "an earlier flush of the export failed, so writes acknowledged before it \
                 may be lost; every flush fails until the server is restarted",
            ));
        }
        let r = durable();
        if r.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// An export whose first flush fails; counts the flushes that reach it.
    #[derive(Default)]
    struct FailsOnce(AtomicU32);

    impl Export for FailsOnce {
        fn size(&self) -> u64 {
            0
        }
        fn preferred_block_size(&self) -> u32 {
            512
        }
        fn read_only(&self) -> bool {
            false
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            match self.0.fetch_add(1, Ordering::SeqCst) {
                0 => Err(io::Error::from_raw_os_error(5)),
                _ => Ok(()),
            }
        }
    }

    #[test]
    fn after_a_failure_flushes_fail_without_reaching_the_export() {
        let e = FailsOnce::default();
        let w = Writeback::default();
        assert_eq!(w.flush(&e).unwrap_err().raw_os_error(), Some(5));
        for _ in 0..3 {
            assert!(w.flush(&e).is_err());
        }
        assert_eq!(e.0.load(Ordering::SeqCst), 1);
        // A new server (a new Writeback) over an export that flushes again starts clean.
        assert!(Writeback::default().flush(&e).is_ok());
    }

    #[test]
    fn a_failed_durable_write_sticks_and_one_after_a_failed_flush_is_refused() {
        let e = FailsOnce::default();
        let w = Writeback::default();
        let err = w.durable(|| Err(io::Error::from_raw_os_error(5)));
        assert_eq!(err.unwrap_err().raw_os_error(), Some(5));
        assert!(w.flush(&e).is_err());
        assert_eq!(e.0.load(Ordering::SeqCst), 0, "the export was flushed");
        let w = Writeback::default();
        assert!(w.flush(&e).is_err());
        let mut ran = false;
        assert!(w
            .durable(|| {
                ran = true;
                Ok(())
            })
            .is_err());
        assert!(!ran, "a durable write ran after a failed flush");
    }
}
