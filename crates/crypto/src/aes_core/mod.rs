//! The AES core: the key schedule, the kernel interface every backend implements
//! ([`AesKernels`]), the backends ([`Backend`]: `soft/`, `x86/`) and their self-test.
//!
//! A backend implements whole mode kernels over whole buffers; there is no "encrypt one
//! block" callback anywhere on a hot path. The public, checked types over these kernels are
//! in [`crate::modes`] (ECB, CBC, CTR, XTS, sectors) and [`crate::gcm`]; this module
//! depends on neither of them, nor on GHASH.

use crate::block::Block;
use crate::buf::InOut;
use crate::error::KeyError;
use crate::secret::{self, Secret};
use crate::Error;
use zeroize::{Zeroize, ZeroizeOnDrop};

mod backend;
pub(crate) mod soft;
pub(crate) mod width;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

pub use backend::Backend;

/// The FIPS-197 expanded encryption key: `rounds + 1` round keys, each 16 bytes in the
/// cipher's byte order. Backends convert it to whatever layout they need.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct RoundKeys {
    pub(crate) rk: [Block; 15],
    /// 10, 12 or 14.
    pub(crate) rounds: usize,
}

/// FIPS-197 section 5.2 key expansion. The S-box is evaluated by the constant-time
/// bitsliced circuit of the soft backend, so the schedule leaks nothing through memory
/// access either.
pub(crate) fn expand_key(key: &[u8]) -> Result<RoundKeys, Error> {
    let nk = match key.len() {
        16 | 24 | 32 => key.len() / 4,
        got => {
            return Err(Error::Key(KeyError::Length {
                what: "aes",
                got,
                expected: "16, 24 or 32 bytes",
            }))
        }
    };
    let rounds = nk + 6;
    let total = 4 * (rounds + 1);
    let mut w = [[0u8; 4]; 60];
    for (i, word) in key.chunks_exact(4).enumerate() {
        w[i].copy_from_slice(word);
    }
    // Round constants x^(i-1) in GF(2^8), FIPS-197 section 5.2.
    const RCON: [u8; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];
    for i in nk..total {
        let mut t = w[i - 1];
        if i % nk == 0 {
            t.rotate_left(1);
            t = soft::sub_word(t);
            t[0] ^= RCON[i / nk - 1];
        } else if nk > 6 && i % nk == 4 {
            t = soft::sub_word(t);
        }
        for b in 0..4 {
            w[i][b] = w[i - nk][b] ^ t[b];
        }
    }
    let mut rk = [[0u8; 16]; 15];
    for (r, block) in rk.iter_mut().take(rounds + 1).enumerate() {
        for c in 0..4 {
            block[4 * c..4 * c + 4].copy_from_slice(&w[4 * r + c]);
        }
    }
    w.zeroize();
    Ok(RoundKeys { rk, rounds })
}

/// The mode kernels of one backend for one expanded key.
///
/// Contracts shared by every implementation (checked by the callers in [`crate::modes`]):
/// - every length is a whole number of blocks;
/// - `*_sectors`: `data.len() == ivs.len() * sector_size`, `sector_size` a multiple of 16;
/// - XTS `tweaks` are the already-encrypted initial tweaks (`E_K2(iv)`), one per data unit;
/// - in place and out of place give the same result.
pub(crate) trait AesKernels: Send + Sync {
    fn backend(&self) -> Backend;

    fn ecb_encrypt(&self, data: InOut<'_>);
    fn ecb_decrypt(&self, data: InOut<'_>);

    /// One CBC chain; `iv` is updated to the last ciphertext block.
    fn cbc_encrypt(&self, iv: &mut Block, data: InOut<'_>);
    /// One CBC chain; `iv` is updated to the last ciphertext block.
    fn cbc_decrypt(&self, iv: &mut Block, data: InOut<'_>);

    /// One block in place (GCM's E_K(J0)): a CBC chain of one block from a zero IV, which
    /// is the latency-bound single-stream path of every backend, with no buffering.
    fn encrypt_block(&self, block: &mut Block) {
        // The chaining value ends as the output block (a secret for GCM's E_K(J0)): wiped.
        let mut iv = [0; 16];
        self.cbc_encrypt(&mut iv, InOut::InPlace(block));
        iv.zeroize();
    }

    /// Independent CBC chains, one per sector, with `ivs[i]` for sector `i`.
    fn cbc_encrypt_sectors(&self, ivs: &[Block], mut data: InOut<'_>) {
        let size = data.len() / ivs.len().max(1);
        for (i, iv) in ivs.iter().enumerate() {
            let mut iv = *iv;
            self.cbc_encrypt(&mut iv, data.slice(i * size, (i + 1) * size));
        }
    }

    /// Independent CBC chains, one per sector, with `ivs[i]` for sector `i`.
    fn cbc_decrypt_sectors(&self, ivs: &[Block], mut data: InOut<'_>) {
        let size = data.len() / ivs.len().max(1);
        for (i, iv) in ivs.iter().enumerate() {
            let mut iv = *iv;
            self.cbc_decrypt(&mut iv, data.slice(i * size, (i + 1) * size));
        }
    }

    /// XORs the keystream of the big-endian 128-bit `counter` (wrapping at 2^128);
    /// `counter` advances by the number of blocks.
    fn ctr(&self, counter: &mut u128, data: InOut<'_>);

    /// XTS over whole blocks, one data unit per tweak.
    fn xts_encrypt(&self, tweaks: &[Block], data: InOut<'_>);
    /// XTS over whole blocks, one data unit per tweak.
    fn xts_decrypt(&self, tweaks: &[Block], data: InOut<'_>);
}

/// The kernels of `backend` for `key`, their expanded key in [`Secret`] memory. The
/// backend must have passed [`Backend::ensure_usable`] (the self-test calls this before
/// that, on purpose).
pub(crate) fn kernels(backend: Backend, key: &[u8]) -> Result<Box<dyn AesKernels>, Error> {
    // A wrong `SECTORCRYPT_AES_WIDTH` is an error on every backend.
    width::forced()?;
    kernels_unchecked(backend, key)
}

/// [`kernels`] without the check of `SECTORCRYPT_AES_WIDTH`: for the self-tests (AES's and
/// AES-GCM's, whose two-pass pairs build AES kernels; a wrong value is the caller's error,
/// not a failed backend).
pub(crate) fn kernels_unchecked(
    backend: Backend,
    key: &[u8],
) -> Result<Box<dyn AesKernels>, Error> {
    let kernels = build_kernels(backend, key);
    // The key schedule was built on the stack below, then moved into secret memory.
    secret::scrub_stack(SCRUB);
    kernels
}

/// Stack zeroed after a key is built: the frames of [`build_kernels`] and its callees (a
/// few schedules of up to 1 KiB, with room to spare).
const SCRUB: usize = 16 << 10;

#[inline(never)]
fn build_kernels(backend: Backend, key: &[u8]) -> Result<Box<dyn AesKernels>, Error> {
    let rk = expand_key(key)?;
    Ok(match backend {
        Backend::Soft => Box::new(Secret::new(soft::Keys::new(&rk))),
        #[cfg(target_arch = "x86_64")]
        Backend::Aesni => Box::new(Secret::new(x86::aesni::Keys::new(&rk, backend))),
        #[cfg(target_arch = "x86_64")]
        Backend::Vaes => Box::new(Secret::new(x86::vaes::Keys::new(&rk, backend))),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => Box::new(Secret::new(x86::avx512::Avx512Kernels::new(
            &rk,
            x86::avx512::current()?,
        ))),
        #[cfg(not(target_arch = "x86_64"))]
        other => return Err(other.check_cpu().unwrap_err()),
    })
}

/// A backend's kernels with their expanded key in secret memory: every call goes to the
/// backend's own kernels.
impl<K: AesKernels> AesKernels for Secret<K> {
    fn backend(&self) -> Backend {
        (**self).backend()
    }
    fn ecb_encrypt(&self, data: InOut<'_>) {
        (**self).ecb_encrypt(data)
    }
    fn ecb_decrypt(&self, data: InOut<'_>) {
        (**self).ecb_decrypt(data)
    }
    fn cbc_encrypt(&self, iv: &mut Block, data: InOut<'_>) {
        (**self).cbc_encrypt(iv, data)
    }
    fn cbc_decrypt(&self, iv: &mut Block, data: InOut<'_>) {
        (**self).cbc_decrypt(iv, data)
    }
    fn encrypt_block(&self, block: &mut Block) {
        (**self).encrypt_block(block)
    }
    fn cbc_encrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        (**self).cbc_encrypt_sectors(ivs, data)
    }
    fn cbc_decrypt_sectors(&self, ivs: &[Block], data: InOut<'_>) {
        (**self).cbc_decrypt_sectors(ivs, data)
    }
    fn ctr(&self, counter: &mut u128, data: InOut<'_>) {
        (**self).ctr(counter, data)
    }
    fn xts_encrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        (**self).xts_encrypt(tweaks, data)
    }
    fn xts_decrypt(&self, tweaks: &[Block], data: InOut<'_>) {
        (**self).xts_decrypt(tweaks, data)
    }
}

/// Multiplies an XTS tweak by alpha (x) in GF(2^128) with the IEEE 1619 little-endian byte
/// order, without branches: the carry out of bit 127 selects the reduction 0x87
/// (x^128 = x^7 + x^2 + x + 1) through a mask.
#[inline(always)]
pub(crate) fn xts_mul_alpha(t: u128) -> u128 {
    let carry = (t >> 127) as u64;
    (t << 1) ^ (0x87 & (0u64.wrapping_sub(carry) as u128))
}

/// The known-answer self-test run once per backend before first use: FIPS-197 appendix C
/// for each key size, then every kernel against the soft backend on 37 blocks (no multiple
/// of any parallel width) in and out of place.
pub(crate) fn self_test(backend: Backend) -> bool {
    self_test_inner(backend).unwrap_or(false)
}

fn self_test_inner(backend: Backend) -> Result<bool, Error> {
    // FIPS-197 appendix C.1-C.3: key 00 01 02 ..., plaintext 00 11 22 ... ff.
    let key: Vec<u8> = (0u8..32).collect();
    let pt: Block = core::array::from_fn(|i| (i as u8) * 0x11);
    let expected: [(usize, &str); 3] = [
        (16, "69c4e0d86a7b0430d8cdb78070b4c55a"),
        (24, "dda97ca4864cdfe06eaf70a0ec0d7191"),
        (32, "8ea2b7ca516745bfeafc49904b496089"),
    ];
    for (len, hex_ct) in expected {
        for k in self_test_kernels(backend, &key[..len])? {
            let mut b = pt;
            k.ecb_encrypt(InOut::InPlace(&mut b));
            if b.iter().zip(hex_bytes(hex_ct)).any(|(x, y)| *x != y) {
                return Ok(false);
            }
            k.ecb_decrypt(InOut::InPlace(&mut b));
            if b != pt {
                return Ok(false);
            }
        }
    }
    if backend == Backend::Soft {
        return Ok(true);
    }
    let reference = kernels_unchecked(Backend::Soft, &key)?;
    let all_tested = self_test_kernels(backend, &key)?;
    let input: Vec<u8> = (0..37 * 16).map(|i| (i * 7 + 3) as u8).collect();
    let ivs: Vec<Block> = (0..37u8).map(|i| [i; 16]).collect();
    type Run<'a> = dyn Fn(&dyn AesKernels, InOut<'_>) + 'a;
    let runs: [&Run<'_>; 8] = [
        &|k, d| k.ecb_encrypt(d),
        &|k, d| k.ecb_decrypt(d),
        &|k, d| k.cbc_encrypt(&mut [9; 16], d),
        &|k, d| k.cbc_decrypt(&mut [9; 16], d),
        &|k, d| k.ctr(&mut (u128::MAX - 5), d),
        &|k, d| k.xts_encrypt(&ivs[..1], d),
        &|k, d| k.xts_decrypt(&ivs[..1], d),
        &|k, d| k.cbc_encrypt_sectors(&ivs, d),
    ];
    for (run, tested) in runs
        .iter()
        .flat_map(|r| all_tested.iter().map(move |t| (r, t)))
    {
        let mut want = vec![0u8; input.len()];
        run(reference.as_ref(), InOut::split(&input, &mut want));
        let mut got = vec![0u8; input.len()];
        run(tested.as_ref(), InOut::split(&input, &mut got));
        let mut in_place = input.clone();
        run(tested.as_ref(), InOut::InPlace(&mut in_place));
        if got != want || in_place != want {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The kernels the self-test checks for `backend`: those of each width on the avx512
/// backend (whatever width the process chose, or `SECTORCRYPT_AES_WIDTH` forces, each was
/// tested), the backend's one set otherwise.
fn self_test_kernels(backend: Backend, key: &[u8]) -> Result<Vec<Box<dyn AesKernels>>, Error> {
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512 {
        let rk = expand_key(key)?;
        let all = width::Width::ALL.map(|w| {
            let k = x86::avx512::Avx512Kernels::new(&rk, width::Widths::all(w));
            Box::new(Secret::new(k)) as Box<dyn AesKernels>
        });
        drop(rk);
        secret::scrub_stack(SCRUB);
        return Ok(all.into());
    }
    Ok(vec![kernels_unchecked(backend, key)?])
}

fn hex_bytes(s: &str) -> impl Iterator<Item = u8> + '_ {
    (0..s.len())
        .step_by(2)
        .map(move |i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
}
