//! One TLS session used by one reading thread and any number of writing threads at once,
//! as NBD's transmission phase uses a socket: a reader parses requests (or, in a client,
//! replies) while other threads send. [`split`] turns an established session and two
//! handles on its socket into a [`TlsReader`] and a [`TlsWriter`].
//!
//! A TLS session is one state machine (sequence numbers, keys), so both halves share it
//! behind a mutex, and nobody holds that mutex during socket I/O: the reader reads
//! ciphertext from its socket handle with no lock held, then feeds it to the session and
//! takes the plaintext out under the lock; a writer encrypts under the lock into a
//! buffer of its own, releases the lock, and sends the buffer. A reader blocked on its
//! socket therefore never stops a reply from leaving, nor a blocked send the reader. The
//! sends themselves are serialized by a second mutex, taken before the session's (the one
//! lock order), so records leave in the order they were sealed; the reader takes it too
//! when the session has something to send by itself (an alert, a key update).
//!
//! A receive timeout on the socket surfaces as the socket's error with no state lost: the
//! caller may read again (the server's tick). End of stream without a TLS close_notify
//! is `UnexpectedEof`, never a short clean end (a truncation attack would otherwise pass).

use rustls::Connection;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};

/// Ciphertext read from the socket at once (four full TLS records).
const RAW_BUFFER: usize = 64 * 1024;

/// Plaintext sealed per round of a write: the round's ciphertext is sent before the next
/// is sealed, so a large write holds the session's lock only in short turns and its
/// buffer stays this small.
const SEAL_ROUND: usize = 256 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sending side: the socket handle and the ciphertext on its way out.
struct Out<S> {
    sock: S,
    sealed: Vec<u8>,
}

/// What both halves share.
struct Shared<S> {
    session: Mutex<Connection>,
    out: Mutex<Out<S>>,
}

impl<S: Write> Shared<S> {
    /// Sends what the session has queued (sealed records, alerts); `out` is held.
    fn push(&self, out: &mut Out<S>) -> io::Result<()> {
        {
            let mut s = lock(&self.session);
            while s.wants_write() {
                s.write_tls(&mut out.sealed)?;
            }
        }
        if out.sealed.is_empty() {
            return Ok(());
        }
        let sent = out.sock.write_all(&out.sealed);
        out.sealed.clear();
        sent
    }
}

/// Splits an established session (its handshake done) into a reading and a writing half;
/// `read` and `write` are two handles on the same socket.
pub fn split<S: Read + Write>(
    mut session: Connection,
    read: S,
    write: S,
) -> (TlsReader<S>, TlsWriter<S>) {
    session.set_buffer_limit(Some(SEAL_ROUND));
    let shared = Arc::new(Shared {
        session: Mutex::new(session),
        out: Mutex::new(Out {
            sock: write,
            sealed: Vec::new(),
        }),
    });
    (
        TlsReader {
            shared: shared.clone(),
            sock: read,
            raw: vec![0u8; RAW_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
        },
        TlsWriter { shared },
    )
}

/// The reading half of a split session: plaintext out of the socket's records.
pub struct TlsReader<S> {
    shared: Arc<Shared<S>>,
    sock: S,
    /// Ciphertext read and not yet given to the session: `raw[start..end]`.
    raw: Box<[u8]>,
    start: usize,
    end: usize,
    /// The socket reached end of stream.
    eof: bool,
}

impl<S> std::fmt::Debug for TlsReader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsReader").finish_non_exhaustive()
    }
}

impl<S: Read + Write> Read for TlsReader<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            // Under the session's lock: plaintext already there, or feed it ciphertext.
            let queued = {
                let mut s = lock(&self.shared.session);
                match s.reader().read(buf) {
                    // Ok(0) only after the peer's close_notify.
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                let fed = if self.start < self.end {
                    let mut pending = &self.raw[self.start..self.end];
                    self.start += s.read_tls(&mut pending)?;
                    true
                } else if self.eof {
                    // Tells the session the stream ended: its reader then says whether
                    // that was clean.
                    s.read_tls(&mut io::empty())?;
                    true
                } else {
                    false
                };
                fed.then(|| (s.process_new_packets(), s.wants_write()))
            };
            match queued {
                Some((processed, wants_write)) => {
                    if wants_write {
                        // The session answers by itself (an alert about bad input, a
                        // key update); a failure to send is secondary to a bad record.
                        let sent = self.push();
                        processed.map_err(invalid)?;
                        sent?;
                    } else {
                        processed.map_err(invalid)?;
                    }
                }
                None => {
                    // Nothing buffered: wait on the socket, no lock held. A receive
                    // timeout returns here as an error and loses nothing.
                    let n = self.sock.read(&mut self.raw)?;
                    self.start = 0;
                    self.end = n;
                    self.eof = n == 0;
                }
            }
        }
    }
}

impl<S: Write> TlsReader<S> {
    fn push(&self) -> io::Result<()> {
        let mut out = lock(&self.shared.out);
        self.shared.push(&mut out)
    }
}

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// The writing half of a split session. Each `write` call sends its whole buffer, sealed
/// in records no other writer's records interleave with (a reply header and its data
/// stay together); clones share the session.
pub struct TlsWriter<S> {
    shared: Arc<Shared<S>>,
}

impl<S> Clone for TlsWriter<S> {
    fn clone(&self) -> Self {
        TlsWriter {
            shared: self.shared.clone(),
        }
    }
}

impl<S> std::fmt::Debug for TlsWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsWriter").finish_non_exhaustive()
    }
}

impl<S: Write> TlsWriter<S> {
    /// Sends a TLS close_notify, so the peer sees a clean end; best effort (the peer may
    /// be gone).
    pub fn close(&self) {
        let mut out = lock(&self.shared.out);
        lock(&self.shared.session).send_close_notify();
        let _ = self.shared.push(&mut out);
    }
}

impl<S: Write> Write for TlsWriter<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut guard = lock(&self.shared.out);
        let out = &mut *guard;
        let mut rest = buf;
        while !rest.is_empty() {
            let taken = {
                let mut s = lock(&self.shared.session);
                let n = s.writer().write(rest)?;
                while s.wants_write() {
                    s.write_tls(&mut out.sealed)?;
                }
                n
            };
            rest = &rest[taken..];
            if out.sealed.is_empty() {
                if taken == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the TLS session takes no more data (closed)",
                    ));
                }
                continue;
            }
            let sent = out.sock.write_all(&out.sealed);
            out.sealed.clear();
            sent?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut out = lock(&self.shared.out);
        self.shared.push(&mut out)
    }
}
