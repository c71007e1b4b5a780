//! The CLI's value parsers (`sectorcrypt_cli`): the first byte chooses one, the rest is
//! its input, and each answer is checked against an independent statement of what the
//! parser accepts.
//!
//! - sizes: digits then a unit (none, b, k/kib/kb ... t/tib/tb, any case) around white
//!   space, the value fitting in 64 bits;
//! - hex: an even number of hex digits once white space is removed, decoded byte by byte;
//! - key files: the exact bytes, read in pieces of any size with interruptions, refused
//!   only when empty.

use sectorcrypt_cli::{decode_hex, parse_size, read_key_file};
use std::io::{self, Read};
use std::path::Path;

/// The CLI values target.
pub fn cli_values(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => size(rest),
        1 => hex_value(rest),
        _ => key_file(rest),
    }
}

fn size(input: &[u8]) {
    let Ok(s) = std::str::from_utf8(input) else {
        return;
    };
    let got = parse_size(s).ok();
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let shift = match t[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => Some(0),
        "k" | "kib" | "kb" => Some(10),
        "m" | "mib" | "mb" => Some(20),
        "g" | "gib" | "gb" => Some(30),
        "t" | "tib" | "tb" => Some(40),
        _ => None,
    };
    let want = match (t[..digits].parse::<u64>(), shift) {
        (Ok(n), Some(shift)) => n.checked_mul(1 << shift),
        _ => None,
    };
    assert_eq!(got, want, "size {s:?}");
}

fn hex_value(input: &[u8]) {
    let Ok(s) = std::str::from_utf8(input) else {
        return;
    };
    let got = decode_hex(s, "fuzz").ok();
    let clean: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
    let want = if clean.len().is_multiple_of(2) && clean.iter().all(char::is_ascii_hexdigit) {
        let pairs = clean.chunks(2).map(|p| {
            let d = |c: char| c.to_digit(16).expect("a hex digit") as u8;
            d(p[0]) << 4 | d(p[1])
        });
        Some(pairs.collect::<Vec<u8>>())
    } else {
        None
    };
    assert_eq!(got, want, "hex {s:?}");
}

/// A reader that hands out its bytes in pieces of the sizes the input gives, with an
/// interruption before each piece of odd size.
struct Pieces<'a> {
    bytes: &'a [u8],
    sizes: &'a [u8],
    interrupted: bool,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = match self.sizes.split_first() {
            Some((&s, rest)) => {
                if s % 2 == 1 && !self.interrupted {
                    self.interrupted = true;
                    return Err(io::ErrorKind::Interrupted.into());
                }
                self.interrupted = false;
                self.sizes = rest;
                s as usize * 64 + 1
            }
            None => usize::MAX,
        };
        let n = size.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

fn key_file(input: &[u8]) {
    // The first byte counts the piece sizes that follow it; the rest is the file.
    let (n, rest) = input.split_first().map_or((0, input), |(&n, r)| (n, r));
    let (sizes, bytes) = rest.split_at((n as usize).min(rest.len()));
    let mut r = Pieces {
        bytes,
        sizes,
        interrupted: false,
    };
    match read_key_file(&mut r, Path::new("fuzz")) {
        Ok(got) => assert_eq!(&got[..], bytes),
        Err(e) => assert!(
            bytes.is_empty(),
            "{} bytes refused: {}",
            bytes.len(),
            e.message()
        ),
    }
}
