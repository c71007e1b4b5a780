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
