//! Reading and writing a volume's plaintext through `sectorcrypt read` and `write`, where
//! the target is a local image or an NBD URI (included with
//! `#[path = "support/remote_io.rs"] mod remote_io;` beside `mod support;`).

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use crate::support::{ok, ok_bytes, s, sc};
use std::path::Path;

/// What `sectorcrypt read TARGET` (a local image or a URI) gives at `offset`.
pub fn read_plain(target: &str, key: &Path, offset: u64, len: usize) -> Vec<u8> {
    let (off, len) = (offset.to_string(), len.to_string());
    let args = [
        "read",
        target,
        "--offset",
        &off,
        "--length",
        &len,
        "--key-file",
        s(key),
    ];
    ok_bytes(sc(&args, b""))
}

/// `sectorcrypt write TARGET` of `data` at `offset`, then `read` of it back: equal.
pub fn write_and_read(target: &str, key: &Path, dir: &Path, data: &[u8], offset: u64) {
    let input = dir.join("in.bin");
    std::fs::write(&input, data).unwrap();
    let off = offset.to_string();
    let args = [
        "write",
        target,
        "--input",
        s(&input),
        "--offset",
        &off,
        "--key-file",
        s(key),
    ];
    ok(sc(&args, b""));
    let back = read_plain(target, key, offset, data.len());
    assert!(back == data, "{target}: read back differs");
}
