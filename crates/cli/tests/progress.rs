//! `--progress`: what a person sees on a terminal, what a script reads, and silence
//! elsewhere. The terminal is a real pseudo-terminal: each command runs under util-linux's
//! `script`, and its output is replayed on a small screen model (carriage returns, line
//! clears, cursor moves) to get the frames drawn and the screen left at the end. The work
//! is slowed by independent means so that frames are drawn mid-way: a slow reader of
//! `read`'s output, nbdkit's `rate` filter under `write`, a KDF calibrated to a target
//! time. With `--progress=json` every line must parse, its byte counts never go back, and
//! the last line of each piece of work says it finished with the real size; with standard
//! error not a terminal, the output is byte for byte what it was before progress existed.

mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::nbdkit::Nbdkit;
use sectorcrypt_testkit::{pattern, require, run};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{ok, ok_bytes, s, sc};
use volumes::{key_file, FAST};

/// What a terminal shows: the frames drawn (each state of the line a carriage return or
/// a line clear ended) and the screen at the end.
struct Screen {
    frames: Vec<String>,
    lines: Vec<String>,
}

impl Screen {
    /// Replays `raw` (a terminal's byte stream) on a screen of lines.
    fn replay(raw: &[u8]) -> Screen {
        let text = String::from_utf8_lossy(raw);
        let mut lines = vec![String::new()];
        let mut row = 0;
        let mut col = 0;
        let mut frames = Vec::new();
        let mut chars = text.chars().peekable();
        let frame = |lines: &Vec<String>, row: usize, frames: &mut Vec<String>| {
            let l = lines[row].trim_end().to_string();
            if !l.is_empty() && frames.last() != Some(&l) {
                frames.push(l);
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '\r' => {
                    frame(&lines, row, &mut frames);
                    col = 0;
                }
                '\n' => {
                    frame(&lines, row, &mut frames);
                    row += 1;
                    col = 0;
                    if row == lines.len() {
                        lines.push(String::new());
                    }
                }
                '\x1b' => {
                    // CSI: ESC [ parameters final-byte.
                    if chars.next_if_eq(&'[').is_none() {
                        continue;
                    }
                    let mut param = String::new();
                    let mut fin = ' ';
                    for p in chars.by_ref() {
                        if p.is_ascii_alphabetic() || p == '~' {
                            fin = p;
                            break;
                        }
                        param.push(p);
                    }
                    let n: usize = param.parse().unwrap_or(1);
                    match fin {
                        'K' => {
                            frame(&lines, row, &mut frames);
                            if param == "2" {
                                lines[row].clear();
                            } else {
                                lines[row] = lines[row].chars().take(col).collect();
                            }
                        }
                        'A' => row = row.saturating_sub(n),
                        'G' => col = n.saturating_sub(1),
                        _ => {}
                    }
                }
                c => {
                    let mut l: Vec<char> = lines[row].chars().collect();
                    while l.len() < col {
                        l.push(' ');
                    }
                    if col < l.len() {
                        l[col] = c;
                    } else {
                        l.push(c);
                    }
                    lines[row] = l.into_iter().collect();
                    col += 1;
                }
            }
        }
        frame(&lines, row, &mut frames);
        let lines = lines
            .into_iter()
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        Screen { frames, lines }
    }

    /// The frames that begin with `op`.
    fn of(&self, op: &str) -> Vec<&str> {
        let head = format!("{op} ");
        self.frames
            .iter()
            .filter(|f| f.starts_with(&head))
            .map(String::as_str)
            .collect()
    }
}

/// Runs the shell command `cmd` on a pseudo-terminal (util-linux `script`); panics unless
/// it succeeds. What the terminal received, replayed.
fn on_terminal(cmd: &str) -> Screen {
    let out = run(Command::new("script")
        .args(["-qfec", cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("SECTORCRYPT_BACKEND")
        .stdin(std::process::Stdio::null()));
    Screen::replay(&out.stdout)
}

/// `'PATH'` for a shell command line.
fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// A LUKS1 volume `dir/name` (LUKS1: a 2 MiB header, fast to reach over a slow link) with
/// `data_mib` MiB of data, opened by the key file `dir/k`.
fn luks1(dir: &Path, name: &str, data_mib: u64) -> std::path::PathBuf {
    let img = dir.join(name);
    let key = key_file(dir, "k", "progress");
    let size = format!("{}M", data_mib + 2);
    let mut a = vec!["format", s(&img), "--size", &size, "--type", "luks1"];
    a.extend(["--key-file", s(&key), "--batch"]);
    a.extend(FAST);
    ok(sc(&a, b""));
    img
}

/// Whether frame `f` shows a byte count of a total, a rate and a time left.
fn shows_bytes_rate_and_time_left(f: &str, total: &str) -> bool {
    f.contains(&format!(" / {total}")) && f.contains("B/s") && f.ends_with("s left")
}

#[test]
fn reading_on_a_terminal_shows_bytes_rate_time_left_and_the_end() {
    require!("script", "python3");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = luks1(d, "v.img", 24);
    let data = pattern(24 << 20, 17);
    volumes::write_volume(d, &img, &d.join("k"), &data);
    // The plaintext goes to a reader that takes 1 MiB every 40 ms: about a second.
    let out = d.join("out");
    let slow = format!(
        "python3 -c 'import sys, time\nb = sys.stdin.buffer\nwith open(sys.argv[1], \"wb\") as o:\n    \
         while True:\n        x = b.read(1 << 20)\n        if not x: break\n        \
         o.write(x); time.sleep(0.04)' {}",
        q(&out)
    );
    let cmd = format!(
        "{} read {} --key-file {} | {slow}",
        support::bin(),
        q(&img),
        q(&d.join("k"))
    );
    let screen = on_terminal(&cmd);
    assert_eq!(std::fs::read(&out).unwrap(), data, "the plaintext");
    let frames = screen.of("read");
    let midway: Vec<_> = frames
        .iter()
        .filter(|f| shows_bytes_rate_and_time_left(f, "24.00 MiB") && !f.contains("24.00 MiB /"))
        .collect();
    assert!(!midway.is_empty(), "no frame mid-way: {frames:#?}");
    assert!(midway[0].starts_with("read ["), "{}", midway[0]);
    let last = screen.lines.last().expect("a screen");
    assert!(
        last.starts_with("read [========================] 24.00 MiB / 24.00 MiB ")
            && last.contains("MiB/s")
            && last.contains("done in"),
        "the screen at the end: {:#?}",
        screen.lines
    );
}

#[test]
fn writing_on_a_terminal_shows_bytes_rate_time_left_and_the_end() {
    require!("script", "nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = luks1(d, "v.img", 24);
    let data = pattern(24 << 20, 5);
    std::fs::write(d.join("in"), &data).unwrap();
    // The image is reached at 12 MB/s (the rate filter counts bits) after a burst of half
    // a second's worth: about 1.5 seconds.
    let file = format!("file={}", img.display());
    let kit = Nbdkit::unix(
        &d.join("nbd.sock"),
        &["--filter=rate", "file", &file, "rate=96M", "burstiness=0.5"],
    );
    let cmd = format!(
        "{} write '{}' --key-file {} --input {}",
        support::bin(),
        kit.uri(),
        q(&d.join("k")),
        q(&d.join("in"))
    );
    let screen = on_terminal(&cmd);
    let frames = screen.of("write");
    assert!(
        frames
            .iter()
            .any(|f| shows_bytes_rate_and_time_left(f, "24.00 MiB") && !f.contains("24.00 MiB /")),
        "no frame mid-way: {frames:#?}"
    );
    let n = screen.lines.len();
    assert!(n >= 2, "{:#?}", screen.lines);
    assert!(
        screen.lines[n - 2].starts_with("write [========================] 24.00 MiB / 24.00 MiB ")
            && screen.lines[n - 2].contains("done in"),
        "the screen at the end: {:#?}",
        screen.lines
    );
    assert!(
        screen.lines[n - 1].starts_with(&format!("{} bytes written to", 24 << 20)),
        "{:#?}",
        screen.lines
    );
    drop(kit);
    let back = ok_bytes(sc(
        &[
            "read",
            s(&img),
            "--key-file",
            s(&d.join("k")),
            "--length",
            "25165824",
        ],
        b"",
    ));
    assert!(back == data, "the plaintext written");
}

#[test]
fn key_derivation_on_a_terminal_says_what_it_does_and_the_time_left() {
    require!("script");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = d.join("v.img");
    let key = key_file(d, "k", "progress");
    // Argon2id calibrated to 700 ms, then the keyslot derived (the calibration's target).
    let cmd = format!(
        "{} format {} --size 20M --key-file {} --batch --pbkdf argon2id --pbkdf-memory 16384 \
         --pbkdf-parallel 1 --iter-time 700",
        support::bin(),
        q(&img),
        q(&key)
    );
    let screen = on_terminal(&cmd);
    let calibrate = screen.of("calibrate");
    assert!(
        calibrate
            .iter()
            .any(|f| f.contains("calibrating argon2id to 700 ms a derivation: ")),
        "{:#?}",
        screen.frames
    );
    let derive = screen.of("derive");
    assert!(
        derive
            .iter()
            .any(|f| f.contains("deriving the key (argon2id time ")
                && f.contains(" memory 16384 KiB parallel 1): ")
                && f.contains("s left")),
        "no time left shown while deriving: {:#?}",
        screen.frames
    );
    // Once over, the steps leave the screen to the command's own output.
    assert!(
        screen
            .lines
            .iter()
            .all(|l| !l.starts_with("calibrate") && !l.starts_with("derive")),
        "{:#?}",
        screen.lines
    );
    assert!(
        screen.lines[0].contains("LUKS2 volume"),
        "{:#?}",
        screen.lines
    );
}

#[test]
fn progress_none_on_a_terminal_shows_nothing_more() {
    require!("script");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = luks1(d, "v.img", 4);
    std::fs::write(d.join("in"), pattern(4 << 20, 1)).unwrap();
    let cmd = format!(
        "{} write {} --key-file {} --input {} --progress=none",
        support::bin(),
        q(&img),
        q(&d.join("k")),
        q(&d.join("in"))
    );
    let screen = on_terminal(&cmd);
    assert_eq!(
        screen.lines,
        [format!("{} bytes written to {}", 4 << 20, img.display())]
    );
    assert_eq!(screen.frames, screen.lines);
}

/// Runs `sectorcrypt ARGS` with pipes (standard error no terminal); its stdout and stderr.
fn piped(args: &[&str], stdin: &[u8]) -> (Vec<u8>, String) {
    let o = sc(args, stdin);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (o.stdout, String::from_utf8(o.stderr).unwrap())
}

#[test]
fn without_a_terminal_the_output_is_what_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = d.join("v.img");
    let key = key_file(d, "k", "progress");
    let k = s(&key);
    // A calibrated KDF (no forced cost), so that calibration and derivation run.
    let (out, err) = piped(
        &[
            "format",
            s(&img),
            "--size",
            "24M",
            "--key-file",
            k,
            "--pbkdf",
            "pbkdf2",
            "--iter-time",
            "50",
        ],
        b"",
    );
    assert!(String::from_utf8(out).unwrap().contains("LUKS2 volume"));
    assert_eq!(err, "");
    let data = pattern(8 << 20, 3);
    std::fs::write(d.join("in"), &data).unwrap();
    let (_, err) = piped(
        &["write", s(&img), "--key-file", k, "-i", s(&d.join("in"))],
        b"",
    );
    assert_eq!(
        err,
        format!("{} bytes written to {}\n", 8 << 20, img.display())
    );
    let (out, err) = piped(
        &["read", s(&img), "--key-file", k, "--length", "8388608"],
        b"",
    );
    assert!(out == data && err.is_empty(), "{err}");
    let (_, err) = piped(
        &[
            "add-key",
            s(&img),
            "--key-file",
            k,
            "--pbkdf",
            "pbkdf2",
            "--iter-time",
            "50",
            "-",
        ],
        b"other",
    );
    assert_eq!(err, "");
    let (_, err) = piped(&["erase", s(&img), "--batch"], b"");
    assert_eq!(err, "");
    let (_, err) = authenticated_geli(&d.join("a.eli"), k, &[]);
    assert_eq!(err, "");
}

/// `format` of a new authenticated GELI provider `eli` of 8 MiB (every sector sealed) with
/// the passphrase in `key` and `extra` flags, piped: its stdout and stderr.
fn authenticated_geli(eli: &Path, key: &str, extra: &[&str]) -> (Vec<u8>, String) {
    let mut a = vec!["format", s(eli), "--size", "8M", "--type", "geli"];
    a.extend(["--integrity", "hmac-sha256", "--key-file", key]);
    a.extend(["--pbkdf-force-iterations", "1000"]);
    a.extend(extra);
    piped(&a, b"")
}

/// Every line of `stderr` parsed, and each piece of work's lines checked: `done` never
/// goes back, the time left is never negative, only the last line says finished. The
/// pieces of work in order, each as its lines.
fn progress_lines(stderr: &str) -> Vec<Vec<Value>> {
    let mut works: Vec<Vec<Value>> = Vec::new();
    for line in stderr.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let open = works
            .last()
            .is_some_and(|w| w.last().unwrap()["finished"] == false && w[0]["op"] == v["op"]);
        match works.last_mut() {
            Some(w) if open => {
                let before = w.last().unwrap();
                assert!(
                    v["done"].as_u64() >= before["done"].as_u64(),
                    "{before} then {v}"
                );
                assert!(v["elapsed_secs"].as_f64() >= before["elapsed_secs"].as_f64());
                w.push(v);
            }
            _ => works.push(vec![v]),
        }
    }
    for w in &works {
        for v in w {
            assert!(
                v["eta_secs"].is_null() || v["eta_secs"].as_f64().unwrap() >= 0.0,
                "{v}"
            );
        }
    }
    works
}

/// The one piece of work `op` among `works`, which must have finished with `done` equal
/// to `total` (when known): its last line.
fn finished<'a>(works: &'a [Vec<Value>], op: &str) -> &'a Value {
    let of: Vec<_> = works.iter().filter(|w| w[0]["op"] == op).collect();
    assert_eq!(of.len(), 1, "{op}: {works:#?}");
    let last = of[0].last().unwrap();
    assert_eq!(last["finished"], true, "{op}: {last}");
    assert_eq!(last["eta_secs"], 0.0, "{op}: {last}");
    if !last["total"].is_null() {
        assert_eq!(last["done"], last["total"], "{op}: {last}");
    }
    last
}

#[test]
fn json_lines_parse_never_go_back_and_end_finished_at_the_real_size() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = d.join("v.img");
    let key = key_file(d, "k", "progress");
    let k = s(&key);
    let json = ["--progress", "json"];
    let mut a = vec!["format", s(&img), "--size", "28M", "--key-file", k];
    a.extend(["--pbkdf", "pbkdf2", "--iter-time", "1200"]);
    a.extend(json);
    let (_, err) = piped(&a, b"");
    let works = progress_lines(&err);
    // The volume key digest's calibration, the keyslot's, then its derivation.
    let ops: Vec<_> = works.iter().map(|w| w[0]["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["calibrate", "calibrate", "derive"], "{err}");
    let derive = &works[2];
    assert!(derive[0]["kdf"]
        .as_str()
        .unwrap()
        .starts_with("pbkdf2-sha256 "));
    // Its expected time is the calibration's target, and lines come once a second.
    assert!(
        (derive[0]["eta_secs"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "{}",
        derive[0]
    );
    let took = derive.last().unwrap()["elapsed_secs"].as_f64().unwrap();
    assert!(derive.len() as f64 >= took.floor() + 1.0, "{derive:#?}");
    finished(&works, "derive");

    // add-key: the old keyslot opened (its time not known here), the new one calibrated
    // and sealed (its time known: the target).
    let new = key_file(d, "k2", "progress");
    let mut a = vec!["add-key", s(&img), s(&new), "--key-file", k];
    a.extend(["--pbkdf", "pbkdf2", "--iter-time", "300"]);
    a.extend(json);
    let (_, err) = piped(&a, b"");
    let works = progress_lines(&err);
    let ops: Vec<_> = works.iter().map(|w| w[0]["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["derive", "calibrate", "derive"], "{err}");
    assert!(works[0][0]["eta_secs"].is_null(), "{err}");
    assert!(
        (works[2][0]["eta_secs"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{err}"
    );
    assert!(
        works.iter().all(|w| w.last().unwrap()["finished"] == true),
        "{err}"
    );

    let data = pattern(12 << 20, 9);
    std::fs::write(d.join("in"), &data).unwrap();
    let (_, err) = piped(
        &[
            &["write", s(&img), "--key-file", k, "-i", s(&d.join("in"))][..],
            &json,
        ]
        .concat(),
        b"",
    );
    let works = progress_lines(&err.replace(
        &format!("{} bytes written to {}\n", 12 << 20, img.display()),
        "",
    ));
    assert_eq!(finished(&works, "write")["total"], 12 << 20);

    // From standard input: no total known, the bytes stored at the end.
    let (_, err) = piped(
        &[
            &["write", s(&img), "--key-file", s(&new), "--offset", "4096"][..],
            &json,
        ]
        .concat(),
        &data[..3 << 20],
    );
    let works = progress_lines(&err.replace(
        &format!("{} bytes written to {}\n", 3 << 20, img.display()),
        "",
    ));
    let last = finished(&works, "write");
    assert!(last["total"].is_null() && last["done"] == 3 << 20, "{last}");

    let (out, err) = piped(
        &[
            &[
                "read",
                s(&img),
                "--key-file",
                k,
                "--length",
                "5242880",
                "--offset",
                "1048576",
            ][..],
            &json,
        ]
        .concat(),
        b"",
    );
    let mut now = data.clone();
    now[4096..4096 + (3 << 20)].copy_from_slice(&data[..3 << 20]);
    assert!(
        out == now[1 << 20..6 << 20],
        "the plaintext on standard output"
    );
    assert_eq!(finished(&progress_lines(&err), "read")["total"], 5 << 20);

    // erase: the header and keyslot area, what a header backup holds.
    let backup = d.join("hdr.bak");
    ok(sc(&["header", "backup", s(&img), s(&backup)], b""));
    let (_, err) = piped(&[&["erase", s(&img), "--batch"][..], &json].concat(), b"");
    let size = std::fs::metadata(&backup).unwrap().len();
    assert_eq!(finished(&progress_lines(&err), "erase")["total"], size);

    // The GELI wipe: every byte of data of an authenticated provider.
    let (out, err) = authenticated_geli(&d.join("a.eli"), k, &json);
    let out = String::from_utf8(out).unwrap();
    let data_bytes: u64 = out
        .split(" bytes of data")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(finished(&progress_lines(&err), "wipe")["total"], data_bytes);
}

#[test]
fn json_ends_unfinished_when_the_work_fails() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = luks1(d, "v.img", 8);
    let k = d.join("k");
    // The output device fills at once.
    let o = sc(
        &[
            "read",
            s(&img),
            "--key-file",
            s(&k),
            "-o",
            "/dev/full",
            "--progress=json",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    let (json, message): (Vec<&str>, Vec<&str>) = err.lines().partition(|l| l.starts_with('{'));
    assert!(
        message.len() == 1 && message[0].starts_with("sectorcrypt: output: "),
        "{err}"
    );
    let works = progress_lines(&json.join("\n"));
    let read: Vec<_> = works.iter().filter(|w| w[0]["op"] == "read").collect();
    let last = read[0].last().unwrap();
    assert!(
        last["finished"] == false && last["done"].as_u64() < last["total"].as_u64(),
        "{err}"
    );
}
