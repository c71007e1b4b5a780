//! The NBD server against real clients (nbdinfo, nbdcopy, qemu-io, qemu-img from
//! libnbd-bin and qemu-utils) and against a raw client written here for the malformed
//! requests no real client sends. The export is a memory-backed one defined below; each
//! test runs its own server on a Unix socket in a temporary directory.

use rand::{Rng, RngCore, SeedableRng};
use sectorcrypt_nbd::{proto, Export, Listen, Server, ServerConfig, ShutdownHandle};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// A memory-backed export that counts flushes.
struct MemExport {
    data: Mutex<Vec<u8>>,
    block: u32,
    read_only: bool,
    flushes: AtomicU64,
    /// The connections that wrote (from the server's worker thread names, `nbd-ID-wN`).
    writers: Mutex<std::collections::BTreeSet<String>>,
}

impl MemExport {
    fn new(data: Vec<u8>, block: u32, read_only: bool) -> Arc<MemExport> {
        Arc::new(MemExport {
            data: Mutex::new(data),
            block,
            read_only,
            flushes: AtomicU64::new(0),
            writers: Mutex::new(Default::default()),
        })
    }

    fn snapshot(&self) -> Vec<u8> {
        self.data.lock().unwrap().clone()
    }
}

impl Export for MemExport {
    fn size(&self) -> u64 {
        self.data.lock().unwrap().len() as u64
    }
    fn preferred_block_size(&self) -> u32 {
        self.block
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.data.lock().unwrap();
        let o = offset as usize;
        buf.copy_from_slice(&d[o..o + buf.len()]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        assert!(!self.read_only, "the server wrote to a read-only export");
        if let Some(name) = thread::current().name() {
            let conn = name.rsplit_once('-').map_or(name, |(c, _)| c);
            self.writers.lock().unwrap().insert(conn.to_string());
        }
        let mut d = self.data.lock().unwrap();
        let o = offset as usize;
        d[o..o + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Whether `tool` runs; otherwise prints the reason the test is skipped.
fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

struct Running {
    _dir: tempfile::TempDir,
    sock: PathBuf,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), sectorcrypt_nbd::Error>>>,
}

impl Running {
    fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.sock.display())
    }

    fn stop(mut self) {
        self.handle.shutdown();
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.handle.shutdown();
            let _ = t.join();
        }
    }
}

fn start(export: Arc<MemExport>, config: ServerConfig) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::bind(&Listen::Unix(sock.clone()), export, config).unwrap();
    let handle = server.shutdown_handle();
    let thread = thread::spawn(move || server.run());
    Running {
        _dir: dir,
        sock,
        handle,
        thread: Some(thread),
    }
}

fn quiet() -> ServerConfig {
    ServerConfig {
        export_name: "vol".into(),
        description: Some("test volume".into()),
        log: false,
        ..ServerConfig::default()
    }
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn nbdinfo_shows_size_block_sizes_and_flags() {
    if !have("nbdinfo") {
        return;
    }
    let size = 3 * 1024 * 1024 + 4096;
    let export = MemExport::new(vec![0; size], 4096, false);
    let srv = start(export, quiet());
    let json = run(Command::new("nbdinfo").arg("--json").arg(srv.uri()));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let e = &v["exports"][0];
    assert_eq!(e["export-size"], size as u64, "{json}");
    assert_eq!(e["block_size_minimum"], 1, "{json}");
    assert_eq!(e["block_size_preferred"], 4096, "{json}");
    assert_eq!(e["block_size_maximum"], 32 << 20, "{json}");
    assert_eq!(e["is_read_only"], false, "{json}");
    assert_eq!(e["can_flush"], true, "{json}");
    assert_eq!(e["can_fua"], true, "{json}");
    assert_eq!(e["can_multi_conn"], true, "{json}");
    assert_eq!(e["can_trim"], false, "{json}");
    assert_eq!(e["can_zero"], true, "{json}");
    srv.stop();

    let ro = MemExport::new(vec![0; 4096], 512, true);
    let srv = start(ro, quiet());
    let json = run(Command::new("nbdinfo").arg("--json").arg(srv.uri()));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["exports"][0]["is_read_only"], true, "{json}");
    assert_eq!(v["exports"][0]["block_size_preferred"], 512, "{json}");
    let list = run(Command::new("nbdinfo").arg("--list").arg(srv.uri()));
    assert!(list.contains("vol"), "{list}");
}

#[test]
fn nbdcopy_in_and_out_is_byte_exact_with_four_connections() {
    if !have("nbdcopy") {
        return;
    }
    let size = 24 * 1024 * 1024 + 512 * 7;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), quiet());
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    let plain = random(size, 1);
    std::fs::write(&input, &plain).unwrap();

    run(Command::new("nbdcopy")
        .args([
            "--connections",
            "4",
            "--threads",
            "4",
            "--requests",
            "16",
            "--flush",
        ])
        .arg(&input)
        .arg(srv.uri()));
    assert!(
        export.snapshot() == plain,
        "the export differs after nbdcopy in"
    );
    assert!(
        export.flushes.load(Ordering::SeqCst) > 0,
        "nbdcopy --flush flushes"
    );

    run(Command::new("nbdcopy")
        .args(["--connections", "4", "--threads", "4"])
        .arg(srv.uri())
        .arg(&output));
    assert!(
        std::fs::read(&output).unwrap() == plain,
        "nbdcopy out differs"
    );
    srv.stop();
}

#[test]
fn qemu_io_reads_and_writes_at_odd_offsets() {
    if !have("qemu-io") {
        return;
    }
    let size = 2 * 1024 * 1024;
    let base = random(size, 2);
    let export = MemExport::new(base.clone(), 512, false);
    let srv = start(export.clone(), quiet());
    let mut want = base.clone();
    // (offset, length, pattern): odd offsets and lengths, across sector boundaries, at the
    // very end of the export.
    let writes = [
        (1u64, 1usize, 0x11u8),
        (511, 3, 0x22),
        (1000, 70001, 0x33),
        (80001, 511, 0x44),
        (size as u64 - 5, 5, 0x55),
    ];
    for &(o, l, p) in &writes {
        run(Command::new("qemu-io").args([
            "-f",
            "raw",
            "-c",
            &format!("write -P {p} {o} {l}"),
            &srv.uri(),
        ]));
        want[o as usize..o as usize + l].fill(p);
    }
    assert!(export.snapshot() == want, "writes through qemu-io differ");
    for &(o, l, p) in &writes {
        let out = run(Command::new("qemu-io").args([
            "-f",
            "raw",
            "-c",
            &format!("read -P {p} {o} {l}"),
            &srv.uri(),
        ]));
        assert!(!out.contains("Pattern verification failed"), "{out}");
    }
    // A read that crosses a pattern boundary fails the pattern check: the checks above do
    // compare.
    let out = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "read -P 51 990 20", &srv.uri()])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Pattern verification failed"), "{text}");
    // Write zeroes (qemu-io's write -z sends NBD_CMD_WRITE_ZEROES).
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -z 3 9000", &srv.uri()]));
    want[3..9003].fill(0);
    assert!(export.snapshot() == want, "write -z differs");

    // qemu-img convert out of the export equals its contents.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("conv.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(srv.uri())
        .arg(&out));
    assert!(
        std::fs::read(&out).unwrap() == want,
        "qemu-img convert differs"
    );
    // And into the export.
    let other = random(size, 22);
    let input = dir.path().join("in.raw");
    std::fs::write(&input, &other).unwrap();
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&input)
        .arg(srv.uri()));
    assert!(
        export.snapshot() == other,
        "qemu-img convert into the export differs"
    );
    srv.stop();
}

#[test]
fn concurrent_writers_on_disjoint_ranges() {
    if !have("qemu-io") {
        return;
    }
    let size = 8 * 1024 * 1024;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), quiet());
    let uri = srv.uri();
    let parts = 6usize;
    let part = size / parts;
    let writers: Vec<_> = (0..parts)
        .map(|i| {
            let uri = uri.clone();
            thread::spawn(move || {
                // Each writer: many odd-sized requests over its own range, several in
                // flight (aio_write), on its own connection.
                let mut cmds = Vec::new();
                let mut o = i * part + 3;
                let end = (i + 1) * part - 3;
                let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
                while o < end {
                    let l = rng.gen_range(1..40000).min(end - o);
                    cmds.push("-c".to_string());
                    cmds.push(format!("aio_write -P {} {o} {l}", i + 1));
                    o += l;
                }
                cmds.push("-c".into());
                cmds.push("aio_flush".into());
                run(Command::new("qemu-io")
                    .args(["-f", "raw"])
                    .args(&cmds)
                    .arg(&uri));
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let got = export.snapshot();
    for i in 0..parts {
        let r = i * part..(i + 1) * part;
        let want: Vec<u8> = r
            .clone()
            .map(|x| {
                if x < i * part + 3 || x >= (i + 1) * part - 3 {
                    0
                } else {
                    (i + 1) as u8
                }
            })
            .collect();
        assert!(got[r] == want[..], "range {i} differs");
    }
    srv.stop();
}

/// A client speaking the protocol by hand.
struct Raw {
    s: UnixStream,
}

impl Raw {
    fn handshake(path: &Path) -> Raw {
        let mut s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(
            u64::from_be_bytes(hello[..8].try_into().unwrap()),
            proto::NBDMAGIC
        );
        assert_eq!(
            u64::from_be_bytes(hello[8..16].try_into().unwrap()),
            proto::IHAVEOPT
        );
        let flags = u16::from_be_bytes([hello[16], hello[17]]);
        assert_eq!(flags, proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
        s.write_all(&3u32.to_be_bytes()).unwrap();
        Raw { s }
    }

    /// Sends an option; returns the replies (type, data) up to and including the final one
    /// (an ACK or an error).
    fn option(&mut self, opt: u32, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut m = proto::IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&opt.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.s.write_all(&m).unwrap();
        let mut out = Vec::new();
        loop {
            let mut h = [0u8; 20];
            self.s.read_exact(&mut h).unwrap();
            assert_eq!(
                u64::from_be_bytes(h[..8].try_into().unwrap()),
                proto::OPT_REPLY_MAGIC
            );
            assert_eq!(u32::from_be_bytes(h[8..12].try_into().unwrap()), opt);
            let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
            let mut d = vec![0u8; len as usize];
            self.s.read_exact(&mut d).unwrap();
            let last = kind == proto::REP_ACK || kind & proto::REP_FLAG_ERROR != 0;
            out.push((kind, d));
            if last {
                return out;
            }
        }
    }

    fn go(path: &Path) -> Raw {
        let mut r = Raw::handshake(path);
        let mut d = 3u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"vol");
        d.extend_from_slice(&0u16.to_be_bytes());
        let replies = r.option(proto::OPT_GO, &d);
        assert_eq!(replies.last().unwrap().0, proto::REP_ACK);
        r
    }

    fn request(&mut self, kind: u16, flags: u16, cookie: u64, offset: u64, len: u32, data: &[u8]) {
        self.request_magic(proto::REQUEST_MAGIC, kind, flags, cookie, offset, len, data);
    }

    #[allow(clippy::too_many_arguments)]
    fn request_magic(
        &mut self,
        magic: u32,
        kind: u16,
        flags: u16,
        cookie: u64,
        offset: u64,
        len: u32,
        data: &[u8],
    ) {
        let mut m = magic.to_be_bytes().to_vec();
        m.extend_from_slice(&flags.to_be_bytes());
        m.extend_from_slice(&kind.to_be_bytes());
        m.extend_from_slice(&cookie.to_be_bytes());
        m.extend_from_slice(&offset.to_be_bytes());
        m.extend_from_slice(&len.to_be_bytes());
        m.extend_from_slice(data);
        self.s.write_all(&m).unwrap();
    }

    /// (error, cookie) of the next simple reply, or None at end of stream.
    fn reply(&mut self) -> Option<(u32, u64)> {
        let mut h = [0u8; 16];
        match self.s.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("reading a reply: {e}"),
        }
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            proto::SIMPLE_REPLY_MAGIC
        );
        Some((
            u32::from_be_bytes(h[4..8].try_into().unwrap()),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
        ))
    }

    fn read(&mut self, cookie: u64, offset: u64, len: u32) -> Vec<u8> {
        self.request(proto::CMD_READ, 0, cookie, offset, len, &[]);
        assert_eq!(self.reply(), Some((0, cookie)));
        let mut d = vec![0u8; len as usize];
        self.s.read_exact(&mut d).unwrap();
        d
    }
}

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

    // Old-style EXPORT_NAME with NO_ZEROES: size (8) and flags (2), no padding.
    let mut r = Raw::handshake(&srv.sock);
    let mut m = proto::IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&proto::OPT_EXPORT_NAME.to_be_bytes());
    m.extend_from_slice(&3u32.to_be_bytes());
    m.extend_from_slice(b"vol");
    r.s.write_all(&m).unwrap();
    let mut h = [0u8; 10];
    r.s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), 8192);
    assert_eq!(r.read(9, 4000, 200), vec![0u8; 200]);
    srv.stop();
}

#[test]
fn malformed_requests_get_errors_while_another_client_is_served() {
    let size = 1 << 20;
    let plain = random(size, 3);
    let export = MemExport::new(plain.clone(), 512, false);
    let srv = start(export.clone(), quiet());
    let sock = srv.sock.clone();

    // A well-behaved client reading in a loop the whole time.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let good = {
        let stop = stop.clone();
        let plain = plain.clone();
        thread::spawn(move || {
            let mut c = Raw::go(&sock);
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) || n < 10 {
                let o = (n * 7919) % (size as u64 - 4096);
                assert!(c.read(n, o, 4096) == plain[o as usize..o as usize + 4096]);
                n += 1;
            }
            n
        })
    };

    let mut bad = Raw::go(&srv.sock);
    // Out of range read and write (the write's payload is consumed: the next request
    // parses), an offset that overflows, an oversized read and an oversized write.
    bad.request(proto::CMD_READ, 0, 1, size as u64 - 10, 11, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 1)));
    bad.request(proto::CMD_WRITE, 0, 2, size as u64, 100, &[0xee; 100]);
    assert_eq!(bad.reply(), Some((proto::ENOSPC, 2)));
    bad.request(proto::CMD_READ, 0, 3, u64::MAX - 1, 4, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 3)));
    bad.request(proto::CMD_READ, 0, 4, 0, (32 << 20) + 1, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 4)));
    let big = vec![0xddu8; (32 << 20) + 512];
    bad.request(proto::CMD_WRITE, 0, 5, 0, big.len() as u32, &big);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 5)));
    bad.request(proto::CMD_TRIM, 0, 6, 0, 512, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 6)), "trim is not offered");
    bad.request(proto::CMD_BLOCK_STATUS, 0, 7, 0, 512, &[]);
    assert_eq!(bad.reply(), Some((proto::EINVAL, 7)));
    // Still usable, and nothing was written.
    assert!(bad.read(8, 0, 512) == plain[..512]);
    assert!(
        export.snapshot() == plain,
        "a refused request changed the export"
    );
    // Bad magic: the server hangs up.
    bad.request_magic(0xdeadbeef, proto::CMD_READ, 0, 9, 0, 512, &[]);
    assert_eq!(bad.reply(), None);

    // A client that goes away in the middle of a write payload.
    let mut half = Raw::go(&srv.sock);
    half.request(proto::CMD_WRITE, 0, 1, 0, 4096, &[0xcc; 100]);
    drop(half);

    stop.store(true, Ordering::SeqCst);
    let served = good.join().unwrap();
    assert!(served >= 10);
    assert!(export.snapshot() == plain);
    srv.stop();
}

#[test]
fn pipelined_requests_match_their_cookies_and_flush_and_fua_flush() {
    let size = 4 << 20;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    // 64 writes in flight, then the replies, in any order, one per cookie.
    let mut want = vec![0u8; size];
    for i in 0..64u64 {
        let d = vec![i as u8 + 1; 65536];
        c.request(proto::CMD_WRITE, 0, 1000 + i, i * 65536, 65536, &d);
        want[(i * 65536) as usize..((i + 1) * 65536) as usize].copy_from_slice(&d);
    }
    let mut seen: Vec<u64> = (0..64)
        .map(|_| c.reply().unwrap())
        .map(|(e, k)| {
            assert_eq!(e, 0);
            k
        })
        .collect();
    seen.sort();
    assert_eq!(seen, (1000..1064).collect::<Vec<_>>());
    assert!(export.snapshot() == want);
    let before = export.flushes.load(Ordering::SeqCst);
    c.request(proto::CMD_FLUSH, 0, 5, 0, 0, &[]);
    assert_eq!(c.reply(), Some((0, 5)));
    c.request(proto::CMD_WRITE, proto::CMD_FLAG_FUA, 6, 7, 3, b"abc");
    assert_eq!(c.reply(), Some((0, 6)));
    assert_eq!(export.flushes.load(Ordering::SeqCst), before + 2);
    c.request(
        proto::CMD_WRITE_ZEROES,
        proto::CMD_FLAG_NO_HOLE,
        7,
        5,
        70000,
        &[],
    );
    assert_eq!(c.reply(), Some((0, 7)));
    want[7..10].copy_from_slice(b"abc");
    want[5..70005].fill(0);
    assert!(export.snapshot() == want);
    // DISC: the server closes after the requests in flight.
    c.request(proto::CMD_WRITE, 0, 8, 100, 4, b"wxyz");
    c.request(proto::CMD_DISC, 0, 9, 0, 0, &[]);
    assert_eq!(c.reply(), Some((0, 8)));
    assert_eq!(c.reply(), None);
    want[100..104].copy_from_slice(b"wxyz");
    assert!(export.snapshot() == want);
    srv.stop();
}

#[test]
fn read_only_exports_refuse_writes() {
    let export = MemExport::new(vec![7; 4096], 512, true);
    let srv = start(export.clone(), quiet());
    let mut c = Raw::go(&srv.sock);
    c.request(proto::CMD_WRITE, 0, 1, 0, 4, b"abcd");
    assert_eq!(c.reply(), Some((proto::EPERM, 1)));
    c.request(proto::CMD_WRITE_ZEROES, 0, 2, 0, 4, &[]);
    assert_eq!(c.reply(), Some((proto::EPERM, 2)));
    assert_eq!(c.read(3, 0, 4), vec![7; 4]);
    assert_eq!(export.snapshot(), vec![7; 4096]);
    srv.stop();
}

#[test]
fn shutdown_finishes_and_flushes_and_removes_the_socket() {
    let export = MemExport::new(vec![0; 65536], 512, false);
    let srv = start(export.clone(), quiet());
    let sock = srv.sock.clone();
    let mut c = Raw::go(&sock);
    c.request(proto::CMD_WRITE, 0, 1, 0, 4, b"abcd");
    assert_eq!(c.reply(), Some((0, 1)));
    // A client stuck in the handshake does not hold the shutdown up.
    let mut idle = Raw::handshake(&sock);
    let before = export.flushes.load(Ordering::SeqCst);
    srv.stop();
    let mut rest = Vec::new();
    assert_eq!(idle.s.read_to_end(&mut rest).unwrap_or(0), 0);
    assert!(export.flushes.load(Ordering::SeqCst) > before);
    assert!(!sock.exists());
    // The open connection was closed by the shutdown.
    assert_eq!(c.reply(), None);
}

#[test]
fn tcp_only_on_loopback() {
    assert!(Listen::tcp("0.0.0.0:10809").is_err());
    assert!(Listen::tcp("192.168.1.1:10809").is_err());
    assert!(Listen::tcp("localhost").is_err());
    let l = Listen::tcp("127.0.0.1:0").unwrap();
    let export = MemExport::new(vec![5; 4096], 512, false);
    let server = Server::bind(&l, export, quiet()).unwrap();
    let Listen::Tcp(addr) = server.local().clone() else {
        panic!("tcp");
    };
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    if have("nbdinfo") {
        let out = run(Command::new("nbdinfo")
            .arg("--size")
            .arg(format!("nbd://127.0.0.1:{}/vol", addr.port())));
        assert_eq!(out.trim(), "4096");
    }
    handle.shutdown();
    t.join().unwrap().unwrap();
}

#[test]
fn connections_beyond_the_limit_are_closed_and_the_others_served() {
    let export = MemExport::new(vec![3; 8192], 512, false);
    let srv = start(
        export,
        ServerConfig {
            max_connections: 2,
            ..quiet()
        },
    );
    let mut a = Raw::go(&srv.sock);
    let mut b = Raw::go(&srv.sock);
    // The third is closed before the greeting.
    let mut c = UnixStream::connect(&srv.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    assert_eq!(c.read_to_end(&mut got).unwrap_or(0), 0);
    assert_eq!(a.read(1, 0, 16), vec![3; 16]);
    assert_eq!(b.read(2, 100, 16), vec![3; 16]);
    // Once one goes, a new one is served.
    a.request(proto::CMD_DISC, 0, 3, 0, 0, &[]);
    assert_eq!(a.reply(), None);
    let t0 = std::time::Instant::now();
    loop {
        let mut probe = UnixStream::connect(&srv.sock).unwrap();
        probe
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut hello = [0u8; 8];
        if probe.read_exact(&mut hello).is_ok() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no slot freed");
        thread::sleep(Duration::from_millis(20));
    }
    srv.stop();
}

#[test]
fn idle_handshakes_time_out_and_free_their_slots() {
    // Every slot taken by a connection that never sends a byte: a real client must still
    // get served once their handshakes time out (the slots are freed).
    let export = MemExport::new(vec![9; 8192], 512, false);
    let srv = start(
        export,
        ServerConfig {
            max_connections: 4,
            handshake_timeout: Duration::from_millis(200),
            ..quiet()
        },
    );
    let idle: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&srv.sock).unwrap())
        .collect();
    // A trickling client (one option byte at a time) is bounded by the same deadline.
    let mut slow = UnixStream::connect(&srv.sock).unwrap();
    let t0 = std::time::Instant::now();
    let mut c = loop {
        let mut probe = UnixStream::connect(&srv.sock).unwrap();
        probe
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut hello = [0u8; 18];
        if probe.read_exact(&mut hello).is_ok() {
            probe.write_all(&3u32.to_be_bytes()).unwrap();
            let mut r = Raw { s: probe };
            let mut d = 3u32.to_be_bytes().to_vec();
            d.extend_from_slice(b"vol");
            d.extend_from_slice(&0u16.to_be_bytes());
            assert_eq!(
                r.option(proto::OPT_GO, &d).last().unwrap().0,
                proto::REP_ACK
            );
            break r;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no slot freed");
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(c.read(1, 0, 16), vec![9; 16]);
    // The idle ones were closed by the server.
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(got.len() <= 18, "only the greeting, then closed");
    }
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 64];
    let _ = slow.read(&mut buf);
    let trickle_start = std::time::Instant::now();
    let mut closed = false;
    for b in proto::IHAVEOPT.to_be_bytes().iter().cycle().take(200) {
        if slow.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(closed || trickle_start.elapsed() < Duration::from_secs(5));
    // The established connection is not subject to the handshake deadline.
    thread::sleep(Duration::from_millis(400));
    assert_eq!(c.read(2, 8, 8), vec![9; 8]);
    srv.stop();
}

#[test]
fn a_handshake_may_not_send_options_forever() {
    let export = MemExport::new(vec![0; 4096], 512, false);
    let srv = start(export, quiet());
    let mut r = Raw::handshake(&srv.sock);
    let mut closed = false;
    for _ in 0..1000 {
        let mut m = proto::IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&1000u32.to_be_bytes()); // unknown option
        m.extend_from_slice(&0u32.to_be_bytes());
        if r.s.write_all(&m).is_err() {
            closed = true;
            break;
        }
        let mut h = [0u8; 20];
        if r.s.read_exact(&mut h).is_err() {
            closed = true;
            break;
        }
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        r.s.read_exact(&mut d).unwrap();
    }
    assert!(closed, "the server kept answering options");
    srv.stop();
}

/// An export whose reads take a while and that records how many run at once.
struct SlowExport {
    size: u64,
    active: AtomicU64,
    peak: AtomicU64,
}

impl Export for SlowExport {
    fn size(&self) -> u64 {
        self.size
    }
    fn preferred_block_size(&self) -> u32 {
        512
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(20));
        for (i, b) in buf.iter_mut().enumerate() {
            *b = ((offset + i as u64) % 251) as u8;
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(20));
        self.active.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn payload_bytes_in_flight_are_bounded_across_connections() {
    // Budget for two 512 KiB requests; two clients each pipeline eight reads and eight
    // writes (4 workers each): never more than two payloads in flight server-wide.
    let export = Arc::new(SlowExport {
        size: 8 << 20,
        active: AtomicU64::new(0),
        peak: AtomicU64::new(0),
    });
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::bind(
        &Listen::Unix(sock.clone()),
        export.clone(),
        ServerConfig {
            payload_budget: 1 << 20,
            ..quiet()
        },
    )
    .unwrap();
    let handle = server.shutdown_handle();
    let t = thread::spawn(move || server.run());
    const LEN: u32 = 512 << 10;
    let clients: Vec<_> = (0..2u64)
        .map(|k| {
            let sock = sock.clone();
            thread::spawn(move || {
                let mut c = Raw::go(&sock);
                let mut w = c.s.try_clone().unwrap();
                let writer = thread::spawn(move || {
                    let payload = vec![7u8; LEN as usize];
                    for i in 0..8u64 {
                        let mut m = proto::REQUEST_MAGIC.to_be_bytes().to_vec();
                        m.extend_from_slice(&0u16.to_be_bytes());
                        m.extend_from_slice(&proto::CMD_READ.to_be_bytes());
                        m.extend_from_slice(&i.to_be_bytes());
                        m.extend_from_slice(&((k * 8 + i) * LEN as u64).to_be_bytes());
                        m.extend_from_slice(&LEN.to_be_bytes());
                        w.write_all(&m).unwrap();
                    }
                    for i in 8..16u64 {
                        let mut m = proto::REQUEST_MAGIC.to_be_bytes().to_vec();
                        m.extend_from_slice(&0u16.to_be_bytes());
                        m.extend_from_slice(&proto::CMD_WRITE.to_be_bytes());
                        m.extend_from_slice(&i.to_be_bytes());
                        m.extend_from_slice(&0u64.to_be_bytes());
                        m.extend_from_slice(&LEN.to_be_bytes());
                        m.extend_from_slice(&payload);
                        w.write_all(&m).unwrap();
                    }
                });
                let mut seen = std::collections::BTreeSet::new();
                for _ in 0..16 {
                    let (err, cookie) = c.reply().unwrap();
                    assert_eq!(err, 0);
                    if cookie < 8 {
                        let mut d = vec![0u8; LEN as usize];
                        c.s.read_exact(&mut d).unwrap();
                        let off = (k * 8 + cookie) * LEN as u64;
                        assert!(d
                            .iter()
                            .enumerate()
                            .all(|(i, b)| *b == ((off + i as u64) % 251) as u8));
                    }
                    seen.insert(cookie);
                }
                assert_eq!(seen.len(), 16);
                writer.join().unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let peak = export.peak.load(Ordering::SeqCst);
    assert!(peak >= 1);
    assert!(peak <= 2, "{peak} payloads in flight with a budget for 2");
    handle.shutdown();
    t.join().unwrap().unwrap();
}

/// Connects, negotiates and sends `n` READs of 1 MiB without ever reading a reply: the
/// socket buffers fill and the server's sends block.
fn stuck_client(sock: &Path, n: u64) -> Raw {
    let mut c = Raw::go(sock);
    for i in 0..n {
        c.request(proto::CMD_READ, 0, i, (i % 8) << 20, 1 << 20, &[]);
    }
    c
}

#[test]
fn shutdown_is_bounded_when_a_client_stops_reading_replies() {
    let export = MemExport::new(vec![1; 8 << 20], 512, false);
    let srv = start(
        export.clone(),
        ServerConfig {
            shutdown_grace: Duration::from_millis(200),
            ..quiet()
        },
    );
    let mut c = Raw::go(&srv.sock);
    c.request(proto::CMD_WRITE, 0, 1, 0, 4, b"wxyz");
    assert_eq!(c.reply(), Some((0, 1)));
    let _stuck = stuck_client(&srv.sock, 64);
    thread::sleep(Duration::from_millis(300));
    let before = export.flushes.load(Ordering::SeqCst);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut srv = srv;
    let handle = srv.handle.clone();
    let t = srv.thread.take().unwrap();
    thread::spawn(move || {
        handle.shutdown();
        tx.send(t.join().unwrap().is_ok()).unwrap();
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the server did not stop"
    );
    assert!(
        export.flushes.load(Ordering::SeqCst) > before,
        "flushed at the end"
    );
    assert_eq!(&export.snapshot()[..4], b"wxyz");
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    // Its blocked replies hold the whole payload budget until the write timeout ends its
    // connection; then another client is served.
    let export = MemExport::new(vec![2; 8 << 20], 512, false);
    let srv = start(
        export,
        ServerConfig {
            payload_budget: 4 << 20,
            write_timeout: Duration::from_millis(300),
            ..quiet()
        },
    );
    let mut stuck = stuck_client(&srv.sock, 64);
    thread::sleep(Duration::from_millis(100));
    let mut c = Raw::go(&srv.sock);
    assert_eq!(c.read(1, 0, 4096), vec![2; 4096]);
    // The stuck connection was closed by the server.
    stuck
        .s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = Vec::new();
    assert!(
        stuck.s.read_to_end(&mut sink).is_ok(),
        "closed, not timed out"
    );
    srv.stop();
}
