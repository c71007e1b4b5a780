//! LUKS2 re-encryption cut at every write and sync, for each resilience and four
//! operations ([`Op`]): a forward re-key of an attached volume (same cipher, 4 KiB
//! sectors: [`Luks2::reencrypt_init`] then [`Luks2::reencrypt_run`] to the end), a
//! decryption of a volume with a detached header (backward: [`Luks2::decrypt_init`] then
//! the run), and an encryption of plain data under a detached header (forward: the run
//! from the metadata [`Luks2::encrypt_init`] wrote), each on a 24 KiB data area in 8 KiB
//! hotzones (three hotzones, so the cut lands in the init, in every step of each hotzone
//! and in the end); and an encryption that moves the data to put the header in the image
//! (resilience datashift: [`Luks2::encrypt_shift_build`] and
//! [`Luks2::encrypt_shift_place`], then the run), 640 KiB of data in 256 KiB hotzones
//! (one of them short), its init cut too. Images cut while that init's header was being
//! placed, before a header copy was whole, hold the data's start in its copy alone: they
//! are checked to (the start in the copy, the rest in place) and counted. And the
//! decryption that moves the data back over the header of an attached volume
//! ([`Luks2::decrypt_shift_build`], [`Luks2::decrypt_shift_place`], then the run;
//! `datashift-checksum`: its journal cannot hold the moved start in this geometry), 640 KiB
//! of data behind a 256 KiB header, its init's move and metadata cut too. And the re-key
//! that moves the data 8 KiB on (`--reduce-device-size`, resilience datashift, backward:
//! [`Luks2::reencrypt_init`] with [`Resilience::DataShift`]), judged on the data's first
//! 16 KiB at the new offset once its metadata landed; cryptsetup's recovery of its last
//! hotzone in flight (which cryptsetup 2.6.1 reads from the wrong place: see
//! docs/REENCRYPTION.md) is left to sectorcrypt and counted with the states sectorcrypt
//! finishes.
//!
//! The header and data of the decryption and the encryption live in one cut image, the header in its first MiB
//! and the data after it, seen through two windows: a sync of either file syncs both
//! here. The run never leaves a header write unsynced when it syncs the data (each header
//! write is followed by its own syncs), so that model loses no reordering the run could
//! suffer on two files.
//! Every image the cut may leave ([`crash_images`]: pending writes lost, landed or torn)
//! is recovered as `sectorcrypt repair` and `sectorcrypt reencrypt` do
//! ([`Luks2::reencrypt_keys`] and [`Luks2::reencrypt_recover`] for a crash state, then
//! [`Luks2::reencrypt_run`] to the end), after which the passphrase opens the volume, no
//! re-encryption is left, and the data decrypts to the plaintext written before (for the
//! decryption: the data area is the plaintext, and the header has no keyslot and one
//! linear segment).
//! Identical images are judged once.
//!
//! Resilience `none` keeps no copy of a hotzone, and the run writes the data of every
//! hotzone before its one progress record (the end's header), as cryptsetup 2.6.1 does
//! with `--resilience none`. So for `none` what is asserted is: after any cut the header
//! reads, recovery runs to the end, the passphrase opens the volume, and every sector the
//! cut run did not write is intact; the sectors it wrote may be lost unless the run
//! completed. Were a `none` image ever in a crash state, sectorcrypt's recovery must
//! refuse it and write nothing (counted as "crash states refused"; none occur today).
//!
//! The `checksum` and `journal` runs are judged strictly: the resilience data is synced
//! before the header write that declares the hotzone in flight, so no image that loses the
//! one and keeps the other exists (before that sync was added, 6 and 18 images did; the
//! lenient mode, which counts such images instead of failing, stays for `none`).
//!
//! A sample of the images is also recovered by cryptsetup 2.6 on a file copy (`repair`,
//! then `reencrypt --resume-only --force-offline-reencrypt`): the first and the last image
//! of every fifth cut and of every cut whose pending writes touch the metadata or the
//! resilience area, and the images of the known reordering that tear no write. Its
//! result is read here with the passphrase and judged as sectorcrypt's. One state of a
//! decryption is finished by sectorcrypt after cryptsetup's repair instead of
//! cryptsetup's resume: a crash in the last hotzone, which cryptsetup 2.6.1's repair turns
//! into one plaintext segment with the metadata kept, and whose resume then decrypts the
//! plaintext again (after its own crashes too); those are counted.

use crate::cut::{crash_images, CutStore, Step};
use crate::ops::fast;
use sectorcrypt_testkit::{have, pattern, skipped};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::luks::luks2::reencrypt::{
    self, InitOptions, Outcome, Resilience, RunOptions, State,
};
use sectorcrypt_volume::luks::{self, FormatOptions, Luks2, Version};
use sectorcrypt_volume::store::MemStore;
use sectorcrypt_volume::{Header, Placement, Store};
use std::collections::HashSet;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::process::Command;

const PASS: &[u8] = b"passphrase-A";
const DATA: u64 = 24 << 10;
const HOTZONE: u64 = 8 << 10;
const SECTOR: usize = 4096;

type Verdict = std::result::Result<(), String>;

/// What is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A forward re-key of an attached volume.
    Rekey,
    /// A re-key of an attached volume that moves the data [`MOVE`] bytes on (backward,
    /// resilience datashift: `--reduce-device-size`); the data area keeps
    /// `DATA - MOVE` bytes.
    MovedRekey,
    /// A (backward) decryption of a volume whose header is detached.
    Decrypt,
    /// A (forward) encryption of plain data under a detached header. The header is made
    /// whole before the cut starts: `sectorcrypt reencrypt --encrypt` makes it in a new
    /// file and links it to its name, which no crash leaves half done.
    Encrypt,
    /// An encryption of plain data that moves it to make room for the header in the
    /// image (`--reduce-device-size`, resilience datashift): the init (the data's start
    /// copied to the end, the header placed over it) is cut too.
    Shift,
    /// A decryption that moves the data back over the header of an attached volume
    /// (`--decrypt --header NEW`, `online-reencrypt-v3`): the volume (its header in
    /// [`SHIFT`] bytes, [`SHIFT_DATA`] of data) in the data window, the new header file in
    /// the header window. The copy of the header into the new file is made before the
    /// cut (it gets its name only whole); the init's move and metadata are cut.
    BackShift,
}

/// The data shift of [`Op::MovedRekey`]: one hotzone; two of them are left.
const MOVE: u64 = HOTZONE;

/// The shift of [`Op::Shift`]: the header's room, the hotzone, and the copy of the
/// data's start.
const SHIFT: u64 = 256 << 10;
/// The plaintext of [`Op::Shift`]: two and a half shifts, so that one hotzone is short.
const SHIFT_DATA: u64 = 640 << 10;

impl Op {
    /// Where the data starts in the cut image: room for the old and the new keyslot and
    /// the resilience area (for the decryption, the detached header's file, made that
    /// small).
    fn data_offset(self) -> u64 {
        match self {
            Op::Shift => SHIFT,
            _ => 1 << 20,
        }
    }

    /// Bytes of the data window.
    fn data_len(self) -> u64 {
        match self {
            Op::BackShift => SHIFT + SHIFT_DATA,
            _ => DATA,
        }
    }

    /// The bytes of the cut image.
    fn image_size(self) -> u64 {
        match self {
            Op::Shift => SHIFT_DATA + 2 * SHIFT,
            _ => self.data_offset() + self.data_len(),
        }
    }

    /// Where the segments' offsets count from in the cut image.
    fn segment_base(self) -> u64 {
        match self {
            Op::Rekey | Op::MovedRekey => self.data_offset(),
            Op::Decrypt | Op::Encrypt | Op::Shift | Op::BackShift => 0,
        }
    }
}

/// A part of a store, as a store of its own (the two files of a detached header).
#[derive(Debug)]
struct Window<'a> {
    inner: &'a dyn Store,
    start: u64,
    len: u64,
}

impl Window<'_> {
    fn span(&self, offset: u64, len: usize) -> io::Result<u64> {
        if offset + len as u64 > self.len {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        Ok(self.start + offset)
    }
}

impl Store for Window<'_> {
    fn name(&self) -> &str {
        "window"
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.len)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, self.span(offset, buf.len())?)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, self.span(offset, buf.len())?)
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
}

/// A cut image as the operation sees it.
struct Volume<'a> {
    op: Op,
    whole: &'a CutStore,
    header: Window<'a>,
    data: Window<'a>,
}

impl<'a> Volume<'a> {
    fn new(op: Op, whole: &'a CutStore) -> Volume<'a> {
        let d = op.data_offset();
        Volume {
            op,
            whole,
            header: Window {
                inner: whole,
                start: 0,
                len: d,
            },
            data: Window {
                inner: whole,
                start: d,
                len: op.data_len(),
            },
        }
    }

    fn at(&self) -> Placement<'_> {
        match self.op {
            Op::Rekey | Op::MovedRekey | Op::Shift => Placement::Attached(self.whole),
            Op::Decrypt | Op::Encrypt | Op::BackShift => Placement::Detached {
                header: &self.header,
                data: &self.data,
            },
        }
    }

    fn header_store(&self) -> &dyn Store {
        match self.op {
            Op::Rekey | Op::MovedRekey | Op::Shift => self.whole,
            Op::Decrypt | Op::Encrypt | Op::BackShift => &self.header,
        }
    }
}

/// A LUKS2 volume opened by [`PASS`] whose data area holds a known plaintext (for the
/// encryption: the plaintext under a header whose encryption with `resilience` has
/// started): the cut image's bytes and the plaintext.
fn volume(op: Op, resilience: Resilience) -> (Vec<u8>, Vec<u8>) {
    if op == Op::Shift {
        // The plaintext, then the free end (whatever was there).
        let mut image = pattern(op.image_size() as usize, 0x5f);
        let plain = image[..SHIFT_DATA as usize].to_vec();
        image[SHIFT_DATA as usize..].fill(0xee);
        return (image, plain);
    }
    let store = CutStore::new(vec![0; op.image_size() as usize], None);
    let v = Volume::new(op, &store);
    if op == Op::BackShift {
        return back_volume(&store, &v);
    }
    let opts = FormatOptions {
        version: Version::Luks2,
        kdf: fast(),
        key_bytes: 32,
        sector_size: SECTOR,
        data_offset: Some(op.segment_base()),
        metadata_size: Some(op.data_offset()),
        ..FormatOptions::default()
    };
    let plain = pattern(DATA as usize, 0x5e);
    if op == Op::Encrypt {
        store.write_at(&plain, op.data_offset()).unwrap();
    }
    let (mut hdr, u) = luks::format_at(v.at(), &opts, PASS, None).unwrap();
    if op == Op::Encrypt {
        let h = hdr.downcast_mut::<Luks2>().expect("a luks2 header");
        h.encrypt_init(&v.header, u.volume_key(), resilience)
            .unwrap();
        assert!(store.bytes()[op.data_offset() as usize..] == plain[..]);
        return (store.bytes(), plain);
    }
    let mut enc = plain.clone();
    u.layout().unwrap().encrypt(0, &mut enc).unwrap();
    store.write_at(&enc, op.data_offset()).unwrap();
    (store.bytes(), plain)
}

/// The operation: init, then the run to the end.
fn reencrypt(op: Op, store: &CutStore, resilience: Resilience) -> sectorcrypt_volume::Result<()> {
    let v = Volume::new(op, store);
    if op == Op::Shift {
        shift_init(store)?;
    }
    let mut header = Header::read(v.header_store())?;
    let h = header.downcast_mut::<Luks2>().expect("a luks2 header");
    let keys = match op {
        Op::Shift => h.reencrypt_keys(store, PASS)?,
        Op::BackShift => {
            let size = op.data_len();
            h.decrypt_shift_build(&v.header, PASS, None, size, resilience, None)?;
            h.decrypt_shift_place(&v.header, &v.data)?;
            h.reencrypt_keys(&v.header, PASS)?
        }
        Op::Rekey | Op::MovedRekey => {
            let init = InitOptions {
                cipher: None,
                key_bytes: None,
                sector_size: None,
                resilience,
                kdf: Some(&fast()),
                key_slot: None,
            };
            h.reencrypt_init(store, store, PASS, &init)?
        }
        Op::Decrypt => h.decrypt_init(v.at(), PASS, resilience, None)?,
        Op::Encrypt => h.reencrypt_keys(&v.header, PASS)?,
    };
    let mut go_on = |_: u64, _: u64| true;
    let mut run = RunOptions {
        hotzone: Some(HOTZONE),
        resilience: None,
        threads: 1,
        progress: &mut go_on,
        line: None,
    };
    let outcome = h.reencrypt_run(v.at(), &keys, &mut run)?;
    assert_eq!(outcome, Outcome::Finished);
    Ok(())
}

/// The format of the data-moving operations' volumes: a header of [`SHIFT`] bytes, the
/// data right after it.
fn shifted_options() -> FormatOptions {
    FormatOptions {
        version: Version::Luks2,
        kdf: fast(),
        key_bytes: 32,
        sector_size: SECTOR,
        data_offset: Some(SHIFT),
        metadata_size: Some(SHIFT),
        ..FormatOptions::default()
    }
}

/// The volume of [`Op::BackShift`]: attached in the data window, the pattern encrypted in
/// its data, its header copied to the header window (the new header file).
fn back_volume(store: &CutStore, v: &Volume<'_>) -> (Vec<u8>, Vec<u8>) {
    let opts = shifted_options();
    let (_, u) = luks::format_at(Placement::Attached(&v.data), &opts, PASS, None).unwrap();
    let plain = pattern(SHIFT_DATA as usize, 0xb5);
    let mut enc = plain.clone();
    u.layout().unwrap().encrypt(0, &mut enc).unwrap();
    v.data.write_at(&enc, SHIFT).unwrap();
    let mut head = vec![0u8; SHIFT as usize];
    v.data.read_at(&mut head, 0).unwrap();
    v.header.write_at(&head, 0).unwrap();
    (store.bytes(), plain)
}

/// The init of [`Op::Shift`], as `sectorcrypt reencrypt --encrypt --reduce-device-size`
/// does it: the header made in memory, then placed.
fn shift_init(store: &CutStore) -> sectorcrypt_volume::Result<()> {
    let mem = MemStore::new(SHIFT as usize);
    let opts = shifted_options();
    let at = Placement::Detached {
        header: &mem,
        data: store,
    };
    let (mut hdr, u) = luks::format_at(at, &opts, PASS, None)?;
    let h = hdr.downcast_mut::<Luks2>().expect("a luks2 header");
    h.encrypt_shift_build(u.volume_key(), Op::Shift.image_size(), SHIFT)?;
    h.encrypt_shift_place(&mem, store)
}

/// An [`Op::Shift`] image without a header: cut in the init, before the header was
/// placed whole. The plaintext must be where it was, its start there or in its copy at
/// the end (a header torn over the start leaves it in the copy alone: no tool recovers
/// that by itself; it is counted).
fn shift_before_header(image: &[u8], plain: &[u8]) -> Result<bool, String> {
    let (s, l) = (SHIFT as usize, SHIFT_DATA as usize);
    if image[..l] == *plain {
        return Ok(false);
    }
    let copy = &image[image.len() - s..];
    if image[s..l] == plain[s..] && copy == &plain[..s] {
        return Ok(true);
    }
    Err("the header does not read and the plaintext is lost".into())
}

/// The hotzone a crash state names (its `in-reencryption` segment), relative to the data.
fn hotzone_in_flight(op: Op, json: &serde_json::Value) -> Option<Range<usize>> {
    let segs = json["segments"].as_object()?;
    let hot = segs.values().find(|s| {
        s["flags"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "in-reencryption"))
    })?;
    let offset: u64 = hot["offset"].as_str()?.parse().ok()?;
    let size: u64 = hot["size"].as_str()?.parse().ok()?;
    let start = (offset - op.segment_base()) as usize;
    Some(start..start + size as usize)
}

/// Judges a recovered image: no re-encryption left, and the data (decrypted with the
/// passphrase's key; plain as it is after a decryption) is `plain` outside `lost`.
fn reads_plaintext(op: Op, store: &CutStore, plain: &[u8], lost: &[Range<usize>]) -> Verdict {
    let v = Volume::new(op, store);
    let h = match Header::read(v.header_store()) {
        Ok(h) => h,
        Err(_) if op == Op::Shift => return shift_before_header(&store.bytes(), plain).map(|_| ()),
        Err(e) => return Err(format!("the header does not read: {e}")),
    };
    assert!(!h.dump().is_empty());
    // A moved re-key that landed holds the plaintext's first `DATA - MOVE` bytes, `MOVE`
    // bytes on (before its metadata landed: the volume as it was).
    let moved = match h.downcast_ref::<Luks2>() {
        Some(l) if op == Op::MovedRekey => {
            let offset: u64 = l.json()["segments"]["0"]["offset"]
                .as_str()
                .and_then(|o| o.parse().ok())
                .ok_or("no data segment")?;
            (offset - op.data_offset()) as usize
        }
        _ => 0,
    };
    if ![0, MOVE as usize].contains(&moved) {
        return Err(format!("the data moved {moved} bytes"));
    }
    let plain = &plain[..plain.len() - moved];
    let mut buf = vec![0u8; plain.len()];
    let untouched_back = op == Op::BackShift
        && h.downcast_ref::<Luks2>()
            .is_some_and(|l| l.json()["segments"]["0"]["type"] == "crypt");
    match op {
        Op::Shift => store.read_at(&mut buf, SHIFT).unwrap(),
        // Cut before its metadata landed: the volume as it was, its data at the offset.
        _ if untouched_back => v.data.read_at(&mut buf, SHIFT).unwrap(),
        _ => v.data.read_at(&mut buf, moved as u64).unwrap(),
    }
    if let Some(l) = h.downcast_ref::<Luks2>() {
        let st = reencrypt::state(l.json()).map_err(|e| e.to_string())?;
        if st != State::None {
            return Err(format!("a re-encryption is left ({st:?})"));
        }
        let untouched = l.json()["segments"]["0"]["type"] == "crypt";
        if matches!(op, Op::Decrypt | Op::BackShift) && !untouched {
            let json = l.json();
            let want =
                serde_json::json!({"0": {"type": "linear", "offset": "0", "size": "dynamic"}});
            if json["segments"] != want || json["keyslots"] != serde_json::json!({}) {
                return Err(format!(
                    "the header is not a finished decryption's: {}",
                    json["segments"]
                ));
            }
        }
    }
    let crypt = h
        .downcast_ref::<Luks2>()
        .is_some_and(|l| l.json()["segments"]["0"]["type"] == "crypt");
    if matches!(op, Op::Rekey | Op::MovedRekey) || crypt {
        // A decryption cut before its metadata landed: the volume as it was.
        let u = h
            .unlock(store, PASS)
            .map_err(|e| format!("the passphrase does not open it: {e}"))?;
        u.layout().unwrap().decrypt(0, &mut buf).unwrap();
    }
    let bad = (0..plain.len() / SECTOR)
        .map(|i| i * SECTOR..(i + 1) * SECTOR)
        .filter(|r| !lost.iter().any(|l| l.start <= r.start && r.end <= l.end))
        .find(|r| buf[r.clone()] != plain[r.clone()]);
    match bad {
        Some(r) => Err(format!(
            "the data differs at {r:?} (lost allowed: {lost:?})"
        )),
        None => Ok(()),
    }
}

/// What sectorcrypt's recovery of one image found.
enum Recovered {
    /// Recovered and finished: the volume reads the plaintext.
    Full,
    /// Resilience `none` interrupted inside a hotzone: refused, nothing written.
    Refused(Range<usize>),
    /// A data-shift encryption cut while its header was placed: the data's start is in
    /// its copy alone ([`shift_before_header`]).
    StartInCopy,
}

/// Recovers `bytes` as `sectorcrypt repair` then `sectorcrypt reencrypt` would, and judges
/// the result.
fn recover_by_sectorcrypt(
    op: Op,
    bytes: Vec<u8>,
    plain: &[u8],
    none: bool,
    lost: &[Range<usize>],
) -> Result<Recovered, String> {
    let store = CutStore::new(bytes.clone(), None);
    let v = Volume::new(op, &store);
    let at = v.at();
    let err = |e: sectorcrypt_volume::Error| e.to_string();
    let mut header = match Header::read(v.header_store()) {
        Ok(h) => h,
        Err(_) if op == Op::Shift => {
            return match shift_before_header(&bytes, plain)? {
                true => Ok(Recovered::StartInCopy),
                false => Ok(Recovered::Full),
            }
        }
        Err(e) => return Err(format!("the header does not read: {e}")),
    };
    if let Some(h) = header.downcast_mut::<Luks2>() {
        let mut st = reencrypt::state(h.json()).map_err(err)?;
        if st == State::Crash {
            let keys = h.reencrypt_keys(v.header_store(), PASS).map_err(err)?;
            if none {
                let hot = hotzone_in_flight(op, h.json()).ok_or("a crash state without hotzone")?;
                return match h.reencrypt_recover(at, &keys) {
                    Ok(()) => Err("a hotzone interrupted without resilience recovered".into()),
                    Err(_) if store.bytes() == bytes => Ok(Recovered::Refused(hot)),
                    Err(e) => Err(format!("the refused recovery ({e}) wrote to the image")),
                };
            }
            h.reencrypt_recover(at, &keys).map_err(err)?;
            st = reencrypt::state(h.json()).map_err(err)?;
        }
        if st == State::Clean && !h.reencrypt_finish_done(at).map_err(err)? {
            let keys = h.reencrypt_keys(v.header_store(), PASS).map_err(err)?;
            let mut go_on = |_: u64, _: u64| true;
            let mut run = RunOptions {
                hotzone: Some(HOTZONE),
                resilience: None,
                threads: 1,
                progress: &mut go_on,
                line: None,
            };
            h.reencrypt_run(at, &keys, &mut run).map_err(err)?;
        }
    }
    reads_plaintext(op, &store, plain, lost)?;
    Ok(Recovered::Full)
}

/// What cryptsetup's recovery of one image came to.
enum ByCryptsetup {
    /// Repaired and resumed by cryptsetup.
    Alone,
    /// A decryption's last hotzone, or a data-shift encryption's state after its last
    /// hotzone: repaired by cryptsetup, finished by sectorcrypt (see the module docs).
    FinishedHere,
}

/// Recovers a file copy of `bytes` with cryptsetup (`repair`, then the resume when a
/// re-encryption is left) and judges the result (outside `lost`).
fn recover_by_cryptsetup(
    op: Op,
    dir: &Path,
    bytes: &[u8],
    plain: &[u8],
    lost: &[Range<usize>],
) -> Result<ByCryptsetup, String> {
    let img = dir.join("cut.img");
    let hdr = dir.join("cut.hdr");
    let key = dir.join("pass");
    let split = op.data_offset() as usize;
    if op == Op::Shift && Header::read(&CutStore::new(bytes.to_vec(), None)).is_err() {
        // No header: nothing for cryptsetup to recover (judged as sectorcrypt's).
        shift_before_header(bytes, plain)?;
        return Ok(ByCryptsetup::Alone);
    }
    match op {
        Op::Rekey | Op::MovedRekey | Op::Shift => std::fs::write(&img, bytes).unwrap(),
        Op::Decrypt | Op::Encrypt | Op::BackShift => {
            std::fs::write(&hdr, &bytes[..split]).unwrap();
            std::fs::write(&img, &bytes[split..]).unwrap();
        }
    }
    std::fs::write(&key, PASS).unwrap();
    let cs = |args: &[&str]| {
        let mut cmd = Command::new("cryptsetup");
        cmd.args(["-q", "--disable-locks", "--disable-keyring", "--key-file"])
            .arg(&key)
            .args(args);
        if !matches!(op, Op::Rekey | Op::MovedRekey | Op::Shift) {
            cmd.arg("--header").arg(&hdr);
        }
        let out = cmd.arg(&img).output().unwrap();
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(format!(
                "cryptsetup {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    if op == Op::MovedRekey && first_hotzone_in_flight(bytes) {
        // cryptsetup 2.6.1 recovers the last hotzone of a moved re-key (the data's first
        // bytes) from device offset 0, the header (it looks for the old data where a
        // data-shift encryption keeps its moved segment, which a re-key has not): its
        // repair writes garbage there. sectorcrypt recovers it.
        return match recover_by_sectorcrypt(op, bytes.to_vec(), plain, false, lost) {
            Ok(_) => Ok(ByCryptsetup::FinishedHere),
            Err(e) => Err(format!("sectorcrypt, in cryptsetup's stead: {e}")),
        };
    }
    cs(&["repair"])?;
    let json: serde_json::Value =
        serde_json::from_slice(&cs(&["luksDump", "--dump-json-metadata"])?).unwrap();
    let regular = json["segments"].as_object().map_or(0, |m| {
        m.values().filter(|s| s.get("flags").is_none()).count()
    });
    let mut back = match op {
        Op::Rekey | Op::MovedRekey | Op::Shift => std::fs::read(&img).unwrap(),
        Op::Decrypt | Op::Encrypt | Op::BackShift => {
            [std::fs::read(&hdr).unwrap(), std::fs::read(&img).unwrap()].concat()
        }
    };
    if json["config"].get("requirements").is_some() {
        // cryptsetup 2.6.1 cannot end the state the last hotzone of a data-shift
        // encryption writes (one crypt segment, the requirement set): its own crash there
        // too. sectorcrypt ends it.
        if matches!(op, Op::Decrypt | Op::Shift | Op::BackShift) && regular == 1 {
            let store = CutStore::new(back, None);
            match recover_by_sectorcrypt(op, store.bytes(), plain, false, lost) {
                Ok(_) => return Ok(ByCryptsetup::FinishedHere),
                Err(e) => return Err(format!("sectorcrypt after cryptsetup's repair: {e}")),
            }
        }
        cs(&["reencrypt", "--resume-only", "--force-offline-reencrypt"])?;
        back = match op {
            Op::Rekey | Op::MovedRekey | Op::Shift => std::fs::read(&img).unwrap(),
            Op::Decrypt | Op::Encrypt | Op::BackShift => {
                [std::fs::read(&hdr).unwrap(), std::fs::read(&img).unwrap()].concat()
            }
        };
    }
    let store = CutStore::new(back, None);
    reads_plaintext(op, &store, plain, lost)?;
    Ok(ByCryptsetup::Alone)
}

/// Whether the header of the attached volume `bytes` has its data's first hotzone in
/// flight (the hotzone segment at the new layout's data offset).
fn first_hotzone_in_flight(bytes: &[u8]) -> bool {
    let Ok(h) = Header::read(&CutStore::new(bytes.to_vec(), None)) else {
        return false;
    };
    let Some(l) = h.downcast_ref::<Luks2>() else {
        return false;
    };
    let segs = l.json()["segments"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let flagged = |flag: &str| {
        segs.values()
            .find(|s| {
                s["flags"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|x| x == flag))
            })
            .map(|s| s["offset"].clone())
    };
    flagged("in-reencryption").is_some_and(|hot| Some(hot) == flagged("backup-final"))
}

/// Whether a cut's pending writes (after its last sync, and the refused one) touch the
/// metadata or the resilience area.
fn header_pending(op: Op, done: &[Step], refused: Option<&Step>) -> bool {
    let last_sync = done.iter().rposition(|s| matches!(s, Step::Sync));
    done[last_sync.map_or(0, |i| i + 1)..]
        .iter()
        .chain(refused)
        .any(|s| matches!(s, Step::Write { at, .. } if *at < op.data_offset()))
}

/// The data-area ranges (relative to the data) of the writes `done` and `refused` made.
fn data_writes(op: Op, done: &[Step], refused: Option<&Step>) -> Vec<Range<usize>> {
    let base = op.data_offset();
    done.iter()
        .chain(refused)
        .filter_map(|s| match s {
            Step::Write { at, data } if *at >= base => {
                let start = (*at - base) as usize;
                Some(start..start + data.len())
            }
            _ => None,
        })
        .collect()
}

/// Whether a crash image (by its [`crash_images`] label) lost or tore the write of the
/// resilience area (checksums or journal) while the header write after it landed: the
/// reordering that the missing sync between the two allows.
fn resilience_reordered(op: Op, label: &str) -> bool {
    let Some(list) = label
        .split_once('[')
        .and_then(|(_, rest)| rest.strip_suffix(']'))
    else {
        return false;
    };
    let writes: Vec<(u64, &str)> = list
        .split(", ")
        .filter_map(|w| {
            let (at, rest) = w.split_once('+')?;
            let (_, mark) = rest.split_once(' ')?;
            Some((at.parse().ok()?, mark))
        })
        .collect();
    writes.iter().enumerate().any(|(i, &(at, mark))| {
        (AREA..op.data_offset()).contains(&at)
            && mark != "+"
            && writes[i + 1..]
                .iter()
                .any(|&(later, m)| later < AREA && m != "-")
    })
}

/// Where the keyslots area starts: writes below are header copies, writes from it on and
/// below the data are keyslots or the resilience area.
const AREA: u64 = 32 << 10;

/// Cuts the re-encryption with `resilience` at every step and judges every image. Unless
/// `strict`, images of the known reordering ([`resilience_reordered`]) are counted and
/// printed, not failed.
fn every_cut(op: Op, name: &str, resilience: Resilience, strict: bool) {
    let none = resilience == Resilience::None && op != Op::Shift;
    let (base, plain) = volume(op, resilience);
    let full = CutStore::new(base.clone(), None);
    reencrypt(op, &full, resilience).unwrap();
    let steps = full.steps().len();
    eprintln!("crash: {name}: steps {:?}", full.steps());
    reads_plaintext(op, &full, &plain, &[]).unwrap();
    let cryptsetup = have("cryptsetup");
    if !cryptsetup {
        skipped!("skipped: cryptsetup is not installed (its recoveries of the sample)");
    }
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let mut seen = HashSet::new();
    let (mut images, mut judged, mut refused_none, mut by_cryptsetup) = (0, 0, 0, 0);
    let (mut finished_here, mut in_copy) = (0, 0);
    let (mut failures, mut reordered) = (Vec::new(), Vec::new());
    for k in 0..=steps {
        let store = CutStore::new(base.clone(), Some(k));
        let result = reencrypt(op, &store, resilience);
        assert_eq!(
            result.is_ok(),
            k == steps,
            "{name}: cut after {k}: {result:?}"
        );
        let done = store.steps();
        let refused = store.refused();
        // Without resilience, the run writes every hotzone's data before its one
        // progress record (as cryptsetup does): a cut before that record is durable may
        // lose what the run wrote to the data, and nothing else.
        let lost = if none && k < steps {
            data_writes(op, &done, refused.as_ref())
        } else {
            Vec::new()
        };
        let sample = cryptsetup && (k % 5 == 0 || header_pending(op, &done, refused.as_ref()));
        let all: Vec<(String, Vec<u8>)> = crash_images(&base, &done, refused.as_ref()).collect();
        let n = all.len();
        for (i, (label, image)) in all.into_iter().enumerate() {
            images += 1;
            if !seen.insert(openssl::sha::sha256(&image)) {
                continue;
            }
            judged += 1;
            let what = format!("{name}: cut after step {k}/{steps}, {label}");
            let mut wrong = Vec::new();
            let mut lost_here = lost.clone();
            match recover_by_sectorcrypt(op, image.clone(), &plain, none, &lost) {
                Ok(Recovered::Full) => {}
                Ok(Recovered::Refused(hot)) => {
                    refused_none += 1;
                    lost_here.push(hot);
                }
                Ok(Recovered::StartInCopy) => in_copy += 1,
                Err(e) => wrong.push(format!("{what}: sectorcrypt: {e}")),
            }
            let known = resilience_reordered(op, &label);
            // cryptsetup sees the images of the known reordering too (those without a
            // torn write): does it lose the hotzone as well?
            let whole = !label.contains(['<', '>']);
            if cryptsetup && ((known && whole) || (sample && (i == 0 || i + 1 == n))) {
                by_cryptsetup += 1;
                match recover_by_cryptsetup(op, dir.path(), &image, &plain, &lost_here) {
                    Ok(ByCryptsetup::Alone) => {}
                    Ok(ByCryptsetup::FinishedHere) => finished_here += 1,
                    Err(e) => wrong.push(format!("{what}: cryptsetup: {e}")),
                }
            }
            if !strict && !wrong.is_empty() && known {
                reordered.extend(wrong);
            } else {
                failures.extend(wrong);
            }
        }
    }
    eprintln!(
        "crash: {name}: {} cuts, {images} images, {judged} distinct judged by \
         sectorcrypt ({refused_none} crash states refused), {by_cryptsetup} also by \
         cryptsetup ({finished_here} of them finished by sectorcrypt after cryptsetup's \
         repair), {in_copy} with the data's start in its copy alone, {} failures, {} known \
         ({:.1} s)",
        steps + 1,
        failures.len(),
        reordered.len(),
        start.elapsed().as_secs_f64()
    );
    for known in &reordered {
        eprintln!("crash: {name}: known: {known}");
    }
    assert!(
        failures.is_empty(),
        "{} images break the rules:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn reencrypt_checksum_at_every_cut() {
    // Strict: the resilience data is synced before the header that names it, so no
    // reordering of the writes loses a hotzone (it did before; cryptsetup 2.6.1's order
    // still does).
    every_cut(
        Op::Rekey,
        "reencrypt checksum",
        Resilience::Checksum(HashAlg::Sha256),
        true,
    );
}

#[test]
fn reencrypt_moving_the_data_at_every_cut() {
    every_cut(
        Op::MovedRekey,
        "reencrypt datashift",
        Resilience::DataShift(MOVE),
        true,
    );
}

#[test]
fn reencrypt_journal_at_every_cut() {
    every_cut(Op::Rekey, "reencrypt journal", Resilience::Journal, true);
}

#[test]
fn reencrypt_none_at_every_cut() {
    every_cut(Op::Rekey, "reencrypt none", Resilience::None, true);
}

#[test]
fn decrypt_checksum_at_every_cut() {
    every_cut(
        Op::Decrypt,
        "decrypt checksum",
        Resilience::Checksum(HashAlg::Sha256),
        true,
    );
}

#[test]
fn decrypt_journal_at_every_cut() {
    every_cut(Op::Decrypt, "decrypt journal", Resilience::Journal, true);
}

#[test]
fn decrypt_none_at_every_cut() {
    every_cut(Op::Decrypt, "decrypt none", Resilience::None, true);
}

#[test]
fn encrypt_checksum_at_every_cut() {
    every_cut(
        Op::Encrypt,
        "encrypt checksum",
        Resilience::Checksum(HashAlg::Sha256),
        true,
    );
}

#[test]
fn encrypt_journal_at_every_cut() {
    every_cut(Op::Encrypt, "encrypt journal", Resilience::Journal, true);
}

#[test]
fn encrypt_none_at_every_cut() {
    every_cut(Op::Encrypt, "encrypt none", Resilience::None, true);
}

#[test]
fn encrypt_moving_the_data_at_every_cut() {
    // The resilience is datashift whatever is asked: the init's metadata says so.
    every_cut(Op::Shift, "encrypt datashift", Resilience::None, true);
}

#[test]
fn decrypt_moving_the_data_checksum_at_every_cut() {
    every_cut(
        Op::BackShift,
        "decrypt datashift-checksum",
        Resilience::Checksum(HashAlg::Sha256),
        true,
    );
}

#[test]
fn the_reordering_is_told_from_its_label() {
    assert!(resilience_reordered(
        Op::Rekey,
        "synced writes, then [294912+64 -, 0+16384 +]"
    ));
    assert!(resilience_reordered(
        Op::Rekey,
        "synced writes, then [294912+8192 <4096, 0+16384 <4096]"
    ));
    assert!(!resilience_reordered(
        Op::Rekey,
        "synced writes, then [294912+64 +, 0+16384 +]"
    ));
    assert!(!resilience_reordered(
        Op::Rekey,
        "synced writes, then [294912+64 -, 0+16384 -]"
    ));
    assert!(!resilience_reordered(
        Op::Rekey,
        "synced writes, then [1048576+8192 <4096]"
    ));
}
