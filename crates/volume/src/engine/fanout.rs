//! The fan-out of a large request: its chunks are handed out from a shared queue to the
//! calling thread and up to `threads - 1` helpers of a persistent pool. Each participant
//! takes the next chunk when it finishes one, so a slow participant never holds up the
//! others. While several callers are in the engine at once (an NBD server with many
//! requests in flight), each call asks for proportionally fewer helpers: the parallelism
//! is already there. When one chunk fails, the others stop at their next chunk and the
//! first error is returned.
//!
//! # Why rayon, without `unsafe`
//! Zero-copy reads need a helper thread to write into a disjoint `&mut` part of the caller's
//! buffer, which safe Rust allows only through scoped execution. The options:
//! - `std::thread::scope` per call: no dependency, but a thread spawn and join per helper
//!   per call, several times the cost of the rayon scope (docs/PERFORMANCE.md);
//! - a persistent pool of our own with owned buffers: safe, but a read would then be
//!   decrypted into the pool's buffer and copied into the caller's, a second pass over the
//!   data;
//! - **rayon's `ThreadPool::in_place_scope`** (chosen): persistent threads, the scope body
//!   runs on the caller's thread (which does its share), spawned jobs borrow the caller's
//!   buffer safely and the scope joins them before returning. A small boxed job per helper
//!   per fanned-out call is the only allocation (not per chunk, not per byte).
//!
//! Because waking a helper has a fixed cost, a request of one chunk never leaves the
//! calling thread ([`Fan::fans_out`]).

use crate::error::{Error, Result};
use crate::lock;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The worker pool of one volume and the count of calls using it.
pub(super) struct Fan {
    threads: usize,
    pool: Option<rayon::ThreadPool>,
    /// Calls currently fanning out over the pool (to share the helpers fairly).
    fanning: AtomicUsize,
}

impl Fan {
    /// `threads` participants per request, the caller included (no pool for 1).
    pub(super) fn new(threads: usize) -> Result<Fan> {
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads - 1)
                    .thread_name(|i| format!("sectorcrypt-io-{i}"))
                    .build()
                    .map_err(|e| Error::io("starting the engine's threads", io::Error::other(e)))?,
            )
        } else {
            None
        };
        Ok(Fan {
            threads,
            pool,
            fanning: AtomicUsize::new(0),
        })
    }

    /// Participants per request.
    pub(super) fn threads(&self) -> usize {
        self.threads
    }

    /// Whether a request of `chunks` chunks goes to the pool (otherwise it runs inline).
    pub(super) fn fans_out(&self, chunks: usize) -> bool {
        self.pool.is_some() && chunks > 1
    }

    /// Runs `work` on the calling thread and on as many helpers as this request of
    /// `chunks` chunks gets; each takes chunks until none is left or one failed. Only for
    /// requests that [`Fan::fans_out`].
    pub(super) fn run(&self, chunks: usize, work: impl Fn(&Outcome) + Sync) -> io::Result<()> {
        let pool = self.pool.as_ref().expect("fans_out was checked");
        let fan = FanOut::enter(&self.fanning);
        let helpers = self.helpers_for(chunks, fan.callers);
        let outcome = Outcome::default();
        pool.in_place_scope(|s| {
            for _ in 0..helpers {
                s.spawn(|_| work(&outcome));
            }
            work(&outcome);
        });
        outcome.into_result()
    }

    /// How many pool helpers a request of `chunks` chunks gets, given `callers` calls
    /// (this one included) fanning out at the same time.
    fn helpers_for(&self, chunks: usize, callers: usize) -> usize {
        ((self.threads - 1) / callers.max(1)).min(chunks.saturating_sub(1))
    }
}

/// Counts the calls fanning out over the pool while one is alive.
struct FanOut<'a> {
    counter: &'a AtomicUsize,
    callers: usize,
}

impl<'a> FanOut<'a> {
    fn enter(counter: &'a AtomicUsize) -> FanOut<'a> {
        let callers = counter.fetch_add(1, Ordering::Relaxed) + 1;
        FanOut { counter, callers }
    }
}

impl Drop for FanOut<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The first error of a fanned-out request, and a flag telling the others to stop.
#[derive(Default)]
pub(super) struct Outcome {
    failed: AtomicBool,
    error: Mutex<Option<io::Error>>,
}

impl Outcome {
    /// Whether a participant failed (the others stop taking chunks).
    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Records `e` unless an error came first.
    pub(super) fn fail(&self, e: io::Error) {
        let mut slot = lock(&self.error);
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::Relaxed);
    }

    fn into_result(self) -> io::Result<()> {
        match self.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
