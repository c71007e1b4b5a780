//! The PEM directory target: the bytes are the files of a TLS certificates directory
//! (nbdkit's, qemu's and libnbd's names), read by the server's and the client's TLS
//! setup ([`ServerTls::from_dir`], [`ClientTls::from_dir`], [`ClientTls::unverified`]).
//!
//! The first byte says which of the five files exist (bits 0 to 4: `ca-cert.pem`,
//! `server-cert.pem`, `server-key.pem`, `client-cert.pem`, `client-key.pem`) and how the
//! server is set up (bit 5: it verifies clients; bit 6: TLS is required); the rest is the
//! contents of the files that exist, in that order, separated by NUL bytes (a file with
//! no part left is empty). The files are written with mode 0600 (a private key's mode)
//! into a directory of this process's own in the temporary folder
//! (`sectorcrypt-fuzz-pem-PID`, left there when the process ends), then read.
//!
//! Checked: every refusal names a file of the directory, or the directory; and no message
//! quotes a line of a private key file (a base64 line of at least 24 characters that no
//! certificate file also holds).
//!
//! The seeds (`scripts/fuzz.sh seeds`) are directories made by openssl and GnuTLS's
//! certtool, as the nbdkit and libnbd documentation make them: RSA, EC (SEC1 and PKCS#8)
//! and Ed25519 keys, PKCS#1 RSA keys, certificate chains with an intermediate authority,
//! client certificates, and the usual mistakes (a key that does not match its
//! certificate, an encrypted key, a certificate where the key should be, a missing half
//! of a pair).

use sectorcrypt_nbd::tls::{ClientTls, ServerTls};
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The files, in the order of the input's bits and parts.
pub const PEM_FILES: [&str; 5] = [
    "ca-cert.pem",
    "server-cert.pem",
    "server-key.pem",
    "client-cert.pem",
    "client-key.pem",
];

/// The files that hold private keys.
const KEYS: [usize; 2] = [2, 4];

/// This process's directory, and a lock for it (tests may run in threads).
fn dir() -> &'static Mutex<PathBuf> {
    static DIR: OnceLock<Mutex<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("sectorcrypt-fuzz-pem-{}", std::process::id()));
        fs::create_dir_all(&d).expect("the certificates directory");
        Mutex::new(d)
    })
}

/// The input for a directory: `files[i]` is the contents of [`PEM_FILES`]`[i]`, `None`
/// when it does not exist.
pub fn pem_input(files: &[Option<&[u8]>; 5], verify_peer: bool, required: bool) -> Vec<u8> {
    let mut flags = u8::from(verify_peer) << 5 | u8::from(required) << 6;
    let mut parts = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if let Some(bytes) = f {
            flags |= 1 << i;
            parts.push(bytes.to_vec());
        }
    }
    let mut out = vec![flags];
    out.extend(parts.join(&0u8));
    out
}

/// What came of the directory: the server's setup, the client's, the unverified
/// client's (`Ok` or the message).
pub type PemOutcome = [Result<(), String>; 3];

/// The PEM directory target. An input whose directory cannot be written (the disk or
/// the quota is full, a file size limit: the machine's trouble, not a finding) is not
/// read: writing it panicked, and a full disk ended a 10-minute run as a crash.
pub fn pem(data: &[u8]) {
    let _ = try_pem_outcome(data);
}

/// Writes the directory `data` stands for and reads it as the server and the clients do;
/// panics when the directory cannot be written.
pub fn pem_outcome(data: &[u8]) -> PemOutcome {
    try_pem_outcome(data).expect("writing the certificates directory")
}

/// [`pem_outcome`], or why the directory could not be written.
fn try_pem_outcome(data: &[u8]) -> std::io::Result<PemOutcome> {
    let Some((&flags, rest)) = data.split_first() else {
        return Ok([Ok(()), Ok(()), Ok(())]);
    };
    let dir = dir().lock().unwrap_or_else(|e| e.into_inner());
    let mut parts = rest.split(|&b| b == 0);
    let mut contents: [Option<&[u8]>; 5] = [None; 5];
    for (i, name) in PEM_FILES.iter().enumerate() {
        let path = dir.join(name);
        let _ = fs::remove_file(&path);
        if flags & (1 << i) != 0 {
            let bytes = parts.next().unwrap_or_default();
            write_private(&path, bytes)?;
            contents[i] = Some(bytes);
        }
    }
    let (verify_peer, required) = (flags & 1 << 5 != 0, flags & 1 << 6 != 0);
    let outcome = [
        ServerTls::from_dir(&dir, verify_peer, required).map(|s| {
            assert_eq!(s.required(), required);
        }),
        ClientTls::from_dir(&dir).map(drop),
        ClientTls::unverified(&dir).map(drop),
    ]
    .map(|r| r.map_err(|e| e.to_string()));
    for message in outcome.iter().filter_map(|r| r.as_ref().err()) {
        check_message(message, &dir, &contents);
    }
    Ok(outcome)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// A refusal names the directory (or a file in it), and quotes no key line.
fn check_message(message: &str, dir: &Path, contents: &[Option<&[u8]>; 5]) {
    assert!(
        message.contains(dir.to_str().expect("a UTF-8 temporary directory")),
        "the refusal {message:?} names no file"
    );
    let others: Vec<&[u8]> = (0..5)
        .filter(|i| !KEYS.contains(i))
        .filter_map(|i| contents[i])
        .collect();
    for key in KEYS.iter().filter_map(|&i| contents[i]) {
        for line in key.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let base64 = line.len() >= 24
                && line
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"+/=".contains(c));
            if !base64 || others.iter().any(|o| contains(o, line)) {
                continue;
            }
            assert!(
                !contains(message.as_bytes(), line),
                "the refusal {message:?} quotes a line of a private key"
            );
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
