//! The known-answer self-test of the sector-tag backends, run once per backend before
//! its first use: GELI unit tags computed with Python's `hashlib`/`hmac` from the
//! formulas, then whole runs against the `hmac` crate one unit at a time.

use super::{MacAlgorithm, MacBackend, SectorMac, UnitShape};

/// The known answers of the HMAC-SHA256 and HMAC-SHA1 unit tags (computed with Python's
/// `hashlib`/`hmac` from the formulas): key bytes `7i + 3`, offset 0x1_2345_6000, a
/// 480-byte message of bytes `13i + 5`.
const KAT: [(MacAlgorithm, &str); 2] = [
    (
        MacAlgorithm::HmacSha256,
        "500b29d87e8b4ce416e63587d8035286b031e0fde4833dd22efd0cb4c8549e96",
    ),
    (
        MacAlgorithm::HmacSha1,
        "07fe5136bbeb5c31373be6dc528a148586cecf4c",
    ),
];

/// The known answers, then runs of 1..=19 units (of 480, 60 and 0 message bytes) against
/// the `hmac` crate one unit at a time, on every lane kernel of `backend`.
pub(super) fn self_test(backend: MacBackend) -> bool {
    let akey: [u8; 64] = core::array::from_fn(|i| (i * 7 + 3) as u8);
    let lanes: &[usize] = if backend == MacBackend::Shani {
        &[1, 2, 4]
    } else {
        &[0]
    };
    for &lanes in lanes {
        let Ok(mac) = SectorMac::build(MacAlgorithm::HmacSha256, &akey, backend, lanes) else {
            return false;
        };
        for (alg, want) in KAT {
            let mac = SectorMac { alg, ..mac.clone() };
            let shape = UnitShape {
                unit_len: 512,
                units_per_group: 1,
                msg_len: 480,
                last_msg_len: 480,
            };
            let mut unit = [0u8; 512];
            for (i, b) in unit[alg.tag_len()..].iter_mut().enumerate() {
                *b = (i * 13 + 5) as u8;
            }
            if mac.sign(&mut unit, shape, 0x1_2345_6000).is_err()
                || !hex_eq(&unit[..alg.tag_len()], want)
                || !differs_nowhere(&mac, 19)
            {
                return false;
            }
        }
    }
    true
}

fn hex_eq(bytes: &[u8], hex: &str) -> bool {
    bytes.len() * 2 == hex.len()
        && bytes
            .iter()
            .zip(hex.as_bytes().chunks(2))
            .all(|(b, h)| u8::from_str_radix(std::str::from_utf8(h).unwrap_or(""), 16) == Ok(*b))
}

/// Runs of up to `max` units signed by `mac` (whole groups of three shapes, one with
/// empty messages) equal the reference, unit by unit.
fn differs_nowhere(mac: &SectorMac, max: usize) -> bool {
    let t = mac.tag_len();
    for (units_per_group, msg_len, last_msg_len) in [(1, 480, 480), (3, 480, 60), (2, 100, 0)] {
        let shape = UnitShape {
            unit_len: 512,
            units_per_group,
            msg_len,
            last_msg_len,
        };
        for n in (units_per_group..=max).step_by(units_per_group) {
            let mut units: Vec<u8> = (0..n * 512).map(|i| (i * 151 + n) as u8).collect();
            let offset = (n as u64) << 31;
            if mac.sign(&mut units, shape, offset).is_err() {
                return false;
            }
            for (i, u) in units.chunks_exact(512).enumerate() {
                let mut want = [0u8; 64];
                let off = offset + (i * 512) as u64;
                mac.tag_into(off, &u[t..t + shape.msg_len_of(i)], &mut want[..t]);
                if want[..t] != u[..t] {
                    return false;
                }
            }
        }
    }
    true
}
