//! Authenticated GELI providers (`format --type geli --integrity`, `geli init -a`) through
//! the binary and real clients: a flipped bit in a unit's ciphertext or in its tag makes
//! that sector, and only it, fail with an error naming it (`read`: exit 1), EIO through
//! NBD (qemu-io) and through the FUSE mount (as root, else skipped with the reason); a
//! partial write into it fails; bad arguments get clear errors and write nothing.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::require;
use served::Served;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{bin, code, ok, s, sc};

const SECTOR: u64 = 4096;
/// Bytes a 4096-byte sector takes with HMAC-SHA256 on 512-byte units: 9 units.
const STORED: u64 = 9 * 512;
/// The damaged sectors: 2 (a ciphertext bit), 5 (a tag bit).
const BAD: [u64; 2] = [2, 5];

/// The byte that fills sector `k` of the test data.
fn fill(k: u64) -> u8 {
    (k * 37 + 1) as u8
}

/// A 1 MiB authenticated provider (AES-XTS-128 + HMAC/SHA256, 4096-byte sectors) whose
/// sector `k` holds `fill(k)`, then damaged in sectors 2 and 5.
fn damaged(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let img = dir.join("auth.img");
    let pass = volumes::key_file(dir, "pass", "authenticated sectors");
    let args = [
        "format",
        s(&img),
        "--size",
        "1M",
        "--type",
        "geli",
        "--sector-size",
        "4096",
        "--integrity",
        "HMAC/SHA256",
        "--pbkdf-force-iterations",
        "0",
        "--key-file",
        s(&pass),
        "--batch",
    ];
    ok(sc(&args, b""));
    let size = ((1u64 << 20) - 512) / STORED * SECTOR;
    let data: Vec<u8> = (0..size).map(|i| fill(i / SECTOR)).collect();
    let input = dir.join("data");
    std::fs::write(&input, &data).unwrap();
    let write = [
        "write",
        s(&img),
        "--key-file",
        s(&pass),
        "--input",
        s(&input),
    ];
    ok(sc(&write, b""));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .open(&img)
        .unwrap();
    // Sector 2: a bit of its fourth unit's ciphertext; sector 5: a bit of its last tag.
    for at in [2 * STORED + 3 * 512 + 200, 5 * STORED + 8 * 512 + 9] {
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    }
    (img, pass, data)
}

/// `sectorcrypt read` of `len` bytes at `offset`.
fn read(img: &Path, pass: &Path, offset: u64, len: u64) -> std::process::Output {
    let (o, l) = (offset.to_string(), len.to_string());
    let args = [
        "read",
        s(img),
        "--key-file",
        s(pass),
        "--offset",
        &o,
        "--length",
        &l,
    ];
    sc(&args, b"")
}

#[test]
fn read_names_the_bad_sector_and_returns_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (img, pass, data) = damaged(dir.path());
    let out = read(&img, &pass, 0, data.len() as u64);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("authentication failed for sector 2"), "{err}");
    for sector in 0..10u64 {
        let out = read(&img, &pass, sector * SECTOR + 100, 50);
        if BAD.contains(&sector) {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(code(&out), 1, "sector {sector}: {err}");
            assert!(err.contains(&format!("authentication failed for sector {sector}")));
            assert!(out.stdout.is_empty(), "sector {sector}: bytes released");
        } else {
            let at = (sector * SECTOR + 100) as usize;
            assert_eq!(out.stdout, data[at..at + 50], "sector {sector}");
        }
    }
    // A partial write into a bad sector fails and changes nothing.
    let before = std::fs::read(&img).unwrap();
    let patch = dir.path().join("patch");
    std::fs::write(&patch, b"xyz").unwrap();
    let args = [
        "write",
        s(&img),
        "--key-file",
        s(&pass),
        "--input",
        s(&patch),
        "--offset",
        "20490",
    ];
    let out = sc(&args, b"");
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&img).unwrap() == before);
}

#[test]
fn nbd_reads_give_eio_for_the_bad_sectors_only() {
    require!("qemu-io");
    let dir = tempfile::tempdir().unwrap();
    let (img, pass, _) = damaged(dir.path());
    let sock = dir.path().join("s.sock");
    let srv = Served::start(&[s(&img), "--key-file", s(&pass)], &sock);
    // qemu-io checks each sector against its fill byte (-P) and exits 1 on a failed read.
    let qemu_read = |offset: u64, len: u64, fill: u8| {
        let cmd = format!("read -P {fill} {offset} {len}");
        let out = Command::new("qemu-io")
            .args(["-f", "raw", "-c", &cmd, &srv.uri()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    for sector in 0..10u64 {
        let (ok, text) = qemu_read(sector * SECTOR, SECTOR, fill(sector));
        if BAD.contains(&sector) {
            assert!(
                !ok && text.contains("Input/output error"),
                "sector {sector}: {text}"
            );
        } else {
            assert!(ok && !text.contains("failed"), "sector {sector}: {text}");
        }
    }
    // One request over sectors 1 to 3 fails as a whole; the export keeps serving.
    let (ok, text) = qemu_read(SECTOR, 3 * SECTOR, fill(1));
    assert!(!ok && text.contains("Input/output error"), "{text}");
    let (ok, text) = qemu_read(3 * SECTOR + 7, 100, fill(3));
    assert!(ok, "{text}");
    let (status, err) = srv.stop("TERM");
    assert!(status.success(), "{err}");
    assert!(err.contains("authentication failed for sector 2"), "{err}");
}

/// Why the FUSE case cannot run here, if it cannot.
fn no_fuse() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root".into());
    }
    None
}

#[test]
fn fuse_reads_give_eio_for_the_bad_sectors_only() {
    if let Some(why) = no_fuse() {
        sectorcrypt_testkit::skipped!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, pass, data) = damaged(dir.path());
    let mp = dir.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let mount = Command::new(bin())
        .arg("mount")
        .arg(&img)
        .arg(&mp)
        .arg("--key-file")
        .arg(&pass)
        .output()
        .unwrap();
    if !mount.status.success() {
        sectorcrypt_testkit::skipped!(
            "skipped: FUSE mount unavailable: {}",
            String::from_utf8_lossy(&mount.stderr).trim()
        );
        return;
    }
    let result = std::panic::catch_unwind(|| {
        let disk = std::fs::File::open(mp.join("disk")).unwrap();
        let mut buf = vec![0u8; SECTOR as usize];
        for sector in 0..10u64 {
            let r = disk.read_exact_at(&mut buf, sector * SECTOR);
            if BAD.contains(&sector) {
                let e = r.expect_err("a bad sector read");
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "sector {sector}: {e}");
            } else {
                r.unwrap();
                let at = (sector * SECTOR) as usize;
                assert!(buf == data[at..at + SECTOR as usize], "sector {sector}");
            }
        }
    });
    volumes::unmount(&mp);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

#[test]
fn bad_integrity_arguments_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let pass = volumes::key_file(dir.path(), "pass", "p");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    for (extra, why) in [
        (
            &["--integrity", "hmac-md5"][..],
            "unknown GELI authentication",
        ),
        (
            &["--integrity", "sha256"][..],
            "unknown GELI authentication",
        ),
        (
            &["--cipher", "null"][..],
            "NULL encryption is allowed only with authentication",
        ),
        (
            &[
                "--integrity",
                "hmac-sha1",
                "--cipher",
                "null",
                "--key-size",
                "1024",
            ][..],
            "not valid for NULL",
        ),
        (
            &["--integrity", "hmac-sha1", "--key-size", "192"][..],
            "key length 192 is not valid",
        ),
        (
            &["--no-wipe"][..],
            "--no-wipe applies with --integrity only",
        ),
    ] {
        let base = [
            "format",
            s(&img),
            "--type",
            "geli",
            "--key-file",
            s(&pass),
            "--batch",
        ];
        let out = sc(&[&base[..], extra].concat(), b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{extra:?}: {err}");
        assert!(err.contains(why), "{extra:?}: {err}");
        assert!(
            std::fs::read(&img).unwrap().iter().all(|&b| b == 0),
            "{extra:?}"
        );
    }
    let luks = [
        "format",
        s(&img),
        "--integrity",
        "hmac-sha256",
        "--key-file",
        s(&pass),
    ];
    let out = sc(&[&luks[..], &["--batch"]].concat(), b"");
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("for GELI"));
    // geli(8)'s own spelling: init -a, dump shows aalgo by geli's name.
    let args = [
        "geli",
        "init",
        "-a",
        "hmac/sha384",
        "-e",
        "NULL",
        "-i",
        "0",
        "-J",
        s(&pass),
    ];
    ok(sc(&[&args[..], &["-B", "none", s(&img)]].concat(), b""));
    let dump = ok(sc(&["dump", s(&img)], b""));
    assert!(dump.contains("aalgo:      HMAC/SHA384"), "{dump}");
    assert!(dump.contains("ealgo:      NULL"), "{dump}");
    assert!(dump.contains("flags:      0x210"), "{dump}");
}
