//! CryptoPro key meshing (RFC 4357 section 2.3), used by GOST 28147-89 only: every
//! 1024 bytes the key becomes `D_K(C)` for a fixed constant `C`, and a feedback or counter
//! register is re-encrypted under the new key (the MAC changes only its key).
//!
//! The chain of meshed keys depends on the key only, so [`MeshChain`] computes it once, on
//! demand, and shares it between every message and stream of the key. It lives in secret
//! memory of a fixed size (8 KiB), so it never moves and leaves no key in freed memory.

use super::{Core, Order};
use crate::secret::Secret;
use std::sync::Mutex;
use zeroize::Zeroize;

/// The CryptoPro key meshing constant C (RFC 4357 section 2.3.2).
const MESH_C: [u8; 32] = [
    0x69, 0x00, 0x72, 0x22, 0x64, 0xC9, 0x04, 0x23, 0x8D, 0x3A, 0xDB, 0x96, 0x46, 0xE9, 0x2A, 0xC4,
    0x18, 0xFE, 0xAC, 0x94, 0x00, 0xED, 0x07, 0x12, 0xC0, 0x86, 0xDC, 0xC2, 0xEF, 0x4C, 0xA9, 0x2B,
];

/// Bytes between two key meshings.
pub(crate) const MESH_BYTES: usize = 1024;
/// Blocks between two key meshings.
pub(crate) const MESH_BLOCKS: u64 = (MESH_BYTES / 8) as u64;
/// Meshed keys cached per key (256 KiB of data, 8 KiB of keys).
const MESH_CACHE: u64 = 256;

impl Core {
    /// One meshing step: the key becomes the ECB decryption of the constant C under the
    /// current key (C read little-endian: only GOST 28147-89 meshes).
    pub(crate) fn mesh(&mut self) {
        let mut nk = [0u32; 8];
        for i in 0..4 {
            let y = self.s.decrypt(Order::Gost89.load(&MESH_C[8 * i..]));
            nk[2 * i] = y as u32;
            nk[2 * i + 1] = (y >> 32) as u32;
        }
        self.s.k = nk;
        nk.zeroize();
    }
}

/// The key meshing chain of one key: `keys[i]` is the key of bytes
/// `1024 i .. 1024 (i + 1)`. A meshing step then costs a lookup instead of four block
/// decryptions. The chain has room for all the keys it caches from the start, in
/// [`Secret`] memory (locked, out of core dumps, wiped on drop): it never moves, so no
/// copy of a key is left behind.
pub(crate) struct MeshChain {
    chain: Mutex<Chain>,
}

/// The keys computed so far: `keys[..len]`.
struct Chain {
    keys: Secret<[[u32; 8]; MESH_CACHE as usize]>,
    len: usize,
}

impl std::fmt::Debug for MeshChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MeshChain { .. }")
    }
}

impl MeshChain {
    pub(crate) fn new(core: &Core) -> MeshChain {
        let mut keys = Secret::new([[0u32; 8]; MESH_CACHE as usize]);
        keys[0] = core.s.k;
        MeshChain {
            chain: Mutex::new(Chain { keys, len: 1 }),
        }
    }

    /// Sets `core`'s key to the key of section `i`; callers visit sections in order, so
    /// `core` holds the key of section `i - 1`. Past `MESH_CACHE` sections (a stream of
    /// gigabytes) the key is meshed in place instead of cached, to bound the memory.
    pub(crate) fn apply(&self, i: u64, core: &mut Core) {
        if i >= MESH_CACHE {
            core.mesh();
            return;
        }
        let i = i as usize;
        let mut guard = self.chain.lock().unwrap_or_else(|e| e.into_inner());
        let chain = &mut *guard;
        while chain.len <= i {
            let mut c = core.clone();
            c.s.k = chain.keys[chain.len - 1];
            c.mesh();
            chain.keys[chain.len] = c.s.k;
            chain.len += 1;
        }
        core.s.k = chain.keys[i];
    }

    /// Before block `blocks` of a message: `Some(section)` when a meshing boundary is
    /// reached there (never before the first block).
    #[inline(always)]
    pub(crate) fn boundary(blocks: u64) -> Option<u64> {
        (blocks > 0 && blocks.is_multiple_of(MESH_BLOCKS)).then_some(blocks / MESH_BLOCKS)
    }

    /// Bytes from block `blocks` to the next meshing boundary.
    #[inline(always)]
    pub(crate) fn to_boundary(blocks: u64) -> usize {
        (MESH_BLOCKS - blocks % MESH_BLOCKS) as usize * 8
    }
}
