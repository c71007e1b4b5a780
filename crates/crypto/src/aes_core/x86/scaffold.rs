//! What every x86 AES backend is built from, written once: the key containers, the round
//! helpers, the `AesKernels` methods over the unsafe kernels, and the short last group run
//! through a stack buffer. A leaf file: raw pointers and intrinsics.
//!
//! # Why macros
//! A helper that is generic over the register width would call the intrinsics of a width
//! from a function compiled without that width's features, and LLVM inlines an intrinsic
//! only into a caller with the features: such helpers stay calls (on the stitched GCM loop
//! they tripled its cost until every helper carried `#[target_feature]`; docs/PERFORMANCE.md).
//! So the helpers are stamped out per backend by the macros here,
//! each function with the backend's `#[target_feature]` list, which makes them inline
//! into the kernels like the intrinsics themselves. What takes no intrinsic of a width
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

/// Defines the round helpers of one backend over its key container `keys` and register
/// type `register` (each function with `features`):
/// - `rounds_but_last::<N, DEC>`: every round but the first whitening and the last, on `N`
///   independent registers, round key by round key, so the `N` are in flight together;
/// - `last_round::<DEC>(x, key)`: the last round, whose key may have a value folded in
///   (the last round XORs its key last: CTR folds the data, XTS the tweak);
/// - `crypt::<N, DEC>`: the whole cipher (or inverse cipher) on `N` registers;
/// - `crypt_group::<N, DEC>`: `N` registers loaded, ciphered, stored (an ECB group);
/// - `keystream_group::<N>`: the counter blocks `x` ciphered and XORed over `N` registers
///   of data (a CTR group), the data folded into the last round key;
/// - `tweaked_group::<N, DEC>`: an XTS group with the tweaks `tw`, folded into the round-0
///   whitening and the last round key, so they cost no step on the AES dependency chain;
/// - `ecb::<DEC>(k, src, dst, len)`: the ECB kernel, groups of `REGS` registers (the
///   backend's `GROUP` bytes), a tail of one register through a one-register buffer and a
///   longer one through a group buffer.
macro_rules! aes_rounds {
    (
        keys: $keys:ty,
        register: $reg:ty,
        bytes: $bytes:literal,
        features: $features:literal,
        xor: $xor:path,
        enc: $enc:path,
        enclast: $enclast:path,
        dec: $dec:path,
        declast: $declast:path,
        load: $load:path,
        store: $store:path,
        zero: $zero:path $(,)?
    ) => {
        /// All rounds but the whitening and the last on `N` independent registers.
        #[inline]
        #[target_feature(enable = $features)]
        fn rounds_but_last<const N: usize, const DEC: bool>(k: &$keys, x: &mut [$reg; N]) {
            for r in 1..k.rounds {
                let kr = k.key::<DEC>(r);
                for v in x.iter_mut() {
                    *v = if DEC { $dec(*v, kr) } else { $enc(*v, kr) };
                }
            }
        }

        /// The last round with round key `key` (which may have a value folded in).
        #[inline]
        #[target_feature(enable = $features)]
        fn last_round<const DEC: bool>(x: $reg, key: $reg) -> $reg {
            if DEC {
                $declast(x, key)
            } else {
                $enclast(x, key)
            }
        }

        /// The whole cipher (or inverse cipher) on `N` registers.
        #[inline]
        #[target_feature(enable = $features)]
        fn crypt<const N: usize, const DEC: bool>(k: &$keys, x: &mut [$reg; N]) {
            let k0 = k.key::<DEC>(0);
            for v in x.iter_mut() {
                *v = $xor(*v, k0);
            }
            for r in 1..k.rounds {
                let kr = k.key::<DEC>(r);
                for v in x.iter_mut() {
                    *v = if DEC { $dec(*v, kr) } else { $enc(*v, kr) };
                }
            }
            let kl = k.key::<DEC>(k.rounds);
            for v in x.iter_mut() {
                *v = if DEC {
                    $declast(*v, kl)
                } else {
                    $enclast(*v, kl)
                };
            }
        }

        /// `N` registers from `src` through the cipher into `dst`.
        ///
        /// # Safety
        /// `src` readable and `dst` writable for `N` registers.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn crypt_group<const N: usize, const DEC: bool>(
            k: &$keys,
            src: *const u8,
            dst: *mut u8,
        ) {
            let mut x = [$zero(); N];
            for (i, v) in x.iter_mut().enumerate() {
                // SAFETY: register `i < N` is inside the buffer (caller); unaligned load.
                *v = unsafe { $load(src.add($bytes * i).cast()) };
            }
            crypt::<N, DEC>(k, &mut x);
            for (i, v) in x.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { $store(dst.add($bytes * i).cast(), *v) };
            }
        }

        /// The counter blocks `x` through the cipher, XORed over `N` registers of data.
        ///
        /// # Safety
        /// As for [`crypt_group`].
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn keystream_group<const N: usize>(
            k: &$keys,
            mut x: [$reg; N],
            src: *const u8,
            dst: *mut u8,
        ) {
            let (first, last) = (k.key::<false>(0), k.key::<false>(k.rounds));
            for v in x.iter_mut() {
                *v = $xor(*v, first);
            }
            rounds_but_last::<N, false>(k, &mut x);
            for (i, v) in x.iter().enumerate() {
                // SAFETY: as in `crypt_group`.
                unsafe {
                    let d = $load(src.add($bytes * i).cast());
                    $store(
                        dst.add($bytes * i).cast(),
                        last_round::<false>(*v, $xor(d, last)),
                    );
                }
            }
        }

        /// An XTS group with the tweaks `tw`.
        ///
        /// # Safety
        /// As for [`crypt_group`].
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn tweaked_group<const N: usize, const DEC: bool>(
            k: &$keys,
            tw: &[$reg; N],
            src: *const u8,
            dst: *mut u8,
        ) {
            let (first, last) = (k.key::<DEC>(0), k.key::<DEC>(k.rounds));
            let mut x = [$zero(); N];
            for (i, v) in x.iter_mut().enumerate() {
                // SAFETY: as in `crypt_group`.
                *v = $xor(
                    unsafe { $load(src.add($bytes * i).cast()) },
                    $xor(tw[i], first),
                );
            }
            rounds_but_last::<N, DEC>(k, &mut x);
            for (i, v) in x.iter().enumerate() {
                let out = last_round::<DEC>(*v, $xor(tw[i], last));
                // SAFETY: as in `crypt_group`.
                unsafe { $store(dst.add($bytes * i).cast(), out) };
            }
        }

        /// ECB over `len` bytes (a multiple of 16); no state.
        ///
        /// # Safety
        /// `src` readable and `dst` writable for `len` bytes.
        #[target_feature(enable = $features)]
        unsafe fn ecb<const DEC: bool>(k: &$keys, _: (), src: *const u8, dst: *mut u8, len: usize) {
            let whole = len / GROUP * GROUP;
            let rest = len - whole;
            // SAFETY (here and in the closures): the pointers cover `len` bytes (caller),
            // the buffers of `for_each_group` and `tail_through_buffer` their group.
            unsafe {
                if rest > 0 && rest <= $bytes {
                    $crate::aes_core::x86::scaffold::for_each_group::<GROUP>(
                        src,
                        dst,
                        whole,
                        |s, d| crypt_group::<REGS, DEC>(k, s, d),
                    );
                    // One register (a tweak, a GCM block): through a one-register buffer.
                    let (s, d) = (src.add(whole), dst.add(whole));
                    $crate::aes_core::x86::scaffold::tail_through_buffer::<$bytes>(
                        s,
                        d,
                        rest,
                        |s, d| crypt_group::<1, DEC>(k, s, d),
                    );
                } else {
                    $crate::aes_core::x86::scaffold::for_each_group::<GROUP>(
                        src,
                        dst,
                        len,
                        |s, d| crypt_group::<REGS, DEC>(k, s, d),
                    );
                }
            }
        }
    };
}
pub(crate) use aes_rounds;

/// Defines the two CBC kernels that are the same on every width around the backend's own
/// pieces:
/// - `$decrypt(k, iv, src, dst, len)`: one chain, a group of `REGS` registers at a time,
///   all decrypted in parallel and XORed with their predecessors: for register `i > 0` the
///   `$bytes` bytes 16 before it, for register 0 `$first` of the group's source and the
///   chaining value (the width's own); every predecessor is read before the group's first
///   store, and the last ciphertext block, the next IV, before any store (in place they
///   are overwritten);
/// - `$sectors(k, ivs, src, dst, len)`: independent chains, one per sector, `$chains`
///   sectors per register (`$load`/`$store` move one block of each of a register's
///   sectors, `$ivs` loads their IVs), `REGS` registers advancing together.
///
/// Sectors of 2 KiB and more start at addresses equal modulo 4 KiB, so chains at the same
/// block offset would compete for one set of the 8-way L1 cache (with 16 chains, a third
/// of the speed). The chains are therefore skewed: register pair `r / 2` runs
/// `skew` blocks (one cache line per pair) behind the previous pair, and the few steps at
/// the start and end where some registers have no block take a slower masked path. A
/// remainder of fewer than `$chains` sectors runs alone on xmm.
macro_rules! cbc_kernels {
    (
        keys: $keys:ty,
        register: $reg:ty,
        features: $features:literal,
        xor: $xor:path,
        zero: $zero:path,
        bytes: $bytes:literal,
        load: $load_reg:path,
        store: $store_reg:path,
        decrypt: $decrypt:ident,
        first: |$fsrc:ident, $fchain:ident| $first:expr,
        sectors: $sectors:ident,
        chains: $chains:literal,
        load: |$lp:ident, $lsize:ident| $load:expr,
        store: |$sp:ident, $ssize:ident, $sv:ident| $store:expr,
        ivs: |$ivs:ident| $load_ivs:expr $(,)?
    ) => {
        /// Decrypts one group whose predecessor is `chain`.
        ///
        /// # Safety
        /// The backend's CPU features (`k` proves them); `src` and `dst` cover one group.
        #[target_feature(enable = $features)]
        unsafe fn decrypt_group(
            k: &$keys,
            chain: ::core::arch::x86_64::__m128i,
            src: *const u8,
            dst: *mut u8,
        ) {
            let mut x = [$zero(); REGS];
            let mut prev = [$zero(); REGS];
            // SAFETY (of the loads and stores): the registers are inside the group (caller).
            unsafe {
                for (i, v) in x.iter_mut().enumerate() {
                    *v = $load_reg(src.add($bytes * i).cast());
                }
                crypt::<REGS, true>(k, &mut x);
                let ($fsrc, $fchain) = (src, chain);
                prev[0] = $first;
                for (i, p) in prev.iter_mut().enumerate().skip(1) {
                    *p = $load_reg(src.add($bytes * i - 16).cast());
                }
                for i in 0..REGS {
                    $store_reg(dst.add($bytes * i).cast(), $xor(x[i], prev[i]));
                }
            }
        }

        /// One CBC chain, decrypted a group at a time; `len` is a multiple of 16.
        ///
        /// # Safety
        /// The backend's CPU features (`k` proves them); `src` and `dst` cover `len` bytes.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $decrypt(
            k: &$keys,
            iv: &mut $crate::block::Block,
            src: *const u8,
            dst: *mut u8,
            len: usize,
        ) {
            if len == 0 {
                return;
            }
            // SAFETY (of the loads and stores of this function, unaligned): `iv` is a block,
            // and the blocks read are inside `src` (caller).
            unsafe {
                let next_iv = _mm_loadu_si128(src.add(len - 16).cast());
                let mut chain = _mm_loadu_si128(iv.as_ptr().cast());
                let mut off = 0;
                while off + GROUP <= len {
                    let following = _mm_loadu_si128(src.add(off + GROUP - 16).cast());
                    decrypt_group(k, chain, src.add(off), dst.add(off));
                    chain = following;
                    off += GROUP;
                }
                if off < len {
                    let (s, d) = (src.add(off), dst.add(off));
                    $crate::aes_core::x86::scaffold::tail_through_buffer::<GROUP>(
                        s,
                        d,
                        len - off,
                        |s, d| decrypt_group(k, chain, s, d),
                    );
                }
                _mm_storeu_si128(iv.as_mut_ptr().cast(), next_iv);
            }
        }

        /// `N` registers of `$chains` sectors of `size` bytes, each its own chain, with
        /// their IVs `ivs`, skewed by `skew` blocks per register pair.
        ///
        /// # Safety
        /// As for the kernels; `src` and `dst` cover the `$chains * N` sectors.
        #[target_feature(enable = $features)]
        unsafe fn interleaved<const N: usize>(
            k: &$keys,
            ivs: &[$crate::block::Block],
            src: *const u8,
            dst: *mut u8,
            size: usize,
            skew: usize,
        ) {
            let blocks = size / 16;
            let delay = |r: usize| (r / 2) * skew;
            let max_delay = delay(N - 1);
            let at = |r: usize, block: usize| $chains * r * size + 16 * block;
            let mut x = [$zero(); N];
            for (r, v) in x.iter_mut().enumerate() {
                let $ivs = &ivs[$chains * r..];
                // SAFETY: the register's IVs are blocks of `ivs`.
                *v = unsafe { $load_ivs };
            }
            // SAFETY (of the loads and stores below): block `step - delay(r)` of a register's
            // sectors exists while it is active, and the sectors are inside the buffers.
            let input = |r: usize, b: usize| unsafe {
                let ($lp, $lsize) = (src.add(at(r, b)), size);
                $load
            };
            let output = |r: usize, b: usize, v: $reg| unsafe {
                let ($sp, $ssize, $sv) = (dst.add(at(r, b)), size, v);
                $store
            };
            for step in 0..blocks + max_delay {
                if step >= max_delay && step < blocks {
                    for (r, v) in x.iter_mut().enumerate() {
                        *v = $xor(*v, input(r, step - delay(r)));
                    }
                    crypt::<N, false>(k, &mut x);
                    for (r, v) in x.iter().enumerate() {
                        output(r, step - delay(r), *v);
                    }
                } else {
                    let active = |r: usize| step >= delay(r) && step - delay(r) < blocks;
                    let saved = x;
                    for (r, v) in x.iter_mut().enumerate() {
                        if active(r) {
                            *v = $xor(*v, input(r, step - delay(r)));
                        }
                    }
                    crypt::<N, false>(k, &mut x);
                    for (r, v) in x.iter_mut().enumerate() {
                        if active(r) {
                            output(r, step - delay(r), *v);
                        } else {
                            *v = saved[r];
                        }
                    }
                }
            }
        }

        /// Independent chains, one per sector of `size` bytes, `$chains * REGS` at a time.
        ///
        /// # Safety
        /// As for the kernels; at least one IV, and the buffers cover `ivs.len()` sectors.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $sectors(
            k: &$keys,
            ivs: &[$crate::block::Block],
            src: *const u8,
            dst: *mut u8,
            size: usize,
        ) {
            // One cache line of skew between register pairs when sectors alias in the L1 cache.
            let skew = if size.is_multiple_of(2048) { 4 } else { 0 };
            let mut s = 0;
            // SAFETY (of the pointer offsets and the calls): whole sectors inside the buffers.
            unsafe {
                while ivs.len() - s >= $chains * REGS {
                    let (i, at) = (&ivs[s..s + $chains * REGS], s * size);
                    interleaved::<REGS>(k, i, src.add(at), dst.add(at), size, skew);
                    s += $chains * REGS;
                }
                let regs = (ivs.len() - s) / $chains;
                let (i, at) = (&ivs[s..s + $chains * regs], s * size);
                let (src_at, dst_at) = (src.add(at), dst.add(at));
                match regs {
                    7 => interleaved::<7>(k, i, src_at, dst_at, size, skew),
                    6 => interleaved::<6>(k, i, src_at, dst_at, size, skew),
                    5 => interleaved::<5>(k, i, src_at, dst_at, size, skew),
                    4 => interleaved::<4>(k, i, src_at, dst_at, size, skew),
                    3 => interleaved::<3>(k, i, src_at, dst_at, size, skew),
                    2 => interleaved::<2>(k, i, src_at, dst_at, size, skew),
                    1 => interleaved::<1>(k, i, src_at, dst_at, size, skew),
                    _ => {}
                }
                s += $chains * regs;
                for (j, iv) in ivs.iter().enumerate().skip(s) {
                    let (mut iv, at) = (*iv, j * size);
                    let key = |r| k.key128(r);
                    $crate::aes_core::x86::scaffold::cbc_encrypt_xmm(
                        &mut iv,
                        src.add(at),
                        dst.add(at),
                        size,
                        k.rounds,
                        key,
                    );
                }
            }
        }
    };
}
pub(crate) use cbc_kernels;

/// Implements `AesKernels` for the key container `keys` over the backend's unsafe kernels
/// (each named with its ISA and width, each taking the keys, its state, the source and
/// destination pointers and the length): the safe methods take the pointers of their
/// `InOut`, which cover its length, and call the kernel, whose CPU features the container
/// proves. The kernels over data units (sectors, XTS units) are called only with at least
/// one unit, and with the unit size instead of the length. Single-chain
/// CBC encryption is latency bound, so every x86 backend runs it on xmm
/// ([`cbc_encrypt_xmm`]).
macro_rules! aes_kernels {
    (
        $keys:ty {
            ecb: $($ecb:ident)::+,
            cbc_decrypt: $cbc_decrypt:path,
            cbc_encrypt_sectors: $cbc_sectors:path,
            ctr: $ctr:path,
            xts: $($xts:ident)::+ $(,)?
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
                self.run_units(ivs, data, $cbc_sectors)
            }
            fn ctr(&self, counter: &mut u128, data: $crate::buf::InOut<'_>) {
                self.run(counter, data, $ctr)
            }
            fn xts_encrypt(&self, tweaks: &[$crate::block::Block], data: $crate::buf::InOut<'_>) {
                self.run_units(tweaks, data, $($xts)::+::<false>)
            }
            fn xts_decrypt(&self, tweaks: &[$crate::block::Block], data: $crate::buf::InOut<'_>) {
                self.run_units(tweaks, data, $($xts)::+::<true>)
            }
        }

        impl $keys {
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
                kernel: unsafe fn(&Self, &[$crate::block::Block], *const u8, *mut u8, usize),
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
