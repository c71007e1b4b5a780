//! What `serve URI` sends upstream for a client's request flags and commands, seen by
//! nbdkit's `log` filter in front of the upstream `file` plugin: a FUA write arrives as FUA
//! writes (every piece of it, the read-modify-write edges included) and no FLUSH; a plain
//! write carries no FUA; an upstream without FUA gets writes and a FLUSH before the client
//! is answered; TRIM (with `--allow-discards`) arrives as TRIM of the whole sectors inside
//! the range, at their place in the data area; WRITE_ZEROES as writes of ciphertext.
//! Skipped with a printed reason where nbdkit is missing.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_nbd::client::{Client, ClientConfig, NbdUri};
use sectorcrypt_testkit::nbdkit::Nbdkit;
use sectorcrypt_testkit::{pattern, require};
use served::Served;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::s;

/// One request as nbdkit's log filter saw it: the command (`Write`, `Flush`, `Trim`,
/// `Zero`, `Read`), its offset and length (0 for a flush), and its FUA flag.
#[derive(Debug, Clone, PartialEq)]
struct Logged {
    cmd: String,
    offset: u64,
    count: u64,
    fua: bool,
}

/// The log filter's file, read from a position on.
struct Log {
    path: PathBuf,
    seen: usize,
}

impl Log {
    /// The requests logged since the last call (the handshake's reads and the like are
    /// skipped by a first call).
    fn requests(&mut self) -> Vec<Logged> {
        let text = std::fs::read_to_string(&self.path).unwrap();
        let new = &text[self.seen..];
        self.seen = text.len();
        new.lines().filter_map(parse).collect()
    }
}

/// `connection=1 Write id=1 offset=0x0 count=0x200 fua=1 ...`, the request's line (not
/// its `...Write id=1 return=0` completion).
fn parse(line: &str) -> Option<Logged> {
    let mut words = line
        .split_whitespace()
        .skip_while(|w| !w.starts_with("connection="));
    words.next()?;
    let cmd = words.next()?;
    if cmd.starts_with("...") || cmd == "Connect" || cmd == "Disconnect" {
        return None;
    }
    let mut r = Logged {
        cmd: cmd.to_string(),
        offset: 0,
        count: 0,
        fua: false,
    };
    for w in words {
        let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
        if let Some(v) = w.strip_prefix("offset=") {
            r.offset = hex(v);
        } else if let Some(v) = w.strip_prefix("count=") {
            r.count = hex(v);
        } else if let Some(v) = w.strip_prefix("fua=") {
            r.fua = v == "1";
        }
    }
    Some(r)
}

/// A LUKS2 volume (`dir/v.img`, key `dir/k0`) behind nbdkit's `file` plugin with the log
/// filter (and `filters` after it, with `params`), served by `serve URI EXTRA`; the log
/// already read past the proxy's opening.
fn proxy(d: &Path, filters: &[&str], params: &[&str], extra: &[&str]) -> (Nbdkit, Served, Log) {
    let img = volumes::new_volume(d, &[]);
    let log = d.join("up.log");
    let file = format!("file={}", img.display());
    let logfile = format!("logfile={}", log.display());
    let mut args = vec!["--filter=log"];
    args.extend(filters);
    args.extend(["file", &file, &logfile]);
    args.extend(params);
    let kit = Nbdkit::unix(&d.join("up.sock"), &args);
    let k0 = d.join("k0");
    let mut serve = vec![kit.uri(), "--key-file".into(), s(&k0).into()];
    serve.extend(extra.iter().map(|e| e.to_string()));
    let serve: Vec<&str> = serve.iter().map(|a| a.as_str()).collect();
    let srv = Served::start(&serve, &d.join("proxy.sock"));
    let mut log = Log { path: log, seen: 0 };
    // The proxy opened the volume (its header reads) before its socket appeared.
    log.requests();
    (kit, srv, log)
}

/// A client of the proxy (this crate's own NBD client, which sends FUA when told to).
fn client(srv: &Served) -> Client {
    let config = ClientConfig {
        timeout: Some(Duration::from_secs(20)),
        ..ClientConfig::default()
    };
    Client::connect(&NbdUri::parse(&srv.uri()).unwrap(), config).unwrap()
}

fn of(reqs: &[Logged], cmd: &str) -> Vec<Logged> {
    reqs.iter().filter(|r| r.cmd == cmd).cloned().collect()
}

/// A write with unaligned edges and several chunks: 1000 bytes into the volume, 1 MiB and
/// 3000 bytes long.
const OFFSET: u64 = 1000;
const LEN: usize = (1 << 20) + 3000;

#[test]
fn a_fua_write_arrives_upstream_as_fua_writes_and_no_flush() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let (_kit, srv, mut log) = proxy(dir.path(), &[], &[], &[]);
    let c = client(&srv);
    let data = pattern(LEN, 3);
    c.write_at(&data, OFFSET, true).unwrap();
    let reqs = log.requests();
    let writes = of(&reqs, "Write");
    assert!(!writes.is_empty(), "{reqs:?}");
    assert!(
        writes.iter().all(|w| w.fua),
        "a write without FUA: {reqs:?}"
    );
    assert!(
        of(&reqs, "Flush").is_empty(),
        "a FLUSH for a FUA write: {reqs:?}"
    );
    let written: u64 = writes.iter().map(|w| w.count).sum();
    assert!(written >= LEN as u64, "{written} bytes written: {reqs:?}");
    // A plain write carries no FUA and no flush either.
    c.write_at(&data, OFFSET, false).unwrap();
    let reqs = log.requests();
    let writes = of(&reqs, "Write");
    assert!(!writes.is_empty(), "{reqs:?}");
    assert!(
        writes.iter().all(|w| !w.fua),
        "FUA on a plain write: {reqs:?}"
    );
    assert!(of(&reqs, "Flush").is_empty(), "{reqs:?}");
    // The client's FLUSH is one.
    c.flush().unwrap();
    assert!(!of(&log.requests(), "Flush").is_empty());
    let mut back = vec![0u8; LEN];
    c.read_at(&mut back, OFFSET).unwrap();
    assert!(back == data, "read back differs");
}

#[test]
fn a_fua_write_over_an_upstream_without_fua_is_flushed_before_the_reply() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    // The fua filter's default mode (nbdkit 1.32 refuses its name, `fuamode=none`): FUA
    // not advertised.
    let (_kit, srv, mut log) = proxy(dir.path(), &["--filter=fua"], &[], &[]);
    let c = client(&srv);
    c.write_at(&pattern(LEN, 4), OFFSET, true).unwrap();
    let reqs = log.requests();
    let last_write = reqs.iter().rposition(|r| r.cmd == "Write");
    let last_flush = reqs.iter().rposition(|r| r.cmd == "Flush");
    assert!(
        matches!((last_write, last_flush), (Some(w), Some(f)) if f > w),
        "no FLUSH after the writes: {reqs:?}"
    );
    assert!(reqs.iter().all(|r| !r.fua), "{reqs:?}");
}

#[test]
fn trim_passes_upstream_as_trim_and_write_zeroes_as_ciphertext() {
    require!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let (_kit, srv, mut log) = proxy(dir.path(), &[], &[], &["--allow-discards"]);
    let c = client(&srv);
    // The data area of the 20 MiB LUKS2 volume starts at 16 MiB; whole 4 KiB-aligned
    // ranges are whole sectors whatever the sector size.
    c.trim(8192, 65536).unwrap();
    let reqs = log.requests();
    let trims = of(&reqs, "Trim");
    assert_eq!(trims.len(), 1, "{reqs:?}");
    assert_eq!(
        (trims[0].offset, trims[0].count),
        ((16 << 20) + 8192, 65536)
    );
    assert!(of(&reqs, "Write").is_empty(), "{reqs:?}");
    // Zeros are encrypted: written as ciphertext, never a hole or a zeroed range upstream.
    c.write_zeroes(8192, 65536, false).unwrap();
    let reqs = log.requests();
    assert!(of(&reqs, "Zero").is_empty() && of(&reqs, "Trim").is_empty());
    let written: u64 = of(&reqs, "Write").iter().map(|w| w.count).sum();
    assert_eq!(written, 65536, "{reqs:?}");
    let mut back = vec![1u8; 65536];
    c.read_at(&mut back, 8192).unwrap();
    assert!(back.iter().all(|&b| b == 0));
}
