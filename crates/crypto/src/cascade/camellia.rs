//! Camellia (RFC 3713; 128-, 192- and 256-bit keys) for the cascades' Camellia layer (VeraCrypt and TrueCrypt
//! volumes, and dm-crypt's `camellia-xts-plain64` through the sectors): ECB of many blocks
//! and XTS over many whole data units per call, on two backends ([`CamelliaBackend`]):
//! - `avx512` (`avx512.rs`, x86-64 with AVX-512 F/BW, GFNI and VPCLMULQDQ): 64 blocks per
//!   step, byte-sliced in zmm registers, each S-box two GFNI instructions (an affine map,
//!   then the GF(2^8) inversion and a second affine map), constant-time;
//! - `soft`: the RustCrypto `camellia` crate, one block at a time: the portable reference,
//!   table-driven (not reviewed as constant-time, as the crate says).
//!
//! `keys.rs` holds what the SIMD kernels share and can be checked without them: the S-boxes
//! as affine maps around the inversion (checked entry by entry against RFC 3713's table),
//! the key schedule, and a one-block reference cipher over it.
//!
//! The kernels run the 24-round schedule of 192- and 256-bit keys (a 192-bit key as its
//! 256-bit equivalent); a 128-bit key (18 rounds) runs on `soft` whatever backend is asked
//! for or measured, and the key reports `soft` as its backend.
//!
//! XTS: the tweaks of a batch of units (their numbers, encrypted with the tweak key) are
//! encrypted together in one ECB call; then the SIMD backend makes each unit's sequence of
//! tweaks in registers and XORs it in around the cipher, many units per call. Units are
//! whole blocks (the cascade checks): no ciphertext stealing.
//!
//! Selection follows the crate's rule ([`crate::backend`]): the fastest usable backend as
//! measured on the first choice (with one SIMD backend, the SIMD one, unmeasured), unless
//! `SECTORCRYPT_BACKEND` names one (a name only other families have, such as `aesni` or
//! `avx2`, gives Camellia `soft`); every backend passes a known-answer self-test and a
//! comparison with `soft` before first use.

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
mod keys;

family! {
    /// An implementation of Camellia-256, the cascades' Camellia layer.
    pub enum CamelliaBackend: Camellia, self_test: self_test {
        /// AVX-512 F/BW with GFNI and VPCLMULQDQ: 64 blocks per step, byte-sliced, the
        /// S-boxes as GFNI affine maps around the inversion.
        Avx512 = "avx512", x86 [OsYmm, OsZmm, Avx512f, Avx512bw, Gfni, Vpclmulqdq],
        /// The RustCrypto `camellia` crate, one block at a time.
        Soft = "soft", portable,
    }
}

selectable!(CamelliaBackend, unknown: "camellia backend" lists own);

/// Bytes of one unit of the backend choice's work.
const WORK_UNIT: usize = 4096;
/// Units in one run of it: 16 KiB, in L1.
const WORK_UNITS: usize = 4;

/// The work the SIMD backends are timed on when more than one is usable:
/// Camellia-256-XTS over 4 KiB units, on fixed public keys (written here, beside the
/// family, as Serpent's is).
pub(crate) const WORKLOAD: Workload<CamelliaBackend> = Workload {
    algorithm: Algorithm::Camellia,
    what: "camellia-256-xts, 4 units of 4096 bytes",
    bytes: WORK_UNITS * WORK_UNIT,
    usable: |_| Ok(()),
    prepare: |b| {
        let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(0x3b) ^ 0x5c).collect();
        let xts = CamelliaXts::new(&key[..32], &key[32..], Some(b))?;
        let mut buf = vec![0u8; WORK_UNITS * WORK_UNIT];
        let run: Run = Box::new(move || xts.apply(true, 0, WORK_UNIT, &mut buf));
        Ok(run)
    },
};

/// Units whose tweaks are encrypted in one ECB call (1 KiB of tweak blocks: one step of
/// the widest backend).
const TWEAK_BATCH: usize = 64;

/// The portable cipher: Camellia-128 (18 rounds) or the 24-round form, which serves
/// 192-bit keys too (RFC 3713 section 2.2: a 192-bit key is the 256-bit key
/// `K || !K[16..24]`).
enum Soft {
    Short(::camellia::Camellia128),
    Long(::camellia::Camellia256),
}

/// Camellia under one key, on one backend. The expanded keys are zeroized on drop.
pub(super) struct Camellia {
    soft: Soft,
    /// The encryption and decryption passes in the kernels' form (SIMD backends only).
    wide: Option<Box<[keys::Wide; 2]>>,
    backend: CamelliaBackend,
}

impl Camellia {
    /// Expands a 16-, 24- or 32-byte key for `backend` (`None`: the selected one), which
    /// must be usable here. The SIMD kernels run the 24-round schedule only: a 16-byte key
    /// (18 rounds) runs on `soft` whatever the backend asked for, and [`Camellia::backend`]
    /// says so.
    pub(super) fn new(key: &[u8], backend: Option<CamelliaBackend>) -> Result<Camellia, Error> {
        let backend = match backend {
            Some(b) => b,
            None => CamelliaBackend::selected()?,
        };
        backend.ensure_usable()?;
        Camellia::new_unchecked(key, backend)
    }

    /// [`Camellia::new`] without the usability check (the self-test itself).
    fn new_unchecked(key: &[u8], backend: CamelliaBackend) -> Result<Camellia, Error> {
        let mut key32 = [0u8; 32];
        match key.len() {
            16 => {
                let soft = ::camellia::Camellia128::new(GenericArray::from_slice(key));
                return Ok(Camellia {
                    soft: Soft::Short(soft),
                    wide: None,
                    backend: CamelliaBackend::Soft,
                });
            }
            24 => {
                key32[..24].copy_from_slice(key);
                for (x, k) in key32[24..].iter_mut().zip(&key[16..]) {
                    *x = !k;
                }
            }
            32 => key32.copy_from_slice(key),
            got => {
                return Err(Error::Key(KeyError::Length {
                    what: "camellia",
                    got,
                    expected: "16, 24 or 32 bytes",
                }))
            }
        }
        let soft = Soft::Long(::camellia::Camellia256::new(GenericArray::from_slice(
            &key32,
        )));
        let wide = (backend != CamelliaBackend::Soft).then(|| {
            let passes = keys::schedule(&key32);
            Box::new(passes.each_ref().map(keys::Wide::new))
        });
        key32.zeroize();
        Ok(Camellia {
            soft,
            wide,
            backend,
        })
    }

    /// The backend this key runs on.
    pub(super) fn backend(&self) -> CamelliaBackend {
        self.backend
    }

    /// The kernels' pass for a direction (SIMD backends only).
    #[cfg(target_arch = "x86_64")]
    fn wide(&self, encrypt: bool) -> &keys::Wide {
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
            CamelliaBackend::Avx512 => avx512::ecb(self.wide(encrypt), data),
            _ => self.soft_ecb(encrypt, data),
        }
    }

    fn soft_ecb(&self, encrypt: bool, data: &mut [u8]) {
        for b in data.chunks_exact_mut(BLOCK) {
            let b = GenericArray::from_mut_slice(b);
            match (&self.soft, encrypt) {
                (Soft::Short(c), true) => c.encrypt_block(b),
                (Soft::Short(c), false) => c.decrypt_block(b),
                (Soft::Long(c), true) => c.encrypt_block(b),
                (Soft::Long(c), false) => c.decrypt_block(b),
            }
        }
    }

    /// XTS over `tweaks.len()` units of `unit` bytes at the start of `data`, unit `i` under
    /// the encrypted tweak `tweaks[i]`.
    fn xts(&self, encrypt: bool, tweaks: &[[u8; BLOCK]], unit: usize, data: &mut [u8]) {
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            CamelliaBackend::Avx512 => avx512::xts(self.wide(encrypt), tweaks, unit, data),
            _ => self.soft_xts(encrypt, tweaks, unit, data),
        }
    }

    /// [`Camellia::xts`] on the portable code: a unit's tweaks made 32 blocks at a time,
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

/// Camellia-XTS: the data key (K1) and the tweak key (K2), of one size, on one backend.
pub(super) struct CamelliaXts {
    data: Camellia,
    tweak: Camellia,
}

impl CamelliaXts {
    /// The two keys on `backend` (`None`: the selected one).
    pub(super) fn new(
        k1: &[u8],
        k2: &[u8],
        backend: Option<CamelliaBackend>,
    ) -> Result<CamelliaXts, Error> {
        if k1.len() != k2.len() {
            return Err(Error::Key(KeyError::Length {
                what: "camellia-xts",
                got: k1.len() + k2.len(),
                expected: "two keys of 16, 24 or 32 bytes each",
            }));
        }
        let data = Camellia::new(k1, backend)?;
        let tweak = Camellia::new(k2, Some(data.backend()))?;
        Ok(CamelliaXts { data, tweak })
    }

    /// The backend both keys run on.
    pub(super) fn backend(&self) -> CamelliaBackend {
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

/// RFC 3713 appendix A, the 256-bit key: (key, plaintext, ciphertext).
const KNOWN: (&str, &str, &str) = (
    "0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff",
    "0123456789abcdeffedcba9876543210",
    "9acc237dff16d76c20ef7c919e3a7509",
);

/// Decodes the hex of [`KNOWN`].
fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

/// The known-answer self-test of a backend, run once before first use: the RFC 3713 vector
/// on 65 copies of the block (a whole step and a short one), both ways; then, for the SIMD
/// backends, ECB at 1, 63, 65 and 130 blocks and XTS on units of 48, 64, 512, 1040 and
/// 4096 bytes against `soft`, both ways.
fn self_test(backend: CamelliaBackend) -> bool {
    let (key, plain, cipher) = KNOWN;
    let Ok(c) = Camellia::new_unchecked(&unhex(key), backend) else {
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
    if backend == CamelliaBackend::Soft {
        return true;
    }
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(47) ^ 0x3c).collect();
    let pair = |b| -> Option<CamelliaXts> {
        Some(CamelliaXts {
            data: Camellia::new_unchecked(&key[..32], b).ok()?,
            tweak: Camellia::new_unchecked(&key[32..], b).ok()?,
        })
    };
    let (Some(soft), Some(tested)) = (pair(CamelliaBackend::Soft), pair(backend)) else {
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
    fn backends() -> Vec<CamelliaBackend> {
        let mut out = Vec::new();
        for b in CamelliaBackend::ALL.into_iter().rev() {
            match b.ensure_usable() {
                Ok(()) => out.push(b),
                Err(e) => {
                    assert!(b.check_cpu().is_err(), "{b} runs here but is unusable: {e}");
                    eprintln!("skipped: camellia backend {b}: {e}");
                }
            }
        }
        assert_eq!(out[0], CamelliaBackend::Soft);
        out
    }

    /// The RFC vector through the RustCrypto crate too, so that the constants of the
    /// self-test are checked by a second implementation.
    #[test]
    fn known_answer_agrees_with_the_rustcrypto_crate() {
        let (key, plain, cipher) = KNOWN;
        let c = ::camellia::Camellia256::new_from_slice(&unhex(key)).unwrap();
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
        for len in [0usize, 15, 23, 31, 33, 64] {
            let Err(e) = Camellia::new(&vec![7u8; len], Some(CamelliaBackend::Soft)) else {
                panic!("a {len}-byte key was accepted");
            };
            assert!(e.to_string().contains("16, 24 or 32 bytes"), "{len}: {e}");
        }
    }

    /// 128- and 192-bit keys on every backend (ECB, both ways) against the RustCrypto
    /// crate's Camellia-128 and Camellia-192: a 192-bit key runs on the SIMD kernels as
    /// its 256-bit equivalent, a 128-bit key falls back to `soft` and says so.
    #[test]
    fn short_keys_match_the_rustcrypto_crate() {
        for b in backends() {
            for klen in [16usize, 24] {
                let key = bytes(klen as u64, klen);
                let ours = Camellia::new(&key, Some(b)).unwrap();
                let want_backend = if klen == 16 { CamelliaBackend::Soft } else { b };
                assert_eq!(ours.backend(), want_backend, "{b}, {klen}-byte key");
                let plain = bytes(3, 130 * BLOCK);
                let mut want = plain.clone();
                for c in want.chunks_exact_mut(BLOCK) {
                    let c = GenericArray::from_mut_slice(c);
                    if klen == 16 {
                        ::camellia::Camellia128::new_from_slice(&key)
                            .unwrap()
                            .encrypt_block(c);
                    } else {
                        ::camellia::Camellia192::new_from_slice(&key)
                            .unwrap()
                            .encrypt_block(c);
                    }
                }
                let mut got = plain.clone();
                ours.ecb(true, &mut got);
                assert_eq!(got, want, "{b}: encrypt, {klen}-byte key");
                ours.ecb(false, &mut got);
                assert_eq!(got, plain, "{b}: decrypt, {klen}-byte key");
            }
        }
    }

    /// The one-block reference over this crate's key schedule (what the SIMD kernels run)
    /// against the RustCrypto crate, on random keys and blocks, both ways.
    #[test]
    fn own_key_schedule_matches_the_rustcrypto_crate() {
        for seed in 0..16u64 {
            let key = bytes(seed, 32);
            let theirs = ::camellia::Camellia256::new_from_slice(&key).unwrap();
            let [enc, dec] = keys::schedule(key.as_slice().try_into().unwrap());
            let plain: [u8; 16] = bytes(seed + 100, 16).try_into().unwrap();
            let mut ours = plain;
            keys::apply_block(&enc, &mut ours);
            let mut want = plain;
            theirs.encrypt_block(GenericArray::from_mut_slice(&mut want));
            assert_eq!(ours, want, "key {seed}");
            keys::apply_block(&dec, &mut ours);
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
                let ours = Camellia::new(&key, Some(b)).unwrap();
                let theirs = ::camellia::Camellia256::new_from_slice(&key).unwrap();
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
        let data = ::camellia::Camellia256::new_from_slice(k1).unwrap();
        let tweak = ::camellia::Camellia256::new_from_slice(k2).unwrap();
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
            let xts = CamelliaXts::new(k1, k2, Some(b)).unwrap();
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

    /// A name only other families have gives Camellia its portable backend; an unknown
    /// name is an error; `avx512` is Camellia's own when the CPU runs it, and an error
    /// naming the missing feature otherwise.
    #[test]
    fn forced_names_follow_the_shared_rule() {
        assert_eq!(
            CamelliaBackend::for_forced_name("soft").unwrap(),
            CamelliaBackend::Soft
        );
        if crate::Backend::Aesni.check_cpu().is_ok() {
            assert_eq!(
                CamelliaBackend::for_forced_name("aesni").unwrap(),
                CamelliaBackend::Soft
            );
        }
        assert!(CamelliaBackend::for_forced_name("no-such-backend").is_err());
        let b = CamelliaBackend::Avx512;
        match b.check_cpu() {
            Ok(()) => assert_eq!(CamelliaBackend::for_forced_name(b.name()).unwrap(), b),
            Err(e) => {
                assert!(CamelliaBackend::for_forced_name(b.name()).is_err());
                assert!(e.to_string().contains("missing"), "{e}");
            }
        }
    }
}
