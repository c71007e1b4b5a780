//! The public, safe, checked AES modes: [`Ecb`], [`Cbc`], [`Ctr`], [`Xts`] (GCM has a
//! module of its own, [`crate::gcm`]; the dm-crypt style sectors are [`crate::sector`]'s,
//! above this module and the cascade's ciphers). Each checks lengths once, then makes one
//! call into the backend's whole buffer kernel; nothing here allocates on the data path.

mod block;
mod xts;

pub(crate) use block::entry_points;
pub use block::{Cbc, Ctr, Ecb};
pub use xts::Xts;

use crate::aes_core::{self, AesKernels, Backend};
use crate::block::BLOCK;
pub(crate) use crate::buf::{split, Direction};
use crate::error::InputError;
use crate::Error;

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
            kernels: aes_core::kernels(backend, key)?,
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

/// Refuses lengths that are not a whole number of blocks.
pub(crate) fn whole_blocks(len: usize) -> Result<(), Error> {
    let why = "must be a multiple of 16 bytes";
    match len % BLOCK {
        0 => Ok(()),
        _ => Err(Error::Input(InputError::Length { got: len, why })),
    }
}
