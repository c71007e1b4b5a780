//! `sectorcrypt.SectorCipher`: dm-crypt's sector encryption (`aes-xts-plain64`,
//! `aes-cbc-essiv:sha256`, ...) in place over any writable buffer, on the crypto core's
//! fastest backend, with the GIL released while it runs.
//!
//! The sector size is an argument of each call; the core's ciphers fix it when built, so
//! one is built per (sector size, IV unit) on first use and kept. The key lives in secret
//! memory for that and is wiped with the object.

use crate::buffer::BytesMut;
use crate::errors::{self, InvalidArgument};
use crate::secrets;
use pyo3::prelude::*;
use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher, SectorLayout};
use sectorcrypt_crypto::secret::SecretBytes;
use std::sync::{Arc, Mutex};

/// A cipher built for a sector size and an IV unit (`iv_large_sectors`).
type Built = ((usize, bool), Arc<SectorCipher>);

/// A dm-crypt cipher under one key.
#[derive(Debug)]
#[pyclass(module = "sectorcrypt", name = "SectorCipher", frozen)]
pub struct PySectorCipher {
    spec: CipherSpec,
    key: SecretBytes,
    /// Ciphers built so far, by sector size and IV unit.
    built: Mutex<Vec<Built>>,
}

impl PySectorCipher {
    fn cipher(&self, sector_size: usize, large_iv: bool) -> PyResult<Arc<SectorCipher>> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = built.iter().find(|(k, _)| *k == (sector_size, large_iv)) {
            return Ok(Arc::clone(c));
        }
        let layout = SectorLayout::new(sector_size, large_iv).map_err(errors::crypto)?;
        let c = Arc::new(SectorCipher::new(self.spec, &self.key, layout).map_err(errors::crypto)?);
        built.push(((sector_size, large_iv), Arc::clone(&c)));
        Ok(c)
    }

    /// Runs `encrypt` or `decrypt` over `buf` in place.
    fn run(
        &self,
        py: Python<'_>,
        encrypt: bool,
        buf: &Bound<'_, PyAny>,
        first_sector: u64,
        sector_size: usize,
        iv_large_sectors: bool,
    ) -> PyResult<()> {
        let cipher = self.cipher(sector_size, iv_large_sectors)?;
        let step = cipher.layout().iv_step();
        let first_iv = first_sector.checked_mul(step).ok_or_else(|| {
            InvalidArgument::new_err(format!(
                "sector {first_sector} of {sector_size} bytes is beyond 2^64 IV units"
            ))
        })?;
        let mut view = BytesMut::get(buf, "buf")?;
        let data = view.as_mut_slice();
        py.detach(|| {
            if encrypt {
                cipher.encrypt(first_iv, data)
            } else {
                cipher.decrypt(first_iv, data)
            }
        })
        .map_err(errors::crypto)
    }
}

#[pymethods]
impl PySectorCipher {
    /// A cipher string (`aes-xts-plain64`, `aes-xts-plain`, `aes-cbc-plain64`,
    /// `aes-cbc-plain`, `aes-cbc-essiv:sha256`, `aes-ecb`) and its key (bytes-like: 32, 48
    /// or 64 bytes for XTS, 16, 24 or 32 for the others).
    #[new]
    fn new(spec: &str, key: &Bound<'_, PyAny>) -> PyResult<PySectorCipher> {
        let spec: CipherSpec = spec.parse().map_err(errors::crypto)?;
        let key = secrets::from_object(key, "key")?;
        let c = PySectorCipher {
            spec,
            key,
            built: Mutex::new(Vec::new()),
        };
        // Refuses a bad key now (length, equal XTS halves) rather than at the first call.
        c.cipher(512, false)?;
        Ok(c)
    }

    /// Encrypts `buf` (a writable buffer of whole sectors) in place. `first_sector` is
    /// the number of its first sector, counted in `sector_size` units; the IV number is
    /// that times `sector_size / 512` (dm-crypt's default), or the sector number itself
    /// with `iv_large_sectors`.
    #[pyo3(signature = (buf, first_sector=0, sector_size=512, *, iv_large_sectors=false))]
    fn encrypt(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        first_sector: u64,
        sector_size: usize,
        iv_large_sectors: bool,
    ) -> PyResult<()> {
        self.run(py, true, buf, first_sector, sector_size, iv_large_sectors)
    }

    /// Decrypts `buf` in place (the arguments as for `encrypt`).
    #[pyo3(signature = (buf, first_sector=0, sector_size=512, *, iv_large_sectors=false))]
    fn decrypt(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        first_sector: u64,
        sector_size: usize,
        iv_large_sectors: bool,
    ) -> PyResult<()> {
        self.run(py, false, buf, first_sector, sector_size, iv_large_sectors)
    }

    /// The cipher string.
    #[getter]
    fn spec(&self) -> String {
        self.spec.to_string()
    }

    /// The key length in bits.
    #[getter]
    fn key_bits(&self) -> usize {
        self.key.len() * 8
    }

    /// The crypto backend the cipher runs on (`aesni`, `vaes`, `avx512`, `soft`).
    #[getter]
    fn backend(&self) -> PyResult<String> {
        Ok(self.cipher(512, false)?.backend().name().to_owned())
    }

    fn __repr__(&self) -> String {
        format!(
            "SectorCipher({:?}, <{}-bit key>)",
            self.spec.to_string(),
            self.key.len() * 8
        )
    }
}
