//! The handles given to C: a handle is a number, never an address. [`Registry`] maps the
//! numbers of live objects to the objects; a call looks its handle up and works on a
//! shared reference (`Arc`) to the object, so a handle that was closed, closed twice, or
//! never issued is an error code rather than a use of freed memory, and a close that
//! races with a read on another thread frees the object only after the read has ended.
//! Numbers start at 1 and are never reused, so a stale handle cannot reach a newer object.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// The live objects of one kind, by handle number.
#[derive(Debug)]
pub struct Registry<T> {
    next: AtomicUsize,
    live: RwLock<BTreeMap<usize, Arc<T>>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Registry<T> {
        Registry::new()
    }
}

impl<T> Registry<T> {
    /// An empty registry (usable in a `static`).
    pub const fn new() -> Registry<T> {
        Registry {
            next: AtomicUsize::new(1),
            live: RwLock::new(BTreeMap::new()),
        }
    }

    /// Keeps `object` and returns its handle number (never 0).
    pub fn insert(&self, object: T) -> usize {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        // The map guards no invariant a panicking holder could break.
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        live.insert(id, Arc::new(object));
        id
    }

    /// The object of handle `id`, if it is live.
    pub fn get(&self, id: usize) -> Option<Arc<T>> {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        live.get(&id).cloned()
    }

    /// Ends handle `id`: returns its object (freed when the last reference held by a call
    /// in progress goes), or `None` when the handle is not live.
    pub fn remove(&self, id: usize) -> Option<Arc<T>> {
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        live.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_and_unknown_handles_are_not_found_and_numbers_are_not_reused() {
        let r = Registry::new();
        let a = r.insert("a");
        let b = r.insert("b");
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(r.get(a).as_deref(), Some(&"a"));
        let held = r.get(b).unwrap();
        assert_eq!(r.remove(b).as_deref(), Some(&"b"));
        assert!(r.get(b).is_none());
        assert!(r.remove(b).is_none(), "a second close finds nothing");
        assert_eq!(*held, "b", "a call in progress keeps its object");
        let c = r.insert("c");
        assert!(c != a && c != b);
        assert!(r.get(0).is_none() && r.get(usize::MAX).is_none());
    }
}
