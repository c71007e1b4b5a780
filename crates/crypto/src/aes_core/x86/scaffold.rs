//! What every x86 AES backend is built from, written once: the key containers, the
//! `AesKernels` methods over the unsafe kernels, the short last group run through a stack
//! buffer, the xmm single-block chain (and, in `rounds.rs`, the round helpers and the
//! kernels shared by the widths). A leaf file: raw pointers and intrinsics.
//!
//! # Why macros
//! A helper that is generic over the register width would call the intrinsics of a width
//! from a function compiled without that width's features, and LLVM inlines an intrinsic
//! only into a caller with the features: such helpers stay calls (on the stitched GCM loop
//! they tripled its cost until every helper carried `#[target_feature]`; docs/PERFORMANCE.md).
//! So the helpers are stamped out per backend by the macros here and in `rounds.rs`, each
//! function with the backend's `#[target_feature]` list, which makes them inline into the
//! kernels like the intrinsics themselves. What takes no intrinsic of a width
//! (the tail through a buffer, a group loop, the xmm single-block chain, which needs only
//! AES-NI) is an ordinary `#[inline(always)]` or `#[target_feature]` generic function.
//!
//! # The calling contract the macros encode
//! A key container made by [`round_keys!`] checks in its constructor the CPU features of
//! the kernels it serves, so a value of it proves them; every `unsafe fn` of a backend
//! that takes its keys needs nothing else but pointers covering the stated length, which
//! the `AesKernels` methods of [`aes_kernels!`] take from an `InOut`.
#![allow(unsafe_code)]

use crate::block::Block;
use core::arch::x86_64::*;
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
    let mut buf = TailBuffer::<GROUP>([0u8; GROUP]);
    // SAFETY: the caller guarantees `len` readable bytes at `src`; `buf` holds GROUP >= len
    // bytes (asserted above).
    unsafe { core::ptr::copy_nonoverlapping(src, buf.0.as_mut_ptr(), len) };
    let p = buf.0.as_mut_ptr();
    group(p, p);
    // SAFETY: the caller guarantees `len` writable bytes at `dst`.
    unsafe { core::ptr::copy_nonoverlapping(buf.0.as_ptr(), dst, len) };
    buf.wipe();
}

/// A group's worth of plaintext or ciphertext on the stack, aligned for whole-word wipes.
#[repr(C, align(64))]
struct TailBuffer<const GROUP: usize>([u8; GROUP]);

impl<const GROUP: usize> TailBuffer<GROUP> {
    /// Overwrites the buffer with zeros by volatile 8-byte stores, which the compiler may
    /// not drop. (`Zeroize` on a byte array stores one byte at a time: for a 512-byte
    /// group that cost more than encrypting it, and short units go through here once
    /// per call.)
    fn wipe(&mut self) {
        let words = self.0.as_mut_ptr().cast::<u64>();
        for i in 0..GROUP / 8 {
            // SAFETY: the buffer is 64-byte aligned and GROUP bytes long: word `i <
            // GROUP / 8` is inside it and aligned.
            unsafe { core::ptr::write_volatile(words.add(i), 0) };
        }
        // What GROUP / 8 words leave (none for the kernels' groups, multiples of 16).
        self.0[GROUP / 8 * 8..].zeroize();
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs `group` on each whole group of `GROUP` bytes of a buffer of `len` bytes, then on
/// the rest (if any) through a stack buffer of one group.
///
/// # Safety
/// `src` must be readable and `dst` writable for `len` bytes (equal or not overlapping).
#[inline(always)]
pub(crate) unsafe fn for_each_group<const GROUP: usize>(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    mut group: impl FnMut(*const u8, *mut u8),
) {
    let mut off = 0;
    while off + GROUP <= len {
        // SAFETY: `off + GROUP <= len`: the group is inside both buffers.
        group(unsafe { src.add(off) }, unsafe { dst.add(off) });
        off += GROUP;
    }
    if off < len {
        // SAFETY: the `len - off` bytes from `off` are inside both buffers.
        unsafe { tail_through_buffer::<GROUP>(src.add(off), dst.add(off), len - off, group) };
    }
}

/// The cipher on one xmm register with the round keys `key(0..=rounds)`: one dependent
/// chain of AESENC (the latency-bound single-stream path, and GCM's E_K(J0)).
#[inline]
#[target_feature(enable = "aes,sse4.1")]
pub(crate) fn encrypt_xmm(x: __m128i, rounds: usize, key: impl Fn(usize) -> __m128i) -> __m128i {
    let mut x = _mm_xor_si128(x, key(0));
    for r in 1..rounds {
        x = _mm_aesenc_si128(x, key(r));
    }
    _mm_aesenclast_si128(x, key(rounds))
}

/// One CBC chain on xmm registers (latency bound by definition, so no wider register
/// helps); `iv` ends as the last ciphertext block.
///
/// # Safety
/// AES-NI and SSE4.1 are available; `src` is readable and `dst` writable for `len` bytes,
/// a multiple of 16.
#[target_feature(enable = "aes,sse4.1")]
pub(crate) unsafe fn cbc_encrypt_xmm(
    iv: &mut Block,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    rounds: usize,
    key: impl Fn(usize) -> __m128i,
) {
    // SAFETY: `iv` is 16 readable bytes; unaligned load.
    let mut c = unsafe { _mm_loadu_si128(iv.as_ptr().cast()) };
    for off in (0..len).step_by(16) {
        // SAFETY: `off + 16 <= len`: inside both buffers (caller); unaligned load and store.
        unsafe {
            c = encrypt_xmm(
                _mm_xor_si128(c, _mm_loadu_si128(src.add(off).cast())),
                rounds,
                &key,
            );
            _mm_storeu_si128(dst.add(off).cast(), c);
        }
    }
    // SAFETY: `iv` is 16 writable bytes; unaligned store.
    unsafe { _mm_storeu_si128(iv.as_mut_ptr().cast(), c) };
}

/// Defines an expanded-key container for one register width: `enc`, the cipher's round
/// keys broadcast to every 128-bit lane, and (with `decryption: true`) `dec`, those of the
/// equivalent inverse cipher (FIPS-197 section 5.3.5: InvMixColumns (AESIMC) applied to
/// the middle round keys, order reversed); `rounds`; and the backend it was made for.
/// Zeroized on drop.
///
/// `new(rk, backend)` asserts that this CPU runs `kernels` (the backend whose kernels use
/// the container) and `backend`; so a value proves the features of those kernels.
/// `key::<DEC>(i)` loads round key `i` (always inlined into the kernel, which has the
/// features); `key128(i)` the low lane of
/// the cipher's round key `i`, which needs only SSE2 (the x86-64 baseline) and so inlines
/// anywhere.
macro_rules! round_keys {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            register: $reg:ty,
            words: $words:literal,
            features: $features:literal,
            load: $load:path,
            broadcast: $broadcast:path,
            store: $store:path,
            decryption: $dec:literal,
            kernels: $kernels:expr $(,)?
        }
    ) => {
        $(#[$attr])*
        #[repr(C, align(64))]
        $vis struct $name {
            enc: [[u64; $words]; 15],
            dec: [[u64; $words]; if $dec { 15 } else { 0 }],
            rounds: usize,
            backend: $crate::aes_core::Backend,
        }

        impl Drop for $name {
            fn drop(&mut self) {
                ::zeroize::Zeroize::zeroize(&mut self.enc);
                ::zeroize::Zeroize::zeroize(&mut self.dec);
            }
        }

        impl $name {
            /// The expanded key `rk` for `backend`. Panics if this CPU cannot run it.
            pub(crate) fn new(rk: &$crate::aes_core::RoundKeys, backend: $crate::aes_core::Backend) -> $name {
                assert!(
                    $kernels.check_cpu().is_ok() && backend.check_cpu().is_ok(),
                    "{} keys requested on a cpu without {}",
                    backend,
                    $features,
                );
                let mut k = $name {
                    enc: [[0; $words]; 15],
                    dec: [[0; $words]; if $dec { 15 } else { 0 }],
                    rounds: rk.rounds,
                    backend,
                };
                // SAFETY: the CPU features of these kernels were checked just above.
                unsafe { k.fill(rk) };
                k
            }

            #[target_feature(enable = $features)]
            unsafe fn fill(&mut self, rk: &$crate::aes_core::RoundKeys) {
                use ::core::arch::x86_64::*;
                let n = self.rounds;
                // SAFETY (of the loads and stores): 16-byte round keys, and entries of
                // `$words` u64 each; unaligned.
                let key = |i: usize| unsafe { _mm_loadu_si128(rk.rk[i].as_ptr().cast()) };
                let put = |slot: &mut [u64; $words], x: __m128i| unsafe {
                    $store(slot.as_mut_ptr().cast(), $broadcast(x))
                };
                for i in 0..=n {
                    put(&mut self.enc[i], key(i));
                }
                // (Nothing without `decryption`: `dec` is empty.)
                for (i, slot) in self.dec.iter_mut().take(n + 1).enumerate() {
                    let x = match i {
                        0 => key(n),
                        _ if i == n => key(0),
                        _ => _mm_aesimc_si128(key(n - i)),
                    };
                    put(slot, x);
                }
            }

            /// The cipher's rounds: 10, 12 or 14.
            #[allow(dead_code)]
            pub(crate) fn rounds(&self) -> usize {
                self.rounds
            }

            /// Round key `i` of the cipher (`DEC = false`) or of the equivalent inverse
            /// cipher, in every lane. Always inlined, and compiled without features of its
            /// own: it becomes one load inside the kernel that calls it, which has them.
            #[inline(always)]
            #[allow(dead_code)]
            pub(crate) fn key<const DEC: bool>(&self, i: usize) -> $reg {
                let table: &[[u64; $words]] = if DEC { &self.dec } else { &self.enc };
                // SAFETY: a value of this type proves the CPU features of its kernels (its
                // constructor checked them), which include the load's; an entry is one
                // register, aligned by `repr`.
                unsafe { $load(table[i].as_ptr().cast()) }
            }

            /// Round key `i` of the cipher, low lane only (the xmm single-stream paths).
            #[inline(always)]
            #[allow(dead_code)]
            pub(crate) fn key128(&self, i: usize) -> ::core::arch::x86_64::__m128i {
                // SAFETY: an entry holds at least 16 bytes, aligned by `repr`; SSE2 is the
                // x86-64 baseline.
                unsafe { ::core::arch::x86_64::_mm_load_si128(self.enc[i].as_ptr().cast()) }
            }
        }
    };
}
pub(crate) use round_keys;

/// A kernel over data units (XTS units, CBC sectors): the keys, one block per unit (its
/// tweak or IV), the source and destination pointers, the unit size.
pub(crate) type UnitKernel<K> = unsafe fn(&K, &[Block], *const u8, *mut u8, usize);

/// Implements `AesKernels` for the key container `keys` over the backend's unsafe kernels
/// (each named with its ISA and width, each taking the keys, its state, the source and
/// destination pointers and the length): the safe methods take the pointers of their
/// `InOut`, which cover its length, and call the kernel, whose CPU features the container
/// proves. The kernels over data units (sectors, XTS units) are called only with at least
/// one unit, and with the unit size instead of the length. Single-chain
/// CBC encryption is latency bound, so every x86 backend runs it on xmm
/// ([`cbc_encrypt_xmm`]). A kernel given as `narrow | wide` has a second build, `wide`,
/// compiled with AVX-512VL for its 32 registers: it runs when the keys were made for the
/// avx512 backend (whose CPU check includes AVX-512VL), `narrow` otherwise.
macro_rules! aes_kernels {
    (
        $keys:ty {
            ecb: $($ecb:ident)::+,
            cbc_decrypt: $cbc_decrypt:path,
            cbc_encrypt_sectors: $cbc_sectors:path $(| $cbc_sectors_wide:path)?,
            ctr: $ctr:path $(| $ctr_wide:path)?,
            xts: $($xts:ident)::+ $(| $($xts_wide:ident)::+)? $(,)?
        }
    ) => {
        impl $crate::aes_core::AesKernels for $keys {
            fn backend(&self) -> $crate::aes_core::Backend {
                self.backend
            }
            fn ecb_encrypt(&self, data: $crate::buf::InOut<'_>) {
                self.run((), data, $($ecb)::+::<false>)
            }
            fn ecb_decrypt(&self, data: $crate::buf::InOut<'_>) {
                self.run((), data, $($ecb)::+::<true>)
            }
            fn cbc_encrypt(&self, iv: &mut $crate::block::Block, data: $crate::buf::InOut<'_>) {
                self.run(iv, data, <$keys>::cbc_encrypt_chain)
            }
            fn cbc_decrypt(&self, iv: &mut $crate::block::Block, data: $crate::buf::InOut<'_>) {
                self.run(iv, data, $cbc_decrypt)
            }
            fn cbc_encrypt_sectors(&self, ivs: &[$crate::block::Block], data: $crate::buf::InOut<'_>) {
                let kernel: $crate::aes_core::x86::scaffold::UnitKernel<Self> = $cbc_sectors;
                $(let kernel = self.pick(kernel, $cbc_sectors_wide);)?
                self.run_units(ivs, data, kernel)
            }
            fn ctr(&self, counter: &mut u128, data: $crate::buf::InOut<'_>) {
                let kernel: unsafe fn(&Self, &mut u128, *const u8, *mut u8, usize) = $ctr;
                $(let kernel = self.pick(kernel, $ctr_wide);)?
                self.run(counter, data, kernel)
            }
            fn xts_encrypt(&self, tweaks: &[$crate::block::Block], data: $crate::buf::InOut<'_>) {
                let kernel: $crate::aes_core::x86::scaffold::UnitKernel<Self> = $($xts)::+::<false>;
                $(let kernel = self.pick(kernel, $($xts_wide)::+::<false>);)?
                self.run_units(tweaks, data, kernel)
            }
            fn xts_decrypt(&self, tweaks: &[$crate::block::Block], data: $crate::buf::InOut<'_>) {
                let kernel: $crate::aes_core::x86::scaffold::UnitKernel<Self> = $($xts)::+::<true>;
                $(let kernel = self.pick(kernel, $($xts_wide)::+::<true>);)?
                self.run_units(tweaks, data, kernel)
            }
        }

        impl $keys {
            /// `wide`, the build of a kernel with AVX-512VL (32 vector registers), when
            /// these keys were made for the avx512 backend, whose features include it (the
            /// constructor checked them, so the keys prove them to `run`); else `narrow`.
            #[inline(always)]
            #[allow(dead_code)]
            fn pick<F>(&self, narrow: F, wide: F) -> F {
                if self.backend == $crate::aes_core::Backend::Avx512 {
                    wide
                } else {
                    narrow
                }
            }

            /// Calls `kernel` with the keys, `state` and the pointers and length of `data`.
            #[inline(always)]
            fn run<S>(
                &self,
                state: S,
                mut data: $crate::buf::InOut<'_>,
                kernel: unsafe fn(&Self, S, *const u8, *mut u8, usize),
            ) {
                let (len, (src, dst)) = (data.len(), data.ptrs());
                // SAFETY: `self` proves the CPU features of this backend's kernels (its
                // constructor checked them); the pointers come from `data` and cover `len`
                // bytes, equal (in place) or not overlapping.
                unsafe { kernel(self, state, src, dst, len) }
            }

            /// Calls `kernel` over data units, one per entry of `units`, with the unit size
            /// (nothing to do without units).
            #[inline(always)]
            fn run_units(
                &self,
                units: &[$crate::block::Block],
                mut data: $crate::buf::InOut<'_>,
                kernel: $crate::aes_core::x86::scaffold::UnitKernel<Self>,
            ) {
                if units.is_empty() {
                    return;
                }
                let (len, (src, dst)) = (data.len(), data.ptrs());
                // SAFETY: as in `run`; `len` is `units.len()` units (the `AesKernels`
                // contract), so the kernel's units cover the pointers' bytes.
                unsafe { kernel(self, units, src, dst, len / units.len()) }
            }

            /// One CBC chain on xmm.
            ///
            /// # Safety
            /// As for every kernel: `src` and `dst` cover `len` bytes.
            unsafe fn cbc_encrypt_chain(
                &self,
                iv: &mut $crate::block::Block,
                src: *const u8,
                dst: *mut u8,
                len: usize,
            ) {
                // SAFETY: `self` proves AES-NI and SSE4.1 (every x86 backend has them); the
                // pointers cover `len` bytes (caller).
                unsafe {
                    $crate::aes_core::x86::scaffold::cbc_encrypt_xmm(iv, src, dst, len, self.rounds, |r| {
                        self.key128(r)
                    })
                }
            }
        }
    };
}
pub(crate) use aes_kernels;
