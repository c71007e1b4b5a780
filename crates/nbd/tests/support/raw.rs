//! A client that speaks the protocol by hand, for what no real client does: malformed
//! requests, pipelining without reading replies, idling or trickling in the handshake.
//!
//! Messages are laid out byte by byte as proto.md describes them, not with the crate's
//! codec, so the server is checked against an independent encoding; only the constants
//! come from `sectorcrypt_nbd::proto`. Every read waits at most a bounded time, so a
//! server that stops answering fails the test instead of hanging it.

use sectorcrypt_nbd::proto;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long a read waits for the server, unless a test says otherwise.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// One connection.
pub struct Raw {
    pub s: UnixStream,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// An option request: IHAVEOPT, the option, the data's length, the data.
pub fn option_bytes(opt: u32, data: &[u8]) -> Vec<u8> {
    let mut m = proto::IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&opt.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    m
}

/// The data of NBD_OPT_INFO or NBD_OPT_GO for export `name`, asking for no information.
pub fn info_request(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

/// A transmission request header: magic, flags, command, cookie, offset, length.
pub fn request_bytes(kind: u16, flags: u16, cookie: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut m = proto::REQUEST_MAGIC.to_be_bytes().to_vec();
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&cookie.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&len.to_be_bytes());
    m
}

impl Raw {
    /// Connects, reads the greeting (checking it) and sends the client flags (fixed
    /// newstyle, no zeroes); `None` when the server closes the connection instead of
    /// greeting (no slot free) or the greeting does not come within `wait`.
    pub fn try_handshake(path: &Path, wait: Duration) -> Option<Raw> {
        Raw::greeted(UnixStream::connect(path).unwrap(), wait)
    }

    /// [`Raw::try_handshake`] on a socket already connected to a server.
    pub fn greeted(mut s: UnixStream, wait: Duration) -> Option<Raw> {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).ok()?;
        assert_eq!(u64_at(&hello, 0), proto::NBDMAGIC);
        assert_eq!(u64_at(&hello, 8), proto::IHAVEOPT);
        let flags = u16::from_be_bytes([hello[16], hello[17]]);
        assert_eq!(flags, proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
        s.write_all(&3u32.to_be_bytes()).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        Some(Raw { s })
    }

    /// [`Raw::try_handshake`] that must succeed.
    pub fn handshake(path: &Path) -> Raw {
        Raw::try_handshake(path, PATIENCE).expect("the server greets")
    }

    /// Connects and enters the transmission phase on export "vol".
    pub fn go(path: &Path) -> Raw {
        let mut r = Raw::handshake(path);
        r.send_go();
        r
    }

    /// [`Raw::go`], or `None` when the server closes the connection instead of greeting
    /// (no slot free) or the greeting does not come within `wait`.
    pub fn try_go(path: &Path, wait: Duration) -> Option<Raw> {
        let mut r = Raw::try_handshake(path, wait)?;
        r.send_go();
        Some(r)
    }

    /// NBD_OPT_GO for export "vol", asking for no information; panics unless acknowledged.
    pub fn send_go(&mut self) {
        let replies = self.option(proto::OPT_GO, &info_request("vol"));
        assert_eq!(replies.last().unwrap().0, proto::REP_ACK);
    }

    /// Connects and enters the transmission phase on export `name`.
    pub fn go_to(path: &Path, name: &str) -> Raw {
        let mut r = Raw::handshake(path);
        let replies = r.option(proto::OPT_GO, &info_request(name));
        assert_eq!(replies.last().unwrap().0, proto::REP_ACK, "GO {name:?}");
        r
    }

    /// Connects, negotiates and sends `n` READs of 1 MiB without ever reading a reply: the
    /// socket buffers fill and the server's sends block.
    pub fn stuck(path: &Path, n: u64) -> Raw {
        let mut c = Raw::go(path);
        for i in 0..n {
            c.request(proto::CMD_READ, 0, i, (i % 8) << 20, 1 << 20, &[]);
        }
        c
    }

    /// A second handle on the same connection (to send from one thread and read replies
    /// on another).
    pub fn try_clone(&self) -> Raw {
        Raw {
            s: self.s.try_clone().unwrap(),
        }
    }

    /// Sends an option; returns the replies (type, data) up to and including the final
    /// one (an ACK or an error), or the error that ended the connection.
    pub fn try_option(&mut self, opt: u32, data: &[u8]) -> io::Result<Vec<(u32, Vec<u8>)>> {
        self.s.write_all(&option_bytes(opt, data))?;
        let mut out = Vec::new();
        loop {
            let mut h = [0u8; 20];
            self.s.read_exact(&mut h)?;
            assert_eq!(u64_at(&h, 0), proto::OPT_REPLY_MAGIC);
            assert_eq!(u32_at(&h, 8), opt);
            let kind = u32_at(&h, 12);
            let mut d = vec![0u8; u32_at(&h, 16) as usize];
            self.s.read_exact(&mut d)?;
            let last = kind == proto::REP_ACK || kind & proto::REP_FLAG_ERROR != 0;
            out.push((kind, d));
            if last {
                return Ok(out);
            }
        }
    }

    /// [`Raw::try_option`] that must succeed.
    pub fn option(&mut self, opt: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
        self.try_option(opt, data).unwrap()
    }

    /// Sends a request header and `data` after it.
    pub fn request(
        &mut self,
        kind: u16,
        flags: u16,
        cookie: u64,
        offset: u64,
        len: u32,
        data: &[u8],
    ) {
        let mut m = request_bytes(kind, flags, cookie, offset, len);
        m.extend_from_slice(data);
        self.s.write_all(&m).unwrap();
    }

    /// (error, cookie) of the next simple reply, or None at end of stream.
    pub fn reply(&mut self) -> Option<(u32, u64)> {
        let mut h = [0u8; 16];
        match self.s.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("reading a reply: {e}"),
        }
        assert_eq!(u32_at(&h, 0), proto::SIMPLE_REPLY_MAGIC);
        Some((u32_at(&h, 4), u64_at(&h, 8)))
    }

    /// `len` bytes of data after a reply.
    pub fn data(&mut self, len: u32) -> Vec<u8> {
        let mut d = vec![0u8; len as usize];
        self.s.read_exact(&mut d).unwrap();
        d
    }

    /// Reads `len` bytes at `offset`; panics unless the read succeeds.
    pub fn read(&mut self, cookie: u64, offset: u64, len: u32) -> Vec<u8> {
        self.request(proto::CMD_READ, 0, cookie, offset, len, &[]);
        assert_eq!(self.reply(), Some((0, cookie)));
        self.data(len)
    }
}
