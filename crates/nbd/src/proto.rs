//! The NBD wire format, from the NetworkBlockDevice project's `doc/proto.md` ("The NBD
//! protocol"): its constants, and the encoding and decoding of the messages this crate
//! exchanges. All integers on the wire are big-endian.
//!
//! Pure: nothing here touches a socket, an export or the heap on the transmission path
//! (headers are fixed-size arrays), so the codec is unit-tested on bytes and can serve a
//! client as well as the server. Callers do the I/O and decide the policy (which options
//! and commands are accepted). Only what this crate speaks is encoded: fixed newstyle
//! negotiation, simple replies, and (for the client, which reads them) structured reply
//! chunks; no extended headers.

use std::io;

/// "NBDMAGIC": the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": newstyle negotiation, and the magic opening every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic opening every option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic opening every transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic opening every simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic opening every structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server, 16 bits).
/// The server speaks the fixed newstyle protocol.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// The server can omit the 124 zero bytes after NBD_OPT_EXPORT_NAME.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;

// Client flags (32 bits).
/// The client speaks the fixed newstyle protocol.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// The client wants no 124 zero bytes after NBD_OPT_EXPORT_NAME.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags (16 bits), sent with the export's size.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_SEND_DF: u16 = 1 << 7;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
/// Error replies have bit 31 set.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

// Information types in NBD_REP_INFO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Structured reply chunks: the flag and the types.
/// The last chunk of a reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Error chunk types have bit 15 set.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// Error values in simple replies (the protocol's own numbering, equal to Linux errno
// values); [`error_code`] maps an I/O error to one of them.
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Bytes of a transmission request header.
pub const REQUEST_LEN: usize = 28;
/// Bytes of a simple reply header.
pub const SIMPLE_REPLY_LEN: usize = 16;
/// Bytes of a structured reply chunk header.
pub const STRUCTURED_REPLY_LEN: usize = 20;
/// Bytes of an option request header (IHAVEOPT, option, data length).
pub const OPTION_REQUEST_LEN: usize = 16;
/// Bytes of the server's greeting (NBDMAGIC, IHAVEOPT, handshake flags).
pub const GREETING_LEN: usize = 18;
/// Bytes of an option reply header.
pub const OPTION_REPLY_LEN: usize = 20;
/// Bytes of the export's size and transmission flags, as NBD_OPT_EXPORT_NAME's reply and
/// NBD_INFO_EXPORT carry them.
pub const SIZE_AND_FLAGS_LEN: usize = 10;

/// A fixed-size message of `N` bytes laid out field after field.
struct Out<const N: usize> {
    buf: [u8; N],
    at: usize,
}

impl<const N: usize> Out<N> {
    fn new() -> Self {
        Out { buf: [0; N], at: 0 }
    }

    /// Appends a field (an integer's `to_be_bytes()`).
    fn put(mut self, field: &[u8]) -> Self {
        self.buf[self.at..self.at + field.len()].copy_from_slice(field);
        self.at += field.len();
        self
    }

    /// The message; every byte must have been laid out.
    fn done(self) -> [u8; N] {
        debug_assert_eq!(self.at, N, "a message's fields fill it exactly");
        self.buf
    }
}

/// Big-endian integers read field after field from a fixed-size message (the caller's
/// array holds every field it reads).
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const K: usize>(&mut self) -> [u8; K] {
        let (field, rest) = self
            .0
            .split_first_chunk::<K>()
            .expect("the message holds the field");
        self.0 = rest;
        *field
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
}

/// The server's greeting: NBDMAGIC, IHAVEOPT (newstyle), then the handshake flags
/// (`FLAG_FIXED_NEWSTYLE`, `FLAG_NO_ZEROES`).
pub fn encode_greeting(handshake_flags: u16) -> [u8; GREETING_LEN] {
    Out::new()
        .put(&NBDMAGIC.to_be_bytes())
        .put(&IHAVEOPT.to_be_bytes())
        .put(&handshake_flags.to_be_bytes())
        .done()
}

/// Parses the server's greeting: the handshake flags, or `None` when it does not open
/// with NBDMAGIC and IHAVEOPT (an oldstyle server, or no NBD server at all).
pub fn decode_greeting(g: &[u8; GREETING_LEN]) -> Option<u16> {
    let mut f = Fields(g);
    (f.u64() == NBDMAGIC && f.u64() == IHAVEOPT).then(|| f.u16())
}

/// The header of an option request (the client's): `len` bytes of option data follow it.
pub fn encode_option_request(option: u32, len: u32) -> [u8; OPTION_REQUEST_LEN] {
    Out::new()
        .put(&IHAVEOPT.to_be_bytes())
        .put(&option.to_be_bytes())
        .put(&len.to_be_bytes())
        .done()
}

/// The data of NBD_OPT_INFO and NBD_OPT_GO (the client's): the export's name and the
/// information types asked for; the inverse of [`decode_info_request`].
pub fn encode_info_request(name: &[u8], infos: &[u16]) -> Vec<u8> {
    let mut d = Vec::with_capacity(6 + name.len() + 2 * infos.len());
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name);
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

/// Parses the export's size and transmission flags (the inverse of
/// [`encode_size_and_flags`]).
pub fn decode_size_and_flags(d: &[u8; SIZE_AND_FLAGS_LEN]) -> (u64, u16) {
    let mut f = Fields(d);
    (f.u64(), f.u16())
}

/// Parses NBD_INFO_BLOCK_SIZE's data after its type: minimum, preferred, maximum.
pub fn decode_block_sizes(d: &[u8; 12]) -> (u32, u32, u32) {
    let mut f = Fields(d);
    (f.u32(), f.u32(), f.u32())
}

/// The header of a structured reply chunk; `len` bytes of chunk data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// `REPLY_FLAG_DONE` on the last chunk of a reply.
    pub flags: u16,
    /// The chunk type (`REPLY_TYPE_*`).
    pub kind: u16,
    /// The cookie of the request replied to.
    pub cookie: u64,
    /// Bytes of chunk data that follow.
    pub len: u32,
}

impl ChunkHeader {
    /// The header on the wire.
    pub fn encode(&self) -> [u8; STRUCTURED_REPLY_LEN] {
        Out::new()
            .put(&STRUCTURED_REPLY_MAGIC.to_be_bytes())
            .put(&self.flags.to_be_bytes())
            .put(&self.kind.to_be_bytes())
            .put(&self.cookie.to_be_bytes())
            .put(&self.len.to_be_bytes())
            .done()
    }

    /// Parses a header; `Err` holds the magic found when it is not
    /// `STRUCTURED_REPLY_MAGIC`.
    pub fn decode(h: &[u8; STRUCTURED_REPLY_LEN]) -> Result<ChunkHeader, u32> {
        let mut f = Fields(h);
        match f.u32() {
            STRUCTURED_REPLY_MAGIC => Ok(ChunkHeader {
                flags: f.u16(),
                kind: f.u16(),
                cookie: f.u64(),
                len: f.u32(),
            }),
            magic => Err(magic),
        }
    }

    /// Whether this is the last chunk of its reply.
    pub fn done(&self) -> bool {
        self.flags & REPLY_FLAG_DONE != 0
    }
}

/// The header of an option reply; `len` bytes of reply data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionReply {
    /// The option replied to (`OPT_*`).
    pub option: u32,
    /// The reply type (`REP_*`; error types have `REP_FLAG_ERROR` set).
    pub kind: u32,
    /// Bytes of reply data that follow.
    pub len: u32,
}

impl OptionReply {
    /// The header on the wire.
    pub fn encode(&self) -> [u8; OPTION_REPLY_LEN] {
        Out::new()
            .put(&OPT_REPLY_MAGIC.to_be_bytes())
            .put(&self.option.to_be_bytes())
            .put(&self.kind.to_be_bytes())
            .put(&self.len.to_be_bytes())
            .done()
    }

    /// Parses a header; `Err` holds the magic found when it is not `OPT_REPLY_MAGIC`.
    pub fn decode(h: &[u8; OPTION_REPLY_LEN]) -> Result<OptionReply, u64> {
        let mut f = Fields(h);
        match f.u64() {
            OPT_REPLY_MAGIC => Ok(OptionReply {
                option: f.u32(),
                kind: f.u32(),
                len: f.u32(),
            }),
            magic => Err(magic),
        }
    }
}

/// The export's size and transmission flags (`FLAG_*` of 16 bits): the reply to
/// NBD_OPT_EXPORT_NAME (before its optional 124 zero bytes), and NBD_INFO_EXPORT after its
/// type.
pub fn encode_size_and_flags(size: u64, flags: u16) -> [u8; SIZE_AND_FLAGS_LEN] {
    Out::new()
        .put(&size.to_be_bytes())
        .put(&flags.to_be_bytes())
        .done()
}

/// NBD_INFO_BLOCK_SIZE's data after its type: minimum, preferred and maximum block size.
pub fn encode_block_sizes(minimum: u32, preferred: u32, maximum: u32) -> [u8; 12] {
    Out::new()
        .put(&minimum.to_be_bytes())
        .put(&preferred.to_be_bytes())
        .put(&maximum.to_be_bytes())
        .done()
}

/// Parses the data of NBD_OPT_INFO and NBD_OPT_GO: `u32 name length, name, u16 count,
/// count x u16 information type`. Returns the name and the types asked for; `None` when
/// the lengths do not add up exactly.
pub fn decode_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let (name_len, rest) = data.split_first_chunk::<4>()?;
    let (name, rest) = rest.split_at_checked(u32::from_be_bytes(*name_len) as usize)?;
    let (count, list) = rest.split_first_chunk::<2>()?;
    if list.len() != 2 * usize::from(u16::from_be_bytes(*count)) {
        return None;
    }
    let infos = list
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    Some((name, infos))
}

/// A transmission request header; for NBD_CMD_WRITE, `len` payload bytes follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`CMD_FLAG_*`).
    pub flags: u16,
    /// The command (`CMD_*`).
    pub kind: u16,
    /// Chosen by the client and sent back in the reply, which may come in any order.
    pub cookie: u64,
    /// Where the command acts, in bytes from the start of the export.
    pub offset: u64,
    /// Bytes the command acts on (and, for a write, bytes of payload that follow).
    pub len: u32,
}

impl Request {
    /// Parses a header; `Err` holds the magic found when it is not `REQUEST_MAGIC` (the
    /// stream cannot be parsed any further).
    pub fn decode(h: &[u8; REQUEST_LEN]) -> Result<Request, u32> {
        let mut f = Fields(h);
        match f.u32() {
            REQUEST_MAGIC => Ok(Request {
                flags: f.u16(),
                kind: f.u16(),
                cookie: f.u64(),
                offset: f.u64(),
                len: f.u32(),
            }),
            magic => Err(magic),
        }
    }

    /// The header on the wire.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        Out::new()
            .put(&REQUEST_MAGIC.to_be_bytes())
            .put(&self.flags.to_be_bytes())
            .put(&self.kind.to_be_bytes())
            .put(&self.cookie.to_be_bytes())
            .put(&self.offset.to_be_bytes())
            .put(&self.len.to_be_bytes())
            .done()
    }

    /// Whether the client asked for the data to be durable before the reply (FUA).
    pub fn fua(&self) -> bool {
        self.flags & CMD_FLAG_FUA != 0
    }
}

/// A simple reply header; a successful read's data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleReply {
    /// 0, or one of the error values (`EPERM`, `EIO`...).
    pub error: u32,
    /// The cookie of the request replied to.
    pub cookie: u64,
}

impl SimpleReply {
    /// The header on the wire.
    pub fn encode(&self) -> [u8; SIMPLE_REPLY_LEN] {
        Out::new()
            .put(&SIMPLE_REPLY_MAGIC.to_be_bytes())
            .put(&self.error.to_be_bytes())
            .put(&self.cookie.to_be_bytes())
            .done()
    }

    /// Parses a header; `Err` holds the magic found when it is not `SIMPLE_REPLY_MAGIC`.
    pub fn decode(h: &[u8; SIMPLE_REPLY_LEN]) -> Result<SimpleReply, u32> {
        let mut f = Fields(h);
        match f.u32() {
            SIMPLE_REPLY_MAGIC => Ok(SimpleReply {
                error: f.u32(),
                cookie: f.u64(),
            }),
            magic => Err(magic),
        }
    }
}

/// The protocol's error value for an I/O error: the OS error when the protocol has it
/// (EROFS as EPERM, EFBIG as ENOSPC), otherwise by kind, EIO when nothing fits.
pub fn error_code(e: &io::Error) -> u32 {
    const EROFS: u32 = 30;
    const EFBIG: u32 = 27;
    match e.raw_os_error().map(|n| n as u32) {
        Some(n @ (EPERM | EIO | ENOMEM | EINVAL | ENOSPC | EOVERFLOW | ENOTSUP | ESHUTDOWN)) => n,
        Some(EROFS) => EPERM,
        Some(EFBIG) => ENOSPC,
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => EPERM,
            io::ErrorKind::OutOfMemory => ENOMEM,
            io::ErrorKind::InvalidInput => EINVAL,
            io::ErrorKind::Unsupported => ENOTSUP,
            _ => EIO,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_magic_is_reported() {
        let r = Request {
            flags: CMD_FLAG_FUA,
            kind: CMD_WRITE,
            cookie: 0x0102_0304_0506_0708,
            offset: 0x1122_3344_5566_7788,
            len: 0x99aa_bbcc,
        };
        let h = r.encode();
        assert_eq!(&h[..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(&h[24..], &[0x99, 0xaa, 0xbb, 0xcc]);
        assert_eq!(Request::decode(&h), Ok(r));
        assert!(r.fua());
        let mut bad = h;
        bad[0] ^= 1;
        assert_eq!(Request::decode(&bad), Err(REQUEST_MAGIC ^ (1 << 24)));
    }

    #[test]
    fn replies_round_trip() {
        let r = SimpleReply {
            error: ENOSPC,
            cookie: 77,
        };
        let h = r.encode();
        assert_eq!(&h[..8], &[0x67, 0x44, 0x66, 0x98, 0, 0, 0, 28]);
        assert_eq!(SimpleReply::decode(&h), Ok(r));
        assert!(SimpleReply::decode(&[0; SIMPLE_REPLY_LEN]).is_err());

        let o = OptionReply {
            option: OPT_GO,
            kind: REP_ERR_UNKNOWN,
            len: 5,
        };
        assert_eq!(OptionReply::decode(&o.encode()), Ok(o));
        assert_eq!(OptionReply::decode(&[0; OPTION_REPLY_LEN]), Err(0));
    }

    #[test]
    fn greeting_and_export_data_layouts() {
        let g = encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(&g[16..], &[0, 3]);
        assert_eq!(
            encode_size_and_flags(0x0102, FLAG_HAS_FLAGS | FLAG_CAN_MULTI_CONN),
            [0, 0, 0, 0, 0, 0, 1, 2, 1, 1]
        );
        assert_eq!(
            encode_block_sizes(1, 4096, 32 << 20),
            [0, 0, 0, 1, 0, 0, 0x10, 0, 2, 0, 0, 0]
        );
    }

    #[test]
    fn client_messages_are_the_inverse_of_the_server_codec() {
        let g = encode_greeting(FLAG_FIXED_NEWSTYLE);
        assert_eq!(decode_greeting(&g), Some(FLAG_FIXED_NEWSTYLE));
        let mut old = g;
        old[8..16].copy_from_slice(&0x0000_4202_8186_1253u64.to_be_bytes());
        assert_eq!(decode_greeting(&old), None, "oldstyle is not spoken");
        let o = encode_option_request(OPT_GO, 7);
        assert_eq!(&o[..8], b"IHAVEOPT");
        assert_eq!(&o[8..], &[0, 0, 0, 7, 0, 0, 0, 7]);
        let d = encode_info_request(b"vol", &[INFO_BLOCK_SIZE]);
        assert_eq!(decode_info_request(&d), Some((&b"vol"[..], vec![3])));
        assert_eq!(
            decode_size_and_flags(&encode_size_and_flags(1 << 40, FLAG_READ_ONLY)),
            (1 << 40, FLAG_READ_ONLY)
        );
        assert_eq!(
            decode_block_sizes(&encode_block_sizes(512, 4096, 1 << 25)),
            (512, 4096, 1 << 25)
        );
        let c = ChunkHeader {
            flags: REPLY_FLAG_DONE,
            kind: REPLY_TYPE_ERROR_OFFSET,
            cookie: 9,
            len: 14,
        };
        let h = c.encode();
        assert_eq!(&h[..8], &[0x66, 0x8e, 0x33, 0xef, 0, 1, 0x80, 2]);
        assert_eq!(ChunkHeader::decode(&h), Ok(c));
        assert!(c.done());
        assert!(ChunkHeader::decode(&[0; STRUCTURED_REPLY_LEN]).is_err());
    }

    #[test]
    fn info_request_lengths_must_add_up() {
        let mut d = 3u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&2u16.to_be_bytes());
        d.extend_from_slice(&[0, 3, 0, 1]);
        let (name, infos) = decode_info_request(&d).unwrap();
        assert_eq!(name, b"abc");
        assert_eq!(infos, vec![3, 1]);
        assert!(decode_info_request(&d[..d.len() - 1]).is_none());
        let mut longer = d.clone();
        longer.push(0);
        assert!(decode_info_request(&longer).is_none());
        assert!(decode_info_request(&[0, 0, 0, 9, b'x']).is_none());
    }

    #[test]
    fn error_codes_map_os_errors_and_kinds() {
        assert_eq!(error_code(&io::Error::from_raw_os_error(28)), ENOSPC);
        assert_eq!(error_code(&io::Error::from_raw_os_error(30)), EPERM);
        assert_eq!(error_code(&io::Error::from_raw_os_error(27)), ENOSPC);
        assert_eq!(error_code(&io::Error::from_raw_os_error(108)), ESHUTDOWN);
        assert_eq!(error_code(&io::Error::from_raw_os_error(2)), EIO);
        assert_eq!(
            error_code(&io::Error::from(io::ErrorKind::InvalidInput)),
            EINVAL
        );
        assert_eq!(error_code(&io::Error::other("x")), EIO);
    }
}
