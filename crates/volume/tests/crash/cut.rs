//! The power cut: an in-memory [`Store`] that records every write and sync and refuses
//! every one after the first `budget` of them, and the images a crash at that point may
//! leave on the disk.
//!
//! The crash model is the page cache's. A write that a later sync covered survives. A
//! write after the last sync may or may not have reached the disk, independently of the
//! others and in any order, and the write the cut interrupted, or any write still in the
//! cache, may be torn: only some of its blocks reached the disk. So a cut after step k
//! leaves the synced state plus any subset of the pending writes ([`crash_images`]
//! enumerates all subsets when there are few, and the two extremes otherwise), plus each
//! pending or interrupted write torn at a block boundary ([`TEAR`] bytes: the page and
//! physical sector size, which the disks and file systems this runs on write whole) with
//! only its first or only its last half of blocks present.

use sectorcrypt_volume::Store;
use std::fmt;
use std::io;
use std::sync::{Mutex, MutexGuard};

/// The unit a torn write keeps or loses whole.
pub const TEAR: u64 = 4096;

/// Pending writes up to which every subset is tried.
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

/// The part of a write a tear keeps: its first (`head`) or last half of [`TEAR`] blocks,
/// or `None` when the write lies within one block (it lands whole or not at all).
fn torn(at: u64, data: &[u8], head: bool) -> Option<(u64, &[u8])> {
    let end = at + data.len() as u64;
    let first_boundary = (at / TEAR + 1) * TEAR;
    if first_boundary >= end {
        return None;
    }
    let blocks = (end - 1) / TEAR - at / TEAR + 1;
    let cut = (at / TEAR + blocks / 2) * TEAR;
    let cut = cut.max(first_boundary);
    let split = (cut - at) as usize;
    Some(if head {
        (at, &data[..split])
    } else {
        (cut, &data[split..])
    })
}

/// The images a crash may leave when the power went after `steps` (starting from `base`)
/// while `refused` was under way, each with a label saying which writes it holds.
pub fn crash_images(base: &[u8], steps: &[Step], refused: Option<&Step>) -> Vec<(String, Vec<u8>)> {
    let last_sync = steps.iter().rposition(|s| matches!(s, Step::Sync));
    let durable_end = last_sync.map_or(0, |i| i + 1);
    let mut durable = base.to_vec();
    for s in &steps[..durable_end] {
        if let Step::Write { at, data } = s {
            apply(&mut durable, *at, data);
        }
    }
    let pending: Vec<(u64, &[u8])> = steps[durable_end..]
        .iter()
        .filter_map(|s| match s {
            Step::Write { at, data } => Some((*at, data.as_slice())),
            Step::Sync => None,
        })
        .collect();
    let n = pending.len();
    let subsets: Vec<u64> = if n <= ALL_SUBSETS_UP_TO {
        (0..1u64 << n).collect()
    } else {
        vec![0, (1u64 << n) - 1]
    };
    let mut out = Vec::new();
    for mask in subsets {
        let mut img = durable.clone();
        for (i, (at, data)) in pending.iter().enumerate() {
            if mask >> i & 1 == 1 {
                apply(&mut img, *at, data);
            }
        }
        let label = if mask == 0 {
            "only synced writes".to_string()
        } else if mask == (1u64 << n) - 1 {
            "every write".to_string()
        } else {
            format!("synced + pending writes {mask:#b}")
        };
        out.push((label, img));
    }
    // Tears: a pending write (those before it present) or the refused one (every pending
    // write present) with only half of its blocks.
    let refused_write = match refused {
        Some(Step::Write { at, data }) => Some((*at, data.as_slice())),
        _ => None,
    };
    let tearable = pending.iter().copied().chain(refused_write);
    for (i, (at, data)) in tearable.enumerate() {
        for head in [true, false] {
            let Some((t_at, t_data)) = torn(at, data, head) else {
                continue;
            };
            let mut img = durable.clone();
            for (p_at, p_data) in &pending[..i.min(n)] {
                apply(&mut img, *p_at, p_data);
            }
            apply(&mut img, t_at, t_data);
            let which = if i < n { "pending" } else { "interrupted" };
            let half = if head { "first" } else { "last" };
            out.push((
                format!("{which} write {at}+{} torn ({half} half)", data.len()),
                img,
            ));
        }
    }
    out
}
