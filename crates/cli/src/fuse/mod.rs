//! The FUSE front end: `mount` and `umount` ([`mount`]), a volume shown as one file of a
//! FUSE file system, its requests run by worker threads ([`workers`]).

pub mod mount;
pub mod workers;
