//! The NBD URI target ([`NbdUri::parse`]): the bytes, when UTF-8, are a URI. A URI that
//! parses must be one [`is_nbd_uri`] names (the CLI chooses between a path and a URI on
//! it), its TLS flag must be its scheme's, and its canonical spelling (`Display`, used in
//! messages and as a key) must parse back to the same URI and print the same again. A
//! refusal is a message that names the URI as [`redact`] shows it: without its user
//! information, query or fragment, where secrets may stand.
//!
//! The seeds (`scripts/fuzz.sh seeds`) are the URIs of libnbd's tests and the forms the
//! NBD project's `doc/uri.md` lists: every scheme (`nbd+vsock` too, which this client
//! refuses), IPv6 literals, percent-encoding, user info, the `socket`, `tls-certificates`,
//! `tls-psk-file`, `tls-verify-peer`, `tls-hostname` and `tls-type` queries.

use sectorcrypt_nbd::client::uri::{is_nbd_uri, redact};
use sectorcrypt_nbd::client::NbdUri;

/// The NBD URI target.
pub fn nbd_uri(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let u = match NbdUri::parse(s) {
        Ok(u) => u,
        Err(e) => {
            let shown = redact(s);
            assert!(
                e.0.starts_with(&format!("{shown}: ")),
                "the refusal {e} does not name {s:?} as {shown:?}"
            );
            assert!(!shown.contains(['?', '#']), "{s:?} shown as {shown:?}");
            let authority = |u: &str| {
                let rest = u.split_once("://").map_or(u, |(_, r)| r);
                rest.split(['/', '?', '#']).next().unwrap_or("").to_string()
            };
            assert!(
                !authority(&shown).contains('@'),
                "{s:?} shown as {shown:?}, with its user information"
            );
            return;
        }
    };
    assert!(is_nbd_uri(s), "{s:?} parsed but is not an NBD URI");
    let scheme = s.split_once("://").expect("a scheme").0;
    assert_eq!(u.tls, scheme.starts_with("nbds"), "{s:?}: TLS");
    let canonical = u.to_string();
    let again = NbdUri::parse(&canonical)
        .unwrap_or_else(|e| panic!("{s:?} prints as {canonical:?}, which is refused: {e}"));
    assert_eq!(again, u, "{s:?} prints as {canonical:?}, another URI");
    assert_eq!(
        again.to_string(),
        canonical,
        "{s:?}: the canonical spelling changes"
    );
    for (k, _) in &u.tls_params {
        let _ = u.tls_param(k);
    }
}
