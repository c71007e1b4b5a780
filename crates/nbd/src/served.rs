//! The exports a server has in use, each with its own flushes ([`Writeback`]): what
//! connections to one export share, and only they.
//!
//! An export enters when a connection chooses it and stays while any connection uses it;
//! once the last one has left and nobody else holds the export (the table no longer
//! offers it), it is flushed and let go there and then, its flush failure, if any, given
//! to the caller to log. Every export still here when the server stops is flushed then.
//! An export the table keeps offering thus keeps its [`Writeback`] (a flush failure keeps
//! failing every later flush) for as long as the server runs, as a server of one export
//! always did.
//!
//! Each export's flushes are its own: a flush stuck in one export's store holds up the
//! flushes of that export's connections only.

use crate::export::Export;
use crate::writeback::Writeback;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// One export in use.
struct Row {
    export: Arc<dyn Export>,
    writeback: Arc<Writeback>,
    /// Connections using it now.
    connections: usize,
}

/// The exports in use, by identity (the address of what the `Arc` points to).
#[derive(Default)]
pub(crate) struct Served {
    rows: Mutex<Vec<Row>>,
}

/// Whether `a` and `b` are the same export object (the data pointers: two `Arc<dyn _>`
/// to one object may carry different vtable pointers).
fn same(a: &Arc<dyn Export>, b: &Arc<dyn Export>) -> bool {
    std::ptr::eq(Arc::as_ptr(a).cast::<()>(), Arc::as_ptr(b).cast::<()>())
}

impl Served {
    fn rows(&self) -> MutexGuard<'_, Vec<Row>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `export` with no connection, to be flushed at the end even if no client
    /// ever uses it (the export of a server of one).
    pub(crate) fn keep(&self, export: Arc<dyn Export>) {
        let mut rows = self.rows();
        if !rows.iter().any(|r| same(&r.export, &export)) {
            rows.push(Row {
                export,
                writeback: Arc::default(),
                connections: 0,
            });
        }
    }

    /// A connection starts using `export`: its flushes; unless `export` has `limit`
    /// connections already (0: no limit): then `None`, and nothing changes.
    pub(crate) fn try_enter(
        &self,
        export: &Arc<dyn Export>,
        limit: usize,
    ) -> Option<Arc<Writeback>> {
        let mut rows = self.rows();
        if let Some(r) = rows.iter_mut().find(|r| same(&r.export, export)) {
            if limit > 0 && r.connections >= limit {
                return None;
            }
            r.connections += 1;
            return Some(r.writeback.clone());
        }
        let writeback = Arc::new(Writeback::default());
        rows.push(Row {
            export: export.clone(),
            writeback: writeback.clone(),
            connections: 1,
        });
        Some(writeback)
    }

    /// A connection stopped using `export` (which the caller still holds, as it did on
    /// [`Served::try_enter`]). When it was the last connection and nobody else holds the
    /// export, flushes it and lets it go: the flush's outcome; otherwise `None`.
    pub(crate) fn leave(&self, export: &Arc<dyn Export>) -> Option<io::Result<()>> {
        let row = {
            let mut rows = self.rows();
            let i = rows.iter().position(|r| same(&r.export, export))?;
            let r = &mut rows[i];
            r.connections = r.connections.saturating_sub(1);
            // Held by this table's row and by the caller only.
            if r.connections > 0 || Arc::strong_count(&r.export) > 2 {
                return None;
            }
            rows.swap_remove(i)
        };
        Some(row.writeback.flush(&*row.export))
    }

    /// Flushes every export still here, each once; the failures.
    pub(crate) fn flush_all(&self) -> Vec<io::Error> {
        let rows: Vec<(Arc<dyn Export>, Arc<Writeback>)> = self
            .rows()
            .iter()
            .map(|r| (r.export.clone(), r.writeback.clone()))
            .collect();
        rows.iter()
            .filter_map(|(e, w)| w.flush(&**e).err())
            .collect()
    }

    /// Flushes and lets go of every export no connection uses and nobody else holds (its
    /// table no longer offers it); the flushes' outcomes.
    pub(crate) fn release_idle(&self) -> Vec<io::Result<()>> {
        let idle: Vec<Row> = {
            let mut rows = self.rows();
            let (idle, busy) = std::mem::take(&mut *rows)
                .into_iter()
                .partition(|r| r.connections == 0 && Arc::strong_count(&r.export) == 1);
            *rows = busy;
            idle
        };
        idle.into_iter()
            .map(|r| r.writeback.flush(&*r.export))
            .collect()
    }

    /// How many exports are here.
    pub(crate) fn len(&self) -> usize {
        self.rows().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Counts its flushes in a counter the test may hold apart from the export.
    #[derive(Default)]
    struct Counted {
        flushes: Arc<AtomicU32>,
    }

    impl Export for Counted {
        fn size(&self) -> u64 {
            0
        }
        fn preferred_block_size(&self) -> u32 {
            512
        }
        fn read_only(&self) -> bool {
            true
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            unreachable!()
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            unreachable!()
        }
        fn flush(&self) -> io::Result<()> {
            self.flushes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn connections_to_one_export_share_its_writeback_and_others_do_not() {
        let served = Served::default();
        let a: Arc<dyn Export> = Arc::new(Counted::default());
        let b: Arc<dyn Export> = Arc::new(Counted::default());
        let wa1 = served.try_enter(&a, 0).unwrap();
        let wa2 = served.try_enter(&a.clone(), 0).unwrap();
        let wb = served.try_enter(&b, 0).unwrap();
        assert!(Arc::ptr_eq(&wa1, &wa2));
        assert!(!Arc::ptr_eq(&wa1, &wb));
        assert_eq!(served.len(), 2);
    }

    #[test]
    fn an_export_at_its_limit_takes_no_more_connections_until_one_leaves() {
        let served = Served::default();
        let a: Arc<dyn Export> = Arc::new(Counted::default());
        let b: Arc<dyn Export> = Arc::new(Counted::default());
        let table = (a.clone(), b.clone());
        assert!(served.try_enter(&a, 2).is_some());
        assert!(served.try_enter(&a, 2).is_some());
        assert!(served.try_enter(&a, 2).is_none());
        assert!(
            served.try_enter(&b, 2).is_some(),
            "another export is not held up"
        );
        assert!(served.leave(&a).is_none(), "still offered: kept");
        assert!(served.try_enter(&a, 2).is_some());
        assert!(served.try_enter(&a, 0).is_some(), "0: no limit");
        drop(table);
    }

    #[test]
    fn an_export_let_go_by_its_table_is_flushed_when_its_last_connection_leaves() {
        let served = Served::default();
        let counted = Counted::default();
        let flushes = counted.flushes.clone();
        let table: Arc<dyn Export> = Arc::new(counted);
        let weak = Arc::downgrade(&table);
        let conn1 = table.clone();
        let conn2 = table.clone();
        served.try_enter(&conn1, 0).unwrap();
        served.try_enter(&conn2, 0).unwrap();
        // The table still offers it: kept, unflushed.
        assert!(served.leave(&conn1).is_none());
        drop(conn1);
        drop(table);
        // Still a connection on it.
        assert_eq!(served.len(), 1);
        assert!(served.leave(&conn2).unwrap().is_ok());
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert_eq!(served.len(), 0);
        drop(conn2);
        assert!(weak.upgrade().is_none(), "the export was let go");
    }

    #[test]
    fn exports_kept_or_still_offered_are_flushed_at_the_end() {
        let served = Served::default();
        let kept = Arc::new(Counted::default());
        served.keep(kept.clone());
        served.keep(kept.clone());
        let offered = Arc::new(Counted::default());
        let table: Arc<dyn Export> = offered.clone();
        let conn = table.clone();
        served.try_enter(&conn, 0).unwrap();
        assert!(served.leave(&conn).is_none());
        assert!(served.flush_all().is_empty());
        assert_eq!(kept.flushes.load(Ordering::SeqCst), 1);
        assert_eq!(offered.flushes.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_idle_export_let_go_by_its_table_is_flushed_and_closed_on_release() {
        let served = Served::default();
        let counted = Counted::default();
        let flushes = counted.flushes.clone();
        let table: Arc<dyn Export> = Arc::new(counted);
        let weak = Arc::downgrade(&table);
        let used = Arc::new(Counted::default());
        let used_flushes = used.flushes.clone();
        let used: Arc<dyn Export> = used;
        let conn = table.clone();
        served.try_enter(&conn, 0).unwrap();
        // Its client left while the table still offered it: kept.
        assert!(served.leave(&conn).is_none());
        drop(conn);
        served.try_enter(&used, 0).unwrap();
        // Still offered: not released.
        assert!(served.release_idle().is_empty());
        assert_eq!(flushes.load(Ordering::SeqCst), 0);
        drop(table);
        let used_weak = Arc::downgrade(&used);
        drop(used);
        // The idle one goes, flushed; the one a connection uses stays.
        let released = served.release_idle();
        assert_eq!(released.len(), 1);
        assert!(released[0].is_ok());
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert!(weak.upgrade().is_none(), "closed");
        assert_eq!(served.len(), 1);
        assert!(used_weak.upgrade().is_some());
        assert_eq!(used_flushes.load(Ordering::SeqCst), 0);
    }
}
