//! `SECTORCRYPT_STRICT=1` turns a skip for a missing tool or service into a failure with
//! the same line; without it the test passes and prints the line. Each case runs a helper
//! test of this binary as a child process (the helpers return at once unless they are
//! that child, so they pass in an ordinary run).

use std::process::{Command, Output};

/// Set in the child: which helper should do its work.
const CHILD: &str = "SECTORCRYPT_TESTKIT_STRICT_CHILD";
const MISSING: &str = "sectorcrypt-no-such-tool";

fn child(helper: &str, strict: Option<&str>) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", helper, "--nocapture", "--test-threads", "1"])
        .env(CHILD, helper)
        .env("SECTORCRYPT_CEPH", "off")
        .env_remove("SECTORCRYPT_STRICT");
    if let Some(v) = strict {
        cmd.env("SECTORCRYPT_STRICT", v);
    }
    cmd.output().unwrap()
}

fn is_child(helper: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == helper)
}

#[test]
fn helper_require_of_a_missing_tool() {
    if !is_child("helper_require_of_a_missing_tool") {
        return;
    }
    sectorcrypt_testkit::require!("bash", MISSING);
    panic!("require! let the test go on without {MISSING}");
}

#[test]
fn helper_require_ceph_switched_off() {
    if !is_child("helper_require_ceph_switched_off") {
        return;
    }
    let _cluster = sectorcrypt_testkit::require_ceph!();
    panic!("require_ceph! let the test go on with SECTORCRYPT_CEPH=off");
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_missing_tool_skips_and_fails_only_under_strict() {
    let line = format!("skipped: {MISSING} is not installed");
    for strict in [None, Some("0")] {
        let o = child("helper_require_of_a_missing_tool", strict);
        assert!(o.status.success(), "strict={strict:?}: {}", text(&o));
        assert!(text(&o).contains(&line), "{}", text(&o));
    }
    let o = child("helper_require_of_a_missing_tool", Some("1"));
    assert!(
        !o.status.success(),
        "SECTORCRYPT_STRICT=1 let a test without {MISSING} pass: {}",
        text(&o)
    );
    assert!(
        text(&o).contains(&line) && text(&o).contains("SECTORCRYPT_STRICT=1"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_missing_ceph_cluster_skips_and_fails_only_under_strict() {
    let line = "skipped: no ceph cluster (SECTORCRYPT_CEPH=off)";
    let o = child("helper_require_ceph_switched_off", None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(line), "{}", text(&o));
    let o = child("helper_require_ceph_switched_off", Some("1"));
    assert!(
        !o.status.success(),
        "SECTORCRYPT_STRICT=1 let a test without its Ceph cluster pass: {}",
        text(&o)
    );
    assert!(text(&o).contains(line), "{}", text(&o));
}
