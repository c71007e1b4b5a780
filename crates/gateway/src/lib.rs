//! Many volumes behind one sectorcrypt server: the gateway.
//!
//! - [`config`]: the configuration file (`serve --config FILE`, TOML) and the
//!   `--export NAME=LOCATOR` form of the command line, validated as a whole (names,
//!   exactly one key source per export, access lists), and compared with the running one
//!   on a reload ([`config::Changes`]: which exports appear, go, or change, and whether
//!   a change can apply to a live export);
//! - [`metered`]: an NBD export counted into its per-export metrics;
//! - [`table`]: the NBD server's export table built from a configuration, every volume
//!   opened through `sectorcrypt_image` with its key, its access lists and its metrics;
//! - [`live`]: the running gateway, whose table a reload replaces (exports added,
//!   removed, with new access lists; changed volumes refused), and what it serves, for
//!   `sectorcrypt status`;
//! - [`log`]: one line per event (connect, disconnect, error, reload), text or JSON;
//! - [`clients`]: the NBD server's observer: the clients connected now, logged;
//! - [`control`]: the control socket `status` and `gateway reload` ask.
#![forbid(unsafe_code)]

pub mod clients;
pub mod config;
pub mod control;
pub mod live;
pub mod log;
pub mod metered;
pub mod table;
