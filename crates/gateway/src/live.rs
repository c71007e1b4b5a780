//! The running gateway: the exports a server offers, as an [`Exports`] whose table a
//! reload replaces while clients are connected.
//!
//! A reload ([`Gateway::reload`]) compares the running configuration with the new one
//! ([`Changes::between`]) and builds the next table from the running one:
//! - exports only the new configuration has are opened and offered (one that cannot be
//!   opened is left out, and said);
//! - exports it no longer has are dropped from the table: no new client gets them, their
//!   clients keep them until they leave, and the server flushes and closes each once its
//!   last client has left (`sectorcrypt_nbd::ExportsHandle::release_unoffered` for the
//!   ones nobody uses at the time);
//! - exports whose access lists changed keep their volume, and the next client is judged
//!   by the new lists (a client connected already keeps its connection);
//! - exports whose volume changed (image, header, key, read-only) are refused: the running
//!   export stays as it was, and the refusal names the fields;
//! - unchanged exports are the same objects in the next table: their clients notice
//!   nothing;
//! - the listening sockets, the metrics endpoint and TLS are the server's, kept as they
//!   are until a restart.
//!
//! A handshake looks its export up in the table of the moment: the old table, if it began
//! before the swap, which is as if it had connected a moment earlier.

use crate::clients::Clients;
use crate::config::{Changes, Config, Export};
use crate::log::{Event, Log};
use crate::table::{self, OpenError, Opened, OpenedExport, Options};
use sectorcrypt_nbd::{ExportTable, Exports, Found, Listing, Peer};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// The exports a gateway offers now, and how to open more.
pub struct Gateway {
    /// What clients look up; replaced whole by a reload.
    table: RwLock<Arc<ExportTable>>,
    /// The running configuration (with refused changes left out) and its open exports;
    /// one reload at a time.
    running: Mutex<Running>,
    opts: Options,
}

struct Running {
    config: Config,
    opened: BTreeMap<String, OpenedExport>,
}

impl fmt::Debug for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// What the comparison found.
    pub changes: Changes,
    /// The exports opened and offered.
    pub added: Vec<Opened>,
    /// New exports that could not be opened (left out).
    pub failed: Vec<OpenError>,
}

impl fmt::Display for Reloaded {
    /// One clause per kind of change, `; `-separated ("no change" for none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.changes;
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            let names: Vec<_> = self.added.iter().map(|o| format!("{:?}", o.name)).collect();
            parts.push(format!("added {}", names.join(", ")));
        }
        for e in &self.failed {
            parts.push(format!("not added: {e}"));
        }
        if !c.removed.is_empty() {
            parts.push(format!(
                "removed {} (no new clients; each is flushed and closed once its last client \
                 has left)",
                quoted(&c.removed)
            ));
        }
        if !c.access.is_empty() {
            parts.push(format!(
                "new access lists for {} (from the next client on)",
                quoted(&c.access)
            ));
        }
        for (name, fields) in &c.refused {
            parts.push(format!(
                "export {name:?}: refused the change of {} (a served volume cannot change \
                 under its clients: remove the export, reload, add it again, reload); it is \
                 served as before",
                fields.join(", ")
            ));
        }
        if !c.server.is_empty() {
            parts.push(format!(
                "{} changed: kept as they are until a restart",
                c.server.join(", ")
            ));
        }
        if parts.is_empty() {
            parts.push("no change".into());
        }
        f.write_str(&parts.join("; "))
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Gateway {
    /// Opens every export of `config` (as [`table::build`]: one that cannot be opened
    /// fails the whole, and the ones opened before it are closed again).
    pub fn open(config: Config, opts: Options) -> Result<(Gateway, Vec<Opened>), OpenError> {
        let mut opened = BTreeMap::new();
        let mut infos = Vec::with_capacity(config.exports.len());
        for e in &config.exports {
            let one = table::open_one(e, &opts)?;
            infos.push(one.opened.clone());
            opened.insert(e.name.clone(), one);
        }
        let table = assemble(&config.exports, &opened)?;
        let gateway = Gateway {
            table: RwLock::new(Arc::new(table)),
            running: Mutex::new(Running { config, opened }),
            opts,
        };
        Ok((gateway, infos))
    }

    /// Applies `new` as far as it can be applied to a running server (see the module's
    /// documentation).
    pub fn reload(&self, new: &Config) -> Reloaded {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let changes = Changes::between(&running.config, new);
        let mut done = Reloaded::default();
        // The next configuration: the new one's exports in its order, with a refused
        // change replaced by the running export, and a new export that fails left out.
        let mut next: Vec<Export> = Vec::with_capacity(new.exports.len());
        let mut opened = BTreeMap::new();
        for e in &new.exports {
            if changes.refused.contains_key(&e.name) {
                let old = running
                    .config
                    .export(&e.name)
                    .expect("a refused export runs");
                next.push(old.clone());
                opened.insert(e.name.clone(), running.opened[&e.name].clone());
            } else if let Some(one) = running.opened.get(&e.name) {
                next.push(e.clone());
                opened.insert(e.name.clone(), one.clone());
            } else {
                match table::open_one(e, &self.opts) {
                    Ok(one) => {
                        done.added.push(one.opened.clone());
                        next.push(e.clone());
                        opened.insert(e.name.clone(), one);
                    }
                    Err(err) => done.failed.push(err),
                }
            }
        }
        let table = match assemble(&next, &opened) {
            Ok(t) => t,
            Err(err) => {
                // Unreachable after Config::check; the running table stays.
                done.failed.push(err);
                done.changes = changes;
                return done;
            }
        };
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
        if let Some(m) = &self.opts.metrics {
            for name in &changes.removed {
                m.remove(name);
            }
        }
        let kept = Config {
            exports: next,
            ..running.config.clone()
        };
        *running = Running {
            config: kept,
            opened,
        };
        done.changes = changes;
        done
    }

    /// Reads `path` again and applies it ([`Gateway::reload`]), `starting` called once
    /// the file is read and checked; logs the outcome as a `reload` event and gives it
    /// as JSON: `ok`, `message`, and the names `added`, `removed`, `refused`, `failed`.
    /// A file that does not read or check changes nothing (`ok` false).
    pub fn reload_from(&self, path: &Path, log: &Log, starting: &dyn Fn()) -> Value {
        let config = path.display().to_string();
        let (ok, message, names) = match Config::load(path) {
            Err(e) => (
                false,
                format!("refused: {e}; the running exports stay"),
                [Vec::new(), Vec::new(), Vec::new(), Vec::new()],
            ),
            Ok(new) => {
                starting();
                let done = self.reload(&new);
                let names = [
                    done.added.iter().map(|o| o.name.clone()).collect(),
                    done.changes.removed.clone(),
                    done.changes.refused.keys().cloned().collect(),
                    done.failed.iter().map(|e| e.export.clone()).collect(),
                ];
                (true, done.to_string(), names)
            }
        };
        let [added, removed, refused, failed] = names;
        let answer = json!({
            "ok": ok, "config": config, "message": message, "added": added,
            "removed": removed, "refused": refused, "failed": failed,
        });
        log.event(&Event::Reload {
            config,
            ok,
            message,
            added,
            removed,
            refused,
            failed,
        });
        answer
    }

    /// What the gateway serves, for `sectorcrypt status`: `{"exports": [...]}`, each
    /// export with its `name`, `locator` and `header` (redacted: no password of a URI),
    /// `key` (where its passphrase comes from: `key_file`, `credential` or `none`; never
    /// the key), `format`, `cipher`, `size`, `read_only`, `access` (its lists),
    /// `offered` (false for one a reload removed that still has clients), its
    /// `clients` ([`Clients::of`]) and, when its requests are counted, `requests`,
    /// `bytes_read`, `bytes_written`, `errors`, `in_flight`.
    pub fn status(&self, clients: &Clients) -> Value {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let mut exports = Vec::new();
        for e in &running.config.exports {
            let o = &running.opened[&e.name].opened;
            let key = if e.key_file.is_some() {
                "key_file"
            } else if e.credential.is_some() {
                "credential"
            } else {
                "none"
            };
            let mut v = json!({
                "name": e.name,
                "offered": true,
                "locator": sectorcrypt_image::redacted(Path::new(&e.image)),
                "header": e.header.as_deref().map(sectorcrypt_image::redacted),
                "key": key,
                "format": o.format,
                "cipher": o.cipher,
                "size": o.size,
                "read_only": o.read_only,
                "access": {
                    "uids": e.allow_uids, "gids": e.allow_gids, "tls_subjects": e.tls_subjects,
                },
                "clients": clients.of(&e.name),
            });
            self.add_totals(&mut v, &e.name);
            exports.push(v);
        }
        for name in clients.exports() {
            if running.config.export(&name).is_none() {
                let mut v = json!({
                    "name": name, "offered": false, "clients": clients.of(&name),
                });
                self.add_totals(&mut v, &name);
                exports.push(v);
            }
        }
        json!({ "exports": exports })
    }

    /// Adds export `name`'s counters to `v`, when they are counted.
    fn add_totals(&self, v: &mut Value, name: &str) {
        let Some(m) = self.opts.metrics.as_ref().and_then(|m| m.export(name)) else {
            return;
        };
        let t = m.totals();
        v["requests"] = t.requests.into();
        v["bytes_read"] = t.bytes_read.into();
        v["bytes_written"] = t.bytes_written.into();
        v["errors"] = t.errors.into();
        v["in_flight"] = t.in_flight.into();
    }

    fn current(&self) -> Arc<ExportTable> {
        self.table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The table of `exports`, each with the volume `opened` holds for it.
fn assemble(
    exports: &[Export],
    opened: &BTreeMap<String, OpenedExport>,
) -> Result<ExportTable, OpenError> {
    let mut table = ExportTable::new();
    for e in exports {
        table::add(&mut table, e, &opened[&e.name])?;
    }
    Ok(table)
}

impl Exports for Gateway {
    fn list(&self, peer: &Peer) -> Vec<Listing> {
        self.current().list(peer)
    }

    fn lookup(&self, name: &str, peer: &Peer) -> Option<Found> {
        self.current().lookup(name, peer)
    }
}
