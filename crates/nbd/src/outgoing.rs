//! The sending side of a connection in the transmission phase ([`Outgoing`]): replies from
//! every worker onto one socket, whole and never interleaved, without a worker ever
//! sleeping on another's send.
//!
//! A worker with a reply queues it, then tries to take the socket. If the socket is free,
//! it sends every reply queued (its own and any that others queued meanwhile) in as few
//! `writev` calls as the socket takes, and looks again after letting the socket go. If
//! another worker holds the socket, it leaves at once: that worker looks at the queue after
//! letting the socket go, so the reply leaves with its batch. Many small replies (4 KiB
//! reads at a deep queue) thus cost no wake-up between the workers and fewer system calls
//! than replies, where a plain mutex on the socket made every worker that finished while
//! another was sending sleep and be woken. Replies may leave in any order (the client
//! matches them by cookie).
//!
//! What a reply holds until it has been sent (its buffer, its share of the connection's
//! budget, the end of its request) travels with it as a token, handed to the `sent`
//! callback after the send (or after the send failed: the socket is then shut, and later
//! replies are dropped unsent).

use std::io::{self, IoSlice, Write};
use std::sync::{Mutex, MutexGuard};

/// Replies sent per `writev` at most (below the kernel's IOV_MAX of 1024).
const BATCH: usize = 64;

/// The bytes of one reply: `data[..len]`.
pub(crate) struct Reply<T> {
    pub(crate) data: Vec<u8>,
    pub(crate) len: usize,
    /// What the reply holds until it has left (or could not).
    pub(crate) token: T,
}

/// The replies of one connection, onto one writer.
pub(crate) struct Outgoing<W, T> {
    writer: Mutex<Writer<W>>,
    queued: Mutex<Vec<Reply<T>>>,
}

struct Writer<W> {
    w: W,
    /// A send failed: nothing more is written.
    broken: bool,
    /// `writev` calls made (for tests).
    calls: u64,
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<W: Write, T> Outgoing<W, T> {
    pub(crate) fn new(w: W) -> Outgoing<W, T> {
        Outgoing {
            writer: Mutex::new(Writer {
                w,
                broken: false,
                calls: 0,
            }),
            queued: Mutex::new(Vec::new()),
        }
    }

    /// Sends `reply`, now or with another worker's batch. Every reply this call sends is
    /// handed back to `sent(reply, ok)` after it left (`ok`) or failed; on the first
    /// failure `broken()` runs once (to shut the socket) and no later reply is written.
    pub(crate) fn send(&self, reply: Reply<T>, sent: impl Fn(Reply<T>, bool), broken: impl Fn()) {
        lock(&self.queued).push(reply);
        loop {
            // Another worker sends: it looks at the queue after letting the socket go.
            let Ok(mut w) = self.writer.try_lock() else {
                return;
            };
            let batch = std::mem::take(&mut *lock(&self.queued));
            if batch.is_empty() {
                return;
            }
            let was_broken = w.broken;
            let ok = !was_broken && w.send_all(&batch).is_ok();
            w.broken = !ok;
            drop(w);
            if !ok && !was_broken {
                broken();
            }
            for r in batch {
                sent(r, ok);
            }
            // A reply queued while the socket was held, by a worker that then left.
            if lock(&self.queued).is_empty() {
                return;
            }
        }
    }

    /// `writev` calls made so far.
    #[cfg(test)]
    fn calls(&self) -> u64 {
        lock(&self.writer).calls
    }
}

impl<W: Write> Writer<W> {
    /// Writes every reply of `batch` whole, in order, `BATCH` replies per `writev` at most.
    fn send_all<T>(&mut self, batch: &[Reply<T>]) -> io::Result<()> {
        for group in batch.chunks(BATCH) {
            let mut slices: Vec<IoSlice<'_>> = group
                .iter()
                .map(|r| IoSlice::new(&r.data[..r.len]))
                .collect();
            let mut left = &mut slices[..];
            while !left.is_empty() {
                self.calls += 1;
                match self.w.write_vectored(left) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => IoSlice::advance_slices(&mut left, n),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::thread;

    /// A writer that takes at most `max` bytes per call, blocking the first call until
    /// released, and counts what it got.
    struct Slow {
        got: Arc<Mutex<Vec<u8>>>,
        max: usize,
        gate: Option<std::sync::mpsc::Receiver<()>>,
        fail: bool,
    }

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(gate) = self.gate.take() {
                gate.recv().unwrap();
            }
            if self.fail {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.max);
            lock(&self.got).extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn reply(byte: u8, len: usize) -> Reply<u8> {
        Reply {
            data: vec![byte; len + 3],
            len,
            token: byte,
        }
    }

    #[test]
    fn replies_queued_while_the_socket_is_held_leave_with_the_holder_whole() {
        let got = Arc::new(Mutex::new(vec![]));
        let (open, gate) = std::sync::mpsc::channel();
        let out = Outgoing::new(Slow {
            got: got.clone(),
            max: 5,
            gate: Some(gate),
            fail: false,
        });
        let sent = AtomicUsize::new(0);
        let count = |_r: Reply<u8>, ok: bool| {
            assert!(ok);
            sent.fetch_add(1, Ordering::Relaxed);
        };
        thread::scope(|s| {
            // The first sender holds the socket, blocked in its first write.
            let first = s.spawn(|| out.send(reply(1, 7), count, || panic!("broken")));
            let t0 = std::time::Instant::now();
            while out.writer.try_lock().is_ok() {
                assert!(t0.elapsed().as_secs() < 10, "the first send never started");
                thread::yield_now();
            }
            // These find the socket taken and return at once, their replies queued.
            for b in 2..=4 {
                out.send(reply(b, 6), count, || panic!("broken"));
            }
            assert_eq!(sent.load(Ordering::Relaxed), 0, "nothing sent yet");
            open.send(()).unwrap();
            first.join().unwrap();
        });
        assert_eq!(sent.load(Ordering::Relaxed), 4);
        let mut want = vec![1u8; 7];
        for b in 2..=4 {
            want.extend_from_slice(&[b; 6]);
        }
        assert_eq!(*lock(&got), want, "each reply whole, in the order queued");
    }

    #[test]
    fn a_batch_leaves_in_few_calls_and_a_failure_shuts_once() {
        let got = Arc::new(Mutex::new(vec![]));
        let out: Outgoing<_, u8> = Outgoing::new(Slow {
            got: got.clone(),
            max: usize::MAX,
            gate: None,
            fail: false,
        });
        lock(&out.queued).extend((0..100).map(|b| reply(b, 16)));
        out.send(
            reply(100, 16),
            |_, ok: bool| assert!(ok),
            || panic!("broken"),
        );
        // `Slow` writes only the first slice per call (the default `write_vectored`), so
        // this counts slices; a socket takes a whole group per call.
        assert_eq!(out.calls(), 101);
        assert_eq!(lock(&got).len(), 101 * 16);

        let out: Outgoing<_, u8> = Outgoing::new(Slow {
            got,
            max: 1,
            gate: None,
            fail: true,
        });
        let shut = AtomicUsize::new(0);
        let failed = AtomicUsize::new(0);
        for b in 0..3 {
            out.send(
                reply(b, 4),
                |_, ok: bool| {
                    assert!(!ok);
                    failed.fetch_add(1, Ordering::Relaxed);
                },
                || {
                    shut.fetch_add(1, Ordering::Relaxed);
                },
            );
        }
        assert_eq!(shut.into_inner(), 1, "the socket is shut once");
        assert_eq!(failed.into_inner(), 3, "every token comes back");
        assert_eq!(out.calls(), 1, "nothing written after the failure");
    }

    #[test]
    fn a_unix_socket_takes_a_batch_in_one_writev() {
        use std::io::Read;
        use std::os::unix::net::UnixStream;
        let (a, mut b) = UnixStream::pair().unwrap();
        let out: Outgoing<_, u8> = Outgoing::new(a);
        lock(&out.queued).extend((0..15).map(|b| reply(b, 4096 + 16)));
        out.send(
            reply(15, 4096 + 16),
            |_, ok: bool| assert!(ok),
            || panic!("broken"),
        );
        assert_eq!(out.calls(), 1, "16 replies of 4 KiB in one call");
        drop(out);
        let mut all = vec![];
        b.read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 16 * (4096 + 16));
        assert!(all
            .chunks(4096 + 16)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&x| x == i as u8)));
    }
}
