//! A connection's budget of READ and WRITE payload bytes in flight: a counting semaphore
//! shared by the connection's reader and workers, and by no other connection
//! ([`ServerConfig::connection_budget`](crate::ServerConfig)), so a client that stalls
//! holds up only itself.
//!
//! A request takes its payload's share ([`Budget::take`], which waits while the budget is
//! spent) before its buffer is allocated, and gives it back when its [`Permit`] is dropped
//! (the reply sent). A request larger than the whole budget takes all of it, so it waits
//! until it is the only one in flight and never deadlocks.
//!
//! Giving a share back wakes nobody unless a request waits: std's condition variable makes
//! a `futex` call on every notify, even with no waiter, and small requests at a high queue
//! depth return a share per request.

use std::sync::{Arc, Condvar, Mutex};

/// Payload bytes left to hand out, and a wake-up for the requests waiting for them.
#[derive(Debug)]
pub(crate) struct Budget {
    state: Mutex<State>,
    freed: Condvar,
    total: usize,
}

/// What the budget's mutex guards.
#[derive(Debug)]
struct State {
    /// Bytes free.
    left: usize,
    /// Requests waiting in [`Budget::take`] for bytes.
    waiting: usize,
}

impl Budget {
    /// A budget of `total` bytes (at least 1).
    pub(crate) fn new(total: usize) -> Budget {
        let total = total.max(1);
        Budget {
            state: Mutex::new(State {
                left: total,
                waiting: 0,
            }),
            freed: Condvar::new(),
            total,
        }
    }

    /// Waits until `n` bytes (at most the whole budget) are free and takes them until the
    /// permit is dropped.
    pub(crate) fn take(self: &Arc<Self>, n: usize) -> Permit {
        let n = n.min(self.total);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.left < n {
            state.waiting += 1;
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
            state.waiting -= 1;
        }
        state.left -= n;
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
        let mut state = self.budget.state.lock().unwrap_or_else(|e| e.into_inner());
        state.left += self.n;
        let waiting = state.waiting > 0;
        drop(state);
        if waiting {
            self.budget.freed.notify_all();
        }
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
        assert_eq!(b.state.lock().unwrap().left, 100);
        assert_eq!(b.state.lock().unwrap().waiting, 0);
    }

    #[test]
    fn waiters_are_counted_and_all_woken_when_shares_come_back() {
        // Eight threads take and give back shares of a budget that holds three at a time,
        // 200 times each: every wait is counted and every waiter is woken (a lost wake-up
        // would hang here; the receive below is bounded).
        let b = Arc::new(Budget::new(30));
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                let tx = tx.clone();
                thread::spawn(move || {
                    for _ in 0..200 {
                        let p = b.take(10);
                        thread::yield_now();
                        drop(p);
                    }
                    tx.send(()).unwrap();
                })
            })
            .collect();
        for _ in 0..8 {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("a thread waited for a share that never woke it");
        }
        for t in threads {
            t.join().unwrap();
        }
        let state = b.state.lock().unwrap();
        assert_eq!((state.left, state.waiting), (30, 0));
    }
}
