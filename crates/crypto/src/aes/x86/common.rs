//! Helpers shared by the x86 backends (a leaf file: raw pointers).
#![allow(unsafe_code)]

use zeroize::Zeroize;

/// Runs `group`, which reads and writes exactly `GROUP` bytes, on the last `len <= GROUP`
/// bytes of a buffer through a stack buffer (the short last group of a kernel).
///
/// # Safety
/// `src` must be readable and `dst` writable for `len` bytes.
#[inline(always)]
pub(crate) unsafe fn tail_through_buffer<const GROUP: usize>(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    group: impl FnOnce(*const u8, *mut u8),
) {
    // Checked in every build: the copies below rely on it.
    assert!(len <= GROUP, "tail of {len} bytes for a group of {GROUP}");
    let mut buf = [0u8; GROUP];
    // SAFETY: the caller guarantees `len` readable bytes at `src`; `buf` holds GROUP >= len
    // bytes (asserted above).
    unsafe { core::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), len) };
    let p = buf.as_mut_ptr();
    group(p, p);
    // SAFETY: the caller guarantees `len` writable bytes at `dst`.
    unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr(), dst, len) };
    buf.zeroize();
}

/// The GCM glue of the backends with a stitched kernel (vaes, avx512), around their kernel
/// `K`: which prefix of the data it may take, the counter it starts from, and the J0 block
/// it reads E_K(J0) from and writes E_K(J0) or the tag to.
pub(crate) mod gcm {
    use crate::aes::Block;
    use crate::buf::InOut;
    use core::arch::x86_64::*;
    use zeroize::Zeroize;

    /// A stitched kernel's call: `len` bytes (whole groups) from `src` to `dst` with the
    /// counter `ctr` and the GHASH state `y`; `j0` and `lens` as in
    /// [`crate::aes::AesKernels::gcm_message`] (E_K(J0) into `j0`; with `lens`, the final
    /// GHASH in `y` and the tag in `j0`). The glue passes pointers covering `len` bytes and
    /// a counter whose low 32 bits do not wrap within them.
    pub(crate) trait Kernel:
        FnOnce(&mut u128, &mut u128, *const u8, *mut u8, usize, Option<&mut Block>, Option<u128>)
    {
    }
    impl<F> Kernel for F where
        F: FnOnce(
            &mut u128,
            &mut u128,
            *const u8,
            *mut u8,
            usize,
            Option<&mut Block>,
            Option<u128>,
        )
    {
    }

    /// The longest prefix of `len` bytes that is whole groups of `GROUP` bytes and does not
    /// reach the wrap of the low 32 bits of the counter `ctr`.
    pub(crate) fn whole_groups<const GROUP: usize>(ctr: u128, len: usize) -> usize {
        let before_wrap = ((1u64 << 32) - (ctr as u32) as u64) * 16;
        (len as u64).min(before_wrap) as usize / GROUP * GROUP
    }

    /// `AesKernels::gcm_stitched` on `kernel`: its whole groups, `ctr` advanced with GCM's
    /// `inc32` rule (a kernel's 128-bit increments equal it up to the wrap, but ending
    /// exactly at the wrap they carry into bit 32).
    pub(crate) fn stitched<const GROUP: usize>(
        ctr: &mut u128,
        y: &mut u128,
        mut data: InOut<'_>,
        j0: Option<&mut Block>,
        kernel: impl Kernel,
    ) -> usize {
        let len = whole_groups::<GROUP>(*ctr, data.len());
        if len == 0 {
            return 0;
        }
        let (src, dst) = data.slice(0, len).ptrs();
        let start = *ctr;
        kernel(ctr, y, src, dst, len, j0, None);
        let blocks = (len / 16) as u32;
        *ctr = (start & !0xffff_ffff) | (start as u32).wrapping_add(blocks) as u128;
        len
    }

    /// `AesKernels::gcm_message` on `kernel`: the whole message if its counters (from
    /// `inc32(J0)`) do not wrap their low 32 bits and it is whole groups, or, for a kernel
    /// that does a shorter last group itself (`ANY_LENGTH`), of any non-zero length.
    pub(crate) fn message<const GROUP: usize, const ANY_LENGTH: bool>(
        y: u128,
        mut data: InOut<'_>,
        j0: &mut Block,
        lens: u128,
        kernel: impl Kernel,
    ) -> bool {
        let j = u128::from_be_bytes(*j0);
        let mut ctr = (j & !0xffff_ffff) | (j as u32).wrapping_add(1) as u128;
        let len = data.len();
        let before_wrap = ((1u64 << 32) - (ctr as u32) as u64) * 16;
        let fits = if ANY_LENGTH {
            len as u64 <= before_wrap
        } else {
            whole_groups::<GROUP>(ctr, len) == len
        };
        if len == 0 || !fits {
            return false;
        }
        let (src, dst) = data.ptrs();
        let mut y = y;
        kernel(&mut ctr, &mut y, src, dst, len, Some(j0), Some(lens));
        // The final GHASH is tag ^ E_K(J0): wiped like the streaming state.
        y.zeroize();
        true
    }

    /// Replaces J0 in `block` by E_K(J0), computed on xmm with the round keys
    /// `key(0..=rounds)`: one dependent chain, which a kernel starts before its first group
    /// so that it runs under it. Written to the caller's block at once, so that the kernel
    /// does not hold it across its calls (it would spill to the kernel's own stack frame,
    /// which nothing wipes).
    ///
    /// # Safety
    /// AES-NI and SSE4.1 are available (every backend with a stitched kernel has them).
    #[inline]
    #[target_feature(enable = "aes,sse4.1")]
    pub(crate) unsafe fn encrypt_j0(
        block: &mut Block,
        rounds: usize,
        key: impl Fn(usize) -> __m128i,
    ) {
        // SAFETY: `block` is 16 readable bytes; unaligned load.
        let mut x = _mm_xor_si128(unsafe { _mm_loadu_si128(block.as_ptr().cast()) }, key(0));
        for r in 1..rounds {
            x = _mm_aesenc_si128(x, key(r));
        }
        x = _mm_aesenclast_si128(x, key(rounds));
        // SAFETY: `block` is 16 writable bytes; unaligned store.
        unsafe { _mm_storeu_si128(block.as_mut_ptr().cast(), x) };
    }

    /// Replaces E_K(J0) in `block` by the tag: the final GHASH `h` (as kept in a register)
    /// in GCM's byte order, XORed with E_K(J0).
    ///
    /// # Safety
    /// As for [`encrypt_j0`].
    #[inline]
    #[target_feature(enable = "aes,sse4.1")]
    pub(crate) unsafe fn tag_in_place(block: &mut Block, h: __m128i) {
        let bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        // SAFETY: `block` is 16 readable and writable bytes; unaligned load and store.
        unsafe {
            let ek = _mm_loadu_si128(block.as_ptr().cast());
            let tag = _mm_xor_si128(_mm_shuffle_epi8(h, bswap), ek);
            _mm_storeu_si128(block.as_mut_ptr().cast(), tag);
        }
    }

    /// Hands the final GHASH register `h` back as the integer `*y` and wipes both copies
    /// the kernel made (the register variable and the bytes it went through).
    ///
    /// # Safety
    /// As for [`encrypt_j0`].
    #[inline]
    #[target_feature(enable = "aes,sse4.1")]
    pub(crate) unsafe fn hand_back(h: &mut __m128i, y: &mut u128) {
        let mut out = [0u8; 16];
        // SAFETY: `out` is 16 writable bytes; unaligned store.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), *h) };
        *y = u128::from_le_bytes(out);
        out.zeroize();
        h.zeroize();
    }
}
