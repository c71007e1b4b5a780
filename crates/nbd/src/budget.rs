//! A connection's budget of READ and WRITE payload bytes in flight: a counting semaphore
//! shared by the connection's reader and workers, and by no other connection
//! ([`ServerConfig::connection_budget`](crate::ServerConfig)), so a client that stalls
//! holds up only itself.
//!
//! A request takes its payload's share ([`Budget::take`], which waits while the budget is
//! spent) before its buffer is allocated, and gives it back when its [`Permit`] is dropped
//! (the reply sent). A request larger than the whole budget takes all of it, so it waits
//! until it is the only one in flight and never deadlocks.

use std::sync::{Arc, Condvar, Mutex};

/// Payload bytes left to hand out, and a wake-up for the requests waiting for them.
#[derive(Debug)]
pub(crate) struct Budget {
    left: Mutex<usize>,
    freed: Condvar,
    total: usize,
}

impl Budget {
    /// A budget of `total` bytes (at least 1).
    pub(crate) fn new(total: usize) -> Budget {
        let total = total.max(1);
        Budget {
            left: Mutex::new(total),
            freed: Condvar::new(),
            total,
        }
    }

    /// Waits until `n` bytes (at most the whole budget) are free and takes them until the
    /// permit is dropped.
    pub(crate) fn take(self: &Arc<Self>, n: usize) -> Permit {
        let n = n.min(self.total);
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left < n {
            left = self.freed.wait(left).unwrap_or_else(|e| e.into_inner());
        }
        *left -= n;
        Permit {
            budget: self.clone(),
            n,
        }
    }
}

/// A share of the [`Budget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    budget: Arc<Budget>,
    n: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut left = self.budget.left.lock().unwrap_or_else(|e| e.into_inner());
        *left += self.n;
        drop(left);
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn the_budget_blocks_until_bytes_are_given_back() {
        let b = Arc::new(Budget::new(100));
        let a = b.take(60);
        let c = b.take(40);
        let (tx, rx) = std::sync::mpsc::channel();
        let b2 = b.clone();
        let t = thread::spawn(move || {
            // Larger than the whole budget: clamped, waits until everything is free.
            let p = b2.take(1000);
            tx.send(p.n).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(a);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(c);
        assert_eq!(rx.recv().unwrap(), 100);
        t.join().unwrap();
        assert_eq!(*b.left.lock().unwrap(), 100);
    }
}
