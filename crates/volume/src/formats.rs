//! The registry of on-disk formats: which drivers exist, in which order they are tried,
//! and [`Header::read`], which asks them. It sits above [`crate::format`] (the interface)
//! and the format modules (the implementations), so that neither of those imports the
//! other.
//!
//! **Two formats at once.** A store where two drivers find a valid header (a LUKS header
//! at the start and GELI metadata in the last sector, left by a format that did not wipe
//! the other) is refused, naming both: which one is current cannot be told, and opening
//! the wrong one would write under an old key. Formatting prevents it: every format
//! (LUKS1, LUKS2, GELI, from the command line or the libraries) first calls
//! [`wipe_signatures`], which zeroes the signature of every format known here wherever
//! blkid and the formats' own tools look for one ([`signatures`]), as cryptsetup's
//! `luksFormat` wipes other signatures with libblkid. Those two live in the leaf module
//! [`crate::signatures`] (re-exported here), which the formats call while this registry
//! names the formats.

use crate::error::{Error, HeaderError, Result};
use crate::format::{Driver, Header, Probe, Salvaged, PROBE_BYTES};
use crate::store::{self, Store};

pub use crate::signatures::{signatures, wipe_signatures, Signature};

/// The formats, in the order they are tried.
pub const FORMATS: &[Driver] = &[
    crate::luks::luks1::DRIVER,
    crate::luks::luks2::DRIVER,
    crate::geli::DRIVER,
    crate::bitlk::DRIVER,
    crate::fvault2::DRIVER,
];

/// A format asked for by name. VeraCrypt and TrueCrypt are read only so, never detected:
/// their headers have no signature (they look random until decrypted), so trying them on
/// every store would claim random data and cost a KDF search each time. FileVault 2 is
/// detected when its header's signature and checksum are intact; naming it reads a
/// damaged header to say what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// A VeraCrypt or TrueCrypt volume, looked for as the options say.
    Tcrypt(crate::tcrypt::Options),
    /// A FileVault 2 volume: detected when its volume header is intact, read when named
    /// to say what is wrong with a damaged one.
    Fvault2,
}

/// Reads the header of `store`: as [`Header::read`] detects it, or the format asked for.
pub fn read_as(store: &dyn Store, requested: Option<&Requested>) -> Result<Header> {
    match requested {
        None => Header::read(store),
        Some(Requested::Tcrypt(o)) => Ok(Header::new(Box::new(crate::tcrypt::open(
            store,
            o.clone(),
        )?))),
        Some(Requested::Fvault2) => {
            Ok(Header::new(Box::new(crate::fvault2::Fvault2::read(store)?)))
        }
    }
}

/// The names of [`FORMATS`], for messages: `luks1, luks2, geli, bitlk, fvault2`.
pub fn known_formats() -> String {
    let names: Vec<&str> = FORMATS.iter().map(|d| d.name).collect();
    names.join(", ")
}

/// The first bytes of `store` and its size, for the detectors.
fn probe_parts(store: &dyn Store) -> Result<(Vec<u8>, u64)> {
    let mut head = vec![0u8; PROBE_BYTES];
    let n = store::read_head(store, &mut head)?;
    head.truncate(n);
    Ok((head, store::size(store)?))
}

/// What is left of the header of `store` when [`Header::read`] refuses it: the first
/// format that recognises a header there says. Never writes.
pub fn salvage(store: &dyn Store) -> Result<Option<Salvaged>> {
    let (head, size) = probe_parts(store)?;
    let probe = Probe {
        store,
        head: &head,
        size,
    };
    Ok(FORMATS.iter().find_map(|d| (d.salvage)(&probe)))
}

/// Repairs the header of `store` as cryptsetup's `repair` does: a damaged or stale copy
/// is rebuilt from the good one, a header the format can rebuild without guessing (LUKS1:
/// inactive keyslots pointing outside the standard layout) is rewritten; a header with
/// nothing valid to rebuild from is refused with why. Returns what was done (nothing
/// when the header needs no repair).
pub fn repair_header(store: &dyn Store) -> Result<Vec<String>> {
    match Header::read(store) {
        Ok(mut h) if h.needs_repair() => h.repair(store),
        Ok(_) => Ok(Vec::new()),
        Err(e @ Error::Header(HeaderError::Corrupt(_))) => {
            match salvage(store)?.and_then(|s| s.rebuilt) {
                Some(mut rebuilt) => rebuilt.repair(store),
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

impl Header {
    /// Detects the format of `store` and reads its header. Never writes. A store where
    /// two formats find a valid header is refused, naming both (see the module doc).
    pub fn read(store: &dyn Store) -> Result<Header> {
        let (head, size) = probe_parts(store)?;
        let probe = Probe {
            store,
            head: &head,
            size,
        };
        for (i, driver) in FORMATS.iter().enumerate() {
            if let Some(found) = (driver.detect)(&probe) {
                let header = found.map(Header::new)?;
                let other = FORMATS[i + 1..]
                    .iter()
                    .find(|d| matches!((d.detect)(&probe), Some(Ok(_))));
                if let Some(other) = other {
                    return Err(HeaderError::Corrupt(format!(
                        "{} holds two formats at once, a valid {} header and a valid {} \
                         header (one left behind by a format that did not wipe it): \
                         refusing to guess which is current; keep the right one with \
                         `header backup` and `header restore`, or format it again",
                        store.name(),
                        driver.name,
                        other.name
                    ))
                    .into());
                }
                return Ok(header);
            }
        }
        Err(HeaderError::Unrecognised(format!(
            "none of {} is in {} ({} bytes); VeraCrypt and TrueCrypt volumes have no \
             signature: name them (--type tcrypt); a FileVault 2 volume with a damaged header \
             is found with --type fvault2",
            known_formats(),
            store.name(),
            probe.size
        ))
        .into())
    }
}
