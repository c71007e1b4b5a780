//! An NBD export that counts what passes through it: every request's type, payload
//! bytes, errno and the time the export took, into its [`ExportMetrics`] (per thread, so
//! the counting adds no shared cache line to the data path). Asynchronous writes are
//! counted when they complete.

use crate::log::{Event, Log};
use sectorcrypt_nbd::{Export, WriteDone};
use sectorcrypt_service::metrics::{ExportMetrics, Op};
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// `inner`, counted into `metrics`.
#[derive(Debug)]
pub struct Metered<E> {
    inner: E,
    metrics: Arc<ExportMetrics>,
    failures: Option<Arc<Failures>>,
}

/// An export's failed requests, as `error` events in the log: at most one line a
/// second, which says how many more failed since the last (a store that is down fails
/// every request of every client).
#[derive(Debug)]
pub struct Failures {
    log: Arc<Log>,
    export: String,
    /// The second of the last line (since the epoch; 0: none yet).
    last: AtomicU64,
    /// Failures not logged since.
    suppressed: AtomicU64,
}

impl Failures {
    /// The failures of export `export`, into `log`.
    pub fn new(log: Arc<Log>, export: &str) -> Failures {
        Failures {
            log,
            export: export.to_string(),
            last: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// A request of type `op` failed with `errno` (`message`: the error's text).
    fn failed(&self, op: Op, errno: i32, message: &dyn Fn() -> String) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs().max(1));
        let last = self.last.load(Ordering::Relaxed);
        let ours = last != now
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if !ours {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.log.event(&Event::Error {
            export: &self.export,
            op: label(op),
            errno,
            message: message(),
            suppressed: self.suppressed.swap(0, Ordering::Relaxed),
        });
    }
}

/// A request type's name in the log (the metrics' `type` label).
fn label(op: Op) -> &'static str {
    match op {
        Op::Read => "read",
        Op::Write => "write",
        Op::Flush => "flush",
        Op::Trim => "trim",
        Op::WriteZeroes => "write_zeroes",
        Op::Cache => "cache",
        Op::BlockStatus => "block_status",
    }
}

impl<E: Export> Metered<E> {
    /// Counts `inner`'s requests into `metrics`.
    pub fn new(inner: E, metrics: Arc<ExportMetrics>) -> Metered<E> {
        Metered {
            inner,
            metrics,
            failures: None,
        }
    }

    /// Logs the failed requests too.
    pub fn logging(self, failures: Arc<Failures>) -> Metered<E> {
        Metered {
            failures: Some(failures),
            ..self
        }
    }

    fn count<T>(&self, op: Op, bytes: u64, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let _in_flight = self.metrics.begin();
        let start = Instant::now();
        let r = f();
        self.done(op, bytes, start, &r);
        r
    }

    /// Records a request of type `op` begun at `start` that ended with `r`.
    fn done<T>(&self, op: Op, bytes: u64, start: Instant, r: &io::Result<T>) {
        record(&self.metrics, self.failures.as_deref(), op, bytes, start, r);
    }
}

/// Records into `metrics` a request of type `op` begun at `start` that ended with `r`,
/// and logs it into `failures` when it failed.
fn record<T>(
    metrics: &ExportMetrics,
    failures: Option<&Failures>,
    op: Op,
    bytes: u64,
    start: Instant,
    r: &io::Result<T>,
) {
    let n = errno(r);
    metrics.record(op, bytes, start.elapsed(), n);
    if let (Some(f), Err(e)) = (failures, r) {
        f.failed(op, n, &|| e.to_string());
    }
}

/// The errno a result stands for (0 for success; EIO for an error without one).
fn errno<T>(r: &io::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(5),
    }
}

impl<E: Export> Export for Metered<E> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn preferred_block_size(&self) -> u32 {
        self.inner.preferred_block_size()
    }

    fn read_only(&self) -> bool {
        self.inner.read_only()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let n = buf.len() as u64;
        self.count(Op::Read, n, || self.inner.read_at(buf, offset))
    }

    fn read_owned(
        &self,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let _in_flight = self.metrics.begin();
        let (n, start) = (range.len() as u64, Instant::now());
        let (buf, r) = self.inner.read_owned(buf, range, offset);
        self.done(Op::Read, n, start, &r);
        (buf, r)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let n = buf.len() as u64;
        self.count(Op::Write, n, || self.inner.write_at(buf, offset))
    }

    fn write_owned(
        &self,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        let _in_flight = self.metrics.begin();
        let (n, start) = (range.len() as u64, Instant::now());
        let (buf, r) = self.inner.write_owned(buf, range, offset);
        self.done(Op::Write, n, start, &r);
        (buf, r)
    }

    fn starts_write(&self, offset: u64, len: usize) -> bool {
        self.inner.starts_write(offset, len)
    }
    fn quick_reads(&self) -> bool {
        self.inner.quick_reads()
    }

    fn start_write(&self, buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        let (metrics, failures) = (self.metrics.clone(), self.failures.clone());
        let (n, start) = (range.len() as u64, Instant::now());
        self.inner.start_write(
            buf,
            range,
            offset,
            Box::new(move |buf, r| {
                record(&metrics, failures.as_deref(), Op::Write, n, start, &r);
                done(buf, r)
            }),
        )
    }

    fn flush(&self) -> io::Result<()> {
        self.count(Op::Flush, 0, || self.inner.flush())
    }

    fn min_block_size(&self) -> u32 {
        self.inner.min_block_size()
    }

    fn can_multi_conn(&self) -> bool {
        self.inner.can_multi_conn()
    }

    fn can_fua(&self) -> bool {
        self.inner.can_fua()
    }

    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let n = buf.len() as u64;
        self.count(Op::Write, n, || self.inner.write_at_fua(buf, offset))
    }

    fn can_trim(&self) -> bool {
        self.inner.can_trim()
    }

    fn trim(&self, offset: u64, length: u64) -> io::Result<()> {
        self.count(Op::Trim, length, || self.inner.trim(offset, length))
    }

    fn write_zeroes(&self, offset: u64, length: u64) -> io::Result<()> {
        self.count(Op::WriteZeroes, length, || {
            self.inner.write_zeroes(offset, length)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sectorcrypt_service::metrics::Metrics;
    use sectorcrypt_testkit::metric as value;
    use std::sync::Mutex;

    /// A RAM disk whose writes past `fail_from` fail with ENOSPC.
    struct Ram {
        data: Mutex<Vec<u8>>,
        fail_from: u64,
    }

    impl Export for Ram {
        fn size(&self) -> u64 {
            self.data.lock().unwrap().len() as u64
        }
        fn preferred_block_size(&self) -> u32 {
            4096
        }
        fn read_only(&self) -> bool {
            false
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            let d = self.data.lock().unwrap();
            buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            if offset >= self.fail_from {
                return Err(io::Error::from_raw_os_error(28));
            }
            let mut d = self.data.lock().unwrap();
            d[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn requests_through_the_export_are_counted_by_type_bytes_and_errno() {
        let m = Metrics::new("soft");
        let em = Arc::new(ExportMetrics::new("ram", 2));
        m.add(em.clone());
        let ram = Ram {
            data: Mutex::new(vec![0; 1 << 20]),
            fail_from: 1 << 19,
        };
        let e = Metered::new(ram, em);
        let mut buf = vec![0u8; 4096];
        e.read_at(&mut buf, 0).unwrap();
        let (_, r) = e.read_owned(vec![0u8; 8192], 0..8192, 4096);
        r.unwrap();
        e.write_at(&buf, 0).unwrap();
        assert!(e.write_at(&buf, 1 << 19).is_err());
        let (tx, rx) = std::sync::mpsc::channel();
        e.start_write(
            vec![1u8; 512],
            0..512,
            0,
            Box::new(move |_, r| tx.send(r.is_ok()).unwrap()),
        );
        assert!(rx.recv().unwrap());
        e.flush().unwrap();
        let t = m.render();
        let s = |k: &str| format!("sectorcrypt_{k}");
        assert_eq!(
            value(&t, &s("requests_total{export=\"ram\",type=\"read\"}")),
            2.0
        );
        assert_eq!(
            value(&t, &s("bytes_total{export=\"ram\",type=\"read\"}")),
            12288.0
        );
        assert_eq!(
            value(&t, &s("requests_total{export=\"ram\",type=\"write\"}")),
            3.0
        );
        assert_eq!(
            value(&t, &s("bytes_total{export=\"ram\",type=\"write\"}")),
            4608.0
        );
        assert_eq!(
            value(
                &t,
                &s("request_errors_total{export=\"ram\",errno=\"ENOSPC\"}")
            ),
            1.0
        );
        assert_eq!(
            value(&t, &s("requests_total{export=\"ram\",type=\"flush\"}")),
            1.0
        );
        assert_eq!(value(&t, &s("requests_in_flight{export=\"ram\"}")), 0.0);
    }

    #[test]
    fn failed_requests_are_logged_at_most_once_a_second_with_the_rest_counted() {
        use crate::log::LogFormat;
        use std::io::Write;
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
        let lines = Lines::default();
        let log = Arc::new(Log::to(LogFormat::Json, Box::new(lines.clone())));
        let em = Arc::new(ExportMetrics::new("ram", 2));
        let ram = Ram {
            data: Mutex::new(vec![0; 1 << 20]),
            fail_from: 0,
        };
        let e = Metered::new(ram, em).logging(Arc::new(Failures::new(log, "ram")));
        let start = Instant::now();
        for _ in 0..100 {
            assert!(e.write_at(&[1u8; 512], 4096).is_err());
        }
        let took = start.elapsed();
        e.read_at(&mut [0u8; 512], 0).unwrap();
        let out = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let events: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(events[0]["event"], "error", "{out}");
        assert_eq!(events[0]["export"], "ram");
        assert_eq!(events[0]["op"], "write");
        assert_eq!(events[0]["errno"], 28);
        assert_eq!(events[0]["suppressed"], 0);
        // 100 failures within a second or two: a line per second they spanned.
        let seconds = took.as_secs() as usize + 2;
        assert!(events.len() <= seconds, "{} lines: {out}", events.len());
        assert!(events.iter().all(|v| v["event"] == "error"), "{out}");
    }
}
