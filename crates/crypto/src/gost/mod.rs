//! GOST 28147-89 and Magma (GOST R 34.12-2015, RFC 8891): the 64-bit block cipher with its
//! eight S-box parameter sets, both byte conventions, and every mode of both standards.
//!
//! # Two byte conventions, one cipher
//! GOST 28147-89 libraries (CryptoPro, gost-engine, libgcrypt, Botan) read key word `K_i`
//! as the little-endian word of key bytes `4i..4i+3`, and a block's bytes 0..3 (little
//! endian) are the half `N1` that enters the first round. Magma (RFC 8891) reads key and
//! block as big-endian strings. Internally a block is a `u64` whose low word is `N1`; a key
//! ([`Core`]) carries its [`Order`], which reads blocks and key words little-endian for
//! GOST 28147-89 and big-endian for Magma. That is exactly the documented mapping
//! `Magma(K, P) = rev8(GOST89_Z(wordrev(K), rev8(P)))` (tested in `tests/gost`).
//!
//! # Parameter sets
//! [`Sbox`] (`sbox.rs`) names the eight S-box sets by their OID names
//! (`id-Gost28147-89-CryptoPro-A-ParamSet`, ..., `id-tc26-gost-28147-param-Z`). GOST
//! 28147-89 types take one explicitly (libraries disagree on the default); Magma always
//! uses `id-tc26-gost-28147-param-Z`.
//!
//! # Layout
//! - `gost89.rs` and `magma.rs`: the public types of each family ([`gost89`], [`magma`]),
//!   thin over the shared layers below;
//! - `chain.rs`: the CBC and CFB chains, written once for both families (byte order from
//!   the key, z feedback registers, optional key meshing), and the sector-interleaved
//!   chains;
//! - `keystream.rs`: counter blocks through the block kernel, XORed from source to
//!   destination (Magma CTR, CTR-ACPKM and MGM; GOST 28147-89 CNT uses its XOR);
//! - `mesh.rs`: CryptoPro key meshing (RFC 4357 section 2.3) and its per-key cache;
//! - this file: the key ([`Core`]) with its ECB over an [`InOut`], and the self-test.
//!
//! Every entry point, in place or out of place, is one code path over [`InOut`]: nothing
//! copies the source to the destination first.
//!
//! # Backends ([`GostBackend`])
//! - `soft` (`soft.rs`): portable, no `unsafe`, one block at a time, S-boxes evaluated as
//!   lookups inside 64-bit registers (a shift by a secret count), never in memory;
//! - `avx512` (`avx512.rs`, x86-64 with AVX-512 F/BW/VL/VBMI): 16 blocks per pair of zmm
//!   registers, one half-block per 32-bit lane, the S-boxes as `vpermb` tables held in
//!   registers, 8 groups in flight; ECB and everything built on it as for `avx2`, plus a
//!   counter kernel ([`Core::ctr_kernel`]) that makes the counter blocks of GOST 28147-89
//!   CNT and Magma CTR / CTR-ACPKM in registers and XORs the keystream into the data;
//! - `avx2` (`avx2.rs`, x86-64 only): 32 blocks per group byte-sliced over eight ymm
//!   registers, the S-boxes as `vpshufb` nibble tables held in registers, for ECB and
//!   everything built on ECB of independent blocks (CNT/CTR/CTR-ACPKM keystreams, CBC and
//!   CFB decryption, the sector-interleaved CBC and CFB encryption, MGM's two counter
//!   streams). The sequential chains (CBC and CFB encryption of one message, OFB, the
//!   MACs) run on `soft` code whatever the key's backend.
//!
//! Selection follows the AES rule: the fastest usable backend, unless
//! `SECTORCRYPT_BACKEND` names one. A name that only AES has (`aesni`, `vaes`) gives GOST
//! the portable backend; an unknown name, or a name this CPU cannot run, is an error. Each
//! backend passes a known-answer self-test before first use.
//!
//! # Constant time
//! No memory address and no branch depends on the key, the data or the S-box: `soft.rs`,
//! `avx2.rs` and `avx512.rs` explain how, and how it was checked:
//! `scripts/gost-ct-disasm.sh` (the addressing forms and branches of the hot loops) and
//! `scripts/gost-ct-cachegrind.sh` (identical instruction, access and L1-miss counts for
//! different secrets, on the backends valgrind runs). The mode
//! layers branch only on lengths, block counts and the register index, all public.

/// The in-place and out-of-place methods of a mode type, all four through the type's
/// `run(dir, [iv,] io)`: `encrypt`, `decrypt`, `encrypt_to`, `decrypt_to`. Call with
/// `in_out_methods!()` for a mode without IV, `in_out_methods!(iv: TYPE)` otherwise.
macro_rules! in_out_methods {
    ($($iv:ident: $ivt:ty)?) => {
        /// Encrypts `buf` in place.
        pub fn encrypt(&self, $($iv: $ivt,)? buf: &mut [u8]) -> Result<(), Error> {
            self.run(Dir::Encrypt, $($iv,)? InOut::InPlace(buf))
        }

        /// Decrypts `buf` in place.
        pub fn decrypt(&self, $($iv: $ivt,)? buf: &mut [u8]) -> Result<(), Error> {
            self.run(Dir::Decrypt, $($iv,)? InOut::InPlace(buf))
        }

        /// Encrypts `src` into `dst` (same length).
        pub fn encrypt_to(&self, $($iv: $ivt,)? src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
            same_len(src, dst)?;
            self.run(Dir::Encrypt, $($iv,)? InOut::split(src, dst))
        }

        /// Decrypts `src` into `dst` (same length).
        pub fn decrypt_to(&self, $($iv: $ivt,)? src: &[u8], dst: &mut [u8]) -> Result<(), Error> {
            same_len(src, dst)?;
            self.run(Dir::Decrypt, $($iv,)? InOut::split(src, dst))
        }
    };
}

/// Declares mode types that hold one key each (of type `$key`, built by `$ctor(key,
/// args..., backend)`), with the family's constructors: `new` (the selected backend),
/// `with_backend` (a named one) and `backend`.
macro_rules! mode_types {
    ($key:ty = $ctor:path, $args:tt, $new_doc:literal; $($(#[$doc:meta])* $t:ident;)+) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $t {
            key: $key,
        }

        mode_types!(@impl $t, $ctor, $new_doc, $args);
    )+};
    (@impl $t:ident, $ctor:path, $new_doc:literal, ($($arg:ident: $argt:ty),*)) => {
        impl $t {
            #[doc = $new_doc]
            pub fn new(key: &[u8], $($arg: $argt),*) -> Result<$t, Error> {
                Ok($t { key: $ctor(key, $($arg,)* None)? })
            }

            /// The same on a named backend (tests and benchmarks).
            pub fn with_backend(
                key: &[u8],
                $($arg: $argt,)*
                backend: GostBackend,
            ) -> Result<$t, Error> {
                Ok($t { key: $ctor(key, $($arg,)* Some(backend))? })
            }

            /// The backend this key runs on.
            pub fn backend(&self) -> GostBackend {
                self.key.backend()
            }
        }
    };
}

/// `Debug` for a running state: the key (which never shows key material) and the public
/// position, nothing of the registers or the buffered data.
macro_rules! debug_state {
    ($($t:ident),+) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("key", &self.key)
                    .field("blocks", &self.blocks)
                    .finish_non_exhaustive()
            }
        }
    )+};
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod backend;
mod chain;
pub mod gost89;
mod keystream;
pub mod magma;
mod mesh;
mod sbox;
pub(crate) mod soft;

pub use backend::GostBackend;
pub use sbox::Sbox;

use crate::buf::InOut;
use crate::error::{InputError, KeyError};
use crate::Error;
use soft::{PackedSbox, Schedule, SideJob, DEC_ORDER, ENC_ORDER};

/// The block size of both families in bytes.
pub(crate) const BLOCK: usize = 8;

/// How block bytes map to the integer block (and key bytes to key words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// GOST 28147-89 libraries: little-endian.
    Gost89,
    /// Magma (RFC 8891): big-endian.
    Magma,
}

impl Order {
    #[inline(always)]
    pub(crate) fn load(self, b: &[u8]) -> u64 {
        let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
        match self {
            Order::Gost89 => u64::from_le_bytes(a),
            Order::Magma => u64::from_be_bytes(a),
        }
    }

    #[inline(always)]
    pub(crate) fn store(self, x: u64) -> [u8; 8] {
        match self {
            Order::Gost89 => x.to_le_bytes(),
            Order::Magma => x.to_be_bytes(),
        }
    }
}

/// Encrypt or decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Encrypt,
    Decrypt,
}

/// A key bound to its S-box, byte convention and backend. Zeroized on drop; `Debug` never
/// shows key material.
#[derive(Clone)]
pub(crate) struct Core {
    pub(crate) s: Schedule,
    pub(crate) sbox: Sbox,
    pub(crate) order: Order,
    pub(crate) backend: GostBackend,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GostKey")
            .field("order", &self.order)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Reads a 32-byte key into words K1..K8 in the convention of `order`.
fn key_words(key: &[u8], order: Order, what: &'static str) -> Result<[u32; 8], Error> {
    if key.len() != 32 {
        return Err(Error::Key(KeyError::Length {
            what,
            got: key.len(),
            expected: "32 bytes",
        }));
    }
    Ok(core::array::from_fn(|i| {
        let w: [u8; 4] = key[4 * i..4 * i + 4].try_into().expect("4 bytes");
        match order {
            Order::Gost89 => u32::from_le_bytes(w),
            Order::Magma => u32::from_be_bytes(w),
        }
    }))
}

impl Core {
    pub(crate) fn new(
        key: &[u8],
        sbox: Sbox,
        order: Order,
        backend: Option<GostBackend>,
        what: &'static str,
    ) -> Result<Core, Error> {
        let backend = match backend {
            Some(b) => b,
            None => GostBackend::selected()?,
        };
        backend.ensure_usable()?;
        Ok(Core::new_unchecked(
            key_words(key, order, what)?,
            sbox,
            order,
            backend,
        ))
    }

    pub(crate) fn new_unchecked(
        k: [u32; 8],
        sbox: Sbox,
        order: Order,
        backend: GostBackend,
    ) -> Core {
        Core {
            s: Schedule {
                k,
                sbox: PackedSbox::pack(sbox.rows()),
            },
            sbox,
            order,
            backend,
        }
    }

    /// The backend this key runs on.
    pub(crate) fn backend(&self) -> GostBackend {
        self.backend
    }

    /// Encrypts one block (as an integer) on the portable code.
    #[inline(always)]
    pub(crate) fn enc(&self, x: u64) -> u64 {
        self.s.encrypt(x)
    }

    /// ECB over the whole blocks of `io`, on this key's backend.
    pub(crate) fn ecb(&self, dir: Dir, io: InOut<'_>) {
        self.ecb_with_side(dir, io, None);
    }

    /// [`Core::ecb`], running the rounds of `side` (a one-block encryption under another
    /// key) among the kernel's rounds where the backend can; `side` is finished on return.
    pub(crate) fn ecb_with_side(&self, dir: Dir, mut io: InOut<'_>, side: Option<&mut SideJob>) {
        debug_assert!(io.len().is_multiple_of(BLOCK));
        let rounds = match dir {
            Dir::Encrypt => &ENC_ORDER,
            Dir::Decrypt => &DEC_ORDER,
        };
        let mut side = side;
        let done = self.simd_ecb(rounds, io.reborrow(), side.as_deref_mut());
        if let Some(j) = side {
            j.finish();
        }
        // The rest on the portable code, one block at a time.
        let block = |b: &[u8]| {
            let x = self.order.load(b);
            self.order.store(match dir {
                Dir::Encrypt => self.s.encrypt(x),
                Dir::Decrypt => self.s.decrypt(x),
            })
        };
        match io {
            InOut::InPlace(buf) => {
                for b in buf[done..].chunks_exact_mut(BLOCK) {
                    let y = block(b);
                    b.copy_from_slice(&y);
                }
            }
            InOut::Split { src, dst } => {
                let src = src[done..].chunks_exact(BLOCK);
                for (s, d) in src.zip(dst[done..].chunks_exact_mut(BLOCK)) {
                    d.copy_from_slice(&block(s));
                }
            }
        }
    }

    /// The SIMD kernel of this key's backend on a leading part of `io`; returns how many
    /// bytes it did (0 on `soft`), the rest is left to the portable loop.
    #[inline(always)]
    fn simd_ecb(&self, rounds: &[usize; 32], io: InOut<'_>, side: Option<&mut SideJob>) -> usize {
        #[cfg(target_arch = "x86_64")]
        match self.backend {
            GostBackend::Avx512 => return avx512::run(self, rounds, avx512::Job::Ecb, io, side),
            GostBackend::Avx2 => {
                return avx2::ecb(&self.s.k, rounds, self.sbox, self.order, io, side);
            }
            _ => {}
        }
        let _ = (rounds, io, side);
        0
    }

    /// XORs the keystream of `ctr` into the whole blocks of `io` on this key's counter
    /// kernel, which makes the counter blocks in registers; returns the bytes done: all
    /// whole blocks, or 0 (then `side` is untouched) when the backend has no counter
    /// kernel or `io` holds fewer than two blocks. `side` runs among the kernel's rounds;
    /// the caller finishes it.
    pub(crate) fn ctr_kernel(
        &self,
        ctr: keystream::Counter,
        io: InOut<'_>,
        side: Option<&mut SideJob>,
    ) -> usize {
        #[cfg(target_arch = "x86_64")]
        if self.backend == GostBackend::Avx512 {
            return avx512::run(self, &ENC_ORDER, avx512::Job::Ctr(ctr), io, side);
        }
        let _ = (ctr, io, side);
        0
    }
}

/// Refuses out-of-place calls with different lengths.
pub(crate) fn same_len(src: &[u8], dst: &[u8]) -> Result<(), Error> {
    if src.len() != dst.len() {
        return Err(Error::Input(InputError::LengthMismatch {
            src: src.len(),
            dst: dst.len(),
        }));
    }
    Ok(())
}

/// Refuses lengths that are not a whole number of 8-byte blocks.
pub(crate) fn whole_blocks(len: usize) -> Result<(), Error> {
    if !len.is_multiple_of(BLOCK) {
        return Err(Error::Input(InputError::Length {
            got: len,
            why: "must be a multiple of 8 bytes",
        }));
    }
    Ok(())
}

/// Refuses MAC lengths outside 1 to 8 bytes.
pub(crate) fn mac_len(len: usize) -> Result<(), Error> {
    if len == 0 || len > BLOCK {
        return Err(Error::Input(InputError::TagLength {
            got: len,
            expected: "1 to 8 bytes",
        }));
    }
    Ok(())
}

/// The known-answer self-test of a backend, run once before first use: RFC 8891 A.4 and
/// a GOST 28147-89 ECB vector, then (for SIMD backends) ECB both ways in both byte orders
/// against `soft` at 1, 33, 67 and 131 blocks (the one-group, two-group and four-group
/// paths of the kernel, with tails), in place and out of place.
pub(crate) fn self_test(backend: GostBackend) -> bool {
    let key: Vec<u8> = (0..32u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(11))
        .collect();
    // RFC 8891 A.4.
    let k: [u8; 32] = [
        0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x00, 0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd,
        0xfe, 0xff,
    ];
    let Ok(kw) = key_words(&k, Order::Magma, "magma") else {
        return false;
    };
    let c = Core::new_unchecked(kw, Sbox::Tc26Z, Order::Magma, backend);
    let mut b = [0u8; 64];
    for blk in b.chunks_exact_mut(8) {
        blk.copy_from_slice(&[0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10]);
    }
    c.ecb(Dir::Encrypt, InOut::InPlace(&mut b));
    if b.chunks_exact(8)
        .any(|x| x != [0x4e, 0xe9, 0x01, 0xe5, 0xc2, 0xd8, 0xca, 0x3d])
    {
        return false;
    }
    c.ecb(Dir::Decrypt, InOut::InPlace(&mut b));
    if b[..8] != [0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10] {
        return false;
    }
    if backend == GostBackend::Soft {
        return true;
    }
    for (order, sbox) in [
        (Order::Gost89, Sbox::CryptoProA),
        (Order::Magma, Sbox::Tc26Z),
    ] {
        let Ok(kw) = key_words(&key, order, "gost") else {
            return false;
        };
        let soft = Core::new_unchecked(kw, sbox, order, GostBackend::Soft);
        let tested = Core::new_unchecked(kw, sbox, order, backend);
        for blocks in [1usize, 33, 67, 131] {
            let input: Vec<u8> = (0..blocks * 8).map(|i| (i * 7 + 3) as u8).collect();
            for dir in [Dir::Encrypt, Dir::Decrypt] {
                let mut want = input.clone();
                soft.ecb(dir, InOut::InPlace(&mut want));
                let mut got = input.clone();
                tested.ecb(dir, InOut::InPlace(&mut got));
                let mut out = vec![0u8; input.len()];
                tested.ecb(dir, InOut::split(&input, &mut out));
                if want != got || want != out {
                    return false;
                }
            }
        }
        if !counter_kernel_matches(&soft, &tested) {
            return false;
        }
    }
    true
}

/// The counter kernel of `tested` (if it has one) against counter blocks encrypted by
/// `soft`: Magma's count across the 2^32 carry and the 2^64 wrap, and CNT with its
/// mod 2^32 - 1 word from 0, 1 below 2^32 - 1 and 2^32 - 1, at 2, 17 and 131 blocks.
fn counter_kernel_matches(soft: &Core, tested: &Core) -> bool {
    use keystream::Counter;
    let starts = [
        Counter::Add64(0x0000_0001_ffff_fff9),
        Counter::Add64(u64::MAX - 20),
        Counter::Cnt(0xffff_ff00, 0),
        Counter::Cnt(7, 0xffff_fffe),
        Counter::Cnt(0xdead_beef, 0xffff_ffff),
    ];
    for start in starts {
        for blocks in [2usize, 17, 131] {
            let data: Vec<u8> = (0..blocks * 8).map(|i| (i * 13 + 5) as u8).collect();
            let mut want = vec![0u8; data.len()];
            let mut c = start;
            for b in want.chunks_exact_mut(BLOCK) {
                b.copy_from_slice(&soft.order.store(c.next_block()));
            }
            soft.ecb(Dir::Encrypt, InOut::InPlace(&mut want));
            for (w, d) in want.iter_mut().zip(&data) {
                *w ^= d;
            }
            let mut got = data.clone();
            match tested.ctr_kernel(start, InOut::InPlace(&mut got), None) {
                0 => return true,
                n if n != got.len() || got != want => return false,
                _ => {}
            }
        }
    }
    true
}

/// The best of five timed runs of `run`, in seconds per unit (`units` in a run): the
/// least disturbed one.
pub(crate) fn best_seconds(units: usize, mut run: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = std::time::Instant::now();
            run();
            t.elapsed().as_secs_f64() / units as f64
        })
        .fold(f64::INFINITY, f64::min)
}

impl GostBackend {
    /// The cost of one round on one block, in seconds, measured now in this process (a
    /// few milliseconds): the rounds alone of the backend's kernel on as many blocks as
    /// it keeps in flight (`soft`: one block after another, as its sequential modes run).
    /// `None` when the backend is not usable here.
    pub fn round_seconds(self) -> Option<f64> {
        self.ensure_usable().ok()?;
        #[cfg(target_arch = "x86_64")]
        match self {
            GostBackend::Avx512 => return Some(avx512::round_seconds()),
            GostBackend::Avx2 => return Some(avx2::round_seconds()),
            _ => {}
        }
        Some(soft::round_seconds())
    }
}
