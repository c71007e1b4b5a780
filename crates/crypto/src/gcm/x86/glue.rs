//! The glue between GCM and the stitched kernels (ymm and zmm, around their kernel `K`):
//! which prefix of the data a kernel may take, the counter it starts from, and the J0 block
//! it reads J0 from and writes E_K(J0) or the tag to. A leaf file: the xmm steps before and
//! after a kernel.
#![allow(unsafe_code)]

use crate::aes_core::x86::scaffold::encrypt_xmm;
use crate::block::Block;
use crate::buf::InOut;
use crate::ghash::clmul::{bswap_xmm, store_xmm};
use core::arch::x86_64::*;
use zeroize::Zeroize;

/// The arguments of a stitched kernel's call, in this order: the counter `ctr` and the
/// GHASH state `y`, then `len` bytes from `src` to `dst`, then `j0` (E_K(J0) goes there)
/// and `lens` as in [`message`] (with `lens`, the tag comes back in `j0`; without, the
/// GHASH state in `y`).
pub(crate) struct Args<'a>(
    pub(crate) &'a mut u128,
    pub(crate) &'a mut u128,
    pub(crate) *const u8,
    pub(crate) *mut u8,
    pub(crate) usize,
    pub(crate) Option<&'a mut Block>,
    pub(crate) Option<u128>,
);

/// A pair of matching AES and GHASH keys with a stitched kernel.
pub(crate) trait Stitched {
    /// Bytes in one group of the kernel.
    const GROUP: usize;
    /// Whether the kernel does a shorter last group of a message itself, so that it takes
    /// messages of any length.
    const ANY_LENGTH: bool;

    /// The kernel with these keys, one direction.
    ///
    /// # Safety
    /// `src` and `dst` cover `len` bytes (equal or not overlapping), whole groups unless
    /// `ANY_LENGTH` and `lens` is given, and the low 32 bits of `ctr` do not wrap within
    /// them (the glue's contract with every kernel).
    unsafe fn kernel(&self, decrypt: bool, args: Args<'_>);
}

/// One call of a stitched kernel: the keys `k` (AES) and `g` (GHASH), the data, the running
/// hash `h` as kept in a register, the counter state `ctr` and the unreduced sums `carry`
/// one step leaves for the next. Step `i` encrypts group `i` of `src` into `dst` and hashes
/// the group at `hashed + i` groups: each group's input when decrypting, the previous
/// group's output when encrypting.
pub(crate) struct Call<'a, K, G, C, S> {
    pub(crate) k: &'a K,
    pub(crate) g: &'a G,
    pub(crate) src: *const u8,
    pub(crate) dst: *mut u8,
    hashed: *const u8,
    pub(crate) h: __m128i,
    pub(crate) ctr: C,
    pub(crate) carry: S,
}

impl<'a, K, G, C, S> Call<'a, K, G, C, S> {
    /// A call with the keys `(k, g)` over `(src, dst)` in groups of `GROUP` bytes, starting
    /// from the state `(h, ctr, carry)`.
    pub(crate) fn new<const GROUP: usize>(
        (k, g): (&'a K, &'a G),
        (src, dst): (*const u8, *mut u8),
        decrypt: bool,
        (h, ctr, carry): (__m128i, C, S),
    ) -> Self {
        // (A pointer one group before `dst` when encrypting: step 0 does not hash.)
        let hashed = match decrypt {
            true => src,
            false => dst.wrapping_sub(GROUP),
        };
        Call {
            k,
            g,
            src,
            dst,
            hashed,
            h,
            ctr,
            carry,
        }
    }

    /// Step `i`'s source and destination groups of `GROUP` bytes and the group it hashes
    /// (which only a step with `i > 0` may read when encrypting).
    ///
    /// # Safety
    /// Group `i` is inside the data.
    #[inline(always)]
    pub(crate) unsafe fn at<const GROUP: usize>(
        &self,
        i: usize,
    ) -> (*const u8, *mut u8, *const u8) {
        let off = i * GROUP;
        // SAFETY: group `i` is inside the data (caller).
        unsafe {
            (
                self.src.add(off),
                self.dst.add(off),
                self.hashed.wrapping_add(off),
            )
        }
    }
}

/// The longest prefix of `len` bytes that is whole groups of `group` bytes and does not
/// reach the wrap of the low 32 bits of the counter `ctr`.
fn whole_groups(group: usize, ctr: u128, len: usize) -> usize {
    let before_wrap = ((1u64 << 32) - (ctr as u32) as u64) * 16;
    (len as u64).min(before_wrap) as usize / group * group
}

/// The whole groups of `data` through the kernel of `pair` (the bulk of a streamed
/// message): `ctr` advanced with GCM's `inc32` rule (a kernel's 128-bit increments equal
/// it up to the wrap, but ending exactly at the wrap they carry into bit 32). Returns the
/// bytes done.
pub(crate) fn stitched<P: Stitched>(
    pair: &P,
    ctr: &mut u128,
    y: &mut u128,
    mut data: InOut<'_>,
    decrypt: bool,
    j0: Option<&mut Block>,
) -> usize {
    let len = whole_groups(P::GROUP, *ctr, data.len());
    if len == 0 {
        return 0;
    }
    let (src, dst) = data.slice(0, len).ptrs();
    let start = *ctr;
    let lens = None;
    // SAFETY: whole groups of `data` and a counter that does not wrap within them.
    unsafe { pair.kernel(decrypt, Args(ctr, y, src, dst, len, j0, lens)) };
    let blocks = (len / 16) as u32;
    *ctr = (start & !0xffff_ffff) | (start as u32).wrapping_add(blocks) as u128;
    len
}

/// A whole message through the kernel of `pair` (a one-shot seal or open): CTR from
/// `inc32(J0)` over `data`, GHASH of the ciphertext from `y` (the hashed AAD) and then of
/// the length block `lens`, and the tag GHASH ^ E_K(J0), which replaces `j0`. Taken if its
/// counters do not wrap their low 32 bits and it is whole groups or, for a kernel that does
/// a shorter last group itself, of any non-zero length; otherwise nothing is done and the
/// answer is false.
pub(crate) fn message<P: Stitched>(
    pair: &P,
    y: u128,
    mut data: InOut<'_>,
    decrypt: bool,
    j0: &mut Block,
    lens: u128,
) -> bool {
    let j = u128::from_be_bytes(*j0);
    let mut ctr = (j & !0xffff_ffff) | (j as u32).wrapping_add(1) as u128;
    let len = data.len();
    let before_wrap = ((1u64 << 32) - (ctr as u32) as u64) * 16;
    let fits = if P::ANY_LENGTH {
        len as u64 <= before_wrap
    } else {
        whole_groups(P::GROUP, ctr, len) == len
    };
    if len == 0 || !fits {
        return false;
    }
    let (src, dst) = data.ptrs();
    let mut y = y;
    let (ctr, y, j0, lens) = (&mut ctr, &mut y, Some(j0), Some(lens));
    // SAFETY: all of `data`, whole groups unless the kernel takes any length, and a counter
    // that does not wrap within it (checked above).
    unsafe { pair.kernel(decrypt, Args(ctr, y, src, dst, len, j0, lens)) };
    // The hash of the AAD the kernel started from: wiped like the streaming state.
    y.zeroize();
    true
}

/// Replaces J0 in `block` by E_K(J0), computed on xmm with the round keys
/// `key(0..=rounds)`: one dependent chain, which a kernel starts before its first group so
/// that it runs under it. Written to the caller's block at once, so that the kernel does
/// not hold it across its calls (it would spill to the kernel's own stack frame, which
/// nothing wipes).
#[inline]
#[target_feature(enable = "aes,sse4.1")]
pub(crate) fn encrypt_j0(block: &mut Block, rounds: usize, key: impl Fn(usize) -> __m128i) {
    // SAFETY: `block` is 16 readable and writable bytes; unaligned load and store.
    unsafe {
        let x = encrypt_xmm(_mm_loadu_si128(block.as_ptr().cast()), rounds, key);
        _mm_storeu_si128(block.as_mut_ptr().cast(), x);
    }
}

/// The end of a kernel call, with the GHASH state `h` as the kernel kept it in a register:
/// at the end of a message (`lens`), the tag, GHASH ^ E_K(J0), replaces E_K(J0) in `j0` and
/// the final GHASH goes nowhere else; otherwise the state is handed back in `y`. Either way
/// the kernel's copy is wiped.
#[inline]
#[target_feature(enable = "aes,sse4.1")]
pub(crate) fn finish(h: &mut __m128i, y: &mut u128, j0: Option<&mut Block>, lens: Option<u128>) {
    match (j0, lens) {
        (Some(block), Some(_)) => {
            // SAFETY: `block` is 16 readable and writable bytes; unaligned load and store.
            unsafe {
                let ek = _mm_loadu_si128(block.as_ptr().cast());
                let tag = _mm_xor_si128(bswap_xmm(*h), ek);
                _mm_storeu_si128(block.as_mut_ptr().cast(), tag);
            }
        }
        _ => store_xmm(y, *h),
    }
    h.zeroize();
}
