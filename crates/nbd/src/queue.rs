//! The hand-off of one connection's requests from its reader to its workers
//! ([`JobQueue`]): a bounded first-in first-out queue that any worker may take from, and
//! that costs no system call while the workers are busy.
//!
//! A request's hand-off is on the path of every small request (a 4 KiB read is served in
//! a few microseconds), so what it costs matters as much as the read itself. Waking a
//! thread is a `futex` call and, on a machine with few cores, a context switch; the queue
//! therefore wakes a worker only when one is asleep and a job is there for it, and the
//! reader only when it waits for room. A worker finishing a request takes the next one
//! from the queue without sleeping when there is one. (The standard library's channel
//! needed its receiver shared under a mutex, which the workers then queued on as well:
//! two wake-ups per request where one, or none, is needed.)
//!
//! Closing the queue (the reader stops) lets the workers take every job already queued,
//! then each gets `None`.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// What the reader and the workers share, under one lock.
#[derive(Debug)]
struct State<T> {
    jobs: VecDeque<T>,
    /// No more jobs will come.
    closed: bool,
    /// Workers asleep waiting for a job.
    idle: usize,
    /// Workers signalled and not yet awake: a push wakes a worker only while the sleepers
    /// outnumber these.
    waking: usize,
    /// Whether the reader is asleep waiting for room.
    full_wait: bool,
    /// Threads woken so far (for tests: the hand-off wakes no one it need not).
    wakeups: u64,
}

/// A bounded queue of jobs from one producer (the connection's reader) to several
/// consumers (its workers).
#[derive(Debug)]
pub(crate) struct JobQueue<T> {
    state: Mutex<State<T>>,
    /// Signalled when a job arrives or the queue closes (workers wait on it).
    ready: Condvar,
    /// Signalled when a job is taken and the reader waits for room.
    room: Condvar,
    capacity: usize,
}

impl<T> JobQueue<T> {
    /// A queue that holds at most `capacity` jobs (at least 1); `push` waits beyond.
    pub(crate) fn new(capacity: usize) -> JobQueue<T> {
        let capacity = capacity.max(1);
        JobQueue {
            state: Mutex::new(State {
                jobs: VecDeque::with_capacity(capacity),
                closed: false,
                idle: 0,
                waking: 0,
                full_wait: false,
                wakeups: 0,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            capacity,
        }
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job`, waiting while the queue is full; wakes one worker if one is asleep.
    /// Gives the job back when the queue has been closed.
    pub(crate) fn push(&self, job: T) -> Result<(), T> {
        let mut s = self.state();
        while s.jobs.len() >= self.capacity && !s.closed {
            s.full_wait = true;
            s = self.room.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.closed {
            return Err(job);
        }
        s.jobs.push_back(job);
        // A worker already woken and not yet running takes this job too before it sleeps
        // again (it empties the queue), so no second wake-up is needed for it.
        let wake = s.idle > s.waking;
        if wake {
            s.waking += 1;
            s.wakeups += 1;
        }
        drop(s);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// The next job, waiting for one; `None` once the queue is closed and empty.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut s = self.state();
        loop {
            if let Some(job) = s.jobs.pop_front() {
                let wake = std::mem::take(&mut s.full_wait);
                if wake {
                    s.wakeups += 1;
                }
                drop(s);
                if wake {
                    self.room.notify_one();
                }
                return Some(job);
            }
            if s.closed {
                return None;
            }
            s.idle += 1;
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
            s.idle -= 1;
            // Whether signalled or woken spuriously, this worker now looks at the queue
            // and empties it before it sleeps again: one signal fewer is on its way.
            s.waking = s.waking.saturating_sub(1);
        }
    }

    /// No more jobs: the workers take what is queued, then get `None`; a waiting `push`
    /// gives its job back.
    pub(crate) fn close(&self) {
        let mut s = self.state();
        s.closed = true;
        drop(s);
        self.ready.notify_all();
        self.room.notify_all();
    }

    /// Threads woken so far.
    #[cfg(test)]
    fn wakeups(&self) -> u64 {
        self.state().wakeups
    }

    /// Workers asleep.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.state().idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;
    use std::time::{Duration, Instant};

    /// Waits (bounded) until `n` workers sleep on the queue.
    fn until_idle<T>(q: &JobQueue<T>, n: usize) {
        let t0 = Instant::now();
        while q.idle() != n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "workers never slept"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn busy_workers_are_not_woken_and_a_sleeping_one_once() {
        let q = JobQueue::new(64);
        for i in 0..10 {
            q.push(i).unwrap();
        }
        assert_eq!(q.wakeups(), 0, "no worker sleeps: nobody to wake");
        let got: Vec<i32> = (0..10).map(|_| q.pop().unwrap()).collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>(), "first in, first out");
        thread::scope(|s| {
            // One sleeper, which takes one job: one wake-up, whether the second job
            // arrives before it runs (it is already signalled) or after (it is gone).
            let worker = s.spawn(|| q.pop());
            until_idle(&q, 1);
            q.push(7).unwrap();
            q.push(8).unwrap();
            assert_eq!(worker.join().unwrap(), Some(7));
            assert_eq!(q.wakeups(), 1);
            assert_eq!(q.pop(), Some(8));
        });
    }

    #[test]
    fn closing_drains_the_queue_then_ends_every_worker() {
        let q = JobQueue::new(4);
        q.push(1).unwrap();
        q.push(2).unwrap();
        q.close();
        assert_eq!(q.push(3), Err(3), "a closed queue takes nothing");
        assert_eq!((q.pop(), q.pop(), q.pop()), (Some(1), Some(2), None));
        let q = JobQueue::<u8>::new(4);
        thread::scope(|s| {
            let workers: Vec<_> = (0..3).map(|_| s.spawn(|| q.pop())).collect();
            until_idle(&q, 3);
            q.close();
            for w in workers {
                assert_eq!(w.join().unwrap(), None);
            }
        });
    }

    #[test]
    fn a_full_queue_holds_the_reader_until_a_job_is_taken() {
        let q = JobQueue::new(2);
        q.push(1).unwrap();
        q.push(2).unwrap();
        thread::scope(|s| {
            let reader = s.spawn(|| q.push(3));
            let t0 = Instant::now();
            while !q.state().full_wait {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the reader never waited"
                );
                thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(q.state().jobs.len(), 2, "nothing beyond the capacity");
            assert_eq!(q.pop(), Some(1));
            assert_eq!(reader.join().unwrap(), Ok(()));
        });
        assert_eq!((q.pop(), q.pop()), (Some(2), Some(3)));
        // A reader waiting for room when the queue closes gets its job back.
        let q = JobQueue::new(1);
        q.push(1).unwrap();
        thread::scope(|s| {
            let reader = s.spawn(|| q.push(2));
            let t0 = Instant::now();
            while !q.state().full_wait {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the reader never waited"
                );
                thread::sleep(Duration::from_millis(1));
            }
            q.close();
            assert_eq!(reader.join().unwrap(), Err(2));
        });
    }

    #[test]
    fn many_workers_take_every_job_exactly_once() {
        let q = JobQueue::new(8);
        let total = std::sync::atomic::AtomicU64::new(0);
        thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while let Some(v) = q.pop() {
                        total.fetch_add(v, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
            for v in 1..=10_000u64 {
                q.push(v).unwrap();
            }
            q.close();
        });
        assert_eq!(total.into_inner(), 10_000 * 10_001 / 2);
    }
}
