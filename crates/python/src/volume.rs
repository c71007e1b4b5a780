//! An open volume for Python: [`open`] unlocks the volume a locator names (a path, an NBD
//! URI, an `rbd:` spec: through `sectorcrypt_image::open`, so with the command line's
//! stores, locks and claims) and returns a [`NativeVolume`], the handle under the
//! package's `sectorcrypt.Volume` file object.
//!
//! Every transfer runs with the GIL released, straight between the caller's buffer and the
//! engine (`readinto_at` decrypts where the caller's memory lies). Positions are the
//! caller's: the file object above keeps the current offset. A request that reaches past
//! the end is cut there, as `pread`/`pwrite` on a block device: reads return fewer bytes,
//! a write that starts at the end fails with `ENOSPC`.
//!
//! `close` flushes (when writable) and drops the handle's reference; requests already
//! running in other threads finish on theirs, and the locks are released after the last.

use crate::buffer::{Bytes, BytesMut};
use crate::errors::{self, os_error, InvalidArgument};
use crate::secrets;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sectorcrypt_image::{Context, OpenOptions, Opened, RemoteOptions};
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::formats::Requested;
use sectorcrypt_volume::tcrypt::{Options as TcryptOptions, Protect};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use zeroize::Zeroizing;

/// What `info()` reports: everything about the volume but its key.
#[derive(Debug, Clone)]
pub struct Info {
    pub format: &'static str,
    pub cipher: String,
    pub sector_size: usize,
    pub data_offset: u64,
    pub size: u64,
    pub keyslot: usize,
    pub uuid: Option<String>,
}

impl Info {
    /// As a dict (`format`, `cipher`, `sector_size`, `data_offset`, `size`, `keyslot`,
    /// `uuid`).
    pub fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("format", self.format)?;
        d.set_item("cipher", &self.cipher)?;
        d.set_item("sector_size", self.sector_size)?;
        d.set_item("data_offset", self.data_offset)?;
        d.set_item("size", self.size)?;
        d.set_item("keyslot", self.keyslot)?;
        d.set_item("uuid", self.uuid.as_deref())?;
        Ok(d)
    }
}

/// An open volume (the native half of `sectorcrypt.Volume`).
#[derive(Debug)]
#[pyclass(module = "sectorcrypt._native", name = "Volume", frozen)]
pub struct NativeVolume {
    opened: Mutex<Option<Arc<Opened>>>,
    info: Info,
    read_only: bool,
    name: String,
}

/// Opens the volume `path` names: a path, an NBD URI or an `rbd:` spec (see the
/// package's `sectorcrypt.open`).
#[pyfunction]
#[pyo3(signature = (path, passphrase=None, *, key_file=None, header=None, readonly=true,
                    keyslot=None, keyfiles=None, threads=None, shared=false,
                    connections=None, timeout=None, retry=None, r#type=None,
                    veracrypt_pim=None, tcrypt_hidden=false, tcrypt_backup=false,
                    tcrypt_system=false, hash=None, cipher=None, protect_hidden=None,
                    protect_hidden_keyfiles=None, protect_hidden_pim=None))]
#[allow(clippy::too_many_arguments)]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    passphrase: Option<&Bound<'_, PyAny>>,
    key_file: Option<PathBuf>,
    header: Option<PathBuf>,
    readonly: bool,
    keyslot: Option<usize>,
    keyfiles: Option<Vec<PathBuf>>,
    threads: Option<usize>,
    shared: bool,
    connections: Option<usize>,
    timeout: Option<u64>,
    retry: Option<u32>,
    r#type: Option<&str>,
    veracrypt_pim: Option<u32>,
    tcrypt_hidden: bool,
    tcrypt_backup: bool,
    tcrypt_system: bool,
    hash: Option<String>,
    cipher: Option<String>,
    protect_hidden: Option<&Bound<'_, PyAny>>,
    protect_hidden_keyfiles: Option<Vec<PathBuf>>,
    protect_hidden_pim: Option<u32>,
) -> PyResult<NativeVolume> {
    let tcrypt = TcryptKwargs {
        pim: veracrypt_pim,
        hidden: tcrypt_hidden,
        backup: tcrypt_backup,
        system: tcrypt_system,
        hash,
        cipher,
        protect: match protect_hidden {
            Some(p) => Some(Protect {
                passphrase: Zeroizing::new(secrets::from_object(p, "protect_hidden")?.to_vec()),
                keyfiles: geli_keyfiles(protect_hidden_keyfiles.as_deref().unwrap_or_default())?,
                pim: protect_hidden_pim,
            }),
            None if protect_hidden_keyfiles.is_some() || protect_hidden_pim.is_some() => {
                return Err(InvalidArgument::new_err(
                    "protect_hidden_keyfiles and protect_hidden_pim go with protect_hidden \
                     (the hidden volume's passphrase)",
                ))
            }
            None => None,
        },
    };
    let requested = requested(r#type, tcrypt)?;
    let defaults = RemoteOptions::default();
    let remote = RemoteOptions {
        connections: connections.unwrap_or(defaults.connections),
        timeout_secs: timeout.unwrap_or(defaults.timeout_secs),
        retry: retry.unwrap_or(defaults.retry),
    };
    let keyfiles = geli_keyfiles(keyfiles.as_deref().unwrap_or_default())?;
    // A GELI key made of keyfiles alone (geli init -P) has no passphrase component.
    let no_passphrase = !keyfiles.is_empty() && passphrase.is_none() && key_file.is_none();
    let pass = if no_passphrase {
        sectorcrypt_crypto::secret::SecretBytes::default()
    } else {
        secrets::passphrase(passphrase, key_file.as_deref())?
    };
    let opts = OpenOptions {
        header: header.clone(),
        read_only: readonly,
        shared,
        key_slot: keyslot,
        keyfiles,
        no_passphrase,
        integrity: false,
        requested,
        engine: EngineOptions {
            threads,
            ..EngineOptions::default()
        },
        context: Context {
            remote,
            on_wait: None,
        },
    };
    let opened = py
        .detach(|| sectorcrypt_image::open(&path, &pass, &opts))
        .map_err(errors::image)?;
    let u = &opened.unlocked;
    let info = Info {
        format: opened.format,
        cipher: u.cipher.clone(),
        sector_size: u.sector_size,
        data_offset: u.data_offset,
        size: opened.volume.size(),
        keyslot: u.keyslot,
        uuid: opened.uuid.clone(),
    };
    Ok(NativeVolume {
        opened: Mutex::new(Some(Arc::new(opened))),
        info,
        read_only: readonly,
        name: sectorcrypt_image::redacted(&path),
    })
}

/// The VeraCrypt/TrueCrypt keywords of `open`.
struct TcryptKwargs {
    pim: Option<u32>,
    hidden: bool,
    backup: bool,
    system: bool,
    hash: Option<String>,
    cipher: Option<String>,
    protect: Option<Protect>,
}

/// The format `type` names (`tcrypt`, `veracrypt`, `fvault2`; `None`: detected) with the
/// VeraCrypt/TrueCrypt keywords, which need one of the first two.
fn requested(kind: Option<&str>, t: TcryptKwargs) -> PyResult<Option<Requested>> {
    let tcrypt_kwargs = t.pim.is_some()
        || t.hidden
        || t.backup
        || t.system
        || t.hash.is_some()
        || t.cipher.is_some()
        || t.protect.is_some();
    let truecrypt = match kind {
        None if tcrypt_kwargs => {
            return Err(InvalidArgument::new_err(
                "veracrypt_pim, tcrypt_hidden, tcrypt_backup, tcrypt_system, hash, cipher and \
                 protect_hidden open VeraCrypt/TrueCrypt volumes: add type=\"veracrypt\" (or \
                 \"tcrypt\")",
            ))
        }
        None => return Ok(None),
        Some("fvault2") if tcrypt_kwargs => {
            return Err(InvalidArgument::new_err(
                "FileVault 2 takes none of the VeraCrypt/TrueCrypt keywords",
            ))
        }
        Some("fvault2") => return Ok(Some(Requested::Fvault2)),
        Some("tcrypt") => true,
        Some("veracrypt") => false,
        Some(other) => {
            return Err(InvalidArgument::new_err(format!(
                "type {other:?}: open detects LUKS2, LUKS1, GELI, BitLocker and FileVault 2; \
                 name only tcrypt, veracrypt or fvault2"
            )))
        }
    };
    Ok(Some(Requested::Tcrypt(TcryptOptions {
        truecrypt,
        pim: t.pim,
        hidden: t.hidden,
        backup: t.backup,
        system: t.system,
        hash: t.hash,
        cipher: t.cipher,
        protect: t.protect,
        ..TcryptOptions::default()
    })))
}

/// GELI keyfiles, read into wiped memory.
fn geli_keyfiles(paths: &[PathBuf]) -> PyResult<Vec<Zeroizing<Vec<u8>>>> {
    paths
        .iter()
        .map(|p| Ok(Zeroizing::new(secrets::from_file(p, "keyfile")?.to_vec())))
        .collect()
}

impl NativeVolume {
    fn slot(&self) -> MutexGuard<'_, Option<Arc<Opened>>> {
        self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The engine, or `ValueError` once closed (as Python's files).
    fn opened(&self) -> PyResult<Arc<Opened>> {
        self.slot()
            .clone()
            .ok_or_else(|| PyValueError::new_err("I/O operation on closed volume"))
    }

    fn io_error(&self, e: io::Error) -> PyErr {
        errors::data_path(e, &self.name)
    }
}

#[pymethods]
impl NativeVolume {
    /// Fills `buf` (any writable buffer) with the plaintext at `offset`; returns the bytes
    /// read, fewer than `len(buf)` at the end of the volume.
    fn readinto_at(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let mut view = BytesMut::get(buf, "buf")?;
        let o = self.opened()?;
        let dst = view.as_mut_slice();
        let n = clamp(o.volume.size(), offset, dst.len());
        if n == 0 {
            return Ok(0);
        }
        py.detach(|| o.volume.read_at(&mut dst[..n], offset))
            .map_err(|e| self.io_error(e))?;
        Ok(n)
    }

    /// Up to `size` bytes of plaintext at `offset` (fewer at the end of the volume).
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        size: usize,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let o = self.opened()?;
        let n = clamp(o.volume.size(), offset, size);
        PyBytes::new_with(py, n, |dst| {
            if dst.is_empty() {
                return Ok(());
            }
            py.detach(|| o.volume.read_at(dst, offset))
                .map_err(|e| self.io_error(e))
        })
    }

    /// Writes `data` (any bytes-like object) at `offset`; returns the bytes written, fewer
    /// at the end of the volume. `ENOSPC` when `offset` is at or past the end.
    fn write_at(&self, py: Python<'_>, data: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let view = Bytes::get(data, "data")?;
        let o = self.opened()?;
        let src = view.as_slice();
        let n = clamp(o.volume.size(), offset, src.len());
        if n == 0 && src.is_empty() {
            return Ok(0);
        }
        if n == 0 {
            let e = io::Error::from(io::ErrorKind::StorageFull);
            return Err(os_error(
                &e,
                format!(
                    "{}: write at {offset}, at or past the end of the volume",
                    self.name
                ),
            ));
        }
        py.detach(|| o.volume.write_at(&src[..n], offset))
            .map_err(|e| self.io_error(e))?;
        Ok(n)
    }

    /// Makes every write so far durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let o = self.opened()?;
        py.detach(|| o.volume.flush()).map_err(|e| self.io_error(e))
    }

    /// Flushes (when writable) and lets go of the volume; again is a no-op.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(o) = self.slot().take() else {
            return Ok(());
        };
        if !self.read_only {
            py.detach(|| o.volume.flush())
                .map_err(|e| self.io_error(e))?;
        }
        py.detach(move || drop(o));
        Ok(())
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.slot().is_none()
    }

    /// The plaintext size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.info.size
    }

    /// Whether the volume was opened read-only.
    #[getter]
    fn readonly(&self) -> bool {
        self.read_only
    }

    /// The image's locator, as given (an `rbd:` spec or NBD URI without its secrets).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// `format`, `cipher`, `sector_size`, `data_offset`, `size`, `keyslot`, `uuid`.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.info.to_dict(py)
    }
}

/// Bytes of a request of `len` at `offset` that lie before `size`.
fn clamp(size: u64, offset: u64, len: usize) -> usize {
    size.saturating_sub(offset).min(len as u64) as usize
}
