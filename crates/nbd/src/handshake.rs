//! The fixed newstyle handshake and option haggling (proto.md, "Handshake" and "Option
//! types"). Supported: NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_EXPORT_NAME, NBD_OPT_LIST,
//! NBD_OPT_ABORT. Every other option gets NBD_REP_ERR_UNSUP, which fixed newstyle clients
//! handle (structured replies, meta contexts, TLS and extended headers are thereby off).

use crate::proto::*;
use crate::server::Shared;
use crate::stream::Stream;
use std::io::{self, Read, Write};
use std::time::Instant;

/// Longest option payload accepted (NBD strings are at most 4096 bytes; an INFO/GO request
/// is a name plus a list of 16-bit info types).
const MAX_OPTION_LEN: u32 = 64 * 1024;

/// Most options one handshake may send (a client haggles over a few; more is a client
/// that keeps a connection slot busy).
const MAX_OPTIONS: usize = 64;

/// A stream whose reads must all finish before a deadline: each read waits at most the
/// time left, so a client that trickles bytes cannot stretch the handshake either.
pub(crate) struct Deadline<'a> {
    s: &'a mut Stream,
    deadline: Instant,
}

impl<'a> Deadline<'a> {
    pub(crate) fn new(s: &'a mut Stream, deadline: Instant) -> Deadline<'a> {
        Deadline { s, deadline }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake not finished in time",
            ));
        }
        self.s.set_read_timeout(Some(left))?;
        self.s.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.s.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

/// How the handshake ended.
pub(crate) enum Outcome {
    /// Enter the transmission phase.
    Transmit,
    /// The client aborted or misbehaved; close the connection.
    Close(&'static str),
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn reply(w: &mut impl Write, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let mut msg = Vec::with_capacity(20 + data.len());
    msg.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    msg.extend_from_slice(&option.to_be_bytes());
    msg.extend_from_slice(&kind.to_be_bytes());
    msg.extend_from_slice(&(data.len() as u32).to_be_bytes());
    msg.extend_from_slice(data);
    w.write_all(&msg)
}

/// An error reply with a human-readable message (proto.md: error replies may carry a
/// string for the user).
fn reply_err(w: &mut impl Write, option: u32, kind: u32, msg: &str) -> io::Result<()> {
    reply(w, option, kind, msg.as_bytes())
}

/// Runs the handshake on `s` up to the transmission phase.
pub(crate) fn negotiate<S: Read + Write>(s: &mut S, shared: &Shared) -> io::Result<Outcome> {
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    s.write_all(&hello)?;

    let client_flags = read_u32(s)?;
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Ok(Outcome::Close("client sent unknown handshake flags"));
    }
    let fixed = client_flags & FLAG_C_FIXED_NEWSTYLE != 0;
    let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;

    for _ in 0..MAX_OPTIONS {
        if read_u64(s)? != IHAVEOPT {
            return Ok(Outcome::Close("bad option magic"));
        }
        let option = read_u32(s)?;
        let len = read_u32(s)?;
        if len > MAX_OPTION_LEN {
            return Ok(Outcome::Close("option payload too long"));
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;

        match option {
            OPT_EXPORT_NAME => {
                // No error reply exists for this option: an unknown name closes.
                if !shared.name_matches(&data) {
                    return Ok(Outcome::Close("NBD_OPT_EXPORT_NAME: unknown export"));
                }
                let mut msg = Vec::with_capacity(10 + 124);
                msg.extend_from_slice(&shared.export.size().to_be_bytes());
                msg.extend_from_slice(&shared.transmission_flags().to_be_bytes());
                if !no_zeroes {
                    msg.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&msg)?;
                return Ok(Outcome::Transmit);
            }
            _ if !fixed => {
                // Plain newstyle: no option replies at all for anything else.
                return Ok(Outcome::Close("unsupported option from a non-fixed client"));
            }
            OPT_ABORT => {
                // proto.md: the server SHOULD reply with an ACK, then close; the client may
                // already be gone.
                let _ = reply(s, option, REP_ACK, &[]);
                return Ok(Outcome::Close("client aborted the handshake"));
            }
            OPT_LIST => {
                if len != 0 {
                    reply_err(s, option, REP_ERR_INVALID, "NBD_OPT_LIST takes no data")?;
                    continue;
                }
                let name = shared.config.export_name.as_bytes();
                let mut d = Vec::with_capacity(4 + name.len());
                d.extend_from_slice(&(name.len() as u32).to_be_bytes());
                d.extend_from_slice(name);
                if let Some(desc) = &shared.config.description {
                    d.extend_from_slice(desc.as_bytes());
                }
                reply(s, option, REP_SERVER, &d)?;
                reply(s, option, REP_ACK, &[])?;
            }
            OPT_INFO | OPT_GO => {
                let Some((name, infos)) = parse_info_request(&data) else {
                    reply_err(s, option, REP_ERR_INVALID, "malformed NBD_OPT_INFO/GO data")?;
                    continue;
                };
                if !shared.name_matches(name) {
                    reply_err(s, option, REP_ERR_UNKNOWN, "no such export")?;
                    continue;
                }
                send_infos(s, option, shared, &infos)?;
                reply(s, option, REP_ACK, &[])?;
                if option == OPT_GO {
                    return Ok(Outcome::Transmit);
                }
            }
            _ => {
                reply_err(
                    s,
                    option,
                    REP_ERR_UNSUP,
                    "option not supported by this server",
                )?;
            }
        }
    }
    Ok(Outcome::Close("too many options"))
}

/// Parses `u32 name length, name, u16 count, count x u16 info type`; `None` when the
/// lengths do not add up exactly.
fn parse_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let name_len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let rest = data.get(4..)?;
    let name = rest.get(..name_len)?;
    let rest = &rest[name_len..];
    let count = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let list = &rest[2..];
    if list.len() != 2 * count {
        return None;
    }
    let infos = list
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    Some((name, infos))
}

fn send_infos<W: Write>(s: &mut W, option: u32, shared: &Shared, asked: &[u16]) -> io::Result<()> {
    // Block sizes are always sent: the protocol allows it unasked, and clients then know
    // the preferred size even when they did not ask.
    let mut bs = Vec::with_capacity(14);
    bs.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    bs.extend_from_slice(&shared.export.min_block_size().to_be_bytes());
    bs.extend_from_slice(&shared.preferred_block_size().to_be_bytes());
    bs.extend_from_slice(&shared.config.max_payload.to_be_bytes());
    reply(s, option, REP_INFO, &bs)?;

    if asked.contains(&INFO_NAME) {
        let mut d = INFO_NAME.to_be_bytes().to_vec();
        d.extend_from_slice(shared.config.export_name.as_bytes());
        reply(s, option, REP_INFO, &d)?;
    }
    if asked.contains(&INFO_DESCRIPTION) {
        if let Some(desc) = &shared.config.description {
            let mut d = INFO_DESCRIPTION.to_be_bytes().to_vec();
            d.extend_from_slice(desc.as_bytes());
            reply(s, option, REP_INFO, &d)?;
        }
    }
    // NBD_INFO_EXPORT is mandatory.
    let mut d = Vec::with_capacity(12);
    d.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    d.extend_from_slice(&shared.export.size().to_be_bytes());
    d.extend_from_slice(&shared.transmission_flags().to_be_bytes());
    reply(s, option, REP_INFO, &d)
}

#[cfg(test)]
mod tests {
    use super::parse_info_request;

    #[test]
    fn info_request_lengths_must_add_up() {
        let mut d = 3u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&2u16.to_be_bytes());
        d.extend_from_slice(&[0, 3, 0, 1]);
        let (name, infos) = parse_info_request(&d).unwrap();
        assert_eq!(name, b"abc");
        assert_eq!(infos, vec![3, 1]);
        assert!(parse_info_request(&d[..d.len() - 1]).is_none());
        let mut longer = d.clone();
        longer.push(0);
        assert!(parse_info_request(&longer).is_none());
        assert!(parse_info_request(&[0, 0, 0, 9, b'x']).is_none());
    }
}
