//! What the transmission phase does with one request, decided from its header and the
//! connection's [`ExportInfo`] alone.
//!
//! Every check a request passes before it reaches the export is here, in one pure function
//! ([`decide`]): no socket, no export call, so each refusal is unit-tested. The protocol
//! leaves the connection usable after a refused request only if its payload is consumed,
//! so the action says whether a payload is still to be read; a bad magic is not decided
//! here (the header does not even parse, see [`Request::decode`]).

use crate::export_info::ExportInfo;
use crate::proto::*;

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Read `len` bytes at `offset` and send them after the reply header.
    Read,
    /// Receive the `len` payload bytes, then write them at `offset`.
    Write,
    /// Make the completed writes durable.
    Flush,
    /// Discard the range.
    Trim,
    /// Make the range read as zeros.
    WriteZeroes,
    /// The client is done: finish the requests in flight, then close.
    Disconnect,
    /// Reply with this error at once (no payload follows the header).
    Refuse(u32),
    /// Read and drop the `len` payload bytes, then reply with this error (a write that is
    /// refused: its payload is never buffered, and nothing is reserved for it).
    DiscardAndRefuse(u32),
}

/// Whether `offset + len` lies within `size` (no overflow).
fn in_range(offset: u64, len: u64, size: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= size)
}

/// Why a request that changes `len` bytes at `offset` is refused, if it is: EPERM on a
/// read-only export, ENOSPC past the end.
fn refuse_change(info: &ExportInfo, offset: u64, len: u64) -> Option<u32> {
    if info.read_only {
        Some(EPERM)
    } else if !in_range(offset, len, info.size) {
        Some(ENOSPC)
    } else {
        None
    }
}

/// The action for `req` on the export `info` describes.
pub(crate) fn decide(req: &Request, info: &ExportInfo) -> Action {
    let len = u64::from(req.len);
    let max = u64::from(info.block_sizes.maximum);
    let refused = |error: Option<u32>, action| error.map_or(action, Action::Refuse);
    match req.kind {
        CMD_READ if len == 0 || len > max || !in_range(req.offset, len, info.size) => {
            Action::Refuse(EINVAL)
        }
        CMD_READ => Action::Read,
        CMD_WRITE if len > max => Action::DiscardAndRefuse(EINVAL),
        CMD_WRITE => {
            refuse_change(info, req.offset, len).map_or(Action::Write, Action::DiscardAndRefuse)
        }
        CMD_DISC => Action::Disconnect,
        CMD_FLUSH => Action::Flush,
        CMD_TRIM if info.can_trim => refused(refuse_change(info, req.offset, len), Action::Trim),
        // FAST_ZERO is not advertised (writing zeros is never faster than a write here); a
        // read-only export refuses with EPERM first.
        CMD_WRITE_ZEROES if !info.read_only && req.flags & CMD_FLAG_FAST_ZERO != 0 => {
            Action::Refuse(ENOTSUP)
        }
        CMD_WRITE_ZEROES => refused(refuse_change(info, req.offset, len), Action::WriteZeroes),
        // TRIM when not offered, CACHE, BLOCK_STATUS, unknown commands: none of them
        // carries a payload in this (non-extended) protocol.
        _ => Action::Refuse(EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export_info::BlockSizes;

    fn info(read_only: bool, can_trim: bool) -> ExportInfo {
        ExportInfo {
            name: "vol".into(),
            description: None,
            size: 1 << 20,
            read_only,
            can_trim,
            can_multi_conn: true,
            block_sizes: BlockSizes {
                minimum: 1,
                preferred: 512,
                maximum: 1 << 16,
            },
        }
    }

    fn req(kind: u16, flags: u16, offset: u64, len: u32) -> Request {
        Request {
            flags,
            kind,
            cookie: 1,
            offset,
            len,
        }
    }

    #[test]
    fn ranges_refuse_overflow_and_the_end() {
        assert!(in_range(0, 10, 10));
        assert!(!in_range(1, 10, 10));
        assert!(!in_range(u64::MAX, 2, u64::MAX));
        assert!(in_range(10, 0, 10));
    }

    #[test]
    fn reads_must_be_non_empty_bounded_and_in_range() {
        let rw = info(false, false);
        let end = rw.size;
        assert_eq!(decide(&req(CMD_READ, 0, 0, 512), &rw), Action::Read);
        assert_eq!(decide(&req(CMD_READ, 0, end - 1, 1), &rw), Action::Read);
        assert_eq!(decide(&req(CMD_READ, 0, 0, 1 << 16), &rw), Action::Read);
        for bad in [
            req(CMD_READ, 0, 0, 0),
            req(CMD_READ, 0, 0, (1 << 16) + 1),
            req(CMD_READ, 0, end - 10, 11),
            req(CMD_READ, 0, u64::MAX - 1, 4),
        ] {
            assert_eq!(decide(&bad, &rw), Action::Refuse(EINVAL), "{bad:?}");
        }
        // Reads are served on a read-only export.
        assert_eq!(
            decide(&req(CMD_READ, 0, 0, 512), &info(true, false)),
            Action::Read
        );
    }

    #[test]
    fn writes_consume_their_payload_before_a_refusal() {
        let rw = info(false, false);
        let end = rw.size;
        assert_eq!(
            decide(&req(CMD_WRITE, CMD_FLAG_FUA, 0, 512), &rw),
            Action::Write
        );
        // An empty write is accepted.
        assert_eq!(decide(&req(CMD_WRITE, 0, end, 0), &rw), Action::Write);
        assert_eq!(
            decide(&req(CMD_WRITE, 0, end, 100), &rw),
            Action::DiscardAndRefuse(ENOSPC)
        );
        assert_eq!(
            decide(&req(CMD_WRITE, 0, 0, 4), &info(true, false)),
            Action::DiscardAndRefuse(EPERM)
        );
        // Too large to buffer: dropped as it arrives, on a read-only export too.
        for ro in [false, true] {
            assert_eq!(
                decide(&req(CMD_WRITE, 0, 0, (1 << 16) + 512), &info(ro, false)),
                Action::DiscardAndRefuse(EINVAL)
            );
        }
    }

    #[test]
    fn trim_only_when_offered_and_writable() {
        let t =
            |ro, can_trim, offset, len| decide(&req(CMD_TRIM, 0, offset, len), &info(ro, can_trim));
        assert_eq!(t(false, false, 0, 512), Action::Refuse(EINVAL));
        assert_eq!(t(false, true, 0, 512), Action::Trim);
        assert_eq!(t(false, true, (1 << 20) - 512, 513), Action::Refuse(ENOSPC));
        assert_eq!(t(true, true, 0, 512), Action::Refuse(EPERM));
        assert_eq!(t(true, false, 0, 512), Action::Refuse(EINVAL));
    }

    #[test]
    fn write_zeroes_refuses_read_only_then_fast_zero_then_the_end() {
        let z = |ro, flags, offset, len| {
            decide(&req(CMD_WRITE_ZEROES, flags, offset, len), &info(ro, false))
        };
        assert_eq!(z(false, CMD_FLAG_NO_HOLE, 5, 70000), Action::WriteZeroes);
        assert_eq!(z(true, 0, 0, 4), Action::Refuse(EPERM));
        assert_eq!(z(true, CMD_FLAG_FAST_ZERO, 0, 4), Action::Refuse(EPERM));
        assert_eq!(z(false, CMD_FLAG_FAST_ZERO, 0, 4), Action::Refuse(ENOTSUP));
        assert_eq!(
            z(false, CMD_FLAG_FAST_ZERO, 1 << 20, 4),
            Action::Refuse(ENOTSUP)
        );
        assert_eq!(z(false, 0, 1 << 20, 4), Action::Refuse(ENOSPC));
        // Larger than the maximum payload is fine: no payload travels.
        assert_eq!(z(false, 0, 0, 1 << 20), Action::WriteZeroes);
    }

    #[test]
    fn other_commands() {
        let rw = info(false, false);
        assert_eq!(decide(&req(CMD_FLUSH, 0, 0, 0), &rw), Action::Flush);
        assert_eq!(decide(&req(CMD_DISC, 0, 0, 0), &rw), Action::Disconnect);
        for kind in [CMD_CACHE, CMD_BLOCK_STATUS, 0x7777] {
            assert_eq!(decide(&req(kind, 0, 0, 512), &rw), Action::Refuse(EINVAL));
        }
    }
}
