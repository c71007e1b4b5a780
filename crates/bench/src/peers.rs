//! The peers a user would pick instead of sectorcrypt, beside the system OpenSSL the bench
//! links: the newest OpenSSL release (built from source) and AWS-LC, each a small library
//! of crates/peer loaded at run time (`peers/ffi.rs`), so that none of them needs to sit in the
//! same binary as the system OpenSSL (whose symbols a vendored OpenSSL shares).
//!
//! `scripts/bench-peers.sh` builds them and puts them next to the `sectorcrypt` binaries
//! (target/release and target/debug); [`locate`] finds each there (or one directory up,
//! for test binaries in `deps/`), or at the path in its environment variable.
//!
//! A case that names the work it does (`Job`) runs on each peer library that has the
//! cipher: the same key, input, IVs and data units as ours.

mod ffi;
pub(crate) mod gcrypt;

use crate::Side;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// A peer library the bench knows of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerKind {
    /// How the report names it when absent.
    pub label: &'static str,
    /// The environment variable that gives its path.
    pub env: &'static str,
    /// Its file name next to the `sectorcrypt` binary.
    pub file: &'static str,
}

/// The newest OpenSSL release (OpenSSL 4), built from source by `openssl-src`.
pub const OPENSSL4: PeerKind = PeerKind {
    label: "openssl 4",
    env: "SECTORCRYPT_PEER_OPENSSL4",
    file: "libsectorcrypt_peer_openssl4.so",
};

/// AWS-LC, from `aws-lc-sys`.
pub const AWS_LC: PeerKind = PeerKind {
    label: "aws-lc",
    env: "SECTORCRYPT_PEER_AWSLC",
    file: "libsectorcrypt_peer_awslc.so",
};

/// Every peer library, in the order the report lists them (after the system OpenSSL).
pub const KINDS: [PeerKind; 2] = [OPENSSL4, AWS_LC];

/// Where a peer library was looked for, and whether it is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerLocation {
    pub kind: PeerKind,
    /// The file found, or `None`.
    pub path: Option<PathBuf>,
}

/// Where each peer library is: at the path its environment variable names (which must
/// exist), else next to the running executable or one directory up.
pub fn locate() -> Vec<PeerLocation> {
    let exe = std::env::current_exe().ok();
    KINDS
        .iter()
        .map(|&kind| {
            let path = match std::env::var_os(kind.env).filter(|v| !v.is_empty()) {
                Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
                None => exe.as_deref().and_then(Path::parent).and_then(|dir| {
                    [Some(dir), dir.parent()]
                        .into_iter()
                        .flatten()
                        .map(|d| d.join(kind.file))
                        .find(|p| p.is_file())
                }),
            };
            PeerLocation { kind, path }
        })
        .collect()
}

/// Why a peer library is absent, as the report says it.
pub fn absent_note(kind: PeerKind) -> String {
    match std::env::var_os(kind.env).filter(|v| !v.is_empty()) {
        Some(p) => format!(
            "{}: not found at {} ({}); run scripts/bench-peers.sh",
            kind.label,
            Path::new(&p).display(),
            kind.env
        ),
        None => format!("{}: not built; run scripts/bench-peers.sh", kind.label),
    }
}

/// A loaded peer library.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(&'static ffi::Library);

impl Peer {
    /// Loads the library at `path`.
    pub fn load(path: &Path) -> Result<Peer, String> {
        ffi::Library::open(path)
            .map(Peer)
            .map_err(|e| format!("peer library {}: {e}", path.display()))
    }

    /// The library's name (`openssl`, `aws-lc`).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The library's version string.
    pub fn version(&self) -> &str {
        &self.0.version
    }
}

/// How a case's data is cut and keyed.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    /// Data units of `unit` bytes, unit `i` with IV plain64(`i * step`).
    Units { unit: usize, step: u64 },
    /// One message with this IV (16 bytes).
    Message { iv: Vec<u8> },
    /// One AEAD message with this IV (12 bytes), no AAD; decrypting, the tag to verify.
    Aead { iv: Vec<u8>, tag: Option<[u8; 16]> },
}

/// The work of one case, as any EVP-like library can do it: the peer sides are made from
/// it.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// OpenSSL's name of the cipher (`aes-256-xts`).
    pub cipher: &'static str,
    pub key: Vec<u8>,
    pub encrypt: bool,
    pub src: Rc<Vec<u8>>,
    pub shape: Shape,
}

/// The bytes a side's last call produced (the leading ones that both sides write: the
/// output, and for an AEAD encryption the tag after it).
pub(crate) type Output = Rc<RefCell<Vec<u8>>>;

/// `peer`'s side of `job`, or `None` when the library has no such cipher.
pub(crate) fn side(peer: Peer, job: &Job) -> Option<Side<'static>> {
    let mut ctx = ffi::Context::new(peer.0, job.cipher, &job.key, job.encrypt)?;
    let len = job.src.len();
    let src = job.src.clone();
    // The output, 16 bytes of EVP slack, and room for a tag behind both.
    let out: Output = Rc::new(RefCell::new(vec![0u8; len + 32]));
    let o = out.clone();
    let what = format!("{} {}", peer.name(), job.cipher);
    let (call, compared): (Box<dyn FnMut()>, usize) = match job.shape.clone() {
        Shape::Units { unit, step } => (
            Box::new(move || {
                let ok = ctx.units(&src, &mut o.borrow_mut()[..len + 16], unit, 0, step);
                assert!(ok, "{what}: the peer failed");
            }),
            len,
        ),
        Shape::Message { iv } => (
            Box::new(move || {
                let ok = ctx.message(&iv, &src, &mut o.borrow_mut()[..len + 16], None);
                assert!(ok, "{what}: the peer failed");
            }),
            len,
        ),
        Shape::Aead { iv, tag } => {
            let encrypt = job.encrypt;
            (
                Box::new(move || {
                    let mut t = tag.unwrap_or([0u8; 16]);
                    let mut o = o.borrow_mut();
                    let ok = ctx.message(&iv, &src, &mut o[..len + 16], Some(&mut t));
                    assert!(ok, "{what}: the peer failed (or the tag did not verify)");
                    o[len..len + 16].copy_from_slice(&t);
                }),
                if encrypt { len + 16 } else { len },
            )
        }
    };
    Some(Side {
        name: peer.name().to_string(),
        version: Some(peer.version().to_string()),
        bytes: len,
        call,
        output: Some((out, compared)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each peer library built, loaded; a skip (a failure under SECTORCRYPT_STRICT=1)
    /// when one is missing.
    fn loaded() -> Vec<Peer> {
        locate()
            .into_iter()
            .filter_map(|loc| match loc.path {
                Some(p) => Some(Peer::load(&p).unwrap()),
                None => {
                    sectorcrypt_testkit::skipped!("skipped: {}", absent_note(loc.kind));
                    None
                }
            })
            .collect()
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn each_peer_gives_the_fips_197_aes_256_block() {
        for peer in loaded() {
            // FIPS-197 appendix C.3.
            let job = Job {
                cipher: "aes-256-ecb",
                key: (0u8..32).collect(),
                encrypt: true,
                src: Rc::new(hex("00112233445566778899aabbccddeeff")),
                shape: Shape::Message { iv: vec![0; 16] },
            };
            let mut side = side(peer, &job).unwrap();
            (side.call)();
            let (out, n) = side.output.unwrap();
            assert_eq!(
                out.borrow()[..n],
                hex("8ea2b7ca516745bfeafc49904b496089"),
                "{}",
                peer.version()
            );
            assert_eq!(side.version.as_deref(), Some(peer.version()));
        }
    }

    #[test]
    fn a_peer_refuses_a_gcm_tag_that_does_not_verify_and_an_unknown_cipher() {
        for peer in loaded() {
            let key = [7u8; 32];
            let iv = [1u8; 12];
            let plain = [0x42u8; 100];
            let mut enc = ffi::Context::new(peer.0, "aes-256-gcm", &key, true).unwrap();
            let mut ct = [0u8; 116];
            let mut tag = [0u8; 16];
            assert!(enc.message(&iv, &plain, &mut ct, Some(&mut tag)));
            let mut dec = ffi::Context::new(peer.0, "aes-256-gcm", &key, false).unwrap();
            let mut back = [0u8; 116];
            assert!(dec.message(&iv, &ct[..100], &mut back, Some(&mut tag)));
            assert_eq!(back[..100], plain);
            tag[0] ^= 1;
            assert!(!dec.message(&iv, &ct[..100], &mut back, Some(&mut tag)));
            assert!(ffi::Context::new(peer.0, "aes-256-nonsense", &key, true).is_none());
            // A key of the wrong length is refused, not read past.
            assert!(ffi::Context::new(peer.0, "aes-256-gcm", &key[..16], true).is_none());
        }
    }
}
