//! The two magics a LUKS header may carry: cryptsetup's `LUKS\xba\xbe` (`SKUL\xba\xbe` for a
//! LUKS2 secondary copy), and librbd's layered-clone magic `RBDL\xba\xbe` (`LDBR\xba\xbe`,
//! its first four bytes reversed, for the secondary copy), which Ceph writes on an
//! encrypted clone formatted with a key of its own so that nothing mistakes the clone's
//! header for one of its parent's (Ceph's src/librbd/crypto/luks/Magic.cc).
//!
//! A clone header is otherwise a LUKS header byte for byte: librbd has libcryptsetup write
//! it, then swaps the magic, so LUKS2 checksums are those over the real magic. Here the
//! checksum is always computed with the real magic in place ([`Magic::as_real`]), a header
//! is written back with the magic it was read with, and `dump` names it.

/// Which magic a header carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Magic {
    /// `LUKS\xba\xbe` / `SKUL\xba\xbe`: cryptsetup's.
    #[default]
    Luks,
    /// `RBDL\xba\xbe` / `LDBR\xba\xbe`: a librbd layered clone's.
    RbdClone,
}

const LUKS_PRIMARY: &[u8; 6] = b"LUKS\xba\xbe";
const LUKS_SECONDARY: &[u8; 6] = b"SKUL\xba\xbe";
const CLONE_PRIMARY: &[u8; 6] = b"RBDL\xba\xbe";
const CLONE_SECONDARY: &[u8; 6] = b"LDBR\xba\xbe";

impl Magic {
    /// The magic bytes of a primary header (or a LUKS1 header).
    pub fn primary(self) -> &'static [u8; 6] {
        match self {
            Magic::Luks => LUKS_PRIMARY,
            Magic::RbdClone => CLONE_PRIMARY,
        }
    }

    /// The magic bytes of a LUKS2 secondary header copy.
    pub fn secondary(self) -> &'static [u8; 6] {
        match self {
            Magic::Luks => LUKS_SECONDARY,
            Magic::RbdClone => CLONE_SECONDARY,
        }
    }

    /// The magic `bytes` start with, as a primary header (`secondary: false`) or a LUKS2
    /// secondary copy.
    pub fn of(bytes: &[u8], secondary: bool) -> Option<Magic> {
        let head = bytes.get(..6)?;
        [Magic::Luks, Magic::RbdClone].into_iter().find(|m| {
            let want = if secondary {
                m.secondary()
            } else {
                m.primary()
            };
            head == want
        })
    }

    /// Puts the real (cryptsetup) magic in place of a clone magic at the start of `copy`:
    /// what a LUKS2 checksum covers.
    pub fn as_real(copy: &mut [u8]) {
        if copy.len() < 6 {
            return;
        }
        if &copy[..6] == CLONE_PRIMARY {
            copy[..6].copy_from_slice(LUKS_PRIMARY);
        } else if &copy[..6] == CLONE_SECONDARY {
            copy[..6].copy_from_slice(LUKS_SECONDARY);
        }
    }

    /// For `dump`: `LUKS` or `RBDL (librbd layered clone)`.
    pub fn describe(self) -> &'static str {
        match self {
            Magic::Luks => "LUKS",
            Magic::RbdClone => "RBDL (librbd layered clone)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Magic.cc derives the secondary clone magic by swapping bytes 0/3 and 1/2.
    #[test]
    fn secondary_clone_magic_is_the_primary_reversed() {
        let p = Magic::RbdClone.primary();
        assert_eq!(
            Magic::RbdClone.secondary(),
            &[p[3], p[2], p[1], p[0], p[4], p[5]]
        );
        let mut copy = *CLONE_SECONDARY;
        Magic::as_real(&mut copy);
        assert_eq!(&copy, LUKS_SECONDARY);
        assert_eq!(
            Magic::of(b"RBDL\xba\xbe\0\x02", false),
            Some(Magic::RbdClone)
        );
        assert_eq!(Magic::of(b"LDBR\xba\xbe", false), None);
        assert_eq!(Magic::of(b"LDBR\xba\xbe", true), Some(Magic::RbdClone));
    }
}
