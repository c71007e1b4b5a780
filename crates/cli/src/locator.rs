//! The store locator: the one place where an IMAGE (or `--header`) argument becomes a
//! store. A path is a local file or block device; an NBD URI (`nbd://host[:port]/export`,
//! `nbd+unix:///export?socket=PATH`, and over TLS `nbds://` and `nbds+unix://` with
//! libnbd's `tls-certificates=DIR`) is an export reached through the NBD client; an
//! `rbd:POOL/IMAGE[@SNAP][:conf=FILE]...` spec (qemu's syntax) is a Ceph RBD image reached
//! through librbd (`sectorcrypt_cli::rbd_store`, in builds with the `rbd` feature).
//! Another kind of store is one more arm of [`Location`] and of [`open_remote`].
//!
//! The remote options (`--connections`, `--retry`, `--remote-timeout`) are global flags,
//! set once by `main` before a command runs ([`configure`]).
//!
//! A locator may carry secrets: an `rbd:` spec's options (`key=`, a cephx secret inline;
//! `keyfile=`, `keyring=`), an NBD URI's user information (`nbd://user:password@host`) or
//! a parameter this client does not take (`tls-psk-file=`). [`redacted`] is the one way
//! a locator is shown outside the process: in messages, logs, JSON, the NBD export
//! description and `open` entries.

use crate::failure::Failure;
use crate::image_store::ImageStore;
use crate::nbd_store::NbdStore;
use sectorcrypt_nbd::client::{uri, ClientConfig, NbdUri};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// Where an image argument points.
#[derive(Debug, Clone)]
pub enum Location {
    /// A local file or block device: the path as given.
    Local,
    /// An NBD export.
    Nbd(NbdUri),
    /// A Ceph RBD image (its spec, as given).
    Rbd(sectorcrypt_rbd::Spec),
}

/// How remote stores are reached (the global flags).
#[derive(Debug, Clone, Copy)]
pub struct RemoteOptions {
    /// NBD connections when the server allows multi-conn.
    pub connections: usize,
    /// Seconds a connection or a request may take (0: no limit).
    pub timeout_secs: u64,
    /// Reconnections per request after a connection failed.
    pub retry: u32,
}

static OPTIONS: OnceLock<RemoteOptions> = OnceLock::new();

/// Sets the remote options for this process (the first call wins).
pub fn configure(o: RemoteOptions) {
    let _ = OPTIONS.set(o);
}

fn options() -> RemoteOptions {
    *OPTIONS.get_or_init(|| RemoteOptions {
        connections: 4,
        timeout_secs: 30,
        retry: 0,
    })
}

/// `arg` (an IMAGE or `--header` argument) as it may be shown outside the process: a
/// path as it is; an `rbd:` spec as `rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]`, without its
/// options; an NBD URI in its canonical spelling (no user information, only the
/// parameters the client takes, none of them secret). A spec or URI that does not parse
/// is cut before anything that could be secret: an `rbd:` spec before its first option,
/// a URI before its query, its user information left out.
pub fn redacted(arg: &Path) -> String {
    let Some(text) = arg.to_str() else {
        return arg.display().to_string();
    };
    if sectorcrypt_rbd::is_rbd(text) {
        return match sectorcrypt_rbd::Spec::parse(text) {
            Ok(spec) => spec.to_string(),
            // The error's spec is already cut before the first option.
            Err(e) => e.spec,
        };
    }
    if !uri::is_nbd_uri(text) {
        return text.to_string();
    }
    match NbdUri::parse(text) {
        Ok(u) => u.to_string(),
        Err(_) => uri::redact(text),
    }
}

/// What `arg` names. A URI that does not parse is bad input (exit 2).
pub fn locate(arg: &Path) -> Result<Location, Failure> {
    if let Some(text) = arg.to_str().filter(|t| sectorcrypt_rbd::is_rbd(t)) {
        return sectorcrypt_rbd::Spec::parse(text)
            .map(Location::Rbd)
            .map_err(Failure::usage);
    }
    let Some(text) = arg.to_str().filter(|t| uri::is_nbd_uri(t)) else {
        return Ok(Location::Local);
    };
    NbdUri::parse(text)
        .map(Location::Nbd)
        .map_err(Failure::usage)
}

/// Opens the remote store `arg` names (read-write when `write`); `None` for a path, which
/// the caller opens as a file. A store that cannot be reached is bad input (exit 2), as a
/// missing file is.
pub fn open_remote(arg: &Path, write: bool) -> Result<Option<ImageStore>, Failure> {
    match locate(arg)? {
        Location::Local => Ok(None),
        Location::Nbd(u) => {
            let o = options();
            let config = ClientConfig {
                connections: o.connections.max(1),
                timeout: (o.timeout_secs > 0).then(|| Duration::from_secs(o.timeout_secs)),
                retry: o.retry,
                structured_replies: true,
            };
            let store = NbdStore::connect(&u, config).map_err(Failure::usage)?;
            if write && store.read_only() {
                return Err(Failure::usage(format!(
                    "{}: the export is read-only",
                    store.key()
                )));
            }
            Ok(Some(ImageStore::remote(Box::new(store), u.to_string())))
        }
        Location::Rbd(spec) => {
            let text = arg.to_str().expect("an rbd: spec is text");
            let store = sectorcrypt_cli::rbd_store::open_rbd(text, write)?;
            // The lock key names the image without its options (a `key=` is a secret).
            Ok(Some(ImageStore::remote(store, spec.to_string())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_locators_are_never_shown() {
        let cases = [
            // rbd: every option (key= inline, keyfile=, keyring=, conf=, id=) left out.
            ("rbd:pool/img:id=admin:key=AQSECRETKEY==", "rbd:pool/img"),
            (
                "rbd:pool/ns/img@snap:keyfile=/etc/k:key=AQSECRETKEY==",
                "rbd:pool/ns/img@snap",
            ),
            // A bad spec is cut before its first option.
            ("rbd:pool:key=AQSECRETKEY==", "rbd:pool"),
            ("rbd:p/img:key=AQSECRETKEY==:oops", "rbd:p/img"),
            // NBD: canonical; user information and unknown parameters left out.
            (
                "nbd://user:AQSECRETKEY==@127.0.0.1/e",
                "nbd://127.0.0.1:10809/e",
            ),
            ("nbds://h:1/e?tls-psk-file=/k/AQSECRETKEY==", "nbds://h:1/e"),
            (
                "nbd+unix:///e?socket=/s&password=AQSECRETKEY==",
                "nbd+unix:///e",
            ),
            (
                "nbds+unix:///e?socket=/s&tls-certificates=/c",
                "nbds+unix:///e?socket=/s&tls-certificates=/c",
            ),
            // A path is a path.
            ("/var/img/disk.img", "/var/img/disk.img"),
        ];
        for (given, shown) in cases {
            assert_eq!(redacted(Path::new(given)), shown, "{given}");
            assert!(
                !redacted(Path::new(given)).contains("AQSECRETKEY"),
                "{given}"
            );
        }
    }
}
