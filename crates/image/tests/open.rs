//! `sectorcrypt_image::open`: volumes that cryptsetup made (attached and detached
//! headers) open by path, and what they hold is what dm-crypt's formula (computed with
//! OpenSSL) says; the errors a library user meets each have their own class.

use openssl::symm::Mode as Direction;
use sectorcrypt_image::{open, Class, OpenOptions};
use sectorcrypt_testkit::reference::dm_crypt;
use sectorcrypt_testkit::{pattern, require, run};
use sectorcrypt_volume::lock::{claim_use, Mode};
use std::fs::{File, OpenOptions as FileOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;
const PASS: &[u8] = b"open sesame";

/// A LUKS2 volume of `size` bytes formatted by cryptsetup with the volume key `key`
/// (aes-xts-plain64, 512-byte sectors, pbkdf2 at its minimum), the header detached in
/// `dir/hdr` when `detached`. Returns the image and the header file.
fn cryptsetup_volume(dir: &Path, key: &[u8], detached: bool) -> (PathBuf, Option<PathBuf>) {
    let img = dir.join("v.img");
    File::create(&img).unwrap().set_len(20 * MIB).unwrap();
    let (keyfile, pass) = (dir.join("key"), dir.join("pass"));
    std::fs::write(&keyfile, key).unwrap();
    std::fs::write(&pass, PASS).unwrap();
    let hdr = dir.join("hdr");
    let mut cmd = Command::new("cryptsetup");
    cmd.args([
        "luksFormat",
        "-q",
        "--type",
        "luks2",
        "--cipher",
        "aes-xts-plain64",
    ])
    .args(["--key-size", "512", "--sector-size", "512"])
    .args(["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"])
    .arg("--volume-key-file")
    .arg(&keyfile)
    .arg("--key-file")
    .arg(&pass);
    if detached {
        File::create(&hdr).unwrap().set_len(16 * MIB).unwrap();
        cmd.arg("--header").arg(&hdr);
    }
    run(cmd.arg(&img));
    (img, detached.then_some(hdr))
}

/// The volume's data offset as cryptsetup reports it, in bytes.
fn data_offset(header: &Path) -> u64 {
    let out = run(Command::new("cryptsetup").arg("luksDump").arg(header));
    let dump = String::from_utf8(out.stdout).unwrap();
    let line = dump
        .lines()
        .find(|l| l.trim_start().starts_with("offset:"))
        .expect("a data segment offset");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn cryptsetup_volumes_open_by_path_and_hold_what_dm_crypt_says() {
    require!("cryptsetup");
    let key = pattern(64, 7);
    for detached in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (img, hdr) = cryptsetup_volume(dir.path(), &key, detached);
        let offset = data_offset(hdr.as_ref().unwrap_or(&img));
        // Ciphertext written as dm-crypt would, read as plaintext through `open`.
        let plain = pattern(64 * 1024, 11);
        let at = 3 * 4096;
        let cipher = dm_crypt(
            "aes-xts-plain64",
            &key,
            512,
            1,
            at / 512,
            &plain,
            Direction::Encrypt,
        );
        let file = FileOptions::new().write(true).open(&img).unwrap();
        file.write_all_at(&cipher, offset + at).unwrap();
        let opts = OpenOptions {
            header: hdr.clone(),
            ..OpenOptions::default()
        };
        let opened = open(&img, PASS, &opts).unwrap();
        assert_eq!(opened.format, "luks2");
        assert_eq!(opened.unlocked.cipher, "aes-xts-plain64");
        assert_eq!(opened.unlocked.data_offset, offset);
        assert_eq!(
            opened.volume.size(),
            20 * MIB - if detached { 0 } else { offset }
        );
        let mut got = vec![0u8; plain.len()];
        opened.volume.read_at(&mut got, at).unwrap();
        assert!(got == plain, "detached={detached}: plaintext differs");
        // A write lands as dm-crypt's formula says, at an odd offset.
        let new = pattern(5000, 12);
        let odd = 1 << 20 | 77;
        opened.volume.write_at(&new, odd).unwrap();
        opened.volume.flush().unwrap();
        drop(opened);
        let (first, len) = (odd / 512 * 512, 5000u64.div_ceil(512) * 512 + 512);
        let mut raw = vec![0u8; len as usize];
        File::open(&img)
            .unwrap()
            .read_exact_at(&mut raw, offset + first)
            .unwrap();
        let dec = dm_crypt(
            "aes-xts-plain64",
            &key,
            512,
            1,
            first / 512,
            &raw,
            Direction::Decrypt,
        );
        let skip = (odd - first) as usize;
        assert!(
            dec[skip..skip + new.len()] == new[..],
            "detached={detached}"
        );
    }
}

#[test]
fn each_failure_has_its_own_error() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = cryptsetup_volume(dir.path(), &pattern(64, 8), false);
    let ro = OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    };
    let wrong = open(&img, b"open sesamE", &ro).unwrap_err();
    assert_eq!(wrong.class(), Class::WrongPassphrase, "{wrong:?}");
    let missing = open(&dir.path().join("nothing"), PASS, &ro).unwrap_err();
    assert_eq!(missing.class(), Class::NotFound, "{missing:?}");
    assert_eq!(missing.exit_code(), 2, "{missing:?}");
    let plain = dir.path().join("plain.img");
    File::create(&plain).unwrap().set_len(4 * MIB).unwrap();
    let no_header = open(&plain, PASS, &ro).unwrap_err();
    assert_eq!(no_header.class(), Class::NoHeader, "{no_header:?}");
    // Read-only refuses writes and leaves the image as it was.
    let before = std::fs::read(&img).unwrap();
    let opened = open(&img, PASS, &ro).unwrap();
    assert!(opened.volume.write_at(&[1; 512], 0).is_err());
    drop(opened);
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a read-only open wrote"
    );
    // An exclusive use claim (an erase or header restore running) is refused at once.
    let holder = FileOptions::new()
        .read(true)
        .write(true)
        .open(&img)
        .unwrap();
    let claim = claim_use(&holder, Mode::Exclusive, false).unwrap().unwrap();
    let busy = open(&img, PASS, &ro).unwrap_err();
    assert!(
        busy.class() == Class::InUse && busy.message().contains("in use"),
        "{busy:?}"
    );
    drop(claim);
    open(&img, PASS, &ro).unwrap();
}

/// Two read-write opens of one volume in one process are two engines, as two processes
/// would be: each reads, changes and writes back whole sectors for a sub-sector write.
/// The second open is refused (naming the holder); before the writer claim it opened, and
/// the single-byte writes interleaved through both lost each other.
#[test]
fn a_second_writer_is_refused_so_no_sub_sector_write_is_lost() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = cryptsetup_volume(dir.path(), &pattern(64, 7), false);
    let rw = OpenOptions::default();
    let a = open(&img, PASS, &rw).unwrap();
    let b = match open(&img, PASS, &rw) {
        Err(e) if e.class() == Class::InUse => {
            let m = e.message();
            let me = format!("PID {} (", std::process::id());
            assert!(m.contains(&me) && m.contains("second writer"), "{m}");
            return;
        }
        Err(e) => panic!("{e:?}"),
        Ok(b) => b,
    };
    const WRITES: u64 = 20_000;
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for (vol, parity) in [(&a.volume, 0), (&b.volume, 1)] {
            let start = &start;
            s.spawn(move || {
                start.wait();
                for i in 0..WRITES {
                    vol.write_at(&[0xa0 | parity as u8], 2 * i + parity)
                        .unwrap();
                }
            });
        }
    });
    drop((a, b));
    let got = open(&img, PASS, &OpenOptions::default()).unwrap();
    let mut buf = vec![0; 2 * WRITES as usize];
    got.volume.read_at(&mut buf, 0).unwrap();
    let lost = (0..buf.len())
        .filter(|&i| buf[i] != 0xa0 | (i % 2) as u8)
        .count();
    panic!(
        "a second writer was let in: {lost} of {} writes lost",
        buf.len()
    );
}

/// The writer claim of a detached header's file too; readers share it, a reader and a
/// writer exclude each other unless the reader is `shared`.
#[test]
fn writer_claims_cover_the_header_file_and_readers_opt_in_to_sharing() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, hdr) = cryptsetup_volume(dir.path(), &pattern(64, 9), true);
    let with = |read_only, shared| OpenOptions {
        header: hdr.clone(),
        read_only,
        shared,
        ..OpenOptions::default()
    };
    let r1 = open(&img, PASS, &with(true, false)).unwrap();
    let r2 = open(&img, PASS, &with(true, false)).unwrap();
    let w = open(&img, PASS, &with(false, false)).unwrap_err();
    assert!(
        w.class() == Class::InUse && w.message().contains("open read-only by a reader, PID"),
        "{w:?}"
    );
    drop((r1, r2));
    let writer = open(&img, PASS, &with(false, false)).unwrap();
    let r = open(&img, PASS, &with(true, false)).unwrap_err();
    assert!(
        r.class() == Class::InUse
            && r.message().contains("--shared")
            && r.message().contains("a writer, PID"),
        "{r:?}"
    );
    let shared = open(&img, PASS, &with(true, true)).unwrap();
    drop(shared);
    // The header file alone is claimed too: another data file beside the same header.
    let other = dir.path().join("other.img");
    std::fs::copy(&img, &other).unwrap();
    let h = open(&other, PASS, &with(false, false)).unwrap_err();
    assert!(
        h.class() == Class::InUse
            && h.message()
                .contains(hdr.as_ref().unwrap().to_str().unwrap()),
        "{h:?}"
    );
    drop(writer);
}
