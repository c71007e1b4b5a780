//! The RBD spec target ([`Spec::parse`], qemu's `rbd:` syntax): the bytes, when UTF-8,
//! are a spec. A spec that parses has a pool and an image, and its name (`Display`, the
//! image's name in messages and in `open` entries) parses back to the same pool,
//! namespace, image and snapshot, with no options; neither the name nor `Debug` depends
//! on an option's value (a cephx `key=` is a secret). A refusal quotes the spec only up to its
//! first option.
//!
//! The seeds (`scripts/fuzz.sh seeds`) are specs in every form the parser takes: with and
//! without namespace and snapshot, `conf=`, `id=`, other librados options (`mon_host=`
//! with escaped colons, `keyring=`, `key=`), and the escapes.

use sectorcrypt_rbd::spec::PREFIX;
use sectorcrypt_rbd::{is_rbd, Spec};

/// The RBD spec target.
pub fn rbd_spec(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match Spec::parse(s) {
        Ok(spec) => spec,
        Err(e) => {
            let head = before_options(s);
            assert!(
                head.starts_with(&e.spec),
                "{s:?}: the refusal shows {:?}",
                e.spec
            );
            assert!(!e.why.is_empty());
            return;
        }
    };
    assert!(is_rbd(s), "{s:?} parsed but is not an rbd: spec");
    assert!(
        !spec.pool.is_empty() && !spec.image.is_empty(),
        "{s:?}: {spec:?}"
    );
    let name = spec.to_string();
    let again = Spec::parse(&name)
        .unwrap_or_else(|e| panic!("{s:?} is named {name:?}, which is refused: {e}"));
    let parts = |x: &Spec| {
        (
            x.pool.clone(),
            x.namespace.clone(),
            x.image.clone(),
            x.snap.clone(),
        )
    };
    assert_eq!(parts(&again), parts(&spec), "{s:?} is named {name:?}");
    assert!(again.options.is_empty() && again.conf.is_none() && again.user.is_none());
    assert_eq!(again.to_string(), name, "{s:?}: the name changes");
    // The name and Debug do not depend on the options' values: the same with others.
    let mut other = spec.clone();
    for (_, v) in &mut other.options {
        *v = format!("{}-other", v.len());
    }
    assert_eq!(
        other.to_string(),
        name,
        "{s:?}: the name shows an option's value"
    );
    assert_eq!(
        format!("{other:?}"),
        format!("{spec:?}"),
        "{s:?}: Debug shows an option's value"
    );
}

/// `s` up to its first option: up to the first unescaped `:` after the prefix.
fn before_options(s: &str) -> &str {
    let Some(rest) = s.strip_prefix(PREFIX) else {
        // No prefix: the refusal quotes up to the first unescaped colon at most.
        return s;
    };
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ':' => return &s[..PREFIX.len() + i],
            _ => {}
        }
    }
    s
}
