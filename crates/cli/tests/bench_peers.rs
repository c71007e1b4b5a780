//! `sectorcrypt bench` and its peer libraries: one that is absent is named on standard
//! error beside the JSON (and in its `peers_absent`), and is an error under
//! `SECTORCRYPT_STRICT=1`.

mod support;

use serde_json::Value;
use std::process::Command;
use support::bin;

/// `sectorcrypt bench --quick --json` of one soft-backend case, with the AWS-LC peer
/// looked for where it is not, and `SECTORCRYPT_STRICT` as given.
fn bench_without_aws_lc(strict: &str) -> std::process::Output {
    Command::new(bin())
        .args(["bench", "--quick", "--json", "--threads", "1"])
        .args(["--backend", "soft", "--filter", "aes-128-ecb/"])
        .env("SECTORCRYPT_PEER_AWSLC", "/nonexistent/libpeer.so")
        .env("SECTORCRYPT_STRICT", strict)
        .output()
        .expect("run sectorcrypt")
}

const NOTE: &str = "aws-lc: not found at /nonexistent/libpeer.so (SECTORCRYPT_PEER_AWSLC); run scripts/bench-peers.sh";

#[test]
fn an_absent_peer_is_named_beside_the_json() {
    let o = bench_without_aws_lc("0");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("sectorcrypt: peer {NOTE}\n")),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let absent = v["peers_absent"].as_array().unwrap();
    assert!(absent.iter().any(|n| n == NOTE), "{v}");
}

#[test]
fn an_absent_peer_is_an_error_under_strict() {
    let o = bench_without_aws_lc("1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "SECTORCRYPT_STRICT=1 and a peer library is missing: {NOTE}"
        )),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "no report: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}
