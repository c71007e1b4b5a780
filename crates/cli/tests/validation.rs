//! Header validation end to end: cryptsetup's 85 LUKS2 validation cases
//! (`support/luks2_cases.rs`) reach cryptsetup's verdict with `sectorcrypt dump` (0 for a
//! header cryptsetup loads, 2 naming the broken rule for one it refuses, the image never
//! written), checked against `cryptsetup luksDump` on the same images where it is
//! installed; what `dump` still shows of a refused header; `repair` against `cryptsetup
//! repair`; and the commands on headers that used to be accepted: keyslots sharing an
//! area (remove-key, change-key), an image smaller than its keyslots area (erase), a
//! keyslot added by cryptsetup with a hash not implemented here (test-key).

#[path = "support/luks2_cases.rs"]
mod luks2_cases;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use luks2_cases::{edit_copies, Verdict, CASES};
use sectorcrypt_testkit::{have, require, run};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Output};
use support::{code, ok, s, sc};
use volumes::{key_file, new_volume, test_key, FAST};

/// `cryptsetup luksDump` of a copy of `img` (it may repair the header it reads): whether
/// it loads.
fn cryptsetup_loads(img: &Path) -> bool {
    let copy = img.with_extension("cryptsetup");
    std::fs::copy(img, &copy).unwrap();
    let out = Command::new("cryptsetup")
        .args(["luksDump", "--disable-locks"])
        .arg(&copy)
        .output()
        .expect("run cryptsetup");
    std::fs::remove_file(&copy).unwrap();
    out.status.success()
}

#[test]
fn cryptsetup_validation_suite_reaches_cryptsetups_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let cryptsetup = have("cryptsetup");
    if !cryptsetup {
        sectorcrypt_testkit::skipped!(
            "cryptsetup is not installed: its verdicts are not cross-checked"
        );
    }
    let (mut right, mut wrong) = (0, Vec::new());
    let mut table = String::from("case  cryptsetup's verdict  sectorcrypt dump  luksDump\n");
    for case in &CASES {
        let img = dir.path().join(format!("{}.img", case.name));
        case.write(&img);
        let before = std::fs::read(&img).unwrap();
        let o = sc(&["dump", s(&img)], b"");
        let got = code(&o);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let want = match case.verdict {
            Verdict::Load => 0,
            Verdict::Refuse => 2,
        };
        let tool = if cryptsetup {
            let loads = cryptsetup_loads(&img);
            if loads != (case.verdict == Verdict::Load) {
                wrong.push(format!(
                    "{}: cryptsetup disagrees with the suite",
                    case.name
                ));
            }
            if loads {
                "loads"
            } else {
                "refuses"
            }
        } else {
            "-"
        };
        table += &format!("{}  {:?}  {got}  {tool}\n", case.name, case.verdict);
        if got == want {
            right += 1;
        } else {
            wrong.push(format!("{}: exit {got}, want {want}: {stderr}", case.name));
        }
        if want == 2 && !stderr.contains(case.rule) {
            wrong.push(format!(
                "{}: the message names no {}: {stderr}",
                case.name, case.rule
            ));
        }
        assert!(
            std::fs::read(&img).unwrap() == before,
            "{}: dump wrote",
            case.name
        );
        std::fs::remove_file(&img).unwrap();
    }
    eprintln!(
        "{table}sectorcrypt dump reaches cryptsetup's verdict on {right} of {}",
        CASES.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Exit code and standard error.
fn outcome(o: &Output) -> (i32, String) {
    (code(o), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A refused header: `dump` prints the fields it could read, each copy's problem, the
/// keyslots, then exits 2 naming the rule; `--json` prints the metadata found.
#[test]
fn dump_of_a_refused_header_shows_what_it_can_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let case = CASES
        .iter()
        .find(|c| c.name == "overlapping-areas-c0-json0")
        .unwrap();
    let img = dir.path().join("overlap.img");
    case.write(&img);
    let o = sc(&["dump", s(&img)], b"");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(code(&o), 2, "{text}");
    for want in [
        "Problem:",
        "primary copy: luks2-area-overlap",
        "Keyslots:",
        "  7: luks2",
    ] {
        assert!(text.contains(want), "no {want:?} in\n{text}");
    }
    assert!(outcome(&o).1.contains("luks2-area-overlap"));
    let o = sc(&["dump", s(&img), "--json"], b"");
    assert_eq!(code(&o), 2);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["keyslots"]["7"]["area"], json["keyslots"]["6"]["area"]);
}

/// Flips one byte of `path` at `at`.
fn flip(path: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x55], at).unwrap();
}

/// Points the material of LUKS1 keyslot `slot` of `img` at keyslot `at`'s, `plus`
/// sectors on.
fn point_luks1_slot(img: &Path, slot: u64, at: u64, plus: u32) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut offset = [0u8; 4];
    f.read_exact_at(&mut offset, 208 + at * 48 + 40).unwrap();
    let moved = u32::from_be_bytes(offset) + plus;
    f.write_all_at(&moved.to_be_bytes(), 208 + slot * 48 + 40)
        .unwrap();
}

/// The byte ranges where two files differ.
fn differences(a: &Path, b: &Path) -> Vec<(usize, usize)> {
    let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(a.len(), b.len());
    let mut out: Vec<(usize, usize)> = Vec::new();
    for i in (0..a.len()).filter(|&i| a[i] != b[i]) {
        match out.last_mut() {
            Some(r) if r.1 == i => r.1 = i + 1,
            _ => out.push((i, i + 1)),
        }
    }
    out
}

/// `sectorcrypt repair` on one copy of `damaged`, `cryptsetup repair` on another (when
/// installed): both succeed, and the images differ only where a rebuilt copy gets a new
/// salt and so a new checksum (the copy at `copy_at`; `usize::MAX`: nowhere).
fn repair_like_cryptsetup(dir: &Path, damaged: &Path, says: &str, copy_at: usize) {
    let ours = dir.join("ours.img");
    std::fs::copy(damaged, &ours).unwrap();
    let out = ok(sc(&["repair", s(&ours)], b""));
    assert!(out.contains(says), "{out}");
    let again = ok(sc(&["repair", s(&ours)], b""));
    assert!(again.contains("no known problems"), "{again}");
    assert_eq!(test_key(&ours, "zero"), 0);
    let dump = ok(sc(&["dump", s(&ours)], b""));
    assert!(!dump.contains("Warning"), "{dump}");
    if !have("cryptsetup") {
        sectorcrypt_testkit::skipped!("cryptsetup is not installed: its repair is not compared");
        return;
    }
    let theirs = dir.join("theirs.img");
    std::fs::copy(damaged, &theirs).unwrap();
    run(Command::new("cryptsetup")
        .args(["repair", "-q"])
        .arg(&theirs));
    // Only the rebuilt copy's salt and checksum may differ (none for LUKS1).
    let allowed = if copy_at == usize::MAX {
        vec![]
    } else {
        vec![
            (copy_at + 104, copy_at + 168),
            (copy_at + 448, copy_at + 480),
        ]
    };
    let diffs = differences(&ours, &theirs);
    assert!(
        diffs
            .iter()
            .all(|&(a, b)| allowed.iter().any(|&(x, y)| x <= a && b <= y)),
        "{diffs:?} outside {allowed:?}"
    );
    let dump = |img: &Path| {
        let o = run(Command::new("cryptsetup").arg("luksDump").arg(img));
        String::from_utf8(o.stdout)
            .unwrap()
            .replace(s(img), "IMAGE")
    };
    assert_eq!(dump(&ours), dump(&theirs));
}

/// `repair` rebuilds a damaged or stale LUKS2 copy from the good one and resets a LUKS1
/// inactive keyslot that points into another, exactly as `cryptsetup repair` does; a
/// header with no valid copy is refused and left as it is, as there.
#[test]
fn repair_does_what_cryptsetup_repair_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = new_volume(d, &[]);
    let pristine = std::fs::read(&img).unwrap();
    let hdr = 16384;
    // A damaged primary (its json), then a stale secondary (older seqid).
    flip(&img, 4096 + 10);
    repair_like_cryptsetup(d, &img, "primary copy rebuilt from the secondary", 0);
    std::fs::write(&img, &pristine).unwrap();
    let k1 = key_file(d, "k1", "one");
    let k0 = d.join("k0");
    ok(sc(
        &[
            &["add-key", s(&img), s(&k1), "--key-file", s(&k0)][..],
            &FAST,
        ]
        .concat(),
        b"",
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .write_all_at(&pristine[hdr..2 * hdr], hdr as u64)
        .unwrap();
    repair_like_cryptsetup(d, &img, "secondary copy rebuilt from the primary", hdr);
    // Both copies damaged: nothing to rebuild from.
    std::fs::write(&img, &pristine).unwrap();
    flip(&img, 4096 + 10);
    flip(&img, hdr as u64 + 4096 + 10);
    let before = std::fs::read(&img).unwrap();
    let (c, err) = outcome(&sc(&["repair", s(&img)], b""));
    assert!(c == 2 && err.contains("luks2-checksum"), "{c}: {err}");
    assert!(std::fs::read(&img).unwrap() == before);
    if have("cryptsetup") {
        let st = Command::new("cryptsetup")
            .args(["repair", "-q"])
            .arg(&img)
            .output()
            .unwrap();
        assert!(
            !st.status.success(),
            "cryptsetup repaired what has no good copy"
        );
    } else {
        sectorcrypt_testkit::skipped!(
            "the cryptsetup repair cross-check skipped: cryptsetup is not installed"
        );
    }
    // LUKS1: inactive keyslot 3 inside keyslot 2.
    let dir1 = tempfile::tempdir().unwrap();
    let img = new_volume(dir1.path(), &["--type", "luks1"]);
    point_luks1_slot(&img, 3, 2, 3);
    assert_eq!(test_key(&img, "zero"), 2);
    repair_like_cryptsetup(dir1.path(), &img, "inactive keyslot 3 reset", usize::MAX);
}

/// Two keyslots sharing one area (LUKS2: a keyslot entry copied; LUKS1: an inactive slot
/// pointing at the active one's material). remove-key and change-key used to destroy the
/// only working keyslot and exit 0; now every command refuses the header (exit 2, naming
/// the rule) and nothing is written. cryptsetup refuses both headers too.
#[test]
fn keyslots_sharing_an_area_are_refused_by_remove_key_and_change_key() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    edit_copies(&img, |j| {
        j["keyslots"]["1"] = j["keyslots"]["0"].clone();
        j["digests"]["0"]["keyslots"]
            .as_array_mut()
            .unwrap()
            .push("1".into());
    });
    let before = std::fs::read(&img).unwrap();
    let (c, err) = outcome(&sc(&["remove-key", s(&img), "--key-file", "-"], b"zero"));
    let changed = std::fs::read(&img).unwrap() != before;
    assert!(
        c == 2 && err.contains("luks2-area-overlap") && !changed,
        "remove-key: exit {c}, image changed: {changed}, then test-key exits {}: {err}",
        test_key(&img, "zero")
    );
    let dir1 = tempfile::tempdir().unwrap();
    let img1 = new_volume(dir1.path(), &["--type", "luks1"]);
    point_luks1_slot(&img1, 1, 0, 0);
    let before = std::fs::read(&img1).unwrap();
    let k1 = key_file(dir1.path(), "k1", "one");
    let k0 = dir1.path().join("k0");
    let o = sc(
        &[
            &["change-key", s(&img1), s(&k1), "--key-file", s(&k0)][..],
            &FAST,
        ]
        .concat(),
        b"",
    );
    let (c, err) = outcome(&o);
    let changed = std::fs::read(&img1).unwrap() != before;
    assert!(
        c == 2 && err.contains("luks1-slot-overlap") && !changed,
        "change-key: exit {c}, image changed: {changed}, then the old passphrase exits {}, \
         the new {}: {err}",
        test_key(&img1, "zero"),
        test_key(&img1, "one")
    );
    if have("cryptsetup") {
        for img in [&img, &img1] {
            let o = Command::new("cryptsetup")
                .args(["luksDump", "--disable-locks"])
                .arg(img)
                .output()
                .unwrap();
            assert!(!o.status.success(), "cryptsetup loads {}", s(img));
        }
    } else {
        sectorcrypt_testkit::skipped!(
            "the luksDump cross-check skipped: cryptsetup is not installed"
        );
    }
}

/// An image cut inside its keyslots area: erase used to write past its end (growing it
/// by megabytes of random data); now it is refused as cryptsetup refuses it ("Device too
/// small"), and nothing is written.
#[test]
fn erase_refuses_an_image_smaller_than_its_keyslots_area() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let before = std::fs::read(&img).unwrap();
    let (c, err) = outcome(&sc(&["erase", s(&img), "--batch"], b""));
    let len = std::fs::metadata(&img).unwrap().len();
    assert!(
        c == 2 && len == 8 << 20 && err.contains("device-too-small"),
        "erase: exit {c}, the image now {len} bytes: {err}"
    );
    assert!(std::fs::read(&img).unwrap() == before);
    if have("cryptsetup") {
        let o = Command::new("cryptsetup")
            .args(["luksDump", "--disable-locks"])
            .arg(&img)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("too small"), "{err}");
    } else {
        sectorcrypt_testkit::skipped!(
            "the luksDump cross-check skipped: cryptsetup is not installed"
        );
    }
}

/// A keyslot cryptsetup adds with `--hash sha384` (not implemented here) used to make
/// every passphrase fail with "unsupported"; the other keyslots open, as in cryptsetup,
/// and that keyslot says why it cannot be tried.
#[test]
fn a_keyslot_this_cannot_use_does_not_block_the_others() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &[]);
    let k0 = dir.path().join("k0");
    let k1 = key_file(dir.path(), "k1", "one");
    run(Command::new("cryptsetup")
        .args(["luksAddKey", "-q", "--hash", "sha384", "--pbkdf", "pbkdf2"])
        .args(["--pbkdf-force-iterations", "1000", "--key-file"])
        .arg(&k0)
        .arg(&img)
        .arg(&k1));
    let (c, err) = outcome(&sc(&["test-key", s(&img), "--key-file", "-"], b"zero"));
    assert_eq!(c, 0, "{err}");
    let o = sc(
        &["test-key", s(&img), "--key-slot", "1", "--key-file", "-"],
        b"one",
    );
    let (c, err) = outcome(&o);
    assert!(c == 2 && err.contains("sha384"), "{c}: {err}");
    let dump = ok(sc(&["dump", s(&img)], b""));
    assert!(dump.contains("Unusable"), "{dump}");
}
