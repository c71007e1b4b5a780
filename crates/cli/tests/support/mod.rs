//! What the `sectorcrypt` binary's test files share, included by each with `mod support;`:
//! running the binary with standard input and a chosen backend, and reading its outcome.
//! Topic-specific helpers live in files of their own beside this one.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sectorcrypt")
}

/// Runs `sectorcrypt ARGS` with `stdin` as its standard input and the backend chosen by
/// the binary itself (`SECTORCRYPT_BACKEND` removed from its environment).
pub fn sc(args: &[&str], stdin: &[u8]) -> Output {
    sc_on(args, stdin, None)
}

/// Runs `sectorcrypt ARGS` with `stdin` as its standard input, on `backend` when given
/// (`SECTORCRYPT_BACKEND`), otherwise on the binary's own choice.
pub fn sc_on(args: &[&str], stdin: &[u8], backend: Option<&str>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match backend {
        Some(b) => cmd.env("SECTORCRYPT_BACKEND", b),
        None => cmd.env_remove("SECTORCRYPT_BACKEND"),
    };
    let mut child = cmd.spawn().expect("run sectorcrypt");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    // Written from a thread: a child that fills its stdout pipe before reading all of its
    // input would otherwise deadlock with us.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for sectorcrypt");
    writer.join().expect("stdin writer");
    out
}

/// The exit code (-1 when killed by a signal).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Standard output of a run that must have succeeded; panics with its stderr otherwise.
pub fn ok(o: Output) -> String {
    String::from_utf8(ok_bytes(o)).expect("utf-8 output")
}

/// Standard output bytes of a run that must have succeeded.
pub fn ok_bytes(o: Output) -> Vec<u8> {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a utf-8 path")
}

/// Every field path in `v` (`a.b`, `a[].b`).
pub fn json_paths(v: &serde_json::Value) -> std::collections::BTreeSet<String> {
    fn walk(v: &serde_json::Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    out.insert(p.clone());
                    walk(x, &p, out);
                }
            }
            serde_json::Value::Array(a) => {
                for x in a {
                    walk(x, &format!("{prefix}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(v, "", &mut out);
    out
}

/// The fields the table of section `## TITLE` of docs/JSON.md lists.
pub fn documented_fields(title: &str) -> std::collections::BTreeSet<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/JSON.md"))
            .expect("docs/JSON.md");
    let head = format!("## {title}");
    assert!(
        doc.lines().any(|l| l == head),
        "no section {head:?} in docs/JSON.md"
    );
    doc.lines()
        .skip_while(|l| *l != head)
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap_or_default().to_string())
        .collect()
}

/// A Python that imports `module` (`nbd`: libnbd's binding; `botan2`: Botan's): the
/// system's, where another Python comes first in PATH; `None` when neither does.
pub fn python_with(module: &str) -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}
