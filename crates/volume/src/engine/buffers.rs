//! Reusable buffers of one size (a chunk, at least two sectors) for encrypted writes and
//! read-modify-write edges: steady state allocates nothing. A buffer is allocated only
//! when a thread holds more at once than it ever did. Buffers held plaintext (edges): they
//! are wiped before their memory is freed.
//!
//! Every thread has a shelf of its own: the buffers it gives back wait there for its next
//! request. Threads working at once thus share no lock and no cache line on the data path
//! (one mutex for the whole pool made every write of every thread meet on one lock and one
//! cache line). A thread gets its shelf number when it first takes a buffer, the lowest one
//! no living thread holds, and gives it back when it ends; beyond [`SHELVES`] living
//! threads, shelves are shared (each still under its own lock). Each shelf is aligned to
//! 128 bytes: two cache lines, as the adjacent-line prefetcher pairs them.

use crate::lock;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use zeroize::Zeroize;

/// Shelves per pool: one per thread for up to this many threads at once (at most 64:
/// the bits of [`HELD`]).
pub(super) const SHELVES: usize = 64;
const _: () = assert!(SHELVES >= 1 && SHELVES <= 64);
/// The bits of [`HELD`] in use.
const ALL: u64 = u64::MAX >> (64 - SHELVES);

/// Free buffers kept on one shelf beyond which returned buffers are wiped and dropped: a
/// thread holds one at a time on the engine's paths (a write's ciphertext, an edge, a
/// fanned-out participant's scratch, one after the other), and the pool as a whole then
/// keeps at most [`SHELVES`] buffers, as many as the one shared free list it replaced.
const KEEP: usize = 1;

/// The shelf numbers held by living threads (bit `i`: shelf `i`), and how many threads
/// took one beyond [`SHELVES`] (they share, round-robin).
static HELD: Mutex<(u64, usize)> = Mutex::new((0, 0));

/// This thread's shelf number, given back when the thread ends.
struct Slot(usize);

impl Slot {
    fn take() -> Slot {
        let mut held = lock(&HELD);
        let free = !held.0 & ALL;
        if free != 0 {
            let i = free.trailing_zeros() as usize;
            held.0 |= 1 << i;
            return Slot(i);
        }
        held.1 += 1;
        // Shared with another thread: marked so that dropping it frees nothing.
        Slot(SHELVES + held.1 % SHELVES)
    }

    fn shelf(&self) -> usize {
        self.0 % SHELVES
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0 < SHELVES {
            lock(&HELD).0 &= !(1 << self.0);
        }
    }
}

thread_local! {
    static SLOT: Slot = Slot::take();
}

/// The current thread's shelf.
fn my_shelf() -> usize {
    // A thread being torn down (no thread-locals left) uses shelf 0.
    SLOT.try_with(Slot::shelf).unwrap_or(0)
}

/// One thread's free buffers, on cache lines of their own.
#[repr(align(128))]
struct Shelf {
    state: Mutex<ShelfState>,
}

struct ShelfState {
    free: Vec<Vec<u8>>,
    /// The thread slot that last used this shelf, and how often a shelf passed from one
    /// thread to another (for tests: threads on disjoint work never do so).
    last: usize,
    handovers: u64,
}

pub(super) struct BufferPool {
    shelves: Box<[Shelf]>,
    len: usize,
}

/// A buffer taken from the pool, returned on drop to the shelf it came from.
pub(super) struct Pooled<'a> {
    pool: &'a BufferPool,
    shelf: usize,
    buf: Vec<u8>,
}

impl BufferPool {
    /// A pool of buffers of `len` bytes.
    pub(super) fn new(len: usize) -> BufferPool {
        let shelves = (0..SHELVES)
            .map(|_| Shelf {
                state: Mutex::new(ShelfState {
                    free: Vec::new(),
                    last: usize::MAX,
                    handovers: 0,
                }),
            })
            .collect();
        BufferPool { shelves, len }
    }

    /// The shelf `i`, locked, noting which thread uses it.
    fn shelf(&self, i: usize) -> std::sync::MutexGuard<'_, ShelfState> {
        let mut s = lock(&self.shelves[i].state);
        let me = SLOT.try_with(|s| s.0).unwrap_or(usize::MAX);
        if s.last != me {
            if s.last != usize::MAX {
                s.handovers += 1;
            }
            s.last = me;
        }
        s
    }

    /// A free buffer from this thread's shelf, or a new one.
    pub(super) fn take(&self) -> Pooled<'_> {
        let shelf = my_shelf();
        let buf = self.shelf(shelf).free.pop();
        Pooled {
            pool: self,
            shelf,
            buf: buf.unwrap_or_else(|| vec![0; self.len]),
        }
    }

    /// How often a shelf passed from one thread to another (a lock two threads met on).
    #[cfg(test)]
    pub(super) fn handovers(&self) -> u64 {
        self.shelves.iter().map(|s| lock(&s.state).handovers).sum()
    }
}

impl Deref for Pooled<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        for shelf in self.shelves.iter() {
            for buf in lock(&shelf.state).free.iter_mut() {
                buf.zeroize();
            }
        }
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let mut shelf = self.pool.shelf(self.shelf);
        if shelf.free.len() < KEEP {
            shelf.free.push(std::mem::take(&mut self.buf));
        } else {
            self.buf.zeroize();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn living_threads_hold_distinct_shelves_and_give_them_back() {
        let go = std::sync::Barrier::new(2);
        let go = &go;
        let (a, b) = thread::scope(|s| {
            let t = move || {
                let mine = my_shelf();
                // Both alive at once.
                go.wait();
                mine
            };
            let a = s.spawn(t);
            let b = s.spawn(t);
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_ne!(a, b, "two living threads share a shelf");
    }

    #[test]
    fn a_thread_gets_its_own_buffer_back() {
        let pool = BufferPool::new(100);
        let first = pool.take();
        let ptr = first.as_ptr();
        drop(first);
        let again = pool.take();
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(again.len(), 100);
        // More at once than ever before: new ones; at most KEEP kept after.
        let many: Vec<_> = (0..KEEP + 3).map(|_| pool.take()).collect();
        drop(many);
        drop(again);
        assert_eq!(lock(&pool.shelves[my_shelf()].state).free.len(), KEEP);
    }
}
