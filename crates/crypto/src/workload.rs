//! The work each family's backends are timed on when more than one is usable
//! (`backend::measure` makes the choice; AES-GCM's, chosen apart from the other AES
//! modes, is in `gcm`, and Serpent's in `cascade/serpent.rs`): real work through the
//! public modes, a few storage sectors per run, on a key made once per candidate. 8 to 16 KiB keeps each run in L1, above the
//! clock's resolution, and the whole choice well under a millisecond.
//!
//! The keys are fixed public patterns: nothing secret is timed.

use crate::backend::{Algorithm, Run, Workload};
use crate::mac::{MacAlgorithm, MacBackend, SectorMac, UnitShape, AUTH_KEY_LEN};
use crate::modes::Xts;
use crate::{magma, Backend, Error, GostBackend};

/// Bytes of one AES, AES-GCM or GOST sector.
pub(crate) const SECTOR: usize = 4096;
/// Sectors in one run: 16 KiB, long enough (about a microsecond on the fast backends) for
/// the clock's resolution and still in L1.
pub(crate) const SECTORS: usize = 4;

/// A key of `len` bytes, no two bytes alike within 256 (the two XTS halves differ).
pub(crate) fn key(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(0x3b) ^ 0x5c)
        .collect()
}

/// A run over `SECTORS` sectors of zeros on the key `k`: `each(k, i, sector)` for each.
pub(crate) fn sectors<K: 'static>(k: K, each: fn(&K, usize, &mut [u8])) -> Run {
    let mut buf = vec![0u8; SECTORS * SECTOR];
    Box::new(move || {
        for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
            each(&k, i, sector);
        }
    })
}

/// The work `prepare` over `SECTORS` sectors (`what`), for the choice `algorithm`, with no
/// check beyond the family's own.
pub(crate) const fn on_sectors<F>(
    algorithm: Algorithm,
    what: &'static str,
    prepare: fn(F) -> Result<Run, Error>,
) -> Workload<F> {
    Workload {
        algorithm,
        what,
        bytes: SECTORS * SECTOR,
        usable: |_| Ok(()),
        prepare,
    }
}

/// The AES modes: AES-256-XTS over 4 KiB units, the mode storage runs on.
pub(crate) const AES: Workload<Backend> =
    on_sectors(Algorithm::Aes, "aes-256-xts, 4 units of 4096 bytes", |b| {
        let x = Xts::with_backend(&key(64), b)?;
        Ok(sectors(x, |x, i, unit| {
            drop(x.encrypt(&[i as u8; 16], unit))
        }))
    });

/// GOST: Magma CTR over 4 KiB sectors (the counter modes are what the wide backends do).
pub(crate) const GOST: Workload<GostBackend> =
    on_sectors(Algorithm::Gost, "magma-ctr, 4 sectors of 4096 bytes", |b| {
        let c = magma::Ctr::with_backend(&key(32), b)?;
        Ok(sectors(c, |c, i, s| drop(c.encrypt(&[i as u8; 4], s))))
    });

/// Units of the sector-tag batch: 16, the widest backend's lanes.
const MAC_UNITS: usize = 16;
/// Bytes of one tagged unit (GELI's usual sector).
const MAC_UNIT: usize = 512;

/// The sector tags: HMAC-SHA256 tags of 16 units of 512 bytes (GELI's default
/// authenticated sectors), one batch.
pub(crate) const MAC: Workload<MacBackend> = Workload {
    algorithm: Algorithm::Mac,
    what: "hmac-sha256 tags, 16 units of 512 bytes",
    bytes: MAC_UNITS * MAC_UNIT,
    usable: |_| Ok(()),
    prepare: |b| {
        let m = SectorMac::with_backend(MacAlgorithm::HmacSha256, &key(AUTH_KEY_LEN), b)?;
        let shape = UnitShape {
            unit_len: MAC_UNIT,
            units_per_group: 1,
            msg_len: MAC_UNIT - 32,
            last_msg_len: MAC_UNIT - 32,
        };
        let mut units = vec![0u8; MAC_UNITS * MAC_UNIT];
        Ok(Box::new(move || {
            let _ = m.sign(&mut units, shape, 0);
        }))
    },
};
