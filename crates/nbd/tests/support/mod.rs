//! What the topic files of the test binary share: fake exports ([`exports`]), a server
//! running on a Unix socket in a temporary directory ([`server`]), and a client that
//! speaks the protocol by hand ([`raw`]).
// Not every helper is used by every topic file.
#![allow(dead_code)]

pub mod exports;
pub mod raw;
pub mod server;

pub use exports::{LaterExport, MemExport, SlowExport};
pub use raw::Raw;
pub use server::{quiet, start, start_exports};
