//! Ceph RBD compatibility of the volume commands: `format --rbd-object-size` lays a
//! volume out as librbd's `rbd encryption format` does (checked by cryptsetup), such a
//! volume imported into a real cluster is decrypted by librbd itself (qemu's rbd driver
//! with `encrypt.format`), and images `rbd encryption format` made, filled through librbd's
//! own encryption, open here from a raw `rbd export` and through the RBD store; the RBD
//! store itself (`store.rs`, with the `rbd` feature) reads, writes, flushes, discards and
//! serves all three formats. The cluster tests share one
//! single-node cluster per run (`scripts/ceph.sh`) and skip with the printed reason where
//! it cannot start.

#[cfg(feature = "rbd")]
#[path = "../support/served.rs"]
mod served;
#[cfg(feature = "rbd")]
mod store;
#[path = "../support/mod.rs"]
mod support;
#[path = "../support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::ceph::Cluster;
use sectorcrypt_testkit::{pattern, require, require_ceph, run, run_stdout};
use std::path::Path;
use std::process::Command;
use support::{code, ok, s, sc};
use volumes::{key_file, FAST};

const MIB: u64 = 1 << 20;

/// The data offset and sector size `cryptsetup luksDump` reports.
fn layout(img: &Path) -> (u64, u64) {
    let dump = run_stdout(Command::new("cryptsetup").arg("luksDump").arg(img));
    let value = |key: &str| {
        dump.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.trim_start_matches(':').trim();
            v.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    match value("Payload offset") {
        Some(sectors) => (sectors * 512, 512),
        None => (value("offset").unwrap(), value("sector").unwrap()),
    }
}

/// `sectorcrypt format IMG --size SIZE --type T --rbd-object-size OBJ` with a fast keyslot.
fn format_for_rbd(img: &Path, size: &str, t: &str, obj: &str, key: &Path) {
    let args = [
        "format",
        s(img),
        "--size",
        size,
        "--type",
        t,
        "--rbd-object-size",
        obj,
    ];
    ok(sc(
        &[&args[..], &["--key-file", s(key)], &FAST].concat(),
        b"",
    ));
}

#[test]
fn format_rbd_object_size_aligns_the_data_as_librbd() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let k = key_file(dir.path(), "k", "pass");
    // (type, object size, data offset librbd gives, sector size librbd sets)
    for (t, obj, offset, sector) in [
        ("luks2", "4M", 16 * MIB, 4096),
        ("luks2", "32M", 32 * MIB, 4096),
        ("luks1", "4M", 4 * MIB, 512),
        ("luks1", "8M", 8 * MIB, 512),
    ] {
        let img = dir.path().join(format!("{t}-{obj}.img"));
        format_for_rbd(&img, "64M", t, obj, &k);
        assert_eq!(layout(&img), (offset, sector), "{t} with {obj} objects");
        std::fs::remove_file(&img).unwrap();
    }
    for bad in ["3M", "2K", "64M", "x"] {
        let img = dir.path().join("bad.img");
        let args = ["format", s(&img), "--size", "64M", "--rbd-object-size", bad];
        let o = sc(&[&args[..], &["--key-file", s(&k)], &FAST].concat(), b"");
        assert_eq!(code(&o), 2, "{bad}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(!img.exists(), "{bad}: nothing is created");
    }
}

/// `--image-opts` for qemu with librbd's decryption of `rbd/image` (`luks` or `luks2`).
fn qemu_opts(c: &Cluster, image: &str, format: &str) -> String {
    format!(
        "driver=rbd,pool=rbd,image={image},conf={},user=admin,encrypt.format={format},\
         encrypt.key-secret=sec0",
        c.conf.display()
    )
}

/// A qemu tool (from the private qemu with the rbd driver) with the passphrase secret.
fn qemu_img(c: &Cluster, qemu: &Path, verb: &str, pass: &Path) -> Command {
    let mut cmd = c.command(qemu.join("bin/qemu-img"));
    cmd.arg(verb)
        .arg("--object")
        .arg(format!("secret,id=sec0,file={}", pass.display()));
    cmd
}

/// The plaintext of `rbd/image` as librbd decrypts it, or `None` (printed) without a qemu
/// rbd driver. `dd`, not `convert`: convert trusts block status, which librbd 16 answers
/// for the raw image's offsets, not the decrypted ones, so it would skip data whose raw
/// offset is an object never written (a keyslot area's zeros).
pub fn dd_from_librbd(
    c: &Cluster,
    image: &str,
    format: &str,
    pass: &Path,
    dir: &Path,
) -> Option<Vec<u8>> {
    let qemu = match c.qemu() {
        Ok(q) => q,
        Err(why) => {
            sectorcrypt_testkit::skipped!(
                "librbd's decryption not checked: no qemu rbd driver ({why})"
            );
            return None;
        }
    };
    let out = dir.join("librbd.out");
    run(qemu_img(c, qemu, "dd", pass)
        .arg("--image-opts")
        .arg(format!("if={}", qemu_opts(c, image, format)))
        .arg(format!("of={}", out.display()))
        .arg("bs=4M"));
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    Some(bytes)
}

/// Volumes formatted here for RBD (pbkdf2 keyslots) and written here, imported with the
/// same object size, are decrypted by librbd to the same plaintext.
#[test]
fn volumes_formatted_here_load_in_librbd() {
    let c = require_ceph!();
    if let Err(why) = c.qemu() {
        return sectorcrypt_testkit::skipped!("skipped: no qemu rbd driver ({why})");
    }
    let dir = tempfile::tempdir().unwrap();
    let k = key_file(dir.path(), "k", "librbd loads this");
    for (t, obj, qemu_format) in [("luks2", "8M", "luks2"), ("luks1", "4M", "luks")] {
        let img = dir.path().join("v.img");
        format_for_rbd(&img, "40M", t, obj, &k);
        let plain = pattern(
            ((40 - if t == "luks2" { 16 } else { 4 }) * MIB) as usize,
            21,
        );
        let input = dir.path().join("plain");
        std::fs::write(&input, &plain).unwrap();
        ok(sc(
            &["write", s(&img), "--input", s(&input), "--key-file", s(&k)],
            b"",
        ));
        let name = format!("here-{t}");
        c.rbd(&[
            "import",
            "--no-progress",
            "--object-size",
            obj,
            s(&img),
            &format!("rbd/{name}"),
        ]);
        let out = dd_from_librbd(c, &name, qemu_format, &k, dir.path()).unwrap();
        assert!(out == plain, "{t}: librbd's plaintext");
        c.rbd(&["rm", "--no-progress", &format!("rbd/{name}")]);
        std::fs::remove_file(&img).unwrap();
    }
}

/// Images made by `rbd encryption format` and filled through librbd's own encryption open
/// here from a raw export: same passphrase, same plaintext.
#[test]
fn rbd_encryption_format_images_open_from_a_raw_export() {
    let c = require_ceph!();
    let qemu = match c.qemu() {
        Ok(q) => q,
        Err(why) => return sectorcrypt_testkit::skipped!("skipped: no qemu rbd driver ({why})"),
    };
    let dir = tempfile::tempdir().unwrap();
    // rbd strips one trailing newline of a passphrase file; this one has none.
    let k = key_file(dir.path(), "k", "made by rbd");
    for (t, qemu_format, offset) in [("luks1", "luks", 4 * MIB), ("luks2", "luks2", 16 * MIB)] {
        let name = format!("rbd-{t}");
        let image = format!("rbd/{name}");
        c.rbd(&["create", &image, "--size", "32M"]);
        c.rbd(&["encryption", "format", &image, t, s(&k)]);
        let plain = pattern((32 * MIB - offset) as usize, 22);
        let input = dir.path().join("plain");
        std::fs::write(&input, &plain).unwrap();
        run(qemu_img(c, qemu, "convert", &k)
            .args(["-n", "-f", "raw"])
            .arg(&input)
            .arg("--target-image-opts")
            .arg(qemu_opts(c, &name, qemu_format)));
        let raw = dir.path().join("raw.img");
        c.rbd(&["export", "--no-progress", &image, s(&raw)]);
        // Through the rbd store and the raw export with one unlock (argon2id with 1 GiB,
        // as rbd makes it, is seconds), or through the command on the raw export.
        #[cfg(feature = "rbd")]
        store::open_through_the_store(c, &image, b"made by rbd", &plain, &raw);
        #[cfg(not(feature = "rbd"))]
        {
            let out = dir.path().join("out");
            ok(sc(
                &["read", s(&raw), "--output", s(&out), "--key-file", s(&k)],
                b"",
            ));
            assert!(std::fs::read(&out).unwrap() == plain, "{t}: the plaintext");
        }
        c.rbd(&["rm", "--no-progress", &image]);
        std::fs::remove_file(&raw).unwrap();
    }
}

/// A bad spec is bad input whatever the build; without the `rbd` feature a good one is
/// refused with the reason.
#[test]
fn rbd_specs_are_checked_and_a_build_without_librbd_says_so() {
    use sectorcrypt_image::rbd::{is_rbd, open_spec as open_rbd};
    assert!(is_rbd("rbd:pool/image") && !is_rbd("disk.img"));
    let e = open_rbd("rbd:image-without-pool", false).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{}", e.message());
    assert!(e.message().contains("no pool"), "{}", e.message());
    if cfg!(not(feature = "rbd")) {
        let e = open_rbd("rbd:rbd/image", false).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{}", e.message());
        assert!(e.message().contains("feature `rbd`"), "{}", e.message());
    }
}
