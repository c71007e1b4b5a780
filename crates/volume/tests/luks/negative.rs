//! Bad input: wrong passphrases, truncated images, damaged header copies and keyslot
//! areas, metadata asking for features this does not implement.

use crate::common::*;
use sectorcrypt_testkit::pattern;
use sectorcrypt_volume::luks::{format, FormatOptions, Luks2};
use sectorcrypt_volume::{backup_header, restore_header, Error, Header, HeaderError, Store};
use std::fs::File;
use std::path::Path;

#[test]
fn wrong_passphrase_is_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let (_img, f, h) = open_luks2(dir.path());
    let e = h.unlock(&f, b"third").unwrap_err();
    assert!(matches!(e, Error::WrongPassphrase), "{e}");
    assert!(!e.to_string().contains("third"));
    assert_eq!(h.unlock(&f, b"second").unwrap().keyslot, 1);
    assert!(matches!(
        h.unlock_slot(&f, b"second", Some(0)),
        Err(Error::WrongPassphrase)
    ));
}

#[test]
fn truncated_images_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    for (len, what) in [
        (10_000u64, "header"),
        (100_000, "keyslot"),
        (8 * MIB, "data"),
    ] {
        let copy = dir.path().join(format!("t{len}"));
        std::fs::copy(&img, &copy).unwrap();
        File::options()
            .write(true)
            .open(&copy)
            .unwrap()
            .set_len(len)
            .unwrap();
        let f = open_ro(&copy);
        let r = Header::read(&f).and_then(|h| h.unlock(&f, b"first"));
        match r {
            Err(Error::Header(HeaderError::Truncated(m))) => eprintln!("{what}: {m}"),
            other => panic!("{len}: expected truncated, got {other:?}"),
        }
    }
    // LUKS1 cut inside its header.
    let f = open_rw(&luks1_image(dir.path()));
    f.file().set_len(300).unwrap();
    assert!(matches!(
        Header::read(&f),
        Err(Error::Header(HeaderError::Truncated(_)))
    ));
}

#[test]
fn damaged_primary_header_opens_from_secondary_and_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    for at in [4096 + 20, 0, 448] {
        // json area, magic, checksum.
        let img = luks2_image(dir.path());
        flip(&img, at);
        let f = open_rw(&img);
        let mut h = Header::read(&f).unwrap();
        assert!(h.needs_repair());
        let u = h.unlock(&f, b"first").unwrap();
        assert!(read_plain(&f, &u, 0, 65536) == pattern(65536, 3));
        h.add_key(&f, &u, b"third", &fast_pbkdf2(), None).unwrap();
        let again = Header::read(&f).unwrap();
        assert!(!again.needs_repair(), "still damaged after a write");
        again.unlock(&f, b"third").unwrap();
        // The primary alone is valid again: damage the secondary and read.
        flip(&img, HDR + 4096 + 20);
        let h = Header::read(&f).unwrap();
        assert!(h.needs_repair());
        h.unlock(&f, b"third").unwrap();
        drop(f);
        std::fs::remove_file(&img).unwrap();
    }
}

#[test]
fn stale_copy_loses_to_the_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let before = std::fs::read(&img).unwrap();
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    let u = h.unlock(&f, b"first").unwrap();
    h.add_key(&f, &u, b"third", &fast_pbkdf2(), None).unwrap();
    // A crash after the primary was written: the secondary is still the old one.
    f.write_at(&before[HDR as usize..2 * HDR as usize], HDR)
        .unwrap();
    let h = Header::read(&f).unwrap();
    assert!(h.needs_repair());
    h.unlock(&f, b"third").unwrap();
    // And after the secondary only (the other order): the new one wins too.
    let mut h2 = Header::read(&f).unwrap();
    h2.repair(&f).unwrap();
    f.write_at(&before[..HDR as usize], 0).unwrap();
    let h = Header::read(&f).unwrap();
    assert!(h.needs_repair());
    h.unlock(&f, b"third").unwrap();
}

#[test]
fn both_copies_damaged_is_a_clear_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    flip(&img, 4096 + 20);
    flip(&img, HDR + 4096 + 20);
    let before = std::fs::read(&img).unwrap();
    let f = open_rw(&img);
    match Header::read(&f) {
        Err(Error::Header(HeaderError::Corrupt(m))) => assert!(m.contains("both"), "{m}"),
        other => panic!("expected corrupt, got {other:?}"),
    }
    drop(f);
    assert!(std::fs::read(&img).unwrap() == before);
}

#[test]
fn damaged_keyslot_area_fails_that_keyslot_only() {
    let dir = tempfile::tempdir().unwrap();
    let (img, f, h) = open_luks2(dir.path());
    let l2 = h.downcast_ref::<Luks2>().expect("a luks2 header");
    let ks0 = l2.keyslots().unwrap()[0].area_offset;
    drop(f);
    flip(&img, ks0 + 5000);
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    assert!(matches!(
        h.unlock(&f, b"first"),
        Err(Error::WrongPassphrase)
    ));
    assert_eq!(h.unlock(&f, b"second").unwrap().keyslot, 1);
}

#[test]
fn unknown_requirements_and_integrity_are_refused_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    for at in [0, HDR] {
        rewrite_json(&img, at, |j| {
            j["config"]["requirements"] = serde_json::json!({"mandatory": ["x-future-feature"]})
        });
    }
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    let e = h.unlock(&f, b"first").unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("x-future-feature")),
        "{e}"
    );
    let before = std::fs::read(&img).unwrap();
    assert!(h.remove_key(&f, 1).is_err());
    assert!(h.repair(&f).is_err());
    assert!(std::fs::read(&img).unwrap() == before);
    assert!(h.dump().contains("x-future-feature"));

    let img = luks2_image(dir.path());
    for at in [0, HDR] {
        rewrite_json(
            &img,
            at,
            |j| j["segments"]["0"]["integrity"] = serde_json::json!({"type": "hmac(sha256)", "journal_encryption": "none", "journal_integrity": "none"}),
        );
    }
    let f = open_ro(&img);
    let e = Header::read(&f).unwrap().unlock(&f, b"first").unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("integrity")),
        "{e}"
    );
}

#[test]
fn not_luks_and_key_secrets_stay_out_of_debug() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("p");
    make_file(&plain, 1 << 20, &pattern(4096, 1));
    let f = open_ro(&plain);
    assert!(matches!(
        Header::read(&f),
        Err(Error::Header(HeaderError::Unrecognised(_)))
    ));
    let img = luks2_image(dir.path());
    let f = open_ro(&img);
    let u = Header::read(&f).unwrap().unlock(&f, b"first").unwrap();
    let dbg = format!("{u:?}");
    let key_hex: String = u.volume_key()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        !dbg.contains(&key_hex) && dbg.contains("key_bits: 512"),
        "{dbg}"
    );
}

/// A keyslot asking for 8 GiB of Argon2 memory is refused before anything is allocated;
/// the other keyslot still opens.
#[test]
fn absurd_kdf_costs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    for at in [0, HDR] {
        rewrite_json(&img, at, |j| {
            j["keyslots"]["0"]["kdf"] = serde_json::json!({
                "type": "argon2id", "time": 4, "memory": 8u64 << 20, "cpus": 1,
                "salt": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
            })
        });
    }
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    let e = h.unlock_slot(&f, b"first", Some(0)).unwrap_err();
    assert!(
        matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains("argon2")),
        "{e}"
    );
    assert_eq!(h.unlock(&f, b"second").unwrap().keyslot, 1);
}

/// Patches both LUKS2 copies, then asserts unlocking with any passphrase fails with a
/// corrupt-header error naming `what`, and that nothing was written.
fn assert_hostile_refused(img: &Path, what: &str, edit: impl Fn(&mut serde_json::Value)) {
    for at in [0, HDR] {
        rewrite_json(img, at, &edit);
    }
    let before = snapshot(img);
    let f = open_rw(img);
    match Header::read(&f) {
        Ok(h) => {
            for pass in [&b"first"[..], b"nobody knows this"] {
                let e = h.unlock(&f, pass).map(|_| ()).unwrap_err();
                assert!(
                    matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains(what)),
                    "{what}: {e}"
                );
            }
        }
        Err(e) => assert!(
            matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains(what)),
            "{what}: {e}"
        ),
    }
    drop(f);
    assert!(snapshot(img) == before, "{what}: the image was written");
}

/// An empty or short volume-key digest must not match every key.
#[test]
fn empty_or_short_digest_is_refused_not_a_match() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let pristine = snapshot(&img);
    let cases: [(&str, serde_json::Value); 4] = [
        ("digest", serde_json::json!("")),
        ("digest", serde_json::json!("AAAAAAAAAAAAAAAAAAAAAA==")),
        ("salt", serde_json::json!("")),
        ("iterations", serde_json::json!(4294967297u64)),
    ];
    for (field, value) in cases {
        std::fs::write(&img, &pristine).unwrap();
        assert_hostile_refused(&img, "digest", |j| {
            j["digests"]["0"][field] = value.clone();
        });
    }
    // Keyslot kdf: 0 iterations and an empty salt are corrupt too.
    for (field, value) in [
        ("iterations", serde_json::json!(0)),
        ("salt", serde_json::json!("")),
    ] {
        std::fs::write(&img, &pristine).unwrap();
        assert_hostile_refused(&img, "kdf", |j| {
            for id in ["0", "1"] {
                j["keyslots"][id]["kdf"][field] = value.clone();
            }
        });
    }
}

/// LUKS1: a digest with 0 iterations is refused when reading.
#[test]
fn luks1_zero_digest_iterations_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks1_image(dir.path());
    open_rw(&img).write_at(&0u32.to_be_bytes(), 164).unwrap();
    let before = snapshot(&img);
    let f = open_rw(&img);
    let e = Header::read(&f).unwrap_err();
    assert!(
        matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains("iterations")),
        "{e}"
    );
    drop(f);
    assert!(snapshot(&img) == before);
}

/// Key sizes, area key sizes and stripe counts that would make unlocking allocate
/// gigabytes (or overflow `key_size * stripes`) are refused first.
#[test]
fn huge_key_sizes_and_stripes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let pristine = snapshot(&img);
    type Edit = fn(&mut serde_json::Value);
    // A keyslot key size beyond 32 bits breaks the header's rules; the others are
    // refused when the keyslot is used.
    let cases: [(&str, Edit); 5] = [
        ("key size", |ks| {
            ks["area"]["key_size"] = (1u64 << 40).into()
        }),
        ("key size", |ks| ks["area"]["key_size"] = 32.into()),
        ("key_size", |ks| ks["key_size"] = (1u64 << 40).into()),
        ("stripes", |ks| ks["af"]["stripes"] = (1u64 << 62).into()),
        ("stripes", |ks| ks["af"]["stripes"] = 4001.into()),
    ];
    for (what, edit) in cases {
        std::fs::write(&img, &pristine).unwrap();
        assert_hostile_refused(&img, what, |j| {
            for id in ["0", "1"] {
                edit(&mut j["keyslots"][id]);
            }
        });
    }
}

/// LUKS1: a stripe count of 2^32-1 is refused (it asked for 256 GiB); a slot past the end
/// of an image with no data offset makes the image too small, not a read of garbage; an
/// inactive slot pointing far away is refused until `repair` puts it back in place, and
/// erasing never extends the image there.
#[test]
fn luks1_hostile_slots_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks1_image(dir.path());
    let pristine = snapshot(&img);
    let slot0 = 208u64;

    open_rw(&img)
        .write_at(&u32::MAX.to_be_bytes(), slot0 + 44)
        .unwrap();
    let e = Header::read(&open_ro(&img)).unwrap_err();
    assert!(
        matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains("stripes")),
        "{e}"
    );

    std::fs::write(&img, &pristine).unwrap();
    let f = open_rw(&img);
    f.write_at(&0u32.to_be_bytes(), 104).unwrap(); // payload offset 0
    f.write_at(&0x7fff_0000u32.to_be_bytes(), slot0 + 40)
        .unwrap();
    let before = snapshot(&img);
    let e = Header::read(&f).unwrap_err();
    assert!(matches!(e, Error::Header(HeaderError::Truncated(_))), "{e}");
    assert!(snapshot(&img) == before);

    // Inactive slot 3 pointing at 1 TiB: refused; repair resets it; erase stays inside.
    std::fs::write(&img, &pristine).unwrap();
    let f = open_rw(&img);
    f.write_at(&0x8000_0000u32.to_be_bytes(), slot0 + 3 * 48 + 40)
        .unwrap();
    let len = f.file().metadata().unwrap().len();
    assert!(Header::read(&f).is_err());
    let done = sectorcrypt_volume::formats::repair_header(&f).unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(
        snapshot(&img)[..592] == pristine[..592],
        "not the standard layout"
    );
    let mut h = Header::read(&f).unwrap();
    assert!(h.backup_len(len) < 4 * MIB, "{}", h.backup_len(len));
    h.erase(&f).unwrap();
    assert_eq!(f.file().metadata().unwrap().len(), len);
    assert!(Header::read(&f)
        .unwrap()
        .active_keyslots()
        .unwrap()
        .is_empty());
}

/// A keyslots area of 2^64-1 or 1 TiB bytes (overflow; a 1 TiB header backup buffer) and
/// a segment whose end overflows (its size the largest multiple of 512) are clean errors.
#[test]
fn huge_keyslots_size_and_segment_size_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let pristine = snapshot(&img);
    for size in [u64::MAX, 1u64 << 40, 16 * MIB + 1] {
        std::fs::write(&img, &pristine).unwrap();
        assert_hostile_refused(&img, "keyslots_size", |j| {
            j["config"]["keyslots_size"] = size.to_string().into()
        });
        let out = dir.path().join("backup");
        let e = backup_header(&open_ro(&img), &out).unwrap_err();
        assert!(
            matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains("keyslots_size")),
            "{e}"
        );
        assert!(!out.exists());
    }
    std::fs::write(&img, &pristine).unwrap();
    for at in [0, HDR] {
        rewrite_json(&img, at, |j| {
            j["segments"]["0"]["size"] = (u64::MAX - 511).to_string().into()
        });
    }
    let f = open_ro(&img);
    let e = Header::read(&f).unwrap().unlock(&f, b"first").unwrap_err();
    assert!(matches!(e, Error::Header(HeaderError::Truncated(_))), "{e}");
}

/// A header backup that fails half way (the image ends inside the keyslots area) leaves
/// no file behind, partial or temporary; a good one is readable by its owner only.
#[test]
fn failed_header_backup_leaves_no_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let outdir = dir.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    let good = outdir.join("good.bak");
    backup_header(&open_ro(&img), &good).unwrap();
    assert_eq!(std::fs::metadata(&good).unwrap().len(), 16 * MIB);
    let mode = std::fs::metadata(&good).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    // Exists already: refused, untouched.
    let e = backup_header(&open_ro(&img), &good).unwrap_err();
    assert!(
        matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{e}"
    );

    // 3 MiB: both header copies, then the image ends inside the keyslots area.
    open_rw(&img).file().set_len(3 * MIB).unwrap();
    let bad = outdir.join("bad.bak");
    let e = backup_header(&open_ro(&img), &bad).unwrap_err();
    assert!(matches!(e, Error::Header(HeaderError::Truncated(_))), "{e}");
    let names: Vec<_> = std::fs::read_dir(&outdir)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("good.bak")]);
}

/// Restoring a cut-short or hostile backup is refused before anything is written; a good
/// backup restores a volume whose headers were destroyed.
#[test]
fn bad_header_restore_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let bak = dir.path().join("v.bak");
    backup_header(&open_ro(&img), &bak).unwrap();
    let bak_bytes = snapshot(&bak);
    // Destroy both copies' magic: the image no longer opens.
    flip(&img, 0);
    flip(&img, HDR);
    let damaged = snapshot(&img);

    let cut = dir.path().join("cut.bak");
    std::fs::write(&cut, &bak_bytes[..(MIB as usize)]).unwrap();
    let e = restore_header(&open_rw(&img), &open_ro(&cut)).unwrap_err();
    assert!(matches!(e, Error::Header(HeaderError::Truncated(_))), "{e}");
    assert!(snapshot(&img) == damaged);

    let hostile = dir.path().join("hostile.bak");
    std::fs::write(&hostile, &bak_bytes).unwrap();
    for at in [0, HDR] {
        rewrite_json(&hostile, at, |j| {
            j["config"]["keyslots_size"] = (1u64 << 40).to_string().into()
        });
    }
    let e = restore_header(&open_rw(&img), &open_ro(&hostile)).unwrap_err();
    assert!(
        matches!(&e, Error::Header(HeaderError::Corrupt(m)) if m.contains("keyslots_size")),
        "{e}"
    );
    assert!(snapshot(&img) == damaged);

    let f = open_rw(&img);
    let h = restore_header(&f, &open_ro(&bak)).unwrap();
    assert!(!h.needs_repair());
    h.unlock(&f, b"second").unwrap();
}

/// Labels: 47 bytes fit the 48-byte field; 48 bytes or a NUL (which would cut the label
/// short on reading) are refused before anything is written.
#[test]
fn label_length_and_nul_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank_image(dir.path(), 20 * MIB);
    let before = snapshot(&img);
    for bad in ["x".repeat(48), "ab\0cd".to_string()] {
        let opts = FormatOptions {
            kdf: fast_pbkdf2(),
            label: bad.clone(),
            ..FormatOptions::default()
        };
        let e = format(&open_rw(&img), &opts, b"p", None).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid(m) if m.contains("label")),
            "{bad:?}: {e}"
        );
        assert!(snapshot(&img) == before);
    }
    let opts = FormatOptions {
        kdf: fast_pbkdf2(),
        label: "y".repeat(47),
        ..FormatOptions::default()
    };
    format(&open_rw(&img), &opts, b"p", None).unwrap();
    let h = Header::read(&open_ro(&img)).unwrap();
    let l2 = h.downcast_ref::<Luks2>().expect("a luks2 header");
    assert_eq!(l2.label(), "y".repeat(47));
}

/// Adding a keyslot to an image that ends inside the keyslots area is a truncated image,
/// not a write that grows the file.
#[test]
fn add_key_to_a_truncated_image_does_not_grow_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    let u = h.unlock(&f, b"first").unwrap();
    // Keyslots 0 and 1 end at 548864; the next area (258048 bytes) would not fit.
    f.file().set_len(700 << 10).unwrap();
    let before = snapshot(&img);
    let e = h
        .add_key(&f, &u, b"third", &fast_pbkdf2(), None)
        .unwrap_err();
    assert!(matches!(e, Error::Header(HeaderError::Truncated(_))), "{e}");
    assert!(snapshot(&img) == before);
}
