//! `sectorcrypt.format`: new LUKS2, LUKS1 and GELI volumes, on the volume library's
//! `luks::format_at` and `geli::init::init`, on the stores the image library's
//! `create::Target` opens for the command line's `format` too: any locator (a file, an
//! NBD URI, an `rbd:` spec), an exclusive use claim refused at once when the image is in
//! use, and the exclusive header lock. A file is created (sparse, readable by its owner
//! only) when it does not exist and `size` is given; a file created here is removed
//! again when formatting fails.
//!
//! Defaults are the command line's: LUKS2 with `aes-xts-plain64`, a 512-bit key and
//! 4096-byte sectors where the data area allows, Argon2id calibrated to 2 s; GELI with
//! AES-XTS, a 128-bit key, 512-byte sectors, PBKDF2 calibrated to 2 s. A GELI provider
//! with `integrity` has all its sectors written (sealed zeros) before this returns.

use crate::errors::{self, InvalidArgument};
use crate::secrets;
use crate::volume::Info;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sectorcrypt_crypto::secret::SecretBytes;
use sectorcrypt_image::create::{luks_key_bits, seal, Target};
use sectorcrypt_image::{Context, Error, Result};
use sectorcrypt_volume::geli::init::{self as geli, InitOptions};
use sectorcrypt_volume::geli::metadata::algo;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::luks::{self, FormatOptions, Version};
use sectorcrypt_volume::{Placement, Unlocked};
use std::path::{Path, PathBuf};

/// Everything `format` was asked, checked for types by PyO3.
struct Request {
    kind: String,
    cipher: Option<String>,
    key_bits: Option<usize>,
    sector_size: Option<usize>,
    pbkdf: Option<String>,
    iterations: Option<u32>,
    iter_time_ms: Option<u32>,
    pbkdf_memory: Option<u32>,
    label: Option<String>,
    integrity: Option<String>,
    volume_key: Option<SecretBytes>,
    keyfiles: Vec<SecretBytes>,
}

/// Formats the image at `path` (see the package's `sectorcrypt.format`); returns what
/// `Volume.info()` would.
#[pyfunction]
#[pyo3(signature = (path, passphrase=None, *, key_file=None, r#type="luks2", cipher=None,
                    key_size=None, sector_size=None, size=None, header=None, pbkdf=None,
                    iterations=None, iter_time=None, pbkdf_memory=None, label=None,
                    integrity=None, keyfiles=None, volume_key=None))]
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
    iterations: Option<u32>,
    iter_time: Option<u32>,
    pbkdf_memory: Option<u32>,
    label: Option<String>,
    integrity: Option<String>,
    keyfiles: Option<Vec<PathBuf>>,
    volume_key: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let keyfiles = keyfiles
        .unwrap_or_default()
        .iter()
        .map(|p| secrets::from_file(p, "keyfile"))
        .collect::<PyResult<Vec<_>>>()?;
    // GELI's key may be keyfiles alone (geli init -P).
    let pass = if passphrase.is_none() && key_file.is_none() && !keyfiles.is_empty() {
        None
    } else {
        Some(secrets::passphrase(passphrase, key_file.as_deref())?)
    };
    let req = Request {
        kind: r#type.to_ascii_lowercase(),
        cipher,
        key_bits: key_size,
        sector_size,
        pbkdf,
        iterations,
        iter_time_ms: iter_time,
        pbkdf_memory,
        label,
        integrity,
        volume_key: volume_key
            .map(|k| secrets::from_object(k, "volume_key"))
            .transpose()?,
        keyfiles,
    };
    if !["luks2", "luks1", "geli"].contains(&req.kind.as_str()) {
        return Err(InvalidArgument::new_err(format!(
            "type {:?}: luks2, luks1 or geli",
            req.kind
        )));
    }
    let info = py
        .detach(|| create_and_format(&path, header.as_deref(), size, pass.as_deref(), &req))
        .map_err(errors::image)?;
    info.to_dict(py)
}

fn create_and_format(
    path: &Path,
    header: Option<&Path>,
    size: Option<u64>,
    pass: Option<&[u8]>,
    req: &Request,
) -> Result<Info> {
    let cx = Context::default();
    let target = Target::open(path, header, size, &cx)?;
    let result = format_target(&target, &cx, pass, req);
    if result.is_err() {
        target.discard();
    }
    result
}

fn format_target(
    target: &Target,
    cx: &Context,
    pass: Option<&[u8]>,
    req: &Request,
) -> Result<Info> {
    let _lock = target.lock(cx)?;
    if req.kind == "geli" {
        if target.detached() {
            return Err(Error::invalid(
                "GELI keeps its metadata in the provider's last sector: header= does not apply",
            ));
        }
        return format_geli(target, pass, req);
    }
    format_luks(target.placement(), pass.unwrap_or_default(), req)
}

fn format_luks(at: Placement<'_>, pass: &[u8], req: &Request) -> Result<Info> {
    if req.integrity.is_some() || !req.keyfiles.is_empty() {
        return Err(Error::invalid("integrity= and keyfiles= are for GELI only"));
    }
    let version = if req.kind == "luks1" {
        Version::Luks1
    } else {
        Version::Luks2
    };
    let cipher = req.cipher.as_deref().unwrap_or("aes-xts-plain64");
    let key_bits = luks_key_bits(cipher, req.key_bits)?;
    let default_kdf = version.kdf_kinds()[0];
    let kind = match &req.pbkdf {
        Some(k) => KdfKind::parse(k)?,
        None => default_kdf,
    };
    let mut kdf = match kind {
        KdfKind::Pbkdf2 => KdfOptions::pbkdf2(KdfOptions::default().hash),
        k => KdfOptions {
            kind: k,
            ..KdfOptions::default()
        },
    };
    kdf.force_iterations = req.iterations;
    kdf.memory_kib = req.pbkdf_memory;
    if let Some(ms) = req.iter_time_ms {
        kdf.iter_time_ms = ms;
    }
    let sector_size = match req.sector_size {
        Some(n) => n,
        None => luks::default_sector_size(version, at)?,
    };
    let opts = FormatOptions {
        version,
        cipher: cipher.to_owned(),
        key_bytes: key_bits / 8,
        sector_size,
        kdf,
        label: req.label.clone().unwrap_or_default(),
        ..FormatOptions::default()
    };
    let (h, u) = luks::format_at(at, &opts, pass, req.volume_key.as_deref())?;
    Ok(info(version.name(), &u, h.uuid().map(str::to_owned)))
}

/// A GELI algorithm by name (`by_name`: the volume library's parser of geli's and the
/// command line's names), or an `Unsupported` error listing `supported`.
fn geli_algorithm(
    name: &str,
    by_name: fn(&str) -> Option<u16>,
    supported: &str,
    what: &str,
) -> Result<u16> {
    by_name(name)
        .ok_or_else(|| Error::unsupported(format!("GELI {what} {name:?} (supported: {supported})")))
}

fn format_geli(target: &Target, pass: Option<&[u8]>, req: &Request) -> Result<Info> {
    if req.label.is_some() || req.volume_key.is_some() {
        return Err(Error::invalid(
            "GELI providers have no label, and their master key is random",
        ));
    }
    if req.pbkdf.as_deref().is_some_and(|k| k != "pbkdf2") {
        return Err(Error::invalid(
            "GELI derives keys with pbkdf2 (sha512) only",
        ));
    }
    let ealgo = geli_algorithm(
        req.cipher.as_deref().unwrap_or("aes-xts"),
        algo::encryption_by_name,
        algo::ENCRYPTION_NAMES,
        "cipher",
    )?;
    let aalgo = match &req.integrity {
        None => 0,
        Some(a) => geli_algorithm(
            a,
            algo::authentication_by_name,
            algo::AUTHENTICATION_NAMES,
            "integrity",
        )?,
    };
    let small = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| Error::invalid(format!("{what} {n} is too large")))
    };
    let mut opts = InitOptions {
        ealgo,
        aalgo,
        keylen: small(req.key_bits.unwrap_or(0), "key_size")?
            .try_into()
            .map_err(|_| Error::invalid("key_size is too large"))?,
        sectorsize: small(req.sector_size.unwrap_or(0), "sector_size")?,
        iterations: req.iterations,
        use_passphrase: pass.is_some(),
        ..InitOptions::default()
    };
    if let Some(ms) = req.iter_time_ms {
        opts.iter_time_ms = ms;
    }
    let files: Vec<&[u8]> = req.keyfiles.iter().map(|k| &k[..]).collect();
    let (_, u) = geli::init(&target.store, &opts, &files, pass.unwrap_or_default())?;
    if aalgo != 0 {
        seal(&target.store, &u, &|_| {})?;
    }
    Ok(info("geli", &u, None))
}

fn info(format: &'static str, u: &Unlocked, uuid: Option<String>) -> Info {
    Info {
        format,
        cipher: u.cipher.clone(),
        sector_size: u.sector_size,
        data_offset: u.data_offset,
        size: u.data_size,
        keyslot: u.keyslot,
        uuid,
    }
}
