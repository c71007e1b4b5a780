//! Serpent (Anderson, Biham, Knudsen, 1998) for the cascades' Serpent layer: ECB of many
//! blocks and XTS over many whole data units per call, on three backends
//! ([`SerpentBackend`]), all running the cipher's own bitsliced form (each block four 32-bit
//! words, an S-box applied to bit `j` of the four words at once) across many blocks:
//! - `soft` (`soft.rs`): portable, no `unsafe`, eight blocks side by side in `[u32; 8]`
//!   words that the compiler keeps in vector registers; the reference;
//! - `avx512` (`avx512.rs`, x86-64 with AVX-512 F): 32 blocks per step in zmm registers
//!   (two groups of 16 side by side), the S-boxes as `vpternlogd`, rotations as `vprold`;
//! - `avx2` (`avx2.rs`, x86-64 with AVX2): 8 blocks per step in ymm registers, the S-boxes
//!   from their algebraic normal forms, rotations as two shifts and an OR.
//!
//! All three are constant-time: no table indexed by data or key, no branch on either.
//!
//! XTS: the tweaks of a batch of units (their numbers, encrypted with the tweak key) are
//! encrypted together in one ECB call; then the SIMD backends make each unit's sequence of
//! tweaks in registers and XOR it in around the cipher, many units per call. Units are
//! whole blocks (the cascade checks): no ciphertext stealing.
//!
//! Selection follows the crate's rule ([`crate::backend`]): the fastest usable backend as
//! measured on the first choice, unless `SECTORCRYPT_BACKEND` names one (a name only AES
//! has, such as `aesni` or `vaes`, gives Serpent `soft`); every backend passes a
//! known-answer self-test and a comparison with `soft` before first use.

use super::mul_alpha;
use crate::backend::{family, selectable, Algorithm, Run, Workload};
use crate::block::BLOCK;
use crate::error::KeyError;
use crate::Error;
use zeroize::Zeroize;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod soft;

family! {
    /// An implementation of Serpent, the cascades' Serpent layer.
    pub enum SerpentBackend: Serpent, self_test: self_test {
        /// AVX-512 F: 32 blocks per step in zmm registers, the S-boxes as `vpternlogd`.
        Avx512 = "avx512", x86 [Avx2, OsYmm, OsZmm, Avx512f],
        /// AVX2: 8 blocks per step in ymm registers.
        Avx2 = "avx2", x86 [Avx2, OsYmm],
        /// Portable, bitsliced, constant-time, no `unsafe`.
        Soft = "soft", portable,
    }
}

selectable!(SerpentBackend, unknown: "serpent backend" lists own);

/// Bytes of one unit of the backend choice's work.
const WORK_UNIT: usize = 4096;
/// Units in one run of it: 16 KiB, in L1.
const WORK_UNITS: usize = 4;

/// The work the SIMD backends are timed on when more than one is usable: Serpent-256-XTS
/// over 4 KiB units (a VeraCrypt Serpent volume's work), on fixed public keys. Written
/// here, not with the other families' in `workload`, so that the cascade module needs
/// nothing of the crate's mode layers.
pub(crate) const WORKLOAD: Workload<SerpentBackend> = Workload {
    algorithm: Algorithm::Serpent,
    what: "serpent-256-xts, 4 units of 4096 bytes",
    bytes: WORK_UNITS * WORK_UNIT,
    usable: |_| Ok(()),
    prepare: |b| {
        let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(0x3b) ^ 0x5c).collect();
        let xts = SerpentXts::new(&key[..32], &key[32..], Some(b))?;
        let mut buf = vec![0u8; WORK_UNITS * WORK_UNIT];
        let run: Run = Box::new(move || xts.apply(true, 0, WORK_UNIT, &mut buf));
        Ok(run)
    },
};

/// Units whose tweaks are encrypted in one ECB call (512 bytes of tweak blocks: one step
/// of the widest backend).
const TWEAK_BATCH: usize = 32;

/// Serpent under one key, on one backend. The round keys are zeroized on drop.
pub(super) struct Serpent {
    soft: soft::Serpent,
    backend: SerpentBackend,
}

impl Serpent {
    /// Expands a 16-, 24- or 32-byte key for `backend` (`None`: the selected one), which
    /// must be usable here.
    pub(super) fn new(key: &[u8], backend: Option<SerpentBackend>) -> Result<Serpent, Error> {
        let backend = match backend {
            Some(b) => b,
            None => SerpentBackend::selected()?,
        };
        backend.ensure_usable()?;
        Serpent::new_unchecked(key, backend)
    }

    /// [`Serpent::new`] without the usability check (the self-test itself).
    fn new_unchecked(key: &[u8], backend: SerpentBackend) -> Result<Serpent, Error> {
        let soft = soft::Serpent::new(key).ok_or(Error::Key(KeyError::Length {
            what: "serpent",
            got: key.len(),
            expected: "16, 24 or 32 bytes",
        }))?;
        Ok(Serpent { soft, backend })
    }

    /// The backend this key runs on.
    pub(super) fn backend(&self) -> SerpentBackend {
        self.backend
    }

    /// Encrypts or decrypts every whole 16-byte block of `data` in place (ECB).
    pub(super) fn ecb(&self, encrypt: bool, data: &mut [u8]) {
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            SerpentBackend::Avx512 => avx512::ecb(self.soft.round_keys(), encrypt, data),
            #[cfg(target_arch = "x86_64")]
            SerpentBackend::Avx2 => avx2::ecb(self.soft.round_keys(), encrypt, data),
            _ => self.soft.apply(encrypt, data),
        }
    }

    /// XTS over `tweaks.len()` units of `unit` bytes at the start of `data`, unit `i` under
    /// the encrypted tweak `tweaks[i]`.
    fn xts(&self, encrypt: bool, tweaks: &[[u8; BLOCK]], unit: usize, data: &mut [u8]) {
        let keys = self.soft.round_keys();
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            SerpentBackend::Avx512 => avx512::xts(keys, encrypt, tweaks, unit, data),
            #[cfg(target_arch = "x86_64")]
            SerpentBackend::Avx2 => avx2::xts(keys, encrypt, tweaks, unit, data),
            _ => {
                let _ = keys;
                self.soft_xts(encrypt, tweaks, unit, data)
            }
        }
    }

    /// [`Serpent::xts`] on the portable code: a unit's tweaks made 32 blocks at a time,
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
                self.soft.apply(encrypt, stretch);
                for (x, k) in stretch.iter_mut().zip(m.iter()) {
                    *x ^= k;
                }
            }
            t.zeroize();
        }
        mask.zeroize();
    }
}

/// Serpent-XTS: the data key (K1) and the tweak key (K2), on one backend.
pub(super) struct SerpentXts {
    data: Serpent,
    tweak: Serpent,
}

impl SerpentXts {
    /// The two keys on `backend` (`None`: the selected one).
    pub(super) fn new(
        k1: &[u8],
        k2: &[u8],
        backend: Option<SerpentBackend>,
    ) -> Result<SerpentXts, Error> {
        let data = Serpent::new(k1, backend)?;
        let tweak = Serpent::new(k2, Some(data.backend()))?;
        Ok(SerpentXts { data, tweak })
    }

    /// The backend both keys run on.
    pub(super) fn backend(&self) -> SerpentBackend {
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

/// NESSIE's Serpent test vectors, set 1 vector 0 (key: one bit set, plaintext zero) for
/// 128- and 256-bit keys: (key, ciphertext).
const KNOWN: [(&str, &str); 2] = [
    (
        "80000000000000000000000000000000",
        "264e5481eff42a4606abda06c0bfda3d",
    ),
    (
        "8000000000000000000000000000000000000000000000000000000000000000",
        "a223aa1288463c0e2be38ebd825616c0",
    ),
];

/// Decodes the hex of [`KNOWN`].
fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

/// The known-answer self-test of a backend, run once before first use: the NESSIE vectors
/// on 33 copies of the block (a whole step and a short one on every backend), both ways;
/// then, for the SIMD backends, ECB at 1, 31, 33 and 70 blocks and XTS on units of 48, 512
/// and 4096 bytes against `soft`, both ways.
fn self_test(backend: SerpentBackend) -> bool {
    for (key, cipher) in KNOWN {
        let Ok(s) = Serpent::new_unchecked(&unhex(key), backend) else {
            return false;
        };
        let want = unhex(cipher);
        let mut buf = vec![0u8; 33 * BLOCK];
        s.ecb(true, &mut buf);
        if buf.chunks_exact(BLOCK).any(|b| b != want) {
            return false;
        }
        s.ecb(false, &mut buf);
        if buf.iter().any(|&b| b != 0) {
            return false;
        }
    }
    if backend == SerpentBackend::Soft {
        return true;
    }
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(47) ^ 0x3c).collect();
    let pair = |b| -> Option<SerpentXts> {
        Some(SerpentXts {
            data: Serpent::new_unchecked(&key[..32], b).ok()?,
            tweak: Serpent::new_unchecked(&key[32..], b).ok()?,
        })
    };
    let (Some(soft), Some(tested)) = (pair(SerpentBackend::Soft), pair(backend)) else {
        return false;
    };
    let input = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 13 + 7) as u8).collect() };
    for blocks in [1usize, 31, 33, 70] {
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
    for (unit, units) in [(48usize, 5usize), (512, 3), (4096, 1)] {
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
    use cipher::generic_array::GenericArray;
    use cipher::{BlockDecrypt, BlockEncrypt, KeyInit};

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
    fn backends() -> Vec<SerpentBackend> {
        let mut out = Vec::new();
        for b in SerpentBackend::ALL.into_iter().rev() {
            match b.ensure_usable() {
                Ok(()) => out.push(b),
                Err(e) => {
                    assert!(b.check_cpu().is_err(), "{b} runs here but is unusable: {e}");
                    eprintln!("skipped: serpent backend {b}: {e}");
                }
            }
        }
        assert_eq!(out[0], SerpentBackend::Soft);
        out
    }

    /// The NESSIE vectors against the RustCrypto `serpent` crate, so that the constants of
    /// the self-test are checked by a second implementation too.
    #[test]
    fn known_answers_agree_with_the_rustcrypto_crate() {
        for (key, cipher) in KNOWN {
            let c = serpent::Serpent::new_from_slice(&unhex(key)).unwrap();
            let mut b = [0u8; BLOCK];
            c.encrypt_block(GenericArray::from_mut_slice(&mut b));
            assert_eq!(b.to_vec(), unhex(cipher), "key {key}");
        }
    }

    #[test]
    fn every_backend_passes_its_self_test() {
        for b in backends() {
            assert!(self_test(b), "{b}");
        }
    }

    /// ECB on every backend against the RustCrypto crate one block at a time, for every
    /// key length and every block count 0..=70 (every remainder of the 8-, 16- and
    /// 32-block steps), both ways.
    #[test]
    fn every_backend_matches_the_rustcrypto_crate() {
        for b in backends() {
            for klen in [16usize, 24, 32] {
                let key = bytes(klen as u64, klen);
                let ours = Serpent::new(&key, Some(b)).unwrap();
                let theirs = serpent::Serpent::new_from_slice(&key).unwrap();
                for blocks in 0..=70usize {
                    let plain = bytes(1000 + blocks as u64, blocks * BLOCK);
                    let mut want = plain.clone();
                    for c in want.chunks_exact_mut(BLOCK) {
                        theirs.encrypt_block(GenericArray::from_mut_slice(c));
                    }
                    let mut got = plain.clone();
                    ours.ecb(true, &mut got);
                    assert_eq!(got, want, "{b}: encrypt, {klen}-byte key, {blocks} blocks");
                    ours.ecb(false, &mut got);
                    assert_eq!(got, plain, "{b}: decrypt, {klen}-byte key, {blocks} blocks");
                    for c in want.chunks_exact_mut(BLOCK) {
                        theirs.decrypt_block(GenericArray::from_mut_slice(c));
                    }
                    assert_eq!(want, plain);
                }
            }
        }
    }

    /// XTS over one block at a time of the RustCrypto crate, tweaks multiplied one by one.
    fn reference_xts(k1: &[u8], k2: &[u8], encrypt: bool, first: u64, unit: usize, buf: &mut [u8]) {
        let data = serpent::Serpent::new_from_slice(k1).unwrap();
        let tweak = serpent::Serpent::new_from_slice(k2).unwrap();
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

    /// XTS on every backend against the reference, for every key length, unit lengths
    /// from one block to 4 KiB with every remainder of a step, unit counts around the
    /// tweak batch, and unit numbers that wrap past 2^64.
    #[test]
    fn every_backend_xts_matches_the_reference() {
        let cases: &[(usize, usize)] = &[
            (16, 3),
            (48, 5),
            (112, 2),
            (240, 3),
            (496, 2),
            (512, 33),
            (528, 2),
            (1008, 1),
            (4096, 3),
        ];
        for b in backends() {
            for klen in [16usize, 24, 32] {
                let key = bytes(77 + klen as u64, 2 * klen);
                let (k1, k2) = key.split_at(klen);
                let xts = SerpentXts::new(k1, k2, Some(b)).unwrap();
                assert_eq!(xts.backend(), b);
                for &(unit, units) in cases {
                    for first in [0u64, u64::MAX - 3] {
                        let plain = bytes(unit as u64 ^ first, unit * units);
                        let mut want = plain.clone();
                        reference_xts(k1, k2, true, first, unit, &mut want);
                        let mut got = plain.clone();
                        xts.apply(true, first, unit, &mut got);
                        let what = format!("{b}, {klen}-byte keys, {units} x {unit} bytes");
                        assert_eq!(got, want, "encrypt, {what}");
                        xts.apply(false, first, unit, &mut got);
                        assert_eq!(got, plain, "decrypt, {what}");
                    }
                }
            }
        }
    }

    /// A name only AES has gives Serpent its portable backend; an unknown name is an
    /// error; a Serpent backend's own name is that backend when the CPU runs it, and an
    /// error naming the missing feature otherwise.
    #[test]
    fn forced_names_follow_the_shared_rule() {
        assert_eq!(
            SerpentBackend::for_forced_name("soft").unwrap(),
            SerpentBackend::Soft
        );
        if crate::Backend::Aesni.check_cpu().is_ok() {
            assert_eq!(
                SerpentBackend::for_forced_name("aesni").unwrap(),
                SerpentBackend::Soft
            );
        }
        assert!(SerpentBackend::for_forced_name("no-such-backend").is_err());
        for b in [SerpentBackend::Avx512, SerpentBackend::Avx2] {
            match b.check_cpu() {
                Ok(()) => assert_eq!(SerpentBackend::for_forced_name(b.name()).unwrap(), b),
                Err(e) => {
                    assert!(SerpentBackend::for_forced_name(b.name()).is_err());
                    assert!(e.to_string().contains("missing"), "{e}");
                }
            }
        }
    }
}
