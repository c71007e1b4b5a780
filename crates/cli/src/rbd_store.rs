//! Ceph RBD images as the IMAGE of a volume command: `rbd:POOL/[NAMESPACE/]IMAGE[@SNAP]
//! [:conf=FILE][:id=USER][:KEY=VALUE]...`, qemu's syntax (see `sectorcrypt_rbd::spec`).
//! [`open_rbd`] is what the store locator calls for such an argument; without the `rbd`
//! feature (which links librbd) it explains that this build cannot.
//!
//! Exit codes as for files: a bad spec, a missing pool or image, or a snapshot asked to be
//! written is bad input (2); a cluster that cannot be reached or refuses the user is a
//! runtime failure (1). On such a store `format` aligns the data to the image's object
//! size by itself (the store reports it), as `rbd encryption format` does.

use crate::failure::Failure;
use sectorcrypt_volume::Store;

pub use sectorcrypt_rbd::is_rbd;

/// Opens the RBD image `spec` names, for writing too when `write`.
pub fn open_rbd(spec: &str, write: bool) -> Result<Box<dyn Store>, Failure> {
    let parsed = sectorcrypt_rbd::Spec::parse(spec).map_err(Failure::usage)?;
    open(&parsed, write)
}

#[cfg(feature = "rbd")]
fn open(spec: &sectorcrypt_rbd::Spec, write: bool) -> Result<Box<dyn Store>, Failure> {
    use std::io::ErrorKind;
    match sectorcrypt_rbd::RbdStore::open(spec, write) {
        Ok(store) => Ok(Box::new(store)),
        Err(e) => match e.kind() {
            ErrorKind::NotFound | ErrorKind::PermissionDenied | ErrorKind::InvalidInput => {
                Err(Failure::usage(e))
            }
            _ => Err(Failure::runtime(e)),
        },
    }
}

#[cfg(not(feature = "rbd"))]
fn open(spec: &sectorcrypt_rbd::Spec, _write: bool) -> Result<Box<dyn Store>, Failure> {
    Err(Failure::usage(format!(
        "{spec}: this sectorcrypt was built without RBD support (cargo feature `rbd`, \
         which links librbd-dev)"
    )))
}
