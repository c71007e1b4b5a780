//! The LUKS1 keyslot layout: the checks cryptsetup makes before it uses a header, and its
//! repair of inactive keyslots.
//!
//! Every keyslot, active or not, must have 4000 stripes and material that starts after
//! the 592-byte header, ends before the data (unless the data offset is 0: a detached
//! header) and overlaps no other keyslot's; the image must hold all of it. An inactive
//! keyslot counts: it is where the next key goes, so one pointing into an active
//! keyslot's material would overwrite it.
//!
//! A header that breaks these rules only in inactive keyslots is rebuilt by `repair`, as
//! cryptsetup's repair does: each such keyslot is reset to its place in cryptsetup's
//! standard layout (material from sector 8, each keyslot's aligned to 4 KiB), disabled,
//! its salt wiped. Active keyslots are never moved: a header whose active keyslots break
//! the rules is refused, and nothing is written.

use super::{Luks1, ACTIVE, DISABLED, HEADER_LEN, KEYSLOTS};
use crate::error::Result;
use crate::format::dump::Field;
use crate::format::{Format, Probe, Salvaged};
use crate::luks::af;
use crate::luks::fields::align_up;
use crate::luks::keyslot::MAX_KEY_BYTES;
use crate::luks::rules::{detail, Rule};

/// Where cryptsetup puts the first keyslot's material, and aligns each keyslot's: 4 KiB,
/// in 512-byte sectors.
const ALIGN_SECTORS: u64 = 8;

impl Luks1 {
    /// Bytes of one keyslot's material: 4000 stripes of the key, in whole sectors.
    pub(super) fn material_len(&self) -> u64 {
        align_up(self.key_bytes as u64 * af::STRIPES as u64, 512)
    }

    /// The checks a header must pass to be used (see the module documentation).
    pub(super) fn check(&self) -> Result<()> {
        if self.key_bytes == 0 || self.key_bytes as u64 > MAX_KEY_BYTES {
            return Err(Rule::Luks1Key.broken(format!(
                "volume key length {} bytes (1 to {MAX_KEY_BYTES})",
                self.key_bytes
            )));
        }
        if self.mk_iterations == 0 {
            return Err(Rule::Luks1Key.broken("the volume key digest has 0 iterations"));
        }
        let len = self.material_len();
        let data = self.payload_offset as u64 * 512;
        for (i, s) in self.slots.iter().enumerate() {
            if s.state != ACTIVE && s.state != DISABLED {
                return Err(Rule::Luks1SlotState.broken(format!(
                    "keyslot {i} has an invalid state {:#010x}",
                    s.state
                )));
            }
            if s.stripes as usize != af::STRIPES || (s.active && s.iterations == 0) {
                return Err(Rule::Luks1Slot.broken(format!(
                    "keyslot {i} has {} stripes (must be {}) and {} iterations",
                    s.stripes,
                    af::STRIPES,
                    s.iterations
                )));
            }
            let off = s.key_offset as u64 * 512;
            if off < HEADER_LEN as u64 {
                return Err(Rule::Luks1SlotInHeader.broken(format!(
                    "keyslot {i} material at {off} lies inside the {HEADER_LEN}-byte header"
                )));
            }
            if data != 0 && off + len > data {
                return Err(Rule::Luks1SlotInData.broken(format!(
                    "keyslot {i} material {off}+{len} reaches the data at {data}"
                )));
            }
        }
        let mut order: Vec<usize> = (0..KEYSLOTS).collect();
        order.sort_by_key(|&i| self.slots[i].key_offset);
        for w in order.windows(2) {
            let (a, b) = (w[0], w[1]);
            let end = self.slots[a].key_offset as u64 * 512 + len;
            if (self.slots[b].key_offset as u64 * 512) < end {
                return Err(Rule::Luks1SlotOverlap.broken(format!(
                    "keyslot {b} material at {} lies inside keyslot {a}'s ({}+{len})",
                    self.slots[b].key_offset as u64 * 512,
                    self.slots[a].key_offset as u64 * 512
                )));
            }
        }
        Ok(())
    }

    /// Refuses an image of `image` bytes too small for the keyslots (cryptsetup's "Device
    /// too small").
    pub(super) fn check_size(&self, image: u64) -> Result<()> {
        let end = (0..KEYSLOTS).map(|i| self.slot_end(i)).max().unwrap_or(0);
        if image < end {
            return Err(Rule::DeviceTooSmall.broken(format!(
                "the image has {image} bytes; the luks1 keyslots end at {end}"
            )));
        }
        Ok(())
    }

    /// The header with its inactive keyslots put back in the standard layout, when that
    /// is what it lacks (and `None` otherwise: nothing to rebuild without guessing).
    fn rebuilt(&self, image: u64) -> Option<Luks1> {
        if ![16, 32, 64].contains(&self.key_bytes)
            || (self.slots[0].key_offset as u64) < ALIGN_SECTORS
        {
            return None;
        }
        let step = align_up(self.material_len() / 512, ALIGN_SECTORS);
        let mut h = self.clone();
        for (i, s) in h.slots.iter_mut().enumerate().filter(|(_, s)| !s.active) {
            let standard = (ALIGN_SECTORS + i as u64 * step) as u32;
            if s.key_offset == standard && s.stripes as usize == af::STRIPES && s.state == DISABLED
            {
                continue;
            }
            let mut what = Vec::new();
            if s.key_offset != standard {
                what.push(format!("material at sector {} -> {standard}", s.key_offset));
            }
            if s.stripes as usize != af::STRIPES {
                what.push(format!("{} -> {} stripes", s.stripes, af::STRIPES));
            }
            if s.state != DISABLED {
                what.push(format!("state {:#010x} -> disabled", s.state));
            }
            h.repairs.push(format!(
                "inactive keyslot {i} reset to the standard layout ({}); salt wiped",
                what.join(", ")
            ));
            s.key_offset = standard;
            s.stripes = af::STRIPES as u32;
            s.state = DISABLED;
            s.iterations = 0;
            s.salt = [0; 32];
        }
        let valid = h.check().and_then(|()| h.check_size(image)).is_ok();
        (valid && !h.repairs.is_empty()).then_some(h)
    }
}

/// What is left of a LUKS1 header the detector refused: its fields, why it cannot be
/// used, and the header rebuilt when only inactive keyslots were wrong.
pub(super) fn salvage(p: &Probe<'_>) -> Option<Salvaged> {
    if !super::is_luks1(p.head) {
        return None;
    }
    let h = Luks1::parse_fields(p.head).ok()?;
    let problem = h.check().and_then(|()| h.check_size(p.size)).err()?;
    let mut report = h.report();
    report.fields.push(Field::new("Problem", detail(&problem)));
    Some(Salvaged {
        report,
        json: Some(h.to_json()),
        rebuilt: h.rebuilt(p.size).map(|r| Box::new(r) as Box<dyn Format>),
    })
}
