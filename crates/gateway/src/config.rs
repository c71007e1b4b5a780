//! The gateway's configuration: which exports one server offers, where each volume is,
//! where its key comes from, and who may use it.
//!
//! ```toml
//! # Where clients connect (a Unix socket's path, or a loopback HOST:PORT; one server
//! # listens on each, with the same exports); without `listen`, the sockets systemd
//! # passes (socket activation).
//! listen = ["/run/sectorcrypt/gateway.sock", "127.0.0.1:10809"]
//! # Prometheus scrapes GET /metrics here.
//! metrics = "127.0.0.1:9560"
//! max_connections = 256                # past their handshake, all exports (default 64)
//! max_connections_per_export = 64      # keeps slots for the other exports (default 3/4
//!                                      # of max_connections with several exports; 0: none)
//!
//! [tls]                                # optional: NBD_OPT_STARTTLS
//! certificates = "/etc/sectorcrypt/tls" # server-cert.pem, server-key.pem, ca-cert.pem
//! verify_peer = true                    # clients present a certificate from ca-cert.pem
//!
//! [[export]]
//! name = "vm1"                          # what clients ask for (NBD_OPT_GO)
//! image = "/srv/vm1.img"                # a file or device, nbd:// URI, or rbd: spec
//! header = "/srv/vm1.header"            # optional detached header
//! credential = "vm1"                    # the passphrase: $CREDENTIALS_DIRECTORY/vm1
//! read_only = false
//! allow_uids = [1000]                   # Unix-socket clients by SO_PEERCRED
//! tls_subjects = ["CN=backup"]          # TLS clients by certificate subject
//!
//! [[export]]
//! name = "geli0"
//! image = "/srv/geli0.img"
//! key_file = "/etc/sectorcrypt/geli0.pass"
//! keyfile_components = ["/etc/sectorcrypt/geli0.key"]
//! ```
//!
//! An export's passphrase comes from exactly one of `key_file`, `credential` (systemd's
//! `LoadCredential=`; read from `$CREDENTIALS_DIRECTORY`, which only the service can
//! read) or `no_passphrase = true` (a GELI provider keyed by its keyfile components
//! only). Unknown keys are errors, with the line: a misspelt `read_only` must not serve a
//! volume writable.
//!
//! Access: `allow_uids`/`allow_gids` admit Unix-socket clients by the credentials the
//! kernel gives (either list matching admits); `tls_subjects` admits TLS clients by their
//! certificate's subject and needs `[tls] verify_peer = true`. An export with no list
//! admits every client that reaches the server. A client refused an export is told
//! nothing of it: to it, the export does not exist.

use sectorcrypt_service::http::Endpoint;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// The longest export name (the NBD protocol's limit on strings).
pub const MAX_NAME: usize = 4096;

/// A configuration that cannot be used: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

/// A whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where clients connect; empty: the sockets systemd passes.
    #[serde(default)]
    pub listen: Vec<String>,
    /// Where the metrics are scraped.
    #[serde(default)]
    pub metrics: Option<String>,
    /// TLS for every export.
    #[serde(default)]
    pub tls: Option<Tls>,
    /// Connections served at once past their handshake, all exports together (the
    /// server's default, 64, when not given; a client over it takes the slot of the one
    /// idle longest).
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Connections one export may have at once; 0: no limit of its own; none: the
    /// default of [`Config::connections_per_export`].
    #[serde(default)]
    pub max_connections_per_export: Option<usize>,
    /// The exports, in the order `NBD_OPT_LIST` gives them.
    #[serde(default, rename = "export")]
    pub exports: Vec<Export>,
}

/// The server's TLS (nbdkit's options of the same names).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// The directory of server-cert.pem, server-key.pem and ca-cert.pem.
    pub certificates: PathBuf,
    /// Clients must present a certificate signed by ca-cert.pem.
    #[serde(default)]
    pub verify_peer: bool,
    /// Clients that do not start TLS are refused (default: true).
    #[serde(default = "yes")]
    pub require: bool,
}

fn yes() -> bool {
    true
}

/// One export.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Export {
    /// The name clients ask for.
    pub name: String,
    /// The volume's locator: a path, an `nbd://`/`nbds://`/`nbd+unix://` URI, an `rbd:`
    /// spec.
    pub image: String,
    /// A detached header.
    #[serde(default)]
    pub header: Option<PathBuf>,
    /// The passphrase's file.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The passphrase as a systemd credential's name.
    #[serde(default)]
    pub credential: Option<String>,
    /// No passphrase (GELI keyed by its components only).
    #[serde(default)]
    pub no_passphrase: bool,
    /// GELI keyfile components, in order.
    #[serde(default)]
    pub keyfile_components: Vec<PathBuf>,
    /// Only this keyslot is tried.
    #[serde(default)]
    pub key_slot: Option<u32>,
    /// Served read-only.
    #[serde(default)]
    pub read_only: bool,
    /// Unix-socket clients admitted by user ID.
    #[serde(default)]
    pub allow_uids: Option<Vec<u32>>,
    /// Unix-socket clients admitted by group ID.
    #[serde(default)]
    pub allow_gids: Option<Vec<u32>>,
    /// TLS clients admitted by their certificate's subject.
    #[serde(default)]
    pub tls_subjects: Option<Vec<String>>,
}

/// Where an export's passphrase comes from, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// Read from this file.
    File(PathBuf),
    /// No passphrase.
    None,
}

impl Export {
    /// An export of `NAME=LOCATOR` (the command line's `--export`): the name is what
    /// comes before the first `=`, the locator everything after (URIs keep their `=`s).
    pub fn from_arg(arg: &str) -> Result<Export, ConfigError> {
        let Some((name, image)) = arg.split_once('=') else {
            return err(format!("--export {arg:?}: write NAME=LOCATOR"));
        };
        Ok(Export {
            name: name.to_string(),
            image: image.to_string(),
            header: None,
            key_file: None,
            credential: None,
            no_passphrase: false,
            keyfile_components: Vec::new(),
            key_slot: None,
            read_only: false,
            allow_uids: None,
            allow_gids: None,
            tls_subjects: None,
        })
    }

    /// The export's passphrase source, with a credential resolved in
    /// `credentials` (`$CREDENTIALS_DIRECTORY`).
    pub fn key_source(&self, credentials: Option<&Path>) -> Result<KeySource, ConfigError> {
        let name = &self.name;
        match (&self.key_file, &self.credential, self.no_passphrase) {
            (Some(f), None, false) => Ok(KeySource::File(f.clone())),
            (None, Some(c), false) => match credentials {
                Some(dir) => Ok(KeySource::File(dir.join(c))),
                None => err(format!(
                    "export {name:?}: credential {c:?} needs $CREDENTIALS_DIRECTORY (set by \
                     systemd for a unit with LoadCredential=)"
                )),
            },
            (None, None, true) => Ok(KeySource::None),
            (None, None, false) => err(format!(
                "export {name:?}: give its passphrase with key_file, credential, or \
                 no_passphrase = true"
            )),
            _ => err(format!(
                "export {name:?}: key_file, credential and no_passphrase exclude each other"
            )),
        }
    }

    /// The fields whose change needs the export to be closed and opened again, which
    /// a reload refuses while clients may be connected: everything but the access lists.
    fn volume_fields(&self) -> impl PartialEq + '_ {
        (
            &self.image,
            &self.header,
            &self.key_file,
            &self.credential,
            self.no_passphrase,
            &self.keyfile_components,
            self.key_slot,
            self.read_only,
        )
    }
}

impl Config {
    /// The connections one export may have at once, of `max_connections` in all (0: no
    /// limit of its own): `max_connections_per_export` when given; else, for a gateway
    /// of several exports, three quarters of `max_connections` (at least 1), so that the
    /// clients of one export, stalled on their store or just many, leave a quarter of the
    /// slots to the others; for one export, no limit (it behaves as `serve IMAGE`).
    /// Decided at the start from the exports then: a reload keeps it, as it keeps
    /// `max_connections`.
    pub fn connections_per_export(&self, max_connections: usize) -> usize {
        match self.max_connections_per_export {
            Some(n) => n,
            None if self.exports.len() > 1 => (max_connections - max_connections / 4).max(1),
            None => 0,
        }
    }

    /// Parses and checks a configuration file's text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Config, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|e| ConfigError(format!("{source}: {e}")))?;
        config
            .check()
            .map_err(|e| ConfigError(format!("{source}: {e}")))?;
        Ok(config)
    }

    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Checks what no single field shows: names unique and usable, one key source per
    /// export, a credential's name that stays in its directory, TLS subjects only with
    /// verified client certificates, something to serve.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.exports.is_empty() {
            return err("no [[export]]: nothing to serve");
        }
        for l in &self.listen {
            check_listen(l)?;
        }
        if let Some(m) = &self.metrics {
            m.parse::<Endpoint>()
                .map_err(|e| ConfigError(format!("metrics: {e}")))?;
        }
        let mut seen = BTreeSet::new();
        for e in &self.exports {
            check_name(&e.name)?;
            if !seen.insert(e.name.as_str()) {
                return err(format!("export {:?} is named twice", e.name));
            }
            if e.image.is_empty() {
                return err(format!("export {:?}: image is empty", e.name));
            }
            // The credential's directory is any; a name with a `/` would leave it.
            if let Some(c) = &e.credential {
                if c.is_empty() || c.contains('/') || c == "." || c == ".." {
                    return err(format!(
                        "export {:?}: credential {c:?} is not a credential's name",
                        e.name
                    ));
                }
            }
            e.key_source(Some(Path::new("/")))?;
            if e.tls_subjects.is_some() && !self.tls.as_ref().is_some_and(|t| t.verify_peer) {
                return err(format!(
                    "export {:?}: tls_subjects needs [tls] verify_peer = true (without client \
                     certificates there is no subject to check)",
                    e.name
                ));
            }
        }
        Ok(())
    }

    /// The export named `name`.
    pub fn export(&self, name: &str) -> Option<&Export> {
        self.exports.iter().find(|e| e.name == name)
    }
}

/// A listening address is a Unix socket's path (anything with a `/`) or a loopback
/// `HOST:PORT`: NBD carries plaintext, and TLS or a tunnel is what leaves the machine.
fn check_listen(l: &str) -> Result<(), ConfigError> {
    if l.contains('/') {
        return Ok(());
    }
    match l.parse::<std::net::SocketAddr>() {
        Ok(a) if a.ip().is_loopback() => Ok(()),
        Ok(a) => err(format!(
            "listen {a}: not a loopback address (the server listens on 127.0.0.1, ::1 or a \
             Unix socket)"
        )),
        Err(_) => err(format!(
            "listen {l:?}: neither a socket path nor HOST:PORT (like 127.0.0.1:10809)"
        )),
    }
}

/// An export name is printable text of at most [`MAX_NAME`] bytes: no control
/// characters (they would reach logs and terminals), not empty (the empty name is the
/// default export, which the gateway does not have).
fn check_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return err("an export's name is empty (clients ask for exports by name)");
    }
    if name.len() > MAX_NAME {
        return err(format!(
            "an export's name is {} bytes, more than NBD's {MAX_NAME}",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return err(format!("export name {name:?} holds a control character"));
    }
    Ok(())
}

/// What a reload would change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Exports only the new configuration has: opened and offered.
    pub added: Vec<String>,
    /// Exports only the old one has: no new clients, drained, flushed, closed.
    pub removed: Vec<String>,
    /// Exports whose access lists changed: applied to the next client.
    pub access: Vec<String>,
    /// Exports whose volume changed (image, header, key, read-only): refused, with the
    /// fields, while the export is served.
    pub refused: BTreeMap<String, Vec<&'static str>>,
    /// Whether the listening sockets, the metrics endpoint or TLS changed: these need a
    /// restart, and a reload keeps the old ones.
    pub server: Vec<&'static str>,
}

impl Changes {
    /// From the running configuration `old` to `new`.
    pub fn between(old: &Config, new: &Config) -> Changes {
        let mut c = Changes::default();
        for n in &new.exports {
            match old.export(&n.name) {
                None => c.added.push(n.name.clone()),
                Some(o) if o.volume_fields() != n.volume_fields() => {
                    c.refused.insert(n.name.clone(), changed_fields(o, n));
                }
                Some(o) => {
                    if (&o.allow_uids, &o.allow_gids, &o.tls_subjects)
                        != (&n.allow_uids, &n.allow_gids, &n.tls_subjects)
                    {
                        c.access.push(n.name.clone());
                    }
                }
            }
        }
        for o in &old.exports {
            if new.export(&o.name).is_none() {
                c.removed.push(o.name.clone());
            }
        }
        for (what, same) in [
            ("listen", old.listen == new.listen),
            ("metrics", old.metrics == new.metrics),
            ("tls", old.tls == new.tls),
            (
                "max_connections",
                old.max_connections == new.max_connections,
            ),
            (
                "max_connections_per_export",
                old.max_connections_per_export == new.max_connections_per_export,
            ),
        ] {
            if !same {
                c.server.push(what);
            }
        }
        c
    }
}

fn changed_fields(o: &Export, n: &Export) -> Vec<&'static str> {
    let mut f = Vec::new();
    let mut diff = |name, same: bool| {
        if !same {
            f.push(name);
        }
    };
    diff("image", o.image == n.image);
    diff("header", o.header == n.header);
    diff("key_file", o.key_file == n.key_file);
    diff("credential", o.credential == n.credential);
    diff("no_passphrase", o.no_passphrase == n.no_passphrase);
    diff(
        "keyfile_components",
        o.keyfile_components == n.keyfile_components,
    );
    diff("key_slot", o.key_slot == n.key_slot);
    diff("read_only", o.read_only == n.read_only);
    f
}

#[cfg(test)]
mod tests;
