//! Option haggling through the raw client: LIST, INFO, GO, EXPORT_NAME, ABORT, options
//! refused as unsupported, and a bound on how many options one handshake may send.

use crate::support::raw::option_bytes;
use crate::support::{quiet, start, MemExport, Raw};
use sectorcrypt_nbd::proto;
use std::io::{Read, Write};

#[test]
fn options_list_info_unknown_and_abort() {
    let export = MemExport::new(vec![0; 8192], 4096, false);
    let srv = start(export, quiet());
    let mut r = Raw::handshake(&srv.sock);
    let list = r.option(proto::OPT_LIST, &[]);
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].0, proto::REP_SERVER);
    assert_eq!(&list[0].1[..4], &3u32.to_be_bytes());
    assert_eq!(&list[0].1[4..7], b"vol");
    assert_eq!(list[1].0, proto::REP_ACK);
    // LIST with data is invalid; the session goes on.
    assert_eq!(r.option(proto::OPT_LIST, b"x")[0].0, proto::REP_ERR_INVALID);
    // Structured replies and unknown options are refused as unsupported.
    assert_eq!(
        r.option(proto::OPT_STRUCTURED_REPLY, &[])[0].0,
        proto::REP_ERR_UNSUP
    );
    assert_eq!(r.option(0x7777, b"abc")[0].0, proto::REP_ERR_UNSUP);
    // INFO on an unknown name, then on the default name "" asking for the name.
    let mut d = 4u32.to_be_bytes().to_vec();
    d.extend_from_slice(b"nope");
    d.extend_from_slice(&0u16.to_be_bytes());
    assert_eq!(r.option(proto::OPT_INFO, &d)[0].0, proto::REP_ERR_UNKNOWN);
    let mut d = 0u32.to_be_bytes().to_vec();
    d.extend_from_slice(&2u16.to_be_bytes());
    d.extend_from_slice(&proto::INFO_NAME.to_be_bytes());
    d.extend_from_slice(&proto::INFO_BLOCK_SIZE.to_be_bytes());
    let infos = r.option(proto::OPT_INFO, &d);
    assert_eq!(infos.last().unwrap().0, proto::REP_ACK);
    let find = |t: u16| {
        infos
            .iter()
            .find(|(k, d)| *k == proto::REP_INFO && d[..2] == t.to_be_bytes())
            .map(|(_, d)| d[2..].to_vec())
            .unwrap_or_else(|| panic!("no info {t}"))
    };
    assert_eq!(find(proto::INFO_NAME), b"vol");
    let e = find(proto::INFO_EXPORT);
    assert_eq!(u64::from_be_bytes(e[..8].try_into().unwrap()), 8192);
    let b = find(proto::INFO_BLOCK_SIZE);
    assert_eq!(u32::from_be_bytes(b[4..8].try_into().unwrap()), 4096);
    // Malformed INFO data.
    assert_eq!(
        r.option(proto::OPT_INFO, &[0, 0, 0, 9])[0].0,
        proto::REP_ERR_INVALID
    );
    // ABORT is acknowledged, then the server closes.
    assert_eq!(r.option(proto::OPT_ABORT, &[])[0].0, proto::REP_ACK);
    let mut rest = Vec::new();
    r.s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    srv.stop();
}

#[test]
fn export_name_with_no_zeroes_sends_size_and_flags_only() {
    // The old way into transmission: NBD_OPT_EXPORT_NAME, here with NO_ZEROES: size (8)
    // and flags (2), no padding, then requests are served.
    let export = MemExport::new(vec![0; 8192], 4096, false);
    let srv = start(export, quiet());
    let mut r = Raw::handshake(&srv.sock);
    r.s.write_all(&option_bytes(proto::OPT_EXPORT_NAME, b"vol"))
        .unwrap();
    let mut h = [0u8; 10];
    r.s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), 8192);
    assert_eq!(r.read(9, 4000, 200), vec![0u8; 200]);
    srv.stop();
}

#[test]
fn a_handshake_may_not_send_options_forever() {
    let export = MemExport::new(vec![0; 4096], 512, false);
    let srv = start(export, quiet());
    let mut r = Raw::handshake(&srv.sock);
    // An unknown option, again and again, until the server hangs up.
    let closed = (0..1000).any(|_| r.try_option(1000, &[]).is_err());
    assert!(closed, "the server kept answering options");
    srv.stop();
}
