//! GELI's unit tags computed lane-parallel: a batch of independent units, one per lane,
//! goes through every step of the tag together, on any [`Lanes`] kernel.
//!
//! For a batch of units at byte offsets `o_l` with messages `m_l`:
//!
//! 1. unit keys `k_l = SHA-256(akey || le64(o_l))`: one compression per lane from the
//!    midstate after `akey` (computed once per key), the block being `le64(o_l)`, the
//!    padding and the length 72 * 8;
//! 2. HMAC's inner and outer states: one compression each of `k_l ^ ipad` and
//!    `k_l ^ opad` from the hash's initial state (the key is 32 bytes, shorter than a
//!    block, so it is used as it is);
//! 3. the inner hash over `m_l`: the whole blocks straight from the caller's buffer, then
//!    the last partial block with the padding (one or two blocks, from a buffer here);
//!    units of different length share a batch (a lane with fewer blocks stops early);
//! 4. the outer hash: one block built from the inner digest.
//!
//! For a 480-byte message that is 1 + 2 + 8 + 1 = 12 compressions per unit. Key material
//! (unit keys, pad blocks, inner states) is zeroized after each batch.

//!
//! The working memory of a whole run of batches is one [`Scratch`], written lane by lane
//! and zeroized once, on drop, in the lanes the kernel uses: narrow kernels (one to four
//! lanes) pay for their lanes only.

#![forbid(unsafe_code)]

use super::lanes::{Lanes, State256, Words, MAX_LANES};
use zeroize::Zeroize;

/// The working memory of the batches of one call: see the module documentation.
pub(crate) struct Scratch {
    /// Lanes in use (the kernel's width): the columns zeroized on drop.
    lanes: usize,
    /// The unit keys (SHA-256 digests).
    keys: State256,
    /// The block being built: the unit-key block, the pad blocks, the outer block.
    blk: Words,
    /// HMAC's inner and outer states (SHA-1 uses the first 5 rows).
    inner: State256,
    outer: State256,
    /// The last message block(s) of each lane with the padding (public bytes).
    tails: [[u8; 128]; MAX_LANES],
}

impl Scratch {
    /// Working memory for a kernel of `lanes` lanes.
    pub(crate) fn new(lanes: usize) -> Scratch {
        Scratch {
            lanes,
            keys: [[0; MAX_LANES]; 8],
            blk: [[0; MAX_LANES]; 16],
            inner: [[0; MAX_LANES]; 8],
            outer: [[0; MAX_LANES]; 8],
            tails: [[0; 128]; MAX_LANES],
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let n = self.lanes.min(MAX_LANES);
        let rows = self.keys.iter_mut().chain(self.blk.iter_mut());
        let rows = rows.chain(self.inner.iter_mut().chain(self.outer.iter_mut()));
        for row in rows {
            row[..n].zeroize();
        }
    }
}

/// The first `W` rows of a word-major state.
fn rows<const W: usize>(s: &mut State256) -> &mut [[u32; MAX_LANES]; W] {
    (&mut s[..W]).try_into().expect("W <= 8")
}

/// Sets lanes `..n` of the first `W` rows of `s` to `v`.
fn set<const W: usize>(s: &mut State256, v: &[u32; W], n: usize) {
    for w in 0..W {
        s[w][..n].fill(v[w]);
    }
}

/// Computes into `x.keys` the unit keys of `offsets.len()` lanes from `mid`, the SHA-256
/// state after the 64-byte authentication key.
pub(crate) fn unit_keys<K: Lanes<8>>(k: &K, x: &mut Scratch, mid: &[u32; 8], offsets: &[u64]) {
    let n = offsets.len();
    set(&mut x.keys, mid, n);
    for row in x.blk.iter_mut() {
        row[..n].fill(0);
    }
    for (l, off) in offsets.iter().enumerate() {
        let le = off.to_le_bytes();
        x.blk[0][l] = u32::from_be_bytes([le[0], le[1], le[2], le[3]]);
        x.blk[1][l] = u32::from_be_bytes([le[4], le[5], le[6], le[7]]);
    }
    x.blk[2][..n].fill(0x8000_0000);
    x.blk[15][..n].fill((64 + 8) * 8);
    k.compress_words(&mut x.keys, &x.blk, n);
}

/// HMAC (with a hash of `W` state words and initial state `iv`) of `msgs[l]` under the
/// 32-byte key `x.keys[..][l]`, into `tags[l][..4 * W]`, for every lane `l < msgs.len()`.
pub(crate) fn hmac<const W: usize, K: Lanes<W>>(
    k: &K,
    x: &mut Scratch,
    iv: &[u32; W],
    msgs: &[&[u8]],
    tags: &mut [[u8; 64]],
) {
    let n = msgs.len();
    debug_assert!(n <= k.lanes() && n <= x.lanes && tags.len() >= n);
    for (state, pad) in [(&mut x.inner, 0x3636_3636u32), (&mut x.outer, 0x5c5c_5c5c)] {
        for w in 0..16 {
            for l in 0..n {
                x.blk[w][l] = x.keys.get(w).map_or(0, |r| r[l]) ^ pad;
            }
        }
        set(state, iv, n);
        k.compress_words(rows::<W>(state), &x.blk, n);
    }

    absorb(k, x, msgs, 64);

    for w in 0..16 {
        match w {
            _ if w < W => x.blk[w][..n].copy_from_slice(&x.inner[w][..n]),
            _ if w == W => x.blk[w][..n].fill(0x8000_0000),
            15 => x.blk[w][..n].fill((64 + 4 * W as u32) * 8),
            _ => x.blk[w][..n].fill(0),
        }
    }
    k.compress_words(rows::<W>(&mut x.outer), &x.blk, n);
    digests::<W>(&x.outer, tags, n);
}

/// Compresses `msgs[l]` and its padding into lane `l` of `x.inner`, after `prefix` bytes
/// already hashed (64 for HMAC's inner hash: the pad block).
fn absorb<const W: usize, K: Lanes<W>>(k: &K, x: &mut Scratch, msgs: &[&[u8]], prefix: u64) {
    let n = msgs.len();
    let state = &mut x.inner;
    let mut whole: [&[u8]; MAX_LANES] = [&[]; MAX_LANES];
    for (w, m) in whole.iter_mut().zip(msgs) {
        *w = &m[..m.len() / 64 * 64];
    }
    k.compress_bytes(rows::<W>(state), &whole[..n]);
    let mut tail_len = [0usize; MAX_LANES];
    for (l, m) in msgs.iter().enumerate() {
        let rest = &m[m.len() / 64 * 64..];
        let t = &mut x.tails[l];
        let len = if rest.len() < 56 { 64 } else { 128 };
        t[..rest.len()].copy_from_slice(rest);
        t[rest.len()] = 0x80;
        t[rest.len() + 1..len - 8].fill(0);
        let bits = (prefix + m.len() as u64) * 8;
        t[len - 8..len].copy_from_slice(&bits.to_be_bytes());
        tail_len[l] = len;
    }
    let mut tail: [&[u8]; MAX_LANES] = [&[]; MAX_LANES];
    for l in 0..n {
        tail[l] = &x.tails[l][..tail_len[l]];
    }
    k.compress_bytes(rows::<W>(state), &tail[..n]);
}

/// The big-endian digests of lanes `..n` of `s` into `out[l][..4 * W]`.
fn digests<const W: usize>(s: &State256, out: &mut [[u8; 64]], n: usize) {
    for (l, d) in out.iter_mut().enumerate().take(n) {
        for w in 0..W {
            d[4 * w..4 * w + 4].copy_from_slice(&s[w][l].to_be_bytes());
        }
    }
}

/// The plain hashes (`W` words, initial state `iv`) of `msgs[l]` into `out[l][..4 * W]`.
pub(crate) fn hash<const W: usize, K: Lanes<W>>(
    k: &K,
    x: &mut Scratch,
    iv: &[u32; W],
    msgs: &[&[u8]],
    out: &mut [[u8; 64]],
) {
    set(&mut x.inner, iv, msgs.len());
    absorb(k, x, msgs, 0);
    digests::<W>(&x.inner, out, msgs.len());
}

/// Sets the HMAC keys of lanes `..keys.len()` (each at most 32 bytes, zero-padded), in
/// place of unit keys.
#[cfg(feature = "hazmat-testing")]
pub(crate) fn set_keys(x: &mut Scratch, keys: &[&[u8]]) {
    for (l, key) in keys.iter().enumerate() {
        let mut k = [0u8; 32];
        k[..key.len()].copy_from_slice(key);
        for w in 0..8 {
            x.keys[w][l] = u32::from_be_bytes([k[4 * w], k[4 * w + 1], k[4 * w + 2], k[4 * w + 3]]);
        }
        k.zeroize();
    }
}
