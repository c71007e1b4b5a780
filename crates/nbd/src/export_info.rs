//! What a client is told about the export it chose: the negotiated state of one
//! connection, apart from the socket code.
//!
//! [`ExportInfo`] is taken once per choice (NBD_OPT_INFO, NBD_OPT_GO, NBD_OPT_EXPORT_NAME)
//! from the [`Export`]'s answers, its name and description in the server's table, and the
//! [`ServerConfig`]'s maximum payload; the handshake encodes it (size, transmission flags,
//! block sizes, name, description) and the transmission phase holds requests to it (size,
//! read-only, trim, maximum payload). Pure: no socket, no data operation on the export.

use crate::export::Export;
use crate::proto::*;

/// The block sizes advertised in NBD_INFO_BLOCK_SIZE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockSizes {
    /// The smallest request the export handles without read-modify-write by the client.
    pub(crate) minimum: u32,
    /// The size requests should be multiples of (the volume's sector size).
    pub(crate) preferred: u32,
    /// The largest READ or WRITE payload accepted.
    pub(crate) maximum: u32,
}

/// The export as one connection sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExportInfo {
    /// The export's name (its own, also when the client asked for the default, "").
    pub(crate) name: String,
    /// Shown by NBD_OPT_LIST and NBD_INFO_DESCRIPTION.
    pub(crate) description: Option<String>,
    /// Size in bytes.
    pub(crate) size: u64,
    /// Writes, trims and write-zeroes are refused.
    pub(crate) read_only: bool,
    /// NBD_CMD_TRIM reaches the export.
    pub(crate) can_trim: bool,
    /// Clients may open several connections (a flush on one covers all).
    pub(crate) can_multi_conn: bool,
    /// Minimum, preferred and maximum block size.
    pub(crate) block_sizes: BlockSizes,
}

impl ExportInfo {
    /// Asks `export` (named `name`, described by `description`) for its size and
    /// capabilities; `max_payload` is the server's. The preferred block size is the
    /// export's, kept between the minimum (at least 1) and the maximum payload.
    pub(crate) fn new(
        name: &str,
        description: Option<&str>,
        export: &dyn Export,
        max_payload: u32,
    ) -> ExportInfo {
        let minimum = export.min_block_size();
        ExportInfo {
            name: name.to_string(),
            description: description.map(str::to_string),
            size: export.size(),
            read_only: export.read_only(),
            can_trim: export.can_trim(),
            can_multi_conn: export.can_multi_conn(),
            block_sizes: BlockSizes {
                minimum,
                preferred: export
                    .preferred_block_size()
                    .clamp(minimum.max(1), max_payload),
                maximum: max_payload,
            },
        }
    }

    /// The transmission flags: FLUSH always; FUA, WRITE_ZEROES and (when the export can)
    /// TRIM only on a writable export; MULTI_CONN when the export says so.
    pub(crate) fn transmission_flags(&self) -> u16 {
        let mut f = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH;
        if self.read_only {
            f |= FLAG_READ_ONLY;
        } else {
            f |= FLAG_SEND_FUA | FLAG_SEND_WRITE_ZEROES;
            if self.can_trim {
                f |= FLAG_SEND_TRIM;
            }
        }
        if self.can_multi_conn {
            f |= FLAG_CAN_MULTI_CONN;
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// An export of answers only.
    struct Answers {
        read_only: bool,
        trim: bool,
        multi_conn: bool,
        min: u32,
        preferred: u32,
    }

    impl Export for Answers {
        fn size(&self) -> u64 {
            1 << 20
        }
        fn preferred_block_size(&self) -> u32 {
            self.preferred
        }
        fn read_only(&self) -> bool {
            self.read_only
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            unreachable!("no data operation while negotiating")
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            unreachable!("no data operation while negotiating")
        }
        fn flush(&self) -> io::Result<()> {
            unreachable!("no data operation while negotiating")
        }
        fn min_block_size(&self) -> u32 {
            self.min
        }
        fn can_multi_conn(&self) -> bool {
            self.multi_conn
        }
        fn can_trim(&self) -> bool {
            self.trim
        }
    }

    fn writable() -> Answers {
        Answers {
            read_only: false,
            trim: false,
            multi_conn: true,
            min: 1,
            preferred: 4096,
        }
    }

    /// The export "vol", described as "a volume", with a maximum payload of 64 KiB.
    fn described(export: &Answers) -> ExportInfo {
        ExportInfo::new("vol", Some("a volume"), export, 1 << 16)
    }

    #[test]
    fn flags_follow_the_export_capabilities() {
        let info = described(&writable());
        assert_eq!(info.size, 1 << 20);
        assert_eq!(
            info.transmission_flags(),
            FLAG_HAS_FLAGS
                | FLAG_SEND_FLUSH
                | FLAG_SEND_FUA
                | FLAG_SEND_WRITE_ZEROES
                | FLAG_CAN_MULTI_CONN
        );
        let trim = described(&Answers {
            trim: true,
            multi_conn: false,
            ..writable()
        });
        assert_eq!(
            trim.transmission_flags(),
            FLAG_HAS_FLAGS
                | FLAG_SEND_FLUSH
                | FLAG_SEND_FUA
                | FLAG_SEND_WRITE_ZEROES
                | FLAG_SEND_TRIM
        );
        // Read-only: no write-side flags, trim or not.
        let ro = described(&Answers {
            read_only: true,
            trim: true,
            ..writable()
        });
        assert_eq!(
            ro.transmission_flags(),
            FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_READ_ONLY | FLAG_CAN_MULTI_CONN
        );
        assert!(ro.can_trim, "the capability is kept for the request checks");
    }

    #[test]
    fn the_preferred_block_size_stays_between_minimum_and_maximum() {
        let sizes = |min, preferred| {
            described(&Answers {
                min,
                preferred,
                ..writable()
            })
            .block_sizes
        };
        assert_eq!(
            sizes(1, 4096),
            BlockSizes {
                minimum: 1,
                preferred: 4096,
                maximum: 1 << 16
            }
        );
        assert_eq!(sizes(512, 1 << 20).preferred, 1 << 16);
        assert_eq!(sizes(4096, 512).preferred, 4096);
        // A minimum of 0 is sent as is; the preferred size is at least 1.
        assert_eq!(
            sizes(0, 0),
            BlockSizes {
                minimum: 0,
                preferred: 1,
                maximum: 1 << 16
            }
        );
    }

    #[test]
    fn name_and_description_are_the_tables() {
        let info = described(&writable());
        assert_eq!(info.name, "vol");
        assert_eq!(info.description.as_deref(), Some("a volume"));
    }
}
