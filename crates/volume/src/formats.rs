//! The registry of on-disk formats: which drivers exist, in which order they are tried,
//! and [`Header::read`], which asks them. It sits above [`crate::format`] (the interface)
//! and the format modules (the implementations), so that neither of those imports the
//! other.

use crate::error::{HeaderError, Result};
use crate::format::{Driver, Header, Probe, PROBE_BYTES};
use crate::store::{self, Store};

/// The formats, in the order they are tried.
pub const FORMATS: &[Driver] = &[crate::luks::luks1::DRIVER, crate::luks::luks2::DRIVER];

/// The names of [`FORMATS`], for messages: `luks1, luks2`.
pub fn known_formats() -> String {
    let names: Vec<&str> = FORMATS.iter().map(|d| d.name).collect();
    names.join(", ")
}

impl Header {
    /// Detects the format of `store` and reads its header. Never writes.
    pub fn read(store: &dyn Store) -> Result<Header> {
        let mut head = vec![0u8; PROBE_BYTES];
        let n = store::read_head(store, &mut head)?;
        let probe = Probe {
            store,
            head: &head[..n],
            size: store::size(store)?,
        };
        for driver in FORMATS {
            if let Some(found) = (driver.detect)(&probe) {
                return found.map(Header::new);
            }
        }
        Err(HeaderError::Unrecognised(format!(
            "none of {} is in {} ({} bytes)",
            known_formats(),
            store.name(),
            probe.size
        ))
        .into())
    }
}
