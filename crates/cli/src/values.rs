//! The values the command line takes apart itself, and how a command fails: sizes (`256M`,
//! `1GiB`), hex with white space in it (keys, IVs, AAD), the bytes of a key file. A library
//! target of the `sectorcrypt` package, so that the fuzz targets (`fuzz/`) call exactly
//! what the binary calls; the binary's commands use these from here, and [`failure`] is
//! the binary's failure type (exit codes).
#![forbid(unsafe_code)]

pub mod failure;

use failure::Failure;
use std::io::Read;
use std::path::Path;
use zeroize::Zeroizing;

/// A passphrase or key: wiped when dropped.
pub type Secret = Zeroizing<Vec<u8>>;

/// cryptsetup's default key file size limit.
pub const MAX_KEY_FILE: u64 = 8 << 20;

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

/// Appends to a secret without leaving copies behind: a plain `Vec` that grows frees its
/// old allocation unwiped, so when full the bytes move to a new buffer of twice the
/// capacity and the old one is wiped as it is dropped.
pub fn append(buf: &mut Secret, bytes: &[u8]) {
    if buf.capacity() - buf.len() < bytes.len() {
        let want = (buf.len() + bytes.len()).max(2 * buf.capacity()).max(64);
        let mut bigger = Zeroizing::new(Vec::with_capacity(want));
        bigger.extend_from_slice(buf);
        *buf = bigger;
    }
    buf.extend_from_slice(bytes);
}

/// The bytes of the key file `path`, read from `input` to its end: at most
/// [`MAX_KEY_FILE`] bytes, and not empty.
pub fn read_key_file(input: &mut dyn Read, path: &Path) -> Result<Secret, Failure> {
    let mut buf = Zeroizing::new(Vec::new());
    let mut piece = Zeroizing::new([0u8; 4096]);
    loop {
        match input.read(&mut piece[..]) {
            Ok(0) => break,
            Ok(n) => append(&mut buf, &piece[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Failure::runtime(format!(
                    "reading key file {}: {e}",
                    path.display()
                )))
            }
        }
        if buf.len() as u64 > MAX_KEY_FILE {
            return Err(Failure::usage(format!(
                "key file {} is larger than 8 MiB",
                path.display()
            )));
        }
    }
    if buf.is_empty() {
        return Err(Failure::usage(format!(
            "key file {} is empty",
            path.display()
        )));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn append_keeps_every_byte_across_growth() {
        let mut buf = Zeroizing::new(Vec::new());
        let mut want = Vec::new();
        for i in 0..1000u32 {
            let piece = [(i % 251) as u8; 7];
            append(&mut buf, &piece);
            want.extend_from_slice(&piece);
        }
        assert_eq!(&buf[..], &want[..]);
    }
}
