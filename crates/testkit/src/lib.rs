//! What the tests of every crate share (a dev-dependency only, never shipped):
//! - the known-answer vectors folder, kept in the repository ([`vectors`]);
//! - hex ([`unhex`], [`hex`](fn@hex));
//! - external tools: whether one runs ([`have`]), and skipping a test with a printed reason
//!   when it does not ([`require!`]); every skip for a missing tool, service or permission
//!   goes through [`skip`], which under `SECTORCRYPT_STRICT=1` fails the test instead
//!   ([`strict`]);
//! - running a command that must succeed ([`run`], [`run_stdout`]);
//! - fixture tarballs committed as test data, extracted once per test binary
//!   ([`fixtures`], `fixtures_or_skip!`);
//! - deterministic pseudo-random data ([`pattern`]), so that failures reproduce;
//! - an `nbdkit` process for a test ([`nbdkit::Nbdkit`]);
//! - the report of which backends a test binary runs and which it skips ([`usable`]);
//! - X.509 certificates for TLS tests, made with the openssl command line (`tls`);
//! - a single-node Ceph cluster shared by a test binary's tests ([`ceph`], `require_ceph!`);
//! - with the `openssl` feature, OpenSSL as the reference model (`reference`: EVP calls,
//!   and dm-crypt's sectors one at a time).
#![forbid(unsafe_code)]

pub mod ceph;
pub mod nbdkit;
#[cfg(feature = "openssl")]
pub mod reference;
pub mod tls;

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, Once};

/// The known-answer vectors: `crates/crypto/tests/vectors` in this repository, or
/// `$SECTORCRYPT_VECTORS` when set (an override, e.g. for a newer copy). Panics with a
/// clear message unless the folder holds the subfolder `sub` (`aes`, `gost`).
pub fn vectors(sub: &str) -> PathBuf {
    let dir = match std::env::var_os("SECTORCRYPT_VECTORS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crypto/tests/vectors"),
    };
    assert!(
        dir.join(sub).is_dir(),
        "test vectors not found: {} has no {sub}/ folder (the repository keeps them in \
         crates/crypto/tests/vectors; $SECTORCRYPT_VECTORS overrides it)",
        dir.display()
    );
    dir
}

/// Decodes hex (surrounding white space ignored); panics on anything else.
pub fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim()).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// Lowercase hex.
pub fn hex(b: &[u8]) -> String {
    hex::encode(b)
}

/// Whether `tool --version` runs and succeeds.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether `SECTORCRYPT_STRICT=1` is set. CI sets it (`.ci/run`): it installs every tool and
/// service the tests use, so there a test that would skip for a missing one fails instead
/// ([`skip`]).
pub fn strict() -> bool {
    std::env::var_os("SECTORCRYPT_STRICT").is_some_and(|v| v == "1")
}

/// Reports that a test, or a part of one, does not run here because a tool, a service or a
/// permission that CI provides is missing: prints `line` (such as `skipped: nbdkit is not
/// installed`), or, under `SECTORCRYPT_STRICT=1` ([`strict`]), fails the calling test with
/// the same line. The caller returns (or leaves the part out) after it.
///
/// Not for what CI cannot have either, such as a CPU feature the machine lacks: such a
/// backend or case is skipped with a plain printed reason, strict or not.
#[track_caller]
pub fn skip(line: impl Display) {
    if strict() {
        panic!("{line} (SECTORCRYPT_STRICT=1: a missing tool or capability is a failure)");
    }
    eprintln!("{line}");
}

/// [`skip`] with a formatted line: `skipped!("skipped: {why}")`.
#[macro_export]
macro_rules! skipped {
    ($($arg:tt)+) => {
        $crate::skip(format_args!($($arg)+))
    };
}

/// Returns from the calling test, printing `skipped: TOOL is not installed` ([`skip`]: a
/// failure under `SECTORCRYPT_STRICT=1`), unless every tool named runs ([`have`]).
#[macro_export]
macro_rules! require {
    ($($tool:expr),+ $(,)?) => {
        $(if !$crate::have($tool) {
            $crate::skipped!("skipped: {} is not installed", $tool);
            return;
        })+
    };
}

/// The folder `top` of the fixture tarball `tarball` (a `.tar.xz`, such as cryptsetup's
/// test images), extracted once per process (`tar -xJf`, holes kept) into a folder of
/// the system's temporary directory named after the process, which a later run of the
/// same binary with the same process id would replace; `None` when `xz` is missing.
/// Panics when the tarball cannot be extracted or lacks `top`.
pub fn fixtures(tarball: &Path, top: &str) -> Option<&'static Path> {
    type Extracted = Vec<(PathBuf, &'static Path)>;
    static DONE: Mutex<Extracted> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let wanted = tarball.join(top);
    if let Some((_, dir)) = done.iter().find(|(k, _)| *k == wanted) {
        return Some(dir);
    }
    if !have("xz") {
        return None;
    }
    let name = tarball
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let root = std::env::temp_dir().join(format!(
        "sectorcrypt-fixtures-{}-{}",
        std::process::id(),
        name.unwrap_or_default()
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    run(Command::new("tar")
        .arg("-xJf")
        .arg(tarball)
        .arg("-C")
        .arg(&root));
    let dir = root.join(top);
    assert!(dir.is_dir(), "{} holds no {top}", tarball.display());
    let dir: &'static Path = Box::leak(dir.into_boxed_path());
    done.push((wanted, dir));
    Some(dir)
}

/// The folder [`fixtures`] gives, or returns from the calling test, printing `skipped: xz
/// is not installed` ([`skip`]: a failure under `SECTORCRYPT_STRICT=1`).
#[macro_export]
macro_rules! fixtures_or_skip {
    ($tarball:expr, $top:expr) => {
        match $crate::fixtures(&$tarball, $top) {
            Some(d) => d,
            None => {
                $crate::skipped!("skipped: xz is not installed");
                return;
            }
        }
    };
}

/// Runs `cmd`; panics with its output when it cannot start or fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Runs `cmd` as [`run`] does and returns its standard output as text.
pub fn run_stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).expect("utf-8 output")
}

/// `len` deterministic, incompressible-looking bytes from `seed` (xorshift64*).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The backends of `table` (each with whether it can run here, or why not) that a test
/// runs, in the table's order. The first call in a test binary prints which are tested and
/// why any is skipped. The portable backend `soft` must be usable: otherwise the calling
/// test fails, since it is the reference every other backend is compared with.
pub fn usable<B: Copy + PartialEq + Display>(
    what: &str,
    soft: B,
    table: Vec<(B, Result<(), String>)>,
) -> Vec<B> {
    static REPORT: Once = Once::new();
    match table.iter().find(|(b, _)| *b == soft) {
        Some((_, Ok(()))) => {}
        Some((_, Err(e))) => panic!("the soft {what} backend must always be usable: {e}"),
        None => panic!("the {what} backends lack the soft backend"),
    }
    REPORT.call_once(|| {
        for (b, r) in &table {
            match r {
                Ok(()) => eprintln!("{what} backend {b}: tested"),
                Err(e) => eprintln!("{what} backend {b}: SKIPPED ({e})"),
            }
        }
    });
    table
        .into_iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(b, _)| b)
        .collect()
}

/// The value of the sample `series` (name and labels, as written) in Prometheus' text
/// format; panics naming it when it is missing.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap_or_else(|e| panic!("{series}: {e}"))
}

/// `promtool check metrics` of `text` (Prometheus' text format): `Err` with what it said
/// when it finds a fault.
pub fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write as _;
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("promtool: {e}"))?;
    let fed = check
        .stdin
        .take()
        .expect("piped")
        .write_all(text.as_bytes());
    let out = check
        .wait_with_output()
        .map_err(|e| format!("promtool: {e}"))?;
    fed.map_err(|e| format!("writing to promtool: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_deterministic_and_seed_dependent() {
        assert_eq!(pattern(100, 7), pattern(100, 7));
        assert_ne!(pattern(100, 7), pattern(100, 8));
        assert_eq!(pattern(13, 1), pattern(64, 1)[..13]);
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(" 00ff10 "), [0, 255, 16]);
        assert_eq!(hex(&[0, 255, 16]), "00ff10");
    }

    #[test]
    fn vectors_are_in_the_repository() {
        // Without the override the folder must be the repository's own copy.
        if std::env::var_os("SECTORCRYPT_VECTORS").is_none() {
            assert!(vectors("aes").join("aes/SOURCES.md").is_file());
            assert!(vectors("gost").join("gost/vectors.json").is_file());
        }
    }
}
