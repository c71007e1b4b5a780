//! Per-export counters and latency histograms, and their Prometheus text.
//!
//! The data path only adds to counters. Each export keeps one shard of counters per
//! thread slot, aligned to its own cache lines: a thread always adds to the same shard,
//! so two threads serving requests never write to one cache line (no shared counter on
//! the data path; see docs/PERFORMANCE.md). A scrape sums the shards. Gauges that change
//! per connection (connections open) are single atomics: they move once per connection,
//! not per request.
//!
//! Names (all prefixed `sectorcrypt_`), labels `export`, `type` (`read`, `write`,
//! `flush`, `trim`, `write_zeroes`, `cache`, `block_status`) and `errno`:
//! - `requests_total`, `bytes_total` (read and write payloads), `request_errors_total`;
//! - `request_duration_seconds` histograms for reads, writes and flushes;
//! - `requests_in_flight`, `connections`, `connections_total`;
//! - `key_derivation_seconds` (the time the export's key took to unlock);
//! - `info{version, backend}` (the crypto backend chosen), always 1.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request's type, as NBD names its commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// NBD_CMD_READ.
    Read,
    /// NBD_CMD_WRITE.
    Write,
    /// NBD_CMD_FLUSH.
    Flush,
    /// NBD_CMD_TRIM.
    Trim,
    /// NBD_CMD_WRITE_ZEROES.
    WriteZeroes,
    /// NBD_CMD_CACHE.
    Cache,
    /// NBD_CMD_BLOCK_STATUS.
    BlockStatus,
}

const OPS: [Op; 7] = [
    Op::Read,
    Op::Write,
    Op::Flush,
    Op::Trim,
    Op::WriteZeroes,
    Op::Cache,
    Op::BlockStatus,
];

impl Op {
    fn label(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
            Op::WriteZeroes => "write_zeroes",
            Op::Cache => "cache",
            Op::BlockStatus => "block_status",
        }
    }

    /// Its histogram, for the three types that have one.
    fn timed(self) -> Option<usize> {
        match self {
            Op::Read => Some(0),
            Op::Write => Some(1),
            Op::Flush => Some(2),
            _ => None,
        }
    }
}

/// The errors an NBD server answers with (the protocol's list), then any other.
const ERRNOS: [(i32, &str); 8] = [
    (1, "EPERM"),
    (5, "EIO"),
    (12, "ENOMEM"),
    (22, "EINVAL"),
    (28, "ENOSPC"),
    (75, "EOVERFLOW"),
    (95, "ENOTSUP"),
    (108, "ESHUTDOWN"),
];
const OTHER_ERRNO: usize = ERRNOS.len();

/// The histograms' upper bounds in seconds: from 50 µs (a cached 4 KiB read) to 10 s (a
/// flush behind a slow store).
pub const BUCKETS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 10.0,
];

/// One thread slot's counters for one export, on cache lines of its own.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Shard {
    requests: [AtomicU64; OPS.len()],
    bytes: [AtomicU64; OPS.len()],
    errors: [AtomicU64; ERRNOS.len() + 1],
    in_flight: AtomicI64,
    /// Per timed type: counts per bucket (the last for above every bound), nanoseconds.
    buckets: [[AtomicU64; BUCKETS.len() + 1]; 3],
    nanos: [AtomicU64; 3],
}

/// The slot of the calling thread: given in order of first use.
fn slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Relaxed);
    }
    SLOT.with(|s| *s)
}

/// One export's metrics. Cheap to update from many threads at once.
#[derive(Debug)]
pub struct ExportMetrics {
    name: String,
    shards: Box<[Shard]>,
    connections: AtomicI64,
    connections_total: AtomicU64,
    kdf_nanos: AtomicU64,
    /// An online re-encryption: bytes under the new key, and of the whole data area
    /// (0: none runs).
    reencrypted: AtomicU64,
    reencrypt_size: AtomicU64,
}

impl ExportMetrics {
    /// Metrics for the export `name`, with a shard per thread slot for `threads` threads
    /// at once (more threads share shards: still correct, just less spread).
    pub fn new(name: &str, threads: usize) -> ExportMetrics {
        ExportMetrics {
            name: name.to_string(),
            shards: (0..threads.clamp(1, 512))
                .map(|_| Shard::default())
                .collect(),
            connections: AtomicI64::new(0),
            connections_total: AtomicU64::new(0),
            kdf_nanos: AtomicU64::new(0),
            reencrypted: AtomicU64::new(0),
            reencrypt_size: AtomicU64::new(0),
        }
    }

    /// The export's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn shard(&self) -> &Shard {
        &self.shards[slot() % self.shards.len()]
    }

    /// A request has arrived; it stays in `requests_in_flight` until the guard drops.
    pub fn begin(&self) -> InFlight<'_> {
        let shard = self.shard();
        shard.in_flight.fetch_add(1, Relaxed);
        InFlight(shard)
    }

    /// A request has completed: its type, its payload's bytes (reads and writes), how
    /// long it took, and the errno it failed with (0 for success).
    pub fn record(&self, op: Op, bytes: u64, took: Duration, errno: i32) {
        let s = self.shard();
        let i = op as usize;
        s.requests[i].fetch_add(1, Relaxed);
        if errno != 0 {
            let e = ERRNOS
                .iter()
                .position(|&(n, _)| n == errno)
                .unwrap_or(OTHER_ERRNO);
            s.errors[e].fetch_add(1, Relaxed);
        } else {
            s.bytes[i].fetch_add(bytes, Relaxed);
        }
        if let Some(t) = op.timed() {
            let secs = took.as_secs_f64();
            let b = BUCKETS
                .iter()
                .position(|&le| secs <= le)
                .unwrap_or(BUCKETS.len());
            s.buckets[t][b].fetch_add(1, Relaxed);
            s.nanos[t].fetch_add(took.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
        }
    }

    /// A client has connected; it counts in `connections` until the guard drops.
    pub fn connected(&self) -> Connection<'_> {
        self.connections.fetch_add(1, Relaxed);
        self.connections_total.fetch_add(1, Relaxed);
        Connection(self)
    }

    /// A client has connected: counted in `connections` until [`ExportMetrics::left`]
    /// (for an observer told of the end elsewhere than where the connection began, which
    /// cannot hold the guard of [`ExportMetrics::connected`]).
    pub fn arrived(&self) {
        self.connections.fetch_add(1, Relaxed);
        self.connections_total.fetch_add(1, Relaxed);
    }

    /// A client [`ExportMetrics::arrived`] told of has left.
    pub fn left(&self) {
        self.connections.fetch_sub(1, Relaxed);
    }

    /// The time the export's key derivation took.
    pub fn key_derived(&self, took: Duration) {
        self.kdf_nanos
            .store(took.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }

    /// Where an online re-encryption of the export stands: `done` of `total` bytes
    /// under the new key.
    pub fn reencryption(&self, done: u64, total: u64) {
        self.reencrypted.store(done, Relaxed);
        self.reencrypt_size.store(total, Relaxed);
    }

    /// What the export has done so far (summed over its shards).
    pub fn totals(&self) -> Totals {
        let all = |f: &dyn Fn(&Shard) -> &[AtomicU64]| -> u64 {
            self.shards
                .iter()
                .map(|s| f(s).iter().map(|a| a.load(Relaxed)).sum::<u64>())
                .sum()
        };
        Totals {
            requests: all(&|s| &s.requests[..]),
            bytes_read: self.sum(|s| &s.bytes[Op::Read as usize]),
            bytes_written: self.sum(|s| &s.bytes[Op::Write as usize]),
            errors: all(&|s| &s.errors[..]),
            in_flight: self
                .shards
                .iter()
                .map(|s| s.in_flight.load(Relaxed))
                .sum::<i64>()
                .max(0) as u64,
        }
    }

    fn sum(&self, f: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards.iter().map(|s| f(s).load(Relaxed)).sum()
    }
}

/// An export's counters summed: [`ExportMetrics::totals`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Requests completed, of every type, failed ones included.
    pub requests: u64,
    /// Payload bytes read (by requests that succeeded).
    pub bytes_read: u64,
    /// Payload bytes written (by requests that succeeded).
    pub bytes_written: u64,
    /// Requests failed.
    pub errors: u64,
    /// Requests in flight now.
    pub in_flight: u64,
}

/// A request in flight (see [`ExportMetrics::begin`]).
#[derive(Debug)]
pub struct InFlight<'a>(&'a Shard);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// A connected client (see [`ExportMetrics::connected`]).
#[derive(Debug)]
pub struct Connection<'a>(&'a ExportMetrics);

impl Drop for Connection<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Relaxed);
    }
}

/// Every export's metrics and the process' facts, written out on a scrape.
#[derive(Debug)]
pub struct Metrics {
    backend: String,
    exports: Mutex<Vec<Arc<ExportMetrics>>>,
}

impl Metrics {
    /// Metrics of a process whose crypto backend is `backend`.
    pub fn new(backend: &str) -> Metrics {
        Metrics {
            backend: backend.to_string(),
            exports: Mutex::new(Vec::new()),
        }
    }

    /// Adds an export (its series appear on the next scrape).
    pub fn add(&self, export: Arc<ExportMetrics>) {
        self.exports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(export);
    }

    /// The export named `name`'s metrics, if it has some.
    pub fn export(&self, name: &str) -> Option<Arc<ExportMetrics>> {
        self.exports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|e| e.name == name)
            .cloned()
    }

    /// Removes the export named `name` (its series disappear).
    pub fn remove(&self, name: &str) {
        self.exports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| e.name != name);
    }

    /// The Prometheus text exposition (format 0.0.4) of everything.
    pub fn render(&self) -> String {
        let exports = self
            .exports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut out = String::new();
        family(
            &mut out,
            "info",
            "gauge",
            "The build and the crypto backend chosen.",
        );
        let _ = writeln!(
            out,
            "sectorcrypt_info{{version=\"{}\",backend=\"{}\"}} 1",
            escape(env!("CARGO_PKG_VERSION")),
            escape(&self.backend)
        );
        family(&mut out, "requests_total", "counter", "Requests completed.");
        for e in &exports {
            for op in OPS {
                let n = e.sum(|s| &s.requests[op as usize]);
                series(&mut out, "requests_total", e, Some(op), "", n as f64);
            }
        }
        family(
            &mut out,
            "bytes_total",
            "counter",
            "Payload bytes read and written.",
        );
        for e in &exports {
            for op in [Op::Read, Op::Write] {
                let n = e.sum(|s| &s.bytes[op as usize]);
                series(&mut out, "bytes_total", e, Some(op), "", n as f64);
            }
        }
        family(
            &mut out,
            "request_errors_total",
            "counter",
            "Requests that failed, by errno.",
        );
        for e in &exports {
            for (i, name) in ERRNOS.iter().map(|&(_, n)| n).chain(["other"]).enumerate() {
                let n = e.sum(|s| &s.errors[i]);
                let extra = format!(",errno=\"{name}\"");
                series(&mut out, "request_errors_total", e, None, &extra, n as f64);
            }
        }
        family(
            &mut out,
            "request_duration_seconds",
            "histogram",
            "Time from a request's arrival to its reply.",
        );
        for e in &exports {
            for op in [Op::Read, Op::Write, Op::Flush] {
                histogram(&mut out, e, op);
            }
        }
        family(
            &mut out,
            "requests_in_flight",
            "gauge",
            "Requests received and not yet answered.",
        );
        for e in &exports {
            let n: i64 = e.shards.iter().map(|s| s.in_flight.load(Relaxed)).sum();
            series(&mut out, "requests_in_flight", e, None, "", n.max(0) as f64);
        }
        family(&mut out, "connections", "gauge", "Clients connected.");
        for e in &exports {
            let n = e.connections.load(Relaxed).max(0);
            series(&mut out, "connections", e, None, "", n as f64);
        }
        family(
            &mut out,
            "connections_total",
            "counter",
            "Clients that connected.",
        );
        for e in &exports {
            let n = e.connections_total.load(Relaxed);
            series(&mut out, "connections_total", e, None, "", n as f64);
        }
        family(
            &mut out,
            "key_derivation_seconds",
            "gauge",
            "How long unlocking the export's key took.",
        );
        for e in &exports {
            let s = e.kdf_nanos.load(Relaxed) as f64 / 1e9;
            series(&mut out, "key_derivation_seconds", e, None, "", s);
        }
        let reencrypting: Vec<_> = exports
            .iter()
            .filter(|e| e.reencrypt_size.load(Relaxed) > 0)
            .collect();
        if !reencrypting.is_empty() {
            family(
                &mut out,
                "reencrypted_bytes",
                "gauge",
                "Bytes of the data area under the new key during an online re-encryption.",
            );
            for e in &reencrypting {
                let n = e.reencrypted.load(Relaxed) as f64;
                series(&mut out, "reencrypted_bytes", e, None, "", n);
            }
            family(
                &mut out,
                "reencryption_size_bytes",
                "gauge",
                "Bytes of the data area an online re-encryption covers.",
            );
            for e in &reencrypting {
                let n = e.reencrypt_size.load(Relaxed) as f64;
                series(&mut out, "reencryption_size_bytes", e, None, "", n);
            }
        }
        out
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP sectorcrypt_{name} {help}");
    let _ = writeln!(out, "# TYPE sectorcrypt_{name} {kind}");
}

fn series(out: &mut String, name: &str, e: &ExportMetrics, op: Option<Op>, extra: &str, v: f64) {
    let op = op
        .map(|o| format!(",type=\"{}\"", o.label()))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "sectorcrypt_{name}{{export=\"{}\"{op}{extra}}} {v}",
        escape(&e.name)
    );
}

fn histogram(out: &mut String, e: &ExportMetrics, op: Op) {
    let t = op.timed().expect("a timed type");
    let labels = format!("export=\"{}\",type=\"{}\"", escape(&e.name), op.label());
    let mut cumulative = 0u64;
    for (b, le) in BUCKETS.iter().enumerate() {
        cumulative += e.sum(|s| &s.buckets[t][b]);
        let _ = writeln!(
            out,
            "sectorcrypt_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
        );
    }
    cumulative += e.sum(|s| &s.buckets[t][BUCKETS.len()]);
    let _ = writeln!(
        out,
        "sectorcrypt_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {cumulative}"
    );
    let secs = e.sum(|s| &s.nanos[t]) as f64 / 1e9;
    let _ = writeln!(
        out,
        "sectorcrypt_request_duration_seconds_sum{{{labels}}} {secs}"
    );
    let _ = writeln!(
        out,
        "sectorcrypt_request_duration_seconds_count{{{labels}}} {cumulative}"
    );
}

/// A label value as the text format wants it: backslash, double quote and newline
/// escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sectorcrypt_testkit::metric as value;

    #[test]
    fn requests_from_many_threads_add_up() {
        let m = Metrics::new("vaes");
        let e = Arc::new(ExportMetrics::new("disk", 4));
        m.add(e.clone());
        std::thread::scope(|s| {
            for _ in 0..8 {
                let e = &e;
                s.spawn(move || {
                    for _ in 0..1000 {
                        let _g = e.begin();
                        e.record(Op::Read, 4096, Duration::from_micros(70), 0);
                        e.record(Op::Write, 512, Duration::from_millis(3), 0);
                    }
                    e.record(Op::Write, 512, Duration::from_secs(20), 28);
                });
            }
        });
        let t = m.render();
        let read = "sectorcrypt_requests_total{export=\"disk\",type=\"read\"}";
        assert_eq!(value(&t, read), 8000.0);
        let write = "sectorcrypt_requests_total{export=\"disk\",type=\"write\"}";
        assert_eq!(value(&t, write), 8008.0);
        let bytes = "sectorcrypt_bytes_total{export=\"disk\",type=\"read\"}";
        assert_eq!(value(&t, bytes), 8000.0 * 4096.0);
        let bytes = "sectorcrypt_bytes_total{export=\"disk\",type=\"write\"}";
        assert_eq!(
            value(&t, bytes),
            8000.0 * 512.0,
            "failed writes carry no bytes"
        );
        let enospc = "sectorcrypt_request_errors_total{export=\"disk\",errno=\"ENOSPC\"}";
        assert_eq!(value(&t, enospc), 8.0);
        let totals = m.export("disk").expect("the export is there").totals();
        assert_eq!(
            totals,
            Totals {
                requests: 16_008,
                bytes_read: 8000 * 4096,
                bytes_written: 8000 * 512,
                errors: 8,
                in_flight: 0,
            }
        );
        assert!(m.export("other").is_none());
        let b = "sectorcrypt_request_duration_seconds_bucket{export=\"disk\",type=\"read\",le=\"0.0001\"}";
        assert_eq!(value(&t, b), 8000.0);
        let b = "sectorcrypt_request_duration_seconds_bucket{export=\"disk\",type=\"read\",le=\"0.00005\"}";
        assert_eq!(value(&t, b), 0.0);
        let b =
            "sectorcrypt_request_duration_seconds_bucket{export=\"disk\",type=\"write\",le=\"10\"}";
        assert_eq!(value(&t, b), 8000.0, "20 s is above every bound");
        let b = "sectorcrypt_request_duration_seconds_bucket{export=\"disk\",type=\"write\",le=\"+Inf\"}";
        assert_eq!(value(&t, b), 8008.0);
        let sum = "sectorcrypt_request_duration_seconds_sum{export=\"disk\",type=\"read\"}";
        assert!((value(&t, sum) - 0.56).abs() < 1e-9);
        let inflight = "sectorcrypt_requests_in_flight{export=\"disk\"}";
        assert_eq!(value(&t, inflight), 0.0);
        assert!(
            t.contains("sectorcrypt_info{version=\"0.1.0\",backend=\"vaes\"} 1"),
            "{t}"
        );
    }

    #[test]
    fn connections_and_requests_in_flight_count_while_held() {
        let m = Metrics::new("soft");
        let e = Arc::new(ExportMetrics::new("a", 2));
        m.add(e.clone());
        e.arrived();
        e.left();
        let c1 = e.connected();
        let c2 = e.connected();
        let r = e.begin();
        let t = m.render();
        assert_eq!(value(&t, "sectorcrypt_connections{export=\"a\"}"), 2.0);
        assert_eq!(
            value(&t, "sectorcrypt_requests_in_flight{export=\"a\"}"),
            1.0
        );
        drop((c1, r));
        let t = m.render();
        assert_eq!(value(&t, "sectorcrypt_connections{export=\"a\"}"), 1.0);
        assert_eq!(
            value(&t, "sectorcrypt_connections_total{export=\"a\"}"),
            3.0,
            "arrived, then two guards"
        );
        assert_eq!(
            value(&t, "sectorcrypt_requests_in_flight{export=\"a\"}"),
            0.0
        );
        drop(c2);
        m.remove("a");
        assert!(!m.render().contains("export=\"a\""));
    }

    #[test]
    fn export_names_are_escaped_in_labels() {
        let m = Metrics::new("soft");
        m.add(Arc::new(ExportMetrics::new("we\"ird\\na\nme", 1)));
        let t = m.render();
        assert!(
            t.contains("sectorcrypt_connections{export=\"we\\\"ird\\\\na\\nme\"} 0"),
            "{t}"
        );
        assert!(t.lines().all(|l| !l.is_empty()));
    }

    #[test]
    fn each_thread_keeps_to_its_own_cache_lines() {
        assert!(std::mem::align_of::<Shard>() >= 128);
        assert_eq!(std::mem::size_of::<Shard>() % 128, 0);
        let e = ExportMetrics::new("x", 8);
        let a =
            std::thread::scope(|s| s.spawn(|| e.shard() as *const Shard as usize).join()).unwrap();
        let b =
            std::thread::scope(|s| s.spawn(|| e.shard() as *const Shard as usize).join()).unwrap();
        assert_ne!(a, b, "two threads were given the same shard");
    }
}
