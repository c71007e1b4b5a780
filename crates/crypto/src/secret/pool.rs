//! [`Region`]: a block of secret memory. Small secrets share pages: up to 2 KiB (an
//! expanded key, a typed passphrase) take a slot of a size class (32 bytes to 2 KiB, powers
//! of two) in a chunk of 16 KiB of secret [`Pages`]; larger ones get pages of their own.
//! Making a key then costs a lock and a bitmap search instead of four system calls and a
//! page fault (mapping and unmapping `memfd_secret` pages takes some 80 us here, which
//! matters wherever keys are made often: zone keys, the test suites).
//!
//! A freed slot is wiped before it is marked free, so every free slot is zero and a new
//! block is always zeroed. A chunk whose last slot is freed is unmapped (wiped first),
//! unless it is the only one of its class, which is kept for the next key. Slots are
//! aligned to their size (chunks are page-aligned), pages to the page.
//!
//! One of the three leaves with `unsafe` of the secret types (with `pages.rs` and
//! `boxed.rs`): the slot's view of its bytes.
#![allow(unsafe_code)]

use super::pages::{page_size, Pages, Protection};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};
use zeroize::Zeroize;

/// The slot sizes.
const CLASSES: [usize; 7] = [32, 64, 128, 256, 512, 1024, 2048];
/// Bytes per chunk (at least a page).
const CHUNK: usize = 16 << 10;

/// Pages cut into slots of one size; bit `i` of `used` is slot `i`.
struct Chunk {
    pages: Pages,
    used: Vec<u64>,
    slots: usize,
    in_use: usize,
}

impl Chunk {
    fn new(size: usize) -> Chunk {
        let pages = Pages::new(CHUNK.max(page_size()));
        let slots = pages.bytes().len() / size;
        Chunk {
            pages,
            used: vec![0; slots.div_ceil(64)],
            slots,
            in_use: 0,
        }
    }

    /// Takes a free slot; returns its index.
    fn take(&mut self) -> Option<usize> {
        if self.in_use == self.slots {
            return None;
        }
        let (w, word) = self.used.iter_mut().enumerate().find(|(_, w)| **w != !0)?;
        let i = w * 64 + word.trailing_ones() as usize;
        if i >= self.slots {
            return None;
        }
        *word |= 1 << (i % 64);
        self.in_use += 1;
        Some(i)
    }

    /// Whether `ptr` lies in this chunk.
    fn holds(&self, ptr: NonNull<u8>) -> bool {
        let start = self.pages.start().as_ptr() as usize;
        (start..start + self.pages.bytes().len()).contains(&(ptr.as_ptr() as usize))
    }
}

/// The chunks of each class.
static POOL: Mutex<[Vec<Chunk>; CLASSES.len()]> = Mutex::new([const { Vec::new() }; 7]);

fn pool() -> MutexGuard<'static, [Vec<Chunk>; CLASSES.len()]> {
    // A panic while the lock was held left the bitmaps consistent (each change is one
    // statement): go on.
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A block of secret memory, zero when new, owned by this value alone.
pub(crate) struct Region(Kind);

enum Kind {
    Empty,
    /// Slot of class `class` at `ptr`, in a chunk of the pool.
    Slot {
        ptr: NonNull<u8>,
        class: usize,
        protection: Protection,
    },
    Own(Pages),
}

// SAFETY: a region is plain memory owned by this value alone (its slot's bit stays set,
// and its chunk mapped, until it is dropped); nothing in it is tied to a thread.
unsafe impl Send for Region {}
// SAFETY: shared references only read the bytes.
unsafe impl Sync for Region {}

impl Region {
    /// No memory.
    pub(crate) const fn empty() -> Region {
        Region(Kind::Empty)
    }

    /// At least `min` bytes, zeroed: a slot of the smallest class that holds them, or
    /// pages of its own beyond 2 KiB.
    pub(crate) fn new(min: usize) -> Region {
        if min == 0 {
            return Region::empty();
        }
        let Some(class) = CLASSES.iter().position(|&c| c >= min) else {
            return Region(Kind::Own(Pages::new(min)));
        };
        let size = CLASSES[class];
        let mut pool = pool();
        let chunks = &mut pool[class];
        let (chunk, i) = match chunks
            .iter_mut()
            .enumerate()
            .find_map(|(n, c)| Some((n, c.take()?)))
        {
            Some(found) => found,
            None => {
                let mut c = Chunk::new(size);
                let i = c.take().expect("a new chunk has free slots");
                chunks.push(c);
                (chunks.len() - 1, i)
            }
        };
        let pages = &chunks[chunk].pages;
        // SAFETY: slot `i` lies inside the chunk's pages (`i < slots`, `slots * size <=
        // len`), so the offset stays within one mapping.
        let ptr = unsafe { pages.start().add(i * size) };
        Region(Kind::Slot {
            ptr,
            class,
            protection: pages.protection(),
        })
    }

    /// The bytes (the whole slot or all the pages: at least what was asked for).
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.0 {
            Kind::Empty => &[],
            // SAFETY: the slot is `CLASSES[class]` bytes of a chunk that stays mapped while
            // the slot is ours (see `Send`), initialised (zero when taken), and borrowed
            // from self.
            Kind::Slot { ptr, class, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), CLASSES[*class])
            },
            Kind::Own(p) => p.bytes(),
        }
    }

    /// The bytes, mutably.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Kind::Empty => &mut [],
            // SAFETY: as in `bytes`; no other region shares the slot, and `&mut self` makes
            // this the only reference.
            Kind::Slot { ptr, class, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), CLASSES[*class])
            },
            Kind::Own(p) => p.bytes_mut(),
        }
    }

    /// The start, aligned to the slot size (at most a page) or to the page.
    pub(crate) fn start(&self) -> NonNull<u8> {
        match &self.0 {
            Kind::Empty => NonNull::dangling(),
            Kind::Slot { ptr, .. } => *ptr,
            Kind::Own(p) => p.start(),
        }
    }

    /// How this memory is protected.
    pub(crate) fn protection(&self) -> Protection {
        match &self.0 {
            Kind::Empty => Protection::Secretmem,
            Kind::Slot { protection, .. } => *protection,
            Kind::Own(p) => p.protection(),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        let Kind::Slot { ptr, class, .. } = self.0 else {
            return;
        };
        // Wiped before it is free again: free slots are always zero.
        self.bytes_mut().zeroize();
        let size = CLASSES[class];
        let mut pool = pool();
        let chunks = &mut pool[class];
        let Some(n) = chunks.iter().position(|c| c.holds(ptr)) else {
            unreachable!("a slot's chunk stays in the pool while the slot is in use");
        };
        let c = &mut chunks[n];
        let i = (ptr.as_ptr() as usize - c.pages.start().as_ptr() as usize) / size;
        c.used[i / 64] &= !(1 << (i % 64));
        c.in_use -= 1;
        if c.in_use == 0 && chunks.len() > 1 {
            chunks.swap_remove(n);
        }
    }
}
