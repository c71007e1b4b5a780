//! The fixed newstyle handshake and option haggling (proto.md, "Handshake" and "Option
//! types"). Supported: NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_EXPORT_NAME, NBD_OPT_LIST,
//! NBD_OPT_ABORT, and NBD_OPT_STARTTLS when the server has TLS. Every other option gets
//! NBD_REP_ERR_UNSUP, which fixed newstyle clients handle (structured replies, meta
//! contexts and extended headers are thereby off).
//!
//! TLS (proto.md, "TLS support") comes in the three modes of [`TlsMode`]. When it is
//! required (FORCEDTLS), every option before STARTTLS but ABORT gets NBD_REP_ERR_TLS_REQD,
//! and NBD_OPT_EXPORT_NAME, which has no error reply, closes the connection. On
//! STARTTLS the handshake stops ([`Outcome::StartTls`]) after its acknowledgement; the
//! caller runs the TLS handshake and calls [`negotiate`] again over the TLS session with
//! the same [`Haggle`], which goes on where it stopped (no second greeting; the option
//! count goes on too).
//!
//! The exports come from the server's table ([`Exports`]), asked with what the server
//! knows of the client ([`Peer`]; its certificate's subject is added after TLS): LIST
//! gives the names the table lists for the client, INFO, GO and EXPORT_NAME the export
//! the table finds for it. An unknown name and a name the client may not use get the same
//! answer (NBD_REP_ERR_UNKNOWN with the same message; EXPORT_NAME, which has no error
//! reply, closes either way), so a refused client learns nothing about other exports.
//! The export chosen, with what the client was told of it ([`Chosen`]), is the
//! handshake's result for the transmission phase.
//!
//! Runs over any `Read + Write` and asks nothing but the table, so it is unit-tested on
//! a scripted byte stream. The caller bounds the time (the server
//! reads through `stream::Deadline`); what a client may send is bounded here (option
//! length, number of options), so a client cannot hold a connection slot or memory by
//! haggling.

use crate::export::Export;
use crate::export_info::ExportInfo;
use crate::exports::{Exports, Peer};
use crate::proto::*;
use std::fmt;
use std::io::{self, Read, Write};
use std::sync::Arc;

/// Longest option payload accepted (NBD strings are at most 4096 bytes; an INFO/GO request
/// is a name plus a list of 16-bit info types).
const MAX_OPTION_LEN: u32 = 64 * 1024;

/// Most options one handshake may send (a client haggles over a few; more is a client
/// that keeps a connection slot busy).
const MAX_OPTIONS: usize = 64;

/// What INFO and GO answer for an export the client may not use, and for one that does
/// not exist: the same, so that the answer tells nothing.
const UNKNOWN: &str = "no such export";

/// Why a client that chose an export gets no connection slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Busy {
    /// Every slot of the server is taken by a client with a request in flight, or the
    /// server is shutting down.
    Server,
    /// The export has as many connections as one export may have.
    Export,
}

impl Busy {
    /// What the client is told (NBD_REP_ERR_POLICY's message).
    fn message(self) -> &'static str {
        match self {
            Busy::Server => {
                "server busy: every connection slot is taken by a client with a request in \
                 flight; try again later"
            }
            Busy::Export => {
                "export busy: it has as many connections as one export may have; try again \
                 later"
            }
        }
    }

    /// Why the connection is closed (for the log).
    fn reason(self) -> &'static str {
        match self {
            Busy::Server => "no connection slot free (every one busy), or shutting down",
            Busy::Export => "the export has every connection one export may have",
        }
    }
}

/// How the handshake ended, or paused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Enter the transmission phase.
    Transmit,
    /// NBD_OPT_STARTTLS was acknowledged: the TLS handshake comes next, then the option
    /// haggling goes on over TLS.
    StartTls,
    /// The client aborted or misbehaved; close the connection.
    Close(&'static str),
}

/// The server's TLS mode (proto.md's names in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsMode {
    /// No TLS (NOTLS): STARTTLS is unsupported.
    Off,
    /// TLS at the client's choice (SELECTIVETLS, the export not TLS-only).
    Allowed,
    /// TLS before anything else (FORCEDTLS).
    Required,
}

/// The export a client chose, and what it was told of it.
pub(crate) struct Chosen {
    pub(crate) export: Arc<dyn Export>,
    pub(crate) info: ExportInfo,
}

impl fmt::Debug for Chosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chosen")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// One connection's option haggling, across the switch to TLS.
pub(crate) struct Haggle<'a> {
    exports: &'a dyn Exports,
    peer: Peer,
    /// The server's largest payload, told to clients as the maximum block size.
    max_payload: u32,
    tls: TlsMode,
    /// The greeting was sent and the client's flags read.
    greeted: bool,
    fixed: bool,
    no_zeroes: bool,
    /// TLS was initiated on this connection.
    secure: bool,
    /// Options received so far.
    options: usize,
    /// The export chosen by GO or EXPORT_NAME.
    chosen: Option<Chosen>,
}

impl fmt::Debug for Haggle<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Haggle")
            .field("peer", &self.peer)
            .field("tls", &self.tls)
            .field("secure", &self.secure)
            .field("options", &self.options)
            .field("chosen", &self.chosen)
            .finish_non_exhaustive()
    }
}

impl<'a> Haggle<'a> {
    /// The haggling of client `peer` over the exports of `exports`.
    pub(crate) fn new(
        exports: &'a dyn Exports,
        peer: Peer,
        max_payload: u32,
        tls: TlsMode,
    ) -> Haggle<'a> {
        Haggle {
            exports,
            peer,
            max_payload,
            tls,
            greeted: false,
            fixed: false,
            no_zeroes: false,
            secure: false,
            options: 0,
            chosen: None,
        }
    }

    /// The client as the server knows it.
    pub(crate) fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Adds what TLS told of the client (its certificate's subject), before the haggling
    /// goes on over TLS.
    pub(crate) fn set_tls_subject(&mut self, subject: Option<String>) {
        self.peer.tls_subject = subject;
    }

    /// The export chosen, once [`negotiate`] gave [`Outcome::Transmit`].
    pub(crate) fn take_chosen(&mut self) -> Option<Chosen> {
        self.chosen.take()
    }

    /// The export the client may use under `name`, described for it; `None` for a name
    /// that is no UTF-8 (NBD strings are), unknown, or refused to this client.
    fn find(&self, name: &[u8]) -> Option<Chosen> {
        let name = std::str::from_utf8(name).ok()?;
        let found = self.exports.lookup(name, &self.peer)?;
        let info = ExportInfo::new(
            &found.name,
            found.description.as_deref(),
            &*found.export,
            self.max_payload,
        );
        Some(Chosen {
            export: found.export,
            info,
        })
    }
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

/// Sends an option reply whose data are `parts`, one after the other, in one write.
fn reply(w: &mut impl Write, option: u32, kind: u32, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut msg = Vec::with_capacity(OPTION_REPLY_LEN + len);
    msg.extend_from_slice(
        &OptionReply {
            option,
            kind,
            len: len as u32,
        }
        .encode(),
    );
    for p in parts {
        msg.extend_from_slice(p);
    }
    w.write_all(&msg)
}

/// An error reply with a human-readable message (proto.md: error replies may carry a
/// string for the user).
fn reply_err(w: &mut impl Write, option: u32, kind: u32, msg: &str) -> io::Result<()> {
    reply(w, option, kind, &[msg.as_bytes()])
}

/// An NBD_REP_INFO reply: the information type, then its data.
fn reply_info(w: &mut impl Write, option: u32, info: u16, data: &[u8]) -> io::Result<()> {
    reply(w, option, REP_INFO, &[&info.to_be_bytes(), data])
}

/// Runs the handshake on `s` up to the transmission phase, or up to the TLS handshake;
/// called again after it, on the TLS session, it goes on where it stopped.
///
/// `admit` is asked once the client has chosen the export (NBD_OPT_GO or
/// NBD_OPT_EXPORT_NAME, after TLS when TLS is required), before the export is
/// acknowledged: [`Busy`] (no connection slot for it) refuses the client, with
/// NBD_REP_ERR_POLICY to GO, and closes.
pub(crate) fn negotiate<S: Read + Write>(
    s: &mut S,
    h: &mut Haggle<'_>,
    admit: &mut dyn FnMut(&Chosen) -> Result<(), Busy>,
) -> io::Result<Outcome> {
    if !h.greeted {
        s.write_all(&encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))?;
        let client_flags = read_u32(s)?;
        if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
            return Ok(Outcome::Close("client sent unknown handshake flags"));
        }
        h.greeted = true;
        h.fixed = client_flags & FLAG_C_FIXED_NEWSTYLE != 0;
        h.no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
    }
    while h.options < MAX_OPTIONS {
        h.options += 1;
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

        if h.tls == TlsMode::Required && !h.secure && option != OPT_STARTTLS {
            match option {
                OPT_ABORT => {}
                // No error reply exists for EXPORT_NAME, and a plain newstyle client can
                // neither read one nor start TLS.
                OPT_EXPORT_NAME => {
                    return Ok(Outcome::Close(
                        "NBD_OPT_EXPORT_NAME without the required TLS",
                    ))
                }
                _ if !h.fixed => {
                    return Ok(Outcome::Close("TLS is required; client not fixed newstyle"))
                }
                _ => {
                    reply_err(
                        s,
                        option,
                        REP_ERR_TLS_REQD,
                        "TLS is required: this server accepts only NBD_OPT_STARTTLS and \
                         NBD_OPT_ABORT before it",
                    )?;
                    continue;
                }
            }
        }

        match option {
            OPT_EXPORT_NAME => {
                // No error reply exists for this option: an unknown name closes.
                let Some(chosen) = h.find(&data) else {
                    return Ok(Outcome::Close("NBD_OPT_EXPORT_NAME: unknown export"));
                };
                if let Err(busy) = admit(&chosen) {
                    return Ok(Outcome::Close(busy.reason()));
                }
                let mut msg = Vec::with_capacity(SIZE_AND_FLAGS_LEN + 124);
                let info = &chosen.info;
                msg.extend_from_slice(&encode_size_and_flags(info.size, info.transmission_flags()));
                if !h.no_zeroes {
                    msg.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&msg)?;
                h.chosen = Some(chosen);
                return Ok(Outcome::Transmit);
            }
            _ if !h.fixed => {
                // Plain newstyle: no option replies at all for anything else.
                return Ok(Outcome::Close("unsupported option from a non-fixed client"));
            }
            OPT_ABORT => {
                // proto.md: the server SHOULD reply with an ACK, then close; the client may
                // already be gone.
                let _ = reply(s, option, REP_ACK, &[]);
                return Ok(Outcome::Close("client aborted the handshake"));
            }
            OPT_STARTTLS if h.tls != TlsMode::Off => {
                if len != 0 {
                    reply_err(s, option, REP_ERR_INVALID, "NBD_OPT_STARTTLS takes no data")?;
                } else if h.secure {
                    reply_err(s, option, REP_ERR_INVALID, "TLS is already in use")?;
                } else {
                    reply(s, option, REP_ACK, &[])?;
                    h.secure = true;
                    return Ok(Outcome::StartTls);
                }
            }
            OPT_LIST => {
                if len != 0 {
                    reply_err(s, option, REP_ERR_INVALID, "NBD_OPT_LIST takes no data")?;
                    continue;
                }
                for listed in h.exports.list(&h.peer) {
                    let name = listed.name.as_bytes();
                    let description = listed.description.as_deref().unwrap_or_default();
                    let name_len = (name.len() as u32).to_be_bytes();
                    reply(
                        s,
                        option,
                        REP_SERVER,
                        &[&name_len, name, description.as_bytes()],
                    )?;
                }
                reply(s, option, REP_ACK, &[])?;
            }
            OPT_INFO | OPT_GO => {
                let Some((name, infos)) = decode_info_request(&data) else {
                    reply_err(s, option, REP_ERR_INVALID, "malformed NBD_OPT_INFO/GO data")?;
                    continue;
                };
                let Some(chosen) = h.find(name) else {
                    reply_err(s, option, REP_ERR_UNKNOWN, UNKNOWN)?;
                    continue;
                };
                if option == OPT_GO {
                    if let Err(busy) = admit(&chosen) {
                        reply_err(s, option, REP_ERR_POLICY, busy.message())?;
                        return Ok(Outcome::Close(busy.reason()));
                    }
                }
                send_infos(s, option, &chosen.info, &infos)?;
                reply(s, option, REP_ACK, &[])?;
                if option == OPT_GO {
                    h.chosen = Some(chosen);
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

/// The NBD_REP_INFO replies to INFO or GO: the block sizes and the export (size and
/// flags) always, the name and description when asked for.
fn send_infos<W: Write>(
    s: &mut W,
    option: u32,
    info: &ExportInfo,
    asked: &[u16],
) -> io::Result<()> {
    // Block sizes are always sent: the protocol allows it unasked, and clients then know
    // the preferred size even when they did not ask.
    let b = info.block_sizes;
    let sizes = encode_block_sizes(b.minimum, b.preferred, b.maximum);
    reply_info(s, option, INFO_BLOCK_SIZE, &sizes)?;
    if asked.contains(&INFO_NAME) {
        reply_info(s, option, INFO_NAME, info.name.as_bytes())?;
    }
    if asked.contains(&INFO_DESCRIPTION) {
        if let Some(desc) = &info.description {
            reply_info(s, option, INFO_DESCRIPTION, desc.as_bytes())?;
        }
    }
    // NBD_INFO_EXPORT is mandatory.
    let export = encode_size_and_flags(info.size, info.transmission_flags());
    reply_info(s, option, INFO_EXPORT, &export)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::{Access, Credentials, ExportTable};

    /// A client's whole side of the conversation, written before the server runs, and
    /// what the server sent.
    struct Scripted {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// An export of answers only: 8192 bytes, preferred block 4096, writable.
    struct Answers;

    impl Export for Answers {
        fn size(&self) -> u64 {
            8192
        }
        fn preferred_block_size(&self) -> u32 {
            4096
        }
        fn read_only(&self) -> bool {
            false
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
    }

    /// The server of one export, "vol", described as "test".
    fn table() -> ExportTable {
        ExportTable::single("vol", Some("test".into()), Arc::new(Answers))
    }

    /// The transmission flags of [`Answers`].
    fn flags() -> u16 {
        ExportInfo::new("vol", None, &Answers, 1 << 20).transmission_flags()
    }

    /// The haggling of an unknown peer over `table`, payloads up to 1 MiB.
    fn haggle(table: &dyn Exports, tls: TlsMode) -> Haggle<'_> {
        Haggle::new(table, Peer::default(), 1 << 20, tls)
    }

    fn option(opt: u32, data: &[u8]) -> Vec<u8> {
        let mut m = IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&opt.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        m
    }

    /// Runs the handshake on `client` (flags, then options); returns the outcome and what
    /// the server sent after its greeting.
    fn run(client_flags: u32, options: &[Vec<u8>]) -> (io::Result<Outcome>, Vec<u8>) {
        let table = table();
        let mut input = client_flags.to_be_bytes().to_vec();
        input.extend(options.concat());
        let (outcome, out) = resume(&mut haggle(&table, TlsMode::Off), input);
        assert_eq!(
            out[..GREETING_LEN],
            encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES)
        );
        (outcome, out[GREETING_LEN..].to_vec())
    }

    /// Runs (or resumes) the handshake `h` on `input`; returns the outcome and all the
    /// server sent.
    fn resume(h: &mut Haggle<'_>, input: Vec<u8>) -> (io::Result<Outcome>, Vec<u8>) {
        let mut s = Scripted {
            input: io::Cursor::new(input),
            output: Vec::new(),
        };
        let outcome = negotiate(&mut s, h, &mut |_| Ok(()));
        (outcome, s.output)
    }

    /// The fixed newstyle client's flags, then `options`.
    fn fixed(options: &[Vec<u8>]) -> Vec<u8> {
        [3u32.to_be_bytes().to_vec(), options.concat()].concat()
    }

    fn go() -> Vec<u8> {
        option(OPT_GO, &[0, 0, 0, 0, 0, 0])
    }

    fn kinds(out: &[u8]) -> Vec<(u32, u32)> {
        replies(out).iter().map(|(o, k, _)| (*o, *k)).collect()
    }

    #[test]
    fn required_tls_refuses_every_option_but_starttls_and_abort() {
        let table = table();
        let mut h = haggle(&table, TlsMode::Required);
        let input = fixed(&[
            option(OPT_LIST, &[]),
            go(),
            option(OPT_STRUCTURED_REPLY, &[]),
            option(OPT_STARTTLS, b"x"),
            option(OPT_STARTTLS, &[]),
            // Not read: the TLS handshake comes first.
            go(),
        ]);
        let (outcome, out) = resume(&mut h, input);
        assert_eq!(outcome.unwrap(), Outcome::StartTls);
        let r = replies(&out[GREETING_LEN..]);
        let k: Vec<_> = r.iter().map(|(o, k, _)| (*o, *k)).collect();
        assert_eq!(
            k,
            [
                (OPT_LIST, REP_ERR_TLS_REQD),
                (OPT_GO, REP_ERR_TLS_REQD),
                (OPT_STRUCTURED_REPLY, REP_ERR_TLS_REQD),
                (OPT_STARTTLS, REP_ERR_INVALID),
                (OPT_STARTTLS, REP_ACK),
            ]
        );
        let msg = String::from_utf8_lossy(&r[0].2);
        assert!(msg.contains("TLS is required"), "{msg}");
        // Over TLS: no second greeting, STARTTLS again is invalid, GO enters transmission.
        let (outcome, out) = resume(&mut h, [option(OPT_STARTTLS, &[]), go()].concat());
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        let k = kinds(&out);
        assert_eq!(k[0], (OPT_STARTTLS, REP_ERR_INVALID));
        assert_eq!(*k.last().unwrap(), (OPT_GO, REP_ACK));
        assert!(k.iter().all(|(_, kind)| *kind != REP_ERR_TLS_REQD));
    }

    #[test]
    fn required_tls_closes_on_export_name_abort_still_acknowledged() {
        let table = table();
        let (outcome, out) = resume(
            &mut haggle(&table, TlsMode::Required),
            fixed(&[option(OPT_EXPORT_NAME, b"vol")]),
        );
        assert_eq!(
            outcome.unwrap(),
            Outcome::Close("NBD_OPT_EXPORT_NAME without the required TLS")
        );
        assert_eq!(out.len(), GREETING_LEN, "no export data without TLS");
        let (outcome, out) = resume(
            &mut haggle(&table, TlsMode::Required),
            fixed(&[option(OPT_ABORT, &[])]),
        );
        assert_eq!(
            outcome.unwrap(),
            Outcome::Close("client aborted the handshake")
        );
        assert_eq!(kinds(&out[GREETING_LEN..]), [(OPT_ABORT, REP_ACK)]);
        // A plain newstyle client cannot start TLS: closed at its first option.
        let (outcome, _) = resume(
            &mut haggle(&table, TlsMode::Required),
            [0u32.to_be_bytes().to_vec(), option(OPT_STARTTLS, &[])].concat(),
        );
        assert!(matches!(outcome.unwrap(), Outcome::Close(_)));
    }

    #[test]
    fn allowed_tls_serves_plain_clients_and_off_refuses_starttls() {
        let table = table();
        let (outcome, out) = resume(
            &mut haggle(&table, TlsMode::Allowed),
            fixed(&[option(OPT_LIST, &[]), go()]),
        );
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        assert_eq!(kinds(&out[GREETING_LEN..])[0], (OPT_LIST, REP_SERVER));
        let (outcome, out) = resume(
            &mut haggle(&table, TlsMode::Allowed),
            fixed(&[option(OPT_STARTTLS, &[])]),
        );
        assert_eq!(outcome.unwrap(), Outcome::StartTls);
        assert_eq!(kinds(&out[GREETING_LEN..]), [(OPT_STARTTLS, REP_ACK)]);
        let (outcome, out) = resume(
            &mut haggle(&table, TlsMode::Off),
            fixed(&[option(OPT_STARTTLS, &[]), go()]),
        );
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        assert_eq!(
            kinds(&out[GREETING_LEN..])[0],
            (OPT_STARTTLS, REP_ERR_UNSUP)
        );
    }

    /// Splits the server's option replies into (option, type, data).
    fn replies(mut out: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut v = Vec::new();
        while !out.is_empty() {
            let h = OptionReply::decode(out[..OPTION_REPLY_LEN].try_into().unwrap()).unwrap();
            let end = OPTION_REPLY_LEN + h.len as usize;
            v.push((h.option, h.kind, out[OPTION_REPLY_LEN..end].to_vec()));
            out = &out[end..];
        }
        v
    }

    #[test]
    fn go_sends_block_sizes_name_and_export_then_ack() {
        let mut go = 0u32.to_be_bytes().to_vec();
        go.extend_from_slice(&1u16.to_be_bytes());
        go.extend_from_slice(&INFO_NAME.to_be_bytes());
        let (outcome, out) = run(3, &[option(OPT_GO, &go)]);
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        let mut want_export = INFO_EXPORT.to_be_bytes().to_vec();
        want_export.extend_from_slice(&encode_size_and_flags(8192, flags()));
        let mut want_sizes = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        want_sizes.extend_from_slice(&encode_block_sizes(1, 4096, 1 << 20));
        assert_eq!(
            replies(&out),
            vec![
                (OPT_GO, REP_INFO, want_sizes),
                (
                    OPT_GO,
                    REP_INFO,
                    [&INFO_NAME.to_be_bytes()[..], b"vol"].concat()
                ),
                (OPT_GO, REP_INFO, want_export),
                (OPT_GO, REP_ACK, vec![]),
            ]
        );
    }

    #[test]
    fn list_then_unknown_name_then_too_many_options() {
        let mut info_nope = 4u32.to_be_bytes().to_vec();
        info_nope.extend_from_slice(b"nope\0\0");
        let mut options = vec![option(OPT_LIST, &[]), option(OPT_INFO, &info_nope)];
        options.extend((0..MAX_OPTIONS).map(|_| option(0x7777, &[])));
        let (outcome, out) = run(1, &options);
        assert_eq!(outcome.unwrap(), Outcome::Close("too many options"));
        let r = replies(&out);
        assert_eq!(r[0], (OPT_LIST, REP_SERVER, b"\0\0\0\x03voltest".to_vec()));
        assert_eq!(r[1], (OPT_LIST, REP_ACK, vec![]));
        assert_eq!((r[2].0, r[2].1), (OPT_INFO, REP_ERR_UNKNOWN));
        // LIST has two replies; every other option one, up to the limit.
        assert_eq!(r.len(), MAX_OPTIONS + 1);
        assert!(r[3..].iter().all(|(_, k, _)| *k == REP_ERR_UNSUP));
    }

    #[test]
    fn export_name_pads_unless_asked_not_to_and_closes_on_a_wrong_name() {
        let (outcome, out) = run(1, &[option(OPT_EXPORT_NAME, b"")]);
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        assert_eq!(out.len(), SIZE_AND_FLAGS_LEN + 124);
        assert_eq!(&out[..8], &8192u64.to_be_bytes());
        let (outcome, out) = run(3, &[option(OPT_EXPORT_NAME, b"vol")]);
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        assert_eq!(out.len(), SIZE_AND_FLAGS_LEN);
        let (outcome, out) = run(3, &[option(OPT_EXPORT_NAME, b"nope")]);
        assert!(matches!(outcome.unwrap(), Outcome::Close(_)));
        assert!(out.is_empty());
    }

    #[test]
    fn misbehaving_clients_are_closed() {
        let (outcome, _) = run(4, &[]);
        assert_eq!(
            outcome.unwrap(),
            Outcome::Close("client sent unknown handshake flags")
        );
        // Plain (not fixed) newstyle may only send EXPORT_NAME.
        let (outcome, out) = run(0, &[option(OPT_LIST, &[])]);
        assert!(matches!(outcome.unwrap(), Outcome::Close(_)));
        assert!(out.is_empty());
        let mut bad = option(OPT_LIST, &[]);
        bad[0] ^= 1;
        let (outcome, _) = run(1, &[bad]);
        assert_eq!(outcome.unwrap(), Outcome::Close("bad option magic"));
        let mut long = IHAVEOPT.to_be_bytes().to_vec();
        long.extend_from_slice(&OPT_GO.to_be_bytes());
        long.extend_from_slice(&(MAX_OPTION_LEN + 1).to_be_bytes());
        let (outcome, _) = run(1, &[long]);
        assert_eq!(outcome.unwrap(), Outcome::Close("option payload too long"));
        // A client that goes away mid-option.
        let (outcome, _) = run(1, &[option(OPT_GO, &[0; 8])[..18].to_vec()]);
        assert_eq!(outcome.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    /// Three exports: "open" for everyone, "mine" for uid 1000, "signed" for the TLS
    /// subject "CN=backup".
    fn three() -> ExportTable {
        let mut t = ExportTable::new();
        let uid_1000 = Access {
            uids: Some(vec![1000]),
            ..Access::default()
        };
        let backup = Access {
            tls_subjects: Some(vec!["CN=backup".into()]),
            ..Access::default()
        };
        t.add("open", None, Arc::new(Answers), Access::everyone())
            .unwrap();
        t.add(
            "mine",
            Some("uid 1000's".into()),
            Arc::new(Answers),
            uid_1000,
        )
        .unwrap();
        t.add("signed", None, Arc::new(Answers), backup).unwrap();
        t
    }

    fn info_request(name: &str) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&0u16.to_be_bytes());
        d
    }

    /// The names in a LIST's NBD_REP_SERVER replies.
    fn listed(r: &[(u32, u32, Vec<u8>)]) -> Vec<String> {
        r.iter()
            .filter(|(o, k, _)| *o == OPT_LIST && *k == REP_SERVER)
            .map(|(_, _, d)| {
                let n = u32::from_be_bytes(d[..4].try_into().unwrap()) as usize;
                String::from_utf8(d[4..4 + n].to_vec()).unwrap()
            })
            .collect()
    }

    fn peer(uid: u32) -> Peer {
        Peer::unix(Some(Credentials {
            uid,
            gid: uid,
            pid: 1,
        }))
    }

    #[test]
    fn list_and_lookup_follow_the_peer_and_a_refusal_looks_like_an_unknown_name() {
        let t = three();
        let script = fixed(&[
            option(OPT_LIST, &[]),
            option(OPT_INFO, &info_request("mine")),
            option(OPT_INFO, &info_request("nope")),
            option(OPT_INFO, &info_request("")),
            option(OPT_ABORT, &[]),
        ]);
        let mut owner = Haggle::new(&t, peer(1000), 1 << 20, TlsMode::Off);
        let (_, out) = resume(&mut owner, script.clone());
        let r = replies(&out[GREETING_LEN..]);
        assert_eq!(listed(&r), ["open", "mine"]);
        let mine = r.iter().any(|(o, k, _)| *o == OPT_INFO && *k == REP_ACK);
        assert!(mine, "uid 1000 gets INFO on its export: {r:?}");

        let mut other = Haggle::new(&t, peer(1001), 1 << 20, TlsMode::Off);
        let (_, out) = resume(&mut other, script);
        let r = replies(&out[GREETING_LEN..]);
        assert_eq!(listed(&r), ["open"]);
        let infos: Vec<_> = r.iter().filter(|(o, ..)| *o == OPT_INFO).collect();
        // "mine" (refused), "nope" (unknown) and "" (no default among three): the same.
        assert_eq!(infos.len(), 3, "{r:?}");
        for i in &infos {
            assert_eq!(
                **i,
                (OPT_INFO, REP_ERR_UNKNOWN, UNKNOWN.as_bytes().to_vec())
            );
        }
        // Nothing the other client received names the refused export.
        assert!(!out.windows(4).any(|w| w == b"mine"));
        assert!(!out.windows(6).any(|w| w == b"signed"));
    }

    #[test]
    fn the_tls_subject_opens_its_export_once_tls_is_up() {
        let t = three();
        let mut h = Haggle::new(&t, peer(1001), 1 << 20, TlsMode::Allowed);
        let (outcome, out) = resume(
            &mut h,
            fixed(&[
                option(OPT_LIST, &[]),
                option(OPT_INFO, &info_request("signed")),
                option(OPT_STARTTLS, &[]),
            ]),
        );
        assert_eq!(outcome.unwrap(), Outcome::StartTls);
        let r = replies(&out[GREETING_LEN..]);
        assert_eq!(listed(&r), ["open"]);
        assert_eq!(r[2].1, REP_ERR_UNKNOWN);
        h.set_tls_subject(Some("CN=backup".into()));
        let mut go_signed = info_request("signed");
        go_signed.truncate(4 + 6);
        go_signed.extend_from_slice(&1u16.to_be_bytes());
        go_signed.extend_from_slice(&INFO_NAME.to_be_bytes());
        let (outcome, out) = resume(
            &mut h,
            [option(OPT_LIST, &[]), option(OPT_GO, &go_signed)].concat(),
        );
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        let r = replies(&out);
        assert_eq!(listed(&r), ["open", "signed"]);
        assert_eq!(h.take_chosen().unwrap().info.name, "signed");
        assert_eq!(h.peer().tls_subject.as_deref(), Some("CN=backup"));
    }

    #[test]
    fn export_name_closes_alike_on_refused_and_unknown_names() {
        let t = three();
        for name in [&b"mine"[..], b"nope", b"", b"\xff"] {
            let mut h = Haggle::new(&t, peer(1001), 1 << 20, TlsMode::Off);
            let (outcome, out) = resume(&mut h, fixed(&[option(OPT_EXPORT_NAME, name)]));
            assert_eq!(
                outcome.unwrap(),
                Outcome::Close("NBD_OPT_EXPORT_NAME: unknown export")
            );
            assert_eq!(out.len(), GREETING_LEN);
            assert!(h.take_chosen().is_none());
        }
        let mut h = Haggle::new(&t, peer(1000), 1 << 20, TlsMode::Off);
        let (outcome, _) = resume(&mut h, fixed(&[option(OPT_EXPORT_NAME, b"mine")]));
        assert_eq!(outcome.unwrap(), Outcome::Transmit);
        let chosen = h.take_chosen().unwrap();
        assert_eq!(
            (
                chosen.info.name.as_str(),
                chosen.info.description.as_deref()
            ),
            ("mine", Some("uid 1000's"))
        );
    }
}
