//! Twofish (Schneier et al., 1998) for the cascades' Twofish layer (VeraCrypt and TrueCrypt
//! volumes, and dm-crypt's `twofish-xts-plain64` through the sectors): ECB of many blocks
//! and XTS over many whole data units per call, on two backends ([`TwofishBackend`]):
//! - `avx512` (`avx512.rs`, x86-64 with AVX-512 F/BW/VBMI and GFNI): 64 blocks per step,
//!   the key-dependent S-boxes looked up in registers (`vpermi2b`), the MDS matrix as GFNI
//!   affine maps; no data-indexed memory access, so constant-time;
//! - `soft` (`soft.rs`): this crate's portable code in "full keying" form (each S-box
//!   combined with its MDS column into 256 words, 4 KiB per key), four blocks interleaved.
//!   Table-driven: the lookups are at key- and data-dependent addresses, so `soft` is NOT
//!   constant-time (cache timing), as the table-driven Twofish of Linux and libgcrypt.
//!
//! `soft.rs` also holds the key schedule both backends share (128-, 192- and 256-bit keys;
//! the cascade uses 256).
//!
//! XTS: the tweaks of a batch of units (their numbers, encrypted with the tweak key) are
//! encrypted together in one ECB call; then a step of up to 64 blocks, across unit
//! boundaries, gets its tweak masks (each unit's sequence of tweaks), XORed in around one
//! ECB call. Units are whole blocks (the cascade checks): no ciphertext stealing.
//!
//! Measured (`sectorcrypt bench --filter twofish`, `twofish-256-xts/4096`, AMD Zen 5 VM on
//! a heavily loaded machine; the fastest runs, docs/PERFORMANCE.md): `avx512` 1.5 c/B
//! (1.74 GB/s), `soft` 4.7 c/B, the system libgcrypt 1.10.1 (its scalar assembly: it
//! keeps its gather kernel to CPUs it flags as fast at `vpgatherdd`) 8.4 c/B.
//!
//! Selection follows the crate's rule ([`crate::backend`]): the fastest usable backend as
//! measured on the first choice (with one SIMD backend, the SIMD one, unmeasured), unless
//! `SECTORCRYPT_BACKEND` names one (a name only other families have, such as `aesni` or
//! `avx2`, gives Twofish `soft`); every backend passes a known-answer self-test and a
//! comparison with `soft` before first use.

use super::mul_alpha;
use crate::backend::{family, selectable, Algorithm, Run, Workload};
use crate::block::BLOCK;
use crate::error::KeyError;
use crate::Error;
use zeroize::Zeroize;

#[cfg(target_arch = "x86_64")]
mod avx512;
mod soft;

family! {
    /// An implementation of Twofish, the cascades' Twofish layer.
    pub enum TwofishBackend: Twofish, self_test: self_test {
        /// AVX-512 F/BW/VBMI with GFNI: 64 blocks per step, the S-boxes looked up in
        /// registers, the MDS matrix as GFNI affine maps; constant-time.
        Avx512 = "avx512", x86 [OsYmm, OsZmm, Avx512f, Avx512bw, Avx512vbmi, Gfni],
        /// This crate's table-driven code (full keying), four blocks interleaved; not
        /// constant-time.
        Soft = "soft", portable,
    }
}

selectable!(TwofishBackend, unknown: "twofish backend" lists own);

/// Bytes of one unit of the backend choice's work.
const WORK_UNIT: usize = 4096;
/// Units in one run of it: 16 KiB, in L1.
const WORK_UNITS: usize = 4;

/// The work the backends are timed on when more than one SIMD backend is usable:
/// Twofish-256-XTS over 4 KiB units, on fixed public keys.
pub(crate) const WORKLOAD: Workload<TwofishBackend> = Workload {
    algorithm: Algorithm::Twofish,
    what: "twofish-256-xts, 4 units of 4096 bytes",
    bytes: WORK_UNITS * WORK_UNIT,
    usable: |_| Ok(()),
    prepare: |b| {
        let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(0x3b) ^ 0x5c).collect();
        let xts = TwofishXts::new(&key[..32], &key[32..], Some(b))?;
        let mut buf = vec![0u8; WORK_UNITS * WORK_UNIT];
        let run: Run = Box::new(move || xts.apply(true, 0, WORK_UNIT, &mut buf));
        Ok(run)
    },
};

/// Units whose tweaks are encrypted in one ECB call (1 KiB of tweak blocks: one step of
/// the widest backend).
const TWEAK_BATCH: usize = 64;

/// Blocks of one XTS step: masks made, XORed in, one ECB call, XORed out.
const XTS_STEP: usize = 64;

/// Twofish under one key, on one backend. The expanded keys are zeroized on drop.
pub(super) struct Twofish {
    keys: Box<soft::Keys>,
    /// The key in the kernel's form (SIMD backends only).
    #[cfg(target_arch = "x86_64")]
    wide: Option<Box<avx512::Wide>>,
    backend: TwofishBackend,
}

impl Twofish {
    /// Expands a key of 16, 24 or 32 bytes for `backend` (`None`: the selected one), which
    /// must be usable here (every backend takes every key size: the keyed S-boxes and the
    /// subkeys carry the key).
    pub(super) fn new(key: &[u8], backend: Option<TwofishBackend>) -> Result<Twofish, Error> {
        let backend = match backend {
            Some(b) => b,
            None => TwofishBackend::selected()?,
        };
        backend.ensure_usable()?;
        Twofish::new_unchecked(key, backend)
    }

    /// [`Twofish::new`] without the usability check (the self-test itself).
    fn new_unchecked(key: &[u8], backend: TwofishBackend) -> Result<Twofish, Error> {
        let keys =
            soft::Keys::new(key).ok_or_else(|| key_length(key.len(), "16, 24 or 32 bytes"))?;
        Ok(Twofish {
            #[cfg(target_arch = "x86_64")]
            wide: (backend == TwofishBackend::Avx512).then(|| avx512::Wide::new(&keys)),
            keys,
            backend,
        })
    }

    /// The backend this key runs on.
    pub(super) fn backend(&self) -> TwofishBackend {
        self.backend
    }

    /// Encrypts or decrypts every whole 16-byte block of `data` in place (ECB).
    pub(super) fn ecb(&self, encrypt: bool, data: &mut [u8]) {
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            TwofishBackend::Avx512 => {
                let w = self.wide.as_ref().expect("a SIMD backend has its wide key");
                avx512::ecb(w, encrypt, data)
            }
            _ => self.keys.ecb(encrypt, data),
        }
    }

    /// XTS over `tweaks.len()` units of `unit` bytes at the start of `data`, unit `i` under
    /// the encrypted tweak `tweaks[i]`: steps of [`XTS_STEP`] blocks across unit
    /// boundaries.
    fn xts(&self, encrypt: bool, tweaks: &[[u8; BLOCK]], unit: usize, data: &mut [u8]) {
        let per_unit = unit / BLOCK;
        let data = &mut data[..tweaks.len() * unit];
        let mut mask = [0u128; XTS_STEP];
        let mut next = tweaks.iter();
        let mut t = 0u128;
        let mut left = 0usize;
        for chunk in data.chunks_mut(XTS_STEP * BLOCK) {
            for (m, c) in mask.iter_mut().zip(chunk.chunks_exact_mut(BLOCK)) {
                if left == 0 {
                    t = u128::from_le_bytes(*next.next().expect("a tweak per unit"));
                    left = per_unit;
                }
                *m = t;
                let x = u128::from_le_bytes(c.try_into().expect("a block")) ^ t;
                c.copy_from_slice(&x.to_le_bytes());
                let mut b = t.to_le_bytes();
                mul_alpha(&mut b);
                t = u128::from_le_bytes(b);
                left -= 1;
            }
            self.ecb(encrypt, chunk);
            for (m, c) in mask.iter().zip(chunk.chunks_exact_mut(BLOCK)) {
                let x = u128::from_le_bytes(c.try_into().expect("a block")) ^ m;
                c.copy_from_slice(&x.to_le_bytes());
            }
        }
        mask.zeroize();
        t.zeroize();
    }
}

fn key_length(got: usize, expected: &'static str) -> Error {
    Error::Key(KeyError::Length {
        what: "twofish",
        got,
        expected,
    })
}

/// Twofish-256-XTS: the data key (K1) and the tweak key (K2), on one backend.
pub(super) struct TwofishXts {
    data: Twofish,
    tweak: Twofish,
}

impl TwofishXts {
    /// The two keys on `backend` (`None`: the selected one).
    pub(super) fn new(
        k1: &[u8],
        k2: &[u8],
        backend: Option<TwofishBackend>,
    ) -> Result<TwofishXts, Error> {
        let data = Twofish::new(k1, backend)?;
        let tweak = Twofish::new(k2, Some(data.backend()))?;
        Ok(TwofishXts { data, tweak })
    }

    /// The backend both keys run on.
    pub(super) fn backend(&self) -> TwofishBackend {
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

/// The Twofish paper's known answers (its ECB_TBL/"I=1" vectors): (key, plaintext,
/// ciphertext) for 128-, 192- and 256-bit keys.
const KNOWN: [(&str, &str, &str); 4] = [
    (
        "00000000000000000000000000000000",
        "00000000000000000000000000000000",
        "9f589f5cf6122c32b6bfec2f2ae8c35a",
    ),
    (
        "0123456789abcdeffedcba98765432100011223344556677",
        "00000000000000000000000000000000",
        "cfd1d2e5a9be9cdf501f13b892bd2248",
    ),
    (
        "0000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000",
        "57ff739d4dc92c1bd7fc01700cc8216f",
    ),
    (
        "0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff",
        "00000000000000000000000000000000",
        "37527be0052334b89f0cfccae87cfa20",
    ),
];

/// Decodes the hex of [`KNOWN`].
fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

/// The known-answer self-test of a backend, run once before first use: the paper's vectors
/// on 65 copies of the block (a whole step and a short one), both ways; then, for the SIMD
/// backend, ECB at 1, 63, 65 and 130 blocks and XTS on units of 48, 64, 512, 1040 and
/// 4096 bytes against `soft`, both ways.
fn self_test(backend: TwofishBackend) -> bool {
    for (key, plain, cipher) in KNOWN {
        let Ok(c) = Twofish::new_unchecked(&unhex(key), backend) else {
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
    }
    if backend == TwofishBackend::Soft {
        return true;
    }
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(47) ^ 0x3c).collect();
    let pair = |b| -> Option<TwofishXts> {
        Some(TwofishXts {
            data: Twofish::new_unchecked(&key[..32], b).ok()?,
            tweak: Twofish::new_unchecked(&key[32..], b).ok()?,
        })
    };
    let (Some(soft), Some(tested)) = (pair(TwofishBackend::Soft), pair(backend)) else {
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
    fn backends() -> Vec<TwofishBackend> {
        let mut out = Vec::new();
        for b in TwofishBackend::ALL.into_iter().rev() {
            match b.ensure_usable() {
                Ok(()) => out.push(b),
                Err(e) => {
                    assert!(b.check_cpu().is_err(), "{b} runs here but is unusable: {e}");
                    eprintln!("skipped: twofish backend {b}: {e}");
                }
            }
        }
        assert_eq!(out[0], TwofishBackend::Soft);
        out
    }

    /// The paper's vectors through the RustCrypto crate too, so that the constants of the
    /// self-test are checked by a second implementation.
    #[test]
    fn known_answers_agree_with_the_rustcrypto_crate() {
        for (key, plain, cipher) in KNOWN {
            let c = ::twofish::Twofish::new_from_slice(&unhex(key)).unwrap();
            let mut b = unhex(plain);
            c.encrypt_block(GenericArray::from_mut_slice(&mut b));
            assert_eq!(b, unhex(cipher), "key {key}");
        }
    }

    /// The paper's chained table (ECB_TBL): 49 encryptions per key size, each plaintext the
    /// previous ciphertext and each key the previous plaintext followed by the start of
    /// the previous key; the 49th ciphertext is the paper's. On every backend.
    #[test]
    fn paper_chained_vectors() {
        let cases: [(usize, &str); 3] = [
            (16, "5d9d4eeffa9151575524f115815a12e0"),
            (24, "e75449212beef9f4a390bd860a640941"),
            (32, "37fe26ff1cf66175f5ddf4c33b97a205"),
        ];
        for b in backends() {
            for (len, want) in cases {
                let mut key = vec![0u8; len];
                let mut pt = [0u8; BLOCK];
                let mut ct = [0u8; BLOCK];
                for _ in 0..49 {
                    ct = pt;
                    Twofish::new_unchecked(&key, b).unwrap().ecb(true, &mut ct);
                    key = [pt.as_slice(), &key].concat()[..len].to_vec();
                    pt = ct;
                }
                assert_eq!(hex::encode(ct), want, "{b}, {len}-byte key");
            }
        }
    }

    /// The paper's intermediate values: the subkeys of the all-zero 128-bit key.
    #[test]
    fn subkeys_of_the_zero_key_are_the_papers() {
        let keys = soft::Keys::new(&[0u8; 16]).unwrap();
        assert_eq!(
            keys.k[..8],
            [
                0x52c5_4dde,
                0x11f0_626d,
                0x7cac_9d4a,
                0x4d1b_4aaa,
                0xb7b8_3a10,
                0x1e7d_0beb,
                0xee9c_341f,
                0xcfe1_4be4
            ]
        );
        assert_eq!(keys.k[38..], [0xf298_311e, 0x696e_a672]);
    }

    #[test]
    fn every_backend_passes_its_self_test() {
        for b in backends() {
            assert!(self_test(b), "{b}");
        }
    }

    #[test]
    fn other_key_lengths_are_refused() {
        for len in [0usize, 20, 31, 33, 64] {
            let Err(e) = Twofish::new(&vec![7u8; len], Some(TwofishBackend::Soft)) else {
                panic!("a {len}-byte key was accepted");
            };
            assert!(e.to_string().contains("16, 24 or 32 bytes"), "{len}: {e}");
        }
        for len in [16usize, 24, 32] {
            assert!(Twofish::new(&vec![7u8; len], Some(TwofishBackend::Soft)).is_ok());
        }
        assert!(Twofish::new_unchecked(&[7u8; 20], TwofishBackend::Soft).is_err());
    }

    /// ECB on every backend against the RustCrypto crate one block at a time, for
    /// 128-, 192- and 256-bit keys and every block count 0..=130 (every remainder of the
    /// 4-block interleave and of the 64-block step, once and twice), both ways.
    #[test]
    fn every_backend_matches_the_rustcrypto_crate() {
        for b in backends() {
            for (seed, len) in [(1u64, 16usize), (2, 24), (3, 32), (4, 32)] {
                let key = bytes(seed + 7, len);
                let ours = Twofish::new_unchecked(&key, b).unwrap();
                let theirs = ::twofish::Twofish::new_from_slice(&key).unwrap();
                for blocks in 0..=130usize {
                    let plain = bytes(1000 + blocks as u64, blocks * BLOCK);
                    let mut want = plain.clone();
                    for c in want.chunks_exact_mut(BLOCK) {
                        theirs.encrypt_block(GenericArray::from_mut_slice(c));
                    }
                    let mut got = plain.clone();
                    ours.ecb(true, &mut got);
                    assert_eq!(got, want, "{b}: encrypt, {len}-byte key, {blocks} blocks");
                    let mut back = want.clone();
                    for c in back.chunks_exact_mut(BLOCK) {
                        theirs.decrypt_block(GenericArray::from_mut_slice(c));
                    }
                    ours.ecb(false, &mut got);
                    assert_eq!(got, back, "{b}: decrypt, {len}-byte key, {blocks} blocks");
                    assert_eq!(got, plain);
                }
            }
        }
    }

    /// XTS over one block at a time of the RustCrypto crate, tweaks multiplied one by one.
    fn reference_xts(k1: &[u8], k2: &[u8], encrypt: bool, first: u64, unit: usize, buf: &mut [u8]) {
        let data = ::twofish::Twofish::new_from_slice(k1).unwrap();
        let tweak = ::twofish::Twofish::new_from_slice(k2).unwrap();
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

    /// XTS on every backend against the reference: units smaller than a step (several to
    /// a step, crossing steps), larger ones with every remainder class, unit counts
    /// around the tweak batch, and unit numbers that wrap past 2^64; both ways, with the
    /// reference's own decryption compared too.
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
            let xts = TwofishXts::new(k1, k2, Some(b)).unwrap();
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
                    let mut back = want.clone();
                    reference_xts(k1, k2, false, first, unit, &mut back);
                    xts.apply(false, first, unit, &mut got);
                    assert_eq!(got, back, "decrypt, {what}");
                    assert_eq!(got, plain, "round trip, {what}");
                }
            }
        }
    }

    /// A name only other families have gives Twofish its portable backend; an unknown
    /// name is an error; `avx512` is Twofish's own when the CPU runs it, and an error
    /// naming the missing feature otherwise.
    #[test]
    fn forced_names_follow_the_shared_rule() {
        assert_eq!(
            TwofishBackend::for_forced_name("soft").unwrap(),
            TwofishBackend::Soft
        );
        if crate::Backend::Aesni.check_cpu().is_ok() {
            assert_eq!(
                TwofishBackend::for_forced_name("aesni").unwrap(),
                TwofishBackend::Soft
            );
        }
        assert!(TwofishBackend::for_forced_name("no-such-backend").is_err());
        let b = TwofishBackend::Avx512;
        match b.check_cpu() {
            Ok(()) => assert_eq!(TwofishBackend::for_forced_name(b.name()).unwrap(), b),
            Err(e) => {
                assert!(TwofishBackend::for_forced_name(b.name()).is_err());
                assert!(e.to_string().contains("missing"), "{e}");
            }
        }
    }
}
