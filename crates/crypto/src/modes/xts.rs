//! XTS-AES (IEEE 1619-2007) over one data unit of any length >= 16 bytes.

use super::{split, AesKey, Direction};
use crate::aes_core::xts_mul_alpha;
use crate::block::{Block, BLOCK};
use crate::buf::InOut;
use crate::error::{InputError, KeyError};
use crate::{Backend, Error};
use subtle::ConstantTimeEq;

/// The largest data unit IEEE 1619-2007 section 5.1 allows: 2^20 blocks (16 MiB).
const MAX_UNIT: usize = BLOCK << 20;

/// XTS-AES-128/192/256 with a 32-, 48- or 64-byte key (Key1 || Key2).
///
/// Whole-block data units go straight to the backend's fused kernel; a unit with a partial
/// last block takes a separate, simpler path for ciphertext stealing (IEEE 1619-2007
/// sections 5.3.2 and 5.4.2).
#[derive(Debug)]
pub struct Xts {
    pub(crate) k1: AesKey,
    pub(crate) k2: AesKey,
}

impl Xts {
    /// A key on the selected backend. Refuses Key1 == Key2 (IEEE 1619-2007 section 5.1
    /// requires independent keys; OpenSSL and Linux refuse them too).
    pub fn new(key: &[u8]) -> Result<Xts, Error> {
        Xts::build(key, None, false)
    }

    /// A key on a named backend (tests and benchmarks). Refuses Key1 == Key2.
    pub fn with_backend(key: &[u8], backend: Backend) -> Result<Xts, Error> {
        Xts::build(key, Some(backend), false)
    }

    /// Like [`Xts::with_backend`] but accepts Key1 == Key2 (`hazmat-testing` feature). It
    /// exists only to reproduce IEEE 1619-2007 vector 1, which uses equal halves; never use
    /// it for data.
    #[cfg(feature = "hazmat-testing")]
    pub fn with_backend_allowing_equal_halves(key: &[u8], backend: Backend) -> Result<Xts, Error> {
        Xts::build(key, Some(backend), true)
    }

    fn build(key: &[u8], backend: Option<Backend>, allow_equal: bool) -> Result<Xts, Error> {
        if !matches!(key.len(), 32 | 48 | 64) {
            return Err(Error::Key(KeyError::Length {
                what: "aes-xts",
                got: key.len(),
                expected: "32, 48 or 64 bytes (two aes keys)",
            }));
        }
        let (a, b) = key.split_at(key.len() / 2);
        if !allow_equal && bool::from(a.ct_eq(b)) {
            return Err(Error::Key(KeyError::XtsEqualHalves));
        }
        Ok(Xts {
            k1: AesKey::new(a, backend)?,
            k2: AesKey::new(b, backend)?,
        })
    }

    fn run(&self, tweak: &[u8; 16], data: InOut<'_>, dir: Direction) -> Result<(), Error> {
        if data.len() < BLOCK {
            return Err(Error::Input(InputError::Length {
                got: data.len(),
                why: "an xts data unit needs at least 16 bytes",
            }));
        }
        if data.len() > MAX_UNIT {
            return Err(Error::Input(InputError::Length {
                got: data.len(),
                why: "an xts data unit holds at most 2^20 blocks (ieee 1619-2007 section 5.1)",
            }));
        }
        let mut t: Block = *tweak;
        self.k2.k().ecb_encrypt(InOut::InPlace(&mut t));
        self.unit(t, data, dir);
        Ok(())
    }

    /// One data unit with an already encrypted tweak `t`.
    pub(crate) fn unit(&self, t: Block, data: InOut<'_>, dir: Direction) {
        let k1 = self.k1.k();
        let partial = data.len() % BLOCK;
        if partial == 0 {
            match dir {
                Direction::Encrypt => k1.xts_encrypt(&[t], data),
                Direction::Decrypt => k1.xts_decrypt(&[t], data),
            }
            return;
        }
        // Slow path, ciphertext stealing: all blocks but the last full one go through the
        // kernel; the last full block and the partial one are done here.
        let full = data.len() / BLOCK; // >= 1
        let (body, mut tail) = data.split_at((full - 1) * BLOCK);
        match dir {
            Direction::Encrypt => k1.xts_encrypt(&[t], body),
            Direction::Decrypt => k1.xts_decrypt(&[t], body),
        }
        let mut tm1 = u128::from_le_bytes(t);
        for _ in 0..full - 1 {
            tm1 = xts_mul_alpha(tm1);
        }
        let tm = xts_mul_alpha(tm1);
        let (first_tweak, second_tweak) = match dir {
            Direction::Encrypt => (tm1, tm),
            Direction::Decrypt => (tm, tm1),
        };
        let one_block = |tweak: u128, block: &mut Block| match dir {
            Direction::Encrypt => k1.xts_encrypt(&[tweak.to_le_bytes()], InOut::InPlace(block)),
            Direction::Decrypt => k1.xts_decrypt(&[tweak.to_le_bytes()], InOut::InPlace(block)),
        };
        let mut buf = [0u8; 2 * BLOCK];
        tail.load(0, &mut buf[..BLOCK + partial]);
        let mut cc: Block = buf[..BLOCK].try_into().unwrap_or_default();
        one_block(first_tweak, &mut cc);
        // The partial output block is the head of cc; the stolen tail of cc pads the partial
        // input block into a full one.
        let mut pp: Block = cc;
        pp[..partial].copy_from_slice(&buf[BLOCK..BLOCK + partial]);
        one_block(second_tweak, &mut pp);
        buf[..BLOCK].copy_from_slice(&pp);
        buf[BLOCK..BLOCK + partial].copy_from_slice(&cc[..partial]);
        tail.store(0, &buf[..BLOCK + partial]);
    }

    super::block::entry_points!(tweak: &[u8; 16]);

    /// The backend this key runs on.
    pub fn backend(&self) -> Backend {
        self.k1.backend()
    }
}
