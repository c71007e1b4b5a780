//! `sectorcrypt.format`: new LUKS2, LUKS1, GELI and VeraCrypt volumes through the image
//! library's
//! one creator (`sectorcrypt_image::create`), which the command line's `format` calls
//! too: the same defaults (LUKS2 with `aes-xts-plain64`, a 512-bit key and 4096-byte
//! sectors where the data area allows, Argon2id calibrated to 2 s; GELI with AES-XTS, a
//! 128-bit key, 512-byte sectors, PBKDF2 calibrated to 2 s; VeraCrypt with AES, PBKDF2-SHA-512
//! and 500000 iterations or 15000 + 1000 x `pim`, and a hidden volume with `hidden_size`
//! and its own `hidden_passphrase` or `hidden_key_file`), the same refusals (spelled
//! as keywords: `header=`, `key_size=`), any locator (a file, an NBD URI, an `rbd:`
//! spec), a volume in use refused at once, and a file made here removed again when
//! formatting fails. Unlike the command line, nothing is asked: an existing image is
//! overwritten. A GELI provider with `integrity` has all its sectors written (sealed
//! zeros) before this returns, unless `no_wipe`.

use crate::errors::{self, InvalidArgument};
use crate::secrets;
use crate::volume::Info;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sectorcrypt_crypto::secret::SecretBytes;
use sectorcrypt_image::create::{
    self, CreateOptions, GeliOptions, HiddenOptions, Kind, Overwrite, Pbkdf, VeracryptOptions,
};
use sectorcrypt_image::{Context, Error};
use std::path::PathBuf;

/// What the creator asks of Python: nothing is confirmed, the passphrase was given.
struct Given(Option<SecretBytes>);

impl create::Steps for Given {
    type Error = Error;

    fn confirm(&mut self, _: &Overwrite) -> Result<(), Error> {
        Ok(())
    }

    fn passphrase(&mut self) -> Result<SecretBytes, Error> {
        self.0
            .take()
            .ok_or_else(|| Error::invalid("a passphrase or key_file is needed"))
    }
}

/// Formats the image at `path` (see the package's `sectorcrypt.format`); returns what
/// `Volume.info()` would.
#[pyfunction]
#[pyo3(signature = (path, passphrase=None, *, key_file=None, r#type="luks2", cipher=None,
                    key_size=None, sector_size=None, size=None, header=None, pbkdf=None,
                    hash=None, iterations=None, iter_time=None, pbkdf_memory=None,
                    pbkdf_parallel=None, label=None, integrity=None, no_wipe=false,
                    keyfiles=None, volume_key=None, rbd_object_size=None, pim=None,
                    hidden_size=None, hidden_passphrase=None, hidden_key_file=None,
                    hidden_keyfiles=None, hidden_pim=None))]
#[allow(clippy::too_many_arguments)]
pub fn format<'py>(
    py: Python<'py>,
    path: PathBuf,
    passphrase: Option<&Bound<'py, PyAny>>,
    key_file: Option<PathBuf>,
    r#type: &str,
    cipher: Option<String>,
    key_size: Option<usize>,
    sector_size: Option<usize>,
    size: Option<u64>,
    header: Option<PathBuf>,
    pbkdf: Option<String>,
    hash: Option<String>,
    iterations: Option<u32>,
    iter_time: Option<u32>,
    pbkdf_memory: Option<u32>,
    pbkdf_parallel: Option<u32>,
    label: Option<String>,
    integrity: Option<String>,
    no_wipe: bool,
    keyfiles: Option<Vec<PathBuf>>,
    volume_key: Option<&Bound<'py, PyAny>>,
    rbd_object_size: Option<u64>,
    pim: Option<u32>,
    hidden_size: Option<u64>,
    hidden_passphrase: Option<&Bound<'py, PyAny>>,
    hidden_key_file: Option<PathBuf>,
    hidden_keyfiles: Option<Vec<PathBuf>>,
    hidden_pim: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let kind = Kind::parse(r#type).ok_or_else(|| {
        InvalidArgument::new_err(format!(
            "type {:?}: luks2, luks1, geli or veracrypt",
            r#type
        ))
    })?;
    let hidden_given = hidden_passphrase.is_some()
        || hidden_key_file.is_some()
        || hidden_keyfiles.is_some()
        || hidden_pim.is_some();
    let hidden = match hidden_size {
        None if hidden_given => {
            return Err(InvalidArgument::new_err(
                "hidden_passphrase=, hidden_key_file=, hidden_keyfiles= and hidden_pim= \
                 describe a hidden volume: give its hidden_size= too",
            ))
        }
        None => None,
        Some(size) => Some(HiddenOptions {
            size,
            passphrase: secrets::passphrase(hidden_passphrase, hidden_key_file.as_deref())?,
            keyfiles: hidden_keyfiles
                .unwrap_or_default()
                .iter()
                .map(|p| secrets::from_file(p, "keyfile"))
                .collect::<PyResult<Vec<_>>>()?,
            pim: hidden_pim,
        }),
    };
    let keyfiles = keyfiles
        .unwrap_or_default()
        .iter()
        .map(|p| secrets::from_file(p, "keyfile"))
        .collect::<PyResult<Vec<_>>>()?;
    // GELI's key may be keyfiles alone (geli init -P).
    let no_passphrase = passphrase.is_none() && key_file.is_none() && !keyfiles.is_empty();
    let pass = if no_passphrase {
        None
    } else {
        Some(secrets::passphrase(passphrase, key_file.as_deref())?)
    };
    let opts = CreateOptions {
        kind,
        cipher,
        key_bits: key_size,
        sector_size,
        pbkdf: Pbkdf {
            kind: pbkdf,
            hash,
            iter_time_ms: iter_time,
            memory_kib: pbkdf_memory,
            parallel: pbkdf_parallel,
            iterations,
        },
        label,
        header,
        size,
        rbd_object_size,
        integrity,
        keyfiles,
        volume_key: volume_key
            .map(|k| secrets::from_object(k, "volume_key"))
            .transpose()?,
        geli: GeliOptions {
            no_passphrase,
            no_wipe,
            ..GeliOptions::default()
        },
        veracrypt: VeracryptOptions { pim, hidden },
        ..CreateOptions::default()
    };
    let made = py
        .detach(|| create::create(&path, &opts, &Context::default(), &mut Given(pass)))
        .map_err(errors::image)?;
    let u = &made.unlocked;
    let uuid = match &made.made {
        create::Made::Luks(h) => h.uuid().map(str::to_owned),
        create::Made::Geli(_) | create::Made::Veracrypt(_) => None,
    };
    Info {
        format: kind.name(),
        cipher: u.cipher.clone(),
        sector_size: u.sector_size,
        data_offset: u.data_offset,
        size: u.data_size,
        keyslot: u.keyslot,
        uuid,
    }
    .to_dict(py)
}
