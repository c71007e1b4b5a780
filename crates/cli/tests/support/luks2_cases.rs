//! cryptsetup's LUKS2 header validation suite, rebuilt in Rust: the 85 images of its
//! `tests/luks2-validation-test`, made by the rules of its `tests/generators/*.sh`, each
//! with cryptsetup's verdict (the header loads, or it is refused). Included with
//! `#[path = "support/luks2_cases.rs"] mod luks2_cases;` beside `mod support;`.
//!
//! Nothing is fetched: [`Gen::new`] builds a base image of the same shape as the suite's
//! `luks2_valid_hdr.img` (16 MiB; 16 KiB header copies; eight `luks2` keyslots of
//! 131072-byte areas from 32 KiB, keyslot 7 listed before 6; one crypt segment at 4 MiB;
//! one digest; `keyslots_size` 4161536; sequence id 10) with values of its own, and each
//! case edits it as its generator does: the JSON of the primary copy (`json0`) or of both,
//! binary header fields, checksums recomputed over the copy, and the other copy killed
//! (its magic overwritten with `VACUUM`) where the generator kills it. The keyslot areas
//! hold zeros: no case reads them. Images are written sparse.
//!
//! The generators' `T` cases (a token removed, then the header dumped) count as loads.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Size of every image.
pub const IMAGE: usize = 16 << 20;
/// The default header copy (binary header + JSON area).
const HDR: usize = 16 << 10;
const BIN: usize = 4096;
/// The default JSON area.
const JSON: usize = HDR - BIN;
/// Where the checksum lives in a binary header, and how long the field is.
const CSUM: std::ops::Range<usize> = 0x1c0..0x1c0 + 64;
const KILLED: &[u8; 6] = b"VACUUM";

/// What cryptsetup does with a case's image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `cryptsetup luksDump` loads it (exit 0).
    Load,
    /// `cryptsetup luksDump` refuses it.
    Refuse,
}

/// One image of the suite.
#[derive(Debug)]
pub struct Case {
    /// The generator's image name, without `luks2-` and `.img`.
    pub name: &'static str,
    /// cryptsetup's verdict.
    pub verdict: Verdict,
    /// For a refused image, the rule sectorcrypt must name.
    pub rule: &'static str,
    build: fn(&mut Gen),
}

impl Case {
    /// Writes the case's image to `path` (created; sparse).
    pub fn write(&self, path: &Path) {
        let mut g = Gen::new();
        (self.build)(&mut g);
        g.write(path);
    }
}

/// The image being built and the four pieces the generators work on: each copy's binary
/// header and JSON area as they were read from the base image.
pub struct Gen {
    img: Vec<u8>,
    hdr: [Vec<u8>; 2],
    json: [Vec<u8>; 2],
}

fn b64(seed: u64, len: usize) -> String {
    openssl::base64::encode_block(&sectorcrypt_testkit::pattern(len, seed))
}

/// The metadata of the base image.
fn base_json() -> Value {
    let mut keyslots = serde_json::Map::new();
    // Keyslots 0-5 in order, then 7 before 6, at the base image's offsets.
    for (n, id) in [0, 1, 2, 3, 4, 5, 7, 6].into_iter().enumerate() {
        keyslots.insert(
            id.to_string(),
            json!({
                "type": "luks2",
                "key_size": 32,
                "kdf": {"type": "argon2i", "time": 4, "memory": 32, "cpus": 1,
                        "salt": b64(100 + id, 32)},
                "af": {"type": "luks1", "hash": "sha256", "stripes": 4000},
                "area": {"type": "raw", "encryption": "aes-xts-plain64", "key_size": 32,
                         "offset": (32768 + 131072 * n).to_string(), "size": "131072"},
            }),
        );
    }
    json!({
        "keyslots": keyslots,
        "tokens": {},
        "segments": {"0": {"type": "crypt", "offset": "4194304", "iv_tweak": "0",
                           "size": "dynamic", "encryption": "aes-xts-plain64",
                           "sector_size": 512}},
        "digests": {"0": {"type": "pbkdf2",
                          "keyslots": ["0", "1", "2", "3", "4", "5", "7", "6"],
                          "segments": ["0"], "hash": "sha256", "iterations": 1000,
                          "salt": b64(200, 32), "digest": b64(201, 32)}},
        "config": {"json_size": "12288", "keyslots_size": "4161536"},
    })
}

/// A binary header: magic, version 2, size, sequence id, checksum algorithm, salt, UUID,
/// offset (checksum not yet set).
fn binary(secondary: bool) -> Vec<u8> {
    let mut b = vec![0u8; BIN];
    b[..6].copy_from_slice(if secondary {
        b"SKUL\xba\xbe"
    } else {
        b"LUKS\xba\xbe"
    });
    b[6..8].copy_from_slice(&2u16.to_be_bytes());
    b[8..16].copy_from_slice(&(HDR as u64).to_be_bytes());
    b[16..24].copy_from_slice(&10u64.to_be_bytes());
    b[72..78].copy_from_slice(b"sha256");
    b[104..168].copy_from_slice(&sectorcrypt_testkit::pattern(64, 300 + secondary as u64));
    b[168..204].copy_from_slice(b"5a8d3c1e-7b4f-4e2a-9c6d-0f1e2d3c4b5a");
    let at = if secondary { HDR as u64 } else { 0 };
    b[256..264].copy_from_slice(&at.to_be_bytes());
    b
}

/// `text` followed by NULs up to `size` bytes.
fn padded(text: &[u8], size: usize) -> Vec<u8> {
    let mut a = text.to_vec();
    a.resize(size, 0);
    a
}

/// The JSON text at the start of an area (up to its first NUL).
fn text_of(area: &[u8]) -> String {
    let end = area.iter().position(|&c| c == 0).unwrap_or(area.len());
    String::from_utf8(area[..end].to_vec()).expect("utf-8 json")
}

impl Gen {
    /// The base image, and its pieces as the generators read them.
    pub fn new() -> Gen {
        let mut g = Gen {
            img: vec![0u8; IMAGE],
            hdr: [binary(false), binary(true)],
            json: [Vec::new(), Vec::new()],
        };
        let text = serde_json::to_vec(&base_json()).unwrap();
        for which in 0..2 {
            g.json[which] = padded(&text, JSON);
            g.mangle(which, HDR, false);
        }
        g
    }

    /// The JSON of copy `which`.
    fn value(&self, which: usize) -> Value {
        serde_json::from_str(&text_of(&self.json[which])).unwrap()
    }

    /// Replaces the JSON area of copy `which`: `text` padded to `size` bytes.
    fn set_json(&mut self, which: usize, text: &[u8], size: usize) {
        self.json[which] = padded(text, size);
    }

    /// Writes `bytes` over the start of the JSON area of copy `which`, leaving the rest.
    fn overwrite_json(&mut self, which: usize, at: usize, bytes: &[u8]) {
        self.json[which][at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Copy `which` (`mda` bytes: its binary header and JSON area) with its checksum,
    /// optionally killed, written where it lives (0, or `mda` for the secondary).
    fn mangle(&mut self, which: usize, mda: usize, kill: bool) {
        let mut area = self.hdr[which].clone();
        area.extend_from_slice(&self.json[which][..mda - BIN]);
        area[CSUM].fill(0);
        let sum = openssl::sha::sha256(&area);
        area[CSUM.start..CSUM.start + 32].copy_from_slice(&sum);
        if kill {
            area[..6].copy_from_slice(KILLED);
        }
        let at = which * mda;
        self.img[at..at + mda].copy_from_slice(&area);
    }

    /// The primary rewritten from `json0`; the secondary's binary header killed.
    fn mangle0_kill1(&mut self) {
        self.mangle(0, HDR, false);
        self.hdr[1][..6].copy_from_slice(KILLED);
        self.img[HDR..HDR + BIN].copy_from_slice(&self.hdr[1]);
    }

    /// The primary's JSON edited by `f`, the secondary killed.
    fn edit0(&mut self, f: impl FnOnce(&mut Value)) {
        let mut v = self.value(0);
        f(&mut v);
        self.set_json(0, &serde_json::to_vec(&v).unwrap(), JSON);
        self.mangle0_kill1();
    }

    /// Both copies given the primary's JSON edited by `f`.
    fn edit_both(&mut self, f: impl FnOnce(&mut Value)) {
        let mut v = self.value(0);
        f(&mut v);
        let text = serde_json::to_vec(&v).unwrap();
        for which in 0..2 {
            self.set_json(which, &text, JSON);
            self.mangle(which, HDR, false);
        }
    }

    /// Sets the binary header field of copy `which` at `at` (size 8, offset 256).
    fn set_bin(&mut self, which: usize, at: usize, value: u64) {
        self.hdr[which][at..at + 8].copy_from_slice(&value.to_be_bytes());
    }

    /// Writes the image, sparse.
    pub fn write(&self, path: &Path) {
        let f = File::create(path).unwrap();
        f.set_len(IMAGE as u64).unwrap();
        for (i, chunk) in self.img.chunks(64 << 10).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                f.write_all_at(chunk, (i * (64 << 10)) as u64).unwrap();
            }
        }
    }
}

fn num(v: &Value) -> u64 {
    v.as_str().unwrap().parse().unwrap()
}

fn shift_areas(v: &mut Value, by: u64) {
    for ks in v["keyslots"].as_object_mut().unwrap().values_mut() {
        let off = num(&ks["area"]["offset"]) + by;
        ks["area"]["offset"] = off.to_string().into();
    }
}

/// Where the metadata-size generators put the data: 16 MiB.
const DATA_16M: u64 = 16 << 20;

/// A metadata-size image: both copies of `mda` bytes (binary sizes `sizes`; the
/// secondary's offset field set to `mda` when `secondary_offset`), keyslot areas moved
/// by `shift`, `json_size` and the data offset set, then `edit`; the primary killed when
/// `kill_primary`, else the secondary.
struct Resize {
    mda: usize,
    shift: u64,
    sizes: [u64; 2],
    secondary_offset: bool,
    kill_primary: bool,
}

fn resized(g: &mut Gen, r: Resize, edit: impl FnOnce(&mut Value, u64)) {
    let mut v = g.value(0);
    shift_areas(&mut v, r.shift);
    v["config"]["json_size"] = (r.mda - BIN).to_string().into();
    v["segments"]["0"]["offset"] = DATA_16M.to_string().into();
    edit(&mut v, 2 * r.mda as u64);
    let text = serde_json::to_vec(&v).unwrap();
    for which in 0..2 {
        g.set_json(which, &text, r.mda - BIN);
        g.set_bin(which, 8, r.sizes[which]);
    }
    if r.secondary_offset {
        g.set_bin(1, 256, r.mda as u64);
    }
    g.mangle(0, r.mda, r.kill_primary);
    g.mangle(1, r.mda, !r.kill_primary);
}

/// A valid image with copies of `mda` bytes; `secondary`: the primary killed instead.
fn metadata(g: &mut Gen, mda: usize, secondary: bool) {
    let r = Resize {
        mda,
        shift: 2 * (mda - HDR) as u64,
        sizes: [mda as u64; 2],
        secondary_offset: secondary,
        kill_primary: secondary,
    };
    resized(g, r, |_, _| {});
}

/// 64 KiB copies, the secondary killed, then `edit` (given `2 * mda`) and `shift`.
fn metadata_64k(g: &mut Gen, shift: u64, edit: impl FnOnce(&mut Value, u64)) {
    let mda = 64 << 10;
    let r = Resize {
        mda,
        shift,
        sizes: [mda as u64; 2],
        secondary_offset: false,
        kill_primary: false,
    };
    resized(g, r, edit);
}

/// 1 MiB copies where a binary header claims 2 GiB.
fn metadata_bogus(g: &mut Gen, secondary: bool) {
    let mda = 1 << 20;
    let bogus = (mda as u64) * 2 * 1024;
    let r = Resize {
        mda,
        shift: 2 * (mda - HDR) as u64,
        sizes: if secondary {
            [mda as u64, bogus]
        } else {
            [bogus, bogus]
        },
        secondary_offset: secondary,
        kill_primary: secondary,
    };
    resized(g, r, |_, _| {});
}

/// An arbitrary checksum (sha256 of a fixed string), as the checksum generators write.
fn bogus_checksum(text: &str) -> [u8; 32] {
    openssl::sha::sha256(text.as_bytes())
}

/// The JSON with `"config_key":"XXX..."` as the first field of `config`, filled so the
/// text is `len` bytes long.
fn with_config_filler(text: &str, len: usize) -> String {
    let pattern = "\"config\":{";
    let key = "\"config_key\":\"";
    let at = text.find(pattern).unwrap() + pattern.len();
    let comma = if text[at..].starts_with('}') { "" } else { "," };
    let fill = len - text.len() - key.len() - 1 - comma.len();
    format!(
        "{}{key}{}\"{comma}{}",
        &text[..at],
        "X".repeat(fill),
        &text[at..]
    )
}

/// The JSON text of the primary after `"type":"luks2"` gets `spaces` spaces, with an
/// empty token 0; written over the start of both JSON areas.
fn non_compact(g: &mut Gen, spaces: impl Fn(usize) -> usize) {
    let mut v = g.value(0);
    v["tokens"]["0"] = json!({"type": "a", "keyslots": []});
    let text = serde_json::to_string(&v).unwrap();
    let fill = " ".repeat(spaces(text.len()));
    let text = text.replacen(
        "\"type\":\"luks2\"",
        &format!("\"type\":{fill}\"luks2\""),
        1,
    );
    for which in 0..2 {
        g.overwrite_json(which, 0, text.as_bytes());
        g.mangle(which, HDR, false);
    }
}

/// The primary's JSON text `f(text)` written over the start of its area; secondary killed.
fn retext0(g: &mut Gen, f: impl FnOnce(&str) -> (usize, String)) {
    let text = text_of(&g.json[0]);
    let (at, bytes) = f(&text);
    g.overwrite_json(0, at, bytes.as_bytes());
    g.mangle0_kill1();
}

/// The JSON of copy `which` cut and filled with text up to the whole area (no NUL).
fn malformed(g: &mut Gen, which: usize) {
    let text = text_of(&g.json[which]);
    let mut s = format!("{},\"", &text[..text.len() - 1]);
    while s.len() <= JSON {
        s += "all_work_and_no_play_makes_Jack_a_dull_boy_";
    }
    g.overwrite_json(which, 0, &s.as_bytes()[..JSON]);
    g.mangle(which, HDR, false);
}

/// Sets `segments.0.FIELD` to `value` (or removes it when `None`) in the primary.
fn segment_field(g: &mut Gen, field: &str, value: Option<Value>) {
    g.edit0(|v| {
        let seg = v["segments"]["0"].as_object_mut().unwrap();
        match value {
            Some(x) => {
                seg.insert(field.into(), x);
            }
            None => {
                seg.remove(field);
            }
        }
    });
}

use Verdict::{Load, Refuse};

macro_rules! case {
    ($name:literal, $verdict:expr, $rule:literal, $build:expr) => {
        Case {
            name: $name,
            verdict: $verdict,
            rule: $rule,
            build: $build,
        }
    };
}

/// The 85 cases, in the order `luks2-validation-test` runs them.
pub const CASES: [Case; 85] = [
    // [1] auto-recovery
    case!("invalid-checksum-hdr0", Load, "", |g| {
        g.img[CSUM.start..CSUM.start + 32]
            .copy_from_slice(&bogus_checksum("Arbitrary chosen string: D'oh!\n"));
    }),
    case!("invalid-checksum-hdr1", Load, "", |g| {
        let at = HDR + CSUM.start;
        g.img[at..at + 32].copy_from_slice(&bogus_checksum("Arbitrary chosen string: D'oh!\n"));
    }),
    case!(
        "invalid-checksum-both-hdrs",
        Refuse,
        "luks2-checksum",
        |g| {
            g.img[CSUM.start..CSUM.start + 32]
                .copy_from_slice(&bogus_checksum("Arbitrary chosen string: D'oh!\n"));
            let at = HDR + CSUM.start;
            g.img[at..at + 32].copy_from_slice(&bogus_checksum("D'oh!: arbitrary chosen string\n"));
        }
    ),
    // [2] malformed JSON areas
    case!("corrupted-hdr0-with-correct-chks", Load, "", |g| malformed(
        g, 0
    )),
    case!("corrupted-hdr1-with-correct-chks", Load, "", |g| malformed(
        g, 1
    )),
    case!("correct-full-json0", Load, "", |g| {
        let text = with_config_filler(&text_of(&g.json[0]), JSON - 1);
        g.set_json(0, text.as_bytes(), JSON);
        g.mangle0_kill1();
    }),
    case!("argon2-leftover-params", Load, "", |g| {
        g.edit0(|v| {
            let kdf = &mut v["keyslots"]["1"]["kdf"];
            kdf["type"] = "pbkdf2".into();
            kdf["iterations"] = 1001.into();
            kdf["hash"] = "sha256".into();
        })
    }),
    case!("pbkdf2-leftover-params-0", Load, "", |g| {
        g.edit0(|v| {
            let kdf = &mut v["keyslots"]["2"]["kdf"];
            kdf["type"] = "argon2i".into();
            kdf["iterations"] = 1001.into();
            kdf["hash"] = "sha256".into();
        })
    }),
    case!("pbkdf2-leftover-params-1", Load, "", |g| {
        g.edit0(|v| {
            let kdf = &mut v["keyslots"]["2"]["kdf"];
            kdf["type"] = "argon2id".into();
            kdf["iterations"] = 1001.into();
            kdf["hash"] = "sha256".into();
        })
    }),
    // [3] JSON area restrictions (the secondary is always killed)
    case!(
        "non-null-byte-beyond-json0",
        Refuse,
        "luks2-json-trailing",
        |g| { retext0(g, |t| (0, format!("{t}X"))) }
    ),
    case!(
        "non-null-bytes-beyond-json0",
        Refuse,
        "luks2-json-trailing",
        |g| {
            let quote =
                "[Homer J. Simpson]: Keep looking shocked and move slowly towards the cake.";
            retext0(g, |t| (t.len() + 20, quote.to_string()))
        }
    ),
    case!(
        "missing-trailing-null-byte-json0",
        Refuse,
        "luks2-json-terminator",
        |g| {
            let text = with_config_filler(&text_of(&g.json[0]), JSON);
            g.set_json(0, text.as_bytes(), JSON);
            g.mangle0_kill1();
        }
    ),
    case!(
        "invalid-opening-char-json0",
        Refuse,
        "luks2-json-start",
        |g| { retext0(g, |t| (0, format!(" {t}"))) }
    ),
    case!(
        "invalid-object-type-json0",
        Refuse,
        "luks2-json-start",
        |g| { retext0(g, |t| (0, format!("[{t}]"))) }
    ),
    case!(
        "overlapping-areas-c0-json0",
        Refuse,
        "luks2-area-overlap",
        |g| { g.edit0(|v| v["keyslots"]["7"]["area"] = v["keyslots"]["6"]["area"].clone()) }
    ),
    case!(
        "overlapping-areas-c1-json0",
        Refuse,
        "luks2-area-overlap",
        |g| {
            g.edit0(|v| {
                let six = v["keyslots"]["6"]["area"].clone();
                let seven = &mut v["keyslots"]["7"]["area"];
                seven["offset"] = (num(&six["offset"]) + 1).to_string().into();
                seven["size"] = (num(&six["size"]) - 1).to_string().into();
            })
        }
    ),
    case!(
        "overlapping-areas-c2-json0",
        Refuse,
        "luks2-area-overlap",
        |g| {
            g.edit0(|v| {
                let six = v["keyslots"]["6"]["area"].clone();
                let end = num(&six["offset"]) + num(&six["size"]);
                v["keyslots"]["7"]["area"]["offset"] = (end - 1).to_string().into();
            })
        }
    ),
    case!(
        "area-in-json-hdr-space-json0",
        Refuse,
        "luks2-area-in-header",
        |g| {
            g.edit0(|v| {
                v["keyslots"]["0"]["area"]["offset"] = (2 * HDR - 1).to_string().into();
                v["keyslots"]["0"]["area"]["size"] = "1".into();
            })
        }
    ),
    case!(
        "missing-keyslot-referenced-in-digest",
        Refuse,
        "luks2-reference",
        |g| {
            g.edit0(|v| {
                let missing = max_key(&v["keyslots"]) + 1;
                let list = v["digests"]["0"]["keyslots"].as_array_mut().unwrap();
                list.push(missing.to_string().into());
            })
        }
    ),
    case!(
        "missing-segment-referenced-in-digest",
        Refuse,
        "luks2-reference",
        |g| {
            g.edit0(|v| {
                let missing = max_key(&v["segments"]) + 1;
                let list = v["digests"]["0"]["segments"].as_array_mut().unwrap();
                list.push(missing.to_string().into());
            })
        }
    ),
    case!(
        "missing-keyslot-referenced-in-token",
        Refuse,
        "luks2-reference",
        |g| {
            g.edit0(|v| {
                let missing = (max_key(&v["keyslots"]) + 1).to_string();
                v["tokens"]["0"] = json!({"type": "dummy", "keyslots": ["0", missing]});
            })
        }
    ),
    case!(
        "keyslot-missing-digest",
        Refuse,
        "luks2-keyslot-digest",
        |g| {
            g.edit0(|v| {
                v["digests"]["0"]["keyslots"]
                    .as_array_mut()
                    .unwrap()
                    .remove(0);
            })
        }
    ),
    case!(
        "keyslot-too-many-digests",
        Refuse,
        "luks2-keyslot-digest",
        |g| {
            g.edit0(|v| {
                let mut d = v["digests"]["0"].clone();
                d["keyslots"] = json!(["1"]);
                v["digests"]["1"] = d;
            })
        }
    ),
    // [4] integer limits
    case!("uint64-max-segment-size", Load, "", |g| {
        segment_field(g, "size", Some("18446744073709551104".into()))
    }),
    case!(
        "uint64-overflow-segment-size",
        Refuse,
        "luks2-uint64",
        |g| { segment_field(g, "size", Some("18446744073709551616".into())) }
    ),
    case!("uint64-signed-segment-size", Refuse, "luks2-uint64", |g| {
        segment_field(g, "size", Some("-512".into()))
    }),
    // [5] segments
    case!("segment-missing-type", Refuse, "luks2-segment", |g| {
        segment_field(g, "type", None)
    }),
    case!("segment-wrong-type", Refuse, "luks2-segment", |g| {
        segment_field(g, "type", Some(42.into()))
    }),
    case!("segment-missing-offset", Refuse, "luks2-segment", |g| {
        segment_field(g, "offset", None)
    }),
    case!("segment-wrong-offset", Refuse, "luks2-uint64", |g| {
        segment_field(g, "offset", Some("-42".into()))
    }),
    case!("segment-missing-size", Refuse, "luks2-segment", |g| {
        segment_field(g, "size", None)
    }),
    case!("segment-wrong-size-0", Refuse, "luks2-segment", |g| {
        segment_field(g, "size", Some(4096.into()))
    }),
    case!("segment-wrong-size-1", Refuse, "luks2-uint64", |g| {
        segment_field(g, "size", Some("automatic".into()))
    }),
    case!("segment-wrong-size-2", Refuse, "luks2-alignment", |g| {
        segment_field(g, "size", Some("511".into()))
    }),
    case!(
        "segment-crypt-missing-encryption",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "encryption", None) }
    ),
    case!(
        "segment-crypt-wrong-encryption",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "encryption", Some(json!({}))) }
    ),
    case!(
        "segment-crypt-missing-ivoffset",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "iv_tweak", None) }
    ),
    case!(
        "segment-crypt-wrong-ivoffset",
        Refuse,
        "luks2-uint64",
        |g| { segment_field(g, "iv_tweak", Some("dynamic".into())) }
    ),
    case!(
        "segment-crypt-missing-sectorsize",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "sector_size", None) }
    ),
    case!(
        "segment-crypt-wrong-sectorsize-0",
        Refuse,
        "luks2-alignment",
        |g| { segment_field(g, "sector_size", Some(1023.into())) }
    ),
    case!(
        "segment-crypt-wrong-sectorsize-1",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "sector_size", Some("4096".into())) }
    ),
    case!(
        "segment-crypt-wrong-sectorsize-2",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "sector_size", Some((-1024).into())) }
    ),
    case!("segment-unknown-type", Load, "", |g| {
        g.edit0(|v| {
            let s = v["segments"]["0"].clone();
            v["segments"]["0"] = json!({"type": "some_type", "offset": s["offset"],
                                        "size": s["size"], "a_field": 0});
        })
    }),
    case!("segment-two", Load, "", |g| {
        g.edit0(|v| {
            let off = num(&v["segments"]["0"]["offset"]) + 512;
            v["segments"]["0"]["size"] = "512".into();
            v["segments"]["1"] =
                json!({"type": "some", "offset": off.to_string(), "size": "dynamic"});
        })
    }),
    case!("segment-wrong-flags", Refuse, "luks2-segment", |g| {
        segment_field(g, "flags", Some("hello".into()))
    }),
    case!(
        "segment-wrong-flags-element",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "flags", Some(json!(["hello", 1]))) }
    ),
    case!(
        "segment-wrong-backup-key-0",
        Refuse,
        "luks2-segment-order",
        |g| {
            g.edit0(|v| {
                let key = (v["segments"].as_object().unwrap().len() + 1).to_string();
                v["segments"][key] = json!({"type": "linear", "offset": "512", "size": "512",
                                        "flags": ["backup-x"]});
            })
        }
    ),
    case!(
        "segment-wrong-backup-key-1",
        Refuse,
        "luks2-segment-order",
        |g| {
            g.edit0(|v| {
                let off = (num(&v["segments"]["0"]["offset"]) + 512).to_string();
                for i in 1..65 {
                    v["segments"][i.to_string()] =
                        json!({"type": "linear", "offset": off, "size": "512"});
                }
                v["segments"]["268435472"] = json!({"type": "linear", "offset": "512",
                                                "size": "512", "flags": ["backup-x"]});
            })
        }
    ),
    case!(
        "segment-crypt-empty-encryption",
        Refuse,
        "luks2-segment",
        |g| { segment_field(g, "encryption", Some("".into())) }
    ),
    // [6] metadata and keyslots sizes
    case!(
        "invalid-keyslots-size-c0",
        Refuse,
        "luks2-keyslots-size",
        |g| {
            g.edit0(|v| {
                let size = num(&v["segments"]["0"]["offset"]) - 2 * HDR as u64 + 4096;
                v["config"]["keyslots_size"] = size.to_string().into();
            })
        }
    ),
    case!(
        "invalid-keyslots-size-c1",
        Refuse,
        "luks2-keyslots-size",
        |g| {
            g.edit0(|v| {
                let size = num(&v["config"]["keyslots_size"]) - 1;
                v["config"]["keyslots_size"] = size.to_string().into();
            })
        }
    ),
    case!(
        "invalid-keyslots-size-c2",
        Refuse,
        "luks2-area-bounds",
        |g| {
            g.edit0(|v| {
                let areas: u64 = v["keyslots"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|k| num(&k["area"]["size"]))
                    .sum();
                v["config"]["keyslots_size"] = (areas - 4096).to_string().into();
            })
        }
    ),
    case!("invalid-json-size-c0", Refuse, "luks2-metadata-size", |g| {
        g.edit0(|v| v["config"]["json_size"] = (JSON + 4096).to_string().into())
    }),
    case!("invalid-json-size-c1", Refuse, "luks2-metadata-size", |g| {
        g.edit0(|v| v["config"]["json_size"] = (JSON - 4096).to_string().into())
    }),
    case!("invalid-json-size-c2", Refuse, "luks2-metadata-size", |g| {
        let mda = 32 << 10;
        let text = text_of(&g.json[0]).into_bytes();
        for which in 0..2 {
            g.set_json(which, &text, mda - BIN);
            g.set_bin(which, 8, mda as u64);
        }
        g.set_bin(1, 256, mda as u64);
        g.mangle(0, mda, false);
        g.mangle(1, mda, false);
    }),
    case!("metadata-size-32k", Load, "", |g| metadata(
        g,
        32 << 10,
        false
    )),
    case!("metadata-size-64k", Load, "", |g| metadata(
        g,
        64 << 10,
        false
    )),
    case!(
        "metadata-size-64k-inv-area-c0",
        Refuse,
        "luks2-area-in-header",
        |g| { metadata_64k(g, 2 * (48 << 10) - 1, |_, _| {}) }
    ),
    case!(
        "metadata-size-64k-inv-area-c1",
        Refuse,
        "luks2-area-bounds",
        |g| {
            metadata_64k(g, 2 * (48 << 10), |v, mda2| {
                let seven = &v["keyslots"]["7"]["area"];
                let off = num(&v["config"]["keyslots_size"]) + mda2 - num(&seven["size"]) + 1;
                v["keyslots"]["7"]["area"]["offset"] = off.to_string().into();
            })
        }
    ),
    case!(
        "metadata-size-64k-inv-keyslots-size-c0",
        Refuse,
        "luks2-keyslots-size",
        |g| {
            metadata_64k(g, 2 * (48 << 10), |v, mda2| {
                let size = DATA_16M - mda2 + 4096;
                v["config"]["keyslots_size"] = size.to_string().into();
            })
        }
    ),
    case!("metadata-size-128k", Load, "", |g| metadata(
        g,
        128 << 10,
        false
    )),
    case!("metadata-size-256k", Load, "", |g| metadata(
        g,
        256 << 10,
        false
    )),
    case!("metadata-size-512k", Load, "", |g| metadata(
        g,
        512 << 10,
        false
    )),
    case!("metadata-size-1m", Load, "", |g| metadata(
        g,
        1 << 20,
        false
    )),
    case!("metadata-size-2m", Load, "", |g| metadata(
        g,
        2 << 20,
        false
    )),
    case!("metadata-size-4m", Load, "", |g| metadata(
        g,
        4 << 20,
        false
    )),
    case!("metadata-size-16k-secondary", Load, "", |g| metadata(
        g,
        16 << 10,
        true
    )),
    case!("metadata-size-32k-secondary", Load, "", |g| metadata(
        g,
        32 << 10,
        true
    )),
    case!("metadata-size-64k-secondary", Load, "", |g| metadata(
        g,
        64 << 10,
        true
    )),
    case!("metadata-size-128k-secondary", Load, "", |g| metadata(
        g,
        128 << 10,
        true
    )),
    case!("metadata-size-256k-secondary", Load, "", |g| metadata(
        g,
        256 << 10,
        true
    )),
    case!("metadata-size-512k-secondary", Load, "", |g| metadata(
        g,
        512 << 10,
        true
    )),
    case!("metadata-size-1m-secondary", Load, "", |g| metadata(
        g,
        1 << 20,
        true
    )),
    case!("metadata-size-2m-secondary", Load, "", |g| metadata(
        g,
        2 << 20,
        true
    )),
    case!("metadata-size-4m-secondary", Load, "", |g| metadata(
        g,
        4 << 20,
        true
    )),
    case!("metadata-size-invalid", Refuse, "luks2-header-size", |g| {
        metadata_bogus(g, false)
    }),
    case!(
        "metadata-size-invalid-secondary",
        Refuse,
        "luks2-header-size",
        |g| { metadata_bogus(g, true) }
    ),
    // [7] invalid object properties (both copies)
    case!("invalid-tokens", Refuse, "luks2-section", |g| {
        g.edit_both(|v| v["tokens"] = 42.into())
    }),
    case!("invalid-top-objects", Refuse, "luks2-section", |g| {
        g.edit_both(|v| {
            v["tokens"] = 42.into();
            v["digests"] = 42.into();
            v["keyslots"] = json!([]);
            v["segments"] = "hi".into();
        })
    }),
    case!("keyslot-invalid-area", Refuse, "luks2-keyslot", |g| {
        g.edit_both(|v| v["keyslots"]["0"]["area"] = 42.into())
    }),
    case!(
        "keyslot-invalid-area-size",
        Refuse,
        "luks2-area-bounds",
        |g| { g.edit_both(|v| v["keyslots"]["0"]["area"]["size"] = "18446744073709551615".into()) }
    ),
    case!("keyslot-invalid-objects", Refuse, "luks2-keyslot", |g| {
        g.edit_both(|v| {
            v["keyslots"]["0"]["kdf"] = 42.into();
            v["keyslots"]["0"]["af"] = 42.into();
        })
    }),
    case!("keyslot-invalid-af", Refuse, "luks2-keyslot", |g| {
        g.edit_both(|v| v["keyslots"]["0"]["af"]["type"] = 42.into())
    }),
    // [8] non-compact JSON (cryptsetup removes a token, then dumps)
    case!("non-compact-json-token-0", Load, "", |g| non_compact(
        g,
        |_| 1
    )),
    case!("non-compact-json-4k-token-0", Load, "", |g| {
        non_compact(g, |len| 4096 - len % 4096)
    }),
];

/// The largest numeric key of a JSON object (jq's `keys | max | tonumber`).
fn max_key(v: &Value) -> u64 {
    v.as_object()
        .unwrap()
        .keys()
        .max()
        .unwrap()
        .parse()
        .unwrap()
}

/// Edits the metadata of both 16 KiB header copies of the LUKS2 image `path` (a volume
/// made here) with `edit`, checksums recomputed.
pub fn edit_copies(path: &Path, edit: impl Fn(&mut Value)) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    for at in [0, HDR] {
        let mut copy = vec![0u8; HDR];
        f.read_exact_at(&mut copy, at as u64).unwrap();
        let mut v: Value = serde_json::from_str(&text_of(&copy[BIN..])).unwrap();
        edit(&mut v);
        let text = serde_json::to_vec(&v).unwrap();
        copy[BIN..].copy_from_slice(&padded(&text, JSON));
        copy[CSUM].fill(0);
        let sum = openssl::sha::sha256(&copy);
        copy[CSUM.start..CSUM.start + 32].copy_from_slice(&sum);
        f.write_all_at(&copy, at as u64).unwrap();
    }
}
