//! The backends the tests run the binary on: every one the crypto crate has, when the
//! binary reports it usable on this machine (`sectorcrypt backends`); the others are
//! printed as SKIPPED with the binary's reason.
// Each test binary that includes this file uses a different part of it.
#![allow(dead_code)]

use crate::support::{ok, sc};
use sectorcrypt_crypto::{Backend, GostBackend};

/// `sectorcrypt backends`, as text.
pub fn report() -> String {
    ok(sc(&["backends"], b""))
}

/// What `report` says of the backend `name` on its line `PREFIX NAME usable ...` or
/// `PREFIX NAME not usable: WHY`: `Ok` when usable, otherwise why not.
pub fn status(report: &str, prefix: &str, name: &str) -> Result<(), String> {
    let line = report
        .lines()
        .find(|l| {
            l.strip_prefix(prefix)
                .and_then(|r| r.split_whitespace().next())
                == Some(name)
        })
        .unwrap_or_else(|| panic!("no line for {prefix}{name} in:\n{report}"));
    let rest = line[prefix.len() + name.len()..].trim_start();
    match rest.strip_prefix("not usable: ") {
        Some(why) => Err(why.to_string()),
        None if rest.starts_with("usable") => Ok(()),
        None => panic!("neither usable nor not usable: {line}"),
    }
}

/// The AES backends to test (`SECTORCRYPT_BACKEND` values), soft always among them.
pub fn aes() -> Vec<&'static str> {
    usable("aes", "backend ", Backend::ALL.map(Backend::name))
}

/// The GOST backends to test (`SECTORCRYPT_BACKEND` values), soft always among them.
pub fn gost() -> Vec<&'static str> {
    usable(
        "gost",
        "gost backend ",
        GostBackend::ALL.map(GostBackend::name),
    )
}

/// Those of `names` that the report's lines `PREFIX NAME ...` say are usable.
fn usable(
    what: &str,
    prefix: &str,
    names: impl IntoIterator<Item = &'static str>,
) -> Vec<&'static str> {
    let report = report();
    let table = names
        .into_iter()
        .map(|name| (name, status(&report, prefix, name)))
        .collect();
    sectorcrypt_testkit::usable(what, "soft", table)
}
