//! The regular segments of a reencryption, as cryptsetup (2.6) writes them: before
//! a hotzone (the "hot" segments, the hotzone flagged `in-reencryption`) and after it (the
//! "post" segments). The backup segments never change; the digests list the segments
//! under their key (the hotzone under both).
//!
//! With the data under the new key up to `done` bytes and the hotzone `[done, done +
//! len)`, the hot segments are: the new layout's `[0, done)` (when not empty), the hotzone
//! (the new layout's cut, flagged), and the old layout's rest (when not empty, to the end:
//! `dynamic` when the old layout is). The post segments are the new layout's `[0, done +
//! len)` and the old layout's rest; after the last hotzone the new layout's whole segment
//! alone (which sectorcrypt never writes: see `rekey.rs`).

use super::super::json::{corrupt, str_of, u64_str};
use crate::error::Result;
use serde_json::{Map, Value};

/// Under which key a regular segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Under {
    Old,
    New,
    /// The hotzone: under both digests while it is rewritten.
    Hot,
}

/// The segment of layout `template` (a backup segment) cut to the data bytes `[from,
/// from + len)`; `len` `None`: to the end, `dynamic` when the template is.
pub(super) fn cut(template: &Value, from: u64, len: Option<u64>) -> Result<Value> {
    let path = "segments.backup.";
    let mut seg = template.clone();
    let map = seg
        .as_object_mut()
        .ok_or_else(|| corrupt("json: a backup segment is not an object"))?;
    map.remove("flags");
    let offset = u64_str(template, "offset", path)?;
    map.insert("offset".into(), Value::String((offset + from).to_string()));
    let size = match (len, template["size"].as_str()) {
        (Some(n), _) => n.to_string(),
        (None, Some("dynamic")) => "dynamic".into(),
        (None, _) => {
            let whole = u64_str(template, "size", path)?;
            whole
                .checked_sub(from)
                .ok_or_else(|| corrupt("json: a backup segment is shorter than the progress"))?
                .to_string()
        }
    };
    map.insert("size".into(), Value::String(size));
    if str_of(template, "type", path)? == "crypt" {
        let iv = u64_str(template, "iv_tweak", path)?;
        map.insert(
            "iv_tweak".into(),
            Value::String((iv + from / 512).to_string()),
        );
    }
    Ok(seg)
}

/// The regular segments of a forward reencryption: `done` bytes under the new key, then
/// the hotzone of `hot` bytes when given (0: none), then the rest under the old key, of a
/// data area of `total` bytes.
pub(super) fn forward(
    json: &Value,
    done: u64,
    hot: u64,
    total: u64,
) -> Result<Vec<(Value, Under)>> {
    let (_, old) = super::flagged_segment(json, "backup-previous")?
        .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
    let (_, new) = super::flagged_segment(json, "backup-final")?
        .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
    let mut out = Vec::new();
    let end = done + hot;
    if end >= total && hot == 0 {
        out.push((cut(new, 0, None)?, Under::New));
        return Ok(out);
    }
    if done > 0 {
        out.push((cut(new, 0, Some(done))?, Under::New));
    }
    if hot > 0 {
        let mut seg = cut(new, done, Some(hot))?;
        seg["flags"] = Value::Array(vec![Value::String("in-reencryption".into())]);
        out.push((seg, Under::Hot));
    }
    if end < total {
        out.push((cut(old, end, None)?, Under::Old));
    }
    Ok(out)
}

/// The regular segments of a backward reencryption (cryptsetup's decryption with a
/// detached header): the hotzones go from the end to the start, so the old layout comes
/// first. `done` bytes at the end are under the new key, the hotzone of `hot` bytes
/// (0: none) is just before them, the old layout's start before that.
pub(super) fn backward(
    json: &Value,
    done: u64,
    hot: u64,
    total: u64,
) -> Result<Vec<(Value, Under)>> {
    let (_, old) = super::flagged_segment(json, "backup-previous")?
        .ok_or_else(|| corrupt("json: no segment is flagged backup-previous"))?;
    let (_, new) = super::flagged_segment(json, "backup-final")?
        .ok_or_else(|| corrupt("json: no segment is flagged backup-final"))?;
    let start = total
        .checked_sub(done + hot)
        .ok_or_else(|| corrupt("json: the progress is past the data area"))?;
    let mut out = Vec::new();
    if start > 0 {
        // Nothing done yet: the old layout as it was (`dynamic` when it is).
        let len = (done + hot > 0).then_some(start);
        out.push((cut(old, 0, len)?, Under::Old));
    }
    if hot > 0 {
        let mut seg = cut(new, start, Some(hot))?;
        seg["flags"] = Value::Array(vec![Value::String("in-reencryption".into())]);
        out.push((seg, Under::Hot));
    }
    if done > 0 {
        out.push((cut(new, start + hot, None)?, Under::New));
    }
    Ok(out)
}

/// Replaces the regular segments of `json` by `regular` (ids from 0, in order), the
/// backup segments after them, and lists each segment in the digest of its key (the
/// hotzone first, then the others by id, then the backup), as cryptsetup does.
pub(super) fn install(json: &mut Value, regular: Vec<(Value, Under)>) -> Result<()> {
    let mut backups = Vec::new();
    for flag in ["backup-previous", "backup-final", "backup-moved-segment"] {
        if let Some((id, seg)) = super::flagged_segment(json, flag)? {
            backups.push((flag, super::digest_of_segment(json, id)?, seg.clone()));
        }
    }
    let old_digest = backups
        .iter()
        .find(|b| b.0 == "backup-previous")
        .and_then(|b| b.1.clone());
    let new_digest = backups
        .iter()
        .find(|b| b.0 == "backup-final")
        .and_then(|b| b.1.clone());
    let mut segments = Map::new();
    let mut lists: Vec<(Option<String>, Vec<String>)> = vec![
        (old_digest.clone(), Vec::new()),
        (new_digest.clone(), Vec::new()),
    ];
    let mut hot_id = None;
    for (n, (seg, under)) in regular.into_iter().enumerate() {
        let id = n.to_string();
        match under {
            Under::Old => lists[0].1.push(id.clone()),
            Under::New => lists[1].1.push(id.clone()),
            Under::Hot => hot_id = Some(id.clone()),
        }
        segments.insert(id, seg);
    }
    for (next, (flag, _, seg)) in (segments.len()..).zip(backups.iter()) {
        let id = next.to_string();
        match *flag {
            "backup-previous" => lists[0].1.push(id.clone()),
            "backup-final" => lists[1].1.push(id.clone()),
            // A decryption's moved segment is still under the old key (an encryption's
            // is plaintext: no digest).
            _ if seg["type"] == "crypt" => lists[0].1.push(id.clone()),
            _ => {}
        }
        segments.insert(id, seg.clone());
    }
    // The hotzone is under both keys; a plaintext one (a decryption's) under none.
    if let Some(h) = hot_id.filter(|h| segments[h]["type"].as_str() == Some("crypt")) {
        for list in &mut lists {
            list.1.insert(0, h.clone());
        }
    }
    json["segments"] = Value::Object(segments);
    let digests = json["digests"]
        .as_object_mut()
        .ok_or_else(|| corrupt("json: digests is not an object"))?;
    for d in digests.values_mut() {
        d["segments"] = Value::Array(Vec::new());
    }
    // In encrypt and decrypt modes one layout has no digest: its segments are linear.
    for (digest, ids) in lists {
        let Some(digest) = digest else { continue };
        let d = digests
            .get_mut(&digest)
            .ok_or_else(|| corrupt(format!("json: digest {digest} is missing")))?;
        d["segments"] = Value::Array(ids.into_iter().map(Value::String).collect());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::super::json::obj;
    use super::*;
    use serde_json::json;

    fn meta() -> Value {
        let seg = |flag: &str, cipher: &str| {
            json!({"type":"crypt","offset":"2097152","size":"dynamic","iv_tweak":"0",
                   "encryption":cipher,"sector_size":4096,"flags":[flag]})
        };
        json!({
            "segments": {
                "0": {"type":"crypt","offset":"2097152","size":"dynamic","iv_tweak":"0",
                      "encryption":"aes-xts-plain64","sector_size":4096},
                "1": seg("backup-previous", "aes-xts-plain64"),
                "2": seg("backup-final", "aes-cbc-essiv:sha256"),
            },
            "digests": {
                "0": {"keyslots":["0"],"segments":["0","1"]},
                "1": {"keyslots":["1"],"segments":["2"]},
                "2": {"keyslots":["2"],"segments":[]},
            }
        })
    }

    fn summary(json: &Value) -> Vec<(String, String, String, String, bool)> {
        obj(json, "segments", "")
            .unwrap()
            .iter()
            .map(|(id, s)| {
                (
                    id.clone(),
                    s["offset"].as_str().unwrap().into(),
                    s["size"].as_str().unwrap().into(),
                    s["iv_tweak"].as_str().unwrap().into(),
                    s["flags"].is_array(),
                )
            })
            .collect()
    }

    /// The hot and post segments of the second of three 8 MiB hotzones of an 18 MiB
    /// data area, as cryptsetup 2.6.1 wrote them (captured with strace from `cryptsetup
    /// reencrypt --hotzone-size 8M` on a 20 MiB image).
    #[test]
    fn second_hotzone_is_laid_out_as_cryptsetup_does() {
        let mib = 1 << 20;
        let mut json = meta();
        let regular = forward(&json, 8 * mib, 8 * mib, 18 * mib).unwrap();
        install(&mut json, regular).unwrap();
        let s = |a: &str, b: &str, c: &str, d: &str, e| (a.into(), b.into(), c.into(), d.into(), e);
        assert_eq!(
            summary(&json),
            vec![
                s("0", "2097152", "8388608", "0", false),
                s("1", "10485760", "8388608", "16384", true),
                s("2", "18874368", "dynamic", "32768", false),
                s("3", "2097152", "dynamic", "0", true),
                s("4", "2097152", "dynamic", "0", true),
            ]
        );
        assert_eq!(json["digests"]["0"]["segments"], json!(["1", "2", "3"]));
        assert_eq!(json["digests"]["1"]["segments"], json!(["1", "0", "4"]));
        assert_eq!(json["digests"]["2"]["segments"], json!([]));
        assert_eq!(json["segments"]["1"]["encryption"], "aes-cbc-essiv:sha256");
        assert_eq!(json["segments"]["2"]["encryption"], "aes-xts-plain64");

        // After it: new [0, 16 MiB), old from there on.
        let regular = forward(&json, 16 * mib, 0, 18 * mib).unwrap();
        install(&mut json, regular).unwrap();
        assert_eq!(
            summary(&json),
            vec![
                s("0", "2097152", "16777216", "0", false),
                s("1", "18874368", "dynamic", "32768", false),
                s("2", "2097152", "dynamic", "0", true),
                s("3", "2097152", "dynamic", "0", true),
            ]
        );
        assert_eq!(json["digests"]["0"]["segments"], json!(["1", "2"]));
        assert_eq!(json["digests"]["1"]["segments"], json!(["0", "3"]));

        // The last hotzone has an explicit size and nothing after it; then one segment.
        let regular = forward(&json, 16 * mib, 2 * mib, 18 * mib).unwrap();
        install(&mut json, regular).unwrap();
        assert_eq!(json["segments"]["1"]["size"], "2097152");
        assert_eq!(json["segments"].as_object().unwrap().len(), 4);
        let regular = forward(&json, 18 * mib, 0, 18 * mib).unwrap();
        install(&mut json, regular).unwrap();
        assert_eq!(summary(&json)[0], s("0", "2097152", "dynamic", "0", false));
        assert_eq!(json["digests"]["1"]["segments"], json!(["0", "2"]));
        assert_eq!(json["digests"]["0"]["segments"], json!(["1"]));
    }
}
