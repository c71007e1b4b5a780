//! Which connections are open and which of them are idle: each connection's [`Activity`]
//! (requests in flight, and since when it has had none), and the listener's table of
//! connections ([`Connections`]), which makes room for a new connection by closing the one
//! idle longest.
//!
//! A connection is busy from the first byte of a request until its reply has been sent;
//! otherwise it is idle (in the handshake, too). Closing an idle connection to make room
//! and the start of a request on it can race: both go through one atomic word, so either
//! the request starts and the connection is no longer a candidate, or the connection is
//! claimed for closing and the request is never started (its client sees the connection
//! close without a reply, as if it had been closed a moment earlier).
//!
//! No socket I/O here beyond shutting a claimed connection's socket; the choice of which
//! connection to close is unit-tested.

use crate::stream::Stream;
use std::collections::HashMap;
use std::net::Shutdown;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Set in [`Activity::state`] once the connection is claimed for closing.
const CLAIMED: u64 = 1 << 63;

/// One connection's requests in flight, and since when it has had none.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Requests between their first byte and their reply, plus [`CLAIMED`].
    state: AtomicU64,
    /// When the last request ended (or the connection was accepted), in microseconds
    /// since `epoch`.
    idle_since: AtomicU64,
    epoch: Instant,
}

impl Activity {
    /// A connection accepted now, idle; times are kept relative to `epoch`.
    pub(crate) fn new(epoch: Instant) -> Activity {
        let a = Activity {
            state: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            epoch,
        };
        a.idle_since.store(a.now(), Ordering::Relaxed);
        a
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// A request starts (its first byte arrived). False when the connection has been
    /// claimed for closing: the request must not run.
    pub(crate) fn begin(&self) -> bool {
        self.state.fetch_add(1, Ordering::AcqRel) & CLAIMED == 0
    }

    /// A request that [`Activity::begin`] started has ended (replied to or dropped).
    pub(crate) fn end(&self) {
        self.idle_since.store(self.now(), Ordering::Relaxed);
        self.state.fetch_sub(1, Ordering::AcqRel);
    }

    /// How long the connection has had no request in flight; `None` while one is.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        if self.state.load(Ordering::Acquire) != 0 {
            return None;
        }
        let since = self.idle_since.load(Ordering::Relaxed);
        Some(Duration::from_micros(self.now().saturating_sub(since)))
    }

    /// Claims the connection for closing if it is idle; after success no request starts.
    fn claim(&self) -> bool {
        self.state
            .compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// An open connection as the listener sees it.
struct Slot {
    /// A handle on the connection's socket, to shut it.
    stream: Stream,
    activity: Arc<Activity>,
}

/// What became of a new connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// A slot was free.
    Admitted,
    /// Every slot was taken: connection `closed`, idle for `idle_for`, was closed to make
    /// room.
    ClosedIdle { closed: u64, idle_for: Duration },
    /// Every slot is taken by a busy connection: the new one must be closed.
    Full,
}

/// The open connections, at most `max` of them.
pub(crate) struct Connections {
    max: usize,
    open: Mutex<HashMap<u64, Slot>>,
}

impl Connections {
    pub(crate) fn new(max: usize) -> Connections {
        Connections {
            max: max.max(1),
            open: Mutex::new(HashMap::new()),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Slot>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot for connection `id`, closing the connection idle longest when every
    /// slot is taken. `stream` is a handle on its socket.
    pub(crate) fn admit(&self, id: u64, stream: Stream, activity: Arc<Activity>) -> Admission {
        let mut open = self.open();
        let mut admission = Admission::Admitted;
        if open.len() >= self.max {
            admission = Admission::Full;
            let mut idle: Vec<(Duration, u64)> = open
                .iter()
                .filter_map(|(&k, s)| Some((s.activity.idle_for()?, k)))
                .collect();
            idle.sort_unstable_by(|a, b| b.cmp(a));
            // The longest idle first; one that started a request meanwhile is skipped.
            for (idle_for, k) in idle {
                if open[&k].activity.claim() {
                    if let Some(slot) = open.remove(&k) {
                        slot.stream.shutdown(Shutdown::Both);
                    }
                    admission = Admission::ClosedIdle {
                        closed: k,
                        idle_for,
                    };
                    break;
                }
            }
            if admission == Admission::Full {
                return admission;
            }
        }
        open.insert(id, Slot { stream, activity });
        admission
    }

    /// Gives connection `id`'s slot back, shutting its socket (if still open); returns
    /// how many connections are left open.
    pub(crate) fn remove(&self, id: u64) -> usize {
        let mut open = self.open();
        if let Some(slot) = open.remove(&id) {
            slot.stream.shutdown(Shutdown::Both);
        }
        open.len()
    }

    /// Shuts every open connection's socket `how`.
    pub(crate) fn shutdown_all(&self, how: Shutdown) {
        for slot in self.open().values() {
            slot.stream.shutdown(how);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::thread::sleep;

    fn stream() -> (Stream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (Stream::Unix(a), b)
    }

    #[test]
    fn activity_is_idle_between_requests_and_claims_race_with_begin() {
        let a = Activity::new(Instant::now());
        assert!(a.idle_for().is_some());
        assert!(a.begin());
        assert!(a.begin());
        assert_eq!(a.idle_for(), None);
        assert!(!a.claim(), "busy connections are not claimed");
        a.end();
        assert_eq!(a.idle_for(), None);
        a.end();
        sleep(Duration::from_millis(5));
        assert!(a.idle_for().unwrap() >= Duration::from_millis(5));
        assert!(a.claim());
        assert!(!a.begin(), "a claimed connection starts nothing");
        assert!(!a.claim());
    }

    #[test]
    fn a_full_table_closes_the_connection_idle_longest_or_refuses() {
        let epoch = Instant::now();
        let t = Connections::new(3);
        let mut acts: Vec<Arc<Activity>> = Vec::new();
        let mut peers = Vec::new();
        for id in 0..5 {
            // Each accepted (idle from now) 2 ms after the one before.
            sleep(Duration::from_millis(2));
            acts.push(Arc::new(Activity::new(epoch)));
            if id < 3 {
                let (s, peer) = stream();
                peers.push(peer);
                assert_eq!(
                    t.admit(id, s, acts[id as usize].clone()),
                    Admission::Admitted
                );
            }
        }
        // 0 is busy; 1 has been idle longer than 2.
        assert!(acts[0].begin());
        let (s, _p3) = stream();
        match t.admit(3, s, acts[3].clone()) {
            Admission::ClosedIdle {
                closed: 1,
                idle_for,
            } => assert!(idle_for >= Duration::from_millis(2)),
            other => panic!("{other:?}"),
        }
        // The closed connection's socket was shut: its peer reads end of stream.
        use std::io::Read;
        assert_eq!(peers[1].read(&mut [0u8; 1]).unwrap(), 0);
        assert!(!acts[1].begin());
        // Busy: 0, 2 and 3. Nobody is idle: refused, nothing closed.
        assert!(acts[2].begin());
        assert!(acts[3].begin());
        let (s, _p4) = stream();
        assert_eq!(t.admit(4, s, acts[4].clone()), Admission::Full);
        // A slot given back is free again.
        t.remove(0);
        let (s, _p4) = stream();
        assert_eq!(t.admit(4, s, acts[4].clone()), Admission::Admitted);
    }
}
