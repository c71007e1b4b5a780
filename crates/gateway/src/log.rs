//! The gateway's log: one line per event on standard error (connect, disconnect, error,
//! reload, and the server's other messages), as text (the default, the lines `serve`
//! has always written) or as JSON (`--log-format json`: one object per line, for a log
//! collector).
//!
//! A JSON line always has `ts` (UTC, RFC 3339 with milliseconds) and `event`:
//! - `connect`, `disconnect`: `export`, `peer` (`uid 1000 gid 1000 pid 42`, a TCP
//!   address, and the TLS certificate's subject when there is one), `connection` (the
//!   number the server's messages give), `tls`; a disconnect for an error adds `errno`
//!   (when the error has one) and `message`;
//! - `error`: a request an export failed: `export`, `op`, `errno`, `message`, and
//!   `suppressed` (how many more failed since the last line: at most one line per export
//!   and second);
//! - `reload`: `config`, `ok`, `message` (what changed, or why nothing did), `added`,
//!   `removed`, `refused`, `failed` (export names);
//! - `message`: anything else, with `source` (`gateway` or `nbd`), `level` and `message`.
//!
//! No line carries a secret: exports are named, volumes shown as their redacted
//! locators, and key sources never read into a message.

use serde_json::{json, Map, Value};
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// How the log's lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `sectorcrypt: ...` lines for people.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<LogFormat, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("unknown log format {s:?}: text or json")),
        }
    }
}

/// Where a message comes from: its text line's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The gateway (`sectorcrypt: `).
    Gateway,
    /// The NBD server (`sectorcrypt-nbd: `).
    Nbd,
}

/// How much a message matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something done.
    Info,
    /// Something the operator should look at (`warning: ` in text).
    Warning,
}

/// One thing that happened.
#[derive(Debug)]
pub enum Event<'a> {
    /// Any other line.
    Message {
        source: Source,
        level: Level,
        text: String,
    },
    /// A client started its transmission phase on an export.
    Connect {
        id: u64,
        export: &'a str,
        peer: String,
        tls: bool,
    },
    /// That client left (`error`: why, when it was an error).
    Disconnect {
        id: u64,
        export: &'a str,
        peer: String,
        tls: bool,
        error: Option<&'a io::Error>,
    },
    /// A request an export failed with `errno`.
    Error {
        export: &'a str,
        op: &'static str,
        errno: i32,
        message: String,
        suppressed: u64,
    },
    /// The configuration was read again.
    Reload {
        config: String,
        ok: bool,
        message: String,
        added: Vec<String>,
        removed: Vec<String>,
        refused: Vec<String>,
        failed: Vec<String>,
    },
}

/// The log: a format and where lines go (standard error, or a writer for tests).
pub struct Log {
    format: LogFormat,
    out: Mutex<Box<dyn Write + Send>>,
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Log")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Lines on standard error.
    pub fn stderr(format: LogFormat) -> Log {
        Log::to(format, Box::new(io::stderr()))
    }

    /// Lines into `out`.
    pub fn to(format: LogFormat, out: Box<dyn Write + Send>) -> Log {
        Log {
            format,
            out: Mutex::new(out),
        }
    }

    /// The format.
    pub fn format(&self) -> LogFormat {
        self.format
    }

    /// A message of the gateway's.
    pub fn info(&self, text: impl Into<String>) {
        self.event(&Event::Message {
            source: Source::Gateway,
            level: Level::Info,
            text: text.into(),
        });
    }

    /// A warning of the gateway's.
    pub fn warning(&self, text: impl Into<String>) {
        self.event(&Event::Message {
            source: Source::Gateway,
            level: Level::Warning,
            text: text.into(),
        });
    }

    /// Writes `e` as one line (nothing for a connect or disconnect in text: the NBD
    /// server's own messages say those). A line that cannot be written is dropped: in
    /// the background nobody may be reading.
    pub fn event(&self, e: &Event<'_>) {
        let line = match self.format {
            LogFormat::Text => match text(e) {
                Some(l) => l,
                None => return,
            },
            LogFormat::Json => json_line(e, SystemTime::now()),
        };
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// The text line of `e`, if it has one.
fn text(e: &Event<'_>) -> Option<String> {
    Some(match e {
        Event::Message {
            source,
            level,
            text,
        } => {
            let prefix = match source {
                Source::Gateway => "sectorcrypt",
                Source::Nbd => "sectorcrypt-nbd",
            };
            let warn = match level {
                Level::Warning => "warning: ",
                Level::Info => "",
            };
            format!("{prefix}: {warn}{text}")
        }
        Event::Connect { .. } | Event::Disconnect { .. } => return None,
        Event::Error {
            export,
            op,
            errno,
            message,
            suppressed,
        } => {
            let more = match suppressed {
                0 => String::new(),
                n => format!(" ({n} more failed since the last line)"),
            };
            format!("sectorcrypt: export {export:?}: {op} failed: errno {errno} ({message}){more}")
        }
        Event::Reload {
            config, message, ..
        } => format!("sectorcrypt: reload of {config}: {message}"),
    })
}

/// The JSON line of `e` at `now`.
fn json_line(e: &Event<'_>, now: SystemTime) -> String {
    let mut m = Map::new();
    m.insert("ts".into(), rfc3339(now).into());
    let rest = match e {
        Event::Message {
            source,
            level,
            text,
        } => json!({
            "event": "message",
            "source": match source { Source::Gateway => "gateway", Source::Nbd => "nbd" },
            "level": match level { Level::Info => "info", Level::Warning => "warning" },
            "message": text,
        }),
        Event::Connect {
            id,
            export,
            peer,
            tls,
        } => json!({
            "event": "connect", "export": export, "peer": peer, "connection": id, "tls": tls,
        }),
        Event::Disconnect {
            id,
            export,
            peer,
            tls,
            error,
        } => {
            let mut v = json!({
                "event": "disconnect", "export": export, "peer": peer, "connection": id,
                "tls": tls,
            });
            if let Some(err) = error {
                v["message"] = err.to_string().into();
                if let Some(n) = err.raw_os_error() {
                    v["errno"] = n.into();
                }
            }
            v
        }
        Event::Error {
            export,
            op,
            errno,
            message,
            suppressed,
        } => json!({
            "event": "error", "export": export, "op": op, "errno": errno, "message": message,
            "suppressed": suppressed,
        }),
        Event::Reload {
            config,
            ok,
            message,
            added,
            removed,
            refused,
            failed,
        } => json!({
            "event": "reload", "config": config, "ok": ok, "message": message,
            "added": added, "removed": removed, "refused": refused, "failed": failed,
        }),
    };
    if let Value::Object(rest) = rest {
        m.extend(rest);
    }
    Value::Object(m).to_string()
}

/// `t` as RFC 3339 in UTC with milliseconds (`2026-11-28T13:05:09.042Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, mo, d) = civil(days as i64);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01: (year, month, day). Counted in
/// 400-year eras of 146 097 days, each starting on 1 March so that the leap day ends
/// its year.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of the era, 0..146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of the era
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from 1 March
    let mp = (5 * doy + 2) / 153; // month from March, 0..11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_rfc3339_with_milliseconds() {
        let at = |s: u64, ms: u64| {
            rfc3339(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        // `date -u -d @951782400` (a leap day of a year divisible by 400).
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(951_868_799, 999), "2000-02-29T23:59:59.999Z");
        // `date -u -d @1795870800`.
        assert_eq!(at(1_795_870_800, 0), "2026-11-28T13:00:00.000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
    }

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_are_one_object_each_with_ts_event_export_and_peer() {
        let lines = Lines::default();
        let log = Log::to(LogFormat::Json, Box::new(lines.clone()));
        let broken = io::Error::from_raw_os_error(104);
        log.event(&Event::Connect {
            id: 3,
            export: "vm\"1",
            peer: "uid 1000 gid 1000 pid 42".into(),
            tls: false,
        });
        log.event(&Event::Disconnect {
            id: 3,
            export: "vm\"1",
            peer: "uid 1000 gid 1000 pid 42".into(),
            tls: false,
            error: Some(&broken),
        });
        log.info("a message\nwith a newline");
        let out = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let v: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v.len(), 3, "{out}");
        assert_eq!(v[0]["event"], "connect");
        assert_eq!(v[0]["export"], "vm\"1");
        assert_eq!(v[0]["peer"], "uid 1000 gid 1000 pid 42");
        assert!(v[0]["ts"].as_str().unwrap().ends_with('Z'));
        assert_eq!(v[1]["event"], "disconnect");
        assert_eq!(v[1]["errno"], 104);
        assert_eq!(v[2]["message"], "a message\nwith a newline");
    }

    #[test]
    fn text_lines_keep_their_prefixes_and_leave_connections_to_the_server() {
        let lines = Lines::default();
        let log = Log::to(LogFormat::Text, Box::new(lines.clone()));
        log.warning("careful");
        log.event(&Event::Message {
            source: Source::Nbd,
            level: Level::Info,
            text: "serving".into(),
        });
        log.event(&Event::Connect {
            id: 1,
            export: "a",
            peer: "x".into(),
            tls: false,
        });
        let out = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            out,
            "sectorcrypt: warning: careful\nsectorcrypt-nbd: serving\n"
        );
    }
}
