//! Streams through the engine: [`Volume::write_from`] stores everything a reader yields and
//! [`Volume::read_to`] writes plaintext to a writer, each with the reader or writer on a
//! second thread, so reading the input (a pipe, a file) or writing the output overlaps the
//! engine's work instead of adding to it. Buffers are allocated per call (per transfer),
//! not per request, and circulate between the two threads over channels.
//!
//! `write_from` uses pieces of one chunk and encrypts them in place: a piece is read,
//! encrypted and written while it stays in L2 (with larger pieces copied into a separate
//! buffer, memory traffic was the limit; docs/PERFORMANCE.md). `read_to` uses 8 MiB
//! pieces decrypted in place and handed to the writer.

use super::{crypt_error, invalid, read_only_error, Volume};
use std::io::{self, Read, Write};
use std::sync::mpsc;

/// Bytes per piece of [`Volume::read_to`], and how many pieces may wait between the two
/// threads.
const PIPE_PIECE: usize = 8 << 20;
const PIPE_DEPTH: usize = 2;

/// Pieces of input that may wait for [`Volume::write_from`]'s writer.
const WRITE_PIPE_DEPTH: usize = 4;

/// Reads until `buf` is full, the input ends or it fails: the bytes read, and the error
/// if it failed (the bytes before a failure still count).
fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> (usize, io::Result<()>) {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (n, Err(e)),
        }
    }
    (n, Ok(()))
}

impl Volume {
    /// Stores everything `input` yields, until its end, as plaintext from `offset`;
    /// returns the number of bytes stored. A second thread reads the next piece of input
    /// while the engine encrypts and writes the current one, so reading the input (a pipe,
    /// a file) overlaps the work instead of adding to it. Pieces after the first start on
    /// sector boundaries. Input that goes beyond the end of the volume is an error
    /// (`InvalidInput`) after what fits has been stored; so is a failing `input`, after
    /// what it gave before has been stored, and a piece that touches a fenced range
    /// (`PermissionDenied`, [`WriteFence`](super::WriteFence)), after the pieces before it.
    pub fn write_from(&self, input: &mut (dyn Read + Send), offset: u64) -> io::Result<u64> {
        if self.read_only {
            return Err(read_only_error(self.read_only_why));
        }
        self.check_range(offset, 0)?;
        let piece = self.chunk;
        let first = piece - (offset % self.sector as u64) as usize;
        let (full_tx, full_rx) =
            mpsc::sync_channel::<io::Result<(Vec<u8>, usize)>>(WRITE_PIPE_DEPTH);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
        for _ in 0..WRITE_PIPE_DEPTH + 1 {
            // Allocated per call (per transfer), not per request.
            let _ = empty_tx.send(vec![0; piece]);
        }
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut want = first;
                while let Ok(mut buf) = empty_rx.recv() {
                    let (n, status) = read_full(input, &mut buf[..want]);
                    if n > 0 && full_tx.send(Ok((buf, n))).is_err() {
                        break;
                    }
                    if let Err(e) = status {
                        let _ = full_tx.send(Err(e));
                        break;
                    }
                    if n < want {
                        break;
                    }
                    want = piece;
                }
                // Dropping full_tx ends the writer's loop.
            });
            let mut at = offset;
            let mut result = Ok(());
            for piece in full_rx.iter() {
                let (mut buf, n) = match piece {
                    Ok(p) => p,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                };
                let fits = (self.size - at).min(n as u64) as usize;
                if let Err(e) = self.store_owned(&mut buf[..fits], at) {
                    result = Err(e);
                    break;
                }
                at += fits as u64;
                if fits < n {
                    result = Err(invalid(format!(
                        "the input goes beyond the end of the volume ({} bytes); the first \
                         {} bytes were stored from offset {offset}",
                        self.size,
                        at - offset
                    )));
                    break;
                }
                let _ = empty_tx.send(buf);
            }
            // On an early stop, wake the reader: its send or its recv now fails.
            drop(full_rx);
            drop(empty_tx);
            result.map(|()| at - offset)
        })
    }

    /// Writes `len` bytes of plaintext from `offset` to `output`. The engine reads and
    /// decrypts the next piece while a second thread writes the current one to `output`.
    /// A failing `output` (a closed pipe) is returned as its error.
    pub fn read_to(
        &self,
        output: &mut (dyn Write + Send),
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let len_usize = usize::try_from(len).map_err(|_| invalid(format!("{len} bytes")))?;
        self.check_range(offset, len_usize)?;
        let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(PIPE_DEPTH);
        let (empty_tx, empty_rx) = mpsc::channel::<io::Result<Vec<u8>>>();
        for _ in 0..PIPE_DEPTH + 1 {
            let _ = empty_tx.send(Ok(vec![0; PIPE_PIECE]));
        }
        std::thread::scope(|scope| {
            let writer_tx = empty_tx.clone();
            scope.spawn(move || {
                for (buf, n) in full_rx.iter() {
                    match output.write_all(&buf[..n]) {
                        Ok(()) => {
                            if writer_tx.send(Ok(buf)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = writer_tx.send(Err(e));
                            return;
                        }
                    }
                }
                if let Err(e) = output.flush() {
                    let _ = writer_tx.send(Err(e));
                }
            });
            drop(empty_tx);
            let mut at = offset;
            let end = offset + len;
            // The first piece ends on a sector boundary, so the others are aligned.
            let mut want = PIPE_PIECE - (offset % self.sector as u64) as usize;
            let mut result = Ok(());
            while at < end {
                let mut buf = match empty_rx.recv() {
                    Ok(Ok(buf)) => buf,
                    Ok(Err(e)) => {
                        result = Err(e);
                        break;
                    }
                    Err(_) => break, // the writer is gone (it reported why)
                };
                let n = (end - at).min(want as u64) as usize;
                if let Err(e) = self.read_at(&mut buf[..n], at) {
                    result = Err(e);
                    break;
                }
                if full_tx.send((buf, n)).is_err() {
                    break;
                }
                at += n as u64;
                want = PIPE_PIECE;
            }
            drop(full_tx);
            // Let the writer drain; a write error it reports wins over a clean end.
            for msg in empty_rx.iter() {
                if let Err(e) = msg {
                    if result.is_ok() {
                        result = Err(e);
                    }
                }
            }
            result
        })
    }

    /// Stores `buf` at `offset` like [`Volume::write_at`], but may encrypt in place: `buf`
    /// holds ciphertext or garbage afterwards. Whole aligned sectors (all of
    /// [`Volume::write_from`]'s pieces but the edges of the transfer) go out in one `pwrite`
    /// with no copy; anything else (and every write of an authenticated layout, whose
    /// stored sectors are larger) takes the general path.
    fn store_owned(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let ss = self.sector as u64;
        if !offset.is_multiple_of(ss)
            || !(buf.len() as u64).is_multiple_of(ss)
            || self.read_only
            || self.layout.is_authenticated()
        {
            return self.write_at(buf, offset);
        }
        self.check_write(offset, buf.len() as u64)?;
        let first = offset / ss;
        self.layout.encrypt(first, buf).map_err(crypt_error)?;
        self.store.write_at(buf, self.layout.position(first))
    }
}
