//! NBD URIs, as the NBD project's `doc/uri.md` defines them: `nbd://host[:port]/export`,
//! `nbd+unix:///export?socket=PATH`, and the TLS schemes `nbds://` and `nbds+unix://`.
//!
//! Parsing only: the export name is the path without its leading `/`, percent-decoded;
//! the port defaults to 10809 (IANA's); a Unix socket comes from the `socket` query
//! parameter (a leading NUL, `%00`, names Linux's abstract namespace). The TLS query
//! parameters (the specification's `tls-type`, `tls-hostname`, `tls-verify-peer`, and
//! libnbd's `tls-certificates`) are kept for the TLS client, which gives them their
//! meaning (`client::secure`); any other parameter is diagnosed, as the specification
//! asks.
//!
//! A URI may hold secrets this client never uses: user information
//! (`nbd://user:password@host`) and query parameters of other clients (`tls-psk-file=`).
//! A refusal therefore names the URI as [`redact`] shows it, never as given, and a parsed
//! URI prints without them ([`NbdUri`]'s `Display`).

use std::fmt;
use std::path::PathBuf;

/// The NBD port IANA assigned.
pub const DEFAULT_PORT: u16 = 10809;

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A TCP host (a name, an IPv4 address, or an IPv6 address without brackets) and port.
    Tcp {
        /// The host.
        host: String,
        /// The port.
        port: u16,
    },
    /// A Unix socket; a path starting with a NUL byte is in the abstract namespace.
    Unix(PathBuf),
}

/// A parsed NBD URI.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NbdUri {
    /// `nbds` or `nbds+unix`: TLS is required.
    pub tls: bool,
    /// Where the server is.
    pub endpoint: Endpoint,
    /// The export name (may be empty: the default export).
    pub export: String,
    /// The TLS query parameters given, in order (name, value).
    pub tls_params: Vec<(String, String)>,
}

/// Why a string is not an NBD URI this client can use; the message names the part, and
/// the URI as [`redact`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError(pub String);

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UriError {}

/// The URI schemes of NBD: whether the string names an NBD export at all (the caller's
/// choice between a path and a URI is made on this).
pub fn is_nbd_uri(s: &str) -> bool {
    s.split_once("://").is_some_and(|(scheme, _)| {
        matches!(scheme, "nbd" | "nbds")
            || scheme.starts_with("nbd+")
            || scheme.starts_with("nbds+")
    })
}

/// `s`, which is an NBD URI or meant to be one, as it may be shown outside the process
/// even when it does not parse: its scheme, host, port and path, without its user
/// information, query or fragment (where a password, or another client's secret
/// parameter, may stand). The user information ends at the last `@` before the query,
/// not at the first `/`, so a password holding a raw `/` is cut too (an export name
/// holding an `@` loses what came before it: better than showing a password).
pub fn redact(s: &str) -> String {
    let before_query = s.split(['?', '#']).next().unwrap_or("");
    match before_query.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.rsplit_once('@').map_or(rest, |(_, after)| after);
            format!("{scheme}://{rest}")
        }
        None => before_query
            .rsplit_once('@')
            .map_or(before_query, |(_, after)| after)
            .to_string(),
    }
}

impl NbdUri {
    /// Parses `s`. A refusal names `s` as [`redact`] shows it.
    pub fn parse(s: &str) -> Result<NbdUri, UriError> {
        let shown = redact(s);
        let bad = |why: &str| UriError(format!("{shown}: {why}"));
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| bad("not a URI (expected nbd://, nbds://, nbd+unix://...)"))?;
        let (tls, unix) = match scheme {
            "nbd" | "nbd+tcp" => (false, false),
            "nbds" | "nbds+tcp" => (true, false),
            "nbd+unix" => (false, true),
            "nbds+unix" => (true, true),
            _ => {
                return Err(bad(&format!(
                    "unknown scheme {scheme:?} (nbd, nbds, nbd+unix or nbds+unix)"
                )))
            }
        };
        if rest.contains('#') {
            return Err(bad("a fragment (#...) has no meaning in an NBD URI"));
        }
        let (before_query, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match before_query.find('/') {
            Some(i) => (&before_query[..i], &before_query[i..]),
            None => (before_query, ""),
        };
        let export = decode(path.strip_prefix('/').unwrap_or(path)).map_err(|e| bad(&e))?;
        let export = String::from_utf8(export).map_err(|_| bad("the export name is not UTF-8"))?;
        if export.contains('\0') {
            return Err(bad("the export name contains a NUL byte"));
        }
        let mut socket = None;
        let mut tls_params = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = String::from_utf8(decode(k).map_err(|e| bad(&e))?)
                .map_err(|_| bad("a query parameter name is not UTF-8"))?;
            let v = decode(v).map_err(|e| bad(&e))?;
            match k.as_str() {
                "socket" if !unix => {
                    return Err(bad("socket= is for nbd+unix:// and nbds+unix:// URIs"))
                }
                "socket" if socket.is_some() => return Err(bad("socket= given twice")),
                "socket" if v.is_empty() => return Err(bad("socket= is empty")),
                "socket" => socket = Some(v),
                "tls-type" | "tls-hostname" | "tls-verify-peer" | "tls-certificates" => {
                    let v =
                        String::from_utf8(v).map_err(|_| bad("a TLS parameter is not UTF-8"))?;
                    tls_params.push((k, v));
                }
                _ => return Err(bad(&format!("unknown query parameter {k:?}"))),
            }
        }
        let endpoint = if unix {
            if !authority.is_empty() {
                return Err(bad(
                    "a Unix socket URI has no host: write nbd+unix:///EXPORT?socket=PATH",
                ));
            }
            let socket = socket.ok_or_else(|| bad("nbd+unix:// needs ?socket=PATH"))?;
            use std::os::unix::ffi::OsStringExt as _;
            Endpoint::Unix(PathBuf::from(std::ffi::OsString::from_vec(socket)))
        } else {
            let (host, port) = host_port(authority).map_err(|e| bad(&e))?;
            Endpoint::Tcp { host, port }
        };
        Ok(NbdUri {
            tls,
            endpoint,
            export,
            tls_params,
        })
    }
}

impl NbdUri {
    /// The value of the TLS query parameter `name` (the last one when given twice).
    pub fn tls_param(&self, name: &str) -> Option<&str> {
        self.tls_params
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The host and port of an authority (`[userinfo@]host[:port]`, `[v6]:port`).
fn host_port(authority: &str) -> Result<(String, u16), String> {
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or("an IPv6 address without its closing ]")?;
        match after {
            "" => (h, None),
            p => (
                h,
                Some(p.strip_prefix(':').ok_or("junk after the IPv6 address")?),
            ),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("no host (write nbd://HOST[:PORT]/EXPORT, or nbd+unix:// for a socket)".into());
    }
    let port = match port {
        None | Some("") => DEFAULT_PORT,
        Some(p) => p.parse().map_err(|_| format!("bad port {p:?}"))?,
    };
    let host = String::from_utf8(decode(host)?).map_err(|_| "the host is not UTF-8")?;
    Ok((host, port))
}

/// Percent-decodes `s` (RFC 3986: `%XX`; `+` is a plus sign).
fn decode(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape at byte {i}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Percent-encodes what may not stand as is in a URI path or query value.
fn encode(b: &[u8], out: &mut String) {
    for &c in b {
        if c.is_ascii_alphanumeric() || b"-._~/".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
}

/// Percent-encodes a host: RFC 3986's unreserved characters and `keep` (the colons of an
/// IPv6 address, inside its brackets) stand as they are; anything else (a `/` would end
/// the authority, a `%` would start an escape, a `]` would end the brackets) is encoded.
fn encode_host(b: &[u8], keep: &[u8], out: &mut String) {
    for &c in b {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) || keep.contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
}

/// The URI again, in a canonical spelling (equal exports print equal): for messages and as
/// a key.
impl fmt::Display for NbdUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.tls { "nbds" } else { "nbd" };
        let mut out = String::new();
        match &self.endpoint {
            Endpoint::Tcp { host, port } => {
                out.push_str(&format!("{s}://"));
                if host.contains(':') {
                    out.push('[');
                    encode_host(host.as_bytes(), b":", &mut out);
                    out.push(']');
                } else {
                    encode_host(host.as_bytes(), b"", &mut out);
                }
                out.push_str(&format!(":{port}/"));
                encode(self.export.as_bytes(), &mut out);
            }
            Endpoint::Unix(p) => {
                use std::os::unix::ffi::OsStrExt as _;
                out.push_str(&format!("{s}+unix:///"));
                encode(self.export.as_bytes(), &mut out);
                out.push_str("?socket=");
                encode(p.as_os_str().as_bytes(), &mut out);
            }
        }
        for (k, v) in &self.tls_params {
            out.push(if out.contains('?') { '&' } else { '?' });
            out.push_str(k);
            out.push('=');
            encode(v.as_bytes(), &mut out);
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URI that does not parse is named in its error without its query or user
    /// information: the error reaches messages and logs.
    #[test]
    fn errors_show_no_secret_of_the_uri() {
        for bad in [
            "nbds://h/e?tls-psk-file=/k&password=AQSECRETKEY==",
            "nbd://user:AQSECRETKEY==@h:port/e",
            "nbd://u:pa/ssAQSECRETKEY==@h/e",
            "nbd+unix:///e?socket=/s&socket=/AQSECRETKEY==",
            "nbd://h/e#AQSECRETKEY==",
        ] {
            let err = NbdUri::parse(bad).unwrap_err().to_string();
            assert!(!err.contains("AQSECRETKEY"), "{bad}: {err}");
            assert!(err.contains("://"), "{bad}: the URI is still named: {err}");
        }
    }

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp {
            host: host.into(),
            port,
        }
    }

    /// The specification's table of export names, and its defaults.
    #[test]
    fn export_names_and_hosts_as_the_specification_gives_them() {
        let cases = [
            ("nbd://example.com/disk", "disk"),
            ("nbd://example.com/", ""),
            ("nbd://example.com", ""),
            ("nbd://example.com//disk", "/disk"),
            ("nbd://example.com/hello%20world", "hello world"),
        ];
        for (uri, export) in cases {
            let u = NbdUri::parse(uri).unwrap();
            assert_eq!(u.export, export, "{uri}");
            assert_eq!(u.endpoint, tcp("example.com", DEFAULT_PORT), "{uri}");
            assert!(!u.tls);
        }
        let u = NbdUri::parse("nbd+unix:///disk?socket=sock").unwrap();
        assert_eq!(u.export, "disk");
        assert_eq!(u.endpoint, Endpoint::Unix("sock".into()));
        let u = NbdUri::parse("nbd://127.0.0.1:10810/x").unwrap();
        assert_eq!(u.endpoint, tcp("127.0.0.1", 10810));
        let u = NbdUri::parse("nbd://user@[::1]:99/").unwrap();
        assert_eq!(u.endpoint, tcp("::1", 99));
        let u = NbdUri::parse("nbds://h/e?tls-verify-peer=0").unwrap();
        assert!(u.tls);
        assert_eq!(u.tls_params, vec![("tls-verify-peer".into(), "0".into())]);
        let u = NbdUri::parse("nbds+unix:///?socket=/tmp/a%20b.sock").unwrap();
        assert!(u.tls);
        assert_eq!(u.endpoint, Endpoint::Unix("/tmp/a b.sock".into()));
        let u = NbdUri::parse("nbd+unix:///?socket=%00/abstract").unwrap();
        assert_eq!(u.endpoint, Endpoint::Unix("\0/abstract".into()));
    }

    #[test]
    fn malformed_uris_are_diagnosed() {
        for (uri, says) in [
            ("nbd+unix:///x", "needs ?socket"),
            ("nbd+unix://host/x?socket=s", "has no host"),
            ("nbd:///x", "no host"),
            ("nbd://h/x?socket=s", "socket= is for"),
            ("nbd://h/x?frobnicate=1", "unknown query parameter"),
            ("nbd://h:port/x", "bad port"),
            ("nbd://h:70000/x", "bad port"),
            ("nbd://h/%zz", "percent escape"),
            ("nbd://h/a%00b", "NUL"),
            ("nbd+vsock:///", "unknown scheme"),
            ("nbd://[::1/x", "closing ]"),
            ("nbd+unix:///?socket=a&socket=b", "twice"),
            ("nbd://h/x#frag", "fragment"),
            ("/dev/sda", "not a URI"),
        ] {
            let e = NbdUri::parse(uri).unwrap_err().0;
            assert!(e.contains(says), "{uri}: {e}");
        }
    }

    /// A URI's user information and query may hold secrets (a
    /// password, another client's `tls-psk-file=`); a refusal quoted the URI whole.
    #[test]
    fn refusals_quote_no_user_information_and_no_query() {
        for (uri, says, shown) in [
            (
                "nbd://alice:SECRET1@h/x?tls-psk-file=SECRET2",
                "unknown query parameter \"tls-psk-file\"",
                "nbd://h/x",
            ),
            (
                "nbd+unix:///x?socket=/s&tls-psk-file=SECRET2",
                "unknown query parameter",
                "nbd+unix:///x",
            ),
            ("nbd://alice:SECRET1@[::1/x", "closing ]", "nbd://[::1/x"),
            ("nbd://alice:SECRET1@h:port/x", "bad port", "nbd://h:port/x"),
            ("nbd://alice:SECRET1@h/%zz", "percent escape", "nbd://h/%zz"),
            (
                "nbd+unix://alice:SECRET1@/x?socket=/s",
                "has no host",
                "nbd+unix:///x",
            ),
            ("nbd://h/x?key=SECRET2#SECRET1", "fragment", "nbd://h/x"),
            (
                "nbd+vsock://alice:SECRET1@h/?key=SECRET2",
                "unknown scheme",
                "nbd+vsock://h/",
            ),
            ("alice:SECRET1@h/x?key=SECRET2", "not a URI", "h/x"),
        ] {
            let e = NbdUri::parse(uri).unwrap_err().0;
            assert!(e.contains(says), "{uri}: {e}");
            assert!(e.starts_with(&format!("{shown}: ")), "{uri}: {e}");
            assert!(
                !e.contains("SECRET"),
                "{uri}: the refusal {e:?} quotes a secret"
            );
            assert_eq!(redact(uri), shown);
        }
    }

    #[test]
    fn the_canonical_spelling_parses_back_to_the_same_uri() {
        for uri in [
            "nbd://example.com/hello%20world",
            "nbd://[::1]/",
            "nbds+unix:///e%2Fx?socket=/tmp/s%20s&tls-type=x509",
            "nbd+unix:///?socket=/run/a.sock",
        ] {
            let u = NbdUri::parse(uri).unwrap();
            let again = NbdUri::parse(&u.to_string()).unwrap();
            assert_eq!(u, again, "{uri} -> {u}");
        }
        assert_eq!(
            NbdUri::parse("nbd://h").unwrap().to_string(),
            NbdUri::parse("nbd://h:10809/").unwrap().to_string()
        );
        assert!(is_nbd_uri("nbd+unix:///?socket=s"));
        assert!(!is_nbd_uri("./nbd.img"));
    }

    /// Found by the nbd_uri fuzz target (fuzz/regressions/nbd_uri/): a host that holds a
    /// `%` (an IPv6 zone, RFC 6874's `%25`), a `/` or a `]` once decoded must be encoded
    /// again in the canonical spelling, or it does not parse back (or parses as another
    /// host and export).
    #[test]
    fn hosts_with_reserved_characters_print_encoded_and_parse_back() {
        for (uri, host, canonical) in [
            (
                "nbd://[fe80::1%25eth0]:10809/",
                "fe80::1%eth0",
                "nbd://[fe80::1%25eth0]:10809/",
            ),
            ("nbd://a%2Fb/x", "a/b", "nbd://a%2Fb:10809/x"),
            ("nbd://[a:%5D]/", "a:]", "nbd://[a:%5D]:10809/"),
            ("nbd://h%3F%23/", "h?#", "nbd://h%3F%23:10809/"),
        ] {
            let u = NbdUri::parse(uri).unwrap();
            assert_eq!(u.endpoint, tcp(host, DEFAULT_PORT), "{uri}");
            assert_eq!(u.to_string(), canonical, "{uri}");
            assert_eq!(NbdUri::parse(&u.to_string()).unwrap(), u, "{uri}");
        }
    }
}
