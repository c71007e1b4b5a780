//! GELI images read by GRUB (`grub-fstest -C`, Debian's grub-common): a FAT filesystem with
//! a known file is wrapped into a GELI image, GRUB unlocks it with the passphrase on its
//! standard input, lists the root and copies the file out, which must be byte-exact.
//!
//! Every case runs twice: on images made by the independent Python model
//! (`tests/geli_ref.py`, which proves the harness and GRUB agree on the format), and on
//! images made by `sectorcrypt format --type geli` + `sectorcrypt write`, which skip with a
//! printed reason while the binary has no GELI support. GRUB reads no keyfiles
//! (grub-core/disk/geli.c has none), so keyfile images are not offered to it.

mod support;
#[macro_use]
#[path = "support/geli.rs"]
mod geli;

use geli::{body, fat_image, image, mbr, sectorcrypt_image, ModelImage};
use sectorcrypt_testkit::require;
use std::path::Path;
use std::process::{Command, Output};
use support::s;

const PASS: &[u8] = b"grub reads geli";
const FILE: &str = "hello.bin";

/// Every cipher GRUB reads, each at both sector sizes, iterations 0 and > 0 spread over them.
const CASES: [ModelImage<'static>; 10] = [
    image("aes-xts", 128, 512, 0, 7),
    image("aes-xts", 128, 4096, 1000, 7),
    image("aes-xts", 256, 512, 1000, 7),
    image("aes-xts", 256, 4096, 0, 7),
    image("aes-cbc", 128, 512, 0, 7),
    image("aes-cbc", 128, 4096, 1000, 7),
    image("aes-cbc", 192, 512, 1000, 7),
    image("aes-cbc", 192, 4096, 0, 7),
    image("aes-cbc", 256, 512, 0, 7),
    image("aes-cbc", 256, 4096, 1000, 7),
];

/// Who makes the GELI images of a run.
#[derive(Clone, Copy, Debug)]
enum Maker {
    Model,
    Sectorcrypt,
}

impl Maker {
    fn make(self, c: &ModelImage, img: &Path, size: u64, puts: &[(u64, &Path)], pass: &Path) {
        match self {
            Maker::Model => c.create(img, size, puts, pass),
            Maker::Sectorcrypt => sectorcrypt_image(c, img, size, puts, pass),
        }
    }
}

/// `grub-fstest -C IMG ARGS` with `passphrase` and a newline on its standard input.
fn grub(img: &Path, passphrase: &[u8], args: &[&str]) -> Output {
    use std::io::Write;
    let mut child = Command::new("grub-fstest")
        .arg("-C")
        .arg(img)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run grub-fstest");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(passphrase).expect("passphrase");
    stdin.write_all(b"\n").expect("newline");
    drop(stdin);
    child.wait_with_output().expect("wait for grub-fstest")
}

/// GRUB lists `root` (a GRUB device path such as `(crypto0)/`) in `img` and copies `FILE`
/// out of it; both must succeed, the listing must name the file and the copy equal `want`.
fn grub_reads(img: &Path, root: &str, want: &[u8], what: &str) {
    let ls = grub(img, PASS, &["ls", root]);
    let listing = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.status.success() && listing.contains(FILE),
        "{what}: grub-fstest ls {root} ({}): {listing}\n{}",
        ls.status,
        String::from_utf8_lossy(&ls.stderr)
    );
    let dir = img.parent().expect("a parent folder");
    let out = dir.join("grub.out");
    let _ = std::fs::remove_file(&out);
    let cp = grub(img, PASS, &["cp", &format!("{root}{FILE}"), s(&out)]);
    assert!(
        cp.status.success(),
        "{what}: grub-fstest cp ({}): {}",
        cp.status,
        String::from_utf8_lossy(&cp.stderr)
    );
    let got = std::fs::read(&out).expect("GRUB's copy");
    assert!(
        got == want,
        "{what}: GRUB's copy of {FILE} differs ({} bytes, want {})",
        got.len(),
        want.len()
    );
}

/// Writes the passphrase file and a 2 MiB FAT filesystem holding `FILE`; returns the file.
fn setup(dir: &Path) -> Vec<u8> {
    std::fs::write(dir.join("pass"), PASS).expect("passphrase file");
    let want = body(150_000, 7);
    fat_image(&dir.join("fs.img"), 2, &[(FILE, &want)]);
    want
}

fn every_cipher(maker: Maker) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let want = setup(d);
    let (fs, pass, img) = (d.join("fs.img"), d.join("pass"), d.join("geli.img"));
    for c in &CASES {
        let what = format!(
            "{maker:?} {} {} sector {} iterations {}",
            c.cipher, c.keylen, c.sector, c.iterations
        );
        let _ = std::fs::remove_file(&img);
        maker.make(c, &img, (2 << 20) + 4096 + 512, &[(0, &fs)], &pass);
        grub_reads(&img, "(crypto0)/", &want, &what);
    }
}

/// A sparse image over one key zone (2^20 sectors of 512 bytes): sector 0 holds an MBR
/// whose one partition, holding the filesystem, starts 2048 sectors past the zone boundary.
/// Versions 1 to 7 differ in where the keys of zone 1 come from (one data key before 5, the
/// IV key before 7, the data key from 7), so each is read once.
fn beyond_zone(maker: Maker, versions: &[u32]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    let want = setup(d);
    let (fs, pass, img, table) = (
        d.join("fs.img"),
        d.join("pass"),
        d.join("big.img"),
        d.join("mbr"),
    );
    let start = (1u32 << 20) + 2048;
    std::fs::write(&table, mbr(start, 4096)).expect("MBR");
    let offset = u64::from(start) * 512;
    for (i, &version) in versions.iter().enumerate() {
        let (cipher, keylen) = [("aes-xts", 128), ("aes-cbc", 256), ("aes-xts", 256)][i % 3];
        let c = image(cipher, keylen, 512, 0, version);
        let what =
            format!("{maker:?} version {version} {cipher} {keylen}, file past the zone boundary");
        let _ = std::fs::remove_file(&img);
        maker.make(
            &c,
            &img,
            offset + (4 << 20),
            &[(0, &table), (offset, &fs)],
            &pass,
        );
        grub_reads(&img, "(crypto0,msdos1)/", &want, &what);
    }
}

#[test]
fn grub_reads_model_images_every_cipher() {
    require!("grub-fstest", "mcopy");
    require_model!();
    every_cipher(Maker::Model);
}

#[test]
fn grub_reads_model_images_beyond_zone_every_version() {
    require!("grub-fstest", "mcopy");
    require_model!();
    beyond_zone(Maker::Model, &[1, 2, 3, 4, 5, 6, 7]);
}

/// The harness is no rubber stamp: a wrong passphrase, and a model image whose version-7
/// zone keys come from the IV key (the rule of versions before 7), are not read.
#[test]
fn grub_refuses_wrong_passphrase_and_wrong_zone_keys() {
    require!("grub-fstest", "mcopy");
    require_model!();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    setup(d);
    let (fs, pass, img) = (d.join("fs.img"), d.join("pass"), d.join("geli.img"));
    CASES[0].create(&img, (2 << 20) + 4096 + 512, &[(0, &fs)], &pass);
    // grub-fstest's `ls` exits 0 after "access denied"; its `cp` fails.
    let out = grub(&img, b"not the passphrase", &["ls", "(crypto0)/"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(FILE) && err.contains("access denied"),
        "GRUB with a wrong passphrase: {err}"
    );
    let out = grub(
        &img,
        b"not the passphrase",
        &["cp", &format!("(crypto0)/{FILE}"), s(&d.join("x"))],
    );
    assert!(
        !out.status.success(),
        "grub-fstest cp succeeded with a wrong passphrase"
    );

    // Version 6 keys under a version 7 header: the zone-1 data is enciphered with keys
    // GRUB does not derive for version 7.
    let table = d.join("mbr");
    let start = (1u32 << 20) + 2048;
    std::fs::write(&table, mbr(start, 4096)).expect("MBR");
    let offset = u64::from(start) * 512;
    let big = d.join("big.img");
    let v6 = image("aes-xts", 128, 512, 0, 6);
    v6.create(
        &big,
        offset + (4 << 20),
        &[(0, &table), (offset, &fs)],
        &pass,
    );
    relabel_version(&big, 7);
    let out = grub(
        &big,
        PASS,
        &["cp", &format!("(crypto0,msdos1)/{FILE}"), s(&d.join("x"))],
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Slot 0 opened"),
        "GRUB did not open the relabelled image's slot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "GRUB read data enciphered with the wrong zone keys"
    );
}

/// Rewrites the version field of `img`'s metadata (last 512 bytes) and its MD5.
fn relabel_version(img: &Path, version: u32) {
    let mut bytes = std::fs::read(img).expect("read image");
    let at = bytes.len() - 512;
    bytes[at + 16..at + 20].copy_from_slice(&version.to_le_bytes());
    let md5 = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(&bytes[at..at + 495])?;
            c.wait_with_output()
        })
        .expect("md5sum");
    let hex = String::from_utf8_lossy(&md5.stdout);
    let digest = sectorcrypt_testkit::unhex(&hex[..32]);
    bytes[at + 495..at + 511].copy_from_slice(&digest);
    std::fs::write(img, bytes).expect("write image");
}

#[test]
fn grub_reads_sectorcrypt_images_every_cipher() {
    require!("grub-fstest", "mcopy");
    require_sectorcrypt_geli!();
    every_cipher(Maker::Sectorcrypt);
}

#[test]
fn grub_reads_sectorcrypt_images_beyond_zone() {
    require!("grub-fstest", "mcopy");
    require_sectorcrypt_geli!();
    beyond_zone(Maker::Sectorcrypt, &[7]);
}
