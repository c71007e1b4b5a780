//! LUKS interop and failure tests: volumes made by cryptsetup and qemu-img opened here,
//! volumes made here checked by cryptsetup, qemu-img and nbdkit, and damaged images.
//! Tests that need a tool print `skipped: <reason>` and return when it is absent.

mod common;
mod convert_cuts;
mod from_tools;
mod negative;
mod rbd_clone;
mod rbd_layout;
mod reencrypt_meta;
mod to_tools;
mod validation;
