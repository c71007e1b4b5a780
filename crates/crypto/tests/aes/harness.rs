//! What every test here shares: the backends under test, the vector files, hex, and
//! per-file pass/skip reports.

use sectorcrypt_crypto::aes::Width;
use sectorcrypt_crypto::hazmat::with_width;
use sectorcrypt_crypto::Backend;
use std::path::PathBuf;

/// Every backend, whether it is tested here and, if not, why (soft must always be tested).
pub fn backend_table() -> Vec<(Backend, Result<(), String>)> {
    Backend::ALL
        .into_iter()
        .rev() // soft first
        .map(|b| (b, b.ensure_usable().map_err(|e| e.to_string())))
        .collect()
}

/// Every backend this CPU can run, soft always first. A backend the CPU lacks (or whose
/// self-test failed) is skipped with a printed reason; soft is never skipped: its absence
/// fails the calling test. Inside [`each_width`]'s zmm pass: the avx512 backend alone.
pub fn backends() -> Vec<Backend> {
    let all = sectorcrypt_testkit::usable("aes", Backend::Soft, backend_table());
    if ZMM_PASS.with(|p| p.get()) {
        return all.into_iter().filter(|b| *b == Backend::Avx512).collect();
    }
    all
}

thread_local! {
    /// Whether [`each_width`] runs its zmm pass on this thread.
    static ZMM_PASS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `test` under every register width of the avx512 backend's data kernels: once
/// with the keys it makes on ymm, over every backend ([`backends`]), then, where the
/// avx512 backend runs, once more with them on zmm, over that backend alone. (Whatever
/// width the process would choose for each mode, both are tested.) Where the avx512
/// backend cannot run, the zmm pass is skipped, naming what the CPU lacks.
pub fn each_width(test: impl Fn()) {
    with_width(Width::Ymm, &test);
    match Backend::Avx512.ensure_usable() {
        Ok(()) => {
            ZMM_PASS.with(|p| p.set(true));
            struct Reset;
            impl Drop for Reset {
                fn drop(&mut self) {
                    ZMM_PASS.with(|p| p.set(false));
                }
            }
            let _reset = Reset;
            with_width(Width::Zmm, &test);
        }
        Err(e) => eprintln!("zmm pass SKIPPED ({e})"),
    }
}

/// The vectors folder (`sectorcrypt_testkit::vectors`).
pub fn vectors() -> PathBuf {
    sectorcrypt_testkit::vectors("aes")
}

pub fn read(rel: &str) -> String {
    let path = vectors().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub use sectorcrypt_testkit::unhex;

pub fn block(s: &str) -> [u8; 16] {
    unhex(s).try_into().expect("a 16-byte value")
}

/// Counts for one vector file, printed at the end; `finish` fails on zero cases.
pub struct Report {
    name: String,
    pub passed: usize,
    skipped: Vec<(usize, String)>,
}

impl Report {
    pub fn new(name: &str) -> Report {
        Report {
            name: name.to_string(),
            passed: 0,
            skipped: vec![],
        }
    }

    pub fn skip(&mut self, why: &str) {
        match self.skipped.iter_mut().find(|(_, w)| w == why) {
            Some((n, _)) => *n += 1,
            None => self.skipped.push((1, why.to_string())),
        }
    }

    pub fn finish(self) {
        let skips: Vec<String> = self
            .skipped
            .iter()
            .map(|(n, w)| format!("{n} skipped ({w})"))
            .collect();
        let skips = if skips.is_empty() {
            "0 skipped".to_string()
        } else {
            skips.join(", ")
        };
        let n = backends().len();
        eprintln!(
            "{}: {} passed, {} (cases x {n} backends)",
            self.name, self.passed, skips
        );
        assert!(self.passed > 0, "{}: no case ran", self.name);
    }
}

/// `key = value` records separated by blank lines, with the `[SECTION]` they are in (the
/// layout of NIST CAVP `.rsp` files and OpenSSL's evp test files). Comments start with `#`.
pub fn records(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = vec![];
    let mut section = String::new();
    let mut cur: Vec<(String, String)> = vec![];
    for line in text.lines().map(|l| l.trim_end_matches('\r').trim()) {
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            if !cur.is_empty() {
                out.push((section.clone(), std::mem::take(&mut cur)));
            }
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            if !cur.is_empty() {
                out.push((section.clone(), std::mem::take(&mut cur)));
            }
            section = line[1..line.len() - 1].to_string();
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            cur.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    if !cur.is_empty() {
        out.push((section, cur));
    }
    out
}

/// The value of `key` in a record (case-insensitive name).
pub fn field<'a>(rec: &'a [(String, String)], key: &str) -> Option<&'a str> {
    rec.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}
