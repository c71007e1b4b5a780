//! Memory for secrets: passphrases, volume keys, derived keys and the expanded keys of
//! this crate's ciphers live in pages of their own, never on the heap, so that no copy
//! of them is swapped out, written into a core dump, or left behind in freed memory.
//!
//! - [`SecretBytes`]: a byte buffer (a passphrase, a key) that grows without leaving
//!   copies: a full buffer moves to new pages and the old ones are wiped;
//! - [`Secret`]: one value (an expanded key) in pages of its own, as a `Box` would hold it;
//! - [`protection`]: how well the secrets of this process could be protected (whether
//!   `RLIMIT_MEMLOCK` allowed locking them), for a warning;
//! - [`forbid_core_dumps`]: `PR_SET_DUMPABLE` 0, for processes that hold keys for long.
//!
//! The pages come from `memfd_secret(2)` where the kernel has it, otherwise from anonymous
//! mappings locked with `mlock(2)` and marked `MADV_DONTDUMP` (`region.rs` says what each
//! gives). Every secret takes at least one page: these types are for the few keys a
//! process holds, not for bulk data. What they cannot cover: copies the compiler leaves
//! in registers and on the stack while a value is built or moved in, and what other
//! libraries do with a secret they are lent (a KDF's internal state).

mod boxed;
mod region;

pub use boxed::Secret;
pub use region::{forbid_core_dumps, protection, Protection};

use region::Region;
use std::fmt;
use std::ops::{Deref, DerefMut};
use zeroize::Zeroize;

/// Bytes in secret pages: a fixed capacity, grown only by moving to new pages (the old ones
/// are wiped). Bytes beyond the length are always zero. `Debug` shows the length only.
pub struct SecretBytes {
    region: Region,
    len: usize,
}

impl SecretBytes {
    /// An empty buffer (no pages until the first byte).
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

    /// Makes room for `additional` more bytes: when full, the bytes move to new pages of at
    /// least twice the capacity and the old pages are wiped.
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

    /// Wipes the bytes and makes the buffer empty (keeping its pages).
    pub fn clear(&mut self) {
        self.set_len(0);
    }

    /// How these bytes' pages are protected (`None` before the first byte).
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

#[cfg(test)]
mod tests;
