//! The power cut: an in-memory [`Store`] that records every write and sync and refuses
//! every one after the first `budget` of them, and the images a crash at that point may
//! leave on the disk.
//!
//! The crash model is the page cache's. A write that a later sync covered survives. A
//! write after the last sync, and the write the cut interrupted, may or may not have
//! reached the disk, independently of the others and in any order, and may be torn: only
//! some of its blocks reached it. So a cut after step k leaves the synced state plus, of
//! each pending write, nothing, all, or its first or last half of blocks ([`TEAR`] bytes:
//! the page and physical sector size, which the disks and file systems this runs on write
//! whole), torn after its first block, in its middle or before its last block.
//! [`crash_images`] tries every combination while there are at most 256 (two pending
//! writes of several blocks and two of one block, say), and otherwise every subset of
//! whole writes (up to six) and each tear of each write with the earlier writes landed
//! and the later ones lost. The long variant (`SECTORCRYPT_CRASH_FULL=1`) tears at every
//! 512-byte boundary and tries every combination while there are at most 16384.

use sectorcrypt_volume::Store;
use std::fmt;
use std::io;
use std::sync::{Mutex, MutexGuard};

/// The unit a torn write keeps or loses whole.
pub const TEAR: u64 = 4096;

/// Pending writes up to which every subset of whole writes is tried, when there are too
/// many combinations with tears.
const ALL_SUBSETS_UP_TO: usize = 6;

/// One step of I/O an operation made.
#[derive(Clone)]
pub enum Step {
    /// `data` written at `at`.
    Write { at: u64, data: Vec<u8> },
    /// A sync.
    Sync,
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Write { at, data } => write!(f, "write {at}+{}", data.len()),
            Step::Sync => write!(f, "sync"),
        }
    }
}

#[derive(Debug)]
struct State {
    bytes: Vec<u8>,
    steps: Vec<Step>,
    /// The step the cut refused (the one that was under way).
    refused: Option<Step>,
    /// The ranges read since [`CutStore::take_reads`] was last called.
    reads: Vec<(u64, usize)>,
}

/// An image in memory whose writes and syncs are recorded, and refused (as a device whose
/// power went) once `budget` of them have completed.
pub struct CutStore {
    state: Mutex<State>,
    budget: Option<usize>,
}

impl fmt::Debug for CutStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CutStore")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl CutStore {
    /// An image holding `bytes` that allows `budget` writes and syncs (`None`: all).
    pub fn new(bytes: Vec<u8>, budget: Option<usize>) -> CutStore {
        CutStore {
            state: Mutex::new(State {
                bytes,
                steps: Vec::new(),
                refused: None,
                reads: Vec::new(),
            }),
            budget,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the image holds now (every completed write, synced or not).
    pub fn bytes(&self) -> Vec<u8> {
        self.lock().bytes.clone()
    }

    /// The writes and syncs that completed.
    pub fn steps(&self) -> Vec<Step> {
        self.lock().steps.clone()
    }

    /// The first write or sync that the cut refused.
    pub fn refused(&self) -> Option<Step> {
        self.lock().refused.clone()
    }

    /// The ranges (offset, length) read since the last call.
    pub fn take_reads(&self) -> Vec<(u64, usize)> {
        std::mem::take(&mut self.lock().reads)
    }

    /// Records `step` if the budget allows it; otherwise notes it as refused.
    fn admit(&self, s: &mut State, step: Step) -> io::Result<()> {
        if self.budget.is_some_and(|b| s.steps.len() >= b) {
            s.refused.get_or_insert(step);
            return Err(io::Error::other("power cut (simulated)"));
        }
        s.steps.push(step);
        Ok(())
    }
}

impl Store for CutStore {
    fn name(&self) -> &str {
        "crash image"
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.lock().bytes.len() as u64)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut s = self.lock();
        s.reads.push((offset, buf.len()));
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= s.bytes.len() as u64 => {
                buf.copy_from_slice(&s.bytes[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.lock();
        let end = offset as usize + buf.len();
        if end > s.bytes.len() {
            // A fixed-size device: writing past its end fails, and is a bug to report.
            return Err(io::Error::other(format!(
                "write {offset}+{} past the end of the {}-byte image",
                buf.len(),
                s.bytes.len()
            )));
        }
        let step = Step::Write {
            at: offset,
            data: buf.to_vec(),
        };
        self.admit(&mut s, step)?;
        s.bytes[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.lock();
        self.admit(&mut s, Step::Sync)
    }
}

/// Applies a write to `image`.
fn apply(image: &mut [u8], at: u64, data: &[u8]) {
    image[at as usize..at as usize + data.len()].copy_from_slice(data);
}

/// How much of a write reached the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Landed {
    None,
    All,
    /// Only the part before byte `split` of the write (a boundary of [`tear_unit`]
    /// blocks).
    Head(usize),
    /// Only the part from byte `split` on.
    Tail(usize),
}

impl Landed {
    fn mark(self) -> String {
        match self {
            Landed::None => "-".into(),
            Landed::All => "+".into(),
            Landed::Head(n) => format!("<{n}"),
            Landed::Tail(n) => format!(">{n}"),
        }
    }

    /// The part of the write at `at` that landed.
    fn part(self, at: u64, data: &[u8]) -> Option<(u64, &[u8])> {
        match self {
            Landed::None => None,
            Landed::All => Some((at, data)),
            Landed::Head(n) => Some((at, &data[..n])),
            Landed::Tail(n) => Some((at + n as u64, &data[n..])),
        }
    }
}

/// The unit a torn write keeps or loses whole: [`TEAR`], or 512 bytes (the smallest
/// sector) when `SECTORCRYPT_CRASH_FULL` is set.
pub fn tear_unit() -> u64 {
    if full() {
        512
    } else {
        TEAR
    }
}

/// Whether the long variant runs (`SECTORCRYPT_CRASH_FULL=1`): tears at 512 bytes and
/// every combination of many more pending writes.
pub fn full() -> bool {
    std::env::var_os("SECTORCRYPT_CRASH_FULL").is_some_and(|v| v != "0")
}

/// Where a write of `len` bytes at `at` may tear (byte offsets into it): after its first
/// block, in its middle and before its last block (every boundary in the long variant).
/// None when it lies within one block: it lands whole or not at all.
fn tears(at: u64, len: usize) -> Vec<usize> {
    let unit = tear_unit();
    let end = at + len as u64;
    let boundaries: Vec<usize> = (at / unit + 1..)
        .map(|b| b * unit)
        .take_while(|&b| b < end)
        .map(|b| (b - at) as usize)
        .collect();
    if full() || boundaries.len() <= 3 {
        return boundaries;
    }
    let mut picked = vec![
        boundaries[0],
        boundaries[boundaries.len() / 2],
        boundaries[boundaries.len() - 1],
    ];
    picked.dedup();
    picked
}

/// What each of `writes` may have left: nothing, all of it, or (a write of more than one
/// block) a part before or after one of its tears.
fn landings(writes: &[(u64, &[u8])]) -> Vec<Vec<Landed>> {
    writes
        .iter()
        .map(|&(at, data)| {
            let mut l = vec![Landed::None, Landed::All];
            for n in tears(at, data.len()) {
                l.extend([Landed::Head(n), Landed::Tail(n)]);
            }
            l
        })
        .collect()
}

/// Combinations of landings to try: all of them while there are at most `limit`;
/// otherwise every subset of whole writes (when few enough) and each write torn with
/// those before it landed and those after it lost.
fn combinations(choices: &[Vec<Landed>], limit: usize) -> Vec<Vec<Landed>> {
    let n = choices.len();
    let count = choices
        .iter()
        .try_fold(1usize, |c, l| c.checked_mul(l.len()));
    if count.is_some_and(|c| c <= limit) {
        let mut out = vec![Vec::new()];
        for l in choices {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    l.iter().map(move |&x| {
                        let mut v = prefix.clone();
                        v.push(x);
                        v
                    })
                })
                .collect();
        }
        return out;
    }
    let mut out = Vec::new();
    if n <= ALL_SUBSETS_UP_TO {
        for mask in 0..1u64 << n {
            out.push(
                (0..n)
                    .map(|i| {
                        if mask >> i & 1 == 1 {
                            Landed::All
                        } else {
                            Landed::None
                        }
                    })
                    .collect(),
            );
        }
    } else {
        out.push(vec![Landed::None; n]);
        out.push(vec![Landed::All; n]);
    }
    for (i, l) in choices.iter().enumerate() {
        for &t in l
            .iter()
            .filter(|t| matches!(t, Landed::Head(_) | Landed::Tail(_)))
        {
            let mut v = vec![Landed::All; i];
            v.push(t);
            v.resize(n, Landed::None);
            out.push(v);
        }
    }
    out
}

/// The images a crash may leave when the power went after `steps` (starting from `base`)
/// while `refused` was under way, each with a label saying what landed of the writes
/// after the last sync (`+` all, `-` nothing, `<n`/`>n` the part before/after byte n;
/// the interrupted write last). Made one at a time: there may be thousands.
pub fn crash_images<'a>(
    base: &[u8],
    steps: &'a [Step],
    refused: Option<&'a Step>,
) -> impl Iterator<Item = (String, Vec<u8>)> + 'a {
    let last_sync = steps.iter().rposition(|s| matches!(s, Step::Sync));
    let durable_end = last_sync.map_or(0, |i| i + 1);
    let mut durable = base.to_vec();
    for s in &steps[..durable_end] {
        if let Step::Write { at, data } = s {
            apply(&mut durable, *at, data);
        }
    }
    // The interrupted write may have landed as much as a pending one.
    let writes: Vec<(u64, &[u8])> = steps[durable_end..]
        .iter()
        .chain(refused)
        .filter_map(|s| match s {
            Step::Write { at, data } => Some((*at, data.as_slice())),
            Step::Sync => None,
        })
        .collect();
    let limit = if full() { 1 << 14 } else { 256 };
    let combos = combinations(&landings(&writes), limit);
    combos.into_iter().map(move |combo| {
        let mut img = durable.clone();
        for (&(at, data), landed) in writes.iter().zip(&combo) {
            if let Some((at, data)) = landed.part(at, data) {
                apply(&mut img, at, data);
            }
        }
        let landed: Vec<String> = writes
            .iter()
            .zip(&combo)
            .map(|((at, d), l)| format!("{at}+{} {}", d.len(), l.mark()))
            .collect();
        (format!("synced writes, then [{}]", landed.join(", ")), img)
    })
}

#[test]
fn pending_writes_land_in_every_combination_of_whole_and_torn() {
    let base = vec![0u8; 32768];
    let steps = vec![
        Step::Write {
            at: 0,
            data: vec![1; 16384],
        },
        Step::Write {
            at: 16384,
            data: vec![2; 16384],
        },
    ];
    let images: Vec<_> = crash_images(&base, &steps, None).collect();
    // Each write: nothing, all, or the part before or after each of its three block
    // boundaries (4 KiB blocks; the long variant tears at 512 bytes).
    let per_write = 2 + 2 * (16384 / tear_unit() as usize - 1);
    assert_eq!(images.len(), per_write * per_write);
    let block = |img: &[u8], i: usize| img[i * 4096];
    // Both torn at once: the first write's head and the second's tail.
    assert!(images.iter().any(|(_, img)| {
        let blocks: Vec<u8> = (0..8).map(|i| block(img, i)).collect();
        blocks == [1, 0, 0, 0, 0, 0, 0, 2]
    }));
    // Nothing and everything.
    assert!(images.iter().any(|(_, img)| img.iter().all(|&b| b == 0)));
    assert!(images.iter().any(
        |(_, img)| img[..16384].iter().all(|&b| b == 1) && img[16384..].iter().all(|&b| b == 2)
    ));
}
