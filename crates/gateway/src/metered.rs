//! An NBD export that counts what passes through it: every request's type, payload
//! bytes, errno and the time the export took, into its [`ExportMetrics`] (per thread, so
//! the counting adds no shared cache line to the data path). Asynchronous writes are
//! counted when they complete.

use sectorcrypt_nbd::{Export, WriteDone};
use sectorcrypt_service::metrics::{ExportMetrics, Op};
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// `inner`, counted into `metrics`.
#[derive(Debug)]
pub struct Metered<E> {
    inner: E,
    metrics: Arc<ExportMetrics>,
}

impl<E: Export> Metered<E> {
    /// Counts `inner`'s requests into `metrics`.
    pub fn new(inner: E, metrics: Arc<ExportMetrics>) -> Metered<E> {
        Metered { inner, metrics }
    }

    fn count<T>(&self, op: Op, bytes: u64, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let _in_flight = self.metrics.begin();
        let start = Instant::now();
        let r = f();
        self.metrics.record(op, bytes, start.elapsed(), errno(&r));
        r
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
        self.metrics.record(Op::Read, n, start.elapsed(), errno(&r));
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
        self.metrics
            .record(Op::Write, n, start.elapsed(), errno(&r));
        (buf, r)
    }

    fn starts_write(&self, offset: u64, len: usize) -> bool {
        self.inner.starts_write(offset, len)
    }

    fn start_write(&self, buf: Vec<u8>, range: Range<usize>, offset: u64, done: WriteDone) {
        let metrics = self.metrics.clone();
        let (n, start) = (range.len() as u64, Instant::now());
        self.inner.start_write(
            buf,
            range,
            offset,
            Box::new(move |buf, r| {
                metrics.record(Op::Write, n, start.elapsed(), errno(&r));
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
}
