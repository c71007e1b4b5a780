//! The interface between the GELI unit computation ([`super::unit`]) and the SHA kernels:
//! several independent hash states ("lanes") compressed side by side.
//!
//! States and constructed blocks are kept word-major (`s[w][l]` is word `w` of lane `l`),
//! the layout of the multi-buffer kernels, so that the steps of HMAC that build a block
//! from a digest (the ipad and opad blocks, the outer block) are word copies. Message
//! blocks are taken per lane from the caller's bytes.
//!
//! Every kernel also has a portable implementation here, on the compression functions of
//! the `sha2` and `sha1` crates, one lane at a time: the `soft` backend, and the
//! implementation on CPUs without the SIMD lanes. (Those crates pick their own
//! implementation at run time, SHA-NI included; the copies of states and key blocks made
//! here are zeroized.)

#![forbid(unsafe_code)]

use sha2::digest::generic_array::GenericArray;
use zeroize::Zeroizing;

/// The most lanes of any kernel.
pub(crate) const MAX_LANES: usize = 16;

/// SHA-256 states of up to [`MAX_LANES`] lanes, word-major.
pub(crate) type State256 = [[u32; MAX_LANES]; 8];

/// SHA-1 states of up to [`MAX_LANES`] lanes, word-major.
pub(crate) type State160 = [[u32; MAX_LANES]; 5];

/// One block per lane as its 16 big-endian message words, word-major.
pub(crate) type Words = [[u32; MAX_LANES]; 16];

/// SHA-256's initial state (FIPS 180-4 section 5.3.3).
pub(crate) const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// SHA-1's initial state (FIPS 180-4 section 5.3.1).
pub(crate) const SHA1_IV: [u32; 5] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0];

/// SHA-256's round constants (FIPS 180-4 section 4.2.2).
pub(crate) const K256: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// Lanes of a compression function whose state is `W` 32-bit words (SHA-256: 8, SHA-1:
/// 5).
pub(crate) trait Lanes<const W: usize> {
    /// How many lanes one call fills.
    fn lanes(&self) -> usize;

    /// Compresses into lane `l` (for `l < data.len() <= self.lanes()`) the blocks of
    /// `data[l]`, a whole number of 64-byte blocks (possibly none; lanes may differ).
    fn compress_bytes(&self, s: &mut [[u32; MAX_LANES]; W], data: &[&[u8]]);

    /// Compresses the block `w[..][l]` into lane `l`, for `l < n <= self.lanes()`.
    fn compress_words(&self, s: &mut [[u32; MAX_LANES]; W], w: &Words, n: usize);
}

/// The portable kernels: one lane at a time through the `sha2` and `sha1` crates'
/// compression functions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Portable;

/// Lane `l` of word-major state `s`.
fn lane<const W: usize>(s: &[[u32; MAX_LANES]; W], l: usize) -> [u32; W] {
    core::array::from_fn(|w| s[w][l])
}

/// Stores `v` into lane `l` of word-major state `s`.
fn set_lane<const W: usize>(s: &mut [[u32; MAX_LANES]; W], l: usize, v: &[u32; W]) {
    for w in 0..W {
        s[w][l] = v[w];
    }
}

/// The block `w[..][l]` as bytes.
fn block_of(w: &Words, l: usize) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (t, chunk) in b.chunks_exact_mut(4).enumerate() {
        chunk.copy_from_slice(&w[t][l].to_be_bytes());
    }
    b
}

/// The 64-byte blocks of `data`, as the compression functions take them (no copy).
fn blocks(data: &[u8]) -> impl Iterator<Item = &GenericArray<u8, sha2::digest::consts::U64>> {
    data.chunks_exact(64).map(GenericArray::from_slice)
}

/// Compresses the blocks of `data` into lane `l` of `s` with `f`, one block per call.
fn compress_lane<const W: usize>(
    s: &mut [[u32; MAX_LANES]; W],
    l: usize,
    data: &[u8],
    f: fn(&mut [u32; W], &[GenericArray<u8, sha2::digest::consts::U64>]),
) {
    let mut st = Zeroizing::new(lane(s, l));
    for b in blocks(data) {
        f(&mut st, core::slice::from_ref(b));
    }
    set_lane(s, l, &st);
}

/// Implements [`Lanes`] for [`Portable`], for each hash given as `W => compression`.
macro_rules! portable {
    ($($w:literal => $compress:path),*) => {$(
        impl Lanes<$w> for Portable {
            fn lanes(&self) -> usize {
                1
            }

            fn compress_bytes(&self, s: &mut [[u32; MAX_LANES]; $w], data: &[&[u8]]) {
                for (l, d) in data.iter().enumerate() {
                    compress_lane(s, l, d, $compress);
                }
            }

            fn compress_words(&self, s: &mut [[u32; MAX_LANES]; $w], w: &Words, n: usize) {
                for l in 0..n {
                    compress_lane(s, l, &Zeroizing::new(block_of(w, l))[..], $compress);
                }
            }
        }
    )*};
}
portable!(8 => sha2::compress256, 5 => sha1::compress);
