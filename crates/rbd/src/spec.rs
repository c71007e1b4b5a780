//! The `rbd:` image spec, in qemu's syntax (block/rbd.c's filename rules), so that a spec
//! written for `qemu-img` or libvirt works here unchanged:
//!
//! ```text
//! rbd:POOL/[NAMESPACE/]IMAGE[@SNAP][:KEY=VALUE]...
//! ```
//!
//! - A backslash escapes the next character (`\:`, `\@`, `\/`, `\\`, `\=`); the escape is
//!   removed from every part. A trailing lone backslash is dropped, as qemu does.
//! - The pool ends at the first unescaped `/`; the image at the first unescaped `@` or `:`;
//!   the snapshot at the next `:`. An unescaped `/` inside the image part separates a
//!   namespace from the image.
//! - Options are `KEY=VALUE` pairs separated by `:`: `conf=FILE` (a ceph.conf to read
//!   instead of the default search, which honours `$CEPH_CONF`), `id=USER` (the cephx user
//!   without `client.`, default `admin`), and any other librados option (`mon_host=...`,
//!   `keyring=...`, `rados_osd_op_timeout=30`), set in the order given after the file is
//!   read. A key without `=VALUE` is an error.
//!
//! [`Spec`]'s `Display` is the name used in messages: the pool, namespace, image and
//! snapshot only, never the options (they may carry a cephx `key`), whose values are
//! wiped when the spec is dropped.

use std::fmt;

/// The prefix that marks an RBD image spec.
pub const PREFIX: &str = "rbd:";

/// A parsed `rbd:` spec.
#[derive(Clone, PartialEq, Eq)]
pub struct Spec {
    /// The pool.
    pub pool: String,
    /// The RADOS namespace inside the pool (none: the default one).
    pub namespace: Option<String>,
    /// The image.
    pub image: String,
    /// The snapshot: opened read-only.
    pub snap: Option<String>,
    /// The configuration file (`conf=`).
    pub conf: Option<String>,
    /// The cephx user without `client.` (`id=`).
    pub user: Option<String>,
    /// Every other `KEY=VALUE`, for `rados_conf_set`, in order.
    pub options: Vec<(String, String)>,
}

impl Drop for Spec {
    fn drop(&mut self) {
        use zeroize::Zeroize as _;
        for (_, v) in &mut self.options {
            v.zeroize();
        }
    }
}

/// Why a spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad rbd spec {spec:?}: {why} (rbd:POOL/[NAMESPACE/]IMAGE[@SNAP][:KEY=VALUE]...)")]
pub struct SpecError {
    /// The spec as given, without its options (they may carry a secret).
    pub spec: String,
    /// What is wrong.
    pub why: String,
}

/// Whether `s` names an RBD image (starts with `rbd:`).
pub fn is_rbd(s: &str) -> bool {
    s.starts_with(PREFIX)
}

/// Splits `s` at the first unescaped character for which `stop` holds: the part before
/// (still escaped), the character found, and the rest after it.
fn token(s: &str, stop: impl Fn(char) -> bool) -> (&str, Option<(char, &str)>) {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if stop(c) {
            return (&s[..i], Some((c, &s[i + c.len_utf8()..])));
        }
    }
    (s, None)
}

/// Removes the escapes: `\x` is `x`, a trailing lone `\` is dropped.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Spec {
    /// Parses `rbd:POOL/[NAMESPACE/]IMAGE[@SNAP][:KEY=VALUE]...`.
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let head = token(text, |c| c == ':').0;
        let fail = |why: &str| {
            // Up to the first option (a `key=` may follow); `rbd:` itself has a colon.
            let shown = match text.strip_prefix(PREFIX) {
                Some(rest) => format!("{PREFIX}{}", token(rest, |c| c == ':').0),
                None => head.to_string(),
            };
            SpecError {
                spec: shown,
                why: why.to_string(),
            }
        };
        let rest = text
            .strip_prefix(PREFIX)
            .ok_or_else(|| fail("it does not start with rbd:"))?;
        let (pool, after) = token(rest, |c| c == '/');
        let Some((_, rest)) = after else {
            return Err(fail("no pool: the image is written POOL/IMAGE"));
        };
        let (image, after) = token(rest, |c| c == '@' || c == ':');
        let (snap, mut opts) = match after {
            Some(('@', rest)) => {
                let (snap, after) = token(rest, |c| c == ':');
                (Some(unescape(snap)), after.map(|(_, r)| r))
            }
            Some((_, rest)) => (None, Some(rest)),
            None => (None, None),
        };
        let (namespace, image) = match token(image, |c| c == '/') {
            (ns, Some((_, image))) => (Some(unescape(ns)), image),
            (image, None) => (None, image),
        };
        let mut spec = Spec {
            pool: unescape(pool),
            namespace,
            image: unescape(image),
            snap,
            conf: None,
            user: None,
            options: Vec::new(),
        };
        if spec.pool.is_empty() {
            return Err(fail("the pool name is empty"));
        }
        if spec.image.is_empty() {
            return Err(fail("the image name is empty"));
        }
        if spec.snap.as_deref() == Some("") {
            return Err(fail("the snapshot name after @ is empty"));
        }
        if spec.namespace.as_deref() == Some("") {
            return Err(fail("the namespace name is empty"));
        }
        while let Some(text) = opts {
            let (key, after) = token(text, |c| c == '=');
            let key = unescape(key);
            let Some((_, rest)) = after else {
                return Err(fail(&format!("option {key:?} has no value (KEY=VALUE)")));
            };
            let (value, after) = token(rest, |c| c == ':');
            let value = unescape(value);
            opts = after.map(|(_, r)| r);
            if key.is_empty() {
                return Err(fail("an option has no name"));
            }
            match key.as_str() {
                "conf" => spec.conf = Some(value),
                "id" => spec.user = Some(value),
                _ => spec.options.push((key, value)),
            }
        }
        Ok(spec)
    }
}

/// The parts of the name, escaped so that the text parses back to the same image.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ':' | '@' | '/' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}/", escape(&self.pool))?;
        if let Some(ns) = &self.namespace {
            write!(f, "{}/", escape(ns))?;
        }
        write!(f, "{}", escape(&self.image))?;
        if let Some(snap) = &self.snap {
            write!(f, "@{}", escape(snap))?;
        }
        Ok(())
    }
}

/// The name and the conf file; option values are never shown (a `key` is a secret).
impl fmt::Debug for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.options.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Spec")
            .field("name", &self.to_string())
            .field("conf", &self.conf)
            .field("user", &self.user)
            .field("option_keys", &keys)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Spec {
        Spec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn pool_image_snapshot_and_options() {
        let s = parse("rbd:rbd/img");
        assert_eq!((s.pool.as_str(), s.image.as_str()), ("rbd", "img"));
        assert_eq!(
            (&s.snap, &s.namespace, &s.conf, &s.user),
            (&None, &None, &None, &None)
        );

        let s = parse("rbd:pool/ns/img@snap1:conf=/etc/c.conf:id=alice:mon_host=1.2.3.4");
        assert_eq!(s.pool, "pool");
        assert_eq!(s.namespace.as_deref(), Some("ns"));
        assert_eq!(s.image, "img");
        assert_eq!(s.snap.as_deref(), Some("snap1"));
        assert_eq!(s.conf.as_deref(), Some("/etc/c.conf"));
        assert_eq!(s.user.as_deref(), Some("alice"));
        assert_eq!(s.options, vec![("mon_host".into(), "1.2.3.4".into())]);
        assert_eq!(s.to_string(), "rbd:pool/ns/img@snap1");
    }

    /// qemu's escapes: `\:` inside a value (a mon address with a port), `\@` inside an
    /// image name, `\\` for a backslash; options in any order.
    #[test]
    fn escapes_as_qemu() {
        let s = parse(r"rbd:p/we\@ird\:name:id=u:mon_host=[v2\:127.0.0.1\:3300]:conf=/a\\b");
        assert_eq!(s.image, "we@ird:name");
        assert_eq!(s.snap, None);
        assert_eq!(s.user.as_deref(), Some("u"));
        assert_eq!(
            s.options,
            vec![("mon_host".into(), "[v2:127.0.0.1:3300]".into())]
        );
        assert_eq!(s.conf.as_deref(), Some(r"/a\b"));
        assert_eq!(s.to_string(), r"rbd:p/we\@ird\:name");
        assert_eq!(Spec::parse(&s.to_string()).unwrap().image, s.image);
        // An escaped slash stays in the image name; it is no namespace.
        let s = parse(r"rbd:p/a\/b");
        assert_eq!((s.namespace.as_deref(), s.image.as_str()), (None, "a/b"));
    }

    #[test]
    fn refusals_say_why_and_hide_options() {
        for (bad, why) in [
            ("rbd:img", "no pool"),
            ("nbd:p/img", "rbd:"),
            ("rbd:/img", "pool name is empty"),
            ("rbd:p/", "image name is empty"),
            ("rbd:p/img@", "snapshot name"),
            ("rbd:p/img:conf", "has no value"),
            ("rbd:p/img:=x", "no name"),
            ("rbd:p//img", "namespace name is empty"),
        ] {
            let e = Spec::parse(bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        let e = Spec::parse("rbd:p/img:key=AQSECRET:oops").unwrap_err();
        assert!(!e.to_string().contains("AQSECRET"), "{e}");
        let s = parse("rbd:p/img:key=AQSECRET");
        assert!(!format!("{s} {s:?}").contains("AQSECRET"));
    }
}
