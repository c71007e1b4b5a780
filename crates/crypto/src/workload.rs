//! The work each family's backends are timed on when more than one is usable
//! (`backend::measure` makes the choice; AES-GCM's, chosen apart from the other AES
//! modes, is in `gcm`): real work through the public modes, the size
//! of a storage sector or a small batch of them, on a key made once per candidate. A few
//! KiB keeps each run in L1 and the whole choice within a few milliseconds even with the
//! portable backends among the candidates.
//!
//! The keys are fixed public patterns: nothing secret is timed.

use crate::backend::Workload;
use crate::mac::{MacAlgorithm, MacBackend, SectorMac, UnitShape, AUTH_KEY_LEN};
use crate::{aes, magma, Backend, GostBackend};

/// Bytes of one AES, AES-GCM or GOST run: one 4 KiB sector.
pub(crate) const SECTOR: usize = 4096;

/// A key of `len` bytes, no two bytes alike within 256 (the two XTS halves differ).
pub(crate) fn key(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(0x3b) ^ 0x5c).collect()
}

/// The AES modes: AES-256-XTS over one 4 KiB unit, the mode storage runs on.
pub(crate) const AES: Workload<Backend> = Workload {
    algorithm: crate::backend::Algorithm::Aes,
    what: "aes-256-xts, one 4096-byte unit",
    bytes: SECTOR,
    usable: |_| Ok(()),
    prepare: |b| {
        let x = aes::Xts::with_backend(&key(64), b)?;
        let mut buf = vec![0u8; SECTOR];
        Ok(Box::new(move || {
            let _ = x.encrypt(&[7; 16], &mut buf);
        }))
    },
};

/// GOST: Magma CTR over 4 KiB (the counter modes are what the wide backends do).
pub(crate) const GOST: Workload<GostBackend> = Workload {
    algorithm: crate::backend::Algorithm::Gost,
    what: "magma-ctr, 4096 bytes",
    bytes: SECTOR,
    usable: |_| Ok(()),
    prepare: |b| {
        let c = magma::Ctr::with_backend(&key(32), b)?;
        let mut buf = vec![0u8; SECTOR];
        Ok(Box::new(move || {
            let _ = c.encrypt(&[3; 4], &mut buf);
        }))
    },
};

/// Units of the sector-tag batch: 16, the widest backend's lanes.
const MAC_UNITS: usize = 16;
/// Bytes of one tagged unit (GELI's usual sector).
const MAC_UNIT: usize = 512;

/// The sector tags: HMAC-SHA256 tags of 16 units of 512 bytes (GELI's default
/// authenticated sectors), one batch.
pub(crate) const MAC: Workload<MacBackend> = Workload {
    algorithm: crate::backend::Algorithm::Mac,
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
