//! The tables: the formats volumes are made in ([`FORMATS`]) and the header-changing
//! operations ([`OPERATIONS`]), each of which builds its state before (on an image of
//! one format) and says what opens before and after. A new format is one entry in
//! [`FORMATS`]; a new operation, or a new starting state of one, is one entry in
//! [`OPERATIONS`]. Operations go through the format-neutral [`Header`] API, so they run on
//! every format; one that needs a format's own damage returns `None` for the others.

use crate::check::{Outcome, Pass, Prepared};
use crate::cut::CutStore;
use sectorcrypt_testkit::pattern;
use sectorcrypt_volume::formats;
use sectorcrypt_volume::geli::{self, init::InitOptions};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::KdfOptions;
use sectorcrypt_volume::luks::{self, FormatOptions, Version};
use sectorcrypt_volume::{backup_header, restore_header, Error, FileStore, Header, Result, Store};

pub const A: Pass = Pass("passphrase-A");
pub const B: Pass = Pass("passphrase-B");
pub const C: Pass = Pass("passphrase-C");
pub const D: Pass = Pass("passphrase-D");
/// Passphrases that fill the remaining keyslots of a volume.
const FILL: [Pass; 7] = [
    Pass("fill-1"),
    Pass("fill-2"),
    Pass("fill-3"),
    Pass("fill-4"),
    Pass("fill-5"),
    Pass("fill-6"),
    Pass("fill-7"),
];

/// Bytes of data after the metadata.
const DATA: u64 = 64 << 10;
/// Where the data starts: LUKS1's fixed layout for a 512-bit key, and the LUKS2 volumes
/// here (room for seven keyslot areas).
const DATA_OFFSET: u64 = 2 << 20;

/// Where LUKS1's eight 48-byte keyslot entries start (each: state, iterations, salt,
/// material offset in sectors at +40, stripes).
const LUKS1_SLOTS: u64 = 208;

/// PBKDF2 at cryptsetup's minimum cost: every image is opened many times.
pub fn fast() -> KdfOptions {
    KdfOptions {
        force_iterations: Some(1000),
        ..KdfOptions::pbkdf2(HashAlg::Sha256)
    }
}

/// A format volumes are made in.
#[derive(Debug)]
pub struct Kind {
    pub name: &'static str,
    /// Formats `store` with keyslot 0 for `pass`.
    pub create: fn(&dyn Store, Pass) -> Result<()>,
    /// Whether the header has two copies, one of which `repair` rebuilds from the other.
    pub two_copies: bool,
    /// How many keyslots a volume made here can hold.
    pub keyslots: usize,
    /// Where the data starts.
    pub data_offset: u64,
    /// Where the header lies: (offset from the start, or from the end when negative;
    /// length).
    pub header: (i64, u64),
    /// What `erase` leaves: a header that opens with nothing (LUKS), or none at all
    /// (GELI's kill overwrites its metadata).
    pub erased: fn() -> Outcome,
}

fn luks_options(version: Version) -> FormatOptions {
    FormatOptions {
        version,
        kdf: fast(),
        data_offset: (version == Version::Luks2).then_some(DATA_OFFSET),
        ..FormatOptions::default()
    }
}

pub const FORMATS: &[Kind] = &[
    Kind {
        name: "luks1",
        create: |s, p| luks::format(s, &luks_options(Version::Luks1), p.bytes(), None).map(drop),
        two_copies: false,
        keyslots: 8,
        data_offset: DATA_OFFSET,
        header: (0, 64 << 10),
        erased: || Outcome::Opens(Vec::new()),
    },
    Kind {
        name: "luks2",
        create: |s, p| luks::format(s, &luks_options(Version::Luks2), p.bytes(), None).map(drop),
        two_copies: true,
        keyslots: 7,
        data_offset: DATA_OFFSET,
        header: (0, 64 << 10),
        erased: || Outcome::Opens(Vec::new()),
    },
    Kind {
        name: "geli",
        create: |s, p| {
            let opts = InitOptions {
                iterations: Some(1000),
                ..InitOptions::default()
            };
            geli::init::init(s, &opts, &[], p.bytes()).map(drop)
        },
        two_copies: false,
        keyslots: 2,
        data_offset: 0,
        header: (-512, 512),
        erased: || Outcome::Absent,
    },
];

/// An operation and the state it starts from.
#[derive(Debug)]
pub struct Operation {
    /// The operation, then the state before.
    pub name: &'static str,
    /// Builds the state and the operation; `None` when it does not apply to the format.
    pub prepare: fn(&Kind) -> Option<Prepared>,
}

/// A volume of `kind` opening with `passes` (keyslot 0 first) and its data area filled
/// with a known plaintext.
fn volume(kind: &Kind, passes: &[Pass]) -> (CutStore, Vec<u8>) {
    let store = CutStore::new(vec![0; (DATA_OFFSET + DATA) as usize], None);
    (kind.create)(&store, passes[0]).unwrap();
    let mut h = Header::read(&store).unwrap();
    let u = h.unlock(&store, passes[0].bytes()).unwrap();
    for p in &passes[1..] {
        h.add_key(&store, &u, p.bytes(), &fast(), None).unwrap();
    }
    let plain = pattern(DATA as usize, 13);
    let mut enc = plain.clone();
    u.layout().unwrap().encrypt(0, &mut enc).unwrap();
    store.write_at(&enc, u.data_offset).unwrap();
    (store, plain)
}

/// The operation `run` on the state of `store` (a volume of `kind`), from `before` to
/// `after`.
fn prepared(
    kind: &Kind,
    store: &CutStore,
    plain: Vec<u8>,
    before: Outcome,
    after: Outcome,
    run: impl Fn(&dyn Store) -> Result<()> + 'static,
) -> Prepared {
    Prepared {
        image: store.bytes(),
        before,
        after,
        also: Vec::new(),
        again: false,
        data_offset: kind.data_offset,
        data_len: DATA,
        before_again: false,
        plaintext: Some(plain),
        run: Box::new(run),
        _keep: None,
        hints: Default::default(),
        memo: Default::default(),
    }
}

/// `run` on a volume of `kind` opening with A and C, leaving a volume opening with
/// exactly `after`.
fn on_a_and_c(
    kind: &Kind,
    after: &[Pass],
    run: impl Fn(&dyn Store) -> Result<()> + 'static,
) -> Option<Prepared> {
    let (store, plain) = volume(kind, &[A, C]);
    Some(prepared(
        kind,
        &store,
        plain,
        opens(&[A, C]),
        opens(after),
        run,
    ))
}

fn opens(p: &[Pass]) -> Outcome {
    Outcome::Opens(p.to_vec())
}

/// Header::change_key as the CLI calls it.
fn change(store: &dyn Store, old: Pass, new: Pass) -> Result<()> {
    Header::read(store)?
        .change_key(store, old.bytes(), new.bytes(), &fast(), None)
        .map(drop)
}

/// A header backup of `store` in a new directory.
fn backup(store: &CutStore) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("header.bak");
    backup_header(store, &path).unwrap();
    (dir, path)
}

/// A way to restore a header backup (`backup`) onto an image.
pub type Restore = fn(&dyn Store, &dyn Store) -> Result<()>;

/// `header restore` as the CLI runs it.
fn restore(image: &dyn Store, backup: &dyn Store) -> Result<()> {
    restore_header(image, backup).map(drop)
}

/// The backup's pieces copied in the format's order, each synced before the next, with
/// nothing held back: the order that overwrites the current header's keyslot areas
/// before the backup's header is in place, which the harness must catch.
pub fn restore_in_piece_order(image: &dyn Store, backup: &dyn Store) -> Result<()> {
    let io = |e| Error::io("header restore in piece order", e);
    let h = Header::read(backup)?;
    for piece in h.format().backup_pieces(image.size().map_err(io)?) {
        let mut buf = vec![0u8; piece.len as usize];
        backup.read_at(&mut buf, piece.backup).map_err(io)?;
        image.write_at(&buf, piece.image).map_err(io)?;
        image.sync().map_err(io)?;
    }
    Ok(())
}

/// `header restore` (by `how`) of the backup `file` onto a state built after the backup
/// was taken.
fn restoring(
    kind: &Kind,
    store: &CutStore,
    plain: Vec<u8>,
    (before, after): (Outcome, Outcome),
    (dir, file): (tempfile::TempDir, std::path::PathBuf),
    how: Restore,
) -> Prepared {
    let mut p = prepared(kind, store, plain, before, after, move |s| {
        let backup = FileStore::open(&file, false).unwrap();
        how(s, &backup)?;
        // Complete, the restore leaves the backup's bytes in every piece.
        let h = Header::read(&backup).unwrap();
        for piece in h.format().backup_pieces(s.size().unwrap()) {
            let mut want = vec![0u8; piece.len as usize];
            backup.read_at(&mut want, piece.backup).unwrap();
            let mut got = vec![0u8; piece.len as usize];
            s.read_at(&mut got, piece.image).unwrap();
            if got != want {
                return Err(Error::invalid(format!("restored bytes differ: {piece:?}")));
            }
        }
        Ok(())
    });
    p._keep = Some(dir);
    p
}

/// A volume opening with `first`, a header backup taken of it, `then` done to it (after
/// which `before` opens), and the restore (by `how`) of the backup: `first` opens after.
fn restore_after(
    kind: &Kind,
    first: &[Pass],
    then: impl FnOnce(&CutStore),
    before: &[Pass],
    how: Restore,
) -> Prepared {
    let (store, plain) = volume(kind, first);
    let saved = backup(&store);
    then(&store);
    restoring(
        kind,
        &store,
        plain,
        (opens(before), opens(first)),
        saved,
        how,
    )
}

/// A volume opening with A and C whose passphrase A was changed to B after a header
/// backup was taken, and the restore (by `how`) of that backup: B and C open before, A
/// and C after.
pub fn restore_after_change_key(kind: &Kind, how: Restore) -> Prepared {
    restore_after(kind, &[A, C], |s| change(s, A, B).unwrap(), &[B, C], how)
}

/// `repair` of a volume opening with A and C whose copy is damaged by `damage`.
fn repairing(kind: &Kind, damage: impl FnOnce(&CutStore)) -> Option<Prepared> {
    if !kind.two_copies {
        return None;
    }
    let (store, plain) = volume(kind, &[A, C]);
    damage(&store);
    let h = Header::read(&store).unwrap();
    assert!(h.needs_repair(), "the damage left nothing to repair");
    Some(prepared(
        kind,
        &store,
        plain,
        opens(&[A, C]),
        opens(&[A, C]),
        |s| formats::repair_header(s).map(drop),
    ))
}

/// The size of one header copy of a two-copy header.
fn copy_size(store: &CutStore) -> u64 {
    let h = Header::read(store).unwrap();
    h.to_json()["config"]["json_size"]
        .as_str()
        .and_then(|s| s.parse::<u64>().ok())
        .expect("a luks2 json size")
        + 4096
}

/// `convert` of a LUKS volume of `kind` opening with `passes` to the other LUKS version:
/// the same passphrases open it before, after and at every cut.
fn converting(kind: &Kind, passes: &[Pass]) -> Option<Prepared> {
    let to = match kind.name {
        "luks1" => Version::Luks2,
        "luks2" => Version::Luks1,
        _ => return None,
    };
    let (store, plain) = volume(kind, passes);
    Some(prepared(
        kind,
        &store,
        plain,
        opens(passes),
        opens(passes),
        move |s| {
            luks::convert::convert(s, &Header::read(s)?, to)?;
            let h = Header::read(s)?;
            assert_eq!(h.name(), to.name(), "converted to the wrong version");
            Ok(())
        },
    ))
}

pub const OPERATIONS: &[Operation] = &[
    Operation {
        name: "format a blank image",
        prepare: |kind| {
            let store = CutStore::new(vec![0; (DATA_OFFSET + DATA) as usize], None);
            let raw = pattern(DATA as usize, 7);
            store.write_at(&raw, kind.data_offset).unwrap();
            let create = kind.create;
            let mut p = prepared(kind, &store, raw, Outcome::Absent, opens(&[A]), move |s| {
                create(s, A)
            });
            p.plaintext = None;
            Some(p)
        },
    },
    Operation {
        name: "add-key to a volume of two keyslots",
        prepare: |kind| {
            if kind.keyslots < 3 {
                return None;
            }
            on_a_and_c(kind, &[A, B, C], |s| {
                let mut h = Header::read(s)?;
                let u = h.unlock(s, A.bytes())?;
                h.add_key(s, &u, B.bytes(), &fast(), None).map(drop)
            })
        },
    },
    Operation {
        name: "add-key to a volume of one keyslot",
        prepare: |kind| {
            let (store, plain) = volume(kind, &[A]);
            Some(prepared(
                kind,
                &store,
                plain,
                opens(&[A]),
                opens(&[A, B]),
                |s| {
                    let mut h = Header::read(s)?;
                    let u = h.unlock(s, A.bytes())?;
                    h.add_key(s, &u, B.bytes(), &fast(), None).map(drop)
                },
            ))
        },
    },
    Operation {
        name: "change-key in a volume of two keyslots",
        prepare: |kind| on_a_and_c(kind, &[B, C], |s| change(s, A, B)),
    },
    Operation {
        name: "change-key in a volume whose keyslots are all in use",
        prepare: |kind| {
            // Where the format has room for eight keyslots and no more (LUKS1), the
            // passphrase changes in place, as in cryptsetup, whose manual warns of it: a
            // cut between dropping the old keyslot and writing the new one leaves the
            // volume opening with the other keyslots only. Elsewhere the change is refused
            // for want of room (the LUKS2 keyslots area here holds seven areas) and there
            // is nothing to cut.
            let mut passes = vec![A, C];
            passes.extend(&FILL[..6]);
            if kind.keyslots < passes.len() {
                return None;
            }
            let (store, plain) = volume(kind, &passes);
            let trial = CutStore::new(store.bytes(), None);
            change(&trial, A, B).ok()?;
            let mut after = passes.clone();
            after[0] = B;
            let mut p = prepared(kind, &store, plain, opens(&passes), opens(&after), |s| {
                change(s, A, B)
            });
            p.also = vec![opens(&passes[1..])];
            Some(p)
        },
    },
    Operation {
        name: "remove-key of the second keyslot",
        prepare: |kind| {
            on_a_and_c(kind, &[A], |s| {
                let mut h = Header::read(s)?;
                let slot = h.unlock(s, C.bytes())?.keyslot;
                h.remove_key(s, slot)
            })
        },
    },
    Operation {
        name: "erase a volume of two keyslots",
        prepare: |kind| {
            let (store, plain) = volume(kind, &[A, C]);
            let before = opens(&[A, C]);
            Some(prepared(
                kind,
                &store,
                plain,
                before,
                (kind.erased)(),
                |s| Header::read(s)?.erase(s),
            ))
        },
    },
    Operation {
        name: "header restore after change-key and add-key",
        prepare: |kind| {
            let then = |s: &CutStore| {
                change(s, A, B).unwrap();
                let mut h = Header::read(s).unwrap();
                let u = h.unlock(s, B.bytes()).unwrap();
                h.add_key(s, &u, C.bytes(), &fast(), None).unwrap();
            };
            Some(restore_after(kind, &[A], then, &[B, C], restore))
        },
    },
    Operation {
        name: "header restore after change-key",
        prepare: |kind| Some(restore_after_change_key(kind, restore)),
    },
    Operation {
        name: "header restore after two change-keys",
        prepare: |kind| {
            let then = |s: &CutStore| {
                change(s, A, B).unwrap();
                change(s, B, D).unwrap();
            };
            Some(restore_after(kind, &[A], then, &[D], restore))
        },
    },
    Operation {
        name: "header restore with no room to move the current keyslots",
        prepare: |kind| {
            // The backup's keyslot lies where the current one does, and every other area
            // is taken: no order keeps either header (the restore's documented
            // exception). A cut may leave the backup's header over the current material,
            // which opens with nothing (or, LUKS1's 592-byte header torn at its 512-byte
            // sector, a mix of both headers that opens with some of the current
            // keyslots); running the restore again completes it.
            let (store, plain) = volume(kind, &[A]);
            let saved = backup(&store);
            let mut h = Header::read(&store).unwrap();
            let u = h.unlock(&store, A.bytes()).unwrap();
            let mut current = Vec::new();
            for p in FILL {
                if h.add_key(&store, &u, p.bytes(), &fast(), None).is_err() {
                    break;
                }
                current.push(p);
            }
            h.remove_key(&store, u.keyslot).unwrap();
            let slot = h.add_key(&store, &u, D.bytes(), &fast(), None).unwrap();
            assert_eq!(slot, u.keyslot);
            current.push(D);
            let states = (opens(&current), opens(&[A]));
            let mut p = restoring(kind, &store, plain, states, saved, restore);
            p.also = vec![Outcome::Valid];
            p.again = true;
            Some(p)
        },
    },
    Operation {
        name: "header restore onto an erased volume",
        prepare: |kind| {
            let (store, plain) = volume(kind, &[A, C]);
            let saved = backup(&store);
            Header::read(&store).unwrap().erase(&store).unwrap();
            let states = ((kind.erased)(), opens(&[A, C]));
            Some(restoring(kind, &store, plain, states, saved, restore))
        },
    },
    Operation {
        name: "header restore onto a destroyed header",
        prepare: |kind| {
            let (store, plain) = volume(kind, &[A, C]);
            let saved = backup(&store);
            let (at, len) = kind.header;
            let at = if at < 0 {
                store.size().unwrap() - at.unsigned_abs()
            } else {
                at as u64
            };
            store.write_at(&vec![0; len as usize], at).unwrap();
            Some(restoring(
                kind,
                &store,
                plain,
                (Outcome::Absent, opens(&[A, C])),
                saved,
                restore,
            ))
        },
    },
    Operation {
        name: "repair of a zeroed secondary copy",
        prepare: |kind| {
            repairing(kind, |s| {
                let n = copy_size(s);
                s.write_at(&vec![0; n as usize], n).unwrap();
            })
        },
    },
    Operation {
        name: "repair of a primary copy with a damaged checksum",
        prepare: |kind| {
            repairing(kind, |s| {
                let mut b = [0u8; 1];
                s.read_at(&mut b, 448).unwrap();
                s.write_at(&[b[0] ^ 0x5a], 448).unwrap();
            })
        },
    },
    Operation {
        name: "repair of a luks1 header whose inactive keyslot points into an active one",
        prepare: |kind| {
            // Refused as it is (the next add-key would overwrite keyslot 0); repair puts
            // keyslot 7 back in its place in the standard layout.
            if kind.name != "luks1" {
                return None;
            }
            let (store, plain) = volume(kind, &[A, C]);
            let mut slot0 = [0u8; 4];
            store.read_at(&mut slot0, LUKS1_SLOTS + 40).unwrap();
            store.write_at(&slot0, LUKS1_SLOTS + 7 * 48 + 40).unwrap();
            assert!(Header::read(&store).is_err(), "the damage is not refused");
            Some(prepared(
                kind,
                &store,
                plain,
                Outcome::Absent,
                opens(&[A, C]),
                |s| formats::repair_header(s).map(drop),
            ))
        },
    },
    Operation {
        name: "repair of a stale secondary copy",
        prepare: |kind| {
            repairing(kind, |s| {
                // The secondary as it was before a keyslot change.
                let n = copy_size(s);
                let mut old = vec![0; n as usize];
                s.read_at(&mut old, n).unwrap();
                let mut h = Header::read(s).unwrap();
                let u = h.unlock(s, A.bytes()).unwrap();
                let slot = h.add_key(s, &u, D.bytes(), &fast(), None).unwrap();
                h.remove_key(s, slot).unwrap();
                s.write_at(&old, n).unwrap();
            })
        },
    },
    Operation {
        name: "convert to the other luks version, two keyslots",
        prepare: |kind| converting(kind, &[A, C]),
    },
    Operation {
        name: "convert to the other luks version, seven keyslots (one free place)",
        prepare: |kind| {
            let mut passes = vec![A, C];
            passes.extend(&FILL[..5]);
            converting(kind, &passes)
        },
    },
    Operation {
        name: "resize of a geli provider grown by 64 KiB",
        prepare: |kind| {
            // geli resize -s: the metadata written in the new last sector, then the old
            // one wiped. Before, the grown image shows no header where it looks.
            if kind.name != "geli" {
                return None;
            }
            let (store, plain) = volume(kind, &[A, C]);
            let mut bytes = store.bytes();
            let old = bytes.len() as u64;
            bytes.resize(bytes.len() + (64 << 10), 0);
            let grown = CutStore::new(bytes, None);
            let mut p = prepared(
                kind,
                &grown,
                plain,
                Outcome::Absent,
                opens(&[A, C]),
                move |s| geli::resize::resize(s, old).map(drop),
            );
            // Before, nothing shows where the new size puts the metadata: such an image
            // is only the state before while the resize can still be run on it.
            p.before_again = true;
            Some(p)
        },
    },
];
