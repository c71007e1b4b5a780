//! What `dump` still shows of a LUKS2 header that failed its checks: the metadata of a copy
//! whose checksum is sound when it parses (even if it breaks a rule), else the primary's
//! binary header and whatever metadata its JSON area holds (checksum or not), and why
//! each copy was refused. Nothing here is used to
//! open or change a volume, and nothing is rebuilt: with no valid copy there is nothing
//! to rebuild from.

use super::copies::{self, Binary, Read, COPY};
use super::sizes::{BIN_SIZE, HDR_SIZES};
use super::Luks2;
use crate::format::{Format, Probe, Salvaged};
use crate::luks::fields::be64;
use crate::luks::magic::Magic;
use crate::luks::rules::detail;
use crate::store;
use serde_json::Value;

/// The primary's binary header read without checks (text fields up to their first NUL).
fn unchecked_binary(head: &[u8]) -> Binary {
    let text = |at: usize, len: usize| {
        head.get(at..at + len)
            .map(|b| {
                let end = b.iter().position(|&c| c == 0).unwrap_or(len);
                String::from_utf8_lossy(&b[..end]).into_owned()
            })
            .unwrap_or_default()
    };
    let num = |at: usize| head.get(at..at + 8).map_or(0, |b| be64(b, 0));
    Binary {
        magic: Magic::of(head, false).unwrap_or_default(),
        hdr_size: num(8),
        seqid: num(16),
        label: text(24, 48),
        csum_alg: text(72, 32),
        uuid: text(168, 40),
        subsystem: text(208, 48),
    }
}

/// The metadata in the primary's JSON area, if it parses, whatever its checksum says.
fn unchecked_json(p: &Probe<'_>, hdr_size: u64) -> Option<Value> {
    if !(HDR_SIZES[0]..=HDR_SIZES[8]).contains(&hdr_size) {
        return None;
    }
    let mut area = vec![0u8; hdr_size as usize - BIN_SIZE];
    store::read_exact(p.store, &mut area, BIN_SIZE as u64, "luks2 json area").ok()?;
    copies::parse_area(&area).0
}

/// The report of a LUKS2 header [`detect`](super::detect) refused, when the store holds
/// one at all.
pub(super) fn salvage(p: &Probe<'_>) -> Option<Salvaged> {
    let both = copies::read_both(p.store)?;
    let mut problems: Vec<String> = both
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let why = match c {
                Read::Sound(s) => detail(s.verdict.as_ref().err()?),
                Read::Damaged(e) | Read::Absent(e) => detail(e),
            };
            Some(format!("{} copy: {why}", COPY[i]))
        })
        .collect();
    let shown = both.iter().find_map(|c| match c {
        Read::Sound(s) if s.json.is_some() => Some((s.bin.clone(), s.json.clone())),
        _ => None,
    });
    if problems.is_empty() {
        // Both copies valid: the header was refused for the image it is in.
        if let Err(e) = copies::choose(both, p.size).and_then(|f| Luks2::from_found(f, p.size)) {
            problems.push(detail(&e));
        }
    }
    let (bin, json) = shown.unwrap_or_else(|| {
        let bin = unchecked_binary(p.head);
        let json = unchecked_json(p, bin.hdr_size);
        (bin, json)
    });
    let report = Luks2::shown(bin, json.clone().unwrap_or(Value::Null), problems).report();
    Some(Salvaged {
        report,
        json,
        rebuilt: None,
    })
}

impl Luks2 {
    /// A header to show only: `bin` and `json` as found, `problems` why it cannot be used.
    fn shown(bin: Binary, json: Value, problems: Vec<String>) -> Luks2 {
        Luks2 {
            bin,
            salts: [[0; 64]; 2],
            json,
            area: Vec::new(),
            current: [false; 2],
            damage: Vec::new(),
            fixed: Vec::new(),
            problems,
        }
    }
}
