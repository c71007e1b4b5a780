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

#![forbid(unsafe_code)]

use super::lanes::{Lanes, State256, Words, MAX_LANES};
use zeroize::Zeroizing;

/// The word-major state with every lane set to `v`.
fn broadcast<const W: usize>(v: &[u32; W], n: usize) -> [[u32; MAX_LANES]; W] {
    let mut s = [[0u32; MAX_LANES]; W];
    for w in 0..W {
        s[w][..n].fill(v[w]);
    }
    s
}

/// The unit keys of `offsets.len()` lanes (word-major SHA-256 digests) from `mid`, the
/// SHA-256 state after the 64-byte authentication key.
pub(crate) fn unit_keys<K: Lanes<8>>(
    k: &K,
    mid: &[u32; 8],
    offsets: &[u64],
) -> Zeroizing<State256> {
    let n = offsets.len();
    let mut s = Zeroizing::new(broadcast(mid, n));
    let mut b: Words = [[0; MAX_LANES]; 16];
    for (l, off) in offsets.iter().enumerate() {
        let le = off.to_le_bytes();
        b[0][l] = u32::from_be_bytes([le[0], le[1], le[2], le[3]]);
        b[1][l] = u32::from_be_bytes([le[4], le[5], le[6], le[7]]);
        b[2][l] = 0x8000_0000;
        b[15][l] = (64 + 8) * 8;
    }
    k.compress_words(&mut s, &b, n);
    s
}

/// HMAC (with a hash of `W` state words and initial state `iv`) of `msgs[l]` under the
/// 32-byte key `keys[..][l]`, into `tags[l][..4 * W]`, for every lane `l < msgs.len()`.
pub(crate) fn hmac<const W: usize, K: Lanes<W>>(
    k: &K,
    iv: &[u32; W],
    keys: &State256,
    msgs: &[&[u8]],
    tags: &mut [[u8; 64]],
) {
    let n = msgs.len();
    debug_assert!(n <= k.lanes() && tags.len() >= n);
    let pad = |x: u32| -> Zeroizing<Words> {
        let mut b = Zeroizing::new([[x; MAX_LANES]; 16]);
        for w in 0..8 {
            for l in 0..n {
                b[w][l] = keys[w][l] ^ x;
            }
        }
        b
    };
    let mut inner = Zeroizing::new(broadcast(iv, n));
    k.compress_words(&mut inner, &pad(0x3636_3636), n);
    let mut outer = Zeroizing::new(broadcast(iv, n));
    k.compress_words(&mut outer, &pad(0x5c5c_5c5c), n);

    let mut whole: [&[u8]; MAX_LANES] = [&[]; MAX_LANES];
    for (w, m) in whole.iter_mut().zip(msgs) {
        *w = &m[..m.len() / 64 * 64];
    }
    k.compress_bytes(&mut inner, &whole[..n]);
    let mut tails = [[0u8; 128]; MAX_LANES];
    let mut tail_len = [0usize; MAX_LANES];
    for (l, m) in msgs.iter().enumerate() {
        let rest = &m[m.len() / 64 * 64..];
        let t = &mut tails[l];
        t[..rest.len()].copy_from_slice(rest);
        t[rest.len()] = 0x80;
        let len = if rest.len() < 56 { 64 } else { 128 };
        let bits = (64 + m.len() as u64) * 8;
        t[len - 8..len].copy_from_slice(&bits.to_be_bytes());
        tail_len[l] = len;
    }
    let mut tail: [&[u8]; MAX_LANES] = [&[]; MAX_LANES];
    for l in 0..n {
        tail[l] = &tails[l][..tail_len[l]];
    }
    k.compress_bytes(&mut inner, &tail[..n]);

    let mut b = Zeroizing::new([[0u32; MAX_LANES]; 16]);
    for w in 0..W {
        b[w][..n].copy_from_slice(&inner[w][..n]);
    }
    b[W][..n].fill(0x8000_0000);
    b[15][..n].fill((64 + 4 * W as u32) * 8);
    k.compress_words(&mut outer, &b, n);
    for (l, tag) in tags.iter_mut().enumerate().take(n) {
        for w in 0..W {
            tag[4 * w..4 * w + 4].copy_from_slice(&outer[w][l].to_be_bytes());
        }
    }
}
