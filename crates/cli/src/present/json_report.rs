//! The JSON that `dump --json=common` and `test-key --json` print (docs/JSON.md lists
//! every field). Nothing secret goes in: no key, no passphrase; the metadata document is
//! what `dump --json` prints (LUKS2's as cryptsetup's `luksDump --dump-json-metadata`).

use crate::failure::Failure;
use sectorcrypt_volume::{Header, Store};
use serde_json::{json, Value};
use std::path::Path;

/// The fields every format shares, with the format's own document under `metadata`.
/// Where the data is (`cipher` .. `size`) is null when the image is too short for the
/// data area the header names.
pub fn common(h: &Header, data: &dyn Store) -> Value {
    let info = h.volume_info(data).ok();
    let keyslots: Vec<Value> = h
        .active_keyslots()
        .unwrap_or_default()
        .into_iter()
        .map(|slot| json!({ "slot": slot, "kdf": h.keyslot_kdf(slot).ok().map(|k| k.to_json()) }))
        .collect();
    json!({
        "format": h.name(),
        "uuid": h.uuid(),
        "cipher": info.as_ref().map(|i| &i.cipher),
        "sector_size": info.as_ref().map(|i| i.sector_size),
        "data_offset": info.as_ref().map(|i| i.data_offset),
        "size": info.as_ref().map(|i| i.data_size),
        "keyslots": keyslots,
        "metadata": h.to_json(),
    })
}

/// [`common`] for a header that was refused: every field null but the metadata as
/// found (null when none could be read).
pub fn refused(metadata: Option<&Value>) -> Value {
    json!({
        "format": null,
        "uuid": null,
        "cipher": null,
        "sector_size": null,
        "data_offset": null,
        "size": null,
        "keyslots": [],
        "metadata": metadata,
    })
}

/// `test-key --json`: the keyslot that opened `image`, or why none did, with the exit
/// code the command ends with.
pub fn test_key(image: &Path, opened: Result<usize, &Failure>) -> Value {
    let (keyslot, error, code) = match opened {
        Ok(slot) => (Some(slot), None, 0),
        Err(f) => (None, Some(f.message()), f.exit_code()),
    };
    json!({
        "image": crate::present::locator::redacted(image),
        "opened": keyslot.is_some(),
        "keyslot": keyslot,
        "error": error,
        "exit_code": code,
    })
}
