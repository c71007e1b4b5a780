//! The public, safe, checked types: [`Ecb`], [`Cbc`], [`Ctr`], [`Xts`], [`Gcm`] and the
//! dm-crypt style [`SectorCipher`]. Each checks lengths once, then makes one call into the
//! backend's whole buffer kernel; nothing here allocates on the data path.

mod block;
mod gcm;
mod sector;
mod xts;

pub use block::{Cbc, Ctr, Ecb};
pub use gcm::{Gcm, GcmDecryptor, GcmEncryptor, GCM_MAX_PLAINTEXT};
pub use sector::{CipherMode, CipherSpec, IvMode, SectorCipher, SectorLayout};
pub use xts::Xts;

use crate::aes::{self, AesKernels};
use crate::buf::InOut;
use crate::error::InputError;
use crate::{Backend, Error};

/// Which way a call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Encrypt,
    Decrypt,
}

/// An expanded AES key bound to a backend. Zeroized on drop (by the backend's key type);
/// its `Debug` shows the backend, never key material.
pub(crate) struct AesKey {
    kernels: Box<dyn AesKernels>,
}

impl AesKey {
    pub(crate) fn new(key: &[u8], backend: Option<Backend>) -> Result<AesKey, Error> {
        let backend = match backend {
            Some(b) => b,
            None => Backend::selected()?,
        };
        backend.ensure_usable()?;
        Ok(AesKey {
            kernels: aes::kernels(backend, key)?,
        })
    }

    pub(crate) fn k(&self) -> &dyn AesKernels {
        self.kernels.as_ref()
    }

    pub(crate) fn backend(&self) -> Backend {
        self.kernels.backend()
    }
}

impl std::fmt::Debug for AesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AesKey")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// Builds the `InOut` of an out-of-place call, refusing different lengths.
pub(crate) fn split<'a>(src: &'a [u8], dst: &'a mut [u8]) -> Result<InOut<'a>, Error> {
    if src.len() != dst.len() {
        return Err(Error::Input(InputError::LengthMismatch {
            src: src.len(),
            dst: dst.len(),
        }));
    }
    Ok(InOut::split(src, dst))
}

/// Refuses lengths that are not a whole number of blocks.
pub(crate) fn whole_blocks(len: usize) -> Result<(), Error> {
    if !len.is_multiple_of(aes::BLOCK) {
        return Err(Error::Input(InputError::Length {
            got: len,
            why: "must be a multiple of 16 bytes",
        }));
    }
    Ok(())
}
