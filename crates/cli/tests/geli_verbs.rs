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
        sectorcrypt_testkit::skipped!("model check skipped: {why}");
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
        "-B",
        "none",
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
    let bare = file(dir.path(), "bare", b"attach");
    assert_eq!(plaintext(&img, &bare), plain);

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

/// The metadata sector of `img` (512-byte provider sectors) with its flags set to `flags`
/// and its MD5 recomputed: what geli's `eli_metadata_store` writes after `configure`.
fn with_flags(sector: &[u8], flags: u32) -> Vec<u8> {
    let mut want = sector.to_vec();
    want[20..24].copy_from_slice(&flags.to_le_bytes());
    let md5 = hash(MessageDigest::md5(), &want[..495]).unwrap();
    want[495..511].copy_from_slice(&md5);
    want
}

fn flags_of(sector: &[u8]) -> u32 {
    le(&sector[20..24]) as u32
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The whole plaintext of `img`, read with the passphrase file `pass`.
fn plaintext(img: &Path, pass: &Path) -> Vec<u8> {
    support::ok_bytes(sc(&["read", s(img), "--key-file", s(pass)], b""))
}

/// `sectorcrypt geli VERB -J PASS -i 0 -B none IMG` (VERB: init or label), which must
/// succeed.
fn init_quick(verb: &str, pass: &Path, img: &Path) {
    ok(geli(&[
        verb,
        "-J",
        s(pass),
        "-i",
        "0",
        "-B",
        "none",
        s(img),
    ]));
}

/// `sectorcrypt geli attach FLAG -j PASS --socket SOCK IMG`, serving.
fn attached(flag: &str, pass: &Path, sock: &Path, img: &Path) -> served::Served {
    let args = [
        "geli",
        "attach",
        flag,
        "-j",
        s(pass),
        "--socket",
        s(sock),
        s(img),
    ];
    served::Served::start_command(&args, sock)
}

/// Waits, 20 seconds at most, for a server `srv` that must stop by itself (`why`); its
/// exit status and standard error.
fn stops_by_itself(mut srv: served::Served, why: &str) -> std::process::Output {
    let child = srv.child.as_mut().unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{why}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    srv.child.take().unwrap().wait_with_output().unwrap()
}

#[test]
fn label_configure_and_clear_change_the_metadata_as_geli_does() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"flags\n");
    let img = file(dir.path(), "disk.img", &vec![0u8; 256 * K as usize]);
    // label is init.
    init_quick("label", &pass, &img);
    let end = 256 * K;
    let md = sector_at(&img, end);
    assert_eq!(flags_of(&md), 0x200, "AUTORESIZE, as geli init sets it");

    // Refusals write nothing: no option, and each pair of opposites.
    let before = std::fs::read(&img).unwrap();
    for bad in [
        &[][..],
        &["-b", "-B"],
        &["-d", "-D"],
        &["-g", "-G"],
        &["-r", "-R"],
        &["-t", "-T"],
    ] {
        let out = geli(&[&["configure"][..], bad, &[s(&img)]].concat());
        assert_eq!(code(&out), 2, "configure {bad:?}: {out:?}");
        assert_eq!(std::fs::read(&img).unwrap(), before, "configure {bad:?}");
    }

    // Each change: the flags word set, the MD5 recomputed, nothing else in the image.
    let steps: [(&[&str], u32); 4] = [
        (&["-b", "-d", "-g", "-T"], 0x200 | 0x2 | 0x100 | 0x80 | 0x40),
        (&["-B", "-G", "-R"], 0x100 | 0x40),
        (&["-D", "-t", "-r"], 0x200),
        (&["-R"], 0),
    ];
    for (opts, flags) in steps {
        let before = std::fs::read(&img).unwrap();
        ok(geli(&[&["configure"][..], opts, &[s(&img)]].concat()));
        let after = std::fs::read(&img).unwrap();
        let want = with_flags(&before[before.len() - 512..], flags);
        assert_eq!(after[after.len() - 512..], want[..], "configure {opts:?}");
        assert_eq!(after[..after.len() - 512], before[..before.len() - 512]);
    }
    let v: serde_json::Value =
        serde_json::from_str(&ok(sc(&["dump", s(&img), "--json"], b""))).unwrap();
    assert_eq!(v["flags"], 0);
    let bare = file(dir.path(), "bare", b"flags");
    assert_eq!(test_key(&img, &bare), 0, "the keys are untouched");
    // Setting a flag already set changes nothing, and is no error.
    ok(geli(&["configure", "-R", s(&img)]));
    assert_eq!(sector_at(&img, end), with_flags(&md, 0));

    // clear: the metadata sector zeroed, no passphrase asked; the data kept.
    let before = std::fs::read(&img).unwrap();
    ok(geli(&["clear", "-v", s(&img)]));
    let after = std::fs::read(&img).unwrap();
    assert_eq!(after[after.len() - 512..], [0u8; 512]);
    assert_eq!(after[..after.len() - 512], before[..before.len() - 512]);
    // Nothing to clear, nothing to configure: refused, nothing written.
    let out = geli(&["clear", s(&img)]);
    assert_ne!(code(&out), 0, "{out:?}");
    let out = geli(&["configure", "-b", s(&img)]);
    assert_eq!(code(&out), 2, "{out:?}");
    assert_eq!(std::fs::read(&img).unwrap(), after);
}

#[test]
fn kernel_only_verbs_say_what_to_do_instead() {
    let dir = tempfile::tempdir().unwrap();
    let img = file(dir.path(), "disk.img", &vec![0u8; 64 * K as usize]);
    for (verb, extra, hint) in [
        ("detach", &["-f", "-l"][..], "stop the"),
        ("stop", &[][..], "stop the"),
        ("suspend", &["-a"][..], "stop the"),
        ("resume", &["-p"][..], "attach"),
        ("list", &[][..], "ps"),
        ("status", &[][..], "ps"),
        ("load", &[][..], "no kernel module"),
        ("unload", &[][..], "no kernel module"),
    ] {
        let out = geli(&[&[verb][..], extra, &[s(&img)]].concat());
        assert_eq!(code(&out), 2, "{verb}: {out:?}");
        let err = stderr(&out);
        assert!(
            err.contains(verb) && err.contains(hint),
            "{verb}: {hint:?} missing from {err:?}"
        );
    }
    assert_eq!(std::fs::read(&img).unwrap(), vec![0u8; 64 * K as usize]);
}

/// `sectorcrypt geli ARGS` with `SECTORCRYPT_GELI_BACKUP_DIR` set to `backups`, run in
/// `cwd`.
fn geli_backups(args: &[&str], backups: &Path, cwd: &Path) -> std::process::Output {
    std::process::Command::new(support::bin())
        .arg("geli")
        .args(args)
        .current_dir(cwd)
        .env("SECTORCRYPT_GELI_BACKUP_DIR", backups)
        .env_remove("SECTORCRYPT_BACKEND")
        .output()
        .unwrap()
}

#[test]
fn init_writes_the_metadata_backup_where_geli_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pass = file(d, "pass", b"backup\n");
    let backups = d.join("backups");
    std::fs::create_dir(&backups).unwrap();
    std::fs::create_dir(d.join("disks")).unwrap();
    let img = file(d, "disks/da0", &vec![0u8; 128 * K as usize]);
    let init = |prov: &str, extra: &[&str]| {
        let args = [&["init", "-J", s(&pass), "-i", "0"][..], extra, &[prov]].concat();
        geli_backups(&args, &backups, d)
    };
    // The default: BACKUP_DIR/<prov>.eli, each '/' of the provider's name an '_'.
    let out = init("disks/da0", &[]);
    assert!(out.status.success(), "{out:?}");
    let bk = backups.join("disks_da0.eli");
    let raw = std::fs::read(&img).unwrap();
    assert_eq!(
        std::fs::read(&bk).unwrap(),
        raw[raw.len() - 512..],
        "the backup is the metadata sector"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("geli restore {} disks/da0", s(&bk))),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&bk).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the backup is the owner's only");
    // An older backup of that name is replaced, as geli's O_TRUNC does. (Initialising a
    // provider that holds metadata asks first; --batch answers.)
    let out = init("disks/da0", &["--batch"]);
    assert!(out.status.success(), "{out:?}");
    let raw2 = std::fs::read(&img).unwrap();
    assert_ne!(
        raw2[raw2.len() - 512..],
        raw[raw.len() - 512..],
        "a new salt"
    );
    assert_eq!(std::fs::read(&bk).unwrap(), raw2[raw2.len() - 512..]);
    // -B none: no backup.
    std::fs::remove_file(&bk).unwrap();
    ok(init("disks/da0", &["-B", "none", "--batch"]));
    assert!(std::fs::read_dir(&backups).unwrap().next().is_none());
    // A backup that cannot be written: the provider is initialized all the same (geli
    // stores the metadata first), the failure is reported, exit 1.
    std::fs::remove_dir(&backups).unwrap();
    std::fs::write(&backups, b"a file, not a folder").unwrap();
    let before = std::fs::read(&img).unwrap();
    let out = init("disks/da0", &["--batch"]);
    assert_eq!(code(&out), 1, "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("disks_da0.eli") && err.contains("initialized"),
        "{err}"
    );
    let after = std::fs::read(&img).unwrap();
    assert_ne!(after[after.len() - 512..], before[before.len() - 512..]);
    let bare = file(d, "bare", b"backup");
    assert_eq!(test_key(&img, &bare), 0);
    let help = ok(geli(&["init", "--help"]));
    assert!(help.contains("/var/backups"), "{help}");
}

#[test]
fn setkey_with_new_keyfiles_makes_a_key_only_they_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pass = file(d, "pass", b"old pass\n");
    let new = file(d, "new", b"new pass\n");
    let new_bare = file(d, "new_bare", b"new pass");
    let ka = file(d, "ka", &pattern(100, 1));
    let kb = file(d, "kb", &pattern(3000, 2));
    let kc = file(d, "kc", &pattern(64, 3));
    let img = file(d, "disk.img", &vec![0u8; 512 * K as usize]);
    ok(geli(&[
        "init",
        "-J",
        s(&pass),
        "-K",
        s(&ka),
        "-i",
        "0",
        "-B",
        "none",
        s(&img),
    ]));
    let data = geli::body(64 * K as usize, 4);
    let input = file(d, "in", &data);
    let opens = |pass: &Path, keys: &[&Path]| {
        let mut args = vec!["test-key", s(&img), "--key-file", s(pass)];
        for k in keys {
            args.extend(["--keyfile-component", s(k)]);
        }
        code(&sc(&args, b""))
    };
    ok(sc(
        &[
            "write",
            s(&img),
            "--key-file",
            s(&pass),
            "--keyfile-component",
            s(&ka),
            "--input",
            s(&input),
        ],
        b"",
    ));
    // The current key is checked first: wrong keyfiles write nothing.
    let before = std::fs::read(&img).unwrap();
    let out = geli(&[
        "setkey",
        "-j",
        s(&pass),
        "-k",
        s(&kb),
        "-J",
        s(&new),
        "-K",
        s(&kb),
        s(&img),
    ]);
    assert_eq!(code(&out), 3, "{out:?}");
    assert_eq!(std::fs::read(&img).unwrap(), before);

    ok(geli(&[
        "setkey",
        "-j",
        s(&pass),
        "-k",
        s(&ka),
        "-J",
        s(&new),
        "-K",
        s(&kb),
        "-K",
        s(&kc),
        s(&img),
    ]));
    assert_eq!(
        opens(&new_bare, &[&kb, &kc]),
        0,
        "the new keyfiles, in order"
    );
    assert_eq!(opens(&new_bare, &[&ka]), 3, "not the old keyfile");
    assert_eq!(opens(&new_bare, &[&kc, &kb]), 3, "not in another order");
    assert_eq!(opens(&new_bare, &[]), 3, "not without keyfiles");
    let bare = file(d, "bare", b"old pass");
    assert_eq!(opens(&bare, &[&ka]), 3, "the old key is gone");

    // -P: the new key is made of keyfiles alone; attach -p opens it.
    ok(geli(&[
        "setkey",
        "-n",
        "1",
        "-j",
        s(&new),
        "-k",
        s(&kb),
        "-k",
        s(&kc),
        "-P",
        "-K",
        s(&ka),
        s(&img),
    ]));
    assert_eq!(
        code(&geli(&["attach", "-C", "-p", "-k", s(&ka), s(&img)])),
        0,
        "keyfile only"
    );
    assert_eq!(
        code(&geli(&["attach", "-C", "-p", "-k", s(&kb), s(&img)])),
        3
    );

    if let Some(why) = geli::model_missing() {
        sectorcrypt_testkit::skipped!("model check skipped: {why}");
        return;
    }
    let out = d.join("model.plain");
    geli::model_ok(&[
        "decrypt",
        s(&img),
        "--passfile",
        s(&new),
        "--keyfile",
        s(&kb),
        "--keyfile",
        s(&kc),
        "--out",
        s(&out),
    ]);
    assert_eq!(std::fs::read(&out).unwrap()[..data.len()], data[..]);
}

#[test]
fn attach_n_tries_only_that_slot() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p0 = file(d, "p0", b"slot zero\n");
    let p1 = file(d, "p1", b"slot one\n");
    let img = file(d, "disk.img", &vec![0u8; 256 * K as usize]);
    init_quick("init", &p0, &img);
    ok(geli(&[
        "setkey",
        "-n",
        "1",
        "-j",
        s(&p0),
        "-J",
        s(&p1),
        s(&img),
    ]));
    let dry = |n: &str, p: &Path| code(&geli(&["attach", "-C", "-n", n, "-j", s(p), s(&img)]));
    assert_eq!(dry("0", &p0), 0);
    assert_eq!(dry("1", &p1), 0);
    assert_eq!(dry("1", &p0), 3, "slot 0's passphrase, slot 1 only");
    assert_eq!(dry("0", &p1), 3, "slot 1's passphrase, slot 0 only");
    assert_eq!(dry("2", &p0), 2, "no slot 2");
    ok(geli(&["delkey", "-n", "0", s(&img)]));
    assert_ne!(dry("0", &p1), 0, "slot 0 unset");
    // Served: -n 1 with slot 0's passphrase never serves.
    let sock = d.join("n.sock");
    let out = geli(&[
        "attach",
        "-n",
        "0",
        "-j",
        s(&p1),
        "--socket",
        s(&sock),
        s(&img),
    ]);
    assert_ne!(code(&out), 0, "{out:?}");
    assert!(!sock.exists());
}

#[test]
fn attach_d_exits_after_the_last_client_and_r_refuses_writes() {
    require!("nbdcopy", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pass = file(d, "pass", b"detach\n");
    let img = file(d, "disk.img", &vec![0u8; 512 * K as usize]);
    init_quick("init", &pass, &img);
    let plain = pattern(512 * K as usize - 512, 8);
    let input = file(d, "in", &plain);
    let sock = d.join("d.sock");
    let mut srv = attached("-d", &pass, &sock, &img);
    // Connections that close before their handshake is over are no clients: a silent
    // one, and one that asks for the export list only.
    drop(std::os::unix::net::UnixStream::connect(&sock).unwrap());
    run_stdout(std::process::Command::new("nbdinfo").args(["--list", &srv.uri()]));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let child = srv.child.as_mut().unwrap();
    assert!(
        child.try_wait().unwrap().is_none(),
        "attach -d ended when a connection closed in its handshake"
    );
    nbdcopy(s(&input), &srv.uri());
    // nbdcopy was the only client: once it is gone the server ends by itself.
    let out = stops_by_itself(srv, "attach -d still serving after its last client left");
    assert!(out.status.success(), "{out:?}");
    assert!(!sock.exists(), "the socket is removed");
    let bare = file(d, "bare", b"detach");
    assert_eq!(plaintext(&img, &bare), plain, "flushed before exit");

    // -r: served read-only.
    let sock = d.join("r.sock");
    let srv = attached("-r", &pass, &sock, &img);
    let info = run_stdout(std::process::Command::new("nbdinfo").args(["--json", &srv.uri()]));
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["exports"][0]["is_read_only"], true, "{info}");
    let out = std::process::Command::new("nbdcopy")
        .args([s(&input), &srv.uri()])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a write to a read-only attach: {out:?}"
    );
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "{log}");
    assert_eq!(plaintext(&img, &bare), plain);
}

/// `sectorcrypt geli onetime OPTS --socket SOCK SCRATCH`, serving, and what `nbdinfo
/// --json` says of it.
fn onetime_served(
    opts: &[&str],
    sock: &Path,
    scratch: &Path,
) -> (served::Served, serde_json::Value) {
    let args = [
        &["geli", "onetime"][..],
        opts,
        &["--socket", s(sock), s(scratch)],
    ]
    .concat();
    let srv = served::Served::start_command(&args, sock);
    let info = run_stdout(std::process::Command::new("nbdinfo").args(["--json", &srv.uri()]));
    (srv, serde_json::from_str(&info).unwrap())
}

#[test]
fn onetime_takes_gelis_algorithm_key_length_and_sector_size() {
    require!("nbdcopy", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let size = 1024 * K as usize;
    let scratch = file(d, "swap.img", &vec![0u8; size]);
    // Refused before anything is served: an HMAC not supported, NULL without -a, bad key
    // lengths, bad sector sizes, an unknown algorithm.
    for (bad, msg) in [
        (&["-a", "hmac/md5"][..], "authentication"),
        (&["-e", "null"][..], "only with authentication"),
        (&["-l", "192"][..], "key length"),
        (&["-e", "aes-cbc", "-l", "512"][..], "key length"),
        (&["-s", "1000"][..], "sector size"),
        (&["-s", "256"][..], "sector size"),
        (&["-e", "rot13"][..], "rot13"),
    ] {
        let sock = d.join("bad.sock");
        let out = geli(&[&["onetime"][..], bad, &["--socket", s(&sock), s(&scratch)]].concat());
        assert_eq!(code(&out), 2, "{bad:?}: {out:?}");
        assert!(
            stderr(&out).contains(msg),
            "{bad:?}: {msg:?} missing: {out:?}"
        );
        assert!(!sock.exists());
    }
    assert_eq!(std::fs::read(&scratch).unwrap(), vec![0u8; size]);

    for (opts, what, sector) in [
        (&[][..], "AES-XTS with a 128-bit key", 512),
        (
            &["-e", "AES-CBC", "-l", "192", "-s", "4096", "-d", "-R", "-T"][..],
            "AES-CBC with a 192-bit key",
            4096,
        ),
        (
            &["-e", "aes-xts", "-l", "256", "-s", "8192"][..],
            "AES-XTS with a 256-bit key",
            8192,
        ),
    ] {
        let data = pattern(size, sector as u64);
        let input = file(d, "swap.in", &data);
        let (srv, v) = onetime_served(opts, &d.join("o.sock"), &scratch);
        let info = v.to_string();
        let export = &v["exports"][0];
        assert_eq!(
            export["export-size"], size as u64,
            "{opts:?}: all of it is data"
        );
        assert_eq!(export["block_size_preferred"], sector, "{opts:?}: {info}");
        if opts.contains(&"-d") {
            // -d: nbdinfo was the only client; once it is gone, so is the provider (geli's
            // man page warns of this for temporary filesystems).
            let out = stops_by_itself(srv, "-d kept serving");
            assert!(out.status.success(), "{out:?}");
            let log = stderr(&out);
            assert!(log.contains(what), "{opts:?}: {what:?} missing from {log}");
            continue;
        }
        nbdcopy(s(&input), &srv.uri());
        let out = d.join("swap.out");
        nbdcopy(&srv.uri(), s(&out));
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "exit {status}: {log}");
        assert!(log.contains(what), "{opts:?}: {what:?} missing from {log}");
        assert_eq!(std::fs::read(&out).unwrap(), data, "{opts:?}");
        let raw = std::fs::read(&scratch).unwrap();
        assert!(!raw.windows(9).any(|w| w == b"GEOM::ELI"), "no metadata");
        assert_ne!(raw[..4096], data[..4096], "{opts:?}: encrypted");
    }
}

#[test]
fn every_verb_teaches_its_sectorcrypt_command() {
    for (verb, want) in [
        ("init", "format --type geli"),
        ("label", "format --type geli"),
        ("attach", "serve"),
        ("onetime", "serve --onetime"),
        ("setkey", "change-key"),
        ("delkey", "remove-key"),
        ("kill", "erase"),
        ("backup", "header backup"),
        ("restore", "header restore"),
        ("resize", "resize --old-size"),
        ("dump", "dump"),
        ("configure", "dump"),
        ("clear", "erase"),
        ("version", "dump"),
    ] {
        let help = ok(geli(&[verb, "--help"]));
        assert!(
            help.contains(&format!("sectorcrypt {want}")),
            "geli {verb} --help lacks \"sectorcrypt {want}\":\n{help}"
        );
    }
    // -v: the equivalent command is printed before it runs.
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"verbose\n");
    let img = file(dir.path(), "disk.img", &vec![0u8; 128 * K as usize]);
    let out = ok(geli(&[
        "init",
        "-v",
        "-J",
        s(&pass),
        "-i",
        "0",
        "-B",
        "none",
        s(&img),
    ]));
    assert!(out.contains("sectorcrypt format"), "{out}");
    let out = ok(geli(&["-v", "dump", s(&img)]));
    assert!(out.contains("sectorcrypt dump"), "{out}");
}

/// Metadata version 3 (before version 4 IV offsets were in the CPU's byte order, read
/// here as little-endian) with AES-CBC: written by `geli init -V 3`, read by the model.
#[test]
fn init_v3_aes_cbc_provider_is_read_by_the_model() {
    require_model!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pass = file(d, "pass", b"version three\n");
    let img = file(d, "v3.img", &vec![0u8; 1024 * K as usize]);
    ok(geli(&[
        "init",
        "-V",
        "3",
        "-e",
        "aes-cbc",
        "-l",
        "192",
        "-s",
        "4096",
        "-i",
        "0",
        "-J",
        s(&pass),
        "-B",
        "none",
        s(&img),
    ]));
    let data = geli::body(200 * K as usize, 6);
    let input = file(d, "in", &data);
    let bare = file(d, "bare", b"version three");
    ok(sc(
        &[
            "write",
            s(&img),
            "--key-file",
            s(&bare),
            "--offset",
            "8192",
            "--input",
            s(&input),
        ],
        b"",
    ));
    let md = geli::model_ok(&["info", s(&img)]);
    assert_eq!(md["version"], 3, "{md}");
    assert_eq!(md["ealgo"], 11, "{md}");
    let plain = geli::model_decrypt(&img, &pass, d);
    assert_eq!(plain[8192..8192 + data.len()], data[..]);
}

#[test]
fn attach_passes_trim_down_unless_the_provider_says_nodelete() {
    require!("nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"trim\n");
    for (init_flag, trims) in [(None, true), (Some("-T"), false)] {
        let img = file(dir.path(), "t.img", &vec![0u8; 256 * K as usize]);
        let mut args = vec!["init", "-J", s(&pass), "-i", "0", "-B", "none"];
        args.extend(init_flag);
        args.push(s(&img));
        ok(geli(&args));
        let sock = dir.path().join("t.sock");
        let srv = attached("-v", &pass, &sock, &img);
        let can = std::process::Command::new("nbdinfo")
            .args(["--can", "trim", &srv.uri()])
            .output()
            .unwrap();
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "exit {status}: {log}");
        // nbdinfo --can: exit 0 when the export can, 2 when it cannot.
        let want = if trims { 0 } else { 2 };
        assert_eq!(
            can.status.code(),
            Some(want),
            "init {init_flag:?}: {}",
            String::from_utf8_lossy(&can.stderr)
        );
    }
}

#[test]
fn onetime_a_serves_authenticated_sectors_and_fails_a_changed_one() {
    require!("nbdcopy", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let size = 1024 * K as usize;
    for opts in [
        &["-a", "hmac/sha256"][..],
        &["-e", "null", "-a", "HMAC/SHA1"][..],
    ] {
        let scratch = file(d, "auth-swap.img", &vec![0u8; size]);
        let (srv, v) = onetime_served(opts, &d.join("a.sock"), &scratch);
        // 512-byte sectors of 480 + 32 bytes of data, each stored in two 512-byte units
        // with their tags: half of the provider is data.
        let data_size = size / 2;
        assert_eq!(v["exports"][0]["export-size"], data_size as u64, "{opts:?}");
        let data = pattern(data_size, 77);
        let input = file(d, "auth.in", &data);
        nbdcopy(s(&input), &srv.uri());
        let out = d.join("auth.out");
        nbdcopy(&srv.uri(), s(&out));
        assert_eq!(std::fs::read(&out).unwrap(), data, "{opts:?}");
        // A changed byte in the provider: that read fails, nothing of it is returned.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&scratch)
            .unwrap();
        std::os::unix::fs::FileExt::write_at(&f, b"X", 3 * 1024 + 100).unwrap();
        f.sync_all().unwrap();
        let bad = std::process::Command::new("nbdcopy")
            .args([&srv.uri(), s(&out)])
            .output()
            .unwrap();
        assert!(!bad.status.success(), "{opts:?}: a changed sector was read");
        let (status, log) = srv.stop("TERM");
        assert!(status.success(), "exit {status}: {log}");
        let raw = std::fs::read(&scratch).unwrap();
        assert!(!raw.windows(9).any(|w| w == b"GEOM::ELI"), "no metadata");
    }
}

/// GELI's AUTH flag is not authenticated (the metadata's MD5 is a checksum): cleared, with
/// the MD5 recomputed, an `-a` provider attaches without tag checks, as on FreeBSD.
/// `--integrity` refuses such a provider (attach, attach -C, serve).
#[test]
fn integrity_refuses_a_provider_whose_auth_flag_was_cleared() {
    const AUTH: u32 = 0x10;
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"tagged\n");
    let img = file(dir.path(), "auth.img", &vec![0u8; 256 * K as usize]);
    ok(geli(&[
        "init",
        "-a",
        "HMAC/SHA256",
        "-i",
        "0",
        "-J",
        s(&pass),
        "-B",
        "none",
        s(&img),
    ]));
    let check = |extra: &[&str]| {
        let args = [&["attach", "-C", "-j", s(&pass)][..], extra, &[s(&img)]].concat();
        geli(&args)
    };
    let out = check(&["--integrity"]);
    assert_eq!(code(&out), 0, "an authenticated provider: {}", stderr(&out));
    let sector = sector_at(&img, 256 * K);
    assert_ne!(flags_of(&sector) & AUTH, 0);
    let cleared = with_flags(&sector, flags_of(&sector) & !AUTH);
    let mut raw = std::fs::read(&img).unwrap();
    let end = raw.len();
    raw[end - 512..end - 1].copy_from_slice(&cleared[..511]);
    std::fs::write(&img, &raw).unwrap();
    // Without --integrity it attaches (documented: the flag is not authenticated).
    assert_eq!(code(&check(&[])), 0);
    let sock = dir.path().join("s.sock");
    let refusals = [
        check(&["--integrity"]),
        geli(&[
            "attach",
            "--integrity",
            "-j",
            s(&pass),
            "--socket",
            s(&sock),
            s(&img),
        ]),
        sc(
            &[
                "serve",
                s(&img),
                "--integrity",
                "--key-file",
                s(&file(dir.path(), "bare", b"tagged")),
                "--socket",
                s(&sock),
            ],
            b"",
        ),
    ];
    for out in refusals {
        let e = stderr(&out);
        assert_eq!(code(&out), 2, "{e}");
        assert!(
            e.contains("no data authentication") && e.contains("not itself authenticated"),
            "{e}"
        );
        assert!(!sock.exists(), "served: {e}");
    }
    let help = ok(geli(&["attach", "--help"]));
    assert!(
        help.contains("--integrity") && help.contains("not a MAC"),
        "{help}"
    );
}
