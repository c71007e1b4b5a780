//! Ceph RBD images as stores: `rbd:POOL/[NAMESPACE/]IMAGE[@SNAP][:conf=FILE][:id=USER]
//! [:KEY=VALUE]...`, qemu's syntax (see `sectorcrypt_rbd::spec`). [`open`] is what the
//! store locator calls for such an argument; without the `rbd` feature (which links
//! librbd) it explains that this build cannot.
//!
//! Classes: a missing pool or image is [`Class::NotFound`], a user the cluster refuses or
//! a snapshot asked to be written [`Class::CannotOpen`] / [`Class::InvalidArgument`]; a
//! cluster that cannot be reached is [`Class::Io`] (a runtime condition). On such a store
//! `format` aligns the data to the image's object size by itself (the store reports it),
//! as `rbd encryption format` does.

#[cfg(feature = "rbd")]
use crate::error::Class;
use crate::error::{Error, Result};
use sectorcrypt_volume::Store;

pub use sectorcrypt_rbd::is_rbd;

/// Opens the RBD image `spec` names, for writing too when `write`.
pub fn open_spec(spec: &str, write: bool) -> Result<Box<dyn Store>> {
    let parsed = sectorcrypt_rbd::Spec::parse(spec).map_err(Error::invalid)?;
    open(&parsed, write)
}

/// Opens the RBD image of `spec`, for writing too when `write`.
#[cfg(feature = "rbd")]
pub fn open(spec: &sectorcrypt_rbd::Spec, write: bool) -> Result<Box<dyn Store>> {
    use std::io::ErrorKind;
    match sectorcrypt_rbd::RbdStore::open(spec, write) {
        Ok(store) => Ok(Box::new(store)),
        Err(e) => {
            let class = match e.kind() {
                ErrorKind::NotFound => Class::NotFound,
                ErrorKind::PermissionDenied => Class::CannotOpen,
                ErrorKind::InvalidInput => Class::InvalidArgument,
                _ => Class::Io,
            };
            Err(Error::os(class, e))
        }
    }
}

/// Opens the RBD image of `spec`: refused in a build without the `rbd` feature.
#[cfg(not(feature = "rbd"))]
pub fn open(spec: &sectorcrypt_rbd::Spec, _write: bool) -> Result<Box<dyn Store>> {
    Err(Error::new(
        crate::error::Class::Unsupported,
        format!(
            "{spec}: this sectorcrypt was built without RBD support (cargo feature `rbd`, \
             which links librbd-dev)"
        ),
    ))
}
