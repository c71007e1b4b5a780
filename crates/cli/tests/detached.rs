//! Detached headers (`--header FILE`), both ways with cryptsetup: a header detached by
//! `cryptsetup luksFormat --header` is opened, read and written through `--header` on every
//! volume command, and one made by `sectorcrypt format --header` opens in `cryptsetup open
//! --test-passphrase --header`; the data is checked against an independent decryption
//! (the volume key from `cryptsetup luksDump --dump-volume-key`, dm-crypt's sectors through
//! OpenSSL); serve and mount reach the data file, never the header. A header whose data
//! offset is 0, used without `--header`, is refused and left as it was.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use openssl::symm::Mode;
use sectorcrypt_testkit::reference::dm_crypt;
use sectorcrypt_testkit::{pattern, require, run};
use served::Served;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{code, ok, ok_bytes, s, sc};
use volumes::{key_file as key, FAST};

/// Bytes of the data file: all of it is data, the header being elsewhere.
const DATA: usize = 8 << 20;

/// A detached volume: header file, data file, passphrase file "pw" holding "secret".
struct Detached {
    _dir: tempfile::TempDir,
    hdr: PathBuf,
    data: PathBuf,
    pw: PathBuf,
}

impl Detached {
    /// An empty folder with a zeroed data file and the passphrase file; no header yet.
    fn blank() -> Detached {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data.img");
        std::fs::write(&data, vec![0u8; DATA]).unwrap();
        Detached {
            hdr: dir.path().join("hdr.img"),
            pw: key(dir.path(), "pw", "secret"),
            data,
            _dir: dir,
        }
    }

    /// `cryptsetup luksFormat --header hdr.img data.img` with `args` (at the lowest cost).
    fn by_cryptsetup(args: &[&str]) -> Detached {
        let d = Detached::blank();
        run(Command::new("cryptsetup")
            .args(["luksFormat", "-q", "--pbkdf-force-iterations", "1000"])
            .args(args)
            .arg("--key-file")
            .arg(&d.pw)
            .arg("--header")
            .args([&d.hdr, &d.data]));
        d
    }

    fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// `--header HDR`.
    fn flag(&self) -> [&str; 2] {
        ["--header", s(&self.hdr)]
    }

    /// `sectorcrypt CMD --header HDR DATA REST...`.
    fn sc(&self, cmd: &[&str], rest: &[&str], stdin: &[u8]) -> std::process::Output {
        sc(&[cmd, &self.flag(), &[s(&self.data)], rest].concat(), stdin)
    }

    /// Whether `cryptsetup open --test-passphrase --header` accepts the passphrase in
    /// `pass`.
    fn cryptsetup_opens(&self, pass: &Path) -> bool {
        Command::new("cryptsetup")
            .args(["open", "--test-passphrase", "--key-file"])
            .arg(pass)
            .arg("--header")
            .args([&self.hdr, &self.data])
            .output()
            .unwrap()
            .status
            .success()
    }

    /// The plaintext of the data file, decrypted without sectorcrypt: the volume key from
    /// `cryptsetup luksDump --dump-volume-key`, then dm-crypt's sectors through OpenSSL
    /// (aes-xts-plain64, IVs in 512-byte units).
    fn independent_plaintext(&self, sector: usize) -> Vec<u8> {
        let vk = self.dir().join("vk.bin");
        let _ = std::fs::remove_file(&vk);
        run(Command::new("cryptsetup")
            .args(["luksDump", "-q", "--dump-volume-key", "--volume-key-file"])
            .arg(&vk)
            .arg("--key-file")
            .args([&self.pw, &self.hdr]));
        let key = std::fs::read(&vk).unwrap();
        let stored = std::fs::read(&self.data).unwrap();
        let step = (sector / 512) as u64;
        dm_crypt(
            "aes-xts-plain64",
            &key,
            sector,
            step,
            0,
            &stored,
            Mode::Decrypt,
        )
    }

    /// Writes `plain` through `sectorcrypt write --header`.
    fn write(&self, plain: &[u8]) {
        let input = self.dir().join("in.bin");
        std::fs::write(&input, plain).unwrap();
        let rest = ["--input", s(&input), "--key-file", s(&self.pw)];
        ok(self.sc(&["write"], &rest, b""));
    }

    /// The plaintext through `sectorcrypt read --header`.
    fn read(&self) -> Vec<u8> {
        ok_bytes(self.sc(&["read"], &["--key-file", s(&self.pw)], b""))
    }
}

fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// The kinds of volume the tests run on: cryptsetup's arguments, ours, the sector size.
const KINDS: [(&[&str], &[&str], usize); 2] = [
    (&["--type", "luks2", "--pbkdf", "pbkdf2"], &[], 4096),
    (&["--type", "luks1"], &["--type", "luks1"], 512),
];

#[test]
fn a_detached_header_used_without_header_is_refused_and_left_intact() {
    require!("cryptsetup");
    for (theirs, _, _) in KINDS {
        let d = Detached::by_cryptsetup(theirs);
        let before = std::fs::read(&d.hdr).unwrap();
        let input = key(
            d.dir(),
            "in.bin",
            "plaintext that must not land on the header",
        );
        let sock = d.dir().join("s.sock");
        let (hdr, pw) = (s(&d.hdr), s(&d.pw));
        let refused: [&[&str]; 3] = [
            &["read", hdr, "--key-file", pw],
            &["write", hdr, "--input", s(&input), "--key-file", pw],
            &["serve", hdr, "--key-file", pw, "--socket", s(&sock)],
        ];
        for args in refused {
            let out = sc(args, b"");
            let e = err(&out);
            assert_eq!(code(&out), 2, "{theirs:?} {args:?}: {e}");
            assert!(
                e.contains("detached") && e.contains("--header"),
                "{args:?}: {e}"
            );
            assert!(std::fs::read(&d.hdr).unwrap() == before, "{args:?} wrote");
            assert!(!sock.exists());
        }
        // Keyslots need no data: cryptsetup's `open --test-passphrase` works on the header
        // file alone, and so does test-key.
        ok(sc(&["test-key", hdr, "--key-file", pw], b""));
    }
}

#[test]
fn cryptsetup_detached_headers_are_read_and_written_through_header() {
    require!("cryptsetup");
    for (seed, (theirs, _, sector)) in KINDS.into_iter().enumerate() {
        let d = Detached::by_cryptsetup(theirs);
        let header_before = std::fs::read(&d.hdr).unwrap();
        let plain = pattern(DATA, seed as u64);
        d.write(&plain);
        assert!(
            std::fs::read(&d.hdr).unwrap() == header_before,
            "{theirs:?}: data written into the header"
        );
        assert!(d.read() == plain, "{theirs:?}: read back differs");
        assert!(
            d.independent_plaintext(sector) == plain,
            "{theirs:?}: the data file does not decrypt to what was written"
        );
        let dump = ok(d.sc(&["dump"], &[], b""));
        assert!(!dump.is_empty());
        ok(d.sc(&["test-key"], &["--key-file", s(&d.pw)], b""));

        // Keyslot changes through --header, seen by cryptsetup.
        let (k1, k2) = (key(d.dir(), "k1", "one"), key(d.dir(), "k2", "two"));
        let data_before = std::fs::read(&d.data).unwrap();
        let add = [s(&k1), "--key-file", s(&d.pw)];
        ok(d.sc(&["add-key"], &[&add[..], &FAST].concat(), b""));
        assert!(d.cryptsetup_opens(&k1), "{theirs:?}: added keyslot");
        let change = [s(&k2), "--key-file", s(&k1)];
        ok(d.sc(&["change-key"], &[&change[..], &FAST].concat(), b""));
        assert!(d.cryptsetup_opens(&k2) && !d.cryptsetup_opens(&k1));
        ok(d.sc(&["remove-key"], &["--key-file", s(&k2)], b""));
        assert!(!d.cryptsetup_opens(&k2) && d.cryptsetup_opens(&d.pw));
        assert!(
            std::fs::read(&d.data).unwrap() == data_before,
            "{theirs:?}: a keyslot change touched the data file"
        );
    }
}

#[test]
fn sectorcrypt_detached_headers_open_in_cryptsetup() {
    require!("cryptsetup");
    for (seed, (theirs, ours, sector)) in KINDS.into_iter().enumerate() {
        let d = Detached::blank();
        let args = [&["--batch", "--key-file", s(&d.pw)][..], ours, &FAST].concat();
        let out = ok(d.sc(&["format"], &args, b""));
        assert!(out.contains("offset 0"), "{ours:?}: {out}");
        // The header file is as large as cryptsetup's for the same volume.
        let twin = Detached::by_cryptsetup(theirs);
        let len = |p: &Path| std::fs::metadata(p).unwrap().len();
        assert_eq!(len(&d.hdr), len(&twin.hdr), "{ours:?}");
        assert_eq!(len(&d.data), DATA as u64);

        let plain = pattern(DATA, 10 + seed as u64);
        d.write(&plain);
        assert!(
            d.cryptsetup_opens(&d.pw),
            "{ours:?}: cryptsetup cannot open it"
        );
        let dump = run(Command::new("cryptsetup").arg("luksDump").arg(&d.hdr));
        let dump = String::from_utf8_lossy(&dump.stdout);
        assert!(
            dump.contains("offset: 0 [bytes]") || dump.contains("Payload offset:\t0"),
            "{dump}"
        );
        assert!(
            d.independent_plaintext(sector) == plain,
            "{ours:?}: cryptsetup's key does not decrypt the data"
        );
        // A keyslot cryptsetup adds opens here.
        let k1 = key(d.dir(), "k1", "one");
        run(Command::new("cryptsetup")
            .args(["luksAddKey", "-q", "--pbkdf-force-iterations", "1000"])
            .args(["--pbkdf", "pbkdf2", "--key-file"])
            .arg(&d.pw)
            .arg("--header")
            .args([&d.hdr, &d.data, &k1]));
        ok(d.sc(&["test-key"], &["--key-file", s(&k1)], b""));
        assert!(d.read() == plain);
    }
}

#[test]
fn header_backup_restore_and_erase_take_header() {
    require!("cryptsetup");
    let d = Detached::by_cryptsetup(KINDS[0].0);
    d.write(&pattern(DATA, 3));
    let data_before = std::fs::read(&d.data).unwrap();
    let bak = d.dir().join("hdr.bak");
    ok(d.sc(&["header", "backup"], &[s(&bak)], b""));
    let k1 = key(d.dir(), "k1", "one");
    let add = [s(&k1), "--key-file", s(&d.pw)];
    ok(d.sc(&["add-key"], &[&add[..], &FAST].concat(), b""));
    ok(d.sc(&["header", "restore"], &[s(&bak), "--batch"], b""));
    assert_eq!(code(&d.sc(&["test-key"], &["--key-file", s(&k1)], b"")), 3);
    assert!(d.cryptsetup_opens(&d.pw) && !d.cryptsetup_opens(&k1));
    ok(d.sc(&["erase"], &["--batch"], b""));
    let out = d.sc(&["test-key"], &["--key-file", s(&d.pw)], b"");
    assert!(err(&out).contains("no active keyslot"), "{}", err(&out));
    assert!(!d.cryptsetup_opens(&d.pw));
    assert!(
        std::fs::read(&d.data).unwrap() == data_before,
        "backup, restore or erase touched the data file"
    );
}

#[test]
fn serve_takes_header_and_locks_both_files() {
    require!("cryptsetup", "nbdcopy");
    let d = Detached::by_cryptsetup(KINDS[0].0);
    let header_before = std::fs::read(&d.hdr).unwrap();
    let plain = pattern(DATA, 4);
    let input = d.dir().join("in.bin");
    std::fs::write(&input, &plain).unwrap();
    let sock = d.dir().join("s.sock");
    let args = [&d.flag()[..], &[s(&d.data), "--key-file", s(&d.pw)]].concat();
    let srv = Served::start(&args, &sock);
    // An NBD client writing from sector 0 on reaches the data file, never the header.
    run(Command::new("nbdcopy")
        .arg("--flush")
        .arg(&input)
        .arg(srv.uri()));
    // The served volume's header cannot be replaced or destroyed meanwhile.
    let format = [&["--batch", "--key-file", s(&d.pw)][..], &FAST].concat();
    for (cmd, rest) in [("erase", &["--batch"][..]), ("format", &format)] {
        let out = d.sc(&[cmd], rest, b"");
        assert_eq!(code(&out), 1, "{cmd}: {}", err(&out));
        assert!(err(&out).contains("in use"), "{cmd}: {}", err(&out));
    }
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "{log}");
    assert!(std::fs::read(&d.hdr).unwrap() == header_before);
    assert!(d.read() == plain);
    assert!(d.independent_plaintext(4096) == plain);
}

/// Unmounts `0` if a test ends while it is still mounted.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        if volumes::mounted(&self.0) {
            let _ = Command::new("fusermount3").arg("-uz").arg(&self.0).status();
        }
    }
}

#[test]
fn mount_takes_header_and_refuses_the_header_alone() {
    use std::io::Write;
    if !Path::new("/dev/fuse").exists() {
        sectorcrypt_testkit::skipped!("skipped: no /dev/fuse");
        return;
    }
    require!("cryptsetup", "fusermount3");
    let d = Detached::by_cryptsetup(KINDS[1].0);
    let mp = d.dir().join("plain");
    std::fs::create_dir(&mp).unwrap();
    let mp = std::fs::canonicalize(&mp).unwrap();
    let header_before = std::fs::read(&d.hdr).unwrap();
    let alone = ["mount", s(&d.hdr), s(&mp), "--key-file", s(&d.pw)];
    let out = sc(&[&alone[..], &["--foreground"]].concat(), b"");
    assert_eq!(code(&out), 2, "{}", err(&out));
    assert!(err(&out).contains("--header"), "{}", err(&out));
    assert!(!volumes::mounted(&mp));

    let _guard = MountGuard(mp.clone());
    ok(d.sc(&["mount"], &[s(&mp), "--key-file", s(&d.pw)], b""));
    let plain = pattern(DATA, 5);
    let mut disk = std::fs::OpenOptions::new()
        .write(true)
        .open(mp.join("disk"))
        .unwrap();
    disk.write_all(&plain).unwrap();
    disk.sync_all().unwrap();
    drop(disk);
    // A mounted volume's header is not erased under it.
    let out = d.sc(&["erase"], &["--batch"], b"");
    assert_eq!(code(&out), 1, "{}", err(&out));
    assert!(err(&out).contains("in use"), "{}", err(&out));
    volumes::unmount(&mp);
    assert!(std::fs::read(&d.hdr).unwrap() == header_before);
    assert!(d.independent_plaintext(512) == plain);
}
