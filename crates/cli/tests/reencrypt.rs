//! `sectorcrypt reencrypt` and `repair` against cryptsetup 2.6 on image files (no
//! device-mapper: cryptsetup's offline re-encryption runs in userspace with
//! `--force-offline-reencrypt --disable-locks --disable-keyring`).
//!
//! Every outcome is judged without sectorcrypt as well: the volume key from `cryptsetup
//! luksDump --dump-volume-key`, the data decrypted with dm-crypt's formula through
//! OpenSSL, compared with what was written before the re-encryption. Runs are stopped
//! cleanly (SIGINT) or killed (SIGKILL) at a chosen sync or write with `strace -e inject`,
//! on either tool, and the other tool recovers and resumes.

#[path = "support/luks2_cases.rs"]
mod luks2_cases;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use openssl::symm::Mode;
use sectorcrypt_testkit::reference::dm_crypt;
use sectorcrypt_testkit::{metric, pattern, require, run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{bin, code, ok, ok_bytes, s, sc};
use volumes::{key_file, write_volume, FAST};

/// Bytes of data of the test volumes: three 4 MiB hotzones.
const DATA: usize = 12 << 20;
const HOTZONE: &str = "4M";

/// A volume with known plaintext in a temporary folder.
struct Case {
    dir: tempfile::TempDir,
    img: PathBuf,
    key: PathBuf,
    plain: Vec<u8>,
}

impl Case {
    /// A LUKS2 volume (16 MiB of metadata, [`DATA`] bytes of data) made by sectorcrypt,
    /// or by cryptsetup when `by_cryptsetup`, holding a pattern written by sectorcrypt.
    fn new(by_cryptsetup: bool, extra: &[&str]) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("v.img");
        let key = key_file(dir.path(), "pass", "correct horse");
        let size = (16 << 20) + DATA;
        if by_cryptsetup {
            std::fs::File::create(&img)
                .unwrap()
                .set_len(size as u64)
                .unwrap();
            run(cryptsetup(&key)
                .args(["luksFormat", "--type", "luks2"])
                .args(FAST)
                .args(extra)
                .arg(&img));
        } else {
            let mut args = vec![
                "format",
                s(&img),
                "--size",
                "28M",
                "--key-file",
                s(&key),
                "-q",
            ];
            args.extend_from_slice(&FAST);
            args.extend_from_slice(extra);
            ok(sc(&args, b""));
        }
        let plain = pattern(DATA, 0x5ec7);
        write_volume(dir.path(), &img, &key, &plain);
        Case {
            dir,
            img,
            key,
            plain,
        }
    }

    /// A copy of this case's image, for a second recovery of the same state.
    fn copy(&self, name: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join(name);
        std::fs::copy(&self.img, &img).unwrap();
        let key = key_file(dir.path(), "pass", "correct horse");
        Case {
            dir,
            img,
            key,
            plain: self.plain.clone(),
        }
    }

    /// `sectorcrypt reencrypt IMG --key-file K ARGS`.
    fn reencrypt(&self, args: &[&str]) -> Output {
        let mut all = vec!["reencrypt", s(&self.img), "--key-file", s(&self.key)];
        all.extend_from_slice(&FAST);
        all.extend_from_slice(args);
        sc(&all, b"")
    }

    /// `cryptsetup ARGS IMG` with the key file and the flags of offline use on files.
    fn cryptsetup(&self, args: &[&str]) -> Command {
        let mut c = cryptsetup(&self.key);
        c.args(args).arg(&self.img);
        c
    }

    /// The LUKS2 metadata as cryptsetup reads it.
    fn json(&self) -> Value {
        metadata(&self.img)
    }

    /// Checks that the volume holds the plaintext written at the start: through
    /// sectorcrypt, and without it (cryptsetup's volume key, dm-crypt's formula in
    /// OpenSSL, the cipher and sector size of the metadata); and that no reencryption is
    /// left in the metadata.
    fn verify(&self, what: &str) {
        self.verify_moved(what, 0)
    }

    /// [`Case::verify`] after a re-key that moved the data `shift` bytes on: the data
    /// starts `shift` bytes later and holds the plaintext's first `DATA - shift` bytes.
    fn verify_moved(&self, what: &str, shift: usize) {
        let json = self.json();
        assert!(
            json["config"].get("requirements").is_none(),
            "{what}: requirements left: {}",
            json["config"]
        );
        let segs = json["segments"].as_object().unwrap();
        assert_eq!(segs.len(), 1, "{what}: segments {segs:?}");
        let seg = &segs["0"];
        let len = DATA - shift;
        let read = ok_bytes(sc(&["read", s(&self.img), "--key-file", s(&self.key)], b""));
        assert!(
            read == self.plain[..len],
            "{what}: sectorcrypt reads other data"
        );
        let vk = self.dir.path().join("vk");
        let _ = std::fs::remove_file(&vk);
        run(&mut self.cryptsetup(&["luksDump", "--dump-volume-key", "--volume-key-file", s(&vk)]));
        let key = std::fs::read(&vk).unwrap();
        let offset: usize = seg["offset"].as_str().unwrap().parse().unwrap();
        let sector = seg["sector_size"].as_u64().unwrap() as usize;
        let stored = std::fs::read(&self.img).unwrap();
        assert_eq!(offset + len, stored.len(), "{what}: data offset {offset}");
        let plain = dm_crypt(
            seg["encryption"].as_str().unwrap(),
            &key,
            sector,
            (sector / 512) as u64,
            0,
            &stored[offset..],
            Mode::Decrypt,
        );
        assert!(
            plain == self.plain[..len],
            "{what}: dm-crypt's formula reads other data"
        );
    }

    /// The volume key cryptsetup finds now (to tell that a re-key happened).
    fn volume_key(&self) -> Vec<u8> {
        let vk = self.dir.path().join("vk0");
        let _ = std::fs::remove_file(&vk);
        run(&mut self.cryptsetup(&["luksDump", "--dump-volume-key", "--volume-key-file", s(&vk)]));
        std::fs::read(&vk).unwrap()
    }
}

/// The LUKS2 metadata of the header in `path`, as cryptsetup reads it.
fn metadata(path: &Path) -> Value {
    let out = run(Command::new("cryptsetup")
        .args(["luksDump", "--dump-json-metadata"])
        .arg(path));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `cryptsetup -q --key-file KEY --disable-locks --disable-keyring`.
fn cryptsetup(key: &Path) -> Command {
    let mut c = Command::new("cryptsetup");
    c.args(["-q", "--key-file"])
        .arg(key)
        .args(["--disable-locks", "--disable-keyring"]);
    c
}

/// `cryptsetup reencrypt` of an image file, offline, with the test's cheap KDF.
fn cs_reencrypt(c: &Case, extra: &[&str]) -> Command {
    let mut args = vec!["reencrypt", "--force-offline-reencrypt"];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    c.cryptsetup(&args)
}

/// `strace -f -o /dev/null -e inject=SYSCALL:signal=SIG:when=N` in front of `cmd`.
fn under_strace(syscall: &str, signal: &str, n: usize, cmd: &Command) -> Command {
    let mut c = Command::new("strace");
    c.args(["-f", "-o", "/dev/null", "-e"])
        .arg(format!("inject={syscall}:signal={signal}:when={n}"))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    c
}

/// `sectorcrypt reencrypt` of `c` as a command (for strace).
fn sc_reencrypt_cmd(c: &Case, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(["reencrypt", s(&c.img), "--key-file", s(&c.key)])
        .args(FAST)
        .args(extra);
    cmd
}

#[test]
fn rekey_with_each_resilience_and_a_new_cipher_reads_back_everywhere() {
    require!("cryptsetup");
    for (resilience, extra) in [
        ("checksum", &[][..]),
        ("journal", &[][..]),
        ("none", &[][..]),
        (
            "checksum",
            &[
                "--cipher",
                "aes-cbc-essiv:sha256",
                "--key-size",
                "256",
                "--sector-size",
                "512",
            ][..],
        ),
    ] {
        let what = format!("{resilience} {extra:?}");
        let c = Case::new(false, &[]);
        let before = c.volume_key();
        let mut args = vec!["--resilience", resilience, "--hotzone-size", HOTZONE];
        args.extend_from_slice(extra);
        let out = ok(c.reencrypt(&args));
        assert!(out.contains("re-encrypted"), "{what}: {out}");
        c.verify(&what);
        assert_ne!(
            c.volume_key(),
            before,
            "{what}: the volume key is the old one"
        );
        let json = c.json();
        assert_eq!(json["keyslots"].as_object().unwrap().len(), 1, "{what}");
        if let [_, cipher, ..] = extra {
            assert_eq!(json["segments"]["0"]["encryption"], *cipher, "{what}");
            assert_eq!(json["segments"]["0"]["sector_size"], 512, "{what}");
        }
    }
}

#[test]
fn cryptsetup_resumes_what_sectorcrypt_started_or_stopped() {
    require!("cryptsetup", "strace");
    for resilience in ["checksum", "journal", "none"] {
        // Metadata only.
        let c = Case::new(false, &[]);
        ok(c.reencrypt(&["--init-only", "--resilience", resilience]));
        let json = c.json();
        assert_eq!(
            json["config"]["requirements"]["mandatory"],
            serde_json::json!(["online-reencrypt-v2"])
        );
        run(&mut cs_reencrypt(&c, &["--resume-only"]));
        c.verify(&format!("{resilience}: init-only, cryptsetup resumed"));

        // Stopped by SIGINT during the second hotzone (at its data sync; without
        // resilience data, which has no sync per hotzone, when its data pass starts its
        // thread: strace counts per thread).
        let c = Case::new(false, &[]);
        let cmd = sc_reencrypt_cmd(&c, &["--resilience", resilience, "--hotzone-size", HOTZONE]);
        let (syscall, n) = match resilience {
            "none" => ("clone3", 2),
            _ => ("fdatasync", 5),
        };
        let out = run(&mut under_strace(syscall, "SIGINT", n, &cmd));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("stopped at") && !text.contains("stopped at 0 "),
            "{resilience}: {text}"
        );
        run(&mut cs_reencrypt(&c, &["--resume-only"]));
        c.verify(&format!("{resilience}: stopped, cryptsetup resumed"));
    }
}

#[test]
fn sectorcrypt_resumes_and_recovers_what_cryptsetup_started() {
    require!("cryptsetup", "strace");
    for resilience in ["checksum", "journal"] {
        let c = Case::new(true, &[]);
        run(&mut cs_reencrypt(
            &c,
            &["--init-only", "--resilience", resilience],
        ));
        ok(c.reencrypt(&["--resume-only"]));
        c.verify(&format!(
            "{resilience}: cryptsetup init, sectorcrypt resumed"
        ));

        // cryptsetup killed at each of its data syncs (one per hotzone): a hotzone in
        // flight; `sectorcrypt reencrypt` refuses until `repair`.
        for n in 1..=3 {
            let what = format!("{resilience}: cryptsetup killed at fdatasync {n}");
            let c = Case::new(true, &[]);
            let cmd = cs_reencrypt(&c, &["--resilience", resilience, "--hotzone-size", HOTZONE]);
            let out = under_strace("fdatasync", "SIGKILL", n, &cmd)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{what}: not killed");
            let refused = c.reencrypt(&[]);
            assert_eq!(code(&refused), 2, "{what}: {refused:?}");
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("repair"),
                "{what}: {refused:?}"
            );
            ok(sc(&["repair", s(&c.img), "--key-file", s(&c.key)], b""));
            ok(c.reencrypt(&[]));
            c.verify(&what);
        }
    }
}

/// cryptsetup killed at each of its header syncs of a re-key: sectorcrypt recovers every
/// state, including the one cryptsetup's end leaves between wiping the old keyslot's area
/// and writing the metadata without it (the old key no longer opens; cryptsetup 2.6.1
/// can neither repair nor resume it).
#[test]
fn cryptsetup_killed_at_each_header_sync_is_recovered_by_sectorcrypt() {
    require!("cryptsetup", "strace");
    let mut kills = 0;
    for n in 1.. {
        let c = Case::new(true, &[]);
        let cmd = cs_reencrypt(&c, &["--hotzone-size", HOTZONE]);
        let out = under_strace("fsync", "SIGKILL", n, &cmd).output().unwrap();
        if out.status.success() {
            break;
        }
        let what = format!("cryptsetup killed at fsync {n}");
        let repaired = sc(&["repair", s(&c.img), "--key-file", s(&c.key)], b"");
        assert_eq!(code(&repaired), 0, "{what}: {repaired:?}");
        if c.requirements_left() {
            ok(c.reencrypt(&[]));
        }
        c.verify(&what);
        kills += 1;
    }
    assert!(kills >= 6, "{kills}");
    eprintln!("reencrypt: {kills} kills of cryptsetup at a header sync recovered by sectorcrypt");
}

/// Kills `sectorcrypt reencrypt` at its `n`-th call of `syscall`; `None` when the run
/// ended before (n is past the last call).
fn killed_at(c: &Case, resilience: &str, syscall: &str, n: usize) -> Option<()> {
    let cmd = sc_reencrypt_cmd(c, &["--resilience", resilience, "--hotzone-size", HOTZONE]);
    let out = under_strace(syscall, "SIGKILL", n, &cmd).output().unwrap();
    if out.status.success() {
        return None;
    }
    Some(())
}

/// Recovers `c` with sectorcrypt (repair, then reencrypt) and a copy with cryptsetup
/// (repair, then reencrypt --resume-only; or nothing when the kill came before the
/// metadata), and checks both.
fn recover_with_both(c: &Case, what: &str) {
    let other = c.copy("cs.img");
    ok(sc(&["repair", s(&c.img), "--key-file", s(&c.key)], b""));
    let state = c.json();
    if state["config"].get("requirements").is_some() {
        ok(c.reencrypt(&[]));
    } else if state["segments"].as_object().unwrap().len() == 1
        && state["keyslots"].as_object().unwrap().len() == 1
    {
        // Killed before the metadata was written (the old volume as it was) or after
        // the end: start again to finish the test's work.
        ok(c.reencrypt(&[]));
    }
    c.verify(&format!("{what}, sectorcrypt recovered"));

    run(&mut other.cryptsetup(&["repair"]));
    let json = other.json();
    if json["config"].get("requirements").is_some() {
        run(&mut cs_reencrypt(&other, &["--resume-only"]));
    }
    other.verify(&format!("{what}, cryptsetup recovered"));
}

#[test]
fn sectorcrypt_killed_at_every_sync_is_recovered_by_both_tools() {
    require!("cryptsetup", "strace");
    let mut cases = 0;
    for resilience in ["checksum", "journal"] {
        for n in 1.. {
            let c = Case::new(false, &[]);
            if killed_at(&c, resilience, "fdatasync", n).is_none() {
                assert!(n > 10, "{resilience}: only {} syncs", n - 1);
                break;
            }
            recover_with_both(&c, &format!("{resilience}: killed at fdatasync {n}"));
            cases += 1;
        }
    }
    eprintln!("reencrypt: {cases} kills at a sync, each recovered by both tools");
}

#[test]
fn sectorcrypt_killed_at_writes_is_recovered_by_both_tools() {
    require!("cryptsetup", "strace");
    let mut cases = 0;
    for resilience in ["checksum", "journal"] {
        // Every third write: the header copies, resilience data and data chunks of each
        // step all come up.
        for n in (1..).step_by(3) {
            let c = Case::new(false, &[]);
            if killed_at(&c, resilience, "pwrite64", n).is_none() {
                break;
            }
            recover_with_both(&c, &format!("{resilience}: killed at pwrite {n}"));
            cases += 1;
        }
    }
    assert!(cases > 10, "only {cases} cases");
    eprintln!("reencrypt: {cases} kills at a write, each recovered by both tools");
}

/// The data shift of the re-key tests that move the data (`--reduce-device-size`): the
/// data area keeps two thirds.
const MOVE: &str = "4M";
const MOVED: usize = 4 << 20;

impl Case {
    fn requirements_left(&self) -> bool {
        self.json()["config"].get("requirements").is_some()
    }

    /// How far the data moved from cryptsetup's 16 MiB offset (the one segment left).
    fn moved(&self) -> usize {
        let json = self.json();
        let offset: usize = json["segments"]["0"]["offset"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        offset - (16 << 20)
    }

    /// Recovers `self` with sectorcrypt (repair, then reencrypt) and a copy with
    /// cryptsetup (repair, then reencrypt --resume-only) after a kill during a re-key that
    /// moves the data, and checks both: moved and re-keyed, or (killed before the
    /// metadata) as it was. `true` when the state is one cryptsetup recovers wrongly and
    /// sectorcrypt recovered the copy as well.
    fn recover_moved_with_both(&self, what: &str) -> bool {
        let other = self.copy("cs.img");
        ok(sc(
            &["repair", s(&self.img), "--key-file", s(&self.key)],
            b"",
        ));
        if self.requirements_left() {
            ok(self.reencrypt(&[]));
        }
        self.verify_moved(&format!("{what}, sectorcrypt recovered"), self.moved());
        let json = other.json();
        let segs = json["segments"].as_object().unwrap();
        let first_hot = segs.values().any(|s| {
            s["flags"] == serde_json::json!(["in-reencryption"])
                && s["offset"]
                    == segs
                        .values()
                        .find(|b| b["flags"] == serde_json::json!(["backup-final"]))
                        .unwrap()["offset"]
        });
        if first_hot {
            // The last hotzone (the data's first bytes) in flight: cryptsetup 2.6.1's
            // repair reads its old data from the moved segment a data-shift encryption
            // has, which a re-key has not (device offset 0: the header), and writes
            // garbage over the data's start. sectorcrypt recovers that copy too.
            ok(sc(
                &["repair", s(&other.img), "--key-file", s(&other.key)],
                b"",
            ));
            ok(other.reencrypt(&[]));
            other.verify_moved(
                &format!("{what} (last hotzone), sectorcrypt recovered"),
                MOVED,
            );
            return true;
        }
        run(&mut other.cryptsetup(&["repair"]));
        if other.requirements_left() {
            run(&mut cs_reencrypt(&other, &["--resume-only"]));
        }
        other.verify_moved(&format!("{what}, cryptsetup recovered"), other.moved());
        false
    }
}

/// The parts of a re-key's metadata that are not random (salts, digests, keyslot
/// material), to compare the two tools' inits.
fn rekey_shape(json: &Value) -> Value {
    let keyslots = json["keyslots"].as_object().unwrap();
    let mut reenc = keyslots
        .values()
        .find(|k| k["type"] == "reencrypt")
        .unwrap()
        .clone();
    reenc.as_object_mut().unwrap().remove("priority");
    let areas: Vec<&Value> = keyslots.values().map(|k| &k["area"]).collect();
    let lists: Vec<(Value, Value)> = json["digests"]
        .as_object()
        .unwrap()
        .values()
        .map(|d| (d["keyslots"].clone(), d["segments"].clone()))
        .collect();
    serde_json::json!({
        "segments": json["segments"],
        "reencrypt": reenc,
        "config": json["config"],
        "digests": format!("{lists:?}"),
        "areas": areas,
    })
}

/// A re-key with `--reduce-device-size` (cryptsetup's way to grow the header): the data
/// moves on by the shift from the end backward, and either tool resumes the other's.
#[test]
fn rekey_moving_the_data_both_ways() {
    require!("cryptsetup", "strace");
    // sectorcrypt alone, in 1 MiB hotzones; the old ciphertext left before the new data
    // offset is wiped; the keyslots area grows to the data.
    let c = Case::new(false, &[]);
    let old_key = c.volume_key();
    let old = std::fs::read(&c.img).unwrap();
    let out = ok(c.reencrypt(&["--reduce-device-size", MOVE, "--hotzone-size", "1M"]));
    assert!(out.contains("re-encrypted"), "{out}");
    c.verify_moved("sectorcrypt, --reduce-device-size", MOVED);
    assert_ne!(c.volume_key(), old_key, "the volume key is the old one");
    let stored = std::fs::read(&c.img).unwrap();
    let start = 16 << 20;
    assert!(
        stored[start..start + MOVED]
            .chunks(4096)
            .zip(old[start..start + MOVED].chunks(4096))
            .all(|(a, b)| a != b),
        "old ciphertext left before the new data offset"
    );
    let json = c.json();
    let keyslots_size: usize = json["config"]["keyslots_size"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let json_size: usize = json["config"]["json_size"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(keyslots_size, start + MOVED - 2 * (json_size + 4096));

    // Both tools' inits write the same metadata; each resumes the other's.
    let (mine, theirs) = (Case::new(false, &[]), Case::new(false, &[]));
    ok(mine.reencrypt(&["--init-only", "--reduce-device-size", MOVE]));
    run(&mut cs_reencrypt(
        &theirs,
        &["--init-only", "--reduce-device-size", MOVE],
    ));
    assert_eq!(rekey_shape(&mine.json()), rekey_shape(&theirs.json()));
    run(&mut cs_reencrypt(&mine, &["--resume-only"]));
    mine.verify_moved("sectorcrypt's init, cryptsetup resumed", MOVED);
    ok(theirs.reencrypt(&["--resume-only"]));
    theirs.verify_moved("cryptsetup's init, sectorcrypt resumed", MOVED);
    // The two ends agree on the grown keyslots area.
    assert_eq!(mine.json()["config"], theirs.json()["config"]);

    // Stopped cleanly in a later hotzone, resumed by the other tool.
    let c = Case::new(false, &[]);
    let cmd = sc_reencrypt_cmd(&c, &["--reduce-device-size", MOVE, "--hotzone-size", "1M"]);
    let out = run(&mut under_strace("fdatasync", "SIGINT", 8, &cmd));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stopped at") && !text.contains("stopped at 0 "),
        "{text}"
    );
    run(&mut cs_reencrypt(&c, &["--resume-only"]));
    c.verify_moved("sectorcrypt stopped by SIGINT, cryptsetup resumed", MOVED);
    let c = Case::new(true, &[]);
    run(&mut cs_reencrypt(
        &c,
        &["--init-only", "--reduce-device-size", MOVE],
    ));
    let cmd = cs_reencrypt(&c, &["--resume-only", "--hotzone-size", "1M"]);
    // cryptsetup's hotzones are the shift here (two): stopped at the first one's data
    // sync, it ends that hotzone and stops.
    let out = under_strace("fdatasync", "SIGINT", 1, &cmd)
        .output()
        .unwrap();
    assert!(c.requirements_left(), "cryptsetup was not stopped: {out:?}");
    ok(c.reencrypt(&[]));
    c.verify_moved("cryptsetup stopped by SIGINT, sectorcrypt resumed", MOVED);
}

#[test]
fn rekey_moving_the_data_killed_anywhere_is_recovered_by_both_tools() {
    require!("cryptsetup", "strace");
    let (mut kills, mut cs_wrong) = (0, 0);
    for n in 1.. {
        let c = Case::new(false, &[]);
        let cmd = sc_reencrypt_cmd(&c, &["--reduce-device-size", MOVE, "--hotzone-size", "1M"]);
        let out = under_strace("fdatasync", "SIGKILL", n, &cmd)
            .output()
            .unwrap();
        if out.status.success() {
            assert!(n > 10, "only {} syncs", n - 1);
            break;
        }
        if c.recover_moved_with_both(&format!("sectorcrypt killed at fdatasync {n}")) {
            cs_wrong += 1;
        }
        kills += 1;
    }
    let mut theirs = 0;
    for syscall in ["fdatasync", "fsync"] {
        for n in 1.. {
            let c = Case::new(true, &[]);
            run(&mut cs_reencrypt(
                &c,
                &["--init-only", "--reduce-device-size", MOVE],
            ));
            let cmd = cs_reencrypt(&c, &["--resume-only", "--hotzone-size", "1M"]);
            let out = under_strace(syscall, "SIGKILL", n, &cmd).output().unwrap();
            if out.status.success() {
                break;
            }
            let what = format!("cryptsetup killed at {syscall} {n}");
            ok(sc(&["repair", s(&c.img), "--key-file", s(&c.key)], b""));
            if c.requirements_left() {
                ok(c.reencrypt(&[]));
            }
            c.verify_moved(&format!("{what}, sectorcrypt recovered"), MOVED);
            theirs += 1;
        }
    }
    assert!(theirs >= 4, "{theirs}");
    eprintln!(
        "reencrypt --reduce-device-size: {kills} kills of sectorcrypt recovered by both \
         tools ({cs_wrong} in the last hotzone by sectorcrypt alone: cryptsetup's repair \
         reads the wrong place), {theirs} of cryptsetup recovered by sectorcrypt"
    );
}

/// What a re-key that moves the data refuses, before anything is written.
#[test]
fn rekey_moving_the_data_refusals_leave_the_image_as_it_was() {
    require!("cryptsetup");
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--reduce-device-size", "3000"], "multiple of 4096"),
        (&["--reduce-device-size", "8M"], "at least"),
        (
            &["--reduce-device-size", MOVE, "--resilience", "journal"],
            "give no --resilience",
        ),
        (
            &["--reduce-device-size", MOVE, "--decrypt", "--header", "h"],
            "cannot be used with",
        ),
    ];
    for (args, says) in cases {
        let out = c.reencrypt(args);
        assert_eq!(code(&out), 2, "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: wanted {says:?} in: {err}");
        assert!(
            std::fs::read(&c.img).unwrap() == before,
            "{args:?}: the image changed"
        );
    }
    // In progress: resumed as it started, offline only.
    ok(c.reencrypt(&["--init-only", "--reduce-device-size", MOVE]));
    let before = std::fs::read(&c.img).unwrap();
    let out = c.reencrypt(&["--reduce-device-size", "8M"]);
    assert_eq!(code(&out), 2, "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in progress"),
        "{out:?}"
    );
    let sock = c.dir.path().join("nbd.sock");
    let args = [
        "serve",
        s(&c.img),
        "--key-file",
        s(&c.key),
        "--socket",
        s(&sock),
        "--reencrypt",
    ];
    let out = sc(&args, b"");
    assert_ne!(code(&out), 0, "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("run it offline"),
        "{out:?}"
    );
    assert!(
        std::fs::read(&c.img).unwrap() == before,
        "the image changed"
    );
    ok(c.reencrypt(&[]));
    c.verify_moved("resumed after the refusals", MOVED);
}

/// Hostile metadata of a re-key that moves the data: a changed shift (bound by the
/// reencryption digest) and a hotzone in flight longer than the shift (whose old data a
/// recovery would read from bytes already written over) are refused; nothing is written.
#[test]
fn rekey_moving_the_data_with_hostile_metadata_is_refused() {
    require!("cryptsetup");
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit, &str); 2] = [
        (
            "another shift",
            |j| {
                let slot = j["keyslots"]
                    .as_object_mut()
                    .unwrap()
                    .values_mut()
                    .find(|k| k["type"] == "reencrypt")
                    .unwrap();
                slot["area"]["shift_size"] = "8388608".into();
            },
            "digest",
        ),
        (
            "a hotzone longer than the shift",
            |j| {
                j["segments"]["0"] = serde_json::json!({"type": "crypt",
                    "offset": "20971520", "size": "8388608", "iv_tweak": "0",
                    "encryption": "aes-xts-plain64", "sector_size": 4096,
                    "flags": ["in-reencryption"]});
            },
            "longer than the data shift",
        ),
    ];
    for (what, edit, says) in edits {
        let c = Case::new(false, &[]);
        ok(c.reencrypt(&["--init-only", "--reduce-device-size", MOVE]));
        luks2_cases::edit_copies(&c.img, edit);
        let before = std::fs::read(&c.img).unwrap();
        for verb in ["repair", "reencrypt"] {
            let out = sc(&[verb, s(&c.img), "--key-file", s(&c.key)], b"");
            assert_ne!(code(&out), 0, "{what}: {verb}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            if verb == "repair" {
                assert!(
                    err.contains(says),
                    "{what}: {verb}: wanted {says:?} in {err}"
                );
            }
            assert!(
                std::fs::read(&c.img).unwrap() == before,
                "{what}: {verb} wrote"
            );
        }
    }
}

#[test]
fn refusals_leave_the_image_as_it_was() {
    require!("cryptsetup");
    let unchanged = |c: &Case, out: Output, want: i32, says: &str, before: &[u8]| {
        assert_eq!(code(&out), want, "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "wanted {says:?} in: {err}");
        assert!(
            std::fs::read(&c.img).unwrap() == before,
            "the image changed"
        );
    };

    // A wrong passphrase.
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    let wrong = key_file(c.dir.path(), "wrong", "wrong horse");
    let mut args = vec!["reencrypt", s(&c.img), "--key-file", s(&wrong)];
    args.extend_from_slice(&FAST);
    unchanged(&c, sc(&args, b""), 3, "", &before);

    // A second keyslot the passphrase does not open: named, nothing written.
    let other = key_file(c.dir.path(), "other", "other horse");
    let mut args = vec!["add-key", s(&c.img), s(&other), "--key-file", s(&c.key)];
    args.extend_from_slice(&FAST);
    ok(sc(&args, b""));
    let before = std::fs::read(&c.img).unwrap();
    unchanged(&c, c.reencrypt(&[]), 2, "keyslot 1 does not open", &before);
    // With --key-slot, only keyslot 0 is carried over.
    ok(c.reencrypt(&["--key-slot", "0", "--hotzone-size", HOTZONE]));
    c.verify("--key-slot 0");
    assert_eq!(c.json()["keyslots"].as_object().unwrap().len(), 1);

    // A bad hotzone size and a resume with nothing to resume.
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    unchanged(
        &c,
        c.reencrypt(&["--hotzone-size", "1000"]),
        2,
        "multiple of 4096",
        &before,
    );
    unchanged(
        &c,
        c.reencrypt(&["--resume-only"]),
        2,
        "no re-encryption",
        &before,
    );

    let dir = tempfile::tempdir().unwrap();
    // LUKS1: the convert hint; GELI: how to copy into a new volume.
    let key = key_file(dir.path(), "pass", "x");
    for (kind, hint) in [("luks1", "convert"), ("geli", "copy")] {
        let img = dir.path().join(format!("{kind}.img"));
        let mut args = vec!["format", s(&img), "--type", kind, "--size", "8M"];
        args.extend_from_slice(&["--key-file", s(&key)]);
        args.extend_from_slice(&FAST);
        ok(sc(&args, b""));
        let out = sc(&["reencrypt", s(&img), "--key-file", s(&key)], b"");
        assert_ne!(code(&out), 0);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(hint),
            "{kind}: {out:?}"
        );
    }
}

#[test]
fn an_image_that_shrank_midway_is_refused() {
    require!("cryptsetup");
    let c = Case::new(false, &[]);
    ok(c.reencrypt(&["--init-only"]));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&c.img)
        .unwrap();
    f.set_len((16 << 20) + (DATA as u64) / 2 + 100).unwrap();
    let out = c.reencrypt(&[]);
    assert_ne!(code(&out), 0, "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sectors") || err.contains("image"), "{err}");
}

/// Unmounts a mount point when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_midway_loses_nothing_and_the_run_resumes() {
    require!("cryptsetup", "mount", "umount");
    if sectorcrypt_testkit::run_stdout(Command::new("id").arg("-u")).trim() != "0" {
        sectorcrypt_testkit::skipped!("skipped: not root (mounting a small tmpfs needs it)");
        return;
    }
    // A sparse volume on a tmpfs that holds its metadata and a third of its data: the
    // re-encryption fills the holes and runs out of space in the middle.
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("fs");
    std::fs::create_dir(&mnt).unwrap();
    let fs_size = (16 << 20) + DATA / 3;
    run(Command::new("mount")
        .args(["-t", "tmpfs", "-o"])
        .arg(format!("size={fs_size}"))
        .args(["tmpfs"])
        .arg(&mnt));
    let _mounted = Mounted(mnt.clone());
    let img = mnt.join("v.img");
    let key = key_file(dir.path(), "pass", "correct horse");
    let mut args = vec![
        "format",
        s(&img),
        "--size",
        "28M",
        "--key-file",
        s(&key),
        "-q",
    ];
    args.extend_from_slice(&FAST);
    ok(sc(&args, b""));
    // What the volume holds, holes included (they read as what zeros decrypt to).
    let plain = ok_bytes(sc(&["read", s(&img), "--key-file", s(&key)], b""));
    let c = Case {
        dir,
        img,
        key,
        plain,
    };
    let out = c.reencrypt(&["--hotzone-size", HOTZONE]);
    assert_ne!(code(&out), 0, "the run did not fail: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No space left") || err.contains("space"),
        "no clear error: {err}"
    );
    // More room, then recovery and the rest of the run.
    run(Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&mnt));
    ok(sc(&["repair", s(&c.img), "--key-file", s(&c.key)], b""));
    ok(c.reencrypt(&[]));
    c.verify("full disk, then room, repair and resume");
}

/// Plain data to encrypt in place with a detached header (`--encrypt --header`).
struct Plain {
    dir: tempfile::TempDir,
    img: PathBuf,
    hdr: PathBuf,
    key: PathBuf,
    plain: Vec<u8>,
}

impl Plain {
    fn new() -> Plain {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("plain.img");
        let plain = pattern(DATA, 0xe2c);
        std::fs::write(&img, &plain).unwrap();
        Plain {
            hdr: dir.path().join("v.hdr"),
            key: key_file(dir.path(), "pass", "correct horse"),
            img,
            plain,
            dir,
        }
    }

    fn sc_cmd(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(["reencrypt", s(&self.img), "--header", s(&self.hdr)])
            .args(["--key-file", s(&self.key)])
            .args(FAST)
            .args(extra);
        cmd
    }

    fn cs(&self, args: &[&str]) -> Command {
        let mut c = cryptsetup(&self.key);
        c.args(args).args(["--header", s(&self.hdr)]).arg(&self.img);
        c
    }

    /// The data is the plaintext under the header's key (sectorcrypt, and dm-crypt's
    /// formula with cryptsetup's volume key), and no re-encryption is left.
    fn verify(&self, what: &str) {
        let json = metadata(&self.hdr);
        assert!(
            json["config"].get("requirements").is_none(),
            "{what}: {}",
            json["config"]
        );
        let read = ok_bytes(self.sc_verb("read"));
        assert!(read == self.plain, "{what}: sectorcrypt reads other data");
        let vk = self.dir.path().join("vk");
        let _ = std::fs::remove_file(&vk);
        run(&mut self.cs(&["luksDump", "--dump-volume-key", "--volume-key-file", s(&vk)]));
        let seg = &json["segments"]["0"];
        let sector = seg["sector_size"].as_u64().unwrap() as usize;
        let got = dm_crypt(
            seg["encryption"].as_str().unwrap(),
            &std::fs::read(&vk).unwrap(),
            sector,
            (sector / 512) as u64,
            0,
            &std::fs::read(&self.img).unwrap(),
            Mode::Decrypt,
        );
        assert!(
            got == self.plain,
            "{what}: dm-crypt's formula reads other data"
        );
    }
}

#[test]
fn encrypt_in_place_with_a_detached_header_both_ways() {
    require!("cryptsetup", "strace");
    // sectorcrypt alone.
    let p = Plain::new();
    let out = run(&mut p.sc_cmd(&["--encrypt", "--hotzone-size", HOTZONE]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("encrypted"));
    p.verify("sectorcrypt --encrypt");

    // sectorcrypt initialises, cryptsetup resumes; and the other way.
    let p = Plain::new();
    run(&mut p.sc_cmd(&["--encrypt", "--init-only"]));
    run(&mut p.cs(&["reencrypt", "--resume-only", "--force-offline-reencrypt"]));
    p.verify("sectorcrypt --encrypt --init-only, cryptsetup resumed");
    let p = Plain::new();
    let mut init = vec!["reencrypt", "--encrypt", "--init-only", "--type", "luks2"];
    init.extend_from_slice(&FAST);
    run(&mut p.cs(&init));
    run(&mut p.sc_cmd(&["--hotzone-size", HOTZONE]));
    p.verify("cryptsetup --encrypt --init-only, sectorcrypt resumed");

    // A data area that already holds a volume, and a header file that exists.
    let p = Plain::new();
    std::fs::write(&p.hdr, b"x").unwrap();
    let before = std::fs::read(&p.img).unwrap();
    let out = p.sc_cmd(&["--encrypt"]).output().unwrap();
    refused(&out, "exists");
    assert!(std::fs::read(&p.img).unwrap() == before);
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    let hdr = c.dir.path().join("new.hdr");
    let mut args = vec!["reencrypt", "--encrypt", s(&c.img), "--header", s(&hdr)];
    args.extend_from_slice(&["--key-file", s(&c.key)]);
    let out = sc(&args, b"");
    refused(&out, "already holds");
    assert!(std::fs::read(&c.img).unwrap() == before && !hdr.exists());

    // Killed at every sync: recovered by sectorcrypt, and by cryptsetup on a copy.
    let mut cases = 0;
    for n in 1.. {
        let p = Plain::new();
        let cmd = p.sc_cmd(&["--encrypt", "--hotzone-size", HOTZONE]);
        let out = under_strace("fdatasync", "SIGKILL", n, &cmd)
            .output()
            .unwrap();
        if out.status.success() {
            assert!(n > 8, "only {} syncs", n - 1);
            break;
        }
        if !p.hdr.exists() || std::fs::metadata(&p.hdr).unwrap().len() == 0 {
            continue;
        }
        let q = p.copy();
        let what = format!("--encrypt killed at fdatasync {n}");
        let repaired = p.sc_verb("repair");
        if code(&repaired) != 0 {
            // Killed before the header was whole: nothing of the data was touched.
            assert!(
                std::fs::read(&p.img).unwrap() == p.plain,
                "{what}: {repaired:?}"
            );
            continue;
        }
        let json = metadata(&p.hdr);
        if json["config"].get("requirements").is_some() {
            run(&mut p.sc_cmd(&[]));
        }
        p.verify(&format!("{what}, sectorcrypt recovered"));
        run(&mut q.cs(&["repair"]));
        let json = metadata(&q.hdr);
        if json["config"].get("requirements").is_some() {
            run(&mut q.cs(&["reencrypt", "--resume-only", "--force-offline-reencrypt"]));
        }
        q.verify(&format!("{what}, cryptsetup recovered"));
        cases += 1;
    }
    eprintln!("encrypt: {cases} kills at a sync, each recovered by both tools");
}

impl Plain {
    /// A volume with a detached header whose data (at offset 0) holds the pattern
    /// encrypted, the header made by cryptsetup or by sectorcrypt: what `--decrypt` takes.
    fn detached(by_cryptsetup: bool) -> Plain {
        let p = Plain::new();
        if by_cryptsetup {
            std::fs::File::create(&p.hdr)
                .unwrap()
                .set_len(16 << 20)
                .unwrap();
            let mut format = vec!["luksFormat", "--type", "luks2", "--offset", "0"];
            format.extend_from_slice(&FAST);
            run(&mut p.cs(&format));
        } else {
            let mut format = vec!["format", s(&p.img), "--header", s(&p.hdr), "-q"];
            format.extend_from_slice(&["--key-file", s(&p.key)]);
            format.extend_from_slice(&FAST);
            ok(sc(&format, b""));
        }
        let plain_file = p.dir.path().join("plain");
        std::fs::write(&plain_file, &p.plain).unwrap();
        let mut write = vec!["write", s(&p.img), "--header", s(&p.hdr), "-i"];
        write.extend_from_slice(&[s(&plain_file), "--key-file", s(&p.key)]);
        ok(sc(&write, b""));
        assert!(std::fs::read(&p.img).unwrap() != p.plain, "not encrypted");
        p
    }

    /// A copy of the image and the header, for a second recovery of the same state.
    fn copy(&self) -> Plain {
        let q = Plain::new();
        std::fs::copy(&self.img, &q.img).unwrap();
        std::fs::copy(&self.hdr, &q.hdr).unwrap();
        q
    }

    /// The image holds the plaintext alone, and the header (which cryptsetup reads) no
    /// keyslot, no digest and one linear segment at 0, as cryptsetup's decryption leaves
    /// it.
    fn verify_decrypted(&self, what: &str) {
        assert!(
            std::fs::read(&self.img).unwrap() == self.plain,
            "{what}: the image is not the plaintext"
        );
        let json = metadata(&self.hdr);
        assert!(
            json["config"].get("requirements").is_none(),
            "{what}: {json}"
        );
        assert_eq!(json["keyslots"], serde_json::json!({}), "{what}");
        assert_eq!(json["digests"], serde_json::json!({}), "{what}");
        assert_eq!(
            json["segments"],
            serde_json::json!({"0": {"type": "linear", "offset": "0", "size": "dynamic"}}),
            "{what}"
        );
    }

    /// `sectorcrypt VERB IMG --header HDR --key-file KEY` (`read`, `repair`).
    fn sc_verb(&self, verb: &str) -> Output {
        let args = [verb, s(&self.img), "--header", s(&self.hdr), "--key-file"];
        let mut args = args.to_vec();
        args.push(s(&self.key));
        sc(&args, b"")
    }
}

#[test]
fn decrypt_in_place_with_a_detached_header_both_ways() {
    require!("cryptsetup", "strace");
    let resume = ["reencrypt", "--resume-only", "--force-offline-reencrypt"];
    for resilience in ["checksum", "journal", "none"] {
        // sectorcrypt alone, on a header each tool made.
        for by_cryptsetup in [true, false] {
            let p = Plain::detached(by_cryptsetup);
            let out = run(&mut p.sc_cmd(&[
                "--decrypt",
                "--resilience",
                resilience,
                "--hotzone-size",
                HOTZONE,
            ]));
            assert!(String::from_utf8_lossy(&out.stdout).contains("decrypted"));
            p.verify_decrypted(&format!("{resilience}: sectorcrypt --decrypt"));
            // The header opens nothing now, and says why.
            let out = p.sc_cmd(&[]).output().unwrap();
            assert_eq!(code(&out), 2, "{out:?}");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("linear (plaintext)"),
                "{out:?}"
            );
        }

        // One tool initialises, the other runs it.
        let p = Plain::detached(true);
        run(&mut p.sc_cmd(&["--decrypt", "--init-only", "--resilience", resilience]));
        let json = metadata(&p.hdr);
        let slot = json["keyslots"]
            .as_object()
            .unwrap()
            .values()
            .find(|k| k["type"] == "reencrypt")
            .unwrap()
            .clone();
        assert_eq!(slot["mode"], "decrypt");
        assert_eq!(slot["direction"], "backward");
        run(&mut p.cs(&resume));
        p.verify_decrypted(&format!("{resilience}: sectorcrypt init, cryptsetup ran"));
        let p = Plain::detached(true);
        let mut init = vec![
            "reencrypt",
            "--decrypt",
            "--init-only",
            "--force-offline-reencrypt",
        ];
        init.extend_from_slice(&["--resilience", resilience]);
        run(&mut p.cs(&init));
        run(&mut p.sc_cmd(&["--hotzone-size", HOTZONE]));
        p.verify_decrypted(&format!("{resilience}: cryptsetup init, sectorcrypt ran"));

        // Stopped by SIGINT in the second hotzone; the other tool finishes.
        let p = Plain::detached(true);
        let cmd = p.sc_cmd(&[
            "--decrypt",
            "--resilience",
            resilience,
            "--hotzone-size",
            HOTZONE,
        ]);
        // Without resilience data there is no sync per hotzone: each hotzone's data pass
        // starts a thread (strace counts per thread: the data writes are the workers').
        let (syscall, n) = match resilience {
            "none" => ("clone3", 2),
            _ => ("fdatasync", 5),
        };
        let out = run(&mut under_strace(syscall, "SIGINT", n, &cmd));
        assert!(String::from_utf8_lossy(&out.stdout).contains("stopped at"));
        let json = metadata(&p.hdr);
        assert_eq!(json["segments"].as_object().unwrap().len(), 4, "{json}");
        run(&mut p.cs(&resume));
        p.verify_decrypted(&format!(
            "{resilience}: sectorcrypt stopped, cryptsetup ran"
        ));
        let p = Plain::detached(true);
        let mut cmd = p.cs(&["reencrypt", "--decrypt", "--force-offline-reencrypt"]);
        cmd.args(["--resilience", resilience, "--hotzone-size", HOTZONE]);
        // cryptsetup writes with write(2): six for the header copies at the start, then
        // one per hotzone without resilience.
        let (syscall, n) = match resilience {
            "none" => ("write", 8),
            _ => ("fdatasync", 2),
        };
        let out = under_strace(syscall, "SIGINT", n, &cmd).output().unwrap();
        assert!(!out.status.success(), "cryptsetup was not stopped");
        assert_eq!(metadata(&p.hdr)["segments"].as_object().unwrap().len(), 4);
        run(&mut p.sc_cmd(&[]));
        p.verify_decrypted(&format!(
            "{resilience}: cryptsetup stopped, sectorcrypt ran"
        ));
    }

    // cryptsetup killed at its data syncs (a hotzone in flight): sectorcrypt repairs and
    // finishes.
    for resilience in ["checksum", "journal"] {
        for n in 1..=3 {
            let what = format!("{resilience}: cryptsetup --decrypt killed at fdatasync {n}");
            let p = Plain::detached(true);
            let mut cmd = p.cs(&["reencrypt", "--decrypt", "--force-offline-reencrypt"]);
            cmd.args(["--resilience", resilience, "--hotzone-size", HOTZONE]);
            let out = under_strace("fdatasync", "SIGKILL", n, &cmd)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{what}: not killed");
            let refused = p.sc_cmd(&[]).output().unwrap();
            assert_eq!(code(&refused), 2, "{what}: {refused:?}");
            ok(p.sc_verb("repair"));
            // A crash in the last hotzone: the repair finished the decryption.
            if metadata(&p.hdr)["config"].get("requirements").is_some() {
                run(&mut p.sc_cmd(&[]));
            }
            p.verify_decrypted(&what);
        }
    }

    // sectorcrypt killed at every sync: recovered by sectorcrypt, and by cryptsetup on a
    // copy.
    let (mut cases, mut last_hotzone) = (0, 0);
    for resilience in ["checksum", "journal"] {
        for n in 1.. {
            let p = Plain::detached(false);
            let cmd = p.sc_cmd(&[
                "--decrypt",
                "--resilience",
                resilience,
                "--hotzone-size",
                HOTZONE,
            ]);
            let out = under_strace("fdatasync", "SIGKILL", n, &cmd)
                .output()
                .unwrap();
            if out.status.success() {
                assert!(n > 6, "{resilience}: only {} syncs", n - 1);
                break;
            }
            let what = format!("{resilience}: --decrypt killed at fdatasync {n}");
            let q = p.copy();
            ok(p.sc_verb("repair"));
            if metadata(&p.hdr)["config"].get("requirements").is_some() {
                run(&mut p.sc_cmd(&[]));
            }
            p.verify_decrypted(&format!("{what}, sectorcrypt recovered"));
            run(&mut q.cs(&["repair"]));
            let json = metadata(&q.hdr);
            let regular = json["segments"]
                .as_object()
                .unwrap()
                .values()
                .filter(|s| s.get("flags").is_none())
                .count();
            if json["config"].get("requirements").is_some() && regular == 1 {
                // cryptsetup 2.6.1's repair of a crash in the last hotzone of a
                // decryption leaves the whole data plaintext with the metadata in place,
                // and its resume of that state decrypts the plaintext again (it does so
                // after its own crashes too): sectorcrypt finishes it instead.
                run(&mut q.sc_cmd(&[]));
                last_hotzone += 1;
            } else if json["config"].get("requirements").is_some() {
                run(&mut q.cs(&resume));
            }
            q.verify_decrypted(&format!("{what}, cryptsetup recovered"));
            cases += 1;
        }
    }
    eprintln!(
        "decrypt: {cases} kills at a sync, each recovered by both tools ({last_hotzone} in \
         the last hotzone, finished by sectorcrypt after cryptsetup's repair)"
    );
}

#[test]
fn decrypt_refusals_leave_everything_as_it_was() {
    require!("cryptsetup");
    let files = |p: &Plain| {
        (
            std::fs::read(&p.img).unwrap(),
            std::fs::read(&p.hdr).unwrap(),
        )
    };
    let unchanged = |p: &Plain, out: Output, want: i32, says: &str, before: &(Vec<u8>, Vec<u8>)| {
        assert_eq!(code(&out), want, "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "wanted {says:?} in: {err}");
        assert!(files(p) == *before, "the image or the header changed");
    };
    // A wrong passphrase, and a new cipher with --decrypt.
    let p = Plain::detached(true);
    let before = files(&p);
    let wrong = key_file(p.dir.path(), "wrong", "wrong horse");
    let mut args = vec!["reencrypt", "--decrypt", s(&p.img), "--header", s(&p.hdr)];
    args.extend_from_slice(&["--key-file", s(&wrong)]);
    args.extend_from_slice(&FAST);
    unchanged(&p, sc(&args, b""), 3, "", &before);
    let out = p
        .sc_cmd(&["--decrypt", "--cipher", "aes-cbc-essiv:sha256"])
        .output()
        .unwrap();
    unchanged(&p, out, 2, "cannot be used", &before);

    // A detached header whose data starts past 0: the plaintext would stay behind it.
    let p = Plain::new();
    std::fs::File::create(&p.hdr)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let mut format = vec!["luksFormat", "--type", "luks2", "--offset", "2048"];
    format.extend_from_slice(&FAST);
    run(&mut p.cs(&format));
    let before = files(&p);
    let out = p.sc_cmd(&["--decrypt"]).output().unwrap();
    unchanged(&p, out, 2, "offset 0", &before);

    // A header inside the image (the data would have to move over it): refused, and
    // --decrypt without --header is a usage error.
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    let out = c.reencrypt(&["--decrypt"]);
    assert_eq!(code(&out), 2, "{out:?}");
    let img_as_header = ["reencrypt", "--decrypt", s(&c.img), "--header", s(&c.img)];
    let mut args = img_as_header.to_vec();
    args.extend_from_slice(&["--key-file", s(&c.key)]);
    let out = sc(&args, b"");
    refused(&out, "detached header");
    assert!(std::fs::read(&c.img).unwrap() == before);

    // --decrypt on a re-key in progress.
    let c = Case::new(false, &[]);
    ok(c.reencrypt(&["--init-only"]));
    let before = std::fs::read(&c.img).unwrap();
    let mut args = img_as_header.to_vec();
    args[2] = s(&c.img);
    args[4] = s(&c.img);
    args.extend_from_slice(&["--key-file", s(&c.key)]);
    let out = sc(&args, b"");
    refused(&out, "not a decryption");
    assert!(std::fs::read(&c.img).unwrap() == before);
}

/// `out` is a refusal (exit 2) whose message says `says`.
fn refused(out: &Output, says: &str) {
    assert_eq!(code(out), 2, "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(says),
        "wanted {says:?}: {out:?}"
    );
}

/// A child process killed when the test ends without having waited for it.
struct Reaped(Option<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn serve_reencrypt_reports_its_progress_in_the_metrics_and_finishes() {
    require!("cryptsetup", "curl", "promtool", "nbdcopy");
    let c = Case::new(false, &[]);
    let before = c.volume_key();
    let sock = c.dir.path().join("nbd.sock");
    let msock = c.dir.path().join("metrics.sock");
    let mut server = Reaped(Some(
        Command::new(bin())
            .args([
                "serve",
                s(&c.img),
                "--key-file",
                s(&c.key),
                "--socket",
                s(&sock),
            ])
            .args([
                "--reencrypt",
                "--hotzone-size",
                "1M",
                "--metrics",
                s(&msock),
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let scrape = || {
        Command::new("curl")
            .args([
                "-sS",
                "--fail",
                "--max-time",
                "10",
                "--unix-socket",
                s(&msock),
            ])
            .arg("http://localhost/metrics")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8(o.stdout).unwrap())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    let text = loop {
        assert!(std::time::Instant::now() < deadline, "no end: {seen:?}");
        if let Some(t) = scrape() {
            if t.contains("sectorcrypt_reencrypted_bytes") {
                let done = metric(&t, "sectorcrypt_reencrypted_bytes{export=\"\"}");
                let size = metric(&t, "sectorcrypt_reencryption_size_bytes{export=\"\"}");
                assert_eq!(size, DATA as f64);
                assert!(done <= size);
                seen.push(done);
                if done == size {
                    break t;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    sectorcrypt_testkit::promtool_check(&text).unwrap();
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress went back: {seen:?}"
    );
    // The clients read the volume as it was throughout; at the end it is all new.
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let read = run(Command::new("nbdcopy").args([&uri, "-"])).stdout;
    assert!(read == c.plain, "the served data changed");
    let server = server.0.take().unwrap();
    let _ = Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status();
    let out = server.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("re-encrypted while served"), "{err}");
    c.verify("serve --reencrypt");
    assert_ne!(c.volume_key(), before);
}

/// `serve --reencrypt --resilience none` is refused before anything is served or written:
/// without resilience data the progress would be recorded only at the end, and a crash of
/// the server would lose every hotzone done.
#[test]
fn serve_reencrypt_refuses_no_resilience() {
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    let sock = c.dir.path().join("nbd.sock");
    let out = sc(
        &[
            "serve",
            s(&c.img),
            "--key-file",
            s(&c.key),
            "--socket",
            s(&sock),
            "--reencrypt",
            "--resilience",
            "none",
        ],
        b"",
    );
    assert_eq!(code(&out), 2, "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without resilience data"),
        "{out:?}"
    );
    assert!(
        std::fs::read(&c.img).unwrap() == before,
        "the image changed"
    );
}

/// Plain data to encrypt in place moving it (`--encrypt --reduce-device-size`): an image
/// of [`SHIFTED`] bytes whose first [`DATA`] hold the plaintext (the file system shrunk
/// by [`REDUCE`]); the header takes [`REDUCE`]/2 bytes and the data moves that far on.
struct Shifted {
    dir: tempfile::TempDir,
    img: PathBuf,
    key: PathBuf,
    /// The image as it was: the plaintext, then the free end.
    before: Vec<u8>,
}

const REDUCE: &str = "8M";
const SHIFT: usize = 4 << 20;
const SHIFTED: usize = DATA + 2 * SHIFT;

impl Shifted {
    fn new() -> Shifted {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("plain.img");
        let before = pattern(SHIFTED, 0x5f1);
        std::fs::write(&img, &before).unwrap();
        Shifted {
            key: key_file(dir.path(), "pass", "correct horse"),
            img,
            before,
            dir,
        }
    }

    fn plain(&self) -> &[u8] {
        &self.before[..DATA]
    }

    fn sc_cmd(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(["reencrypt", s(&self.img), "--key-file", s(&self.key)])
            .args(FAST)
            .args(extra);
        cmd
    }

    fn init_args() -> Vec<&'static str> {
        vec!["--encrypt", "--reduce-device-size", REDUCE]
    }

    fn cs(&self, args: &[&str]) -> Command {
        let mut c = cryptsetup(&self.key);
        c.args(args).arg(&self.img);
        c
    }

    /// cryptsetup's `reencrypt --encrypt --reduce-device-size` (its temporary header
    /// goes to the working directory: the test's folder).
    fn cs_init(&self, extra: &[&str]) -> Command {
        let mut args = vec!["reencrypt", "--encrypt", "--type", "luks2"];
        args.extend_from_slice(&["--reduce-device-size", REDUCE]);
        args.extend_from_slice(&FAST);
        args.extend_from_slice(extra);
        let mut c = self.cs(&args);
        c.current_dir(self.dir.path());
        c
    }

    fn cs_resume(&self) -> Command {
        self.cs(&["reencrypt", "--resume-only", "--force-offline-reencrypt"])
    }

    fn copy(&self) -> Shifted {
        let q = Shifted::new();
        std::fs::copy(&self.img, &q.img).unwrap();
        Shifted {
            before: self.before.clone(),
            ..q
        }
    }

    fn requirements_left(&self) -> bool {
        metadata(&self.img)["config"].get("requirements").is_some()
    }

    /// The image is a LUKS2 volume with its header in the first [`SHIFT`] bytes, one
    /// segment at [`SHIFT`], no re-encryption left; its first [`DATA`] bytes are the
    /// plaintext through sectorcrypt and through dm-crypt's formula with cryptsetup's
    /// volume key; the copy of the data's start at the end was wiped.
    fn verify(&self, what: &str) {
        let json = metadata(&self.img);
        assert!(
            json["config"].get("requirements").is_none(),
            "{what}: {}",
            json["config"]
        );
        let seg = &json["segments"]["0"];
        assert_eq!(json["segments"].as_object().unwrap().len(), 1, "{what}");
        assert_eq!(seg["offset"], SHIFT.to_string(), "{what}");
        assert_eq!(seg["size"], "dynamic", "{what}");
        let read = ok_bytes(sc(&["read", s(&self.img), "--key-file", s(&self.key)], b""));
        assert_eq!(read.len(), SHIFTED - SHIFT, "{what}");
        assert!(
            read[..DATA] == *self.plain(),
            "{what}: sectorcrypt reads other data"
        );
        let stored = std::fs::read(&self.img).unwrap();
        assert!(
            stored[SHIFTED - SHIFT..] != self.before[..SHIFT],
            "{what}: the copy of the data's start is still at the image's end"
        );
        let vk = self.dir.path().join("vk");
        let _ = std::fs::remove_file(&vk);
        run(&mut self.cs(&["luksDump", "--dump-volume-key", "--volume-key-file", s(&vk)]));
        let got = dm_crypt(
            seg["encryption"].as_str().unwrap(),
            &std::fs::read(&vk).unwrap(),
            512,
            1,
            0,
            &stored[SHIFT..SHIFT + DATA],
            Mode::Decrypt,
        );
        assert!(
            got == self.plain(),
            "{what}: dm-crypt's formula reads other data"
        );
    }
}

/// The parts of a data-shift encryption's metadata that are not random (salts, digests,
/// UUID, keyslot material), to compare the two tools' inits.
fn shift_metadata(json: &Value) -> Value {
    let mut reenc = json["keyslots"]["1"].clone();
    reenc.as_object_mut().unwrap().remove("priority");
    let lists: Vec<(Value, Value)> = json["digests"]
        .as_object()
        .unwrap()
        .values()
        .map(|d| (d["keyslots"].clone(), d["segments"].clone()))
        .collect();
    serde_json::json!({
        "segments": json["segments"],
        "reencrypt": reenc,
        "config": json["config"],
        "digests": format!("{lists:?}"),
        "keyslot0": json["keyslots"]["0"]["area"],
    })
}

#[test]
fn encrypt_moving_the_data_both_ways() {
    require!("cryptsetup", "strace");
    // sectorcrypt alone.
    let p = Shifted::new();
    let out = run(&mut p.sc_cmd(&Shifted::init_args()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("encrypted"));
    p.verify("sectorcrypt --encrypt --reduce-device-size");

    // Both tools' inits write the same metadata; each resumes the other's.
    let (mine, theirs) = (Shifted::new(), Shifted::new());
    let mut args = Shifted::init_args();
    args.push("--init-only");
    run(&mut mine.sc_cmd(&args));
    run(&mut theirs.cs_init(&["--init-only"]));
    assert_eq!(
        shift_metadata(&metadata(&mine.img)),
        shift_metadata(&metadata(&theirs.img))
    );
    // The dump shows the plaintext segments as cryptsetup's does: no cipher, no sector.
    let dump = String::from_utf8(ok_bytes(sc(&["dump", s(&mine.img)], b""))).unwrap();
    assert!(dump.contains("backup-moved-segment"), "{dump}");
    assert!(
        !dump.contains("cipher: ?") && !dump.contains("null"),
        "{dump}"
    );
    run(&mut mine.cs_resume());
    mine.verify("sectorcrypt's init, cryptsetup resumed");
    run(&mut theirs.sc_cmd(&[]));
    theirs.verify("cryptsetup's init, sectorcrypt resumed");

    // Stopped cleanly (SIGINT) in a later hotzone, resumed by the other tool.
    let p = Shifted::new();
    let out = under_strace("fdatasync", "SIGINT", 6, &p.sc_cmd(&Shifted::init_args()))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stopped at"),
        "{out:?}"
    );
    run(&mut p.cs_resume());
    p.verify("sectorcrypt stopped by SIGINT, cryptsetup resumed");
    let p = Shifted::new();
    run(&mut p.cs_init(&["--init-only"]));
    let out = under_strace("fdatasync", "SIGINT", 2, &p.cs_resume())
        .output()
        .unwrap();
    assert!(p.requirements_left(), "cryptsetup was not stopped: {out:?}");
    run(&mut p.sc_cmd(&[]));
    p.verify("cryptsetup stopped by SIGINT, sectorcrypt resumed");
}

#[test]
fn encrypt_moving_the_data_killed_anywhere_is_recovered_by_both_tools() {
    require!("cryptsetup", "strace");
    // sectorcrypt killed at every sync of the init and the run: recovered by sectorcrypt,
    // and on a copy by cryptsetup.
    let (mut kills, mut cs_stuck, mut in_copy) = (0, 0, 0);
    for n in 1.. {
        let p = Shifted::new();
        let out = under_strace("fdatasync", "SIGKILL", n, &p.sc_cmd(&Shifted::init_args()))
            .output()
            .unwrap();
        if out.status.success() {
            assert!(n > 12, "only {} syncs", n - 1);
            break;
        }
        let what = format!("sectorcrypt killed at fdatasync {n}");
        let stored = std::fs::read(&p.img).unwrap();
        if stored[..DATA] == *p.plain() {
            // Killed before the header went over the data's start: the image is as it
            // was (its free end may hold a copy of the start).
            continue;
        }
        if Command::new("cryptsetup")
            .args(["isLuks"])
            .arg(&p.img)
            .status()
            .unwrap()
            .code()
            != Some(0)
        {
            // Killed while the keyslots went over the data's start, before a header copy
            // was whole: the start is in its copy at the end alone, the rest in place
            // (what the docs tell to copy back).
            assert!(
                stored[SHIFTED - SHIFT..] == p.before[..SHIFT]
                    && stored[SHIFT..DATA] == p.before[SHIFT..DATA],
                "{what}: neither a header nor the data's start"
            );
            in_copy += 1;
            continue;
        }
        let q = p.copy();
        let repaired = sc(&["repair", s(&p.img), "--key-file", s(&p.key)], b"");
        assert_eq!(code(&repaired), 0, "{what}: {repaired:?}");
        if p.requirements_left() {
            run(&mut p.sc_cmd(&[]));
        }
        p.verify(&format!("{what}, sectorcrypt recovered"));
        run(&mut q.cs(&["repair"]));
        if q.requirements_left() {
            let out = q.cs_resume().output().unwrap();
            if !out.status.success() {
                // cryptsetup 2.6.1 cannot end the state its own last hotzone writes (one
                // crypt segment, the requirement still set: "Failed to set device
                // segments for next reencryption hotzone"); sectorcrypt ends it.
                let json = metadata(&q.img);
                assert_eq!(json["segments"]["0"]["size"], "dynamic", "{what}: {out:?}");
                assert_eq!(json["segments"]["0"]["type"], "crypt", "{what}: {out:?}");
                run(&mut q.sc_cmd(&[]));
                cs_stuck += 1;
            }
        }
        q.verify(&format!("{what}, cryptsetup recovered"));
        kills += 1;
    }
    assert!(kills >= 8, "{kills}");
    // cryptsetup killed at each of its data syncs and header syncs: recovered by
    // sectorcrypt.
    let mut theirs = 0;
    for syscall in ["fdatasync", "fsync"] {
        for n in 1.. {
            let p = Shifted::new();
            run(&mut p.cs_init(&["--init-only"]));
            let out = under_strace(syscall, "SIGKILL", n, &p.cs_resume())
                .output()
                .unwrap();
            if out.status.success() {
                break;
            }
            let what = format!("cryptsetup killed at {syscall} {n}");
            ok(sc(&["repair", s(&p.img), "--key-file", s(&p.key)], b""));
            if p.requirements_left() {
                run(&mut p.sc_cmd(&[]));
            }
            p.verify(&format!("{what}, sectorcrypt recovered"));
            theirs += 1;
        }
    }
    assert!(theirs >= 4, "{theirs}");
    eprintln!(
        "encrypt --reduce-device-size: {kills} kills of sectorcrypt recovered by both tools \
         ({cs_stuck} after its last hotzone ended by sectorcrypt: cryptsetup cannot), \
         {in_copy} with the data's start in its copy alone, {theirs} of cryptsetup \
         recovered by sectorcrypt"
    );
}

#[test]
fn encrypt_moving_the_data_refusals_leave_the_image_as_it_was() {
    let p = Shifted::new();
    let cases: [(&[&str], &str); 6] = [
        (&["--encrypt"], "--header FILE"),
        (
            &["--encrypt", "--reduce-device-size", "3000000"],
            "multiple of 1024",
        ),
        (
            &["--encrypt", "--reduce-device-size", "2G"],
            "at most 1 GiB",
        ),
        (
            &[
                "--encrypt",
                "--reduce-device-size",
                "8M",
                "--resilience",
                "checksum",
            ],
            "datashift",
        ),
        (
            &["--encrypt", "--reduce-device-size", "32M"],
            "must keep at least",
        ),
        (
            &["--encrypt", "--reduce-device-size", "16K"],
            "LUKS2 header",
        ),
    ];
    for (args, says) in cases {
        let out = p.sc_cmd(args).output().unwrap();
        assert_eq!(code(&out), 2, "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}: wanted {says:?}: {out:?}"
        );
        assert!(std::fs::read(&p.img).unwrap() == p.before, "{args:?}");
    }
    // --header and --reduce-device-size together: clap's refusal.
    let hdr = p.dir.path().join("h");
    let out = p
        .sc_cmd(&[
            "--encrypt",
            "--reduce-device-size",
            "8M",
            "--header",
            s(&hdr),
        ])
        .output()
        .unwrap();
    assert_ne!(code(&out), 0, "{out:?}");
    assert!(std::fs::read(&p.img).unwrap() == p.before && !hdr.exists());
    // A volume already there.
    let c = Case::new(false, &[]);
    let before = std::fs::read(&c.img).unwrap();
    let out = c.reencrypt(&Shifted::init_args());
    refused(&out, "already holds");
    assert!(std::fs::read(&c.img).unwrap() == before);
    // A wrong passphrase on the resume writes nothing.
    let p = Shifted::new();
    let mut args = Shifted::init_args();
    args.push("--init-only");
    run(&mut p.sc_cmd(&args));
    let before = std::fs::read(&p.img).unwrap();
    let wrong = key_file(p.dir.path(), "wrong", "not it");
    let out = sc(&["reencrypt", s(&p.img), "--key-file", s(&wrong)], b"");
    assert_eq!(code(&out), 3, "{out:?}");
    assert!(std::fs::read(&p.img).unwrap() == before);
}

#[test]
fn encrypt_moving_the_data_with_hostile_segments_is_refused() {
    require!("cryptsetup");
    // The reencryption digest binds the backups, not the regular segments: each edit
    // below would make sectorcrypt read or write the wrong bytes. Each is refused, and
    // the image stays as it was.
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 4] = [
        ("the rest of the plaintext moved", |j| {
            j["segments"]["1"]["offset"] = "4198400".into()
        }),
        ("the copy of the start made longer", |j| {
            j["segments"]["0"]["size"] = (2 * SHIFT).to_string().into()
        }),
        ("a hotzone that is not the next", |j| {
            j["segments"]["1"]["size"] = "4194304".into();
            j["segments"]["2"] = serde_json::json!({"type": "crypt", "offset": "8388608",
                "size": "4194304", "iv_tweak": "8192", "encryption": "aes-xts-plain64",
                "sector_size": 512, "flags": ["in-reencryption"]});
        }),
        ("progress that did not happen", |j| {
            j["segments"]["1"]["size"] = "4194304".into();
        }),
    ];
    for (what, edit) in edits {
        let p = Shifted::new();
        run(&mut p.cs_init(&["--init-only"]));
        luks2_cases::edit_copies(&p.img, |j| {
            let backups: Vec<(String, Value)> = j["segments"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, v)| v.get("flags").is_some())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            edit(j);
            // The backups keep their ids: only the regular segments changed.
            for (k, v) in backups {
                j["segments"][k] = v;
            }
        });
        let before = std::fs::read(&p.img).unwrap();
        for verb in [&["reencrypt"][..], &["repair"][..]] {
            let mut args = verb.to_vec();
            args.extend_from_slice(&[s(&p.img), "--key-file", s(&p.key)]);
            let out = sc(&args, b"");
            if verb[0] == "repair" && code(&out) == 0 {
                // A clean state: repair checks the digest and has nothing to recover.
                assert!(
                    std::fs::read(&p.img).unwrap() == before,
                    "{what}: repair wrote"
                );
                continue;
            }
            assert_eq!(code(&out), 2, "{what}: {verb:?}: {out:?}");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("segments"),
                "{what}: {out:?}"
            );
            assert!(
                std::fs::read(&p.img).unwrap() == before,
                "{what}: {verb:?} wrote"
            );
        }
    }
}

/// A volume whose header is in the image, to decrypt in place moving the data over the
/// header (`--decrypt --header NEW`), [`DATA`] bytes of data holding a pattern. Made by
/// cryptsetup: 32 KiB of header copies, a 1 MiB keyslots area, the data at
/// [`BACK_SHIFT`] (moved back in six hotzones); by sectorcrypt: its default 16 MiB
/// header (the data moves in one piece).
struct Back {
    dir: tempfile::TempDir,
    img: PathBuf,
    hdr: PathBuf,
    key: PathBuf,
    plain: Vec<u8>,
}

const BACK_SHIFT: usize = 2 << 20;

impl Back {
    fn new(by_cryptsetup: bool) -> Back {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("v.img");
        let key = key_file(dir.path(), "pass", "correct horse");
        if by_cryptsetup {
            std::fs::File::create(&img)
                .unwrap()
                .set_len((BACK_SHIFT + DATA) as u64)
                .unwrap();
            let mut args = vec!["luksFormat", "--type", "luks2", "--luks2-metadata-size"];
            args.extend_from_slice(&["16k", "--luks2-keyslots-size", "1m", "--offset", "4096"]);
            args.extend_from_slice(&FAST);
            run(cryptsetup(&key).args(args).arg(&img));
        } else {
            // sectorcrypt's default header: 16 MiB, more than the data (which then moves
            // over the header in one piece).
            let mut args = vec!["format", s(&img), "--size", "28M", "--key-file", s(&key)];
            args.push("-q");
            args.extend_from_slice(&FAST);
            ok(sc(&args, b""));
        }
        let plain = pattern(DATA, 0xbac);
        write_volume(dir.path(), &img, &key, &plain);
        Back {
            hdr: dir.path().join("new.hdr"),
            dir,
            img,
            key,
            plain,
        }
    }

    fn sc_cmd(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(["reencrypt", s(&self.img), "--header", s(&self.hdr)])
            .args(["--key-file", s(&self.key)])
            .args(FAST)
            .args(extra);
        cmd
    }

    fn cs(&self, args: &[&str]) -> Command {
        let mut c = cryptsetup(&self.key);
        c.args(args).args(["--header", s(&self.hdr)]).arg(&self.img);
        c
    }

    fn cs_init(&self, extra: &[&str]) -> Command {
        let mut args = vec![
            "reencrypt",
            "--decrypt",
            "--force-offline-reencrypt",
            "--init-only",
        ];
        args.extend_from_slice(extra);
        self.cs(&args)
    }

    fn cs_resume(&self) -> Command {
        self.cs(&["reencrypt", "--resume-only", "--force-offline-reencrypt"])
    }

    fn copy(&self) -> Back {
        let dir = tempfile::tempdir().unwrap();
        let (img, hdr) = (dir.path().join("v.img"), dir.path().join("new.hdr"));
        std::fs::copy(&self.img, &img).unwrap();
        if self.hdr.exists() {
            std::fs::copy(&self.hdr, &hdr).unwrap();
        }
        Back {
            key: key_file(dir.path(), "pass", "correct horse"),
            plain: self.plain.clone(),
            dir,
            img,
            hdr,
        }
    }

    fn requirements_left(&self) -> bool {
        metadata(&self.hdr)["config"].get("requirements").is_some()
    }

    /// The image starts with the plaintext, and the header is a finished decryption's (no keyslot, no digest, one
    /// linear segment), as cryptsetup leaves it.
    fn verify(&self, what: &str) {
        let stored = std::fs::read(&self.img).unwrap();
        assert!(
            stored[..DATA] == self.plain[..],
            "{what}: the image does not start with the plaintext"
        );
        let json = metadata(&self.hdr);
        assert!(
            json["config"].get("requirements").is_none(),
            "{what}: {json}"
        );
        assert_eq!(json["keyslots"], serde_json::json!({}), "{what}");
        assert_eq!(json["digests"], serde_json::json!({}), "{what}");
        assert_eq!(
            json["segments"],
            serde_json::json!({"0": {"type": "linear", "offset": "0", "size": "dynamic"}}),
            "{what}"
        );
    }
}

#[test]
fn decrypt_moving_the_data_both_ways() {
    require!("cryptsetup");
    for by_cryptsetup in [false, true] {
        // sectorcrypt alone, with each resilience (a journal holds the moved start only
        // when the data is shorter than the keyslots area: sectorcrypt's volume here).
        let journal: &[&[&str]] = if by_cryptsetup {
            &[&[]]
        } else {
            &[&[], &["--resilience", "journal"]]
        };
        for &resilience in journal {
            let p = Back::new(by_cryptsetup);
            let mut args = vec!["--decrypt"];
            args.extend_from_slice(resilience);
            let out = run(&mut p.sc_cmd(&args));
            assert!(String::from_utf8_lossy(&out.stdout).contains("decrypted"));
            p.verify(&format!("sectorcrypt --decrypt {resilience:?}"));
        }
        // Both inits write the same metadata and data; each tool resumes the other's.
        let (mine, theirs) = (Back::new(by_cryptsetup), Back::new(by_cryptsetup));
        std::fs::copy(&mine.img, &theirs.img).unwrap();
        run(&mut mine.sc_cmd(&["--decrypt", "--init-only"]));
        run(&mut theirs.cs_init(&[]));
        let (a, b) = (metadata(&mine.hdr), metadata(&theirs.hdr));
        assert_eq!(a["segments"], b["segments"]);
        assert_eq!(a["keyslots"]["1"], b["keyslots"]["1"]);
        assert_eq!(a["config"], b["config"]);
        assert!(std::fs::read(&mine.img).unwrap() == std::fs::read(&theirs.img).unwrap());
        run(&mut mine.cs_resume());
        mine.verify("sectorcrypt's init, cryptsetup resumed");
        run(&mut theirs.sc_cmd(&[]));
        theirs.verify("cryptsetup's init, sectorcrypt resumed");
    }
    // Refusals that change nothing: a header file that exists, a wrong passphrase, no
    // resilience for the moved start, a moved start larger than the data offset.
    let p = Back::new(false);
    let before = std::fs::read(&p.img).unwrap();
    std::fs::write(&p.hdr, b"x").unwrap();
    let out = p.sc_cmd(&["--decrypt"]).output().unwrap();
    assert_ne!(code(&out), 0, "{out:?}");
    std::fs::remove_file(&p.hdr).unwrap();
    let wrong = key_file(p.dir.path(), "wrong", "not it");
    let mut args = vec!["reencrypt", "--decrypt", s(&p.img), "--header", s(&p.hdr)];
    args.extend_from_slice(&["--key-file", s(&wrong)]);
    let out = sc(&args, b"");
    assert_eq!(code(&out), 3, "{out:?}");
    let small = Back::new(true);
    let before_small = std::fs::read(&small.img).unwrap();
    let out = small
        .sc_cmd(&["--decrypt", "--resilience", "journal"])
        .output()
        .unwrap();
    refused(&out, "use checksum");
    assert!(!small.hdr.exists() && std::fs::read(&small.img).unwrap() == before_small);
    for (args, says) in [
        (&["--decrypt", "--resilience", "none"][..], "not none"),
        (
            &["--decrypt", "--hotzone-size", "4M"][..],
            "give no --hotzone-size",
        ),
    ] {
        let out = p.sc_cmd(args).output().unwrap();
        refused(&out, says);
    }
    assert!(!p.hdr.exists());
    assert!(std::fs::read(&p.img).unwrap() == before);
}

#[test]
fn decrypt_moving_the_data_killed_anywhere_is_recovered_by_both_tools() {
    require!("cryptsetup", "strace");
    let mut kills = 0;
    for resilience in ["checksum", "journal"] {
        for n in 1..200 {
            assert!(
                n < 199,
                "{resilience}: sectorcrypt never finished under strace"
            );
            // The journal only where it holds the moved start (see above).
            let p = Back::new(resilience == "checksum");
            let cmd = p.sc_cmd(&["--decrypt", "--resilience", resilience]);
            let out = under_strace("fdatasync", "SIGKILL", n, &cmd)
                .output()
                .unwrap();
            if out.status.success() {
                assert!(n > 6, "only {} syncs", n - 1);
                break;
            }
            let what = format!("{resilience}: sectorcrypt killed at fdatasync {n}");
            let finished = p.hdr.exists() && metadata(&p.hdr)["segments"]["0"]["type"] == "linear";
            if finished && !p.requirements_left() {
                // Killed after the end's header write (before the tail's wipe).
                p.verify(&what);
                continue;
            }
            if !p.hdr.exists() || !p.requirements_left() {
                // Before the new header was written: the volume is whole under the header
                // file (or the image's own, untouched).
                let header = if p.hdr.exists() { &p.hdr } else { &p.img };
                let mut args = vec!["read", s(&p.img), "--key-file", s(&p.key)];
                args.extend_from_slice(&["--header", s(header)]);
                let read = sc(&args, b"");
                assert_eq!(code(&read), 0, "{what}: {read:?}");
                assert!(read.stdout[..DATA] == p.plain[..], "{what}");
                continue;
            }
            let q = p.copy();
            let mut repair = vec!["repair", s(&p.img), "--header", s(&p.hdr)];
            repair.extend_from_slice(&["--key-file", s(&p.key)]);
            let out = sc(&repair, b"");
            assert_eq!(code(&out), 0, "{what}: {out:?}");
            if p.requirements_left() {
                run(&mut p.sc_cmd(&[]));
            }
            p.verify(&format!("{what}, sectorcrypt recovered"));
            let out = q.cs(&["repair"]).output().unwrap();
            assert!(out.status.success(), "{what}: cryptsetup repair: {out:?}");
            if q.requirements_left() {
                let out = q.cs_resume().output().unwrap();
                assert!(out.status.success(), "{what}: cryptsetup resume: {out:?}");
            }
            q.verify(&format!("{what}, cryptsetup recovered"));
            kills += 1;
        }
    }
    // cryptsetup killed at each of its syncs: recovered by sectorcrypt.
    let (mut theirs, mut wiped) = (0, 0);
    for syscall in ["fdatasync", "fsync"] {
        for n in 1..200 {
            assert!(n < 199, "cryptsetup never finished under strace");
            let p = Back::new(true);
            run(&mut p.cs_init(&[]));
            let out = under_strace(syscall, "SIGKILL", n, &p.cs_resume())
                .output()
                .unwrap();
            if out.status.success() {
                break;
            }
            let what = format!("cryptsetup killed at {syscall} {n}");
            let mut repair = vec!["repair", s(&p.img), "--header", s(&p.hdr)];
            repair.extend_from_slice(&["--key-file", s(&p.key)]);
            let out = sc(&repair, b"");
            let json = metadata(&p.hdr);
            if code(&out) == 3 && json["segments"]["0"]["type"] == "linear" {
                // cryptsetup's end wipes the old keyslots' areas before the header write
                // that drops them: all the data is plaintext, and no passphrase opens the
                // keyslots it still lists. Neither tool ends that header (sectorcrypt does
                // not drop keyslots a passphrase fails to open); the image is whole.
                let stored = std::fs::read(&p.img).unwrap();
                assert!(
                    stored[..DATA] == p.plain[..],
                    "{what}: the image is not plaintext"
                );
                wiped += 1;
                continue;
            }
            assert_eq!(code(&out), 0, "{what}: {out:?}");
            if p.requirements_left() {
                run(&mut p.sc_cmd(&[]));
            }
            p.verify(&format!("{what}, sectorcrypt recovered"));
            theirs += 1;
        }
    }
    assert!(kills >= 20 && theirs >= 10, "{kills} {theirs}");
    eprintln!(
        "decrypt moving the data: {kills} kills of sectorcrypt recovered by both tools, \
         {theirs} of cryptsetup recovered by sectorcrypt, {wiped} in cryptsetup's end after \
         its keyslot wipe (plaintext whole, the header left as it is)"
    );
}

/// A server of `p` (`serve IMG --header HDR --reencrypt`) with 256 KiB hotzones, its
/// standard error collected as it comes, and its NBD URI once the socket is there.
struct Served {
    server: Reaped,
    err: std::sync::Arc<std::sync::Mutex<String>>,
    uri: String,
}

impl Served {
    fn start(p: &Plain) -> Served {
        use std::io::Read as _;
        let sock = p.dir.path().join("nbd.sock");
        let _ = std::fs::remove_file(&sock);
        let mut child = Command::new(bin())
            .args(["serve", s(&p.img), "--header", s(&p.hdr)])
            .args(["--key-file", s(&p.key), "--socket", s(&sock)])
            .args(["--reencrypt", "--hotzone-size", "256K"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = err.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let served = Served {
            server: Reaped(Some(child)),
            err,
            uri: format!("nbd+unix:///?socket={}", sock.display()),
        };
        served.wait_for("socket", |_| sock.exists());
        served
    }

    /// Waits (at most 60 s) until `done(stderr so far)`.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done(&self.err.lock().unwrap()) {
            assert!(
                std::time::Instant::now() < deadline,
                "no {what}: {}",
                self.err.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn finished(&self) -> bool {
        self.err.lock().unwrap().contains("while served")
    }

    /// Writes `data` over the whole volume through NBD (nbdcopy; every write answered).
    fn write(&self, dir: &Path, data: &[u8]) {
        let file = dir.join("next");
        std::fs::write(&file, data).unwrap();
        run(Command::new("nbdcopy").args([s(&file), &self.uri]));
    }

    fn read(&self) -> Vec<u8> {
        run(Command::new("nbdcopy").args([&self.uri, "-"])).stdout
    }

    /// Sends `signal` (`INT`, `KILL`) to the server and waits for it to exit.
    fn stop(mut self, signal: &str) {
        let mut child = self.server.0.take().unwrap();
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status();
        child.wait().unwrap();
    }
}

/// Encryption and decryption in place with a detached header while the volume is served
/// (`reencrypt --init-only`, then `serve --reencrypt` runs it): a client rewrites the
/// whole volume again and again during the run and always reads what it wrote last;
/// at the end the data is what it wrote, by cryptsetup's key (encryption) or as plain
/// bytes (decryption). Then the server is killed in the middle of an encryption (SIGKILL)
/// after a client's write: cryptsetup recovers and ends it on a copy, sectorcrypt on the
/// image, and both hold that write.
#[test]
fn serve_encrypts_and_decrypts_in_place_while_a_client_writes() {
    require!("cryptsetup", "nbdcopy");
    for decrypt in [false, true] {
        let what = if decrypt { "decryption" } else { "encryption" };
        let mut p = if decrypt {
            Plain::detached(false)
        } else {
            Plain::new()
        };
        let mode = if decrypt { "--decrypt" } else { "--encrypt" };
        run(&mut p.sc_cmd(&[mode, "--init-only"]));
        let served = Served::start(&p);
        let mut writes = 0u64;
        while !served.finished() {
            assert!(
                writes < 2000,
                "{what}: no end: {}",
                served.err.lock().unwrap()
            );
            let next = pattern(DATA, 0x0e1 + writes);
            served.write(p.dir.path(), &next);
            assert!(
                served.read() == next,
                "{what}: write {writes} read back other data"
            );
            p.plain = next;
            writes += 1;
        }
        assert!(
            writes >= 2,
            "{what}: the run ended before the client's second write"
        );
        served.stop("INT");
        if decrypt {
            p.verify_decrypted("decryption while served");
        } else {
            p.verify("encryption while served");
        }
        eprintln!("{what} while served: {writes} whole-volume writes during the run");
    }

    // Killed in the middle of an encryption, after a client's write.
    let mut p = Plain::new();
    run(&mut p.sc_cmd(&["--encrypt", "--init-only"]));
    let served = Served::start(&p);
    served.wait_for("progress", |e| e.contains("re-encryption at 20%"));
    let last = pattern(DATA, 0x7e57);
    served.write(p.dir.path(), &last);
    assert!(!served.finished(), "the run ended before the kill");
    served.stop("KILL");
    p.plain = last;
    let mut q = p.copy();
    q.plain = p.plain.clone();
    run(&mut q.cs(&["repair"]));
    if metadata(&q.hdr)["config"].get("requirements").is_some() {
        run(&mut q.cs(&["reencrypt", "--resume-only", "--force-offline-reencrypt"]));
    }
    q.verify("encryption served and killed, cryptsetup recovered");
    // Killed between hotzones or inside one: `repair` recovers the latter (and leaves the
    // former as it is), then the run ends it.
    ok(p.sc_verb("repair"));
    run(&mut p.sc_cmd(&[]));
    p.verify("encryption served and killed, sectorcrypt recovered");
}
