//! The C library on remote stores: a C program (`tests/c/sectorcrypt_remote.c`) opens,
//! reads and writes a LUKS2 volume that cryptsetup made, served by nbdkit over a Unix
//! socket and over TCP on 127.0.0.1, by the NBD URI `sectorcrypt read` takes; what it
//! read is OpenSSL's ciphertext decrypted, and what it wrote lands in the image file as
//! dm-crypt's formula says. It also checks the options struct's size rule and the codes
//! of an unreachable export and a wrong passphrase.

use openssl::symm::Mode as Direction;
use sectorcrypt_testkit::nbdkit::Nbdkit;
use sectorcrypt_testkit::reference::dm_crypt;
use sectorcrypt_testkit::{pattern, require, run};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;
const PLAIN_AT: u64 = 12288;
const NEW_AT: u64 = MIB + 77;
const ABI_MAJOR: &str = env!("SECTORCRYPT_ABI_MAJOR");

/// The C program, linked to this build's shared library (found at run time by its
/// SONAME through a link in `dir`).
fn build_program(dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap();
    let run_dir = dir.join("run");
    std::fs::create_dir(&run_dir).unwrap();
    std::os::unix::fs::symlink(
        lib.join("libsectorcrypt.so"),
        run_dir.join(format!("libsectorcrypt.so.{ABI_MAJOR}")),
    )
    .unwrap();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join("sectorcrypt_remote");
    run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(format!("-I{}", crate_dir.join("include").display()))
        .arg(crate_dir.join("tests/c/sectorcrypt_remote.c"))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg("-lsectorcrypt")
        .arg(format!("-Wl,-rpath,{}", run_dir.display())));
    out
}

/// A LUKS2 volume of 20 MiB made by cryptsetup with volume key `key`, OpenSSL's
/// ciphertext of `plain` at [`PLAIN_AT`] of its data; returns its data offset.
fn volume(img: &Path, dir: &Path, key: &[u8], plain: &[u8]) -> u64 {
    File::create(img).unwrap().set_len(20 * MIB).unwrap();
    std::fs::write(dir.join("vk"), key).unwrap();
    run(Command::new("cryptsetup")
        .args([
            "luksFormat",
            "-q",
            "--type",
            "luks2",
            "--cipher",
            "aes-xts-plain64",
        ])
        .args([
            "--key-size",
            "512",
            "--sector-size",
            "512",
            "--offset",
            "32768",
        ])
        .args(["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"])
        .arg("--volume-key-file")
        .arg(dir.join("vk"))
        .arg("--key-file")
        .arg(dir.join("pass"))
        .arg(img));
    let offset = 16 * MIB;
    let cipher = dm_crypt(
        "aes-xts-plain64",
        key,
        512,
        1,
        PLAIN_AT / 512,
        plain,
        Direction::Encrypt,
    );
    File::options()
        .write(true)
        .open(img)
        .unwrap()
        .write_all_at(&cipher, offset + PLAIN_AT)
        .unwrap();
    offset
}

/// What the program wrote at [`NEW_AT`], decrypted from the image file.
fn written(img: &Path, offset: u64, key: &[u8], len: usize) -> Vec<u8> {
    let (first, end) = (
        NEW_AT / 512 * 512,
        (NEW_AT + len as u64).div_ceil(512) * 512,
    );
    let mut raw = vec![0u8; (end - first) as usize];
    File::open(img)
        .unwrap()
        .read_exact_at(&mut raw, offset + first)
        .unwrap();
    let plain = dm_crypt(
        "aes-xts-plain64",
        key,
        512,
        1,
        first / 512,
        &raw,
        Direction::Decrypt,
    );
    let skip = (NEW_AT - first) as usize;
    plain[skip..skip + len].to_vec()
}

#[test]
fn c_opens_reads_and_writes_a_volume_on_an_nbd_export_by_unix_socket_and_tcp() {
    require!("cc", "cryptsetup", "nbdkit");
    let dir = tempfile::Builder::new()
        .prefix("capi-nbd-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    let program = build_program(d);
    std::fs::write(d.join("pass"), b"correct horse battery").unwrap();
    for (i, tcp) in [false, true].into_iter().enumerate() {
        let key = pattern(64, 40 + i as u64);
        let expected = pattern(64 * 1024, 50 + i as u64);
        let fresh = pattern(5000, 60 + i as u64);
        std::fs::write(d.join("expected.bin"), &expected).unwrap();
        std::fs::write(d.join("new.bin"), &fresh).unwrap();
        let img = d.join(format!("v{i}.img"));
        let offset = volume(&img, d, &key, &expected);
        let file = format!("file={}", img.display());
        let kit = if tcp {
            Nbdkit::tcp(&["file", &file])
        } else {
            Nbdkit::unix(&d.join("kit.sock"), &["file", &file])
        };
        let out = Command::new(&program)
            .arg(kit.uri())
            .arg(d)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} failed ({}):\n{}{}",
            kit.uri(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        drop(kit);
        assert!(
            written(&img, offset, &key, fresh.len()) == fresh,
            "{}: the write is not in the image as dm-crypt's formula says",
            if tcp { "tcp" } else { "unix" }
        );
    }
}

/// GELI from C: a provider whose key is a keyfile alone (no passphrase component), opened
/// over NBD with the keyfile, a keyslot and a thread count in the options.
#[test]
fn c_opens_a_geli_provider_with_a_keyfile_and_no_passphrase_through_the_options() {
    use sectorcrypt_volume::geli::init::{init, InitOptions};
    use sectorcrypt_volume::FileStore;
    require!("cc", "nbdkit");
    let dir = tempfile::Builder::new()
        .prefix("capi-geli-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    let program = build_program(d);
    let img = d.join("g.img");
    File::create(&img).unwrap().set_len(4 * MIB).unwrap();
    let keyfile = pattern(100, 70);
    std::fs::write(d.join("keyfile"), &keyfile).unwrap();
    let expected = pattern(8192, 71);
    std::fs::write(d.join("expected.bin"), &expected).unwrap();
    {
        let store = FileStore::open(&img, true).unwrap();
        let opts = InitOptions {
            iterations: Some(1000),
            use_passphrase: false,
            ..InitOptions::default()
        };
        let (_, u) = init(&store, &opts, &[&keyfile[..]], b"").unwrap();
        let vol = u
            .engine(
                Box::new(store),
                sectorcrypt_volume::engine::EngineOptions::default(),
            )
            .unwrap();
        vol.write_at(&expected, 0).unwrap();
        vol.flush().unwrap();
    }
    let kit = Nbdkit::unix(
        &d.join("kit.sock"),
        &["file", &format!("file={}", img.display())],
    );
    let out = Command::new(&program)
        .arg(kit.uri())
        .arg(d)
        .arg("geli")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed ({}):\n{}{}",
        kit.uri(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same C program on a Ceph RBD image (the `rbd` feature), by the `rbd:` spec
/// `sectorcrypt read` takes: the cryptsetup-made volume imported into the test cluster,
/// read and written through librbd, exported back and checked against dm-crypt's formula.
#[cfg(feature = "rbd")]
#[test]
fn c_opens_reads_and_writes_a_volume_on_an_rbd_image() {
    use sectorcrypt_testkit::require_ceph;
    require!("cc", "cryptsetup");
    let cluster = require_ceph!();
    let dir = tempfile::Builder::new()
        .prefix("capi-rbd-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    let program = build_program(d);
    std::fs::write(d.join("pass"), b"correct horse battery").unwrap();
    let key = pattern(64, 70);
    let expected = pattern(64 * 1024, 71);
    let fresh = pattern(5000, 72);
    std::fs::write(d.join("expected.bin"), &expected).unwrap();
    std::fs::write(d.join("new.bin"), &fresh).unwrap();
    let img = d.join("v.img");
    let offset = volume(&img, d, &key, &expected);
    let name = format!("capi-{}", std::process::id());
    cluster.rbd(&["import", img.to_str().unwrap(), &format!("rbd/{name}")]);
    let spec = cluster.spec(&format!("rbd/{name}"));
    let out = cluster
        .command(&program)
        .arg(&spec)
        .arg(d)
        .output()
        .unwrap();
    let back = d.join("back.img");
    cluster.rbd(&["export", &format!("rbd/{name}"), back.to_str().unwrap()]);
    cluster.rbd(&["rm", &format!("rbd/{name}")]);
    assert!(
        out.status.success(),
        "{spec} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        written(&back, offset, &key, fresh.len()) == fresh,
        "rbd: the write is not in the image as dm-crypt's formula says"
    );
}
