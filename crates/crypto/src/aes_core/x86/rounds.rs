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
        #[allow(dead_code, reason = "the zmm CTR kernel builds its groups itself")]
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
///   register's sectors, `$ivs` loads their IVs). Each register runs its sectors in turns,
///   taking up its next ones as soon as its last end; the registers' worth of sectors is
///   spread over as few registers (at most `R`) as evenly as it goes, in up to two calls
///   (`rest` lists the other register counts, each a const generic instance). A width whose
///   CPU may have 32 registers stamps a kernel with more registers for it.
///
/// Sectors of 2 KiB and more start at addresses equal modulo 4 KiB, so chains at the same
/// block offset would compete for one set of the 8-way L1 cache (with 16 chains, a third
/// of the speed). The chains are therefore skewed: each group of `skewed` registers (a
/// pair on ymm, one register on zmm, whose four chains already share a set) runs `skew`
/// blocks (one cache line on ymm, two on zmm) behind the group before; the steps at the
/// start
/// and end of a call where some registers have no block, and those where a register ends
/// a turn, take a slower path. A remainder of fewer than `$chains` sectors runs alone on
/// xmm.
///
/// `$steps` steps may store their ciphertext together (`$store_steps`: one register per
/// step in, each sector's `$steps` blocks out; zmm transposes four steps into four
/// full-width stores): in the steady steps, when every sector's blocks and the skew are
/// multiples of `$steps`, from a step that is a multiple of it (all registers then stand at
/// a block index that is one). The other steps store one step at a time (`$store`). A width
/// with `$steps` 1 stores every step itself.
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
        skewed: $skewed:literal,
        skew: $skew:literal,
        load: |$lp:ident, $lsize:ident| $load:expr,
        store: |$sp:ident, $ssize:ident, $sv:ident| $store:expr,
        steps: $steps:literal,
        store_steps: |$wp:ident, $wsize:ident, $wv:ident| $store_steps:expr,
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
        /// Independent chains, one per sector of `size` bytes, up to `$chains * $sregs`
        /// at a time, compiled with `$sfeatures`.
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
            /// `N` registers, each running `turns` times `$chains` sectors of `size` bytes
            /// one after the other (register `r`'s turn `q` is the `q * N + r`-th group of
            /// `$chains` sectors; `ivs` holds their IVs in that order), register pair `r / 2`
            /// `skew` blocks behind the previous pair.
            ///
            /// A register carries its next AES input already whitened: chaining value XOR
            /// plaintext XOR round key 0. The plaintext of the following block (XOR round
            /// key 0) is folded into the last round key, so the last round yields the next
            /// input directly and the chain is the AES rounds alone; the ciphertext, that
            /// XOR the folded value, is off the chain. The steps where every register has a
            /// block and a following one run a loop of their own without copies; the others
            /// (at the start and end, some registers idle; a register at the last block of
            /// a turn, which then takes up its next turn) work on a copy. A register goes on
            /// to its next turn without waiting for the others, so the skew costs idle steps
            /// once per call rather than once per turn.
            ///
            /// # Safety
            /// As for the kernels; `src` and `dst` cover the `$chains * N * turns` sectors.
            #[target_feature(enable = $sfeatures)]
            unsafe fn interleaved<const N: usize>(
                k: &$keys,
                ivs: &[$crate::block::Block],
                src: *const u8,
                dst: *mut u8,
                size: usize,
                skew: usize,
                turns: usize,
            ) {
                let blocks = size / 16;
                let delay = |r: usize| (r / $skewed) * skew;
                let span = turns * blocks;
                let end = span + delay(N - 1);
                let (first, last) = (k.key::<false>(0), k.key::<false>(k.rounds));
                // Register `r`'s current turn, moved back by its delay and the turns before:
                // at step `s` it is at block `(s - delay(r)) % blocks`, `16 * s` bytes on
                // (wrapping: the base may lie outside the buffer, the blocks accessed do not).
                // A register's source and destination.
                type Base = (*const u8, *mut u8);
                let mut bases: [Base; N] = ::core::array::from_fn(|r| {
                    let (at, back) = ($chains * r * size, 16 * delay(r));
                    (
                        src.wrapping_add(at).wrapping_sub(back),
                        dst.wrapping_add(at).wrapping_sub(back),
                    )
                });
                // From one turn of a register to its next.
                let next_turn = ($chains * N - 1) * size;
                // SAFETY (of the loads and stores below): they are called only for a step
                // at which the register is at a block of its current turn (the following
                // block for the `input` of `step + 1`), inside the buffers.
                let input = |base: Base, step: usize| unsafe {
                    let ($lp, $lsize) = (base.0.wrapping_add(16 * step), size);
                    $load
                };
                let output = |base: Base, step: usize, v: $reg| unsafe {
                    let ($sp, $ssize, $sv) = (base.1.wrapping_add(16 * step), size, v);
                    $store
                };
                // Register `r`'s first block of its turn `q` (at step `step`), whitened.
                let start = |base: Base, r: usize, q: usize, step: usize| {
                    let $ivs = &ivs[$chains * (q * N + r)..];
                    // SAFETY: the turn's IVs are blocks of `ivs`.
                    let iv = unsafe { $load_ivs };
                    $xor(iv, $xor(input(base, step), first))
                };
                let mut x = [$zero(); N];
                for (r, v) in x.iter_mut().enumerate() {
                    *v = start(bases[r], r, 0, delay(r));
                }
                // A step at which some register is idle or at the last block of a turn.
                let edge = |x: &mut [$reg; N], bases: &mut [Base; N], step: usize| {
                    let mut y = *x;
                    rounds_but_last::<N, false>(k, &mut y);
                    for r in 0..N {
                        let Some(at) = step.checked_sub(delay(r)).filter(|&at| at < span) else {
                            continue;
                        };
                        if (at + 1) % blocks != 0 {
                            let t = $xor(input(bases[r], step + 1), first);
                            x[r] = last_round::<false>(y[r], $xor(t, last));
                            output(bases[r], step, $xor(x[r], t));
                        } else {
                            output(bases[r], step, last_round::<false>(y[r], last));
                            if at + 1 < span {
                                bases[r] = (
                                    bases[r].0.wrapping_add(next_turn),
                                    bases[r].1.wrapping_add(next_turn),
                                );
                                x[r] = start(bases[r], r, (at + 1) / blocks, step + 1);
                            }
                        }
                    }
                };
                // Every register at a block index that is a multiple of `$steps` at the same
                // steps: the stores of `$steps` steps go together.
                let wide = $steps > 1 && blocks.is_multiple_of($steps) && skew.is_multiple_of($steps);
                let mut step = 0;
                while step < end {
                    // The steps up to the next edge: every register in a turn, before its last
                    // block (the pairs' positions in their turns tell when).
                    let mut steady = usize::MAX;
                    for r in (0..N).step_by($skewed) {
                        steady = match step.checked_sub(delay(r)).filter(|&at| at < span) {
                            Some(at) => steady.min(step + blocks - 1 - at % blocks),
                            None => step,
                        };
                    }
                    let mut s = step;
                    while s < steady {
                        if wide && s.is_multiple_of($steps) && steady - s >= $steps {
                            // `$steps` steps, their ciphertext stored together.
                            let mut out = [[$zero(); $steps]; N];
                            for i in 0..$steps {
                                rounds_but_last::<N, false>(k, &mut x);
                                for (r, v) in x.iter_mut().enumerate() {
                                    // SAFETY: an element of a live array, aligned.
                                    let base = unsafe { ::core::ptr::read_volatile(&bases[r]) };
                                    let t = $xor(input(base, s + i + 1), first);
                                    *v = last_round::<false>(*v, $xor(t, last));
                                    out[r][i] = $xor(*v, t);
                                }
                            }
                            for (r, o) in out.iter().enumerate() {
                                // SAFETY: as above; the `$steps` blocks of each sector of the
                                // register are inside its turn (the steps are steady ones).
                                unsafe {
                                    let base = ::core::ptr::read_volatile(&bases[r]);
                                    let ($wp, $wsize, $wv) = (base.1.wrapping_add(16 * s), size, o);
                                    $store_steps
                                }
                            }
                            s += $steps;
                            continue;
                        }
                        rounds_but_last::<N, false>(k, &mut x);
                        for (r, v) in x.iter_mut().enumerate() {
                            // Read afresh each step: held in registers, the compiler would
                            // step `4 * N` pointers of its own and spill them.
                            // SAFETY: an element of a live array, aligned.
                            let base = unsafe { ::core::ptr::read_volatile(&bases[r]) };
                            let t = $xor(input(base, s + 1), first);
                            *v = last_round::<false>(*v, $xor(t, last));
                            output(base, s, $xor(*v, t));
                        }
                        s += 1;
                    }
                    step = steady.max(step);
                    if step < end {
                        edge(&mut x, &mut bases, step);
                        step += 1;
                    }
                }
            }
            // `$skew` blocks between groups of `$skewed` registers when sectors alias in the
            // L1 cache.
            let skew = if size.is_multiple_of(2048) { $skew } else { 0 };
            // Whole registers' worth of sectors (`regs`), `q` turns per register on as few
            // registers (at most `$sregs`) as evenly as they go, in up to two calls:
            // `regs = q * n + e` runs as `e` turns on `n + 1` registers, then `q - e` on `n`.
            // (A call of few registers is latency bound: 32 registers' worth on 12 run as 2
            // turns on 11 and one on 10, not 2 on 12 and one on 8.)
            let regs = ivs.len() / $chains;
            let q = regs.div_ceil($sregs);
            let mut s = 0;
            // SAFETY (of the pointer offsets and the calls): whole sectors inside the buffers.
            unsafe {
                if q > 0 {
                    let (n, e) = (regs / q, regs % q);
                    for (n, turns) in [(n + 1, e), (n, q - e)] {
                        if turns == 0 {
                            continue;
                        }
                        let (i, at) = (&ivs[s..s + $chains * n * turns], s * size);
                        let (sa, da) = (src.add(at), dst.add(at));
                        match n {
                            $sregs => interleaved::<$sregs>(k, i, sa, da, size, skew, turns),
                            $($srest => interleaved::<$srest>(k, i, sa, da, size, skew, turns),)*
                            _ => unreachable!("1 to {} registers", $sregs),
                        }
                        s += $chains * n * turns;
                    }
                }
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
