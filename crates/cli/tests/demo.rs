//! `sectorcrypt demo`: it runs, and its known-answer check and round trip pass.

mod support;

use support::{ok, sc};

#[test]
fn demo_runs_and_verifies() {
    let text = ok(sc(&["demo"], b""));
    assert!(
        text.contains("IEEE 1619-2007 vector 2 ok") && text.contains("round trip   : ok"),
        "{text}"
    );
}
