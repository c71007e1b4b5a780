//! The volume commands end to end: format, dump, test-key, add-key, change-key,
//! remove-key, header backup/restore, erase, read, write; exit codes (3 for a wrong
//! passphrase, 2 for bad input with nothing changed), the same in every command that opens
//! an image (serve and mount included), also for every class of header that breaks a rule
//! of its format; a kill -9 in the middle of add-key leaves a volume that opens.

#[path = "support/luks2_cases.rs"]
mod luks2_cases;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::{have, pattern, run};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use support::{code, ok, ok_bytes, s, sc};
use volumes::{key_file as key, new_volume, test_key, write_volume, FAST};

#[test]
fn keys_lifecycle_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &["--label", "cli test"]);
    assert_eq!(test_key(&img, "zero"), 0);
    assert_eq!(test_key(&img, "zerO"), 3);
    // A trailing newline is part of a key file, as in cryptsetup.
    assert_eq!(test_key(&img, "zero\n"), 3);
    let k1 = key(dir.path(), "k1", "one");
    let out = ok(sc(
        &[&["add-key", s(&img), s(&k1), "--key-file", "-"][..], &FAST].concat(),
        b"zero",
    ));
    assert!(out.contains("keyslot 1 added"), "{out}");
    assert_eq!(test_key(&img, "one"), 0);
    // The wrong old passphrase changes nothing.
    let before = std::fs::read(&img).unwrap();
    let k2 = key(dir.path(), "k2", "two");
    let o = sc(
        &[&["add-key", s(&img), s(&k2), "--key-file", "-"][..], &FAST].concat(),
        b"nope",
    );
    assert_eq!(code(&o), 3, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&img).unwrap() == before);
    // change-key: "one" becomes "two" in the same keyslot.
    let out = ok(sc(
        &[
            &["change-key", s(&img), s(&k2), "--key-file", "-"][..],
            &FAST,
        ]
        .concat(),
        b"one",
    ));
    assert!(out.contains("keyslot 1"), "{out}");
    assert_eq!(test_key(&img, "one"), 3);
    assert_eq!(test_key(&img, "two"), 0);
    // remove-key with the passphrase of the slot to remove.
    ok(sc(&["remove-key", s(&img), "--key-file", "-"], b"two"));
    assert_eq!(test_key(&img, "two"), 3);
    // The last keyslot needs confirmation: without a terminal and --batch it is refused.
    let o = sc(&["remove-key", s(&img), "--key-file", "-"], b"zero");
    assert_eq!(code(&o), 2);
    assert_eq!(test_key(&img, "zero"), 0);
    // dump, text and json.
    let text = ok(sc(&["dump", s(&img)], b""));
    assert!(
        text.contains("cli test") && text.contains("aes-xts-plain64"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(sc(&["dump", s(&img), "--json"], b""))).unwrap();
    assert_eq!(json["segments"]["0"]["sector_size"], 4096);
    assert_eq!(json["keyslots"].as_object().unwrap().len(), 1);
    if have("cryptsetup") {
        let kf = key(dir.path(), "kz", "zero");
        let st = Command::new("cryptsetup")
            .args(["open", "--test-passphrase", "--key-file", s(&kf), s(&img)])
            .status()
            .unwrap();
        assert!(st.success());
    } else {
        sectorcrypt_testkit::skipped!("skipped: cryptsetup is not installed (cross-check only)");
    }
}

#[test]
fn header_backup_erase_restore() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &["--type", "luks1"]);
    let bak = dir.path().join("hdr.bak");
    ok(sc(&["header", "backup", s(&img), s(&bak)], b""));
    // Header and eight keyslots of 500 sectors each (as cryptsetup's luksHeaderBackup).
    assert_eq!(std::fs::metadata(&bak).unwrap().len(), 4040 * 512);
    // Refuses to overwrite a backup.
    assert_eq!(code(&sc(&["header", "backup", s(&img), s(&bak)], b"")), 2);
    // erase needs confirmation.
    let before = std::fs::read(&img).unwrap();
    assert_eq!(code(&sc(&["erase", s(&img)], b"YES\n")), 2);
    assert!(std::fs::read(&img).unwrap() == before);
    ok(sc(&["erase", s(&img), "--batch"], b""));
    assert_ne!(test_key(&img, "zero"), 0);
    // A file that is no header is refused; the real backup brings the keyslots back.
    let junk = key(dir.path(), "junk", "not a header");
    assert_eq!(
        code(&sc(&["header", "restore", s(&img), s(&junk), "-q"], b"")),
        2
    );
    ok(sc(&["header", "restore", s(&img), s(&bak), "-q"], b""));
    assert_eq!(test_key(&img, "zero"), 0);
}

/// A backup whose header and keyslots end elsewhere than the image's current header is
/// refused, as cryptsetup refuses it ("data offset or key size differs"): restoring a
/// LUKS2 backup onto a LUKS1 volume used to overwrite its first MiBs of data with the
/// backup's keyslot area and exit 0.
#[test]
fn header_restore_refuses_a_backup_of_another_layout() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1");
    let v2 = dir.path().join("v2");
    std::fs::create_dir_all(&v1).unwrap();
    std::fs::create_dir_all(&v2).unwrap();
    let luks1 = new_volume(&v1, &["--type", "luks1"]);
    let luks2 = new_volume(&v2, &["--type", "luks2"]);
    let k = v1.join("k0");
    write_volume(dir.path(), &luks1, &k, &vec![0x5a; 4 << 20]);
    let bak = dir.path().join("v2.hdr");
    ok(sc(&["header", "backup", s(&luks2), s(&bak)], b""));
    let before = std::fs::read(&luks1).unwrap();
    let out = sc(&["header", "restore", s(&luks1), s(&bak), "-q"], b"");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("layout"), "{said}");
    // One sentence, not a wrapped source line's indentation.
    assert!(
        said.contains("current header's at") && !said.contains("  "),
        "{said}"
    );
    assert!(
        std::fs::read(&luks1).unwrap() == before,
        "the image was written"
    );
    assert_eq!(test_key(&luks1, "zero"), 0);
}

#[test]
fn format_refuses_bad_requests_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let k = key(dir.path(), "k", "pw");
    // (--size, more arguments): no size for a new image, argon2 for luks1, a 128-bit XTS
    // key, an unknown cipher, 8192-byte sectors, no room for the metadata, too few
    // iterations.
    let bad: [(Option<&str>, &[&str]); 7] = [
        (None, &[]),
        (Some("20M"), &["--type", "luks1", "--pbkdf", "argon2id"]),
        (
            Some("20M"),
            &["--cipher", "aes-xts-plain64", "--key-size", "128"],
        ),
        (Some("20M"), &["--cipher", "blowfish-xts-plain64"]),
        (Some("20M"), &["--sector-size", "8192"]),
        (Some("1M"), &[]),
        (
            Some("20M"),
            &["--pbkdf-force-iterations", "10", "--pbkdf", "pbkdf2"],
        ),
    ];
    for (size, more) in bad {
        let mut args = vec!["format", s(&img), "--key-file", s(&k)];
        if let Some(size) = size {
            args.extend(["--size", size]);
        }
        args.extend_from_slice(more);
        let o = sc(&args, b"");
        assert_eq!(
            code(&o),
            2,
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!img.exists(), "{args:?} left a file");
    }
    // An existing image is only overwritten after confirmation.
    std::fs::write(&img, vec![7u8; 20 << 20]).unwrap();
    let o = sc(
        &[&["format", s(&img), "--key-file", s(&k)][..], &FAST].concat(),
        b"",
    );
    assert_eq!(code(&o), 2);
    assert!(std::fs::read(&img).unwrap().iter().all(|&b| b == 7));
    ok(sc(
        &[&["format", s(&img), "--key-file", s(&k), "-q"][..], &FAST].concat(),
        b"",
    ));
    assert_eq!(test_key(&img, "pw"), 0);
}

/// kill -9 at many points of add-key (LUKS2 and LUKS1): the old passphrase always opens,
/// the new one opens or does not (never a half-written state), and cryptsetup agrees the
/// header is valid.
#[test]
fn kill_9_during_add_key_leaves_a_volume_that_opens() {
    for luks_type in ["luks2", "luks1"] {
        kill_9_during_add_key(luks_type);
    }
}

fn kill_9_during_add_key(luks_type: &str) {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &["--type", luks_type]);
    let pristine = std::fs::read(&img).unwrap();
    let k1 = key(dir.path(), "k1", "one");
    let k0 = dir.path().join("k0");
    // Slow enough KDF that kills land before, during and after the writes.
    let args = [
        "add-key",
        s(&img),
        s(&k1),
        "--key-file",
        s(&k0),
        "--pbkdf",
        "pbkdf2",
        "--pbkdf-force-iterations",
        "20000",
    ];
    let t = Instant::now();
    ok(sc(&args, b""));
    let full = t.elapsed();
    let have_cryptsetup = have("cryptsetup");
    if !have_cryptsetup {
        // The kill test itself still runs; only the cryptsetup cross-check is skipped.
        sectorcrypt_testkit::skipped!("skipped: cryptsetup is not installed");
    }
    let mut outcomes = [0usize; 2];
    for i in 0..16u32 {
        std::fs::write(&img, &pristine).unwrap();
        let mut child = volumes::spawn(&args, Stdio::null());
        std::thread::sleep(full * i / 12);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(test_key(&img, "zero"), 0, "old passphrase lost (kill {i})");
        let new = test_key(&img, "one");
        assert!(new == 0 || new == 3, "kill {i}: exit {new}");
        outcomes[(new == 0) as usize] += 1;
        if have_cryptsetup {
            let st = Command::new("cryptsetup")
                .args(["open", "--test-passphrase", "--key-file", s(&k0), s(&img)])
                .output()
                .unwrap();
            assert!(st.status.success(), "cryptsetup after kill {i}");
        }
    }
    eprintln!(
        "{luks_type}: kills before the new keyslot was recorded: {}, after: {}",
        outcomes[0], outcomes[1]
    );
}

#[test]
fn write_and_read_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let img = new_volume(dir.path(), &["--sector-size", "4096"]);
    let k0 = dir.path().join("k0");
    let size = 4usize << 20;
    let data = pattern(size, 9);
    write_volume(dir.path(), &img, &k0, &data);
    let input = dir.path().join("in");
    let out = dir.path().join("out");
    ok(sc(
        &["read", s(&img), "--output", s(&out), "--key-file", s(&k0)],
        b"",
    ));
    assert!(std::fs::read(&out).unwrap() == data);
    // Unaligned, from stdin, then read back to stdout.
    let patch = pattern(5000, 3);
    ok(sc(
        &["write", s(&img), "--offset", "1000", "--key-file", s(&k0)],
        &patch,
    ));
    let o = ok_bytes(sc(
        &[
            "read",
            s(&img),
            "--offset",
            "999",
            "--length",
            "5002",
            "--key-file",
            s(&k0),
        ],
        b"",
    ));
    assert_eq!(o[0], data[999]);
    assert!(o[1..5001] == patch[..]);
    assert_eq!(o[5001], data[6000]);
    // Too long for the volume: exit 2, nothing written.
    let before = std::fs::read(&img).unwrap();
    std::fs::write(&input, pattern(size + 1, 1)).unwrap();
    let o = sc(
        &["write", s(&img), "--input", s(&input), "--key-file", s(&k0)],
        b"",
    );
    assert_eq!(code(&o), 2);
    assert!(std::fs::read(&img).unwrap() == before);
    // Reads beyond the end, or with a wrong passphrase, leave no output behind.
    let none = dir.path().join("none");
    let o = sc(
        &[
            "read",
            s(&img),
            "--offset",
            &size.to_string(),
            "--length",
            "1",
            "--output",
            s(&none),
            "--key-file",
            s(&k0),
        ],
        b"",
    );
    assert_eq!(code(&o), 2);
    let o = sc(
        &["read", s(&img), "--output", s(&none), "--key-file", "-"],
        b"bad",
    );
    assert_eq!(code(&o), 3);
    assert!(!none.exists());
    // The passphrase cannot come from stdin when the data does.
    let o = sc(&["write", s(&img), "--key-file", "-"], b"zero");
    assert_eq!(code(&o), 2);
    assert!(std::fs::read(&img).unwrap() == before);
}

/// LUKS1 written by `sectorcrypt write` reads back byte-exact through qemu-img and
/// nbdkit's luks filter.
#[test]
fn luks1_written_here_reads_back_in_qemu_img_and_nbdkit() {
    sectorcrypt_testkit::require!("qemu-img", "nbdkit", "nbdcopy");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("v.img");
    let k0 = key(dir.path(), "k0", "luks one");
    let args = ["format", s(&img), "--size", "5M", "--type", "luks1"];
    ok(sc(
        &[&args[..], &["--key-file", s(&k0)], &FAST].concat(),
        b"",
    ));
    let data = pattern(3 << 20, 4);
    write_volume(dir.path(), &img, &k0, &data);
    let q = dir.path().join("q.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-q", "-O", "raw", "--object"])
        .args(["secret,id=s,data=luks one", "--image-opts"])
        .arg(format!(
            "driver=luks,key-secret=s,file.filename={}",
            s(&img)
        ))
        .arg(&q));
    assert!(std::fs::read(&q).unwrap()[..data.len()] == data[..]);
    let n = dir.path().join("n.raw");
    run(Command::new("nbdkit")
        .args(["-U", "-", "file", s(&img), "--filter=luks"])
        .arg(format!("passphrase=+{}", s(&k0)))
        .arg("--run")
        .arg(format!("nbdcopy \"$uri\" {}", s(&n))));
    assert!(std::fs::read(&n).unwrap()[..data.len()] == data[..]);
}

#[test]
fn demo_formats_writes_verifies_and_removes_a_volume() {
    let o = sc(&["demo"], b"");
    let text = ok(o);
    assert!(text.contains("verify       : ok"), "{text}");
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("removed      : "))
        .expect("removed line");
    assert!(!Path::new(path).exists(), "{path} was left behind");
}

/// The commands that open a volume, as argument lists: `IMG` is the image under test, `KEY`
/// its key file; `OTHER` a good volume, `DIR` the test's directory.
const OPENING: [&[&str]; 13] = [
    &["dump", "IMG"],
    &["test-key", "IMG", "--key-file", "KEY"],
    &["add-key", "IMG", "DIR/k2", "--key-file", "KEY"],
    &["change-key", "IMG", "DIR/k2", "--key-file", "KEY"],
    &["remove-key", "IMG", "--key-file", "KEY", "--batch"],
    &["header", "backup", "IMG", "DIR/backup"],
    // The image under test as the backup to restore.
    &["header", "restore", "OTHER", "IMG", "--batch"],
    &["erase", "IMG", "--batch"],
    &["convert", "IMG", "--type", "luks1", "--batch"],
    &["read", "IMG", "--key-file", "KEY", "--output", "DIR/out"],
    &["write", "IMG", "--key-file", "KEY", "--input", "DIR/in"],
    &["serve", "IMG", "--key-file", "KEY", "--socket", "DIR/sock"],
    &["mount", "IMG", "DIR/mnt", "--key-file", "KEY"],
];

/// Runs every command of [`OPENING`] on `img` (only those taking a passphrase when
/// `keyed`), in `d` beside the good volume `other`, with the key file `key`: each command
/// line and its outcome.
fn run_opening(
    img: &Path,
    d: &Path,
    other: &Path,
    key: &Path,
    keyed: bool,
) -> Vec<(String, std::process::Output)> {
    let mut out = Vec::new();
    for cmd in OPENING {
        if keyed && !cmd.contains(&"KEY") {
            continue; // no passphrase asked: a wrong one cannot matter
        }
        let args: Vec<String> = cmd
            .iter()
            .map(|a| {
                a.replace("IMG", s(img))
                    .replace("KEY", s(key))
                    .replace("OTHER", s(other))
                    .replace("DIR", s(d))
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        out.push((args.join(" "), sc(&args, b"")));
    }
    out
}

/// After [`run_opening`] in `d` refused everything: the restore target `other` still
/// holds `good`, no backup, output or socket was made, nothing is mounted.
fn assert_nothing_done(d: &Path, other: &Path, good: &[u8]) {
    assert!(
        std::fs::read(other).unwrap() == good,
        "the restore target changed"
    );
    for left in ["backup", "out", "sock"] {
        assert!(!d.join(left).exists(), "{left} was created");
    }
    assert!(!volumes::mounted(&d.join("mnt")), "something was mounted");
}

/// Every command that opens a volume fails alike on the same image: exit 2 (bad input)
/// for an image that is missing, a directory, no volume at all or cut inside its header,
/// exit 3 for a wrong passphrase (in the commands that take one); nothing is written,
/// served or mounted.
#[test]
fn every_command_fails_alike_on_an_image_it_cannot_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let other = new_volume(d, &[]);
    let good = std::fs::read(&other).unwrap();
    let wrong = key(d, "wrong", "not the passphrase");
    key(d, "k2", "two");
    std::fs::write(d.join("in"), b"plaintext").unwrap();
    std::fs::create_dir(d.join("mnt")).unwrap();
    let directory = d.join("directory.img");
    std::fs::create_dir(&directory).unwrap();
    let random = d.join("random.img");
    std::fs::write(&random, pattern(1 << 20, 8)).unwrap();
    let cut = d.join("cut.img");
    std::fs::write(&cut, &good[..10_000]).unwrap();
    let locked = d.join("locked.img");
    std::fs::write(&locked, &good).unwrap();
    let cases = [
        (d.join("missing.img"), 2),
        (directory, 2),
        (random, 2),
        (cut, 2),
        (locked.clone(), 3),
    ];
    let mut table = String::new();
    let mut wrong_codes = Vec::new();
    for (img, want) in &cases {
        let before = std::fs::read(img).ok();
        for (args, out) in run_opening(img, d, &other, &wrong, *want == 3) {
            let got = code(&out);
            table += &format!("{got} {args}\n");
            if got != *want {
                wrong_codes.push(format!("{args} -> {got}, want {want}"));
            }
        }
        assert_eq!(std::fs::read(img).ok(), before, "{} changed", s(img));
    }
    assert!(wrong_codes.is_empty(), "{wrong_codes:#?}\n{table}");
    assert_nothing_done(d, &other, &good);
    assert_eq!(test_key(&locked, "zero"), 0);
}

/// A header of each class that breaks a rule (keyslot areas overlapping each other, the
/// header copies or the data; a missing reference; a number that overflows or is
/// negative; a segment field; a metadata size; bytes after the JSON; LUKS1 slots
/// overlapping, in the header, in the data; an image too small for its keyslots) is
/// refused by every command that opens a volume: exit 2, the rule named, nothing
/// written, served or mounted.
#[test]
fn every_command_refuses_a_header_that_breaks_a_rule() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let other = new_volume(d, &[]);
    let good = std::fs::read(&other).unwrap();
    let k0 = d.join("k0");
    key(d, "k2", "two");
    std::fs::write(d.join("in"), b"plaintext").unwrap();
    std::fs::create_dir(d.join("mnt")).unwrap();
    let mut cases: Vec<(std::path::PathBuf, &str)> = Vec::new();
    for name in [
        "overlapping-areas-c1-json0",
        "area-in-json-hdr-space-json0",
        "invalid-keyslots-size-c0",
        "metadata-size-64k-inv-area-c1",
        "missing-keyslot-referenced-in-digest",
        "keyslot-missing-digest",
        "uint64-overflow-segment-size",
        "uint64-signed-segment-size",
        "segment-crypt-missing-encryption",
        "segment-crypt-wrong-sectorsize-0",
        "invalid-json-size-c2",
        "metadata-size-invalid",
        "non-null-bytes-beyond-json0",
        "missing-trailing-null-byte-json0",
    ] {
        let case = luks2_cases::CASES.iter().find(|c| c.name == name).unwrap();
        let img = d.join(format!("{name}.img"));
        case.write(&img);
        cases.push((img, case.rule));
    }
    let small = d.join("small.img");
    std::fs::write(&small, &good[..8 << 20]).unwrap();
    cases.push((small, "device-too-small"));
    // LUKS1: slot 1 at slot 0's material, slot 3 inside the header, slot 3 in the data.
    let luks1 = tempfile::tempdir().unwrap();
    let l1 = std::fs::read(new_volume(luks1.path(), &["--type", "luks1"])).unwrap();
    let slot = |i: usize| 208 + 48 * i + 40;
    let payload = u32::from_be_bytes(l1[104..108].try_into().unwrap());
    for (name, rule, at, value) in [
        (
            "l1-overlap",
            "luks1-slot-overlap",
            slot(1),
            l1[slot(0)..slot(0) + 4].to_vec(),
        ),
        (
            "l1-in-header",
            "luks1-slot-in-header",
            slot(3),
            1u32.to_be_bytes().to_vec(),
        ),
        (
            "l1-in-data",
            "luks1-slot-in-data",
            slot(3),
            payload.to_be_bytes().to_vec(),
        ),
    ] {
        let mut bytes = l1.clone();
        bytes[at..at + 4].copy_from_slice(&value);
        let img = d.join(format!("{name}.img"));
        std::fs::write(&img, bytes).unwrap();
        cases.push((img, rule));
    }
    let mut wrong = Vec::new();
    let mut runs = 0;
    for (img, rule) in &cases {
        let before = std::fs::read(img).unwrap();
        let mut outcomes = run_opening(img, d, &other, &k0, false);
        // mount in the background relays its child's message without waiting for all of
        // it; in the foreground the message is its own.
        let mnt = d.join("mnt");
        let fg = [
            "mount",
            s(img),
            s(&mnt),
            "--foreground",
            "--key-file",
            s(&k0),
        ];
        outcomes.push(("mount --foreground".into(), sc(&fg, b"")));
        for (args, out) in outcomes {
            runs += 1;
            let err = String::from_utf8_lossy(&out.stderr);
            let named =
                err.contains(rule) || (args.starts_with("mount ") && err.contains("see above"));
            if code(&out) != 2 || !named {
                wrong.push(format!("{args} -> {}: {err}", code(&out)));
            }
        }
        assert!(std::fs::read(img).unwrap() == before, "{} changed", s(img));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    eprintln!(
        "{} headers x {} commands: {runs} refusals",
        cases.len(),
        OPENING.len() + 1
    );
    assert_nothing_done(d, &other, &good);
}
