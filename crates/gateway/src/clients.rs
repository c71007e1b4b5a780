//! The gateway's clients: the NBD server's [`Observer`], which keeps the connections in
//! their transmission phase (for `sectorcrypt status`: which export, who, since when),
//! counts them in their export's `connections` metrics, and writes the server's messages
//! and every connect and disconnect to the [`Log`]; and [`Counted`], the observer of a
//! server of one volume (`serve IMAGE --metrics`), which only counts its connections.

use crate::log::{Event, Level, Log, Source};
use sectorcrypt_nbd::{Connection, Observer, Peer};
use sectorcrypt_service::metrics::{ExportMetrics, Metrics};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// One connected client.
#[derive(Debug, Clone)]
struct Client {
    export: String,
    peer: Peer,
    tls: bool,
    since: SystemTime,
    /// Its export's metrics when it connected, which it leaves.
    counted: Option<Arc<ExportMetrics>>,
}

/// The clients connected now, by connection number.
#[derive(Debug)]
pub struct Clients {
    log: Arc<Log>,
    now: Mutex<BTreeMap<u64, Client>>,
    metrics: Option<Arc<Metrics>>,
}

impl Clients {
    /// No client yet; events go to `log`, and each client counts in its export's
    /// `connections` of `metrics`, when given.
    pub fn new(log: Arc<Log>, metrics: Option<Arc<Metrics>>) -> Clients {
        Clients {
            log,
            now: Mutex::default(),
            metrics,
        }
    }

    /// The clients of `export` now, as `status` shows them: `connection`, `peer` (an
    /// object: `uid`, `gid`, `pid` of a Unix-socket client, `address` of a TCP one,
    /// `tls_subject`), `tls`, `since` (RFC 3339).
    pub fn of(&self, export: &str) -> Vec<Value> {
        self.now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, c)| c.export == export)
            .map(|(id, c)| {
                json!({
                    "connection": id,
                    "peer": peer_json(&c.peer),
                    "tls": c.tls,
                    "since": crate::log::rfc3339(c.since),
                })
            })
            .collect()
    }

    /// The names of the exports with clients now (removed ones still draining included).
    pub fn exports(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|c| c.export.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// `peer` as a JSON object.
fn peer_json(peer: &Peer) -> Value {
    let mut v = json!({});
    if let Some(c) = peer.credentials {
        v["uid"] = c.uid.into();
        v["gid"] = c.gid.into();
        v["pid"] = c.pid.into();
    }
    if let Some(a) = peer.address {
        v["address"] = a.to_string().into();
    }
    if let Some(s) = &peer.tls_subject {
        v["tls_subject"] = s.clone().into();
    }
    v
}

impl Observer for Clients {
    fn message(&self, line: fmt::Arguments<'_>) {
        self.log.event(&Event::Message {
            source: Source::Nbd,
            level: Level::Info,
            text: line.to_string(),
        });
    }

    fn connected(&self, c: &Connection<'_>) {
        let counted = self.metrics.as_ref().and_then(|m| m.export(c.export));
        if let Some(m) = &counted {
            m.arrived();
        }
        self.now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                c.id,
                Client {
                    export: c.export.to_string(),
                    peer: c.peer.clone(),
                    tls: c.tls,
                    since: SystemTime::now(),
                    counted,
                },
            );
        self.log.event(&Event::Connect {
            id: c.id,
            export: c.export,
            peer: c.peer.to_string(),
            tls: c.tls,
        });
    }

    fn disconnected(&self, c: &Connection<'_>, error: Option<&io::Error>) {
        let gone = self
            .now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&c.id);
        if let Some(m) = gone.and_then(|g| g.counted) {
            m.left();
        }
        self.log.event(&Event::Disconnect {
            id: c.id,
            export: c.export,
            peer: c.peer.to_string(),
            tls: c.tls,
            error,
        });
    }
}

/// The observer of a server of one export (`serve IMAGE --metrics`): counts every
/// connection in the export's `connections` metrics, and writes the server's lines to
/// stderr as the server does without an observer (`sectorcrypt-nbd: LINE`).
#[derive(Debug)]
pub struct Counted {
    metrics: Arc<ExportMetrics>,
}

impl Counted {
    /// Counts the connections into `metrics`.
    pub fn new(metrics: Arc<ExportMetrics>) -> Counted {
        Counted { metrics }
    }
}

impl Observer for Counted {
    fn message(&self, line: fmt::Arguments<'_>) {
        eprintln!("sectorcrypt-nbd: {line}");
    }

    fn connected(&self, _: &Connection<'_>) {
        self.metrics.arrived();
    }

    fn disconnected(&self, _: &Connection<'_>, _: Option<&io::Error>) {
        self.metrics.left();
    }
}
