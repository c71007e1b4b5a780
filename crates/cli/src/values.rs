//! The values the command line takes apart itself, and how a command fails: sizes (`256M`,
//! `1GiB`), hex with white space in it (keys, IVs, AAD), the bytes of a key file or a
//! passphrase line (read straight into secret memory, with no buffered copy). A library
//! target of the `sectorcrypt` package, so that the fuzz targets (`fuzz/`) call exactly
//! what the binary calls; the binary's commands use these from here, and [`failure`] is
//! the binary's failure type (exit codes).
#![forbid(unsafe_code)]

pub mod failure;

use failure::Failure;
use sectorcrypt_crypto::secret::SecretBytes;
use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::path::Path;
use zeroize::Zeroizing;

/// A passphrase or key, in secret memory (locked, out of core dumps, wiped when dropped).
pub type Secret = SecretBytes;

/// cryptsetup's default key file size limit.
pub const MAX_KEY_FILE: usize = 8 << 20;

/// Size suffixes (lowercase) and the power of two they stand for.
const UNITS: [(&[&str], u32); 5] = [
    (&["", "b"], 0),
    (&["k", "kib", "kb"], 10),
    (&["m", "mib", "mb"], 20),
    (&["g", "gib", "gb"], 30),
    (&["t", "tib", "tb"], 40),
];

/// Parses `256M`, `1G`, `1GiB`, `4096` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, Failure> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| Failure::usage(format!("invalid size {s:?}")))?;
    let unit = unit.to_ascii_lowercase();
    let Some((_, shift)) = UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit.as_str()))
    else {
        let names: Vec<String> = UNITS[1..]
            .iter()
            .map(|(n, _)| n[0].to_uppercase())
            .collect();
        return Err(Failure::usage(format!(
            "invalid size unit in {s:?} ({})",
            names.join(", ")
        )));
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| Failure::usage(format!("size {s:?} is too large")))
}

/// Hex with any white space in it; `what` names the value in the error.
pub fn decode_hex(s: &str, what: &str) -> Result<Vec<u8>, Failure> {
    // Also used for keys: the copy without spaces is wiped when dropped.
    let clean: Zeroizing<String> =
        Zeroizing::new(s.chars().filter(|c| !c.is_whitespace()).collect());
    hex::decode(clean.as_bytes())
        .map_err(|e| Failure::usage(format!("{what}: not valid hex ({e})")))
}

/// `read(2)` on a descriptor, with no buffer of its own: what it reads goes only into the
/// caller's buffer (std's standard input keeps what it read ahead for the life of the
/// process).
#[derive(Debug)]
pub struct Unbuffered<'a>(pub BorrowedFd<'a>);

impl Read for Unbuffered<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        rustix::io::read(self.0, buf).map_err(io::Error::from)
    }
}

/// `input.read(buf)`, again when interrupted by a signal.
fn read_some(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match input.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Reads one byte of `input` onto the end of `s`; false at the end of the input.
pub fn read_byte(input: &mut dyn Read, s: &mut Secret) -> io::Result<bool> {
    s.reserve(1);
    let n = read_some(input, &mut s.spare_capacity_mut()[..1])?;
    s.set_len(s.len() + n);
    Ok(n == 1)
}

/// All of `input` read straight into secret memory, at most `max` bytes (`Ok(None)`
/// beyond).
pub fn read_all(input: &mut dyn Read, max: usize) -> io::Result<Option<Secret>> {
    let mut s = Secret::with_capacity(4096);
    loop {
        if s.spare_capacity_mut().is_empty() {
            s.reserve(s.capacity());
        }
        let room = s.spare_capacity_mut().len().min(max + 1 - s.len());
        let n = read_some(input, &mut s.spare_capacity_mut()[..room])?;
        if n == 0 {
            return Ok(Some(s));
        }
        s.set_len(s.len() + n);
        if s.len() > max {
            return Ok(None);
        }
    }
}

/// One line of `input` without its newline, at most `max` bytes (`Ok(None)` beyond), read
/// one byte at a time so that what follows it stays for the next reader.
pub fn read_line(input: &mut dyn Read, max: usize) -> io::Result<Option<Secret>> {
    let mut s = Secret::with_capacity(256);
    while read_byte(input, &mut s)? {
        if s.last() == Some(&b'\n') {
            s.set_len(s.len() - 1);
            break;
        }
        if s.len() > max {
            return Ok(None);
        }
    }
    Ok(Some(s))
}

/// The bytes of the key file `path`, read from `input` to its end: at most
/// [`MAX_KEY_FILE`] bytes, and not empty.
pub fn read_key_file(input: &mut dyn Read, path: &Path) -> Result<Secret, Failure> {
    let read = read_all(input, MAX_KEY_FILE)
        .map_err(|e| Failure::runtime(format!("reading key file {}: {e}", path.display())))?;
    match read {
        None => Err(Failure::usage(format!(
            "key file {} is larger than 8 MiB",
            path.display()
        ))),
        Some(s) if s.is_empty() => Err(Failure::usage(format!(
            "key file {} is empty",
            path.display()
        ))),
        Some(s) => Ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert!(parse_size("1X").is_err());
        assert!(parse_size("M").is_err());
    }

    #[test]
    fn hex_with_spaces_is_accepted_and_junk_is_not() {
        assert_eq!(decode_hex("00 ff\n10", "x").unwrap(), vec![0, 0xff, 0x10]);
        assert!(matches!(decode_hex("0g", "x"), Err(Failure::Usage(_))));
    }

    /// A pipe holding `bytes`, its writing end closed.
    fn pipe_with(bytes: &[u8]) -> io::PipeReader {
        use std::io::Write;
        let (r, mut w) = io::pipe().unwrap();
        w.write_all(bytes).unwrap();
        r
    }

    #[test]
    fn a_line_is_read_up_to_its_newline_and_no_further() {
        let f = pipe_with(b"first\nsecond\n");
        let mut f = Unbuffered(f.as_fd());
        let a = read_line(&mut f, 100).unwrap().unwrap();
        assert_eq!(&a[..], b"first");
        let b = read_line(&mut f, 100).unwrap().unwrap();
        assert_eq!(&b[..], b"second");
        assert!(read_line(&mut f, 100).unwrap().unwrap().is_empty());
        let long = pipe_with(&[b'x'; 101]);
        assert!(read_line(&mut Unbuffered(long.as_fd()), 100)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_whole_file_is_read_across_growth_up_to_the_limit() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let f = pipe_with(&data);
        let got = read_all(&mut Unbuffered(f.as_fd()), 20_000)
            .unwrap()
            .unwrap();
        assert_eq!(&got[..], &data[..]);
        let f = pipe_with(&data);
        assert!(read_all(&mut Unbuffered(f.as_fd()), 19_999)
            .unwrap()
            .is_none());
    }
}
