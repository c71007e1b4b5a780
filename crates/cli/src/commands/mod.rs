//! The commands, one file each (or a folder, for `cipher`): each takes its parsed flags
//! (`flags/`), calls the libraries (opening and creating volumes through
//! `sectorcrypt_image`, by way of `volumes/`), asks what only a terminal can ask
//! (`passphrase.rs`) and presents the result (`present/`). The FUSE front end of `mount`
//! is in `fuse/`; what `open` keeps per name, in [`open_state`].

pub mod backends;
pub mod bench;
pub mod cipher;
pub mod convert;
pub mod demo;
pub mod gateway;
pub mod geli;
pub mod geli_front;
pub mod manuals;
pub mod open;
pub mod open_state;
pub mod reencrypt;
pub mod serve;
pub mod volume;
pub mod volume_io;
