//! Passphrase-based key derivation: PBKDF2 (sha1, sha256, sha512, whirlpool, ripemd160,
//! streebog512) and Argon2i/Argon2id
//! (version 0x13, no secret, no associated data, as cryptsetup uses them), and
//! cryptsetup-like calibration: the cost is chosen so that one derivation takes about
//! `--iter-time` milliseconds on this machine.
//!
//! Calibration (after cryptsetup's `crypt_pbkdf_perf`): PBKDF2 is timed on a growing
//! iteration count until a run lasts 100 ms, then scaled to the target (at least 1000
//! iterations). Argon2 keeps the memory cost (default min(1 GiB, half the RAM)) and the
//! parallel cost (default min(4, cores)), times one pass and scales the time cost to the
//! target; when even 4 passes (cryptsetup's minimum) would take too long it lowers the
//! memory instead; the estimate is re-measured until it lands within 20% of the target.

use self::progress::KdfStep;
use crate::error::{Error, Result};
use crate::hash::HashAlg;
use std::fmt;
use std::time::{Duration, Instant};

pub mod progress;

/// The lowest PBKDF2 iteration count cryptsetup accepts.
pub const PBKDF2_MIN_ITERATIONS: u32 = 1000;
/// cryptsetup's minimum Argon2 time cost.
pub const ARGON2_MIN_TIME: u32 = 4;
/// cryptsetup's maximum Argon2 memory cost (KiB).
pub const ARGON2_MAX_MEMORY_KIB: u32 = 4 * 1024 * 1024;
/// cryptsetup's default Argon2 memory cost (KiB): 1 GiB.
pub const ARGON2_DEFAULT_MEMORY_KIB: u32 = 1024 * 1024;
/// The smallest Argon2 memory cost (KiB) this accepts for keyslots.
pub const ARGON2_MIN_MEMORY_KIB: u32 = 32;

/// Which KDF a keyslot uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KdfKind {
    /// PBKDF2-HMAC.
    Pbkdf2,
    /// Argon2i.
    Argon2i,
    /// Argon2id (cryptsetup 2.x's default for LUKS2).
    Argon2id,
}

impl KdfKind {
    /// Every supported KDF.
    pub const ALL: [KdfKind; 3] = [KdfKind::Pbkdf2, KdfKind::Argon2i, KdfKind::Argon2id];

    /// Parses `pbkdf2`, `argon2i` or `argon2id`.
    pub fn parse(s: &str) -> Result<KdfKind> {
        KdfKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "kdf {s:?} is not supported (supported: {})",
                    KdfKind::names(&KdfKind::ALL)
                ))
            })
    }

    /// Why this KDF cannot serve a keyslot of `format`, whose keyslots take `allowed` (the
    /// default first); `None` when it can.
    pub fn refusal(self, format: &str, allowed: &[KdfKind]) -> Option<String> {
        if allowed.contains(&self) {
            return None;
        }
        let default = allowed.first().map_or("?", |k| k.name());
        Some(format!(
            "{format} keyslots use {} only (--pbkdf {default})",
            KdfKind::names(allowed)
        ))
    }

    /// `kinds` as text: `pbkdf2, argon2i, argon2id`.
    pub fn names(kinds: &[KdfKind]) -> String {
        kinds
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The name in metadata and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            KdfKind::Pbkdf2 => "pbkdf2",
            KdfKind::Argon2i => "argon2i",
            KdfKind::Argon2id => "argon2id",
        }
    }
}

/// A KDF with its costs fixed (what a keyslot records, less the salt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kdf {
    /// PBKDF2-HMAC with `hash`.
    Pbkdf2 {
        /// The HMAC hash.
        hash: HashAlg,
        /// Iteration count.
        iterations: u32,
    },
    /// Argon2i or Argon2id.
    Argon2 {
        /// `KdfKind::Argon2i` or `KdfKind::Argon2id`.
        kind: KdfKind,
        /// Time cost (passes).
        time: u32,
        /// Memory cost in KiB.
        memory_kib: u32,
        /// Lanes.
        parallel: u32,
    },
}

/// `pbkdf2-sha256 1000 iterations`, `argon2id time 4 memory 65536 KiB parallel 1`.
impl fmt::Display for Kdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Kdf::Pbkdf2 { hash, iterations } => {
                write!(f, "pbkdf2-{} {iterations} iterations", hash.name())
            }
            Kdf::Argon2 {
                kind,
                time,
                memory_kib,
                parallel,
            } => write!(
                f,
                "{} time {time} memory {memory_kib} KiB parallel {parallel}",
                kind.name()
            ),
        }
    }
}

impl Kdf {
    /// The KDF and its costs under the names of a LUKS2 keyslot's `kdf` object (`type`;
    /// `hash`, `iterations`; or `time`, `memory`, `cpus`), without the salt.
    pub fn to_json(&self) -> serde_json::Value {
        match *self {
            Kdf::Pbkdf2 { hash, iterations } => serde_json::json!({
                "type": "pbkdf2", "hash": hash.name(), "iterations": iterations,
            }),
            Kdf::Argon2 {
                kind,
                time,
                memory_kib,
                parallel,
            } => serde_json::json!({
                "type": kind.name(), "time": time, "memory": memory_kib, "cpus": parallel,
            }),
        }
    }

    /// Derives `out.len()` bytes from `passphrase` and `salt` (a step told to the
    /// [`progress`] observer).
    pub fn derive(&self, passphrase: &[u8], salt: &[u8], out: &mut [u8]) -> Result<()> {
        progress::derive(*self, || self.derive_quietly(passphrase, salt, out))
    }

    fn derive_quietly(&self, passphrase: &[u8], salt: &[u8], out: &mut [u8]) -> Result<()> {
        match *self {
            Kdf::Pbkdf2 { hash, iterations } => {
                if iterations == 0 {
                    return Err(Error::corrupt("pbkdf2 with 0 iterations"));
                }
                hash.pbkdf2(passphrase, salt, iterations, out);
                Ok(())
            }
            Kdf::Argon2 {
                kind,
                time,
                memory_kib,
                parallel,
            } => {
                let alg = match kind {
                    KdfKind::Argon2i => argon2::Algorithm::Argon2i,
                    _ => argon2::Algorithm::Argon2id,
                };
                let params = argon2::Params::new(memory_kib, time, parallel, Some(out.len()))
                    .map_err(|e| Error::invalid(format!("argon2 parameters: {e}")))?;
                argon2::Argon2::new(alg, argon2::Version::V0x13, params)
                    .hash_password_into(passphrase, salt, out)
                    .map_err(|e| Error::invalid(format!("argon2: {e}")))
            }
        }
    }
}

/// How to choose a KDF's cost (the `--pbkdf*` and `--iter-time` options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfOptions {
    /// The KDF.
    pub kind: KdfKind,
    /// PBKDF2's hash (default sha256).
    pub hash: HashAlg,
    /// Target time of one derivation in milliseconds (default 2000).
    pub iter_time_ms: u32,
    /// Argon2 memory cost in KiB (default min(1 GiB, half the RAM)).
    pub memory_kib: Option<u32>,
    /// Argon2 lanes (default min(4, cores)).
    pub parallel: Option<u32>,
    /// Skip calibration: PBKDF2 iterations or the Argon2 time cost.
    pub force_iterations: Option<u32>,
}

impl Default for KdfOptions {
    fn default() -> KdfOptions {
        KdfOptions {
            kind: KdfKind::Argon2id,
            hash: HashAlg::Sha256,
            iter_time_ms: 2000,
            memory_kib: None,
            parallel: None,
            force_iterations: None,
        }
    }
}

fn phys_memory_kib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

impl KdfOptions {
    /// The options that make `kdf` again, costs included (no calibration): a keyslot
    /// that replaces another at the same cost. `hash` is PBKDF2's and the AF splitter's.
    pub fn same_as(kdf: &Kdf, hash: HashAlg) -> KdfOptions {
        match *kdf {
            Kdf::Pbkdf2 { hash, iterations } => KdfOptions {
                force_iterations: Some(iterations),
                ..KdfOptions::pbkdf2(hash)
            },
            Kdf::Argon2 {
                kind,
                time,
                memory_kib,
                parallel,
            } => KdfOptions {
                kind,
                hash,
                memory_kib: Some(memory_kib),
                parallel: Some(parallel),
                force_iterations: Some(time),
                ..KdfOptions::default()
            },
        }
    }

    /// PBKDF2 with `hash` (LUKS1, and `--pbkdf pbkdf2`).
    pub fn pbkdf2(hash: HashAlg) -> KdfOptions {
        KdfOptions {
            kind: KdfKind::Pbkdf2,
            hash,
            ..KdfOptions::default()
        }
    }

    /// Fixes the costs: calibrated unless `force_iterations` is set. `key_len` is the length
    /// of the derived key (PBKDF2's cost grows with it).
    pub fn resolve(&self, key_len: usize) -> Result<Kdf> {
        if self.iter_time_ms == 0 && self.force_iterations.is_none() {
            return Err(Error::invalid("--iter-time must be at least 1 ms"));
        }
        match self.kind {
            KdfKind::Pbkdf2 => {
                let iterations = match self.force_iterations {
                    Some(n) if n < PBKDF2_MIN_ITERATIONS => {
                        return Err(Error::invalid(format!(
                            "pbkdf2 needs at least {PBKDF2_MIN_ITERATIONS} iterations (got {n})"
                        )))
                    }
                    Some(n) => n,
                    None => {
                        let target = self.iter_time_ms;
                        let iterations = calibrating(self.kind, target, || {
                            calibrate_pbkdf2(self.hash, key_len, target)
                        });
                        let kdf = Kdf::Pbkdf2 {
                            hash: self.hash,
                            iterations,
                        };
                        progress::calibrated(kdf, target);
                        iterations
                    }
                };
                Ok(Kdf::Pbkdf2 {
                    hash: self.hash,
                    iterations,
                })
            }
            kind => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
                let parallel = self.parallel.unwrap_or(cores.min(4));
                if !(1..=16).contains(&parallel) {
                    return Err(Error::invalid(format!(
                        "--pbkdf-parallel must be 1 to 16 (got {parallel})"
                    )));
                }
                let default_mem = phys_memory_kib().map_or(ARGON2_DEFAULT_MEMORY_KIB as u64, |m| {
                    (m / 2).min(ARGON2_DEFAULT_MEMORY_KIB as u64)
                }) as u32;
                let memory_kib = self.memory_kib.unwrap_or(default_mem);
                if !(ARGON2_MIN_MEMORY_KIB..=ARGON2_MAX_MEMORY_KIB).contains(&memory_kib)
                    || memory_kib < 8 * parallel
                {
                    return Err(Error::invalid(format!(
                        "--pbkdf-memory must be {ARGON2_MIN_MEMORY_KIB} to {ARGON2_MAX_MEMORY_KIB} \
                         KiB and at least 8 KiB per lane (got {memory_kib})"
                    )));
                }
                match self.force_iterations {
                    Some(t) if t < 1 => Err(Error::invalid("argon2 time cost must be >= 1")),
                    Some(time) => Ok(Kdf::Argon2 {
                        kind,
                        time,
                        memory_kib,
                        parallel,
                    }),
                    None => {
                        let target = self.iter_time_ms;
                        let kdf = calibrating(kind, target, || {
                            calibrate_argon2(kind, memory_kib, parallel, key_len, target)
                        })?;
                        progress::calibrated(kdf, target);
                        Ok(kdf)
                    }
                }
            }
        }
    }
}

/// Runs the calibration `work` of `kind` to `target_ms` as a step.
fn calibrating<T>(kind: KdfKind, target_ms: u32, work: impl FnOnce() -> T) -> T {
    progress::step(KdfStep::Calibrate { kind, target_ms }, None, work)
}

/// Milliseconds as a duration (no less than zero).
fn ms(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

fn calibrate_pbkdf2(hash: HashAlg, key_len: usize, target_ms: u32) -> u32 {
    let salt = [0x5au8; 32];
    let mut out = vec![0u8; key_len];
    let mut iterations: u32 = 1000;
    loop {
        let t = Instant::now();
        hash.pbkdf2(b"sectorcrypt calibration", &salt, iterations, &mut out);
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if ms >= 100.0 || iterations >= u32::MAX / 4 {
            let n = iterations as f64 * target_ms as f64 / ms.max(0.001);
            return (n.min(u32::MAX as f64) as u32).max(PBKDF2_MIN_ITERATIONS);
        }
        let factor = if ms < 10.0 { 8 } else { 2 };
        progress::left(self::ms(ms * f64::from(factor)));
        iterations = iterations.saturating_mul(factor);
    }
}

fn calibrate_argon2(
    kind: KdfKind,
    memory_kib: u32,
    parallel: u32,
    key_len: usize,
    target_ms: u32,
) -> Result<Kdf> {
    let salt = [0x5au8; 32];
    let mut out = vec![0u8; key_len];
    let min_mem = ARGON2_MIN_MEMORY_KIB.max(8 * parallel);
    // Work is time x memory. Probe one pass at the full memory, then re-measure at the
    // estimate (the cost per KiB differs between memory sizes: page faults, caches) until
    // a run lands within 20% of the target, at most three probes more.
    let (mut time, mut mem) = (1u32, memory_kib);
    for probe in 0..4 {
        let kdf = Kdf::Argon2 {
            kind,
            time,
            memory_kib: mem,
            parallel,
        };
        let t = Instant::now();
        kdf.derive_quietly(b"sectorcrypt calibration", &salt, &mut out)?;
        let ms = (t.elapsed().as_secs_f64() * 1000.0).max(0.001);
        let ratio = target_ms as f64 / ms;
        if probe > 0 && (0.8..=1.25).contains(&ratio) {
            break;
        }
        let work = time as f64 * mem as f64 * ratio;
        if work >= ARGON2_MIN_TIME as f64 * memory_kib as f64 {
            mem = memory_kib;
            time = (work / memory_kib as f64).min(u32::MAX as f64) as u32;
        } else {
            // Too slow for four passes at full memory: keep four and lower the memory.
            time = ARGON2_MIN_TIME;
            mem = ((work / ARGON2_MIN_TIME as f64) as u32).max(min_mem);
        }
        if mem == min_mem && time == ARGON2_MIN_TIME && ratio < 1.0 {
            break;
        }
        if probe < 3 {
            // The next probe's work over this one's, at the speed just measured.
            let scale = f64::from(time) * f64::from(mem) / (work / ratio);
            progress::left(self::ms(ms * scale));
        }
    }
    Ok(Kdf::Argon2 {
        kind,
        time: time.max(ARGON2_MIN_TIME),
        memory_kib: mem,
        parallel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argon2id_matches_the_reference_implementation() {
        // RFC 9106 section 5.3 uses a secret and associated data, which LUKS never does;
        // the reference implementation's own test (argon2 repo, src/test.c) for version
        // 0x13, argon2id, t=2, m=2^16, p=1, "password"/"somesalt", 32 bytes:
        let kdf = Kdf::Argon2 {
            kind: KdfKind::Argon2id,
            time: 2,
            memory_kib: 65536,
            parallel: 1,
        };
        let mut out = [0u8; 32];
        kdf.derive(b"password", b"somesalt", &mut out).unwrap();
        assert_eq!(
            hex::encode(out),
            "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7"
        );
    }

    #[test]
    fn calibration_respects_minimums_and_forced_costs() {
        let mut o = KdfOptions::pbkdf2(HashAlg::Sha256);
        o.iter_time_ms = 1;
        match o.resolve(32).unwrap() {
            Kdf::Pbkdf2 { iterations, .. } => assert!(iterations >= PBKDF2_MIN_ITERATIONS),
            k => panic!("{k:?}"),
        }
        o.force_iterations = Some(999);
        assert!(o.resolve(32).is_err());
        let a = KdfOptions {
            memory_kib: Some(64),
            parallel: Some(1),
            force_iterations: Some(3),
            ..KdfOptions::default()
        };
        assert_eq!(
            a.resolve(64).unwrap(),
            Kdf::Argon2 {
                kind: KdfKind::Argon2id,
                time: 3,
                memory_kib: 64,
                parallel: 1
            }
        );
    }
}
