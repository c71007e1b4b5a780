//! The order in which a header restore writes, so that a crash at any point leaves a
//! volume that opens with the header it had or with the restored one.
//!
//! The backup's pieces (its header copies and its keyslot region, see
//! [`Format::backup_pieces`]) replace the image's. What must not happen is what a plain
//! copy in piece order does: overwrite the keyslot areas the current header points at
//! before the backup's header is in place, which leaves a current header whose keyslots
//! are gone (and, until the copy ends, a backup header whose keyslots are not there yet).
//! So the bytes under the current header's keyslot areas ([`Format::keyslot_areas`]) are
//! held back:
//!
//! 1. every piece in the format's order (keyslot region, then the header copies in the
//!    order that keeps one valid: LUKS2 the secondary, then the primary; LUKS1's one
//!    header in one write inside a 4096-byte block), except the bytes under the current
//!    keyslot areas, each piece synced before the next;
//! 2. those bytes, then a sync.
//!
//! Until the first header copy of the backup lands, the current header and all its
//! keyslot material are untouched, so it opens. From then on the reader may take the
//! backup's copy (LUKS2 takes the valid copy with the higher sequence id, so either
//! header may be the one read while the copies differ), and the backup's keyslots must
//! already be in place: they were written in step 1, except where they lie under a
//! current keyslot area. There the bytes either are the same in the image and the backup
//! (a keyslot both headers share), or they differ: both headers need the same bytes to
//! hold different material, and no order of writes keeps both. Before anything else is
//! written, the current header then moves those keyslots elsewhere
//! ([`Format::vacate`]: a crash-safe keyslot move, copy before metadata, which keeps
//! every passphrase of the current header working); the conflict is gone and step 1
//! writes the backup's keyslots whole. After step 1 the backup's header and keyslots are
//! complete, and step 2 writes only where no header points any more.
//!
//! Two cases keep no such guarantee, and the restore goes ahead all the same (the backup
//! file is only read, so running it again completes it): when the current keyslots cannot
//! be moved (no free area outside the backup's keyslots, or a header this implementation
//! does not write), and when the backup's layout differs from the current header's (its
//! keyslots or header copies lie over the current header copies). A current header that
//! does not read has nothing to keep: the pieces go in order.

use super::{Format, Piece};
use crate::error::{Error, Result};
use crate::store::{self, Store};

/// A byte range `[start, end)` of the image.
type Span = (u64, u64);

/// Spans of (offset, length) pairs, empty ones dropped.
fn spans(areas: &[(u64, u64)]) -> Vec<Span> {
    areas
        .iter()
        .filter(|&&(_, len)| len > 0)
        .map(|&(off, len)| (off, off.saturating_add(len)))
        .collect()
}

/// The part of `a` inside `b`.
fn overlap(a: Span, b: Span) -> Option<Span> {
    let (start, end) = (a.0.max(b.0), a.1.min(b.1));
    (start < end).then_some((start, end))
}

/// The parts of `span` outside every one of `holes`, in order.
fn outside(span: Span, holes: &[Span]) -> Vec<Span> {
    let mut holes: Vec<Span> = holes.iter().filter_map(|&h| overlap(span, h)).collect();
    holes.sort();
    let mut out = Vec::new();
    let mut pos = span.0;
    for (start, end) in holes {
        if start > pos {
            out.push((pos, start));
        }
        pos = pos.max(end);
    }
    if pos < span.1 {
        out.push((pos, span.1));
    }
    out
}

/// The parts of `span` inside one of `areas`, in order.
fn inside(span: Span, areas: &[Span]) -> Vec<Span> {
    let mut parts = Vec::new();
    let mut pos = span.0;
    for gap in outside(span, areas) {
        if gap.0 > pos {
            parts.push((pos, gap.0));
        }
        pos = gap.1;
    }
    if pos < span.1 {
        parts.push((pos, span.1));
    }
    parts
}

/// The image span of a piece.
fn image_span(p: &Piece) -> Span {
    (p.image, p.image + p.len)
}

/// Copies the parts `parts` (image spans inside the piece `p`) from the backup.
fn copy_parts(image: &dyn Store, backup: &dyn Store, p: &Piece, parts: &[Span]) -> Result<()> {
    for &(start, end) in parts {
        let from = p.backup + (start - p.image);
        store::copy(backup, from, image, start, end - start, "backup's metadata")?;
    }
    Ok(())
}

/// Whether the backup holds other bytes than the image somewhere in `span`.
fn differs(image: &dyn Store, backup: &dyn Store, pieces: &[Piece], span: Span) -> Result<bool> {
    const CHUNK: u64 = 1 << 20;
    let mut a = vec![0u8; CHUNK.min(span.1 - span.0) as usize];
    let mut b = a.clone();
    for p in pieces {
        let Some((start, end)) = overlap(span, image_span(p)) else {
            continue;
        };
        let mut at = start;
        while at < end {
            let n = (end - at).min(CHUNK) as usize;
            store::read_exact(image, &mut a[..n], at, "keyslot area")?;
            let from = p.backup + (at - p.image);
            store::read_exact(backup, &mut b[..n], from, "backup's keyslot area")?;
            if a[..n] != b[..n] {
                return Ok(true);
            }
            at += n as u64;
        }
    }
    Ok(false)
}

/// Writes the `pieces` of `restored` (read from `backup`) onto `image`, whose header as
/// read before (if it had a valid one) is `current`, in the order the module documentation
/// argues for.
pub(super) fn write(
    image: &dyn Store,
    backup: &dyn Store,
    restored: &dyn Format,
    pieces: &[Piece],
    current: Option<Box<dyn Format>>,
) -> Result<()> {
    let mut held = Vec::new();
    if let Some(mut current) = current {
        held = spans(&current.keyslot_areas());
        let wanted = spans(&restored.keyslot_areas());
        let mut conflict = false;
        for &w in &wanted {
            for &h in &held {
                if let Some(o) = overlap(w, h) {
                    conflict |= differs(image, backup, pieces, o)?;
                }
            }
        }
        if conflict {
            let ranges: Vec<(u64, u64)> = wanted.iter().map(|&(s, e)| (s, e - s)).collect();
            match current.vacate(image, &ranges) {
                Ok(()) => held = spans(&current.keyslot_areas()),
                // A store that fails stops here; a header that cannot move its keyslots
                // wrote nothing, and the restore goes on without the guarantee.
                Err(e @ Error::Io { .. }) => return Err(e),
                Err(_) => {}
            }
        }
    }
    for p in pieces {
        copy_parts(image, backup, p, &outside(image_span(p), &held))?;
        store::sync(image)?;
    }
    if !held.is_empty() {
        for p in pieces {
            copy_parts(image, backup, p, &inside(image_span(p), &held))?;
        }
        store::sync(image)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_split_into_the_parts_outside_and_inside_holes() {
        let holes = [(10, 20), (15, 30), (40, 50), (90, 200)];
        assert_eq!(outside((0, 100), &holes), vec![(0, 10), (30, 40), (50, 90)]);
        assert_eq!(
            inside((0, 100), &holes),
            vec![(10, 30), (40, 50), (90, 100)]
        );
        assert_eq!(outside((12, 18), &holes), vec![]);
        assert_eq!(inside((12, 18), &holes), vec![(12, 18)]);
        assert_eq!(outside((0, 5), &holes), vec![(0, 5)]);
        assert_eq!(inside((0, 5), &holes), vec![]);
    }
}
