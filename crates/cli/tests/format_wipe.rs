//! Formatting wipes the signatures of every format sectorcrypt knows, as cryptsetup wipes
//! other signatures with blkid: `geli init` (and `format --type geli`) over a LUKS image
//! leaves no LUKS header for cryptsetup or blkid to find; LUKS2 over a GELI provider
//! leaves no GELI metadata in the last sector, where FreeBSD would taste it. `geli init`
//! over an existing volume asks first (`--batch` answers yes). An image holding two
//! valid formats at once is refused, naming both.

mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::require;
use std::path::Path;
use std::process::Command;
use support::{code, ok, s, sc};
use volumes::{key_file, new_volume, FAST};

const GELI_MAGIC: &[u8] = b"GEOM::ELI";

fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Whether cryptsetup says `img` is a LUKS device.
fn is_luks(img: &Path) -> bool {
    Command::new("cryptsetup")
        .arg("isLuks")
        .arg(img)
        .status()
        .unwrap()
        .success()
}

/// What blkid's low-level probe says `img` is (empty when nothing).
fn blkid_type(img: &Path) -> String {
    let out = Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE"])
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether any of the last 512-byte or 4096-byte sectors of `img` starts with GELI's magic.
fn geli_magic_at_end(img: &Path) -> bool {
    let raw = std::fs::read(img).unwrap();
    [512, 4096]
        .iter()
        .any(|&n| raw[raw.len() - n..].starts_with(GELI_MAGIC))
}

#[test]
fn geli_init_over_a_luks2_image_asks_first_then_leaves_no_luks_header() {
    require!("cryptsetup", "blkid");
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    assert!(is_luks(&img));
    assert_eq!(blkid_type(&img), "crypto_LUKS");
    let pass = key_file(dir.path(), "pass", "geli secret\n");
    let init = [
        "geli",
        "init",
        "-J",
        s(&pass),
        "-i",
        "0",
        "-B",
        "none",
        s(&img),
    ];
    // No terminal and no --batch: not confirmed, nothing written.
    let before = std::fs::read(&img).unwrap();
    let out = sc(&init, b"");
    assert_eq!(
        code(&out),
        2,
        "geli init over a LUKS2 volume went ahead: {}",
        err(&out)
    );
    assert!(
        err(&out).contains("LUKS header at offset 0x0") && err(&out).contains("--batch"),
        "{}",
        err(&out)
    );
    assert!(
        std::fs::read(&img).unwrap() == before,
        "written unconfirmed"
    );
    ok(sc(&[&init[..], &["--batch"]].concat(), b""));
    assert!(
        !is_luks(&img),
        "cryptsetup still finds LUKS after geli init"
    );
    assert_ne!(blkid_type(&img), "crypto_LUKS");
    let dump = ok(sc(&["dump", s(&img)], b""));
    assert!(dump.to_lowercase().contains("geli"), "{dump}");
    // A blank provider is initialised without asking, as geli does.
    let blank = dir.path().join("blank.img");
    std::fs::write(&blank, vec![0u8; 1 << 20]).unwrap();
    ok(sc(
        &[
            "geli",
            "init",
            "-J",
            s(&pass),
            "-i",
            "0",
            "-B",
            "none",
            s(&blank),
        ],
        b"",
    ));
}

#[test]
fn format_type_geli_over_luks2_leaves_no_luks_header() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k = key_file(dir.path(), "kg", "geli");
    let args = [
        "format",
        s(&img),
        "--type",
        "geli",
        "--batch",
        "--key-file",
        s(&k),
    ];
    ok(sc(
        &[&args[..], &["--pbkdf-force-iterations", "1000"]].concat(),
        b"",
    ));
    assert!(
        !is_luks(&img),
        "cryptsetup still finds LUKS after format --type geli"
    );
    ok(sc(&["test-key", s(&img), "--key-file", s(&k)], b""));
}

#[test]
fn luks2_format_over_a_geli_provider_clears_its_last_sector() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("p.img");
    std::fs::write(&img, vec![0u8; 20 << 20]).unwrap();
    let pass = key_file(dir.path(), "pass", "geli secret");
    ok(sc(
        &[
            "geli",
            "init",
            "-J",
            s(&pass),
            "-i",
            "0",
            "-B",
            "none",
            s(&img),
        ],
        b"",
    ));
    assert!(geli_magic_at_end(&img));
    let k0 = key_file(dir.path(), "k0", "zero");
    let format = [
        &["format", s(&img), "--batch", "--key-file", s(&k0)][..],
        &FAST,
    ]
    .concat();
    ok(sc(&format, b""));
    assert!(
        !geli_magic_at_end(&img),
        "GELI metadata left in the last sector of a LUKS2 volume"
    );
    assert!(is_luks(&img));
    ok(sc(&["test-key", s(&img), "--key-file", s(&k0)], b""));
    // cryptsetup's own LUKS2 over a GELI provider does not wipe it; sectorcrypt then
    // refuses to guess (next test). Ours opens in cryptsetup.
    let out = Command::new("cryptsetup")
        .args(["open", "--test-passphrase", "--key-file"])
        .arg(&k0)
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", err(&out));
}

#[test]
fn an_image_holding_two_formats_is_refused_naming_both() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    // A GELI provider, and a LUKS2 volume by cryptsetup over the same bytes: cryptsetup
    // (without blkid's help for GELI) leaves the GELI metadata in the last sector.
    let img = dir.path().join("both.img");
    std::fs::write(&img, vec![0u8; 20 << 20]).unwrap();
    let pass = key_file(dir.path(), "pass", "geli secret");
    ok(sc(
        &[
            "geli",
            "init",
            "-J",
            s(&pass),
            "-i",
            "0",
            "-B",
            "none",
            s(&img),
        ],
        b"",
    ));
    let k0 = key_file(dir.path(), "k0", "zero");
    let out = Command::new("cryptsetup")
        .args(["luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2"])
        .args(["--pbkdf-force-iterations", "1000", "--key-file"])
        .arg(&k0)
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", err(&out));
    assert!(
        geli_magic_at_end(&img),
        "cryptsetup wiped the GELI metadata: this test needs another way to make both"
    );
    for args in [
        vec!["dump", s(&img)],
        vec!["test-key", s(&img), "--key-file", s(&k0)],
        vec!["read", s(&img), "--length", "512", "--key-file", s(&k0)],
    ] {
        let out = sc(&args, b"");
        let e = err(&out);
        assert_eq!(
            code(&out),
            2,
            "{args:?} went ahead on an image with two formats: {e}"
        );
        assert!(
            e.contains("two formats") && e.contains("luks2") && e.contains("geli"),
            "{args:?}: {e}"
        );
    }
}
