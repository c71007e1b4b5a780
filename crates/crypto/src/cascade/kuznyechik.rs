//! Kuznyechik (GOST R 34.12-2015, RFC 7801) for the cascades' Kuznyechik layer (VeraCrypt
//! volumes, and dm-crypt's `kuznyechik-xts-plain64` through the sectors): ECB of many
//! blocks and XTS over many whole data units per call, on two backends
//! ([`KuznyechikBackend`]):
//! - `avx512` (`avx512.rs`, x86-64 with AVX-512 F/BW/VBMI, GFNI and VPCLMULQDQ): 64
//!   blocks per step, byte-sliced in zmm registers, the S-box as `vpermi2b` lookups in
//!   registers and the linear map `L` as a 16x16 matrix over GF(2^8) applied with GFNI
//!   affine instructions; constant-time (no memory lookup indexed by secret data);
//! - `soft`: the RustCrypto `kuznyechik` crate, one block at a time: the portable
//!   reference (its SSE2 path is the 64 KiB LS tables, indexed by secret data, so not
//!   constant-time).
//!
//! `tables.rs` holds what the SIMD kernel shares and can be checked without it: `pi`, the
//! matrices of `L` and `L^-1` (built from the standard's coefficients and checked on its
//! examples), the key schedule, and a one-block reference cipher in the kernel's form.
//!
//! XTS: the tweaks of a batch of units (their numbers, encrypted with the tweak key) are
//! encrypted together in one ECB call; then the SIMD backend makes each unit's sequence of
//! tweaks in registers and XORs it in around the cipher, many units per call. Units are
//! whole blocks (the cascade checks): no ciphertext stealing.
//!
//! Selection follows the crate's rule ([`crate::backend`]): the fastest usable backend as
//! measured on the first choice (with one SIMD backend, the SIMD one, unmeasured), unless
//! `SECTORCRYPT_BACKEND` names one (a name only other families have, such as `aesni` or
//! `avx2`, gives Kuznyechik `soft`); every backend passes a known-answer self-test and a
//! comparison with `soft` before first use.
//!
//! Measured with the bench case `kuznyechik-xts/4096` on the Zen 5 VM it was written on
//! (three runs, medians, load average 2.2; docs/PERFORMANCE.md): `avx512` 2.27 GB/s, 1.72
//! c/B, 16.5x OpenSSL's gost provider (gost-engine 3.0.1, its SSE2 LS tables, 28.5 c/B) in
//! the same run; `soft` 28.3 c/B, 1.02x it.

use super::mul_alpha;
use crate::backend::{family, selectable, Algorithm, Run, Workload};
use crate::block::BLOCK;
use crate::error::KeyError;
use crate::Error;
use cipher::generic_array::GenericArray;
use cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use zeroize::Zeroize;

#[cfg(target_arch = "x86_64")]
mod avx512;
mod tables;

family! {
    /// An implementation of Kuznyechik, the cascades' Kuznyechik layer.
    pub enum KuznyechikBackend: Kuznyechik, self_test: self_test {
        /// AVX-512 F/BW/VBMI with GFNI and VPCLMULQDQ: 64 blocks per step, byte-sliced,
        /// the S-box as `vpermi2b`, `L` as a GFNI matrix over GF(2^8).
        Avx512 = "avx512", x86 [OsYmm, OsZmm, Avx512f, Avx512bw, Avx512vbmi, Gfni, Vpclmulqdq],
        /// The RustCrypto `kuznyechik` crate, one block at a time.
        Soft = "soft", portable,
    }
}

selectable!(KuznyechikBackend, unknown: "kuznyechik backend" lists own);

/// Bytes of one unit of the backend choice's work.
const WORK_UNIT: usize = 4096;
/// Units in one run of it: 16 KiB, in L1.
const WORK_UNITS: usize = 4;

/// The work the SIMD backends are timed on when more than one is usable:
/// Kuznyechik-XTS over 4 KiB units, on fixed public keys (written here, beside the
/// family, as Serpent's is).
pub(crate) const WORKLOAD: Workload<KuznyechikBackend> = Workload {
    algorithm: Algorithm::Kuznyechik,
    what: "kuznyechik-xts, 4 units of 4096 bytes",
    bytes: WORK_UNITS * WORK_UNIT,
    usable: |_| Ok(()),
    prepare: |b| {
        let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(0x3b) ^ 0x5c).collect();
        let xts = KuznyechikXts::new(&key[..32], &key[32..], Some(b))?;
        let mut buf = vec![0u8; WORK_UNITS * WORK_UNIT];
        let run: Run = Box::new(move || xts.apply(true, 0, WORK_UNIT, &mut buf));
        Ok(run)
    },
};

/// Units whose tweaks are encrypted in one ECB call (1 KiB of tweak blocks: one step of
/// the widest backend).
const TWEAK_BATCH: usize = 64;

/// Kuznyechik under one key, on one backend. The expanded keys are zeroized on drop.
pub(super) struct Kuznyechik {
    soft: ::kuznyechik::Kuznyechik,
    /// The encryption and decryption passes in the kernels' form (SIMD backends only).
    wide: Option<Box<[tables::Wide; 2]>>,
    backend: KuznyechikBackend,
}

impl Kuznyechik {
    /// Expands a 32-byte key for `backend` (`None`: the selected one), which must be
    /// usable here.
    pub(super) fn new(key: &[u8], backend: Option<KuznyechikBackend>) -> Result<Kuznyechik, Error> {
        let backend = match backend {
            Some(b) => b,
            None => KuznyechikBackend::selected()?,
        };
        backend.ensure_usable()?;
        Kuznyechik::new_unchecked(key, backend)
    }

    /// [`Kuznyechik::new`] without the usability check (the self-test itself).
    fn new_unchecked(key: &[u8], backend: KuznyechikBackend) -> Result<Kuznyechik, Error> {
        let Ok(key32) = <&[u8; 32]>::try_from(key) else {
            return Err(Error::Key(KeyError::Length {
                what: "kuznyechik",
                got: key.len(),
                expected: "32 bytes",
            }));
        };
        let soft = ::kuznyechik::Kuznyechik::new(GenericArray::from_slice(key32));
        let wide = (backend != KuznyechikBackend::Soft).then(|| {
            let passes = tables::Pass::both(key32);
            Box::new(passes.each_ref().map(tables::Wide::new))
        });
        Ok(Kuznyechik {
            soft,
            wide,
            backend,
        })
    }

    /// The backend this key runs on.
    pub(super) fn backend(&self) -> KuznyechikBackend {
        self.backend
    }

    /// The kernels' pass for a direction (SIMD backends only).
    #[cfg(target_arch = "x86_64")]
    fn wide(&self, encrypt: bool) -> &tables::Wide {
        let w = self
            .wide
            .as_ref()
            .expect("a SIMD backend has its wide keys");
        &w[usize::from(!encrypt)]
    }

    /// Encrypts or decrypts every whole 16-byte block of `data` in place (ECB).
    pub(super) fn ecb(&self, encrypt: bool, data: &mut [u8]) {
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            KuznyechikBackend::Avx512 => avx512::ecb(self.wide(encrypt), data),
            _ => self.soft_ecb(encrypt, data),
        }
    }

    fn soft_ecb(&self, encrypt: bool, data: &mut [u8]) {
        for b in data.chunks_exact_mut(BLOCK) {
            let b = GenericArray::from_mut_slice(b);
            if encrypt {
                self.soft.encrypt_block(b);
            } else {
                self.soft.decrypt_block(b);
            }
        }
    }

    /// XTS over `tweaks.len()` units of `unit` bytes at the start of `data`, unit `i` under
    /// the encrypted tweak `tweaks[i]`.
    fn xts(&self, encrypt: bool, tweaks: &[[u8; BLOCK]], unit: usize, data: &mut [u8]) {
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            KuznyechikBackend::Avx512 => avx512::xts(self.wide(encrypt), tweaks, unit, data),
            _ => self.soft_xts(encrypt, tweaks, unit, data),
        }
    }

    /// [`Kuznyechik::xts`] on the portable code: a unit's tweaks made 32 blocks at a time,
    /// XORed in, the cipher run over the stretch, XORed out.
    fn soft_xts(&self, encrypt: bool, tweaks: &[[u8; BLOCK]], unit: usize, data: &mut [u8]) {
        const STRETCH: usize = 32 * BLOCK;
        let mut mask = [0u8; STRETCH];
        for (u, first) in data.chunks_exact_mut(unit).zip(tweaks) {
            let mut t = *first;
            for stretch in u.chunks_mut(STRETCH) {
                let m = &mut mask[..stretch.len()];
                for (mb, c) in m
                    .chunks_exact_mut(BLOCK)
                    .zip(stretch.chunks_exact_mut(BLOCK))
                {
                    mb.copy_from_slice(&t);
                    for (x, k) in c.iter_mut().zip(t.iter()) {
                        *x ^= k;
                    }
                    mul_alpha(&mut t);
                }
                self.soft_ecb(encrypt, stretch);
                for (x, k) in stretch.iter_mut().zip(m.iter()) {
                    *x ^= k;
                }
            }
            t.zeroize();
        }
        mask.zeroize();
    }
}

/// Kuznyechik-256-XTS: the data key (K1) and the tweak key (K2), on one backend.
pub(super) struct KuznyechikXts {
    data: Kuznyechik,
    tweak: Kuznyechik,
}

impl KuznyechikXts {
    /// The two keys on `backend` (`None`: the selected one).
    pub(super) fn new(
        k1: &[u8],
        k2: &[u8],
        backend: Option<KuznyechikBackend>,
    ) -> Result<KuznyechikXts, Error> {
        let data = Kuznyechik::new(k1, backend)?;
        let tweak = Kuznyechik::new(k2, Some(data.backend()))?;
        Ok(KuznyechikXts { data, tweak })
    }

    /// The backend both keys run on.
    pub(super) fn backend(&self) -> KuznyechikBackend {
        self.data.backend()
    }

    /// XTS over the data units of `buf`, `unit` bytes each (a positive multiple of 16 that
    /// divides `buf.len()`; the cascade checks), numbered from `first`.
    pub(super) fn apply(&self, encrypt: bool, first: u64, unit: usize, buf: &mut [u8]) {
        debug_assert!(unit > 0 && unit.is_multiple_of(BLOCK) && buf.len().is_multiple_of(unit));
        let mut tweaks = [[0u8; BLOCK]; TWEAK_BATCH];
        for (c, chunk) in buf.chunks_mut(TWEAK_BATCH * unit).enumerate() {
            let n = chunk.len() / unit;
            for (i, t) in tweaks[..n].iter_mut().enumerate() {
                let number = first.wrapping_add((c * TWEAK_BATCH + i) as u64);
                *t = [0; BLOCK];
                t[..8].copy_from_slice(&number.to_le_bytes());
            }
            self.tweak.ecb(true, tweaks[..n].as_flattened_mut());
            self.data.xts(encrypt, &tweaks[..n], unit, chunk);
        }
        tweaks.zeroize();
    }
}

/// GOST R 34.12-2015 appendix A.1 (RFC 7801 section 5): (key, plaintext, ciphertext).
const KNOWN: (&str, &str, &str) = (
    "8899aabbccddeeff0011223344556677fedcba98765432100123456789abcdef",
    "1122334455667700ffeeddccbbaa9988",
    "7f679d90bebc24305a468d42b9d4edcd",
);

/// Decodes the hex of [`KNOWN`].
fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

/// The known-answer self-test of a backend, run once before first use: the standard's vector
/// on 65 copies of the block (a whole step and a short one), both ways; then, for the SIMD
/// backends, ECB at 1, 63, 65 and 130 blocks and XTS on units of 48, 64, 512, 1040 and
/// 4096 bytes against `soft`, both ways.
fn self_test(backend: KuznyechikBackend) -> bool {
    let (key, plain, cipher) = KNOWN;
    let Ok(c) = Kuznyechik::new_unchecked(&unhex(key), backend) else {
        return false;
    };
    let (plain, want) = (unhex(plain), unhex(cipher));
    let mut buf = plain.repeat(65);
    c.ecb(true, &mut buf);
    if buf.chunks_exact(BLOCK).any(|b| b != want) {
        return false;
    }
    c.ecb(false, &mut buf);
    if buf.chunks_exact(BLOCK).any(|b| b != plain) {
        return false;
    }
    if backend == KuznyechikBackend::Soft {
        return true;
    }
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(47) ^ 0x3c).collect();
    let pair = |b| -> Option<KuznyechikXts> {
        Some(KuznyechikXts {
            data: Kuznyechik::new_unchecked(&key[..32], b).ok()?,
            tweak: Kuznyechik::new_unchecked(&key[32..], b).ok()?,
        })
    };
    let (Some(soft), Some(tested)) = (pair(KuznyechikBackend::Soft), pair(backend)) else {
        return false;
    };
    let input = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 13 + 7) as u8).collect() };
    for blocks in [1usize, 63, 65, 130] {
        for encrypt in [true, false] {
            let mut want = input(blocks * BLOCK);
            soft.data.ecb(encrypt, &mut want);
            let mut got = input(blocks * BLOCK);
            tested.data.ecb(encrypt, &mut got);
            if want != got {
                return false;
            }
        }
    }
    for (unit, units) in [(48usize, 5usize), (64, 17), (512, 3), (1040, 2), (4096, 1)] {
        for encrypt in [true, false] {
            let mut want = input(unit * units);
            soft.apply(encrypt, u64::MAX - 1, unit, &mut want);
            let mut got = input(unit * units);
            tested.apply(encrypt, u64::MAX - 1, unit, &mut got);
            if want != got {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic test bytes (xorshift).
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    /// Every backend this CPU runs, soft first; the others are reported with the reason
    /// (the feature the CPU lacks).
    fn backends() -> Vec<KuznyechikBackend> {
        let mut out = Vec::new();
        for b in KuznyechikBackend::ALL.into_iter().rev() {
            match b.ensure_usable() {
                Ok(()) => out.push(b),
                Err(e) => {
                    assert!(b.check_cpu().is_err(), "{b} runs here but is unusable: {e}");
                    eprintln!("skipped: kuznyechik backend {b}: {e}");
                }
            }
        }
        assert_eq!(out[0], KuznyechikBackend::Soft);
        out
    }

    /// The standard's vector through the RustCrypto crate too, so that the constants of the
    /// self-test are checked by a second implementation.
    #[test]
    fn known_answer_agrees_with_the_rustcrypto_crate() {
        let (key, plain, cipher) = KNOWN;
        let c = ::kuznyechik::Kuznyechik::new_from_slice(&unhex(key)).unwrap();
        let mut b = unhex(plain);
        c.encrypt_block(GenericArray::from_mut_slice(&mut b));
        assert_eq!(b, unhex(cipher));
    }

    #[test]
    fn every_backend_passes_its_self_test() {
        for b in backends() {
            assert!(self_test(b), "{b}");
        }
    }

    #[test]
    fn other_key_lengths_are_refused() {
        for len in [0usize, 16, 24, 31, 33, 64] {
            let Err(e) = Kuznyechik::new(&vec![7u8; len], Some(KuznyechikBackend::Soft)) else {
                panic!("a {len}-byte key was accepted");
            };
            assert!(e.to_string().contains("32 bytes"), "{len}: {e}");
        }
    }

    /// The one-block reference over this crate's key schedule (what the SIMD kernels run)
    /// against the RustCrypto crate, on random keys and blocks, both ways.
    #[test]
    fn own_key_schedule_matches_the_rustcrypto_crate() {
        for seed in 0..16u64 {
            let key = bytes(seed, 32);
            let theirs = ::kuznyechik::Kuznyechik::new_from_slice(&key).unwrap();
            let [enc, dec] = tables::Pass::both(key.as_slice().try_into().unwrap());
            let plain: [u8; 16] = bytes(seed + 100, 16).try_into().unwrap();
            let mut ours = plain;
            enc.apply_block(&mut ours);
            let mut want = plain;
            theirs.encrypt_block(GenericArray::from_mut_slice(&mut want));
            assert_eq!(ours, want, "key {seed}");
            dec.apply_block(&mut ours);
            assert_eq!(ours, plain, "key {seed}: decrypt");
        }
    }

    /// ECB on every backend against the RustCrypto crate one block at a time, for every
    /// block count 0..=130 (every remainder of the 64-block step, once and twice), both
    /// ways.
    #[test]
    fn every_backend_matches_the_rustcrypto_crate() {
        for b in backends() {
            for seed in 0..2u64 {
                let key = bytes(seed + 7, 32);
                let ours = Kuznyechik::new(&key, Some(b)).unwrap();
                let theirs = ::kuznyechik::Kuznyechik::new_from_slice(&key).unwrap();
                for blocks in 0..=130usize {
                    let plain = bytes(1000 + blocks as u64, blocks * BLOCK);
                    let mut want = plain.clone();
                    for c in want.chunks_exact_mut(BLOCK) {
                        theirs.encrypt_block(GenericArray::from_mut_slice(c));
                    }
                    let mut got = plain.clone();
                    ours.ecb(true, &mut got);
                    assert_eq!(got, want, "{b}: encrypt, key {seed}, {blocks} blocks");
                    ours.ecb(false, &mut got);
                    assert_eq!(got, plain, "{b}: decrypt, key {seed}, {blocks} blocks");
                }
            }
        }
    }

    /// XTS over one block at a time of the RustCrypto crate, tweaks multiplied one by one.
    fn reference_xts(k1: &[u8], k2: &[u8], encrypt: bool, first: u64, unit: usize, buf: &mut [u8]) {
        let data = ::kuznyechik::Kuznyechik::new_from_slice(k1).unwrap();
        let tweak = ::kuznyechik::Kuznyechik::new_from_slice(k2).unwrap();
        for (i, u) in buf.chunks_exact_mut(unit).enumerate() {
            let mut t = [0u8; BLOCK];
            t[..8].copy_from_slice(&first.wrapping_add(i as u64).to_le_bytes());
            tweak.encrypt_block(GenericArray::from_mut_slice(&mut t));
            for c in u.chunks_exact_mut(BLOCK) {
                c.iter_mut().zip(&t).for_each(|(x, k)| *x ^= k);
                if encrypt {
                    data.encrypt_block(GenericArray::from_mut_slice(c));
                } else {
                    data.decrypt_block(GenericArray::from_mut_slice(c));
                }
                c.iter_mut().zip(&t).for_each(|(x, k)| *x ^= k);
                mul_alpha(&mut t);
            }
        }
    }

    /// XTS on every backend against the reference: units packed several to a step (16 to
    /// 512 bytes, whole groups and a short one) and run step by step (one block, odd block
    /// counts, every remainder class of a 1 KiB step, 4 KiB), unit counts around the tweak
    /// batch, and unit numbers that wrap past 2^64.
    #[test]
    fn every_backend_xts_matches_the_reference() {
        let cases: &[(usize, usize)] = &[
            (16, 3),
            (32, 5),
            (48, 5),
            (64, 17),
            (128, 9),
            (256, 5),
            (512, 65),
            (528, 2),
            (1008, 1),
            (1024, 3),
            (1040, 2),
            (2032, 1),
            (4096, 67),
        ];
        for b in backends() {
            let key = bytes(77, 64);
            let (k1, k2) = key.split_at(32);
            let xts = KuznyechikXts::new(k1, k2, Some(b)).unwrap();
            assert_eq!(xts.backend(), b);
            for &(unit, units) in cases {
                for first in [0u64, u64::MAX - 3] {
                    let plain = bytes(unit as u64 ^ first, unit * units);
                    let mut want = plain.clone();
                    reference_xts(k1, k2, true, first, unit, &mut want);
                    let mut got = plain.clone();
                    xts.apply(true, first, unit, &mut got);
                    let what = format!("{b}, {units} x {unit} bytes from {first}");
                    assert_eq!(got, want, "encrypt, {what}");
                    xts.apply(false, first, unit, &mut got);
                    assert_eq!(got, plain, "decrypt, {what}");
                }
            }
        }
    }

    /// A name only other families have gives Kuznyechik its portable backend; an unknown
    /// name is an error; `avx512` is Kuznyechik's own when the CPU runs it, and an error
    /// naming the missing feature otherwise.
    #[test]
    fn forced_names_follow_the_shared_rule() {
        assert_eq!(
            KuznyechikBackend::for_forced_name("soft").unwrap(),
            KuznyechikBackend::Soft
        );
        if crate::Backend::Aesni.check_cpu().is_ok() {
            assert_eq!(
                KuznyechikBackend::for_forced_name("aesni").unwrap(),
                KuznyechikBackend::Soft
            );
        }
        assert!(KuznyechikBackend::for_forced_name("no-such-backend").is_err());
        let b = KuznyechikBackend::Avx512;
        match b.check_cpu() {
            Ok(()) => assert_eq!(KuznyechikBackend::for_forced_name(b.name()).unwrap(), b),
            Err(e) => {
                assert!(KuznyechikBackend::for_forced_name(b.name()).is_err());
                assert!(e.to_string().contains("missing"), "{e}");
            }
        }
    }
}
