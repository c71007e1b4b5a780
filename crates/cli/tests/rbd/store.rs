//! The RBD store on a real cluster: what it reads and writes is what the `rbd` tool sees,
//! requests from many threads at once, flush, discard, the end of the image, snapshots;
//! the three formats formatted, written and read back through it (LUKS ones also decrypted
//! by librbd itself); `rbd encryption format` images unlocked through it.

use super::support::{ok, ok_bytes, s, sc};
use super::{dd_from_librbd, MIB};
use sectorcrypt_image::rbd::open_spec as open_rbd;
use sectorcrypt_testkit::ceph::Cluster;
use sectorcrypt_testkit::{pattern, require_ceph};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::geli::init::{init, InitOptions};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::KdfOptions;
use sectorcrypt_volume::luks::{format, FormatOptions, Version};
use sectorcrypt_volume::{FileStore, Header, Store};
use std::io::ErrorKind;
use std::path::Path;

fn exported(c: &Cluster, image: &str, dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join(format!("{}.raw", image.replace('/', "_")));
    c.rbd(&["export", "--no-progress", image, out.to_str().unwrap()]);
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    bytes
}

#[test]
fn rbd_store_io_matches_the_rbd_tool() {
    let c = require_ceph!();
    let dir = tempfile::tempdir().unwrap();
    c.rbd(&["create", "rbd/store", "--size", "24M"]);
    let spec = c.spec("rbd/store");
    let store = open_rbd(&spec, true).unwrap();
    assert_eq!(store.size().unwrap(), 24 * MIB);
    assert_eq!(store.object_size(), Some(4 * MIB));
    assert_eq!(store.name(), "rbd:rbd/store", "no options in the name");

    // Across an object boundary, then eight threads at once on distinct ranges.
    let a = pattern(2 * MIB as usize + 5, 1);
    store.write_at(&a, 3 * MIB).unwrap();
    std::thread::scope(|s| {
        for i in 0..8u64 {
            let store = &store;
            s.spawn(move || {
                let d = pattern(MIB as usize, 10 + i);
                store.write_at(&d, (12 + i) * MIB).unwrap();
                let mut back = vec![0u8; d.len()];
                store.read_at(&mut back, (12 + i) * MIB).unwrap();
                assert!(back == d, "thread {i}");
            });
        }
    });
    store.sync().unwrap();
    let mut back = vec![0u8; a.len()];
    store.read_at(&mut back, 3 * MIB).unwrap();
    assert!(back == a);
    let raw = exported(c, "rbd/store", dir.path());
    assert!(
        raw[3 * MIB as usize..][..a.len()] == a[..],
        "rbd export sees the write"
    );
    assert!(raw[15 * MIB as usize..16 * MIB as usize] == pattern(MIB as usize, 13)[..]);

    // The end: a read across it is refused whole, never short.
    let mut tail = vec![7u8; 8192];
    let e = store.read_at(&mut tail, 24 * MIB - 4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{e}");
    assert!(store.read_at(&mut tail[..4096], 24 * MIB - 4096).is_ok());

    // Discard: whole objects read back as zeros.
    store.discard(12 * MIB, 4 * MIB).unwrap();
    let mut z = vec![1u8; 4 * MIB as usize];
    store.read_at(&mut z, 12 * MIB).unwrap();
    assert!(z.iter().all(|&b| b == 0));

    // A snapshot keeps its bytes and is read-only.
    c.rbd(&["snap", "create", "rbd/store@s1"]);
    store.write_at(&pattern(4096, 99), 3 * MIB).unwrap();
    let snap = open_rbd(&c.spec("rbd/store@s1"), false).unwrap();
    let mut old = vec![0u8; 4096];
    snap.read_at(&mut old, 3 * MIB).unwrap();
    assert!(old == a[..4096]);
    let e = snap.write_at(&old, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    let f = open_rbd(&c.spec("rbd/store@s1"), true).unwrap_err();
    assert_eq!(f.exit_code(), 2, "{}", f.message());
    drop((store, snap));
    c.rbd(&["snap", "purge", "--no-progress", "rbd/store"]);
    c.rbd(&["rm", "--no-progress", "rbd/store"]);

    let missing = open_rbd(&c.spec("rbd/no-such-image"), false).unwrap_err();
    assert_eq!(missing.exit_code(), 2, "{}", missing.message());
    assert!(
        missing.message().contains("no-such-image"),
        "{}",
        missing.message()
    );
    let bad = open_rbd("rbd:no-pool-separator", false).unwrap_err();
    assert_eq!(bad.exit_code(), 2, "{}", bad.message());
}

/// A cluster that does not answer is an error (exit 1) within the mount timeout given as
/// an option of the spec (after the conf file, so it wins), not a hang.
#[test]
fn an_unreachable_cluster_fails_within_its_timeout() {
    let c = require_ceph!();
    let spec = format!(
        r"{}:mon_host=[v2\:127.0.0.1\:9]:client_mount_timeout=3",
        c.spec("rbd/anything")
    );
    let t = std::time::Instant::now();
    let e = open_rbd(&spec, false).unwrap_err();
    assert_eq!(e.exit_code(), 1, "{}", e.message());
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    assert!(!e.message().contains("mon_host"), "{}", e.message());
}

fn fast_pbkdf2() -> KdfOptions {
    KdfOptions {
        force_iterations: Some(1000),
        ..KdfOptions::pbkdf2(HashAlg::Sha256)
    }
}

fn engine(h: &Header, store: Box<dyn Store>, pass: &[u8]) -> Volume {
    let u = h.unlock(store.as_ref(), pass).unwrap();
    u.engine(store, EngineOptions::default()).unwrap()
}

/// LUKS2, LUKS1 and GELI formatted on an RBD image of 8 MiB objects (LUKS data aligned to
/// them by itself), written and read back through the store; the LUKS ones read by
/// librbd's own decryption too.
#[test]
fn three_formats_through_the_rbd_store() {
    let c = require_ceph!();
    let dir = tempfile::tempdir().unwrap();
    let pass = b"three formats";
    let key = dir.path().join("pass");
    std::fs::write(&key, pass).unwrap();
    for name in ["luks2", "luks1", "geli"] {
        let image = format!("rbd/three-{name}");
        c.rbd(&["create", &image, "--size", "40M", "--object-size", "8M"]);
        let spec = c.spec(&image);
        let store = open_rbd(&spec, true).unwrap();
        let data_offset = match name {
            "geli" => {
                let opts = InitOptions {
                    iterations: Some(1000),
                    ..InitOptions::default()
                };
                init(store.as_ref(), &opts, &[], pass)
                    .unwrap()
                    .1
                    .data_offset
            }
            _ => {
                let opts = FormatOptions {
                    version: if name == "luks1" {
                        Version::Luks1
                    } else {
                        Version::Luks2
                    },
                    sector_size: if name == "luks1" { 512 } else { 4096 },
                    kdf: fast_pbkdf2(),
                    ..FormatOptions::default()
                };
                format(store.as_ref(), &opts, pass, None)
                    .unwrap()
                    .1
                    .data_offset
            }
        };
        let expect = match name {
            "luks2" => 16 * MIB,
            "luks1" => 8 * MIB,
            _ => 0,
        };
        assert_eq!(data_offset, expect, "{name}: data aligned to the objects");
        let h = Header::read(store.as_ref()).unwrap();
        let vol = engine(&h, store, pass);
        let plain = pattern(vol.size() as usize, 30);
        vol.write_at(&plain, 0).unwrap();
        vol.flush().unwrap();
        drop(vol);

        let store = open_rbd(&spec, false).unwrap();
        let h = Header::read(store.as_ref()).unwrap();
        assert_eq!(h.name(), name);
        let vol = engine(&h, store, pass);
        let mut back = vec![0u8; plain.len()];
        vol.read_at(&mut back, 0).unwrap();
        assert!(back == plain, "{name}: read back through the store");
        if name != "geli" {
            let short = image.trim_start_matches("rbd/");
            if let Some(out) = dd_from_librbd(c, short, qemu_format(name), &key, dir.path()) {
                assert!(out == plain, "{name}: librbd's plaintext");
            }
        }
        c.rbd(&["rm", "--no-progress", &image]);
    }
}

fn qemu_format(luks: &str) -> &'static str {
    if luks == "luks1" {
        "luks"
    } else {
        "luks2"
    }
}

/// What `rbd encryption format` made, and librbd filled, unlocked through the store; the
/// same key reads the raw export `raw` of it too.
pub fn open_through_the_store(c: &Cluster, image: &str, pass: &[u8], plain: &[u8], raw: &Path) {
    let store = open_rbd(&c.spec(image), false).unwrap();
    let h = Header::read(store.as_ref()).unwrap();
    let u = h.unlock(store.as_ref(), pass).unwrap();
    let exported = Box::new(FileStore::open(raw, false).unwrap());
    for (what, store) in [("the rbd store", store), ("the raw export", exported as _)] {
        let vol = u.engine(store, EngineOptions::default()).unwrap();
        assert_eq!(vol.size(), plain.len() as u64);
        let mut back = vec![0u8; plain.len()];
        vol.read_at(&mut back, 0).unwrap();
        assert!(back == plain, "{image}: the plaintext through {what}");
    }
}

/// The commands take an `rbd:` spec as their image: `format` on an empty RBD image (its
/// size the image's, the data aligned to its objects), `write` and `read` through librbd,
/// `dump`, and `serve` as an encrypting NBD front of the image; the raw image that
/// `rbd export` gives holds ciphertext that opens here as a file.
#[test]
fn volume_commands_take_an_rbd_spec() {
    let c = require_ceph!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k = d.join("k");
    std::fs::write(&k, b"rbd commands").unwrap();
    c.rbd(&["create", "--size", "48M", "--object-size", "4M", "rbd/cmds"]);
    let spec = c.spec("rbd/cmds");
    let fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
    let key = ["--key-file", s(&k)];
    let args = [
        &["format", &spec, "--type", "luks2", "--batch"][..],
        &key,
        &fast,
    ]
    .concat();
    ok(sc(&args, b""));
    let dump = ok_bytes(sc(&["dump", &spec, "--json"], b""));
    let v: serde_json::Value = serde_json::from_slice(&dump).unwrap();
    let offset = v["segments"]["0"]["offset"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    assert_eq!(
        offset % (4 << 20),
        0,
        "data on an object boundary: {offset}"
    );
    let plain = pattern((48 << 20) - offset as usize, 33);
    let input = d.join("plain");
    std::fs::write(&input, &plain).unwrap();
    ok(sc(
        &[&["write", &spec, "--input", s(&input)][..], &key].concat(),
        b"",
    ));
    let back = ok_bytes(sc(&[&["read", &spec][..], &key].concat(), b""));
    assert!(back == plain, "read through rbd: gives what write stored");
    let raw = exported(c, "rbd/cmds", d);
    let file = d.join("raw.img");
    std::fs::write(&file, &raw).unwrap();
    assert!(!raw
        .windows(64)
        .any(|w| plain.windows(64).take(1).any(|p| p == w)));
    let from_file = ok_bytes(sc(&[&["read", s(&file)][..], &key].concat(), b""));
    assert!(
        from_file == plain,
        "the exported ciphertext opens as a file"
    );
    if sectorcrypt_testkit::have("nbdcopy") {
        let sock = d.join("rbd.sock");
        let srv = super::served::Served::start(&[&[&spec[..]][..], &key].concat(), &sock);
        let out = d.join("served");
        sectorcrypt_testkit::run_stdout(
            std::process::Command::new("nbdcopy").args([&srv.uri(), s(&out)]),
        );
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "{log}");
        assert!(std::fs::read(&out).unwrap() == plain, "served from rbd:");
        // Written through the server (writes librbd completes on its own threads, many
        // in flight on several connections), read back by another process.
        let other = pattern(plain.len(), 34);
        std::fs::write(&input, &other).unwrap();
        let srv = super::served::Served::start(&[&[&spec[..]][..], &key].concat(), &sock);
        sectorcrypt_testkit::run_stdout(
            std::process::Command::new("nbdcopy").args([s(&input), &srv.uri()]),
        );
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "{log}");
        let back = ok_bytes(sc(&[&["read", &spec][..], &key].concat(), b""));
        assert!(back == other, "written through the server over rbd:");
    } else {
        sectorcrypt_testkit::skipped!("the nbdcopy part skipped: nbdcopy is not installed");
    }
    c.rbd(&["rm", "--no-progress", "rbd/cmds"]);
}

/// `format` on an `rbd:` image of objects larger than LUKS2's default 16 MiB data offset
/// aligns the data to the image's objects by itself (the store's object size reaches the
/// format through the command's store wrappers).
#[test]
fn format_aligns_to_large_objects_of_an_rbd_spec() {
    let c = require_ceph!();
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("k");
    std::fs::write(&k, b"large objects").unwrap();
    c.rbd(&[
        "create",
        "--size",
        "96M",
        "--object-size",
        "32M",
        "rbd/large",
    ]);
    let spec = c.spec("rbd/large");
    let fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
    let args = [
        &[
            "format",
            &spec,
            "--type",
            "luks2",
            "--batch",
            "--key-file",
            s(&k),
        ][..],
        &fast,
    ]
    .concat();
    ok(sc(&args, b""));
    let dump = ok_bytes(sc(&["dump", &spec, "--json"], b""));
    let v: serde_json::Value = serde_json::from_slice(&dump).unwrap();
    let offset = v["segments"]["0"]["offset"].as_str().unwrap();
    assert_eq!(offset, (32 * MIB).to_string(), "the data offset");
}

#[test]
fn librbd_cache_is_off_unless_the_spec_turns_it_on() {
    let c = require_ceph!();
    c.rbd(&["create", "rbd/cached", "--size", "8M"]);
    let spec = c.spec("rbd/cached");
    // librbd's own default is on: what a client without our setting sees.
    assert_eq!(
        c.command("ceph-conf")
            .args(["--show-config-value", "rbd_cache"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap(),
        "true"
    );
    let open = |spec: &str| sectorcrypt_rbd::RbdStore::open_spec(spec, true).unwrap();
    assert_eq!(open(&spec).option("rbd_cache").unwrap(), "false");
    let on = open(&format!("{spec}:rbd_cache=true"));
    assert_eq!(on.option("rbd_cache").unwrap(), "true");
    // Either way, what is written is what the rbd tool reads once flushed.
    let d = pattern(MIB as usize, 40);
    on.write_at(&d, MIB).unwrap();
    on.sync().unwrap();
    drop(on);
    let dir = tempfile::tempdir().unwrap();
    assert!(exported(c, "rbd/cached", dir.path())[MIB as usize..][..d.len()] == d[..]);
}

/// Writes lend librbd the caller's buffer (no copy): the buffer must be free again when
/// `write_at` returns. Four threads write 1 MiB pieces, each from one buffer that is
/// overwritten with junk the moment a write returns and refilled for the next piece; had
/// librbd still been reading a buffer after its write returned, the junk would be on the
/// image. Then the same through started writes, whose buffers come back by callback.
#[test]
fn writes_lend_librbd_the_buffer_and_it_is_free_when_they_return() {
    let c = require_ceph!();
    c.rbd(&["create", "rbd/zerocopy", "--size", "32M"]);
    let spec = c.spec("rbd/zerocopy");
    let store = sectorcrypt_rbd::RbdStore::open_spec(&spec, true).unwrap();
    assert_eq!(
        store.option("rbd_disable_zero_copy_writes").unwrap(),
        "false"
    );
    let mib = MIB as usize;
    let want = pattern(32 * mib, 42);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (store, want) = (&store, &want);
            scope.spawn(move || {
                let mut buf = vec![0u8; mib];
                for piece in (t..32).step_by(4) {
                    let at = piece * mib;
                    buf.copy_from_slice(&want[at..at + mib]);
                    store.write_at(&buf, at as u64).unwrap();
                    buf.fill(0xee);
                }
            });
        }
    });
    // Started writes: 32 in flight from one thread, each buffer back through its callback
    // with the outcome; a read-only handle refuses through the callback too.
    let again = pattern(32 * mib, 43);
    let (tx, rx) = std::sync::mpsc::channel();
    for piece in 0..32 {
        let tx = tx.clone();
        let buf = again[piece * mib..][..mib].to_vec();
        let done = Box::new(move |buf: Vec<u8>, r| tx.send((piece, buf, r)).unwrap());
        store.start_write(buf, 0..mib, (piece * mib) as u64, done);
    }
    drop(tx);
    let mut back: Vec<_> = rx.iter().collect();
    back.sort_by_key(|(piece, ..)| *piece);
    assert_eq!(back.len(), 32);
    for (piece, buf, r) in back {
        r.unwrap();
        assert!(
            buf[..] == again[piece * mib..][..mib],
            "piece {piece} came back"
        );
    }
    drop(store);
    let dir = tempfile::tempdir().unwrap();
    assert!(exported(c, "rbd/zerocopy", dir.path()) == again);
    let ro = sectorcrypt_rbd::RbdStore::open_spec(&spec, false).unwrap();
    assert!(!ro.starts_writes());
    let (tx, rx) = std::sync::mpsc::channel();
    let done = Box::new(move |_: Vec<u8>, r: std::io::Result<()>| tx.send(r).unwrap());
    ro.start_write(vec![1; 512], 0..512, 0, done);
    assert_eq!(
        rx.recv().unwrap().unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}
