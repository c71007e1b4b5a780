//! The metadata of reencryptions cryptsetup started: its reencryption digest verifies
//! here with the two volume keys cryptsetup was given, and not with them swapped.

use crate::common::*;
use sectorcrypt_testkit::{require, run};
use sectorcrypt_volume::luks::luks2::reencrypt::{layout, KeyOf, Span};
use sectorcrypt_volume::luks::Luks2;
use sectorcrypt_volume::Header;
use std::path::Path;
use std::process::Command;

/// cryptsetup's options that keep it off /run, the keyring and long KDF benchmarks.
const QUIET: [&str; 7] = [
    "-q",
    "--disable-locks",
    "--disable-keyring",
    "--pbkdf",
    "pbkdf2",
    "--pbkdf-force-iterations",
    "1000",
];

/// A 24 MiB LUKS2 image (8 MiB of data) with volume key `old`, passphrase in `pass`.
fn format(dir: &Path, old: &Path, pass: &Path) -> std::path::PathBuf {
    let img = dir.join("v.img");
    make_file(&img, 24 * MIB, &[]);
    run(Command::new("cryptsetup")
        .args(["luksFormat", "--type", "luks2", "--volume-key-file"])
        .arg(old)
        .arg("--key-file")
        .arg(pass)
        .args(QUIET)
        .arg(&img));
    img
}

/// Checks the reencryption digest of `img` with the keys, then with them swapped.
fn check_digest(img: &Path, old: &[u8], new: &[u8]) {
    let f = open_ro(img);
    let h = Header::read(&f).unwrap();
    let l2 = h.downcast_ref::<Luks2>().expect("a luks2 header");
    l2.verify_reencrypt_digest(Some(old), Some(new)).unwrap();
    let e = l2
        .verify_reencrypt_digest(Some(new), Some(old))
        .unwrap_err();
    assert!(e.to_string().contains("does not match"), "{e}");
}

fn keys(dir: &Path) -> (Vec<u8>, Vec<u8>, std::path::PathBuf, std::path::PathBuf) {
    let old: Vec<u8> = (0..64u8).collect();
    let new: Vec<u8> = (0..64u8).map(|b| b.wrapping_mul(7) ^ 0x5a).collect();
    let (o, n) = (
        file_with(dir, "old.key", &old),
        file_with(dir, "new.key", &new),
    );
    (old, new, o, n)
}

#[test]
fn digest_of_cryptsetup_init_verifies_for_each_resilience() {
    require!("cryptsetup");
    for resilience in ["checksum", "journal", "none"] {
        let dir = tempfile::tempdir().unwrap();
        let (old, new, o, n) = keys(dir.path());
        let pass = file_with(dir.path(), "pass", b"correct horse");
        let img = format(dir.path(), &o, &pass);
        run(Command::new("cryptsetup")
            .args(["reencrypt", "--init-only", "--resilience", resilience])
            .arg("--volume-key-file")
            .arg(&n)
            .arg("--key-file")
            .arg(&pass)
            .args(QUIET)
            .arg(&img));
        check_digest(&img, &old, &new);
    }
}

/// A cryptsetup killed after its second hotzone left a segment `in-reencryption`; the
/// digest (over the backup segments only) still verifies.
#[test]
fn digest_of_cryptsetup_crash_state_verifies() {
    require!("cryptsetup", "strace");
    let dir = tempfile::tempdir().unwrap();
    let (old, new, o, n) = keys(dir.path());
    let pass = file_with(dir.path(), "pass", b"correct horse");
    let img = format(dir.path(), &o, &pass);
    let out = Command::new("timeout")
        .args(["60", "strace", "-f", "-o", "/dev/null"])
        .args(["-e", "inject=fdatasync:signal=SIGKILL:when=2"])
        .args(["cryptsetup", "reencrypt", "--force-offline-reencrypt"])
        .args(["--hotzone-size", "1M", "--volume-key-file"])
        .arg(&n)
        .arg("--key-file")
        .arg(&pass)
        .args(QUIET)
        .arg(&img)
        .output()
        .unwrap();
    assert!(!out.status.success(), "cryptsetup was not stopped");
    let json = run(Command::new("cryptsetup")
        .args(["luksDump", "--dump-json-metadata"])
        .arg(&img))
    .stdout;
    let text = String::from_utf8_lossy(&json);
    assert!(text.contains("in-reencryption"), "no crash state: {text}");
    check_digest(&img, &old, &new);
    // The first 1 MiB hotzone is done, the second was being written.
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    let l2 = h.downcast_ref::<Luks2>().unwrap();
    let d = 16 * MIB;
    let span = |offset, size, key| Span { offset, size, key };
    assert_eq!(
        layout(l2.json()).unwrap(),
        [
            span(d, Some(MIB), KeyOf::New),
            span(d + MIB, Some(MIB), KeyOf::Hot),
            span(d + 2 * MIB, None, KeyOf::Old),
        ]
    );
}

/// Opening a volume in the middle of a reencryption is refused, with what to run: a resume
/// after a clean stop, a repair first after a crash.
#[test]
fn open_during_reencryption_is_refused_with_the_next_step() {
    require!("cryptsetup", "strace");
    let dir = tempfile::tempdir().unwrap();
    let (_, _, o, n) = keys(dir.path());
    let pass = file_with(dir.path(), "pass", b"correct horse");
    let img = format(dir.path(), &o, &pass);
    run(Command::new("cryptsetup")
        .args(["reencrypt", "--init-only", "--volume-key-file"])
        .arg(&n)
        .arg("--key-file")
        .arg(&pass)
        .args(QUIET)
        .arg(&img));
    let refusal = |img: &Path| {
        let f = open_ro(img);
        let h = Header::read(&f).unwrap();
        match h.unlock(&f, b"correct horse") {
            Ok(_) => panic!("a volume in reencryption was opened"),
            Err(e) => e.to_string(),
        }
    };
    let e = refusal(&img);
    assert!(e.contains("online-reencrypt-v2"), "{e}");
    assert!(e.contains("--resume-only") && !e.contains("repair"), "{e}");
    let out = Command::new("timeout")
        .args(["60", "strace", "-f", "-o", "/dev/null"])
        .args(["-e", "inject=fdatasync:signal=SIGKILL:when=1"])
        .args(["cryptsetup", "reencrypt", "--force-offline-reencrypt"])
        .args(["--resume-only", "--hotzone-size", "1M", "--key-file"])
        .arg(&pass)
        .args(QUIET)
        .arg(&img)
        .output()
        .unwrap();
    assert!(!out.status.success(), "cryptsetup was not stopped");
    let e = refusal(&img);
    assert!(e.contains("cryptsetup repair"), "{e}");
}
