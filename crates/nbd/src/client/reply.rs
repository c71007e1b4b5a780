//! Putting one read's reply together from structured reply chunks, apart from the socket:
//! each OFFSET_DATA or OFFSET_HOLE chunk must lie inside the request, chunks may come in
//! any order but must not overlap, an ERROR chunk fails the read whatever else came, and
//! the read is complete only when, at the DONE flag, every byte was covered. A reply
//! that covers less is an error, never a buffer with zeros where data was missing.

use std::io;

/// A read in flight: its range, the buffer the data goes to (`len` bytes from `start`),
/// what chunks covered.
#[derive(Debug)]
pub(crate) struct ReadReply {
    offset: u64,
    buf: Vec<u8>,
    start: usize,
    len: usize,
    /// Ranges covered so far, relative to `offset`.
    covered: Vec<(u64, u64)>,
    /// The first failure: a server error code, or a malformed chunk (`None` code).
    failure: Option<(Option<u32>, String)>,
}

impl ReadReply {
    /// A read of `len` bytes at `offset` into `buf` from byte `start`, which must fit.
    pub(crate) fn new(offset: u64, buf: Vec<u8>, start: usize, len: usize) -> ReadReply {
        assert!(start.checked_add(len).is_some_and(|end| end <= buf.len()));
        ReadReply {
            offset,
            buf,
            start,
            len,
            covered: Vec::new(),
            failure: None,
        }
    }

    /// Where the whole read goes (a simple reply fills it in one go).
    pub(crate) fn whole(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    /// The buffer, filled by a simple reply.
    pub(crate) fn into_buf(self) -> Vec<u8> {
        self.buf
    }

    /// Where the `len` bytes of an OFFSET_DATA chunk at `at` go, recorded as covered;
    /// `None` (the read failed; the caller skips the bytes) when it lies outside the
    /// request.
    pub(crate) fn data(&mut self, at: u64, len: u64) -> Option<&mut [u8]> {
        let (a, b) = self.place(at, len)?;
        Some(&mut self.whole()[a as usize..b as usize])
    }

    /// An OFFSET_HOLE chunk: `len` bytes at `at` read as zeros.
    pub(crate) fn hole(&mut self, at: u64, len: u64) {
        if let Some((a, b)) = self.place(at, len) {
            self.whole()[a as usize..b as usize].fill(0);
        }
    }

    /// An ERROR chunk: the read fails with `code`, whatever else comes.
    pub(crate) fn error(&mut self, code: u32, message: &str) {
        if !matches!(self.failure, Some((Some(_), _))) {
            self.failure = Some((Some(code), message.to_string()));
        }
    }

    fn place(&mut self, at: u64, len: u64) -> Option<(u64, u64)> {
        let end = self.len as u64;
        let rel = at.checked_sub(self.offset);
        match rel.and_then(|r| Some((r, r.checked_add(len)?))) {
            Some((a, b)) if b <= end && len > 0 => {
                self.covered.push((a, b));
                Some((a, b))
            }
            _ => {
                self.malformed(format!(
                    "a chunk of {len} bytes at {at}, outside the read of {end} bytes at {}",
                    self.offset
                ));
                None
            }
        }
    }

    fn malformed(&mut self, why: String) {
        if self.failure.is_none() {
            self.failure = Some((None, why));
        }
    }

    /// The outcome at the DONE flag: the data when every byte was covered exactly once
    /// and no error came; the server's error code as an OS error; otherwise `InvalidData`.
    pub(crate) fn finish(mut self) -> io::Result<Vec<u8>> {
        self.covered.sort_unstable();
        let mut at = 0;
        for &(a, b) in &self.covered {
            if a != at {
                let why = if a < at {
                    format!("chunks overlap at byte {}", self.offset + a)
                } else {
                    format!("bytes {}..{} never came", self.offset + at, self.offset + a)
                };
                self.malformed(why);
                break;
            }
            at = b;
        }
        if at != self.len as u64 && self.failure.is_none() {
            self.malformed(format!(
                "the reply covered {at} of {} bytes at {}",
                self.len, self.offset
            ));
        }
        match self.failure {
            None => Ok(self.buf),
            Some((Some(code), _)) => Err(io::Error::from_raw_os_error(code as i32)),
            Some((None, why)) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a short or malformed read reply: {why}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(len: usize) -> ReadReply {
        ReadReply::new(1000, vec![0xee; len], 0, len)
    }

    #[test]
    fn a_read_into_part_of_a_buffer_leaves_the_rest_alone() {
        let mut r = ReadReply::new(1000, vec![0xee; 16], 4, 10);
        r.data(1006, 4).unwrap().copy_from_slice(b"6789");
        r.data(1000, 6).unwrap().copy_from_slice(b"012345");
        assert_eq!(r.finish().unwrap(), b"\xee\xee\xee\xee0123456789\xee\xee");
        let mut r = ReadReply::new(1000, vec![0xee; 16], 4, 10);
        assert!(
            r.data(1008, 4).is_none(),
            "past the read, though inside the buffer"
        );
        r.data(1000, 10).unwrap();
        assert!(r.finish().is_err());
    }

    #[test]
    fn data_and_holes_in_any_order_make_a_whole_read() {
        let mut r = read(10);
        r.data(1004, 6).unwrap().copy_from_slice(b"456789");
        r.hole(1000, 2);
        r.data(1002, 2).unwrap().copy_from_slice(b"23");
        assert_eq!(r.finish().unwrap(), b"\x00\x0023456789");
    }

    #[test]
    fn a_read_not_wholly_covered_is_an_error_never_zeros() {
        let mut r = read(10);
        r.data(1000, 4).unwrap();
        r.data(1006, 4).unwrap();
        let e = r.finish().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("1004..1006 never came"), "{e}");
        let mut r = read(10);
        r.data(1000, 9).unwrap();
        assert!(r
            .finish()
            .unwrap_err()
            .to_string()
            .contains("covered 9 of 10"));
        assert!(read(10).finish().is_err(), "no chunk at all");
    }

    #[test]
    fn overlapping_or_outside_chunks_fail_the_read() {
        let mut r = read(10);
        r.data(1000, 6).unwrap();
        r.data(1004, 6).unwrap();
        assert!(r.finish().unwrap_err().to_string().contains("overlap"));
        for (at, len) in [(999, 2), (1008, 3), (1000, 0), (u64::MAX, 2)] {
            let mut r = read(10);
            assert!(r.data(at, len).is_none());
            r.data(1000, 10).unwrap();
            assert!(r.finish().unwrap_err().to_string().contains("outside"));
        }
    }

    #[test]
    fn an_error_chunk_fails_the_read_with_its_code() {
        let mut r = read(4);
        r.data(1000, 4).unwrap();
        r.error(5, "bad sector");
        assert_eq!(r.finish().unwrap_err().raw_os_error(), Some(5));
        let mut r = read(4);
        r.data(999, 1);
        r.error(28, "");
        assert_eq!(
            r.finish().unwrap_err().raw_os_error(),
            Some(28),
            "the server's code wins"
        );
    }
}
