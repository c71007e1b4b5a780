//! GHASH (NIST SP 800-38D section 6.4): the universal hash of GCM, with one implementation
//! per instruction set, chosen by its own enum ([`GhashBackend`]); GCM pairs each AES
//! backend with one of them ([`crate::gcm`]). This module knows nothing of AES.
//!
//! | GHASH backend | instructions | file |
//! |---|---|---|
//! | `soft`  | portable, constant-time integer-multiply carry-less product | `soft.rs` |
//! | `clmul` | PCLMULQDQ on xmm, 8 blocks per reduction | `clmul.rs` |
//! | `vpclmul` | VPCLMULQDQ on ymm (AVX2, no AVX-512), 16 blocks per reduction | `vpclmul.rs` |
//! | `vpclmul512` | VPCLMULQDQ on zmm (AVX-512), 32 blocks per reduction | `vpclmul512.rs` |
//!
//! # Representation (shared by all of them)
//! The hash state and each data block are handled as the big-endian `u128` of the 16 bytes.
//! GCM numbers polynomial coefficients from the first bit of the block, so in this integer
//! the coefficient of x^0 is the most significant bit ("reflected" order), and multiplying
//! by x is a right shift. A carry-less product of two reflected 128-bit values is the
//! reflected 256-bit product shifted right by one bit, i.e. it is off by a factor of x. The
//! key is therefore stored "twisted", as `H * x^-1` ([`soft::twist`]), which cancels that
//! factor without any per-block shift. The reduction modulo `x^128 + x^7 + x^2 + x + 1`
//! then folds the low 128 bits of the product (the high-degree coefficients) into the high
//! 128 bits using `x^128 = x^7 + x^2 + x + 1` (Intel's carry-less multiplication white
//! paper; the SIMD files fold 64 bits at a time with a carry-less multiplication by the
//! constant 0xC2 << 56, the soft file with shifts).
//!
//! # Aggregation
//! The SIMD backends precompute `H^1..H^N` and hash a group of n <= N blocks as
//! `(Y ^ X_1) H^n ^ X_2 H^(n-1) ^ ... ^ X_n H`, summing the unreduced 256-bit products and
//! reducing once per group (reduction is linear). The powers are stored highest first so a
//! group of n blocks uses the last n entries. (The stitched GCM kernel on ymm goes
//! further: `H^1..H^64`, one reduction per 64 blocks.)
//!
//! Every backend runs a differential self-test against the soft GHASH before its first use
//! and is refused when it fails.

use crate::backend::family;
use crate::block::Block;
#[cfg(feature = "hazmat-testing")]
use crate::error::InputError;
use crate::secret::Secret;
use crate::Error;

mod soft;

#[cfg(target_arch = "x86_64")]
pub(crate) mod clmul;
#[cfg(target_arch = "x86_64")]
pub(crate) mod vpclmul;
#[cfg(target_arch = "x86_64")]
pub(crate) mod vpclmul512;

family! {
    /// An implementation of GHASH.
    pub enum GhashBackend: Ghash, self_test: self_test {
        /// VPCLMULQDQ on zmm registers (AVX-512F/BW/VL).
        Vpclmul512 = "vpclmul512", x86 [
            Pclmulqdq, Avx2, Vpclmulqdq, OsZmm, Avx512f, Avx512bw, Avx512vl
        ],
        /// VPCLMULQDQ on ymm registers (AVX2, no AVX-512). (VPCLMULQDQ implies PCLMULQDQ
        /// in the compiler's feature model; both are checked.)
        Vpclmul = "vpclmul", x86 [Pclmulqdq, Avx2, Vpclmulqdq, OsYmm],
        /// PCLMULQDQ on xmm registers.
        Clmul = "clmul", x86 [Pclmulqdq, Sse41],
        /// Portable, constant-time, no `unsafe`: the reference.
        Soft = "soft", portable,
    }
}

/// An expanded GHASH key for one backend, in [`Secret`] memory. Zeroized on drop by the
/// backend key types.
#[derive(Clone)]
pub(crate) enum Key {
    Soft(Secret<soft::Key>),
    #[cfg(target_arch = "x86_64")]
    Clmul(Secret<clmul::Key>),
    #[cfg(target_arch = "x86_64")]
    Vpclmul(Secret<vpclmul::Key>),
    #[cfg(target_arch = "x86_64")]
    Vpclmul512(Secret<vpclmul512::Key>),
}

impl Key {
    /// The GHASH key `h` (= E_K(0^128)) for `backend`, which must be usable (checked here:
    /// the CPU, then the self-test, once).
    pub(crate) fn new(h: &Block, backend: GhashBackend) -> Result<Key, Error> {
        backend.ensure_usable()?;
        Ok(Key::new_unchecked(h, backend))
    }

    fn new_unchecked(h: &Block, backend: GhashBackend) -> Key {
        let h = u128::from_be_bytes(*h);
        match backend {
            #[cfg(target_arch = "x86_64")]
            GhashBackend::Clmul => Key::Clmul(Secret::new(clmul::Key::new(&powers(h)))),
            #[cfg(target_arch = "x86_64")]
            GhashBackend::Vpclmul => Key::Vpclmul(Secret::new(vpclmul::Key::new(&powers(h)))),
            #[cfg(target_arch = "x86_64")]
            GhashBackend::Vpclmul512 => {
                Key::Vpclmul512(Secret::new(vpclmul512::Key::new(&powers(h))))
            }
            // Not reached: `check_cpu` refuses these backends on other architectures.
            #[cfg(not(target_arch = "x86_64"))]
            _ => Key::Soft(Secret::new(soft::Key::new(h))),
            GhashBackend::Soft => Key::Soft(Secret::new(soft::Key::new(h))),
        }
    }

    /// Folds `blocks` (a whole number of 16-byte blocks) into the state `y`.
    #[inline]
    pub(crate) fn update(&self, y: &mut u128, blocks: &[u8]) {
        debug_assert_eq!(blocks.len() % 16, 0);
        if blocks.is_empty() {
            // Common for GCM (no AAD): skip the call into the backend.
            return;
        }
        match self {
            Key::Soft(k) => k.update(y, blocks),
            #[cfg(target_arch = "x86_64")]
            Key::Clmul(k) => k.update(y, blocks),
            #[cfg(target_arch = "x86_64")]
            Key::Vpclmul(k) => k.update(y, blocks),
            #[cfg(target_arch = "x86_64")]
            Key::Vpclmul512(k) => k.update(y, blocks),
        }
    }

    /// The backend of this key.
    pub(crate) fn backend(&self) -> GhashBackend {
        match self {
            Key::Soft(_) => GhashBackend::Soft,
            #[cfg(target_arch = "x86_64")]
            Key::Clmul(_) => GhashBackend::Clmul,
            #[cfg(target_arch = "x86_64")]
            Key::Vpclmul(_) => GhashBackend::Vpclmul,
            #[cfg(target_arch = "x86_64")]
            Key::Vpclmul512(_) => GhashBackend::Vpclmul512,
        }
    }
}

/// The typed keys of the x86 implementations, for GCM's pairs of matching AES and GHASH
/// keys: each built after the checks of its backend.
#[cfg(target_arch = "x86_64")]
macro_rules! checked_keys {
    ($($module:ident: $backend:expr),*) => {$(
        impl $module::Key {
            /// The key for `h` (= E_K(0^128)), after the CPU check and self-test of its
            /// backend.
            pub(crate) fn checked(h: &Block) -> Result<Secret<Self>, Error> {
                $backend.ensure_usable()?;
                Ok(Secret::new(Self::new(&powers(u128::from_be_bytes(*h)))))
            }
        }
    )*};
}
#[cfg(target_arch = "x86_64")]
checked_keys!(vpclmul: GhashBackend::Vpclmul, vpclmul512: GhashBackend::Vpclmul512);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GhashKey")
            .field("impl", &self.backend().name())
            .finish_non_exhaustive()
    }
}

/// `[H^N, H^(N-1), ..., H^1]`, reflected and twisted.
pub(crate) fn powers<const N: usize>(h: u128) -> [u128; N] {
    let ht = soft::twist(h);
    let mut out = [0u128; N];
    let mut p = h;
    for k in 0..N {
        out[N - 1 - k] = soft::twist(p);
        p = soft::mul(p, ht);
    }
    out
}

/// A known answer (McGrew-Viega test case 2, one block and the length block), then every
/// group size 0..=40 blocks (in one call and block by block) against the soft GHASH.
fn self_test(backend: GhashBackend) -> bool {
    let h: Block = core::array::from_fn(|i| (i as u8).wrapping_mul(0x3b) ^ 0xa5);
    let data: Vec<u8> = (0..40 * 16).map(|i| (i * 31 + 7) as u8).collect();
    let reference = Key::Soft(Secret::new(soft::Key::new(u128::from_be_bytes(h))));
    let tested = Key::new_unchecked(&h, backend);
    // McGrew-Viega test case 2: GHASH(H, {}, C) with H = 66e94bd4ef8a2c3b884cfa59ca342b2e,
    // C = 0388dace60b6a392f328c2b971b2fe78: the state after C and the length block.
    let h2: Block = 0x66e9_4bd4_ef8a_2c3b_884c_fa59_ca34_2b2e_u128.to_be_bytes();
    let mut kat = [0u8; 32];
    kat[..16].copy_from_slice(&0x0388_dace_60b6_a392_f328_c2b9_71b2_fe78_u128.to_be_bytes());
    kat[31] = 0x80;
    let mut y = 0;
    Key::new_unchecked(&h2, backend).update(&mut y, &kat);
    if y != KAT_CASE2 {
        return false;
    }
    for n in 0..=40 {
        let (mut want, mut got, mut one_by_one) = (0x1234_u128, 0x1234_u128, 0x1234_u128);
        reference.update(&mut want, &data[..16 * n]);
        tested.update(&mut got, &data[..16 * n]);
        for b in data[..16 * n].chunks_exact(16) {
            tested.update(&mut one_by_one, b);
        }
        if got != want || one_by_one != want {
            return false;
        }
    }
    true
}

/// GHASH(H, {}, C) of McGrew-Viega test case 2: its tag ab6e47d4... XOR E_K(Y0), which is
/// test case 1's tag 58e2fcce... (same key and IV, no data).
const KAT_CASE2: u128 =
    0xab6e_47d4_2cec_13bd_f53a_67b2_1257_bddf ^ 0x58e2_fcce_fa7e_3061_367f_1d57_a4e7_455a;

/// GHASH on a named backend, for the tests and benchmarks of the GHASH kernels themselves
/// (`hazmat-testing` feature; GCM is the supported use).
#[cfg(feature = "hazmat-testing")]
#[derive(Debug, Clone)]
pub struct Ghash {
    key: Key,
}

#[cfg(feature = "hazmat-testing")]
impl Ghash {
    /// A GHASH key `h` (normally E_K(0^128)) on `backend`.
    pub fn with_backend(h: &[u8; 16], backend: GhashBackend) -> Result<Ghash, Error> {
        Ok(Ghash {
            key: Key::new(h, backend)?,
        })
    }

    /// The backend it runs on.
    pub fn backend(&self) -> GhashBackend {
        self.key.backend()
    }

    /// Continues the hash state `y` over `data`, which must be whole 16-byte blocks.
    pub fn update(&self, y: &[u8; 16], data: &[u8]) -> Result<[u8; 16], Error> {
        if !data.len().is_multiple_of(16) {
            return Err(Error::Input(InputError::Length {
                got: data.len(),
                why: "ghash takes whole 16-byte blocks",
            }));
        }
        let mut s = u128::from_be_bytes(*y);
        self.key.update(&mut s, data);
        Ok(s.to_be_bytes())
    }
}
