//! Reusable buffers of one size (a chunk, at least two sectors) for encrypted writes and
//! read-modify-write edges: steady state allocates nothing. A buffer is allocated only
//! when more are in use at once than ever before. Buffers held plaintext (edges): they
//! are wiped before their memory is freed.

use crate::lock;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use zeroize::Zeroize;

/// Free buffers kept in the pool beyond which returned buffers are dropped.
const MAX_POOLED: usize = 64;

pub(super) struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    len: usize,
}

/// A buffer taken from the pool, returned on drop.
pub(super) struct Pooled<'a> {
    pool: &'a BufferPool,
    buf: Vec<u8>,
}

impl BufferPool {
    /// A pool of buffers of `len` bytes.
    pub(super) fn new(len: usize) -> BufferPool {
        BufferPool {
            free: Mutex::new(Vec::new()),
            len,
        }
    }

    /// A free buffer, or a new one.
    pub(super) fn take(&self) -> Pooled<'_> {
        let buf = lock(&self.free).pop().unwrap_or_else(|| vec![0; self.len]);
        Pooled { pool: self, buf }
    }
}

impl Deref for Pooled<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        for buf in lock(&self.free).iter_mut() {
            buf.zeroize();
        }
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let mut free = lock(&self.pool.free);
        if free.len() < MAX_POOLED {
            free.push(std::mem::take(&mut self.buf));
        } else {
            self.buf.zeroize();
        }
    }
}
