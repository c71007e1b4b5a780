//! The gateway's export table, built from a [`Config`]: every export's volume opened
//! through the library's opener ([`sectorcrypt_image::open()`]) with the key its
//! configuration names, its access lists turned into the NBD server's [`Access`], and,
//! when metrics are served, counted into an [`ExportMetrics`] labelled with its name.
//!
//! Every export is opened before the server starts: one that cannot be opened (a wrong
//! passphrase, a missing key file, an image that is not there) is a misconfiguration, and
//! the error names the export; the volumes opened before it are closed again, and nothing
//! is served.

use crate::config::{Config, Export, KeySource};
use crate::log::Log;
use crate::metered::{Failures, Metered};
use sectorcrypt_image::export::VolumeExport;
use sectorcrypt_image::{Class, OpenOptions};
use sectorcrypt_nbd::{Access, ExportTable};
use sectorcrypt_service::metrics::{ExportMetrics, Metrics};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// How the exports' volumes are opened and counted.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `$CREDENTIALS_DIRECTORY`, where an export's `credential` is read.
    pub credentials: Option<PathBuf>,
    /// The threads each volume's engine uses for one large request (default: the cores).
    pub threads: Option<usize>,
    /// Offer NBD TRIM on every export, passed on as discards.
    pub allow_discards: bool,
    /// Count each export's requests here, labelled with its name.
    pub metrics: Option<Arc<Metrics>>,
    /// Log each export's failed requests here (with `metrics` only: the failures are
    /// seen where they are counted).
    pub log: Option<Arc<Log>>,
}

/// One export opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Its name.
    pub name: String,
    /// The volume's format (`luks2`, `luks1`, `geli`).
    pub format: &'static str,
    /// The volume's cipher string.
    pub cipher: String,
    /// The plaintext's size in bytes.
    pub size: u64,
    /// Served read-only.
    pub read_only: bool,
    /// How long unlocking took (the key derivation, mostly).
    pub unlock_took: Duration,
}

/// An export that could not be opened: which, and why.
#[derive(Debug)]
pub struct OpenError {
    /// The export's name.
    pub export: String,
    /// What went wrong.
    pub cause: Cause,
}

/// Why an export could not be opened.
#[derive(Debug)]
pub enum Cause {
    /// Its key source is not usable, or a key file cannot be read.
    Key(String),
    /// The library refused the volume (classified: a wrong passphrase, a missing file, a
    /// volume in use...).
    Open(sectorcrypt_image::Error),
}

impl OpenError {
    /// The class of the failure, for an exit code: a key file that cannot be read is
    /// the configuration's fault ([`Class::InvalidArgument`]).
    pub fn class(&self) -> Class {
        match &self.cause {
            Cause::Key(_) => Class::InvalidArgument,
            Cause::Open(e) => e.class(),
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Key(m) => write!(f, "export {:?}: {m}", self.export),
            Cause::Open(e) => write!(f, "export {:?}: {e}", self.export),
        }
    }
}

impl std::error::Error for OpenError {}

/// The exports of `config`, opened, in a table whose access lists are the configuration's;
/// with what was opened, in the configuration's order.
pub fn build(config: &Config, opts: &Options) -> Result<(ExportTable, Vec<Opened>), OpenError> {
    let mut table = ExportTable::new();
    let mut opened = Vec::with_capacity(config.exports.len());
    for e in &config.exports {
        let one = open_one(e, opts)?;
        add(&mut table, e, &one)?;
        opened.push(one.opened);
    }
    Ok((table, opened))
}

/// One export opened: what the server serves, and what was opened.
#[derive(Clone)]
pub struct OpenedExport {
    /// The volume, counted when metrics are on.
    pub export: Arc<dyn sectorcrypt_nbd::Export>,
    /// What `NBD_OPT_LIST` and `NBD_OPT_INFO` say of it.
    pub description: String,
    /// What was opened.
    pub opened: Opened,
}

impl fmt::Debug for OpenedExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedExport")
            .field("opened", &self.opened)
            .finish_non_exhaustive()
    }
}

/// Opens export `e` (and with metrics, adds its series).
pub fn open_one(e: &Export, opts: &Options) -> Result<OpenedExport, OpenError> {
    let (export, info) = open_export(e, opts).map_err(|cause| OpenError {
        export: e.name.clone(),
        cause,
    })?;
    let export: Arc<dyn sectorcrypt_nbd::Export> = match &opts.metrics {
        None => Arc::new(export),
        Some(m) => {
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
            let counted = Arc::new(ExportMetrics::new(&e.name, threads));
            counted.key_derived(info.unlock_took);
            m.add(counted.clone());
            let metered = Metered::new(export, counted);
            match &opts.log {
                Some(log) => {
                    Arc::new(metered.logging(Arc::new(Failures::new(log.clone(), &e.name))))
                }
                None => Arc::new(metered),
            }
        }
    };
    let description = format!(
        "sectorcrypt {} {}",
        info.format,
        sectorcrypt_image::redacted(Path::new(&e.image))
    );
    Ok(OpenedExport {
        export,
        description,
        opened: info,
    })
}

/// Adds `one`, opened from `e`, to `table` with `e`'s access lists.
pub fn add(table: &mut ExportTable, e: &Export, one: &OpenedExport) -> Result<(), OpenError> {
    // Config::check has refused empty, overlong and repeated names already.
    table
        .add(
            &e.name,
            Some(one.description.clone()),
            one.export.clone(),
            access(e),
        )
        .map_err(|t| OpenError {
            export: e.name.clone(),
            cause: Cause::Key(t.to_string()),
        })
}

/// Who may see and use export `e`.
pub fn access(e: &Export) -> Access {
    Access {
        uids: e.allow_uids.clone(),
        gids: e.allow_gids.clone(),
        tls_subjects: e.tls_subjects.clone(),
    }
}

/// Opens export `e`'s volume with its key.
fn open_export(e: &Export, opts: &Options) -> Result<(VolumeExport, Opened), Cause> {
    let passphrase = match e
        .key_source(opts.credentials.as_deref())
        .map_err(|c| Cause::Key(strip_export(&c.0, &e.name)))?
    {
        KeySource::File(f) => read_key(&f, "key file")?,
        KeySource::None => Zeroizing::new(Vec::new()),
    };
    let keyfiles = e
        .keyfile_components
        .iter()
        .map(|f| read_key(f, "keyfile component"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut open_opts = OpenOptions {
        header: e.header.clone(),
        read_only: e.read_only,
        key_slot: e.key_slot.map(|s| s as usize),
        keyfiles,
        no_passphrase: e.no_passphrase,
        ..OpenOptions::default()
    };
    open_opts.engine.threads = opts.threads;
    let start = Instant::now();
    let o = sectorcrypt_image::open(Path::new(&e.image), &passphrase, &open_opts)
        .map_err(Cause::Open)?;
    let unlock_took = start.elapsed();
    let info = Opened {
        name: e.name.clone(),
        format: o.format,
        cipher: o.unlocked.cipher.clone(),
        size: o.volume.size(),
        read_only: o.volume.read_only(),
        unlock_took,
    };
    let mut export = VolumeExport::new(o.volume, o.format, o.unlocked.cipher.clone(), o.claims);
    export.allow_discards(opts.allow_discards);
    Ok((export, info))
}

/// A key file's bytes, all of them (as cryptsetup reads `--key-file`).
fn read_key(path: &Path, what: &str) -> Result<Zeroizing<Vec<u8>>, Cause> {
    std::fs::read(path)
        .map(Zeroizing::new)
        .map_err(|err| Cause::Key(format!("{what} {}: {err}", path.display())))
}

/// `msg` without its leading `export "NAME": `, which [`OpenError`] adds itself.
fn strip_export(msg: &str, name: &str) -> String {
    let prefix = format!("export {name:?}: ");
    msg.strip_prefix(&prefix).unwrap_or(msg).to_string()
}
