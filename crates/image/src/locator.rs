//! The store locator: the one place where an image (or detached header) argument becomes
//! a store. A path is a local file or block device; an NBD URI (`nbd://host[:port]/export`,
//! `nbd+unix:///export?socket=PATH`, and over TLS `nbds://` and `nbds+unix://` with
//! libnbd's `tls-certificates=DIR`) is an export reached through the NBD client; an
//! `rbd:POOL/IMAGE[@SNAP][:conf=FILE]...` spec (qemu's syntax) is a Ceph RBD image reached
//! through librbd (`crate::rbd`, in builds with the `rbd` feature). Another kind of store
//! is one more arm of [`Location`] and of [`open_remote`].
//!
//! How remote stores are reached ([`RemoteOptions`]: connections, timeout, retry) is given
//! by the caller with each open, never kept in a process-wide setting.
//!
//! A locator may carry secrets: an `rbd:` spec's options (`key=`, a cephx secret inline;
//! `keyfile=`, `keyring=`), an NBD URI's user information (`nbd://user:password@host`) or
//! a parameter this client does not take (`tls-psk-file=`). [`redacted`] is the one way
//! a locator is shown outside the process: in messages, logs, JSON, the NBD export
//! description and `open` entries.

use crate::error::{Class, Error, Result};
use crate::nbd::NbdStore;
use crate::store::ImageStore;
use sectorcrypt_nbd::client::{uri, ClientConfig, NbdUri};
use std::path::Path;
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

/// How remote stores are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteOptions {
    /// NBD connections when the server allows multi-conn.
    pub connections: usize,
    /// Seconds a connection or a request may take (0: no limit).
    pub timeout_secs: u64,
    /// Reconnections per request after a connection failed.
    pub retry: u32,
}

impl Default for RemoteOptions {
    /// 4 connections, 30 seconds, no retry (the command line's defaults).
    fn default() -> RemoteOptions {
        RemoteOptions {
            connections: 4,
            timeout_secs: 30,
            retry: 0,
        }
    }
}

/// `arg` (an image or header argument) as it may be shown outside the process: a path as
/// it is; an `rbd:` spec as `rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]`, without its options; an
/// NBD URI in its canonical spelling (no user information, only the parameters the client
/// takes, none of them secret). A spec or URI that does not parse is cut before anything
/// that could be secret: an `rbd:` spec before its first option, a URI before its query,
/// its user information left out ([`uri::redact`]).
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
    if let Ok(u) = NbdUri::parse(text) {
        return u.to_string();
    }
    uri::redact(text)
}

/// What `arg` names. A URI or spec that does not parse is [`Class::InvalidArgument`],
/// its message naming the locator [`redacted`] (a URI refused for a parameter this client
/// does not take, `password=`, would otherwise be shown whole).
pub fn locate(arg: &Path) -> Result<Location> {
    if let Some(text) = arg.to_str().filter(|t| sectorcrypt_rbd::is_rbd(t)) {
        return sectorcrypt_rbd::Spec::parse(text)
            .map(Location::Rbd)
            .map_err(Error::invalid);
    }
    let Some(text) = arg.to_str().filter(|t| uri::is_nbd_uri(t)) else {
        return Ok(Location::Local);
    };
    NbdUri::parse(text).map(Location::Nbd).map_err(|e| {
        let why =
            e.0.strip_prefix(&format!("{}: ", uri::redact(text)))
                .unwrap_or("not a valid NBD URI");
        Error::invalid(format!("{}: {why}", redacted(arg)))
    })
}

/// Opens the remote store `arg` names (read-write when `write`), reached as `remote`
/// says; `None` for a path, which the caller opens as a file. An NBD export that cannot
/// be reached is [`Class::Unreachable`]; a read-only export opened for writing is
/// [`Class::InvalidArgument`].
pub fn open_remote(arg: &Path, write: bool, remote: &RemoteOptions) -> Result<Option<ImageStore>> {
    match locate(arg)? {
        Location::Local => Ok(None),
        Location::Nbd(u) => {
            let config = ClientConfig {
                connections: remote.connections.max(1),
                timeout: (remote.timeout_secs > 0)
                    .then(|| Duration::from_secs(remote.timeout_secs)),
                retry: remote.retry,
                structured_replies: true,
            };
            let store =
                NbdStore::connect(&u, config).map_err(|e| Error::os(Class::Unreachable, e))?;
            if write && store.read_only() {
                return Err(Error::invalid(format!(
                    "{}: the export is read-only",
                    store.key()
                )));
            }
            Ok(Some(ImageStore::remote(Box::new(store), u.to_string())))
        }
        Location::Rbd(spec) => {
            let store = crate::rbd::open(&spec, write)?;
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
            // A URI that does not parse loses everything up to the last `@` before its
            // query, a password holding a `/` included.
            ("nbd://u:pa/ssAQSECRETKEY==@h/e", "nbd://h/e"),
            ("nbd://u:AQSECRETKEY==@h:port/e?x=1", "nbd://h:port/e"),
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

    #[test]
    fn bad_locators_are_invalid_arguments() {
        let e = locate(Path::new("rbd:image-without-pool")).unwrap_err();
        assert_eq!(e.class(), Class::InvalidArgument, "{e}");
        assert!(e.message().contains("no pool"), "{e}");
        let e = locate(Path::new("nbd://h:notaport/e")).unwrap_err();
        assert_eq!(e.class(), Class::InvalidArgument, "{e}");
        // A URI refused for a parameter the client does not take: named without it.
        let e = locate(Path::new("nbd+unix:///e?socket=/s&password=AQSECRETKEY==")).unwrap_err();
        assert_eq!(e.class(), Class::InvalidArgument, "{e}");
        assert!(!e.message().contains("AQSECRETKEY"), "{e}");
        assert!(e.message().starts_with("nbd+unix:///e: "), "{e}");
        assert!(matches!(
            locate(Path::new("/dev/sda")).unwrap(),
            Location::Local
        ));
    }
}
