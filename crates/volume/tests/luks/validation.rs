//! Headers that break a rule of their format are refused before anything uses or writes
//! through them, naming the rule; what used to go wrong with each is the failure these
//! tests report on code that accepted them: keyslots sharing an area (LUKS2 entries, a
//! LUKS1 inactive slot), an image smaller than its keyslots area, a keyslot that cannot be
//! used, a secondary copy planted beside a sound primary, LUKS1 slots outside their place.

use crate::common::*;
use sectorcrypt_testkit::require;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::luks::{Luks1, Luks2};
use sectorcrypt_volume::{Error, Header, HeaderError, Store};
use std::path::Path;
use std::process::Command;

/// Asserts `e` is a header error (corrupt or truncated) whose message names `rule`.
fn assert_names(e: &Error, rule: &str) {
    assert!(
        matches!(e, Error::Header(HeaderError::Corrupt(m) | HeaderError::Truncated(m)) if m.contains(rule)),
        "expected a header error naming {rule}, got: {e}"
    );
}

/// Two LUKS2 keyslots naming one area: removing either must not destroy the other, so
/// the header is refused (cryptsetup refuses it too).
#[test]
fn luks2_keyslots_sharing_an_area_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    for at in [0, HDR] {
        rewrite_json(&img, at, |j| {
            j["keyslots"]["1"] = j["keyslots"]["0"].clone()
        });
    }
    let before = snapshot(&img);
    let f = open_rw(&img);
    match Header::read(&f) {
        Err(e) => assert_names(&e, "luks2-area-overlap"),
        Ok(mut h) => {
            // Both keyslots open with "first"; removing keyslot 0 wipes the shared area.
            let u = h.unlock(&f, b"first").unwrap();
            h.remove_key(&f, u.keyslot).unwrap();
            let left = Header::read(&f).unwrap().unlock(&f, b"first");
            panic!(
                "accepted; after removing keyslot {} the other opens: {:?}",
                u.keyslot,
                left.map(|u| u.keyslot)
            );
        }
    }
    assert!(snapshot(&img) == before, "the image was written");
}

/// An inactive LUKS1 slot whose material offset is an active slot's: change-key writes
/// the new key there, then wipes the old slot, and nothing opens.
#[test]
fn luks1_inactive_slot_inside_an_active_slot_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks1_image(dir.path());
    point_luks1_slot(&img, 1, 0, 0);
    let f = open_rw(&img);
    let before = snapshot(&img);
    match Header::read(&f) {
        Err(e) => assert_names(&e, "luks1-slot-overlap"),
        Ok(mut h) => {
            let r = h.change_key(&f, b"first", b"new", &fast_pbkdf2(), None);
            let h = Header::read(&f).unwrap();
            panic!(
                "accepted; change-key {:?}, then the new passphrase: {:?}, the old: {:?}",
                r.map_err(|e| e.to_string()),
                h.unlock(&f, b"new")
                    .map(|u| u.keyslot)
                    .map_err(|e| e.to_string()),
                h.unlock(&f, b"first")
                    .map(|u| u.keyslot)
                    .map_err(|e| e.to_string()),
            );
        }
    }
    assert!(snapshot(&img) == before, "the image was written");
}

/// An image that ends inside its keyslots area (a truncated copy, a header file too
/// short): erasing it must not write past its end, so it is refused as cryptsetup does
/// ("Device too small"), and nothing is written.
#[test]
fn an_image_smaller_than_its_keyslots_area_is_refused_and_not_grown() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let f = open_rw(&img);
    f.file().set_len(8 * MIB).unwrap();
    let before = snapshot(&img);
    let r = Header::read(&f).and_then(|mut h| h.erase(&f));
    let len = f.file().metadata().unwrap().len();
    assert_eq!(len, 8 * MIB, "erase grew the image (erase: {r:?})");
    assert_names(&r.unwrap_err(), "device-too-small");
    assert!(snapshot(&img) == before, "the image was written");
    // LUKS1 alike: its last keyslot ends at 1 MiB here.
    let img = luks1_image(dir.path());
    let f = open_rw(&img);
    f.file().set_len(MIB / 2).unwrap();
    let r = Header::read(&f).and_then(|mut h| h.erase(&f));
    let len = f.file().metadata().unwrap().len();
    assert_eq!(len, MIB / 2, "erase grew the image (erase: {r:?})");
    assert_names(&r.unwrap_err(), "device-too-small");
}

/// A keyslot this implementation cannot use (PBKDF2 with sha384, which cryptsetup's
/// `luksAddKey --hash sha384` makes) leaves the other keyslots usable, as in cryptsetup.
#[test]
fn a_keyslot_that_cannot_be_used_leaves_the_others_usable() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    for at in [0, HDR] {
        rewrite_json(&img, at, |j| {
            let kdf = &mut j["keyslots"]["0"]["kdf"];
            kdf["hash"] = "sha384".into();
        });
    }
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    let u = h.unlock(&f, b"second").map_err(|e| e.to_string());
    assert_eq!(u.map(|u| u.keyslot), Ok(1), "keyslot 1 no longer opens");
    // Keyslot 0 itself says why it cannot be tried.
    let e = h.unlock_slot(&f, b"first", Some(0)).unwrap_err();
    assert!(e.to_string().contains("sha384"), "{e}");
    // With the other keyslots tried, a passphrase none opens is a wrong passphrase.
    assert!(matches!(
        h.unlock(&f, b"first"),
        Err(Error::WrongPassphrase)
    ));
    assert!(h.dump().contains("sha384"), "{}", h.dump());
}

/// A sound primary copy is read with the secondary where the primary's size puts it; a
/// copy planted at another allowed offset (inside keyslot 0's area) with a higher
/// sequence id is never looked at, even when the real secondary is damaged.
#[test]
fn a_copy_planted_beside_a_sound_primary_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let planted_at: u64 = 64 << 10;
    let f = open_rw(&img);
    let mut primary = vec![0u8; HDR as usize];
    f.read_at(&mut primary, 0).unwrap();
    let seqid = u64::from_be_bytes(primary[16..24].try_into().unwrap());
    // A secondary copy of 64 KiB, with a label of its own and a newer sequence id, its
    // keyslot areas moved past the two 64 KiB copies.
    let mut planted = vec![0u8; planted_at as usize];
    planted[..4096].copy_from_slice(&primary[..4096]);
    planted[..6].copy_from_slice(b"SKUL\xba\xbe");
    planted[8..16].copy_from_slice(&planted_at.to_be_bytes());
    planted[16..24].copy_from_slice(&(seqid + 100).to_be_bytes());
    planted[24..72].fill(0);
    planted[24..31].copy_from_slice(b"planted");
    planted[256..264].copy_from_slice(&planted_at.to_be_bytes());
    let end = primary[4096..].iter().position(|&c| c == 0).unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&primary[4096..4096 + end]).unwrap();
    let shift = 2 * (planted_at - HDR);
    for ks in json["keyslots"].as_object_mut().unwrap().values_mut() {
        let off: u64 = ks["area"]["offset"].as_str().unwrap().parse().unwrap();
        ks["area"]["offset"] = (off + shift).to_string().into();
    }
    let ks_size: u64 = json["config"]["keyslots_size"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    json["config"]["keyslots_size"] = (ks_size - shift).to_string().into();
    json["config"]["json_size"] = (planted_at - 4096).to_string().into();
    let text = serde_json::to_vec(&json).unwrap();
    planted[4096..4096 + text.len()].copy_from_slice(&text);
    planted[448..512].fill(0);
    let sum = <sha2::Sha256 as sha2::Digest>::digest(&planted);
    planted[448..480].copy_from_slice(&sum);
    f.write_at(&planted, planted_at).unwrap();
    flip(&img, HDR); // the real secondary's magic
    let h = Header::read(&f).unwrap();
    let l2 = h.downcast_ref::<Luks2>().unwrap();
    assert_eq!(
        (l2.label(), l2.seqid(), l2.hdr_size()),
        ("", seqid, HDR),
        "the planted copy was used"
    );
    if sectorcrypt_testkit::have("cryptsetup") {
        let out = Command::new("cryptsetup")
            .args(["luksDump", "--disable-locks"])
            .arg(&img)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("Epoch:         \t{seqid}")),
            "{text}"
        );
    } else {
        sectorcrypt_testkit::skipped!(
            "the luksDump cross-check skipped: cryptsetup is not installed"
        );
    }
}

/// LUKS1 keyslots, active or not, must have 4000 stripes and material after the header
/// and before the data; an image whose keyslots are refused is not written.
#[test]
fn luks1_slots_outside_their_place_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks1_image(dir.path());
    let pristine = snapshot(&img);
    let slot3 = 208 + 3 * 48;
    let payload = u32::from_be_bytes(pristine[104..108].try_into().unwrap());
    let cases: [(&str, usize, u32); 4] = [
        ("luks1-slot-in-header", slot3 + 40, 0),
        ("luks1-slot-in-data", slot3 + 40, payload - 1),
        ("luks1-slot", slot3 + 44, 1),
        ("luks1-slot-overlap", slot3 + 40, 8 + 2 * 504 + 3),
    ];
    for (rule, at, value) in cases {
        std::fs::write(&img, &pristine).unwrap();
        let f = open_rw(&img);
        f.write_at(&value.to_be_bytes(), at as u64).unwrap();
        let before = snapshot(&img);
        match Header::read(&f) {
            Err(e) => assert_names(&e, rule),
            Ok(mut h) => {
                let r = h.erase(&f).map_err(|e| e.to_string());
                panic!("{rule}: accepted (erase: {r:?})");
            }
        }
        assert!(snapshot(&img) == before, "{rule}: the image was written");
    }
}

/// cryptsetup refuses the same LUKS1 headers.
#[test]
fn cryptsetup_refuses_the_luks1_headers_refused_here() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = luks1_image(dir.path());
    point_luks1_slot(&img, 1, 0, 0);
    assert!(!cryptsetup_loads(&img));
}

/// Whether `cryptsetup luksDump` loads `img`.
pub fn cryptsetup_loads(img: &Path) -> bool {
    Command::new("cryptsetup")
        .args(["luksDump", "--disable-locks"])
        .arg(img)
        .output()
        .unwrap()
        .status
        .success()
}

/// What remove-key's last-keyslot confirmation counts: the keyslots that still open the
/// volume once one is destroyed, so a keyslot whose material lies in the destroyed one's
/// area does not count (a header read from disk never has one: it is refused).
#[test]
fn keyslots_in_the_removed_area_do_not_survive_it() {
    let mut l1 = Luks1::format("aes-xts-plain64", &[7u8; 64], HashAlg::Sha256, "u", 1000).unwrap();
    for i in [0, 1, 2] {
        l1.slots[i].active = true;
    }
    l1.slots[1].key_offset = l1.slots[0].key_offset + 1;
    let h = Header::new(Box::new(l1));
    assert_eq!(h.keyslots_left_without(0).unwrap(), vec![2]);
    assert_eq!(h.keyslots_left_without(2).unwrap(), vec![0, 1]);
}

/// A LUKS2 sequence id at its largest value cannot count the next write: a header update
/// is refused (it used to panic in a debug build and wrap to 0 in a release one) and
/// nothing is written.
#[test]
fn a_seqid_at_its_largest_value_refuses_header_updates() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    for at in [0, HDR] {
        rewrite_copy(&img, at, |b| {
            b[16..24].copy_from_slice(&u64::MAX.to_be_bytes())
        });
    }
    let before = snapshot(&img);
    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap();
    let e = h.remove_key(&f, 0).unwrap_err();
    assert!(e.to_string().contains("sequence id"), "{e}");
    assert!(snapshot(&img) == before, "the image was written");
}

/// Each LUKS2 metadata rule the cryptsetup suite does not reach alone, broken in both
/// copies of a volume made here: refused when read, naming the rule, nothing written.
#[test]
fn each_luks2_rule_is_enforced_on_its_own() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 9] = [
        ("luks2-id", |j| {
            j["tokens"]["x"] = serde_json::json!({"type": "t", "keyslots": []})
        }),
        ("luks2-requirements", |j| {
            j["config"]["requirements"] = 5.into()
        }),
        ("luks2-token", |j| {
            j["tokens"]["0"] = serde_json::json!({"type": "t"})
        }),
        ("luks2-digest", |j| {
            j["digests"]["0"].as_object_mut().unwrap().remove("type");
        }),
        ("luks2-segment-digest", |j| {
            j["digests"]["0"]["segments"] = serde_json::json!([])
        }),
        ("luks2-segment-overlap", |j| {
            let off = j["segments"]["0"]["offset"].clone();
            j["segments"]["0"]["size"] = "4096".into();
            j["segments"]["1"] =
                serde_json::json!({"type": "linear", "offset": off, "size": "dynamic"});
        }),
        ("luks2-segment-order", |j| {
            j["segments"]["2"] =
                serde_json::json!({"type": "linear", "offset": "512", "size": "512"});
        }),
        ("luks2-config", |j| {
            j["config"]["flags"] = "allow-discards".into()
        }),
        ("luks2-reencrypt", |j| {
            j["keyslots"]["2"] = serde_json::json!({
                "type": "reencrypt", "key_size": 1, "mode": "reencrypt",
                "direction": "forward",
                "area": {"type": "none", "offset": "1048576", "size": "4096"}});
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let pristine = snapshot(&img);
    for (rule, edit) in cases {
        std::fs::write(&img, &pristine).unwrap();
        for at in [0, HDR] {
            rewrite_json(&img, at, edit);
        }
        let before = snapshot(&img);
        let e = Header::read(&open_rw(&img)).unwrap_err();
        assert_names(&e, rule);
        assert!(snapshot(&img) == before, "{rule}: the image was written");
    }
}

/// The binary rules of one copy (its offset field, its JSON) leave the other copy in use,
/// and say which rule the bad one broke; LUKS1's slot state and key length are checked.
#[test]
fn copy_rules_and_luks1_fields_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    let pristine = snapshot(&img);
    let with_checksum = |bytes: &mut [u8]| {
        bytes[448..512].fill(0);
        let sum = <sha2::Sha256 as sha2::Digest>::digest(&bytes[..HDR as usize]);
        bytes[448..480].copy_from_slice(&sum);
    };
    let mut offset = pristine[..HDR as usize].to_vec();
    offset[256..264].copy_from_slice(&512u64.to_be_bytes());
    with_checksum(&mut offset);
    let mut syntax = pristine[..HDR as usize].to_vec();
    syntax[4096 + 1] = b'!';
    with_checksum(&mut syntax);
    for (rule, copy) in [
        ("luks2-header-offset", offset),
        ("luks2-json-syntax", syntax),
    ] {
        std::fs::write(&img, &pristine).unwrap();
        open_rw(&img).write_at(&copy, 0).unwrap();
        let f = open_ro(&img);
        let h = Header::read(&f).unwrap();
        assert!(h.needs_repair() && h.dump().contains(rule), "{}", h.dump());
        h.unlock(&f, b"first").unwrap();
    }
    let img = luks1_image(dir.path());
    let pristine = snapshot(&img);
    for (rule, at, value) in [
        ("luks1-slot-state", 208 + 2 * 48, 0x1234_5678u32),
        ("luks1-key", 108, 0),
    ] {
        std::fs::write(&img, &pristine).unwrap();
        open_rw(&img).write_at(&value.to_be_bytes(), at).unwrap();
        assert_names(&Header::read(&open_ro(&img)).unwrap_err(), rule);
    }
}
