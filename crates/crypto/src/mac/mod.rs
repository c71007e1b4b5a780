//! Authentication tags of storage units: GELI's authenticated sectors
//! (FreeBSD sys/geom/eli/g_eli_integrity.c).
//!
//! An authenticated GELI provider stores each unit (one sector of the underlying provider,
//! usually 512 bytes) as `tag | message | padding`: the message is that unit's share of
//! the ciphertext of a decrypted sector, and the tag is an HMAC over it
//! (encrypt-then-MAC). Every unit has its own HMAC key,
//!
//! ```text
//! unit key = SHA-256(akey || le64(byte offset of the unit in the provider))
//! tag      = HMAC-<algorithm>(unit key, message)
//! ```
//!
//! where `akey` is the provider's 64-byte authentication key (HMAC-SHA512(data key,
//! 0x11)). A decrypted sector spans several units: all but the last carry
//! [`UnitShape::msg_len`] bytes, the last the rest ([`UnitShape::last_msg_len`]).
//!
//! [`SectorMac::sign`] and [`SectorMac::verify`] take a whole run of units at once, so
//! that the independent units can be hashed side by side.
//!
//! # Backends
//! A [`MacBackend`] is chosen like the AES and GOST ones (fastest usable, or
//! `SECTORCRYPT_BACKEND`; a known-answer self-test before first use):
//!
//! | backend | HMAC-SHA256, HMAC-SHA1 | file |
//! |---|---|---|
//! | `avx512` | 16 units per call, one per 32-bit lane of zmm registers | `x86/avx512.rs` |
//! | `shani` | several units interleaved on the SHA extensions | `x86/shani.rs` |
//! | `soft` | one unit at a time, the `sha2`/`sha1` compression functions | `lanes.rs` |
//!
//! The lane backends share one driver (`unit`): unit keys from a midstate computed once
//! per key, HMAC's pads, inner and outer hashes, all lane-parallel, units of different
//! lengths in one batch. HMAC-SHA384, HMAC-SHA512 and HMAC-RIPEMD160 run one unit at a time
//! on every backend (the `hmac` crate over `sha2` and `ripemd`; their unit keys too).

mod lanes;
mod self_test;
mod unit;
#[cfg(target_arch = "x86_64")]
mod x86;

use crate::backend::{family, selectable};
use crate::error::{InputError, KeyError};
use crate::Error;
use hmac::{Hmac, Mac};
use lanes::{Lanes, Portable, MAX_LANES, SHA1_IV, SHA256_IV};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

family! {
    /// An implementation of the sector tags (see the module documentation).
    pub enum MacBackend: Mac, self_test: self_test::self_test {
        /// AVX-512 (F, BW): 16 units per call, one per 32-bit lane of zmm registers.
        Avx512 = "avx512", x86 [Avx512f, Avx512bw, OsZmm],
        /// The SHA extensions (SHA-NI), several units interleaved.
        Shani = "shani", x86 [Sha, Sse41],
        /// Portable, no `unsafe`: one unit at a time.
        Soft = "soft", portable,
    }
}

selectable!(MacBackend, unknown: "backend" lists all);

/// The tag algorithms of GELI's `-a` (`geli init -a hmac/sha256`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacAlgorithm {
    /// HMAC-SHA1 (20-byte tags).
    HmacSha1,
    /// HMAC-RIPEMD160 (20-byte tags).
    HmacRipemd160,
    /// HMAC-SHA256 (32-byte tags).
    HmacSha256,
    /// HMAC-SHA384 (48-byte tags).
    HmacSha384,
    /// HMAC-SHA512 (64-byte tags).
    HmacSha512,
}

impl MacAlgorithm {
    /// Bytes of a tag.
    pub fn tag_len(self) -> usize {
        match self {
            MacAlgorithm::HmacSha1 | MacAlgorithm::HmacRipemd160 => 20,
            MacAlgorithm::HmacSha256 => 32,
            MacAlgorithm::HmacSha384 => 48,
            MacAlgorithm::HmacSha512 => 64,
        }
    }
}

/// Bytes of the authentication key a [`SectorMac`] takes.
pub const AUTH_KEY_LEN: usize = 64;

/// How a run of units is cut: units of `unit_len` bytes grouped by decrypted sector,
/// `units_per_group` units per sector; each unit holds its tag first, then its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitShape {
    /// Bytes per unit (the underlying sector size).
    pub unit_len: usize,
    /// Units per decrypted sector.
    pub units_per_group: usize,
    /// Message bytes of every unit but the last of a group.
    pub msg_len: usize,
    /// Message bytes of the last unit of a group.
    pub last_msg_len: usize,
}

impl UnitShape {
    /// Message bytes of unit `i` of a run starting at a group boundary.
    pub fn msg_len_of(&self, i: usize) -> usize {
        if (i + 1).is_multiple_of(self.units_per_group) {
            self.last_msg_len
        } else {
            self.msg_len
        }
    }

    /// The number of units of a run of `len` bytes at `first_offset`, or why the run does
    /// not fit this shape.
    fn check(&self, alg: MacAlgorithm, len: usize, first_offset: u64) -> Result<usize, Error> {
        let tag = alg.tag_len();
        let fits = |m: usize| tag.checked_add(m).is_some_and(|e| e <= self.unit_len);
        if self.unit_len == 0
            || self.units_per_group == 0
            || !fits(self.msg_len)
            || !fits(self.last_msg_len)
        {
            return Err(InputError::Length {
                got: self.unit_len,
                why: "a unit must hold its tag and its message",
            }
            .into());
        }
        let whole = self
            .unit_len
            .checked_mul(self.units_per_group)
            .is_some_and(|group| len.is_multiple_of(group));
        if !whole {
            return Err(InputError::Length {
                got: len,
                why: "a run of units must be a whole number of groups",
            }
            .into());
        }
        // Every byte of the run has an offset a u64 can hold.
        let last = (len as u64).saturating_sub(1);
        if first_offset.checked_add(last).is_none() {
            return Err(InputError::Length {
                got: len,
                why: "a run of units must end before byte 2^64 of the provider",
            }
            .into());
        }
        Ok(len / self.unit_len)
    }
}

/// The kernels of a backend (a value of an x86 kernel exists only on a CPU that runs it).
#[derive(Debug, Clone, Copy)]
enum Engine {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Shani1(x86::Shani<1>),
    #[cfg(target_arch = "x86_64")]
    Shani2(x86::Shani<2>),
    #[cfg(target_arch = "x86_64")]
    Shani4(x86::Shani<4>),
    #[cfg(target_arch = "x86_64")]
    Avx512(x86::Avx512),
}

/// Runs `$body` with `$k` bound to the kernels of `$engine` (the body is stamped out once
/// per kernel type).
macro_rules! with_kernels {
    ($engine:expr, |$k:ident| $body:expr) => {
        with_kernels!(@arms $engine, $k, $body, [Shani1 Shani2 Shani4 Avx512])
    };
    (@arms $engine:expr, $k:ident, $body:expr, [$($x86:ident)*]) => {
        match $engine {
            Engine::Portable => {
                let $k = &Portable;
                $body
            }
            $(
                #[cfg(target_arch = "x86_64")]
                Engine::$x86(kernels) => {
                    let $k = &kernels;
                    $body
                }
            )*
        }
    };
}

impl Engine {
    /// The kernels of `backend`, with `lanes` interleaved units on `shani` (0: its
    /// default), or `None` when this CPU lacks them.
    fn new(backend: MacBackend, lanes: usize) -> Option<Engine> {
        match backend {
            MacBackend::Soft => Some(Engine::Portable),
            #[cfg(target_arch = "x86_64")]
            MacBackend::Shani => match lanes {
                1 => x86::Shani::new().map(Engine::Shani1),
                2 => x86::Shani::new().map(Engine::Shani2),
                // The default: measured faster than two on Zen 5 (5.3 against 5.8 cycles
                // per byte of sign + verify of 4096-byte sectors), as fast for one sector.
                4 | 0 => x86::Shani::new().map(Engine::Shani4),
                _ => None,
            },
            #[cfg(target_arch = "x86_64")]
            MacBackend::Avx512 => x86::Avx512::new().map(Engine::Avx512),
            #[cfg(not(target_arch = "x86_64"))]
            _ => None,
        }
    }

    fn lanes(self) -> usize {
        with_kernels!(self, |k| Lanes::<8>::lanes(k))
    }
}

/// The tag maker of one provider: see the module documentation. Its key is zeroized on
/// drop and never shown by `Debug`.
#[derive(Clone)]
pub struct SectorMac {
    alg: MacAlgorithm,
    akey: Zeroizing<[u8; AUTH_KEY_LEN]>,
    /// The SHA-256 state after `akey`: the start of every unit key.
    mid: Zeroizing<[u32; 8]>,
    backend: MacBackend,
    engine: Engine,
}

impl std::fmt::Debug for SectorMac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SectorMac")
            .field("alg", &self.alg)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl SectorMac {
    /// The tag maker for `alg` under the 64-byte authentication key `akey`.
    pub fn new(alg: MacAlgorithm, akey: &[u8]) -> Result<SectorMac, Error> {
        SectorMac::with_backend(alg, akey, MacBackend::selected()?)
    }

    /// As [`SectorMac::new`], on `backend` (which must be usable here).
    pub fn with_backend(
        alg: MacAlgorithm,
        akey: &[u8],
        backend: MacBackend,
    ) -> Result<SectorMac, Error> {
        backend.ensure_usable()?;
        SectorMac::build(alg, akey, backend, 0)
    }

    /// As [`SectorMac::with_backend`] on `shani`, with `lanes` (1, 2 or 4) units
    /// interleaved: for the benchmarks that compare them.
    #[cfg(feature = "hazmat-testing")]
    pub fn with_shani_lanes(
        alg: MacAlgorithm,
        akey: &[u8],
        lanes: usize,
    ) -> Result<SectorMac, Error> {
        MacBackend::Shani.ensure_usable()?;
        SectorMac::build(alg, akey, MacBackend::Shani, lanes)
    }

    /// The tag maker on `backend`, whose CPU check has passed.
    fn build(
        alg: MacAlgorithm,
        akey: &[u8],
        backend: MacBackend,
        lanes: usize,
    ) -> Result<SectorMac, Error> {
        let akey: [u8; AUTH_KEY_LEN] = akey.try_into().map_err(|_| KeyError::Length {
            what: "a sector authentication key",
            got: akey.len(),
            expected: "64",
        })?;
        let akey = Zeroizing::new(akey);
        let engine = Engine::new(backend, lanes).ok_or(InputError::Length {
            got: lanes,
            why: "shani interleaves 1, 2 or 4 units",
        })?;
        let mut mid = Zeroizing::new(SHA256_IV);
        let block = sha2::digest::generic_array::GenericArray::from_slice(&akey[..]);
        sha2::compress256(&mut mid, core::slice::from_ref(block));
        Ok(SectorMac {
            alg,
            akey,
            mid,
            backend,
            engine,
        })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> MacAlgorithm {
        self.alg
    }

    /// The backend the tags are computed on.
    pub fn backend(&self) -> MacBackend {
        self.backend
    }

    /// Bytes of a tag.
    pub fn tag_len(&self) -> usize {
        self.alg.tag_len()
    }

    /// Units per batch: the lanes of the kernels for HMAC-SHA256 and HMAC-SHA1, one for
    /// the algorithms without lane kernels.
    fn batch(&self) -> usize {
        match self.alg {
            MacAlgorithm::HmacSha256 | MacAlgorithm::HmacSha1 => self.engine.lanes(),
            _ => 1,
        }
    }

    /// The tags of units `first..first + tags.len()` of `units` (at most [`Self::batch`]),
    /// working in `x`.
    fn batch_tags(
        &self,
        x: &mut unit::Scratch,
        units: &[u8],
        shape: UnitShape,
        first_offset: u64,
        first: usize,
        tags: &mut [[u8; 64]],
    ) {
        let n = tags.len();
        let t = self.tag_len();
        let mut offsets = [0u64; MAX_LANES];
        let mut msgs: [&[u8]; MAX_LANES] = [&[]; MAX_LANES];
        for l in 0..n {
            let i = first + l;
            let start = i * shape.unit_len + t;
            offsets[l] = first_offset + (i * shape.unit_len) as u64;
            msgs[l] = &units[start..start + shape.msg_len_of(i)];
        }
        let (offsets, msgs) = (&offsets[..n], &msgs[..n]);
        with_kernels!(self.engine, |k| match self.alg {
            MacAlgorithm::HmacSha256 => {
                unit::unit_keys(k, x, &self.mid, offsets);
                unit::hmac::<8, _>(k, x, &SHA256_IV, msgs, tags);
            }
            MacAlgorithm::HmacSha1 => {
                unit::unit_keys(k, x, &self.mid, offsets);
                unit::hmac::<5, _>(k, x, &SHA1_IV, msgs, tags);
            }
            _ => {
                for l in 0..n {
                    self.tag_into(offsets[l], msgs[l], &mut tags[l][..t]);
                }
            }
        })
    }

    /// Runs `each(scratch, first, tags)` for the batches of a run of `len` bytes: `tags`
    /// has one entry per unit `first..first + tags.len()` for `each` to fill (with
    /// [`Self::batch_tags`]); the first `Some` it returns ends the run and is returned.
    fn batches(
        &self,
        len: usize,
        shape: UnitShape,
        first_offset: u64,
        mut each: impl FnMut(&mut unit::Scratch, usize, &mut [[u8; 64]]) -> Option<usize>,
    ) -> Result<Option<usize>, Error> {
        let n = shape.check(self.alg, len, first_offset)?;
        let batch = self.batch();
        let mut tags = [[0u8; 64]; MAX_LANES];
        let mut x = unit::Scratch::new(batch);
        for first in (0..n).step_by(batch) {
            let count = batch.min(n - first);
            if let Some(stop) = each(&mut x, first, &mut tags[..count]) {
                return Ok(Some(stop));
            }
        }
        Ok(None)
    }

    /// Writes the tag of every unit of `units` into its tag field. `units` is a whole
    /// number of groups of `shape`; unit `i` lies at byte `first_offset + i * unit_len` of
    /// the provider.
    pub fn sign(&self, units: &mut [u8], shape: UnitShape, first_offset: u64) -> Result<(), Error> {
        let t = self.tag_len();
        self.batches(units.len(), shape, first_offset, |x, first, tags| {
            self.batch_tags(x, units, shape, first_offset, first, tags);
            for (l, tag) in tags.iter().enumerate() {
                let at = (first + l) * shape.unit_len;
                units[at..at + t].copy_from_slice(&tag[..t]);
            }
            None
        })?;
        Ok(())
    }

    /// Checks the tag of every unit of `units` (as for [`SectorMac::sign`]). `Ok(None)`
    /// when all verify, `Ok(Some(i))` with the first unit `i` whose tag does not. Tags are
    /// compared in constant time.
    pub fn verify(
        &self,
        units: &[u8],
        shape: UnitShape,
        first_offset: u64,
    ) -> Result<Option<usize>, Error> {
        use subtle::ConstantTimeEq;
        let t = self.tag_len();
        self.batches(units.len(), shape, first_offset, |x, first, expected| {
            self.batch_tags(x, units, shape, first_offset, first, expected);
            // Every tag of the batch is compared whole, without a branch on its bytes
            // (the differences are OR-ed, then tested once, in constant time); only
            // which unit is the first bad one (what the caller is told) depends on them.
            let mut bad = [false; MAX_LANES];
            for (l, want) in expected.iter().enumerate() {
                let at = (first + l) * shape.unit_len;
                let diff = want[..t]
                    .iter()
                    .zip(&units[at..at + t])
                    .fold(0u8, |d, (a, b)| d | (a ^ b));
                bad[l] = !bool::from(diff.ct_eq(&0));
            }
            bad.iter().position(|b| *b).map(|l| first + l)
        })
    }

    /// The tag of one unit at `offset` over `msg` (the `hmac` crate, one unit at a time).
    fn tag_into(&self, offset: u64, msg: &[u8], tag: &mut [u8]) {
        let mut h = Sha256::new();
        h.update(&self.akey[..]);
        h.update(offset.to_le_bytes());
        let unit_key = Zeroizing::new(<[u8; 32]>::from(h.finalize()));
        fn hmac<M: Mac + hmac::digest::KeyInit>(key: &[u8], msg: &[u8], tag: &mut [u8]) {
            let mut m = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            m.update(msg);
            tag.copy_from_slice(&m.finalize().into_bytes());
        }
        match self.alg {
            MacAlgorithm::HmacSha1 => hmac::<Hmac<sha1::Sha1>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacRipemd160 => hmac::<Hmac<ripemd::Ripemd160>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacSha256 => hmac::<Hmac<Sha256>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacSha384 => hmac::<Hmac<sha2::Sha384>>(&unit_key[..], msg, tag),
            MacAlgorithm::HmacSha512 => hmac::<Hmac<sha2::Sha512>>(&unit_key[..], msg, tag),
        }
    }
}

/// The SHA-256 digests of many messages at once on the lane kernels of the selected
/// backend (16 messages per call with AVX-512, interleaved on SHA-NI, one at a time in
/// the portable one): `out[i]` gets the digest of `msgs[i]`. For checksums of many blocks
/// (a re-encryption's resilience data); the messages may differ in length.
pub fn sha256_many(msgs: &[&[u8]], out: &mut [[u8; 32]]) -> Result<(), Error> {
    if msgs.len() != out.len() {
        return Err(InputError::Length {
            got: out.len(),
            why: "one digest per message",
        }
        .into());
    }
    let backend = MacBackend::selected()?;
    let engine = Engine::new(backend, 0).unwrap_or(Engine::Portable);
    let batch = engine.lanes();
    let mut x = unit::Scratch::new(batch);
    let mut d = [[0u8; 64]; MAX_LANES];
    for (group, outs) in msgs.chunks(batch).zip(out.chunks_mut(batch)) {
        let d = &mut d[..group.len()];
        with_kernels!(engine, |k| unit::hash::<8, _>(
            k, &mut x, &SHA256_IV, group, d
        ));
        for (o, d) in outs.iter_mut().zip(d.iter()) {
            o.copy_from_slice(&d[..32]);
        }
    }
    Ok(())
}

/// SHA-256 or SHA-1 digests (`alg` HMAC-SHA256 or HMAC-SHA1 names the hash), or HMACs
/// under `keys` (at most 32 bytes each, one per message), of several messages at once on
/// the lane kernels of `backend` (`lanes` interleaved units on `shani`: 1, 2 or 4; 0 for
/// the default): for the tests of the kernels themselves (`hazmat-testing`; the sector
/// tags are the supported use).
#[cfg(feature = "hazmat-testing")]
pub fn lane_digests(
    backend: MacBackend,
    lanes: usize,
    alg: MacAlgorithm,
    keys: Option<&[&[u8]]>,
    msgs: &[&[u8]],
) -> Result<Vec<Vec<u8>>, Error> {
    backend.ensure_usable()?;
    let engine = Engine::new(backend, lanes).ok_or(InputError::Length {
        got: lanes,
        why: "shani interleaves 1, 2 or 4 units",
    })?;
    let bad = |why| InputError::Length { got: 0, why };
    if keys.is_some_and(|k| k.len() != msgs.len() || k.iter().any(|k| k.len() > 32)) {
        return Err(bad("one key of at most 32 bytes per message").into());
    }
    let batch = engine.lanes();
    let mut x = unit::Scratch::new(batch);
    let mut out = Vec::new();
    for (i, group) in msgs.chunks(batch).enumerate() {
        let mut d = [[0u8; 64]; MAX_LANES];
        let d = &mut d[..group.len()];
        let keys = keys.map(|k| &k[i * batch..i * batch + group.len()]);
        with_kernels!(engine, |k| match (alg, keys) {
            (MacAlgorithm::HmacSha256, None) => unit::hash::<8, _>(k, &mut x, &SHA256_IV, group, d),
            (MacAlgorithm::HmacSha1, None) => unit::hash::<5, _>(k, &mut x, &SHA1_IV, group, d),
            (MacAlgorithm::HmacSha256, Some(keys)) => {
                unit::set_keys(&mut x, keys);
                unit::hmac::<8, _>(k, &mut x, &SHA256_IV, group, d);
            }
            (MacAlgorithm::HmacSha1, Some(keys)) => {
                unit::set_keys(&mut x, keys);
                unit::hmac::<5, _>(k, &mut x, &SHA1_IV, group, d);
            }
            _ => return Err(bad("the lane kernels are SHA-256 and SHA-1").into()),
        });
        let len = if alg == MacAlgorithm::HmacSha256 {
            32
        } else {
            20
        };
        out.extend(d.iter().map(|d| d[..len].to_vec()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: UnitShape = UnitShape {
        unit_len: 512,
        units_per_group: 9,
        msg_len: 480,
        last_msg_len: 256,
    };

    #[test]
    fn a_signed_run_verifies_and_a_flipped_bit_names_its_unit() {
        let mac = SectorMac::new(MacAlgorithm::HmacSha256, &[7u8; 64]).unwrap();
        let mut units: Vec<u8> = (0..2 * 9 * 512).map(|i| (i * 31 % 251) as u8).collect();
        mac.sign(&mut units, SHAPE, 1 << 20).unwrap();
        assert_eq!(mac.verify(&units, SHAPE, 1 << 20).unwrap(), None);
        // The padding after the last unit's message is not covered.
        units[8 * 512 + 32 + 256] ^= 1;
        assert_eq!(mac.verify(&units, SHAPE, 1 << 20).unwrap(), None);
        units[12 * 512 + 40] ^= 1;
        assert_eq!(mac.verify(&units, SHAPE, 1 << 20).unwrap(), Some(12));
        // The same bytes at another offset have other tags.
        units[12 * 512 + 40] ^= 1;
        assert_eq!(mac.verify(&units, SHAPE, 0).unwrap(), Some(0));
    }

    #[test]
    fn bad_shapes_and_keys_are_refused() {
        assert!(SectorMac::new(MacAlgorithm::HmacSha1, &[0; 32]).is_err());
        let mac = SectorMac::new(MacAlgorithm::HmacSha512, &[0; 64]).unwrap();
        let mut units = vec![0u8; 9 * 512];
        assert!(mac.sign(&mut units, SHAPE, 0).is_err(), "480 + 64 > 512");
        let shape = UnitShape {
            msg_len: 448,
            last_msg_len: 64,
            units_per_group: 10,
            ..SHAPE
        };
        assert!(mac.sign(&mut units, shape, 0).is_err(), "not whole groups");
        let mut units = vec![0u8; 10 * 512];
        mac.sign(&mut units, shape, 0).unwrap();
        assert_eq!(mac.verify(&units, shape, 0).unwrap(), None);
    }

    #[test]
    fn many_sha256_digests_are_sha256_on_the_selected_backend() {
        let msgs: Vec<Vec<u8>> = (0..37)
            .map(|i| (0..i * 131 % 9000).map(|j| (j * 7 + i) as u8).collect())
            .collect();
        let refs: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
        let mut out = vec![[0u8; 32]; refs.len()];
        sha256_many(&refs, &mut out).unwrap();
        for (m, o) in msgs.iter().zip(&out) {
            assert_eq!(o[..], Sha256::digest(m)[..]);
        }
        assert!(sha256_many(&refs, &mut out[1..]).is_err());
    }

    #[test]
    fn a_tag_maker_can_be_shared_between_threads() {
        fn shared<T: Send + Sync + Clone>() {}
        shared::<SectorMac>();
    }

    #[test]
    fn every_backend_passes_its_self_test_or_is_missing() {
        for b in MacBackend::ALL {
            match b.check_cpu() {
                Ok(()) => assert!(self_test::self_test(b), "{b} fails its self-test"),
                Err(e) => eprintln!("SKIPPED {b}: {e}"),
            }
        }
    }
}
