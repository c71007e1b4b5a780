//! Opening volumes by locator, for every front end alike (the `sectorcrypt` command, the
//! Python package, the C library): one crate above `sectorcrypt-volume` (formats and the
//! engine), `sectorcrypt-nbd` (the NBD client) and `sectorcrypt-rbd` (librbd).
//!
//! - [`locator`]: what an image argument names (a path, an NBD URI, an `rbd:` spec), how
//!   a locator is shown without its secrets ([`locator::redacted`]), how remote stores are
//!   reached ([`RemoteOptions`], passed with each open).
//! - [`store`]: [`ImageStore`], a local file or a remote store behind one type, with its
//!   locks (process-local for remote stores); [`nbd::NbdStore`] and [`rbd`] beside it.
//! - [`image`]: the files of a volume with their claims and header lock ([`Files`],
//!   [`Image`]): the steps every user of a volume takes.
//! - [`mod@open`]: [`open()`], a volume's engine in one call; [`export::VolumeExport`],
//!   an engine as an NBD export.
//! - [`create`](mod@create): [`create()`], a new LUKS2, LUKS1 or GELI volume from [`CreateOptions`],
//!   with every default and refusal written once for every front end's format; what a
//!   front end does meanwhile (confirm an overwrite, ask the passphrase, show sealing
//!   progress) it asks of a [`Steps`]. Beneath it the stores a new volume goes to
//!   ([`create::Target`]: created when missing, claimed exclusively, removed again on
//!   failure).
//! - [`mod@convert`]: [`convert()`], LUKS1 to LUKS2 and back in place, as `cryptsetup
//!   convert` ([`Conversion`]: checked first, then run).
//! - [`error`]: [`Error`], classified once ([`Class`]); each front end maps the classes
//!   one-to-one (exit codes, Python exceptions, C status codes).

#![forbid(unsafe_code)]

pub mod convert;
pub mod create;
pub mod error;
pub mod export;
pub mod image;
pub mod locator;
pub mod nbd;
pub mod open;
pub mod rbd;
pub mod reencrypt;
pub mod store;

pub use convert::{convert, Conversion};
pub use create::{create, CreateOptions, Created, Kind, Steps};
pub use error::{Class, Error, Result};
pub use image::{Access, Claims, Context, Files, Image};
pub use locator::{redacted, RemoteOptions};
pub use open::{open, OpenOptions, Opened};
pub use store::{Guard, ImageStore};
