//! Many exports behind one server: what each client may see (NBD_OPT_LIST through
//! `nbdinfo --list`) and use (by name, through nbdinfo, qemu-img and qemu-io), by its Unix
//! credentials (a client run as another user with `setpriv`) and by its TLS certificate's
//! subject (a second client certificate from the same authority); and an export whose
//! store stalls holding up no other export's clients.

use crate::support::raw::info_request;
use crate::support::{quiet, start_exports, Raw};
use crate::support::{MemExport, SlowExport};
use sectorcrypt_nbd::tls::ServerTls;
use sectorcrypt_nbd::{
    proto, Access, Export, ExportTable, Exports, Found, Listing, Peer, ServerConfig,
};
use sectorcrypt_testkit::tls::make_certificates;
use sectorcrypt_testkit::{pattern, require, require_openssl, run, run_stdout};
use std::io;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The user other clients run as (nobody).
const OTHER_UID: u32 = 65534;

/// The names `nbdinfo --list --json` shows for `uri`, run as root or, with `as_other`,
/// as [`OTHER_UID`].
fn listed(uri: &str, as_other: bool) -> Vec<String> {
    let out = nbdinfo(&["--list", "--json", uri], as_other);
    assert!(out.status.success(), "nbdinfo --list {uri}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["exports"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|e| e["export-name"].as_str().unwrap().to_string())
        .collect()
}

/// nbdinfo with `args`, as root or as [`OTHER_UID`] (its groups cleared).
fn nbdinfo(args: &[&str], as_other: bool) -> Output {
    let mut c = if as_other {
        let mut c = Command::new("setpriv");
        let id = OTHER_UID.to_string();
        c.args(["--reuid", &id, "--regid", &id, "--clear-groups", "nbdinfo"]);
        c
    } else {
        Command::new("nbdinfo")
    };
    c.env("LIBNBD_DEBUG", "1").args(args).output().unwrap()
}

/// Whether the tests run as root (needed to run a client as another user).
fn root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    })
}

fn uids(list: &[u32]) -> Access {
    Access {
        uids: Some(list.to_vec()),
        ..Access::default()
    }
}

/// The tests' configuration, with a socket every user may connect to (the access lists
/// decide).
fn open_socket() -> ServerConfig {
    ServerConfig {
        socket_mode: 0o666,
        ..quiet()
    }
}

#[test]
fn nbdinfo_lists_exactly_the_exports_a_unix_user_may_see_and_opens_no_other() {
    require!("nbdinfo");
    require!("setpriv");
    if !root() {
        sectorcrypt_testkit::skip("skipped: running a client as another user needs root");
        return;
    }
    let mut t = ExportTable::new();
    let exports = [
        ("public", Access::everyone(), 1 << 20),
        ("roots", uids(&[0]), 2 << 20),
        ("nobodys", uids(&[OTHER_UID]), 3 << 20),
        (
            "by-group",
            Access {
                gids: Some(vec![OTHER_UID]),
                ..Access::default()
            },
            4 << 20,
        ),
    ];
    for (name, access, size) in &exports {
        let e = MemExport::new(vec![0; *size], 512, false);
        t.add(name, None, e, access.clone()).unwrap();
    }
    let srv = start_exports(Arc::new(t), open_socket());
    assert_eq!(listed(&srv.uri(), false), ["public", "roots"]);
    assert_eq!(listed(&srv.uri(), true), ["public", "nobodys", "by-group"]);

    // By name: each user opens what it sees, at its own size; the other user's export is
    // refused as if it did not exist.
    let size = |name: &str, as_other: bool| {
        let out = nbdinfo(&["--size", &srv.uri_of(name)], as_other);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    assert_eq!(size("roots", false).as_deref(), Some("2097152"));
    assert_eq!(size("nobodys", true).as_deref(), Some("3145728"));
    assert_eq!(size("by-group", true).as_deref(), Some("4194304"));
    assert_eq!(size("public", true).as_deref(), Some("1048576"));
    let refused = nbdinfo(&["--size", &srv.uri_of("roots")], true);
    let unknown = nbdinfo(&["--size", &srv.uri_of("no-such")], true);
    for out in [&refused, &unknown] {
        assert!(!out.status.success(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("server error message: no such export"),
            "{err}"
        );
    }
    assert_eq!(size("nobodys", false), None);
    // Several exports: the default name "" is none of them.
    assert_eq!(size("", false), None);
    srv.stop();
}

#[test]
fn qemu_img_and_qemu_io_reach_each_export_by_its_name() {
    require!("qemu-img");
    require!("qemu-io");
    let mut t = ExportTable::new();
    let mut data = Vec::new();
    for (i, name) in ["first", "second", "third"].iter().enumerate() {
        let size = (i + 1) << 20;
        let e = MemExport::new(pattern(size, 40 + i as u64), 512, false);
        data.push(e.clone());
        t.add(name, Some(format!("disk {i}")), e, Access::everyone())
            .unwrap();
    }
    let srv = start_exports(Arc::new(t), quiet());
    for (i, name) in ["first", "second", "third"].iter().enumerate() {
        let uri = srv.uri_of(name);
        let info = run_stdout(Command::new("qemu-img").args(["info", "--output=json", &uri]));
        let v: serde_json::Value = serde_json::from_str(&info).unwrap();
        assert_eq!(v["virtual-size"], ((i + 1) << 20) as u64, "{name}: {v}");
        // Write a byte pattern through qemu-io and read it back; only this export
        // changes.
        let p = 0x61 + i as u8;
        run(Command::new("qemu-io").args([
            "-f",
            "raw",
            "-c",
            &format!("write -P {p} 4096 8192"),
            &uri,
        ]));
        let out = run_stdout(Command::new("qemu-io").args([
            "-f",
            "raw",
            "-c",
            &format!("read -P {p} 4096 8192"),
            &uri,
        ]));
        assert!(!out.contains("Pattern verification failed"), "{out}");
    }
    for (i, e) in data.iter().enumerate() {
        let mut want = pattern((i + 1) << 20, 40 + i as u64);
        want[4096..4096 + 8192].fill(0x61 + i as u8);
        assert!(e.snapshot() == want, "export {i} holds other data");
    }
    srv.stop();
}

/// A table that records every peer it is asked about.
struct Recording {
    table: ExportTable,
    peers: Mutex<Vec<Peer>>,
}

impl Exports for Recording {
    fn list(&self, peer: &Peer) -> Vec<Listing> {
        self.peers.lock().unwrap().push(peer.clone());
        self.table.list(peer)
    }
    fn lookup(&self, name: &str, peer: &Peer) -> Option<Found> {
        self.peers.lock().unwrap().push(peer.clone());
        self.table.lookup(name, peer)
    }
}

/// `openssl x509 -noout -subject -nameopt RFC2253` of `cert`, without `subject=`.
fn openssl_subject(cert: &Path) -> String {
    let out = run_stdout(
        Command::new("openssl")
            .args(["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in"])
            .arg(cert),
    );
    out.trim()
        .strip_prefix("subject=")
        .unwrap_or_else(|| panic!("{out}"))
        .to_string()
}

/// A second client's certificates directory beside `certs` (the same authority), its
/// certificate's subject `subject` (openssl's `-subj` form).
fn other_client(certs: &Path, subject: &str) -> std::path::PathBuf {
    let dir = certs.with_file_name("other");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(certs.join("ca-cert.pem"), dir.join("ca-cert.pem")).unwrap();
    let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(&dir).args(args));
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        "client-key.pem",
    ]);
    std::fs::write(
        dir.join("ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
         extendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(&[
        "req",
        "-new",
        "-key",
        "client-key.pem",
        "-subj",
        subject,
        "-out",
        "client.csr",
    ]);
    let ca_cert = certs.join("ca-cert.pem");
    let ca_key = certs.join("ca-key.pem");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        ca_cert.to_str().unwrap(),
        "-CAkey",
        ca_key.to_str().unwrap(),
        "-set_serial",
        "9",
        "-days",
        "30",
        "-extfile",
        "ext",
        "-out",
        "client-cert.pem",
    ]);
    dir
}

#[test]
fn a_tls_client_sees_and_opens_only_the_exports_its_certificate_subject_is_allowed() {
    require!("nbdinfo");
    require_openssl!();
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    make_certificates(&certs, "sectorcrypt test CA");
    // A subject with characters RFC 4514 escapes, and several RDNs.
    let intruder = other_client(&certs, "/C=DE/O=Acme, Inc./OU=ops+CN=in;truder");
    let allowed = openssl_subject(&certs.join("client-cert.pem"));
    let intruder_subject = openssl_subject(&intruder.join("client-cert.pem"));
    assert_eq!(allowed, "CN=sectorcrypt test client");

    let mut t = ExportTable::new();
    let backup = Access {
        tls_subjects: Some(vec![allowed.clone()]),
        ..Access::default()
    };
    let e = MemExport::new(vec![0; 1 << 20], 512, false);
    t.add("open", None, e, Access::everyone()).unwrap();
    let e = MemExport::new(vec![0; 2 << 20], 512, false);
    t.add("backup", None, e, backup).unwrap();
    let table = Arc::new(Recording {
        table: t,
        peers: Mutex::default(),
    });
    let config = ServerConfig {
        tls: Some(ServerTls::from_dir(&certs, true, true).unwrap()),
        ..quiet()
    };
    let srv = start_exports(table.clone(), config);
    let uri = |name: &str, certs: &Path| {
        format!(
            "nbds+unix:///{name}?socket={}&tls-certificates={}",
            srv.sock.display(),
            certs.display()
        )
    };
    let list = |certs: &Path| {
        let out = nbdinfo(&["--list", "--json", &uri("", certs)], false);
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["exports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["export-name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(list(&certs), ["open", "backup"]);
    assert_eq!(list(&intruder), ["open"]);
    let size = |name: &str, certs: &Path| nbdinfo(&["--size", &uri(name, certs)], false);
    let ok = size("backup", &certs);
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "2097152");
    let refused = size("backup", &intruder);
    assert!(!refused.status.success(), "{refused:?}");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("server error message: no such export"),
        "{err}"
    );
    assert!(size("open", &intruder).status.success());

    // The server read each certificate's subject as openssl writes it in RFC 2253 form.
    let seen: Vec<String> = table
        .peers
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.tls_subject.clone())
        .collect();
    assert!(seen.contains(&allowed), "{seen:?}");
    assert!(seen.contains(&intruder_subject), "{seen:?}");
    assert_eq!(
        intruder_subject, "CN=in\\;truder+OU=ops,O=Acme\\, Inc.,C=DE",
        "openssl's form"
    );
    srv.stop();
}

/// An export whose reads and flushes block until released, and which says when one is
/// blocked.
#[derive(Default)]
struct Stalled {
    released: Mutex<bool>,
    changed: Condvar,
    blocked: AtomicBool,
}

impl Stalled {
    fn wait(&self) {
        self.blocked.store(true, Ordering::SeqCst);
        let mut r = self.released.lock().unwrap();
        // Bounded: a test that forgets to release fails instead of hanging.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !*r && Instant::now() < deadline {
            r = self
                .changed
                .wait_timeout(r, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }

    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.changed.notify_all();
    }
}

impl Export for Stalled {
    fn size(&self) -> u64 {
        1 << 20
    }
    fn preferred_block_size(&self) -> u32 {
        512
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_at(&self, buf: &mut [u8], _: u64) -> io::Result<()> {
        self.wait();
        buf.fill(0x77);
        Ok(())
    }
    fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.wait();
        Ok(())
    }
}

#[test]
fn an_export_whose_store_stalls_holds_up_only_its_own_clients() {
    let stalled = Arc::new(Stalled::default());
    let fine = SlowExport::new(1 << 20);
    let mut t = ExportTable::new();
    t.add("stalled", None, stalled.clone(), Access::everyone())
        .unwrap();
    t.add("fine", None, fine, Access::everyone()).unwrap();
    let srv = start_exports(Arc::new(t), quiet());

    // Clients of the stalled export: reads and a flush that do not come back.
    let mut stuck: Vec<Raw> = (0..4).map(|_| Raw::go_to(&srv.sock, "stalled")).collect();
    for c in &mut stuck {
        c.request(proto::CMD_READ, 0, 1, 0, 4096, &[]);
        c.request(proto::CMD_FLUSH, 0, 2, 0, 0, &[]);
    }
    let t0 = Instant::now();
    while !stalled.blocked.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never reached the export"
        );
        thread::sleep(Duration::from_millis(5));
    }

    // A new client of the other export: listed, read, written and flushed in time (its
    // flush waits for no flush of the stalled export).
    let t1 = Instant::now();
    let mut r = Raw::handshake(&srv.sock);
    r.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let list = r.option(proto::OPT_LIST, &[]);
    assert_eq!(list.len(), 3, "two names and the ACK");
    let go = r.option(proto::OPT_GO, &info_request("fine"));
    assert_eq!(go.last().unwrap().0, proto::REP_ACK);
    for cookie in 0..5u64 {
        let d = r.read(cookie, cookie * 4096, 4096);
        assert!(d
            .iter()
            .enumerate()
            .all(|(i, &b)| b == ((cookie * 4096 + i as u64) % 251) as u8));
    }
    r.request(proto::CMD_WRITE, 0, 10, 0, 4096, &[1; 4096]);
    assert_eq!(r.reply(), Some((0, 10)));
    r.request(proto::CMD_FLUSH, 0, 11, 0, 0, &[]);
    assert_eq!(r.reply(), Some((0, 11)));
    let took = t1.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the other export's client took {took:?}"
    );
    // The stalled export's clients are still waiting.
    stuck[0]
        .s
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut b = [0u8; 1];
    assert!(
        io::Read::read(&mut stuck[0].s, &mut b).is_err(),
        "a reply came"
    );
    stuck[0]
        .s
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();

    // Released, they are answered.
    stalled.release();
    for c in &mut stuck {
        for _ in 0..2 {
            let (error, cookie) = c.reply().unwrap();
            assert_eq!(error, 0);
            if cookie == 1 {
                assert_eq!(c.data(4096), vec![0x77; 4096]);
            }
        }
    }
    drop(stuck);
    srv.stop();
}

#[test]
fn an_export_takes_at_most_its_share_of_the_slots_so_a_stall_leaves_room_for_others() {
    let stalled = Arc::new(Stalled::default());
    let fine = MemExport::new(vec![0x3c; 1 << 20], 512, false);
    let mut t = ExportTable::new();
    t.add("stalled", None, stalled.clone(), Access::everyone())
        .unwrap();
    t.add("fine", None, fine, Access::everyone()).unwrap();
    let config = ServerConfig {
        max_connections: 4,
        max_connections_per_export: 2,
        ..quiet()
    };
    let srv = start_exports(Arc::new(t), config);
    let mut stuck: Vec<Raw> = (0..2).map(|_| Raw::go_to(&srv.sock, "stalled")).collect();
    for c in &mut stuck {
        c.request(proto::CMD_READ, 0, 1, 0, 4096, &[]);
    }
    let t0 = Instant::now();
    while !stalled.blocked.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never reached the export"
        );
        thread::sleep(Duration::from_millis(5));
    }
    // A third client of the stalled export is refused, and says why.
    let mut third = Raw::handshake(&srv.sock);
    let refused = third.option(proto::OPT_GO, &info_request("stalled"));
    assert_eq!(refused[0].0, proto::REP_ERR_POLICY);
    let msg = String::from_utf8_lossy(&refused[0].1).to_string();
    assert!(msg.starts_with("export busy"), "{msg}");
    // The other export's clients get the slots left.
    let mut others = Vec::new();
    for _ in 0..2 {
        let mut c = Raw::go_to(&srv.sock, "fine");
        assert_eq!(c.read(5, 0, 4096), vec![0x3c; 4096]);
        others.push(c);
    }
    stalled.release();
    for c in &mut stuck {
        assert_eq!(c.reply(), Some((0, 1)));
        assert_eq!(c.data(4096), vec![0x77; 4096]);
    }
    drop((stuck, others));
    srv.stop();
}

/// A writable export of zeros (writes are dropped) that counts its flushes in a counter
/// the test keeps.
struct Counting {
    flushes: Arc<AtomicU64>,
}

impl Export for Counting {
    fn size(&self) -> u64 {
        1 << 20
    }
    fn preferred_block_size(&self) -> u32 {
        512
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_at(&self, buf: &mut [u8], _: u64) -> io::Result<()> {
        buf.fill(0);
        Ok(())
    }
    fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A table of one export that can be taken out of it.
struct Removable {
    export: Mutex<Option<Arc<dyn Export>>>,
}

impl Exports for Removable {
    fn list(&self, _: &Peer) -> Vec<Listing> {
        let export = self.export.lock().unwrap();
        export
            .iter()
            .map(|_| Listing {
                name: "going".into(),
                description: None,
            })
            .collect()
    }
    fn lookup(&self, name: &str, _: &Peer) -> Option<Found> {
        let export = self.export.lock().unwrap().clone()?;
        (name == "going").then(|| Found {
            name: name.into(),
            description: None,
            export,
        })
    }
}

#[test]
fn an_export_its_table_lets_go_is_flushed_and_closed_when_its_last_client_leaves() {
    let flushes = Arc::new(AtomicU64::new(0));
    let export: Arc<dyn Export> = Arc::new(Counting {
        flushes: flushes.clone(),
    });
    let weak = Arc::downgrade(&export);
    let table = Arc::new(Removable {
        export: Mutex::new(Some(export)),
    });
    let srv = start_exports(table.clone(), quiet());
    let mut a = Raw::go_to(&srv.sock, "going");
    let mut b = Raw::go_to(&srv.sock, "going");
    a.request(proto::CMD_WRITE, 0, 1, 0, 512, &[9; 512]);
    assert_eq!(a.reply(), Some((0, 1)));
    // Taken out of the table: new clients do not find it; the connected ones go on.
    *table.export.lock().unwrap() = None;
    let mut c = Raw::handshake(&srv.sock);
    let gone = c.option(proto::OPT_GO, &info_request("going"));
    assert_eq!(gone[0].0, proto::REP_ERR_UNKNOWN);
    assert_eq!(b.read(2, 0, 512), vec![0; 512]);
    drop(a);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(
        flushes.load(Ordering::SeqCst),
        0,
        "a client is still connected"
    );
    assert!(weak.strong_count() > 0);
    b.request(proto::CMD_DISC, 0, 3, 0, 0, &[]);
    assert_eq!(b.reply(), None);
    // Once the last client has left, the export is flushed and let go, without the
    // server stopping.
    let t0 = Instant::now();
    while weak.strong_count() > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the export is still held"
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(flushes.load(Ordering::SeqCst), 1);
    srv.stop();
}

/// What an [`Observer`](sectorcrypt_nbd::Observer) was told, one line each.
#[derive(Debug, Default)]
struct Told(Mutex<Vec<String>>);

impl sectorcrypt_nbd::Observer for Told {
    fn message(&self, line: std::fmt::Arguments<'_>) {
        self.0.lock().unwrap().push(format!("message {line}"));
    }
    fn connected(&self, c: &sectorcrypt_nbd::Connection<'_>) {
        let uid = c.peer.credentials.map(|c| c.uid);
        self.0.lock().unwrap().push(format!(
            "connect {} {} uid {uid:?} tls {}",
            c.id, c.export, c.tls
        ));
    }
    fn disconnected(&self, c: &sectorcrypt_nbd::Connection<'_>, error: Option<&io::Error>) {
        self.0.lock().unwrap().push(format!(
            "disconnect {} {} error {}",
            c.id,
            c.export,
            error.is_some()
        ));
    }
}

#[test]
fn the_observer_is_told_of_each_transmission_and_gets_the_log_lines() {
    require!("nbdinfo");
    let told = Arc::new(Told::default());
    let mut t = ExportTable::new();
    for name in ["a", "b"] {
        let e = MemExport::new(vec![0; 1 << 20], 512, false);
        t.add(name, None, e, Access::everyone()).unwrap();
    }
    let config = ServerConfig {
        log: true,
        observer: Some(told.clone()),
        ..quiet()
    };
    let srv = start_exports(Arc::new(t), config);
    // A listing has no transmission phase: no connect.
    assert_eq!(listed(&srv.uri(), false), ["a", "b"]);
    let out = nbdinfo(&["--size", &srv.uri_of("b")], false);
    assert!(out.status.success(), "{out:?}");
    let me = run_stdout(Command::new("id").arg("-u"));
    let t0 = Instant::now();
    let seen = loop {
        let seen = told.0.lock().unwrap().clone();
        if seen.iter().any(|l| l.starts_with("disconnect")) {
            break seen;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{seen:#?}");
        thread::sleep(Duration::from_millis(10));
    };
    let events: Vec<&String> = seen.iter().filter(|l| !l.starts_with("message")).collect();
    assert_eq!(events.len(), 2, "{seen:#?}");
    let id = events[0].split(' ').nth(1).unwrap();
    assert_eq!(
        events[0],
        &format!("connect {id} b uid Some({}) tls false", me.trim())
    );
    assert_eq!(events[1], &format!("disconnect {id} b error false"));
    // The server's lines went to the observer.
    assert!(
        seen.iter().any(|l| l.starts_with(&format!(
            "message connection {id}: transmission on export \"b\""
        ))),
        "{seen:#?}"
    );
    srv.stop();
}
