//! Ceph RBD images as sectorcrypt backing stores.
//!
//! - [`spec`]: qemu's `rbd:POOL/[NAMESPACE/]IMAGE[@SNAP][:KEY=VALUE]...` syntax, always
//!   built;
//! - `RbdStore` (feature `librbd`, which links Debian's librbd and librados): an image as
//!   a [`sectorcrypt_volume::Store`], every request one librbd aio request, many in flight
//!   from many threads;
//! - `ffi.rs` (feature `librbd`): the only `unsafe` of the crate, the librbd/librados
//!   declarations and a safe owner of the handles, with the contract its callers rely on.
//!
//! The format layer reads and writes LUKS headers through the store like through a file:
//! the images `rbd encryption format` makes are standard LUKS1/LUKS2 (see
//! `sectorcrypt_volume::luks`, which also reads the `RBDL` magic of librbd's layered
//! clones). Plaintext is never cached here.

pub mod spec;

#[cfg(feature = "librbd")]
mod ffi;
#[cfg(feature = "librbd")]
mod store;

pub use spec::{is_rbd, Spec, SpecError};
#[cfg(feature = "librbd")]
pub use store::RbdStore;

/// Whether this build links librbd (feature `librbd`).
pub const AVAILABLE: bool = cfg!(feature = "librbd");
