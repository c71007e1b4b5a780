//! AES-GCM (NIST SP 800-38D): authenticated encryption with associated data.
//!
//! - Keys of 16, 24 or 32 bytes; IVs of any length from 1 byte (12 bytes is the fast and
//!   recommended case, `J0 = IV || 0^31 || 1`; other lengths use `J0 = GHASH(IV || pad ||
//!   len)`); associated data (AAD) of any length.
//! - Tags of 16 bytes ([`Gcm::seal`] returns the full tag; a prefix of 12 to 15 bytes may be
//!   kept and is accepted by [`Gcm::open`]). 8- and 4-byte tags only through the explicitly
//!   named [`Gcm::seal_short_tag`] / [`Gcm::open_short_tag`], because SP 800-38D Appendix C
//!   bounds how much data one key may protect with them.
//! - Per message: plaintext at most 2^39 - 256 bits ([`GCM_MAX_PLAINTEXT`] bytes), AAD and
//!   IV at most 2^64 - 1 bits.
//!
//! # Counter
//! GCM increments only the low 32 bits of the counter block (`inc32`, mod 2^32). The bulk
//! keystream comes from the backend's 128-bit CTR kernel, so every call is split where the
//! low 32 bits would wrap, and the counter restarts at `upper 96 bits || 0`. (With a 12-byte
//! IV the low word starts at 2 and a message cannot reach the wrap; other IV lengths give an
//! arbitrary starting word.)
//!
//! # Keys: pairs of AES and GHASH
//! A key is a [`pair::Pair`] of an AES key and its GHASH key. The vaes and avx512 backends
//! have a stitched kernel each ([`x86::ymm`], [`x86::zmm`]: AES rounds and carry-less
//! multiplications interleaved in one loop), and their pair variants hold the exact key
//! types their kernel takes, so a kernel cannot be given keys of another width. Every other
//! combination (the soft and aesni backends with their GHASH, and, for the tests, any AES
//! backend with any GHASH backend: `Gcm::with_backend_pair`) is the two-pass variant,
//! which has no stitched kernel. This module depends on the AES core and on GHASH; neither
//! knows GCM.
//!
//! # Data path
//! A pair with a stitched kernel takes the whole groups of each streamed piece; it also
//! encrypts J0 (E_K(J0), needed only for the tag) alongside the first group it sees,
//! otherwise the stream's `tag` does. The rest (the two-pass variant, tails) is processed in
//! chunks of [`CHUNK`] bytes that stay in L1 (`stream.rs`): encryption runs the CTR kernel
//! over a chunk, then GHASH over that chunk's ciphertext; decryption hashes the chunk's
//! ciphertext first, then decrypts it.
//!
//! One-shot seal and open first offer the whole message to the stitched kernel: where it
//! takes it (ymm: whole 256-byte groups, e.g. every storage sector; zmm: any length), one
//! kernel call does the message, the length block and the tag, and no per-message state is
//! built. Otherwise they take the streaming path above.
//!
//! [`Gcm::new`] takes a backend chosen for GCM apart from the other AES modes: where more
//! than one passes the GCM self-test, the fastest on seals of 4 KiB, measured once per
//! process (`backend::measure`); `SECTORCRYPT_BACKEND` overrides it as everywhere.
//!
//! Before a backend's first GCM key, a self-test checks its pair (a known answer, then
//! messages of 0 to 1605 bytes against the soft backend, in place, out of place, opened):
//! the AES and GHASH self-tests check their kernels one by one, but a stitched kernel is
//! code of its own. A backend that fails is refused.
//!
//! # Releasing nothing unauthenticated
//! [`Gcm::open`] and [`Gcm::open_to`] decrypt and authenticate in one pass and, when the
//! tag is wrong, zero the whole output (the buffer, or `dst`) before returning
//! [`Error::AuthenticationFailed`]: the caller never sees unauthenticated plaintext. Tags
//! are compared in constant time. [`GcmDecryptor`] necessarily releases plaintext before
//! [`GcmDecryptor::finish`]; see its documentation.

mod hash_key;
pub(crate) mod pair;
mod stream;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use crate::aes_core::Backend;
use crate::backend::{self, Algorithm, Workload};
use crate::block::BLOCK;
use crate::buf::{split, Direction, InOut};
use crate::error::InputError;
use crate::ghash::GhashBackend;
use crate::workload::{key, on_sectors, sectors};
use crate::{Error, Measurement};
use pair::Pair;
use stream::{hash_padded, Stream};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

#[cfg(all(feature = "hazmat-testing", target_arch = "x86_64"))]
pub(crate) use x86::probe::probe as probe_units;

/// The longest plaintext of one GCM message in bytes: 2^39 - 256 bits (SP 800-38D 5.2.1.1).
pub const GCM_MAX_PLAINTEXT: u64 = (1 << 36) - 32;
/// The longest AAD (and IV) of one message in bytes: 2^64 - 1 bits, rounded down to bytes.
const MAX_AAD: u64 = (1 << 61) - 1;
/// Bytes encrypted then hashed (or hashed then decrypted) per step of the bulk path.
pub(crate) const CHUNK: usize = 4096;

/// The work [`Gcm::selection`] times: seals of 4 KiB messages (sectors), which the
/// stitched kernels take whole.
const WORKLOAD: Workload<Backend> = Workload {
    usable: pair::ensure_usable,
    ..on_sectors(
        Algorithm::AesGcm,
        "aes-256-gcm, 4 messages of 4096 bytes",
        |b| {
            let g = Gcm::with_backend(&key(32), b)?;
            Ok(sectors(g, |g, i, m| drop(g.seal(&[i as u8; 12], &[], m))))
        },
    )
};

/// An AES-GCM key on one backend (AES kernels and the matching GHASH).
///
/// ```
/// # use sectorcrypt_crypto::aes::Gcm;
/// let gcm = Gcm::new(&[7u8; 32])?;
/// let iv = [1u8; 12];
/// let mut buf = *b"attack at dawn";
/// let tag = gcm.seal(&iv, b"header", &mut buf)?;
/// gcm.open(&iv, b"header", &mut buf, &tag)?;
/// assert_eq!(&buf, b"attack at dawn");
/// # Ok::<(), sectorcrypt_crypto::Error>(())
/// ```
pub struct Gcm {
    pair: Pair,
}

impl std::fmt::Debug for Gcm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gcm")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Gcm {
    /// A 16-, 24- or 32-byte key on the selected backend.
    pub fn new(key: &[u8]) -> Result<Gcm, Error> {
        Gcm::build(key, backend::selected_for(&WORKLOAD)?.0, None)
    }

    /// The backend [`Gcm::new`] takes, chosen apart from the other AES modes' (the pairs of
    /// AES and GHASH kernels trade differently between widths), with the measurement that
    /// chose it: `SECTORCRYPT_BACKEND` when set (no measurement), otherwise the fastest on
    /// seals of 4 KiB of the backends that pass the GCM self-test, measured once per process
    /// when more than one does.
    pub fn selection() -> Result<(Backend, Option<Measurement>), Error> {
        backend::selected_for(&WORKLOAD).map(|(b, m)| (b, m.cloned()))
    }

    /// A key on a named backend: `soft` uses the soft GHASH, `aesni` PCLMULQDQ, `vaes`
    /// VPCLMULQDQ on ymm, `avx512` VPCLMULQDQ on zmm.
    pub fn with_backend(key: &[u8], backend: Backend) -> Result<Gcm, Error> {
        Gcm::build(key, backend, None)
    }

    /// A key whose AES runs on `aes` and whose GHASH runs on `ghash`, for the tests of
    /// every AES x GHASH pair (`hazmat-testing` feature). A stitched kernel runs only for
    /// the GHASH backend that matches `aes`; any other pair runs CTR and GHASH as two
    /// passes per chunk.
    #[cfg(feature = "hazmat-testing")]
    pub fn with_backend_pair(key: &[u8], aes: Backend, ghash: GhashBackend) -> Result<Gcm, Error> {
        Gcm::build(key, aes, Some(ghash))
    }

    /// The keys on `aes` and `ghash` (or the GHASH backend that matches `aes`), after the
    /// GCM self-test of `aes` and the GHASH self-test.
    fn build(key: &[u8], aes: Backend, ghash: Option<GhashBackend>) -> Result<Gcm, Error> {
        pair::ensure_usable(aes)?;
        Gcm::from_pair(Pair::new(key, aes, ghash)?)
    }

    /// A key over `pair` (the GCM self-test builds its keys with this, before its backend
    /// is known to pass).
    fn from_pair(pair: Pair) -> Result<Gcm, Error> {
        Ok(Gcm { pair })
    }

    /// The backend this key runs on (AES and GHASH).
    pub fn backend(&self) -> Backend {
        self.pair.aes().backend()
    }

    /// Encrypts `buf` in place and returns the 16-byte tag.
    pub fn seal(&self, iv: &[u8], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        self.seal_inout(iv, aad, InOut::InPlace(buf))
    }

    /// Encrypts `src` into `dst` (same length) and returns the 16-byte tag.
    pub fn seal_to(
        &self,
        iv: &[u8],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<[u8; 16], Error> {
        self.seal_inout(iv, aad, split(src, dst)?)
    }

    /// Decrypts `buf` in place if `tag` (12 to 16 bytes, a prefix of the sealed tag) is
    /// right. On [`Error::AuthenticationFailed`] the buffer is zeroed.
    pub fn open(&self, iv: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        self.open_inout(iv, aad, InOut::InPlace(buf), check_tag_len(tag, false)?)
    }

    /// Decrypts `src` into `dst` (same length) if `tag` (12 to 16 bytes) is right. On
    /// [`Error::AuthenticationFailed`] `dst` is zeroed (decryption and authentication run
    /// in one pass; nothing is released before the tag is checked); on other errors it is
    /// untouched.
    pub fn open_to(
        &self,
        iv: &[u8],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
        tag: &[u8],
    ) -> Result<(), Error> {
        let tag = check_tag_len(tag, false)?;
        self.open_inout(iv, aad, split(src, dst)?, tag)
    }

    /// Encrypts `buf` in place and writes a **short** tag of 8 or 4 bytes to `tag`.
    ///
    /// Short tags are weak: a forger succeeds with probability about 2^-t per try, and
    /// SP 800-38D Appendix C limits both the message length and the number of failed
    /// verifications per key for them. Use only where a protocol requires it.
    pub fn seal_short_tag(
        &self,
        iv: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        check_tag_len(tag, true)?;
        let full = self.seal(iv, aad, buf)?;
        tag.copy_from_slice(&full[..tag.len()]);
        Ok(())
    }

    /// Decrypts `buf` in place if the **short** tag (8 or 4 bytes) is right; see
    /// [`Gcm::seal_short_tag`]. On [`Error::AuthenticationFailed`] the buffer is zeroed.
    pub fn open_short_tag(
        &self,
        iv: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), Error> {
        self.open_inout(iv, aad, InOut::InPlace(buf), check_tag_len(tag, true)?)
    }

    /// A streaming encryptor for one message with this IV and AAD.
    pub fn encryptor(&self, iv: &[u8], aad: &[u8]) -> Result<GcmEncryptor<'_>, Error> {
        Ok(GcmEncryptor {
            gcm: self,
            st: self.start(iv, aad)?,
        })
    }

    /// A streaming decryptor for one message with this IV and AAD. Its output is
    /// unauthenticated until [`GcmDecryptor::finish`] succeeds.
    pub fn decryptor(&self, iv: &[u8], aad: &[u8]) -> Result<GcmDecryptor<'_>, Error> {
        Ok(GcmDecryptor {
            gcm: self,
            st: self.start(iv, aad)?,
        })
    }

    #[inline(always)]
    fn seal_inout(&self, iv: &[u8], aad: &[u8], mut data: InOut<'_>) -> Result<[u8; 16], Error> {
        check_message_len(data.len() as u64)?;
        let (j0, y) = self.j0_and_aad(iv, aad)?;
        if let Some(tag) = self.one_pass(j0, y, aad.len(), data.reborrow(), Direction::Encrypt) {
            return Ok(tag);
        }
        let mut st = Stream::new(j0, y, aad.len());
        st.update(self, data, Direction::Encrypt)?;
        Ok(st.tag(self))
    }

    /// The whole message in one call of the pair's stitched kernel, where it takes it
    /// (`Pair::message`): no per-message state, the length block hashed and the
    /// tag formed in the kernel. The full tag, or `None` (nothing done) to take the
    /// streaming path.
    #[inline(always)]
    fn one_pass(
        &self,
        j0: u128,
        y: u128,
        aad_len: usize,
        data: InOut<'_>,
        dir: Direction,
    ) -> Option<[u8; 16]> {
        let lens = ((aad_len as u128 * 8) << 64) | (data.len() as u128 * 8);
        let mut block = j0.to_be_bytes();
        let decrypt = dir == Direction::Decrypt;
        // On success the kernel has replaced J0 with the tag (public); the GHASH states it
        // worked with are wiped there.
        self.pair
            .message(y, data, decrypt, &mut block, lens)
            .then_some(block)
    }

    /// Decrypts and hashes in one pass (the backend's stitched loop), then checks the tag;
    /// on a wrong tag the output is wiped before returning, so nothing unauthenticated is
    /// ever released to the caller.
    #[inline(always)]
    fn open_inout(
        &self,
        iv: &[u8],
        aad: &[u8],
        mut data: InOut<'_>,
        tag: &[u8],
    ) -> Result<(), Error> {
        check_message_len(data.len() as u64)?;
        let (j0, y) = self.j0_and_aad(iv, aad)?;
        let full = match self.one_pass(j0, y, aad.len(), data.reborrow(), Direction::Decrypt) {
            Some(full) => full,
            None => {
                let mut st = Stream::new(j0, y, aad.len());
                st.update(self, data.reborrow(), Direction::Decrypt)?;
                st.tag(self)
            }
        };
        if bool::from(full[..tag.len()].ct_eq(tag)) {
            Ok(())
        } else {
            match data {
                InOut::InPlace(buf) => buf.zeroize(),
                InOut::Split { dst, .. } => dst.zeroize(),
            }
            Err(Error::AuthenticationFailed)
        }
    }

    /// The streaming state of a message: J0, the first counter and the hash of the AAD.
    fn start(&self, iv: &[u8], aad: &[u8]) -> Result<Stream, Error> {
        let (j0, y) = self.j0_and_aad(iv, aad)?;
        Ok(Stream::new(j0, y, aad.len()))
    }

    /// J0 (from the IV) and the GHASH state after the AAD.
    #[inline(always)]
    fn j0_and_aad(&self, iv: &[u8], aad: &[u8]) -> Result<(u128, u128), Error> {
        if iv.is_empty() || iv.len() as u64 > MAX_AAD {
            return Err(Error::Input(InputError::IvLength {
                got: iv.len(),
                expected: "1 to 2^61 - 1 bytes",
            }));
        }
        if aad.len() as u64 > MAX_AAD {
            return Err(Error::Input(InputError::TooLong {
                what: "gcm aad",
                limit: MAX_AAD,
            }));
        }
        let j0 = if iv.len() == 12 {
            let mut b = [0u8; BLOCK];
            b[..12].copy_from_slice(iv);
            b[15] = 1;
            u128::from_be_bytes(b)
        } else {
            let mut y = 0u128;
            hash_padded(self, &mut y, iv);
            let lens = (iv.len() as u128) * 8;
            self.pair.ghash(&mut y, &lens.to_be_bytes());
            y
        };
        let mut y = 0u128;
        hash_padded(self, &mut y, aad);
        Ok((j0, y))
    }
}

/// Defines a streaming type over one message (the struct, a `Debug` showing the length so
/// far and nothing secret, `update` and `update_in_place` in direction `$dir`).
macro_rules! streaming {
    (
        $(#[$doc:meta])*
        $name:ident: $dir:ident, $verb:literal $input:literal, $note:literal
    ) => {
        $(#[$doc])*
        pub struct $name<'a> {
            gcm: &'a Gcm,
            st: Stream,
        }

        impl std::fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let len = self.st.len;
                f.debug_struct(stringify!($name))
                    .field("len", &len)
                    .finish_non_exhaustive()
            }
        }

        impl $name<'_> {
            #[doc = concat!($verb, " the next piece of ", $input, " `input` into `output` (same length).", $note)]
            pub fn update(&mut self, input: &[u8], output: &mut [u8]) -> Result<(), Error> {
                self.st.update(self.gcm, split(input, output)?, Direction::$dir)
            }

            #[doc = concat!($verb, " the next piece of ", $input, " in place.", $note)]
            pub fn update_in_place(&mut self, buf: &mut [u8]) -> Result<(), Error> {
                self.st.update(self.gcm, InOut::InPlace(buf), Direction::$dir)
            }
        }
    };
}

streaming! {
    /// Streaming AES-GCM encryption of one message: [`update`](Self::update) with pieces of
    /// any size, then [`finish`](Self::finish) for the tag. Keeps at most one partial block.
    GcmEncryptor: Encrypt, "Encrypts" "plaintext", ""
}

impl GcmEncryptor<'_> {
    /// Ends the message; the full 16-byte tag (a prefix of 12 to 15 bytes may be kept).
    pub fn finish(mut self) -> [u8; 16] {
        self.st.tag(self.gcm)
    }
}

streaming! {
    /// Streaming AES-GCM decryption of one message.
    ///
    /// **The output of [`update`](Self::update) is unauthenticated** until
    /// [`finish`](Self::finish) returns `Ok`: it may be forged or corrupted. Do not act on
    /// it, write it anywhere durable or show it before then, and discard it when `finish`
    /// fails. When that is impractical, use [`Gcm::open_to`], which checks first.
    GcmDecryptor: Decrypt, "Decrypts" "ciphertext",
    " Unauthenticated until [`finish`](Self::finish) succeeds."
}

impl GcmDecryptor<'_> {
    /// Ends the message and checks `tag` (12 to 16 bytes) in constant time.
    pub fn finish(self, tag: &[u8]) -> Result<(), Error> {
        self.verify(check_tag_len(tag, false)?)
    }

    /// Ends the message and checks a **short** tag (8 or 4 bytes); see
    /// [`Gcm::seal_short_tag`].
    pub fn finish_short_tag(self, tag: &[u8]) -> Result<(), Error> {
        self.verify(check_tag_len(tag, true)?)
    }

    fn verify(mut self, tag: &[u8]) -> Result<(), Error> {
        let full = self.st.tag(self.gcm);
        if bool::from(full[..tag.len()].ct_eq(tag)) {
            Ok(())
        } else {
            Err(Error::AuthenticationFailed)
        }
    }
}

const TOO_LONG: Error = Error::Input(InputError::TooLong {
    what: "gcm plaintext",
    limit: GCM_MAX_PLAINTEXT,
});

fn check_message_len(len: u64) -> Result<(), Error> {
    if len > GCM_MAX_PLAINTEXT {
        return Err(TOO_LONG);
    }
    Ok(())
}

/// `tag`, if its length is one this call accepts: 12 to 16 bytes, or with `short` 8 or 4.
fn check_tag_len(tag: &[u8], short: bool) -> Result<&[u8], Error> {
    match (short, tag.len()) {
        (false, 12..=16) | (true, 4 | 8) => Ok(tag),
        (false, got) => Err(Error::Input(InputError::TagLength {
            got,
            expected: "12 to 16 bytes",
        })),
        (true, got) => Err(Error::Input(InputError::TagLength {
            got,
            expected: "8 or 4 bytes (short tag)",
        })),
    }
}
