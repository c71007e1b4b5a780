//! Which connections are open and which of them are idle: each connection's [`Activity`]
//! (requests in flight, and since when it has had none), and the listener's tables of
//! connections ([`Connections`]): those in their handshake, in a bounded pool of their
//! own, and those past it, which make room for a new one by closing the one idle longest.
//!
//! A connection counts as open, and can take an idle one's slot, only once its handshake
//! is over (TLS included, the export chosen): until then it holds a handshake slot, and
//! makes room, when every handshake slot is taken, by closing the connection that has
//! been in its handshake longest. Connections that never finish their handshake therefore
//! close no client that did, whatever their number; the handshake deadline closes them.
//!
//! A connection past its handshake is busy from the first byte of a request until its
//! reply has been sent; otherwise it is idle. Closing an idle connection to make room and
//! the start of a request on it can race: both go through one atomic word, so either the
//! request starts and the connection is no longer a candidate, or the connection is
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

/// A connection still in its handshake, as the listener sees it.
struct Arrival {
    /// A handle on the connection's socket, to shut it.
    stream: Stream,
    /// When it was accepted.
    since: Instant,
}

/// What became of a new connection arriving, or of one that finished its handshake.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// A slot was free.
    Admitted,
    /// Every slot was taken: connection `closed`, idle (or in its handshake) for
    /// `idle_for`, was closed to make room.
    ClosedIdle { closed: u64, idle_for: Duration },
    /// Every slot is taken by a busy connection: the new one must be closed. Also the
    /// answer to a connection whose handshake was cut short meanwhile (closed to make
    /// room, or the server is shutting down).
    Full,
}

/// The two tables of connections, under one lock.
#[derive(Default)]
struct Tables {
    /// Connections in their handshake, at most `max_handshakes`.
    arriving: HashMap<u64, Arrival>,
    /// Connections past their handshake, at most `max`.
    open: HashMap<u64, Slot>,
}

/// The open connections: at most `max_handshakes` in their handshake, and apart from
/// them at most `max` past it.
///
/// A connection holds a handshake slot from `accept()` ([`Connections::arrive`]) and an
/// open slot only once its handshake is over, TLS included and the export chosen
/// ([`Connections::admit`]). A connection in its handshake can therefore close only
/// another one in its handshake to make room: silent or trickling connections, however
/// many, close no client that has finished its handshake, and the handshake deadline
/// frees their slots.
pub(crate) struct Connections {
    max: usize,
    max_handshakes: usize,
    tables: Mutex<Tables>,
}

impl Connections {
    pub(crate) fn new(max: usize, max_handshakes: usize) -> Connections {
        Connections {
            max: max.max(1),
            max_handshakes: max_handshakes.max(1),
            tables: Mutex::new(Tables::default()),
        }
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a handshake slot for connection `id`, just accepted, closing the connection
    /// in its handshake longest when every handshake slot is taken. `stream` is a handle
    /// on its socket. Never [`Admission::Full`].
    pub(crate) fn arrive(&self, id: u64, stream: Stream) -> Admission {
        let mut t = self.tables();
        let mut admission = Admission::Admitted;
        if t.arriving.len() >= self.max_handshakes {
            let oldest = t
                .arriving
                .iter()
                .min_by_key(|(_, a)| a.since)
                .map(|(&k, _)| k);
            if let Some((k, arrival)) = oldest.and_then(|k| Some((k, t.arriving.remove(&k)?))) {
                arrival.stream.shutdown(Shutdown::Both);
                admission = Admission::ClosedIdle {
                    closed: k,
                    idle_for: arrival.since.elapsed(),
                };
            }
        }
        t.arriving.insert(
            id,
            Arrival {
                stream,
                since: Instant::now(),
            },
        );
        admission
    }

    /// Moves connection `id`, whose handshake is over, from its handshake slot to an
    /// open slot, closing the connection idle longest when every open slot is taken.
    /// [`Admission::Full`] when no slot could be made, or when `id` no longer holds a
    /// handshake slot (closed to make room, or shut down): the connection must close.
    pub(crate) fn admit(&self, id: u64, activity: Arc<Activity>) -> Admission {
        let mut t = self.tables();
        if !t.arriving.contains_key(&id) {
            return Admission::Full;
        }
        let mut admission = Admission::Admitted;
        if t.open.len() >= self.max {
            admission = Admission::Full;
            let mut idle: Vec<(Duration, u64)> = t
                .open
                .iter()
                .filter_map(|(&k, s)| Some((s.activity.idle_for()?, k)))
                .collect();
            idle.sort_unstable_by(|a, b| b.cmp(a));
            // The longest idle first; one that started a request meanwhile is skipped.
            for (idle_for, k) in idle {
                if t.open[&k].activity.claim() {
                    if let Some(slot) = t.open.remove(&k) {
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
        if let Some(arrival) = t.arriving.remove(&id) {
            t.open.insert(
                id,
                Slot {
                    stream: arrival.stream,
                    activity,
                },
            );
        }
        admission
    }

    /// Gives connection `id`'s slot back, shutting its socket (if still open). When it
    /// held an open slot (its handshake was over), how many connections past their
    /// handshake are left; `None` when it held a handshake slot, or none any more.
    pub(crate) fn remove(&self, id: u64) -> Option<usize> {
        let mut t = self.tables();
        if let Some(a) = t.arriving.remove(&id) {
            a.stream.shutdown(Shutdown::Both);
            return None;
        }
        let slot = t.open.remove(&id)?;
        slot.stream.shutdown(Shutdown::Both);
        Some(t.open.len())
    }

    /// How many connections are past their handshake (clients being served).
    pub(crate) fn served(&self) -> usize {
        self.tables().open.len()
    }

    /// Shuts every open connection's socket `how`, and every connection in its
    /// handshake both ways (their handshake is not finished: they never get a slot).
    pub(crate) fn shutdown_all(&self, how: Shutdown) {
        let mut t = self.tables();
        for (_, a) in t.arriving.drain() {
            a.stream.shutdown(Shutdown::Both);
        }
        for slot in t.open.values() {
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
        let t = Connections::new(3, 8);
        let mut acts: Vec<Arc<Activity>> = Vec::new();
        let mut peers = Vec::new();
        for id in 0..5 {
            // Each past its handshake (idle from now) 2 ms after the one before.
            sleep(Duration::from_millis(2));
            acts.push(Arc::new(Activity::new(epoch)));
            let (s, peer) = stream();
            peers.push(peer);
            assert_eq!(t.arrive(id, s), Admission::Admitted);
            if id < 3 {
                assert_eq!(t.admit(id, acts[id as usize].clone()), Admission::Admitted);
            }
        }
        // 0 is busy; 1 has been idle longer than 2.
        assert!(acts[0].begin());
        match t.admit(3, acts[3].clone()) {
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
        assert_eq!(t.remove(1), None, "its slot went to 3");
        // Busy: 0, 2 and 3. Nobody is idle: refused, nothing closed.
        assert!(acts[2].begin());
        assert!(acts[3].begin());
        assert_eq!(t.admit(4, acts[4].clone()), Admission::Full);
        // A slot given back is free again.
        assert_eq!(t.remove(0), Some(2));
        assert_eq!(t.admit(4, acts[4].clone()), Admission::Admitted);
        assert_eq!(t.remove(4), Some(2));
    }

    #[test]
    fn connections_in_their_handshake_close_only_each_other() {
        let epoch = Instant::now();
        let t = Connections::new(2, 3);
        // Two clients past their handshake, idle.
        let mut peers = Vec::new();
        for id in 0..2 {
            let (s, peer) = stream();
            peers.push(peer);
            assert_eq!(t.arrive(id, s), Admission::Admitted);
            assert_eq!(
                t.admit(id, Arc::new(Activity::new(epoch))),
                Admission::Admitted
            );
        }
        // Many more connections arrive and never finish their handshake: each one past
        // the third closes the one in its handshake longest, never an open one.
        let mut silent = Vec::new();
        for id in 2..12u64 {
            sleep(Duration::from_millis(1));
            let (s, peer) = stream();
            silent.push(peer);
            let admission = t.arrive(id, s);
            if id < 5 {
                assert_eq!(admission, Admission::Admitted);
            } else {
                match admission {
                    Admission::ClosedIdle { closed, .. } => assert_eq!(closed, id - 3),
                    other => panic!("{other:?}"),
                }
            }
        }
        use std::io::Read;
        for (i, peer) in silent.iter_mut().enumerate() {
            peer.set_nonblocking(true).unwrap();
            let got = peer.read(&mut [0u8; 1]);
            if i < 7 {
                assert_eq!(got.unwrap(), 0, "connection {} was closed", i + 2);
            } else {
                assert!(got.is_err(), "connection {} is still open", i + 2);
            }
        }
        for peer in &mut peers {
            peer.set_nonblocking(true).unwrap();
            assert!(peer.read(&mut [0u8; 1]).is_err(), "open clients stay open");
        }
        // A connection closed in its handshake is not admitted when it finishes it.
        assert_eq!(t.admit(2, Arc::new(Activity::new(epoch))), Admission::Full);
        // Leaving in the handshake is not leaving the open table.
        assert_eq!(t.remove(11), None);
        assert_eq!(t.remove(0), Some(1));
        assert_eq!(t.remove(1), Some(0));
    }
}
