//! Running one operation on one format with the power cut after every step, and judging
//! each image the cut may leave: the header reads and validates (what `dump` shows), the
//! passphrases that open are those of the state before or of the state after, and the
//! data area is untouched and decrypts to what was written.
//!
//! Opening is what costs (a KDF and an anti-forensic merge per keyslot tried, slow in the
//! unoptimised test build), so a verdict tries only the passphrases it needs, stops at the
//! first state that fits, tries the keyslot a passphrase last opened first, and reuses the
//! answer for an image whose bytes are the same wherever the answer was read from
//! ([`Tried`]: most cuts differ only in areas no header points at).

use crate::cut::{crash_images, CutStore, Step};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::{Header, Result, Store};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

/// A passphrase, by a short name for messages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Pass(pub &'static str);

impl Pass {
    pub fn bytes(self) -> &'static [u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// What a state of the image looks like from outside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No header is used: none is recognised (a blank image, a destroyed header), or the
    /// one there breaks a rule and is refused.
    Absent,
    /// A valid header that every passphrase listed opens (others may open too, as when a
    /// change-key has written the new keyslot and not yet dropped the old one). An empty
    /// list: nothing opens.
    Opens(Vec<Pass>),
    /// A valid header, whatever opens (a documented exception; with [`Prepared::again`],
    /// running the operation again on it must complete it).
    Valid,
}

/// An operation on a store.
pub type Run = Box<dyn Fn(&dyn Store) -> Result<()>>;

/// An operation ready to run on images of one state.
pub struct Prepared {
    /// The image before the operation.
    pub image: Vec<u8>,
    /// What the image is before.
    pub before: Outcome,
    /// What it is after the operation completes (then exactly: nothing else opens).
    pub after: Outcome,
    /// Other states a cut may leave: documented exceptions to "before or after".
    pub also: Vec<Outcome>,
    /// Whether an image in none of the states but one of `also` must, when the operation
    /// runs again on it, end exactly `after` (an operation whose exception is undone by
    /// running it again).
    pub again: bool,
    /// Where the data area starts: nothing from there for `data_len` bytes may change.
    pub data_offset: u64,
    /// The length of the data area (a GELI provider's metadata follows it).
    pub data_len: u64,
    /// Whether an image in the state before must also, when the operation runs again on
    /// it, end exactly `after`: a state before that shows no volume (a grown GELI
    /// provider whose metadata is not yet in its new last sector) is only a state before
    /// if the operation can still complete from it.
    pub before_again: bool,
    /// The plaintext of the data area, when the volume existed before.
    pub plaintext: Option<Vec<u8>>,
    /// The operation.
    pub run: Run,
    /// Files the operation reads (a header backup), kept until it is done.
    pub _keep: Option<tempfile::TempDir>,
    /// The keyslot each passphrase last opened, tried first next time.
    pub hints: Hints,
    /// What each passphrase did on the images judged so far.
    pub memo: RefCell<Vec<Tried>>,
}

/// The keyslot each passphrase last opened.
type Hints = RefCell<HashMap<&'static str, usize>>;

/// What trying a passphrase on an image found, and the bytes that decided it: reading the
/// header and unlocking depend on nothing but the bytes they read (and the size, the same
/// for every image of an operation), so another image with the same bytes in every one of
/// those ranges gives the same answer.
#[derive(Debug)]
pub struct Tried {
    pass: Pass,
    /// Each range read (offset, length) with a digest of its bytes.
    ranges: Vec<(u64, usize, Vec<u8>)>,
    opens: bool,
    data: std::result::Result<(), String>,
}

/// An image being judged against `p`: its header, read once, and which passphrases were
/// tried.
struct Image<'a> {
    p: &'a Prepared,
    store: CutStore,
    header: std::result::Result<Header, String>,
    header_reads: Vec<(u64, usize)>,
    digests: HashMap<(u64, usize), Vec<u8>>,
    tried: Vec<(Pass, bool)>,
    data: std::result::Result<(), String>,
}

impl<'a> Image<'a> {
    fn new(p: &'a Prepared, bytes: Vec<u8>) -> Image<'a> {
        let store = CutStore::new(bytes, None);
        let header = Header::read(&store).map_err(|e| e.to_string());
        if let Ok(h) = &header {
            // What `dump` prints must render for every header that reads.
            assert!(!h.dump().is_empty());
        }
        let header_reads = store.take_reads();
        Image {
            p,
            store,
            header,
            header_reads,
            digests: HashMap::new(),
            tried: Vec::new(),
            data: Ok(()),
        }
    }

    /// A digest of the bytes at `off..off + len`.
    fn digest(&mut self, off: u64, len: usize) -> Vec<u8> {
        let store = &self.store;
        self.digests
            .entry((off, len))
            .or_insert_with(|| {
                // A read past the end fails alike on every image of one size.
                let mut buf = vec![0u8; len];
                match store.read_at(&mut buf, off) {
                    Ok(()) => HashAlg::Sha256.digest(&[&buf]),
                    Err(_) => Vec::new(),
                }
            })
            .clone()
    }

    /// Whether `pass` opens the image; when it does, the data area must decrypt to the
    /// plaintext under the key it gives.
    fn opens(&mut self, pass: Pass) -> bool {
        if let Some(&(_, ok)) = self.tried.iter().find(|(q, _)| *q == pass) {
            return ok;
        }
        let p = self.p;
        let known = p.memo.borrow().iter().position(|t| {
            t.pass == pass
                && t.ranges
                    .iter()
                    .all(|(off, len, d)| self.digest(*off, *len) == *d)
        });
        let (ok, data) = match known {
            Some(i) => {
                let memo = p.memo.borrow();
                (memo[i].opens, memo[i].data.clone())
            }
            None => self.try_pass(pass),
        };
        if let Err(e) = data {
            self.data = Err(e);
        }
        self.tried.push((pass, ok));
        ok
    }

    /// Tries `pass` (the keyslot it last opened first, then all) and remembers the answer.
    fn try_pass(&mut self, pass: Pass) -> (bool, std::result::Result<(), String>) {
        let Ok(h) = &self.header else {
            return (false, Ok(()));
        };
        // The keyslot it opened last, unless it is the only one (then trying it first
        // would try it twice).
        let several = h.active_keyslots().is_ok_and(|k| k.len() > 1);
        let hint = self
            .p
            .hints
            .borrow()
            .get(pass.0)
            .copied()
            .filter(|_| several);
        let unlocked = hint
            .and_then(|n| h.unlock_slot(&self.store, pass.bytes(), Some(n)).ok())
            .map_or_else(|| h.unlock(&self.store, pass.bytes()), Ok);
        let mut reads = self.header_reads.clone();
        reads.extend(self.store.take_reads());
        let mut data = Ok(());
        if let Ok(u) = &unlocked {
            self.p.hints.borrow_mut().insert(pass.0, u.keyslot);
            if let Some(plain) = &self.p.plaintext {
                let mut buf = vec![0u8; plain.len()];
                self.store.read_at(&mut buf, u.data_offset).unwrap();
                u.layout().unwrap().decrypt(0, &mut buf).unwrap();
                if &buf != plain {
                    data = Err(format!("the data does not decrypt under {pass:?}'s key"));
                }
            }
        }
        let ok = unlocked.is_ok();
        let ranges = reads
            .into_iter()
            .map(|(off, len)| (off, len, self.digest(off, len)))
            .collect();
        self.p.memo.borrow_mut().push(Tried {
            pass,
            ranges,
            opens: ok,
            data: data.clone(),
        });
        (ok, data)
    }

    /// Whether the image is the state `o`.
    fn is(&mut self, o: &Outcome) -> bool {
        match o {
            Outcome::Absent => self.header.is_err(),
            _ if self.header.is_err() => false,
            Outcome::Valid => true,
            Outcome::Opens(want) if want.is_empty() => {
                self.p.passes().into_iter().all(|pass| !self.opens(pass))
            }
            Outcome::Opens(want) => want.iter().all(|&pass| self.opens(pass)),
        }
    }

    /// Whether the image is exactly the state `o`: what it lists opens, nothing else.
    fn is_exactly(&mut self, o: &Outcome) -> bool {
        match o {
            Outcome::Absent => self.header.is_err(),
            Outcome::Valid => self.header.is_ok(),
            Outcome::Opens(want) => {
                self.header.is_ok()
                    && self
                        .p
                        .passes()
                        .into_iter()
                        .all(|pass| self.opens(pass) == want.contains(&pass))
            }
        }
    }

    /// What the image is, for a message.
    fn describe(&mut self) -> String {
        if let Err(e) = &self.header {
            return format!("no header ({e})");
        }
        let all = self.p.passes();
        let open: Vec<Pass> = all.into_iter().filter(|&pass| self.opens(pass)).collect();
        let what = if open.is_empty() {
            "a header that nothing opens".into()
        } else {
            format!("a header that {open:?} open")
        };
        format!("{what} (data: {:?})", self.data)
    }
}

/// What running one operation with every cut found.
#[derive(Debug, Default)]
pub struct Tally {
    /// Cuts tried (0 to the number of steps, the last one being the completed run).
    pub cuts: usize,
    /// Images judged.
    pub images: usize,
    /// What was wrong, one line each.
    pub failures: Vec<String>,
}

impl Prepared {
    /// The passphrases of every state the operation may leave: where nothing may open
    /// (and, after the operation, where only `after`'s may), these are tried.
    fn passes(&self) -> Vec<Pass> {
        let mut all: Vec<Pass> = Vec::new();
        for o in [&self.before, &self.after].into_iter().chain(&self.also) {
            if let Outcome::Opens(list) = o {
                all.extend(list.iter().filter(|p| !all.contains(p)).collect::<Vec<_>>());
            }
        }
        all
    }

    /// `Ok` when `bytes` is the state before or the state after (or one of `also`, and
    /// with `again` running the operation again completes it) with its data intact;
    /// otherwise what it is.
    fn judge(&self, bytes: Vec<u8>) -> std::result::Result<(), String> {
        let data = self.data_offset as usize..(self.data_offset + self.data_len) as usize;
        if bytes[data.clone()] != self.image[data] {
            return Err("the data area changed".into());
        }
        let copy = (self.again || self.before_again).then(|| bytes.clone());
        let mut img = Image::new(self, bytes);
        let before = img.is(&self.before);
        let expected = before || img.is(&self.after);
        let excepted = !expected && self.also.iter().any(|o| img.is(o));
        if !(expected || excepted) || img.data.is_err() {
            return Err(img.describe());
        }
        let must_complete = (excepted && self.again) || (before && self.before_again);
        match copy {
            Some(bytes) if must_complete => self.run_again(bytes).map_err(|e| {
                let what = img.describe();
                format!("{what}, and run again on it the operation {e}")
            }),
            _ => Ok(()),
        }
    }

    /// Runs the operation (without a cut) on `bytes`, which must leave exactly `after`.
    fn run_again(&self, bytes: Vec<u8>) -> std::result::Result<(), String> {
        let store = CutStore::new(bytes, None);
        (self.run)(&store).map_err(|e| format!("fails: {e}"))?;
        self.judge_end(store.bytes())
            .map_err(|e| format!("leaves {e}, expected exactly {:?}", self.after))
    }

    /// Whether `bytes`, the image after the operation completed, is exactly the state
    /// after.
    fn judge_end(&self, bytes: Vec<u8>) -> std::result::Result<(), String> {
        let mut img = Image::new(self, bytes);
        if img.is_exactly(&self.after) && img.data.is_ok() {
            Ok(())
        } else {
            Err(img.describe())
        }
    }
}

/// Runs `p` once to count its steps, then once per cut point `k` (after 0..=steps
/// completed writes and syncs), judging every image each cut may leave.
pub fn run_every_cut(what: &str, p: &Prepared) -> Tally {
    let mut t = Tally::default();
    if let Err(e) = p.judge(p.image.clone()) {
        panic!("{what}: the state before is {e}, expected {:?}", p.before);
    }
    let full = CutStore::new(p.image.clone(), None);
    if let Err(e) = (p.run)(&full) {
        panic!("{what}: the operation fails without a cut: {e}");
    }
    let steps = full.steps();
    if let Err(e) = p.judge_end(full.bytes()) {
        t.failures.push(format!(
            "{what}: after the operation: {e}, expected exactly {:?}",
            p.after
        ));
    }
    if steps.iter().any(|s| matches!(s, Step::Write { .. }))
        && !matches!(steps.last(), Some(Step::Sync))
    {
        t.failures.push(format!(
            "{what}: the operation returns before its last write is synced ({:?})",
            steps.last()
        ));
    }
    for k in 0..=steps.len() {
        let store = CutStore::new(p.image.clone(), Some(k));
        let result = (p.run)(&store);
        t.cuts += 1;
        if result.is_ok() != (k == steps.len()) {
            t.failures.push(format!(
                "{what}: cut after {k} of {} steps: the operation returned {:?}",
                steps.len(),
                result.as_ref().map(|_| ()).map_err(|e| e.to_string())
            ));
        }
        let done = store.steps();
        let refused = store.refused();
        for (label, image) in crash_images(&p.image, &done, refused.as_ref()) {
            t.images += 1;
            if let Err(e) = p.judge(image) {
                let last = done.last().map_or("nothing".into(), |s| format!("{s:?}"));
                t.failures.push(format!(
                    "{what}: cut after step {k}/{} ({last}; next {refused:?}), {label}: {e}; \
                     expected {:?} or {:?}",
                    steps.len(),
                    p.before,
                    p.after,
                ));
            }
        }
    }
    t
}
