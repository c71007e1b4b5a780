//! Advisory locks between processes: keyslot changes that run at the same time serialise
//! and both survive (add-key twice, change-key twice, with cryptsetup's luksAddKey beside
//! ours); the header lock is the `flock` cryptsetup and flock(1) take on a regular file;
//! `format`, `erase` and `header restore` refuse an image that is served or being written,
//! while add-key, change-key and remove-key go ahead on a served volume.
//!
//! The races are made real by a slow KDF for the new keyslot (the window between reading
//! the header and writing it back is then tens of milliseconds) and by several rounds.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{pattern, require, run};
use served::Served;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::{bin, code, ok, s, sc};
use volumes::{key_file as key, new_volume, write_volume, FAST};

/// A new keyslot's KDF slow enough (PBKDF2, tens of milliseconds) that two runs overlap.
const SLOW: [&str; 4] = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "10000"];

/// Rounds of each race.
const ROUNDS: usize = 5;

/// Starts `sectorcrypt ARGS` with its output captured.
fn start(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sectorcrypt")
}

fn finish(c: Child) -> Output {
    c.wait_with_output().expect("wait for sectorcrypt")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn opens(img: &Path, pass: &str) -> bool {
    let out = sc(&["test-key", s(img), "--key-file", "-"], pass.as_bytes());
    match code(&out) {
        0 => true,
        3 => false,
        c => panic!("test-key exited {c}: {}", err(&out)),
    }
}

/// A volume in a fresh folder under `dir`: LUKS2 on even rounds, LUKS1 on odd ones.
fn round_volume(dir: &Path, round: usize) -> (PathBuf, PathBuf) {
    let sub = dir.join(format!("r{round}"));
    std::fs::create_dir(&sub).unwrap();
    let kind: &[&str] = if round.is_multiple_of(2) {
        &[]
    } else {
        &["--type", "luks1"]
    };
    let img = new_volume(&sub, kind);
    (img, sub)
}

/// The lines of /proc/locks on the file `path` (matched by inode), e.g.
/// `1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF`.
fn locks_on(path: &Path) -> Vec<String> {
    let ino = std::fs::metadata(path).unwrap().ino();
    let suffix = format!(":{ino}");
    std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(5)
                .is_some_and(|f| f.ends_with(&suffix))
        })
        .map(str::to_string)
        .collect()
}

/// Waits up to `limit` for a lock of `kind` (`FLOCK`, `OFDLCK`) on `path`; whether one
/// appeared.
fn wait_for_lock(path: &Path, kind: &str, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if locks_on(path).iter().any(|l| l.contains(kind)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Round `round` of a race: a new volume (keyslot 0 opened by "zero"), then `sectorcrypt
/// CMD IMG NEW --key-file k0` run twice at once, with NEW "alpha" and "beta". Returns the
/// image and the two runs' outcomes.
fn race(dir: &Path, round: usize, cmd: &str) -> (PathBuf, Output, Output) {
    let (img, sub) = round_volume(dir, round);
    let k0 = sub.join("k0");
    let run = |name: &str, pass: &str| {
        let k = key(&sub, name, pass);
        let args = [cmd, s(&img), s(&k), "--key-file", s(&k0)];
        start(&[&args[..], &SLOW].concat())
    };
    let (a, b) = (run("ka", "alpha"), run("kb", "beta"));
    let (a, b) = (finish(a), finish(b));
    (img, a, b)
}

#[test]
fn concurrent_add_keys_both_survive() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let (img, a, b) = race(dir.path(), round, "add-key");
        assert!(a.status.success(), "round {round}: {}", err(&a));
        assert!(b.status.success(), "round {round}: {}", err(&b));
        let (sa, sb) = (
            String::from_utf8_lossy(&a.stdout),
            String::from_utf8_lossy(&b.stdout),
        );
        assert_ne!(sa, sb, "round {round}: both added the same keyslot");
        for pass in ["zero", "alpha", "beta"] {
            assert!(
                opens(&img, pass),
                "round {round}: {pass:?} lost ({sa:?}, {sb:?})"
            );
        }
    }
}

#[test]
fn concurrent_change_keys_leave_exactly_one_new_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let (img, a, b) = race(dir.path(), round, "change-key");
        let codes = [code(&a), code(&b)];
        let (alpha, beta) = (opens(&img, "alpha"), opens(&img, "beta"));
        let why = format!(
            "round {round}: exits {codes:?}, alpha opens {alpha}, beta opens {beta}\n{}\n{}",
            err(&a),
            err(&b)
        );
        // The second change finds the old passphrase gone: a wrong passphrase (3).
        assert!(
            codes == [0, 3] || codes == [3, 0],
            "one change must win: {why}"
        );
        assert_eq!(alpha, codes[0] == 0, "{why}");
        assert_eq!(beta, codes[1] == 0, "{why}");
        assert!(!opens(&img, "zero"), "{why}");
    }
}

#[test]
fn cryptsetup_and_sectorcrypt_add_keys_at_once_both_survive() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS / 2 {
        let (img, sub) = round_volume(dir.path(), 2 * round);
        let (ka, kb) = (key(&sub, "ka", "alpha"), key(&sub, "kb", "beta"));
        let k0 = sub.join("k0");
        let add = ["add-key", s(&img), s(&ka), "--key-file", s(&k0)];
        let ours = start(&[&add[..], &SLOW].concat());
        let theirs = Command::new("cryptsetup")
            .args(["luksAddKey", "-q", "--pbkdf", "pbkdf2"])
            .args(["--pbkdf-force-iterations", "10000", "--key-file"])
            .args([&k0, &img, &kb])
            .output()
            .unwrap();
        let ours = finish(ours);
        assert!(ours.status.success(), "round {round}: {}", err(&ours));
        // cryptsetup reads the header before it takes the lock; when it then finds the
        // header changed by us, it gives up without writing (its own safeguard).
        let aborted = err(&theirs).contains("concurrent");
        assert!(
            theirs.status.success() || aborted,
            "round {round}: {}",
            err(&theirs)
        );
        assert!(opens(&img, "zero") && opens(&img, "alpha"), "round {round}");
        assert_eq!(opens(&img, "beta"), !aborted, "round {round}");
    }
}

#[test]
fn header_updates_wait_for_the_flock_cryptsetup_takes() {
    require!("flock");
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k1 = key(dir.path(), "k1", "one");
    let k0 = dir.path().join("k0");
    // flock(1) holds an exclusive flock on the image for 1.5 s, as cryptsetup's metadata
    // write lock does on a regular file.
    let mut holder = Command::new("flock")
        .args(["--exclusive", s(&img), "sleep", "1.5"])
        .spawn()
        .unwrap();
    assert!(wait_for_lock(&img, "FLOCK", Duration::from_secs(5)));
    let t0 = Instant::now();
    ok(sc(
        &[
            &["add-key", s(&img), s(&k1), "--key-file", s(&k0)][..],
            &FAST,
        ]
        .concat(),
        b"",
    ));
    let waited = t0.elapsed();
    holder.wait().unwrap();
    assert!(
        waited >= Duration::from_millis(1000),
        "add-key changed the header under another process's lock (after {waited:?})"
    );
    assert!(opens(&img, "one"));
}

#[test]
fn format_erase_convert_and_restore_refuse_a_served_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    let bak = dir.path().join("hdr.bak");
    ok(sc(&["header", "backup", s(&img), s(&bak)], b""));
    let sock = dir.path().join("s.sock");
    let srv = Served::start(&[s(&img), "--key-file", s(&k0)], &sock);
    let before = std::fs::read(&img).unwrap();
    let format = [
        &["format", s(&img), "--batch", "--key-file", s(&k0)][..],
        &FAST,
    ]
    .concat();
    let refused: [&[&str]; 4] = [
        &format,
        &["erase", s(&img), "--batch"],
        &["convert", s(&img), "--type", "luks1", "--batch"],
        &["header", "restore", s(&img), s(&bak), "--batch"],
    ];
    for args in refused {
        let out = sc(args, b"");
        let e = err(&out);
        // A busy image is a runtime condition (1), not bad input: the same command
        // succeeds once the server stops.
        assert_eq!(code(&out), 1, "{args:?}: {e}");
        assert!(e.contains("in use") && e.contains(s(&img)), "{args:?}: {e}");
        assert!(std::fs::read(&img).unwrap() == before, "{args:?} wrote");
    }
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "{log}");
    // The lock went with the server.
    ok(sc(&["erase", s(&img), "--batch"], b""));
    let out = sc(&["test-key", s(&img), "--key-file", s(&k0)], b"");
    assert!(err(&out).contains("no active keyslot"), "{}", err(&out));
}

#[test]
fn format_refuses_an_image_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    // `write` from a pipe that stays open: the command holds the image until it closes.
    let mut writer = Command::new(bin())
        .args(["write", s(&img), "--key-file", s(&k0)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = wait_for_lock(&img, "OFDLCK", Duration::from_secs(5));
    let before = std::fs::read(&img).unwrap();
    let out = sc(
        &[
            &["format", s(&img), "--batch", "--key-file", s(&k0)][..],
            &FAST,
        ]
        .concat(),
        b"",
    );
    drop(writer.stdin.take());
    let w = writer.wait_with_output().unwrap();
    assert!(w.status.success(), "write: {}", err(&w));
    assert!(seen, "no lock on the image while it was being written");
    assert_eq!(code(&out), 1, "{}", err(&out));
    assert!(err(&out).contains("in use"), "{}", err(&out));
    assert!(std::fs::read(&img).unwrap() == before);
}

#[test]
fn keyslot_changes_on_a_served_volume_are_allowed() {
    require!("nbdcopy");
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    let (k1, k2) = (key(dir.path(), "k1", "one"), key(dir.path(), "k2", "two"));
    let data = pattern(4 << 20, 13);
    write_volume(dir.path(), &img, &k0, &data);
    let sock = dir.path().join("s.sock");
    let srv = Served::start(&[s(&img), "--key-file", s(&k0)], &sock);
    let add = ["add-key", s(&img), s(&k1), "--key-file", s(&k0)];
    let change = ["change-key", s(&img), s(&k2), "--key-file", s(&k1)];
    ok(sc(&[&add[..], &FAST].concat(), b""));
    ok(sc(&[&change[..], &FAST].concat(), b""));
    ok(sc(&["remove-key", s(&img), "--key-file", s(&k0)], b""));
    let out = dir.path().join("out.bin");
    run(Command::new("nbdcopy").arg(srv.uri()).arg(&out));
    assert!(std::fs::read(&out).unwrap()[..data.len()] == data[..]);
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "{log}");
    assert!(opens(&img, "two"));
    assert!(!opens(&img, "zero"));
    assert!(!opens(&img, "one"));
}
