//! The round helpers of the x86 AES backends and the mode kernels that are the same on
//! every width around a backend's own pieces (ECB; CBC decryption and the interleaved CBC
//! encryption of many sectors), stamped out per backend by macros for the reason
//! `scaffold.rs` gives. A leaf file: raw pointers and intrinsics.
#![allow(unsafe_code)]

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
/// - for each entry `name: features, regs: R, rest: [R-1, ..., 1]` of `sectors`,
///   `name(k, ivs, src, dst, len)` compiled with `features`: independent chains, one per
///   sector, `$chains` sectors per register (`$load`/`$store` move one block of each of a
///   register's sectors, `$ivs` loads their IVs), `R` registers advancing together, a
///   remainder of fewer than `R` registers' sectors on as many registers as it fills
///   (`rest` lists the counts, each a const generic instance). A width whose CPU may have
///   32 registers stamps a kernel with more registers for it.
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
        sectors: [$($sectors:ident: $sfeatures:literal, regs: $sregs:literal, rest: [$($srest:literal),*]);+ $(;)?],
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

        $(
        /// Independent chains, one per sector of `size` bytes, `$chains * $sregs` at a
        /// time, compiled with `$sfeatures`.
        ///
        /// # Safety
        /// As for the kernels; at least one IV, and the buffers cover `ivs.len()` sectors;
        /// the CPU has `$sfeatures`.
        #[target_feature(enable = $sfeatures)]
        pub(super) unsafe fn $sectors(
            k: &$keys,
            ivs: &[$crate::block::Block],
            src: *const u8,
            dst: *mut u8,
            size: usize,
        ) {
            /// `N` registers of `$chains` sectors of `size` bytes, each its own chain, with
            /// their IVs `ivs`, skewed by `skew` blocks per register pair.
            ///
            /// # Safety
            /// As for the kernels; `src` and `dst` cover the `$chains * N` sectors.
            #[target_feature(enable = $sfeatures)]
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
            // One cache line of skew between register pairs when sectors alias in the L1 cache.
            let skew = if size.is_multiple_of(2048) { 4 } else { 0 };
            let mut s = 0;
            // SAFETY (of the pointer offsets and the calls): whole sectors inside the buffers.
            unsafe {
                while ivs.len() - s >= $chains * $sregs {
                    let (i, at) = (&ivs[s..s + $chains * $sregs], s * size);
                    interleaved::<$sregs>(k, i, src.add(at), dst.add(at), size, skew);
                    s += $chains * $sregs;
                }
                let regs = (ivs.len() - s) / $chains;
                let (i, at) = (&ivs[s..s + $chains * regs], s * size);
                let (src_at, dst_at) = (src.add(at), dst.add(at));
                match regs {
                    $($srest => interleaved::<$srest>(k, i, src_at, dst_at, size, skew),)*
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
        )+
    };
}
pub(crate) use cbc_kernels;
