//! Reusable byte buffers for request data, shared by the server's workers and the client's
//! requests, so that steady traffic allocates nothing: a fresh large `Vec` costs a zeroing
//! pass and, above the allocator's mmap threshold, a page fault per page and an unmap when
//! it is freed.
//!
//! The pool is bounded twice: it keeps at most `keep` buffers, and none larger than
//! [`MAX_BUFFER`], so an idle pool holds at most `keep * MAX_BUFFER` bytes. A buffer is
//! handed out with its old contents: callers overwrite what they use.

use std::sync::{Mutex, MutexGuard};

/// Larger buffers are freed after use, not kept.
pub(crate) const MAX_BUFFER: usize = 4 << 20;

/// A bounded free list of byte buffers.
#[derive(Debug)]
pub(crate) struct BufPool {
    free: Mutex<Vec<Vec<u8>>>,
    keep: usize,
}

impl BufPool {
    /// A pool that keeps at most `keep` buffers between uses.
    pub(crate) fn new(keep: usize) -> BufPool {
        BufPool {
            free: Mutex::new(Vec::with_capacity(keep)),
            keep,
        }
    }

    fn free(&self) -> MutexGuard<'_, Vec<Vec<u8>>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of at least `n` bytes (contents unspecified).
    pub(crate) fn get(&self, n: usize) -> Vec<u8> {
        let mut free = self.free();
        // Any kept buffer that is large enough (mixed request sizes do not churn).
        match free.iter().position(|v| v.len() >= n) {
            Some(i) => free.swap_remove(i),
            None => {
                drop(free);
                vec![0u8; n]
            }
        }
    }

    /// Gives `v` back for reuse (or frees it when the pool is full and `v` is smaller
    /// than what it holds, or when `v` is above the size cap).
    pub(crate) fn put(&self, v: Vec<u8>) {
        if v.len() > MAX_BUFFER || self.keep == 0 {
            return;
        }
        let mut free = self.free();
        if free.len() < self.keep {
            free.push(v);
        } else if let Some(i) = free.iter().position(|k| k.len() < v.len()) {
            // Full: keep the larger of the two.
            free[i] = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_reuses_any_buffer_large_enough() {
        let pool = BufPool::new(4);
        let big = pool.get(1 << 20);
        let small = pool.get(100);
        let big_ptr = big.as_ptr();
        pool.put(big);
        pool.put(small);
        let again = pool.get(300_000);
        assert_eq!(
            again.as_ptr(),
            big_ptr,
            "the large buffer is found behind the small"
        );
        assert!(pool.get(50).len() >= 50);
        for _ in 0..4 + 4 {
            pool.put(vec![0; 10]);
        }
        assert_eq!(pool.free().len(), 4, "at most `keep` buffers are kept");
        pool.put(again);
        let last = pool.get(1 << 20);
        assert_eq!(last.as_ptr(), big_ptr, "a full pool keeps the larger");
        // Buffers above the size cap are freed, not kept.
        let huge = vec![0u8; MAX_BUFFER + 1];
        pool.put(huge);
        assert!(pool.free().iter().all(|v| v.len() <= MAX_BUFFER));
    }
}
