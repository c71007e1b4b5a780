//! GELI-only verbs and the `sectorcrypt geli VERB` front: `resize` (geli resize -s
//! oldsize) moves the metadata of a grown image to its new last sector, checked with the
//! independent model (`tests/geli_ref.py`) where it can run; geli(8)'s own command lines
//! run as a FreeBSD user types them.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;
#[macro_use]
#[path = "support/geli.rs"]
mod geli;

use openssl::hash::{hash, MessageDigest};
use sectorcrypt_testkit::{pattern, require, run_stdout};
use std::path::{Path, PathBuf};
use support::{code, ok, s, sc};

fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |a, &x| (a << 8) | u64::from(x))
}

/// The 512-byte sector of `img` ending at byte `end`.
fn sector_at(img: &Path, end: u64) -> Vec<u8> {
    let b = std::fs::read(img).unwrap();
    b[end as usize - 512..end as usize].to_vec()
}

/// Checks `sector` holds GELI metadata with a correct MD5; its provider size.
fn provsize(sector: &[u8]) -> u64 {
    assert_eq!(&sector[..10], b"GEOM::ELI\0");
    let md5 = hash(MessageDigest::md5(), &sector[..495]).unwrap();
    assert_eq!(&md5[..], &sector[495..511], "the stored MD5");
    le(&sector[30..38])
}

fn grow(img: &Path, size: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(img)
        .unwrap()
        .set_len(size)
        .unwrap();
}

const K: u64 = 1024;

#[test]
fn resize_moves_the_metadata_to_the_new_last_sector_and_zeroes_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"resize me");
    let img = dir.path().join("grow.img");
    let key = ["--key-file", s(&pass)];
    ok(sc(
        &[
            &["format", s(&img), "--type", "geli", "--size", "256K", "-q"][..],
            &["--pbkdf-force-iterations", "0"],
            &key,
        ]
        .concat(),
        b"",
    ));
    let data = geli::body(200 * K as usize, 7);
    let input = file(dir.path(), "in", &data);
    ok(sc(
        &[&["write", s(&img), "--input", s(&input)][..], &key].concat(),
        b"",
    ));
    let old_md = sector_at(&img, 256 * K);
    grow(&img, 1024 * K);
    let before = std::fs::read(&img).unwrap();

    // Refusals write nothing (exit 2): a wrong old size, an old size beyond the image, the
    // same size, a provider size at the old sector that is not the old size.
    for bad in ["255K", "128K", "2M", "1M", "0"] {
        let out = sc(&["resize", s(&img), "--old-size", bad], b"");
        assert_eq!(code(&out), 2, "--old-size {bad}: {out:?}");
        assert_eq!(std::fs::read(&img).unwrap(), before, "--old-size {bad}");
    }
    let mut wrong = before.clone();
    wrong[256 * K as usize - 512 + 30] ^= 1;
    let md5 = hash(
        MessageDigest::md5(),
        &wrong[256 * K as usize - 512..][..495],
    )
    .unwrap();
    wrong[256 * K as usize - 512 + 495..][..16].copy_from_slice(&md5);
    let mismatched = file(dir.path(), "mismatch.img", &wrong);
    let out = sc(&["resize", s(&mismatched), "--old-size", "256K"], b"");
    assert_eq!(code(&out), 2, "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mismatch"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&mismatched).unwrap(), wrong);

    let out = ok(sc(&["resize", s(&img), "--old-size", "256K"], b""));
    assert!(out.contains("1048576"), "{out}");
    let new_md = sector_at(&img, 1024 * K);
    assert_eq!(provsize(&new_md), 1024 * K);
    // The metadata moved whole but for provsize and the MD5.
    assert_eq!(new_md[..30], old_md[..30]);
    assert_eq!(new_md[38..495], old_md[38..495]);
    assert_eq!(
        sector_at(&img, 256 * K),
        vec![0u8; 512],
        "old sector zeroed"
    );
    let after = std::fs::read(&img).unwrap();
    assert_eq!(
        after[..255 * K as usize],
        before[..255 * K as usize],
        "data untouched"
    );

    let back = dir.path().join("back");
    ok(sc(
        &[
            &["read", s(&img), "--length", "204800", "--output", s(&back)][..],
            &key,
        ]
        .concat(),
        b"",
    ));
    assert_eq!(std::fs::read(&back).unwrap(), data);
    let dump = ok(sc(&["dump", s(&img), "--json"], b""));
    let v: serde_json::Value = serde_json::from_str(&dump).unwrap();
    assert_eq!(v["provsize"], 1024 * K);

    if let Some(why) = geli::model_missing() {
        eprintln!("model check skipped: {why}");
    } else {
        let plain = geli::model_decrypt(&img, &pass, dir.path());
        assert_eq!(
            plain.len() as u64,
            1024 * K - 512,
            "the model sees the grown provider"
        );
        assert_eq!(plain[..data.len()], data[..], "the model reads the data");
    }
}

#[test]
fn resize_refuses_luks_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"luks");
    let img = dir.path().join("luks.img");
    ok(sc(
        &[
            "format",
            s(&img),
            "--type",
            "luks1",
            "--size",
            "4M",
            "--key-file",
            s(&pass),
            "--pbkdf-force-iterations",
            "1000",
            "-q",
        ],
        b"",
    ));
    grow(&img, 8 * 1024 * K);
    let before = std::fs::read(&img).unwrap();
    let out = sc(&["resize", s(&img), "--old-size", "4M"], b"");
    assert_eq!(code(&out), 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("resize is for GELI"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&img).unwrap(), before);
}

/// `sectorcrypt geli ARGS`.
fn geli(args: &[&str]) -> std::process::Output {
    sc(&[&["geli"][..], args].concat(), b"")
}

fn test_key(img: &Path, pass: &Path) -> i32 {
    let out = sc(&["test-key", s(img), "--key-file", s(pass)], b"");
    eprintln!("test-key: {}", String::from_utf8_lossy(&out.stderr));
    code(&out)
}

#[test]
fn a_freebsd_session_runs_as_typed() {
    let dir = tempfile::tempdir().unwrap();
    // geli passfiles count up to their first newline: "echo secret > pass" is "secret".
    let pass = file(dir.path(), "pass", b"secret\n");
    let bare = file(dir.path(), "bare", b"secret");
    let new = file(dir.path(), "new", b"fresh\nignored");
    let new_bare = file(dir.path(), "new_bare", b"fresh");
    let img = file(dir.path(), "disk.img", &vec![0u8; 1024 * K as usize]);
    let init_bk = dir.path().join("init.eli");
    let out = ok(geli(&[
        "init",
        "-J",
        s(&pass),
        "-s",
        "4096",
        "-i",
        "0",
        "-B",
        s(&init_bk),
        s(&img),
    ]));
    assert!(out.contains("geli restore"), "{out}");
    assert_eq!(test_key(&img, &bare), 0, "the passphrase is the first line");
    let raw = std::fs::read(&img).unwrap();
    assert_eq!(std::fs::read(&init_bk).unwrap(), raw[raw.len() - 512..]);
    let dump = ok(geli(&["dump", s(&img)]));
    assert!(
        dump.contains("sectorsize") && dump.contains("4096"),
        "{dump}"
    );

    let bk = dir.path().join("disk.eli");
    ok(geli(&["backup", "-v", s(&img), s(&bk)]));
    assert_eq!(std::fs::read(&bk).unwrap(), raw[raw.len() - 512..]);
    ok(geli(&["setkey", "-j", s(&pass), "-J", s(&new), s(&img)]));
    assert_eq!(test_key(&img, &new_bare), 0);
    assert_eq!(test_key(&img, &bare), 3);
    assert_eq!(code(&geli(&["attach", "-C", "-j", s(&new), s(&img)])), 0);
    assert_eq!(code(&geli(&["attach", "-C", "-j", s(&pass), s(&img)])), 3);

    // setkey -n 1 fills the other slot; delkey needs no passphrase, keeps the last slot
    // unless -f.
    ok(geli(&[
        "setkey",
        "-n",
        "1",
        "-j",
        s(&new),
        "-J",
        s(&pass),
        s(&img),
    ]));
    assert_eq!(test_key(&img, &bare), 0);
    ok(geli(&["delkey", "-n", "0", s(&img)]));
    assert_eq!(test_key(&img, &new_bare), 3);
    let before = std::fs::read(&img).unwrap();
    assert_eq!(
        code(&geli(&["delkey", "-n", "1", s(&img)])),
        2,
        "the last key"
    );
    assert_eq!(code(&geli(&["delkey", "-n", "0", s(&img)])), 2, "not set");
    assert_eq!(std::fs::read(&img).unwrap(), before);

    ok(geli(&["kill", s(&img)]));
    assert_eq!(test_key(&img, &bare), 2, "no metadata after kill");
    ok(geli(&["restore", s(&bk), s(&img)]));
    assert_eq!(
        std::fs::read(&img).unwrap()[raw.len() - 512..],
        raw[raw.len() - 512..]
    );
    assert_eq!(test_key(&img, &bare), 0, "the backup's key");

    // A provider of another size: restore refuses without -f; -f writes the new size.
    grow(&img, 2048 * K);
    let grown = std::fs::read(&img).unwrap();
    assert_eq!(code(&geli(&["restore", s(&bk), s(&img)])), 2);
    assert_eq!(std::fs::read(&img).unwrap(), grown);
    ok(geli(&["restore", "-f", s(&bk), s(&img)]));
    assert_eq!(provsize(&sector_at(&img, 2048 * K)), 2048 * K);
    assert_eq!(test_key(&img, &bare), 0);
    // resize -s: the metadata follows the provider.
    grow(&img, 4096 * K);
    ok(geli(&["resize", "-s", "2097152", s(&img)]));
    assert_eq!(provsize(&sector_at(&img, 4096 * K)), 4096 * K);
    assert_eq!(sector_at(&img, 2048 * K), vec![0u8; 512]);
    // delkey -a: both slots gone, no -f needed, no passphrase asked.
    ok(geli(&["delkey", "-a", s(&img)]));
    assert_eq!(sector_at(&img, 4096 * K)[42], 0, "md_keys");
    assert_ne!(test_key(&img, &bare), 0);

    let v = ok(geli(&["version"]));
    assert!(v.contains("versions 0 to 7"), "{v}");
    assert_eq!(
        ok(geli(&["version", s(&img)])).trim_end(),
        format!("{}: 7", s(&img))
    );
    // init -a: an authenticated provider; an HMAC geli knows but sectorcrypt does not
    // (HMAC/MD5) is refused with nothing written.
    let fresh = file(dir.path(), "auth.img", &vec![0u8; 256 * K as usize]);
    let out = geli(&[
        "init",
        "-a",
        "hmac/md5",
        "-i",
        "0",
        "-J",
        s(&pass),
        s(&fresh),
    ]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown GELI authentication"));
    assert_eq!(std::fs::read(&fresh).unwrap(), vec![0u8; 256 * K as usize]);
    ok(geli(&[
        "init",
        "-a",
        "HMAC/SHA256",
        "-i",
        "0",
        "-J",
        s(&pass),
        s(&fresh),
    ]));
    let dump = ok(geli(&["dump", s(&fresh)]));
    assert!(dump.contains("aalgo:      HMAC/SHA256"), "{dump}");
}

#[test]
fn geli_help_teaches_the_flag_letters() {
    let help = ok(sc(&["geli", "--help"], b""));
    for want in [
        "geli init -J pass.txt",
        "attach",
        "NBD",
        "first newline",
        "resize -s",
    ] {
        assert!(help.contains(want), "{want:?} missing from:\n{help}");
    }
    let init = ok(sc(&["geli", "init", "--help"], b""));
    for flag in [
        "-a", "-b", "-B", "-d", "-e", "-g", "-i", "-J", "-K", "-l", "-P", "-R", "-s", "-T", "-V",
    ] {
        assert!(
            init.contains(&format!("{flag} ")),
            "{flag} missing from:\n{init}"
        );
    }
    let attach = ok(sc(&["geli", "attach", "--help"], b""));
    assert!(
        attach.contains("--socket") && attach.contains("--listen"),
        "{attach}"
    );
}

/// Copies `from` to `to` with nbdcopy (one of them an NBD URI), flushing.
fn nbdcopy(from: &str, to: &str) {
    run_stdout(std::process::Command::new("nbdcopy").args(["--flush", from, to]));
}

#[test]
fn attach_serves_the_provider_over_nbd_and_onetime_keeps_nothing() {
    require!("nbdcopy");
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"attach\n");
    let img = file(dir.path(), "disk.img", &vec![0u8; 1024 * K as usize]);
    ok(geli(&[
        "init",
        "-J",
        s(&pass),
        "-i",
        "0",
        "-l",
        "256",
        s(&img),
    ]));
    let plain = pattern(1024 * K as usize - 512, 3);
    let input = file(dir.path(), "in", &plain);
    let sock = dir.path().join("a.sock");
    let srv = served::Served::start_command(
        &[
            "geli",
            "attach",
            "-j",
            s(&pass),
            "--socket",
            s(&sock),
            s(&img),
        ],
        &sock,
    );
    nbdcopy(s(&input), &srv.uri());
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");
    let back = dir.path().join("back");
    let bare = file(dir.path(), "bare", b"attach");
    ok(sc(
        &[
            "read",
            s(&img),
            "--key-file",
            s(&bare),
            "--output",
            s(&back),
        ],
        b"",
    ));
    assert_eq!(std::fs::read(&back).unwrap(), plain);

    // onetime: the whole file is data under a key never stored; no metadata is written.
    let scratch = file(dir.path(), "swap.img", &vec![0u8; 512 * K as usize]);
    let data = pattern(512 * K as usize, 9);
    let input = file(dir.path(), "swap.in", &data);
    let sock = dir.path().join("o.sock");
    let srv = served::Served::start_command(
        &["geli", "onetime", "--socket", s(&sock), s(&scratch)],
        &sock,
    );
    nbdcopy(s(&input), &srv.uri());
    let out = dir.path().join("swap.out");
    nbdcopy(&srv.uri(), s(&out));
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");
    assert_eq!(std::fs::read(&out).unwrap(), data, "all of it is data");
    let raw = std::fs::read(&scratch).unwrap();
    assert_ne!(raw[raw.len() - 512..], data[data.len() - 512..]);
    assert!(!raw.windows(9).any(|w| w == b"GEOM::ELI"), "no metadata");
    assert_eq!(code(&sc(&["dump", s(&scratch)], b"")), 2);
}
