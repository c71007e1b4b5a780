//! The rules a LUKS header must keep to be used, each with a stable name. A header that
//! breaks one is refused by every operation; the error names the rule first
//! (`luks2-area-overlap: keyslot 7 area ... overlaps keyslot 6 area ...`), so that users,
//! scripts and tests can tell why. The LUKS2 rules are at least as strict as cryptsetup's
//! own validation (its `luks2-validation-test` suite is reproduced in the CLI tests); the
//! LUKS1 rules are cryptsetup's keyslot layout checks.

use crate::error::{Error, HeaderError};

/// Declares [`Rule`]: each rule's variant, its doc (also its [`Rule::description`]) and
/// its name, once.
macro_rules! rules {
    ($($(#[doc = $doc:literal])+ $variant:ident => $name:literal,)+) => {
        /// A rule of the LUKS1 or LUKS2 on-disk format.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Rule {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl Rule {
            /// Every rule.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)+];

            /// The rule's name, as messages give it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Rule::$variant => $name,)+
                }
            }

            /// What the rule asks of a header, in one line.
            pub fn description(self) -> &'static str {
                match self {
                    $(Rule::$variant => concat!($($doc),+).trim_ascii_start(),)+
                }
            }
        }
    };
}

rules! {
    /// A LUKS2 copy has its magic and version 2.
    Luks2Magic => "luks2-magic",
    /// A LUKS2 copy is 16 KiB to 4 MiB; the secondary sits at the offset of its own size.
    Luks2HeaderSize => "luks2-header-size",
    /// A LUKS2 copy's offset field says where it is.
    Luks2HeaderOffset => "luks2-header-offset",
    /// A LUKS2 copy's checksum matches (with an algorithm known here).
    Luks2Checksum => "luks2-checksum",
    /// The JSON area holds JSON (nested at most 32 deep).
    Luks2JsonSyntax => "luks2-json-syntax",
    /// The JSON area starts with `{`: the metadata is one object from its first byte.
    Luks2JsonStart => "luks2-json-start",
    /// The JSON is followed by a NUL within the area.
    Luks2JsonTerminator => "luks2-json-terminator",
    /// Only NULs follow the JSON.
    Luks2JsonTrailing => "luks2-json-trailing",
    /// `keyslots`, `tokens`, `segments`, `digests` and `config` are objects.
    Luks2Section => "luks2-section",
    /// Keyslot, token, segment and digest ids are decimal numbers (keyslots below 32).
    Luks2Id => "luks2-id",
    /// `config.requirements` is an object whose `mandatory` is an array of strings, with
    /// at most one online-reencryption flag.
    Luks2Requirements => "luks2-requirements",
    /// A token has a type and a `keyslots` array of strings.
    Luks2Token => "luks2-token",
    /// A digest has a type and `keyslots` and `segments` arrays of strings.
    Luks2Digest => "luks2-digest",
    /// Every keyslot and segment a digest or token names exists.
    Luks2Reference => "luks2-reference",
    /// A segment has a type, an offset and a size (and, for `crypt`, iv_tweak, encryption
    /// and a 32-bit sector size); flags are an array of strings.
    Luks2Segment => "luks2-segment",
    /// Numbers stored as strings are decimal and fit 64 bits: no sign, no overflow.
    Luks2Uint64 => "luks2-uint64",
    /// Segment offsets and sizes are multiples of 512, sector sizes non-zero multiples of
    /// 512, a segment's size a multiple of its sector size.
    Luks2Alignment => "luks2-alignment",
    /// Every crypt segment is covered by a digest.
    Luks2SegmentDigest => "luks2-segment-digest",
    /// Segment ids run from 0 without gaps, regular segments before backup ones, only the
    /// last regular segment `dynamic`.
    Luks2SegmentOrder => "luks2-segment-order",
    /// Regular segments do not overlap.
    Luks2SegmentOverlap => "luks2-segment-overlap",
    /// A keyslot has a type, a 32-bit key size, and (for `luks2` keyslots) `kdf`, `af`
    /// and `area` objects with their fields; a keyslot has an `area` object.
    Luks2Keyslot => "luks2-keyslot",
    /// `config` has `json_size` and `keyslots_size`; its flags are strings.
    Luks2Config => "luks2-config",
    /// `json_size` plus the binary header is an allowed size and matches the binary
    /// header.
    Luks2MetadataSize => "luks2-metadata-size",
    /// `keyslots_size` is a multiple of 4096, at most 128 MiB, and ends before the data.
    Luks2KeyslotsSize => "luks2-keyslots-size",
    /// No keyslot area starts inside the two header copies.
    Luks2AreaInHeader => "luks2-area-in-header",
    /// A keyslot area is not empty, does not overflow and ends inside the keyslots area.
    Luks2AreaBounds => "luks2-area-bounds",
    /// Keyslot areas do not overlap.
    Luks2AreaOverlap => "luks2-area-overlap",
    /// The metadata fits the JSON area.
    Luks2JsonSize => "luks2-json-size",
    /// A `luks2` keyslot belongs to exactly one digest.
    Luks2KeyslotDigest => "luks2-keyslot-digest",
    /// Reencryption keyslots and requirements agree.
    Luks2Reencrypt => "luks2-reencrypt",
    /// The image holds the whole header and keyslot areas.
    DeviceTooSmall => "device-too-small",
    /// A LUKS1 keyslot is enabled or disabled, nothing else.
    Luks1SlotState => "luks1-slot-state",
    /// A LUKS1 keyslot (active or not) has 4000 stripes; an active one iterations.
    Luks1Slot => "luks1-slot",
    /// A LUKS1 keyslot's material starts after the header.
    Luks1SlotInHeader => "luks1-slot-in-header",
    /// A LUKS1 keyslot's material ends before the data.
    Luks1SlotInData => "luks1-slot-in-data",
    /// LUKS1 keyslot materials do not overlap.
    Luks1SlotOverlap => "luks1-slot-overlap",
    /// The LUKS1 volume key is 1 to 64 bytes, its digest has iterations.
    Luks1Key => "luks1-key",
}

impl Rule {
    /// The error for a header that breaks this rule: `detail` says where and how. A
    /// header too small for its image is truncated; anything else is corrupt.
    pub fn broken(self, detail: impl std::fmt::Display) -> Error {
        let msg = format!("{}: {detail}", self.name());
        match self {
            Rule::DeviceTooSmall => Error::truncated(msg),
            _ => Error::corrupt(msg),
        }
    }
}

/// The message of a header error without its category (`corrupt header: `), to be quoted
/// inside another message.
pub(crate) fn detail(e: &Error) -> String {
    match e {
        Error::Header(HeaderError::Corrupt(m) | HeaderError::Truncated(m)) => m.clone(),
        e => e.to_string(),
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_lead_the_message() {
        let mut names: Vec<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Rule::ALL.len());
        let e = Rule::Luks2AreaOverlap.broken("keyslot 7 and keyslot 6");
        assert_eq!(
            e.to_string(),
            "corrupt header: luks2-area-overlap: keyslot 7 and keyslot 6"
        );
        assert!(matches!(
            Rule::DeviceTooSmall.broken("x"),
            Error::Header(crate::HeaderError::Truncated(_))
        ));
    }
}
