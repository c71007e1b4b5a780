//! Memory for secrets: passphrases, volume keys, derived keys and the expanded keys of
//! this crate's ciphers live in memory of their own, never on the heap, so that no copy
//! of them is swapped out, written into a core dump, or left behind in freed memory.
//!
//! - [`SecretBytes`]: a byte buffer (a passphrase, a key) that grows without leaving
//!   copies: a full buffer moves to a new block and the old one is wiped;
//! - [`Secret`]: one value (an expanded key) in secret memory, as a `Box` would hold it;
//! - [`protection`]: how well the secrets of this process could be protected (whether
//!   `RLIMIT_MEMLOCK` allowed locking them), for a warning;
//! - [`forbid_core_dumps`]: `PR_SET_DUMPABLE` 0, for processes that hold keys for long;
//! - [`scrub_stack`]: zeroes the stack below the caller, where the functions it called
//!   left the temporaries of a key they built.
//!
//! Inside: `pages.rs` maps whole pages, from `memfd_secret(2)` where the kernel has it,
//! otherwise anonymous pages locked with `mlock(2)` and marked `MADV_DONTDUMP` (it says
//! what each gives); `pool.rs` cuts chunks of such pages into slots for the small secrets
//! (up to 2 KiB), so that making a key needs no system call. These types are for the keys
//! a process holds, not for bulk data. What they cannot cover: copies the compiler leaves
//! in registers and on the stack while a value is built or moved in, and what other
//! libraries do with a secret they are lent (a KDF's internal state).

mod boxed;
mod pages;
mod pool;

pub use boxed::Secret;
pub use pages::{forbid_core_dumps, protection, Protection};

use pool::Region;
use std::fmt;
use std::ops::{Deref, DerefMut};
use zeroize::Zeroize;

/// Bytes in secret memory: a fixed capacity, grown only by moving to a new block (the old
/// one is wiped). Bytes beyond the length are always zero. `Debug` shows the length only.
pub struct SecretBytes {
    region: Region,
    len: usize,
}

impl SecretBytes {
    /// An empty buffer (no memory until the first byte).
    pub const fn new() -> SecretBytes {
        SecretBytes {
            region: Region::empty(),
            len: 0,
        }
    }

    /// An empty buffer with room for at least `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> SecretBytes {
        SecretBytes {
            region: Region::new(capacity),
            len: 0,
        }
    }

    /// `len` zero bytes (for a key to be derived or read into).
    pub fn zeroed(len: usize) -> SecretBytes {
        SecretBytes {
            region: Region::new(len),
            len,
        }
    }

    /// A copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> SecretBytes {
        let mut s = SecretBytes::with_capacity(bytes.len());
        s.extend_from_slice(bytes);
        s
    }

    /// Bytes it can hold without moving.
    pub fn capacity(&self) -> usize {
        self.region.bytes().len()
    }

    /// Makes room for `additional` more bytes: when full, the bytes move to a new block of
    /// at least twice the capacity and the old one is wiped.
    pub fn reserve(&mut self, additional: usize) {
        let need = self
            .len
            .checked_add(additional)
            .expect("a secret smaller than the address space");
        if need <= self.capacity() {
            return;
        }
        let mut bigger = Region::new(need.max(2 * self.capacity()));
        bigger.bytes_mut()[..self.len].copy_from_slice(self);
        self.region = bigger;
    }

    /// Appends `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        let end = self.len + bytes.len();
        self.region.bytes_mut()[self.len..end].copy_from_slice(bytes);
        self.len = end;
    }

    /// Appends one byte.
    pub fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    /// The room after the bytes (all zero), to read into directly; then [`set_len`] takes
    /// what was read.
    ///
    /// [`set_len`]: SecretBytes::set_len
    pub fn spare_capacity_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.region.bytes_mut()[len..]
    }

    /// Sets the length (at most the capacity): longer takes bytes written into the spare
    /// capacity, shorter wipes the bytes cut off.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "length beyond the capacity");
        if len < self.len {
            self.region.bytes_mut()[len..self.len].zeroize();
        }
        self.len = len;
    }

    /// Wipes the bytes and makes the buffer empty (keeping its memory).
    pub fn clear(&mut self) {
        self.set_len(0);
    }

    /// How these bytes' memory is protected (`None` before the first byte).
    pub fn protection(&self) -> Option<Protection> {
        (self.capacity() > 0).then(|| self.region.protection())
    }
}

impl Default for SecretBytes {
    fn default() -> SecretBytes {
        SecretBytes::new()
    }
}

impl Deref for SecretBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.region.bytes()[..self.len]
    }
}

impl DerefMut for SecretBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.region.bytes_mut()[..len]
    }
}

impl Clone for SecretBytes {
    fn clone(&self) -> SecretBytes {
        SecretBytes::from_slice(self)
    }
}

impl From<&[u8]> for SecretBytes {
    fn from(bytes: &[u8]) -> SecretBytes {
        SecretBytes::from_slice(bytes)
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretBytes")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Zeroes at least `bytes` of the stack below the caller's frame, where the functions it
/// has called (and that have returned) left their locals: the temporaries of a key built
/// there before it was moved into secret memory, a KDF's state. Volatile writes, in 4 KiB
/// frames one below the other.
#[inline(never)]
pub fn scrub_stack(bytes: usize) {
    let mut frame = [0u64; 512];
    frame.zeroize();
    if bytes > 4096 {
        scrub_stack(bytes - 4096);
    }
    // Used after the call, so that the frames stay one below the other (no tail call).
    std::hint::black_box(&frame);
}

#[cfg(test)]
mod tests;
