//! The engine's path for sectors stored with tags ([`Layout::is_authenticated`]): the same
//! chunks, worker pool and edge locks as the plain path, with the stored form of each
//! chunk in a pooled buffer.
//!
//! - **Reads** read a chunk's stored sectors into the pooled buffer, verify every tag of
//!   the chunk, and only then decrypt into the caller's buffer ([`Layout::open`]); a bad
//!   tag fails the request with `InvalidData` naming the sector, and nothing of that
//!   chunk reaches the caller.
//! - **Writes** encrypt and tag into the pooled buffer ([`Layout::seal`]) and write whole
//!   stored sectors.
//! - **Partial sectors** are read, verified, modified and written back under the edge
//!   locks: a partial write into a sector whose tag fails is refused, so it never seals
//!   damaged data under a fresh tag.
//!
//! [`Layout::is_authenticated`]: crate::layout::Layout::is_authenticated
//! [`Layout::open`]: crate::layout::Layout::open
//! [`Layout::seal`]: crate::layout::Layout::seal

use super::{crypt_error, Patch, Volume};
use std::io;

impl Volume {
    /// Bytes that `sectors` sectors take in the store.
    fn stored_len(&self, sectors: usize) -> usize {
        sectors * self.layout.stored_sector_len()
    }

    /// One chunk of whole sectors from `first`: read in stored form, verified, decrypted
    /// into `chunk`.
    pub(super) fn auth_read_chunk(&self, chunk: &mut [u8], first: u64) -> io::Result<()> {
        let mut scratch = self.buffers.take();
        let stored = &mut scratch[..self.stored_len(chunk.len() / self.sector)];
        self.store.read_at(stored, self.layout.position(first))?;
        self.layout.open(first, stored, chunk).map_err(crypt_error)
    }

    /// One chunk of whole sectors from `first`: sealed into `scratch`. Returns the length
    /// of its stored form there.
    pub(super) fn auth_seal_chunk(
        &self,
        scratch: &mut [u8],
        chunk: &[u8],
        first: u64,
    ) -> io::Result<usize> {
        let stored = &mut scratch[..self.stored_len(chunk.len() / self.sector)];
        self.layout
            .seal(first, chunk, stored)
            .map_err(crypt_error)?;
        Ok(stored.len())
    }

    /// Reads `n` (1 or 2) sectors from `first`, verified and decrypted into a pooled
    /// buffer, for `f`.
    pub(super) fn auth_plain_sectors(
        &self,
        first: u64,
        n: usize,
        f: impl FnOnce(&[u8]),
    ) -> io::Result<()> {
        let mut scratch = self.buffers.take();
        let (stored, rest) = scratch.split_at_mut(self.stored_len(n));
        let plain = &mut rest[..n * self.sector];
        self.store.read_at(stored, self.layout.position(first))?;
        self.layout
            .open(first, stored, plain)
            .map_err(crypt_error)?;
        f(plain);
        Ok(())
    }

    /// Read-verify-modify-write of `n` (1 or 2) sectors from `first` with `patch`. Holds
    /// the sectors' edge locks throughout; a sector whose tag fails is left as it is and
    /// the write fails.
    pub(super) fn auth_modify_sectors(&self, first: u64, n: usize, patch: Patch) -> io::Result<()> {
        let Patch { within, data, fua } = patch;
        let _edges = self.locks.lock(first, first + n as u64 - 1);
        let mut scratch = self.buffers.take();
        let (stored, rest) = scratch.split_at_mut(self.stored_len(n));
        let plain = &mut rest[..n * self.sector];
        let at = self.layout.position(first);
        self.store.read_at(stored, at)?;
        self.layout
            .open(first, stored, plain)
            .map_err(crypt_error)?;
        plain[within..within + data.len()].copy_from_slice(data);
        self.layout
            .seal(first, plain, stored)
            .map_err(crypt_error)?;
        self.store_write(stored, at, fua)
    }
}
