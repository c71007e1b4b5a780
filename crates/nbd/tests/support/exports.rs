//! Exports for the tests: a memory-backed one that counts flushes (and fails them on
//! demand), a slow one that records how many data operations run at once, and one that
//! completes writes later on threads of its own.

use sectorcrypt_nbd::{proto, Export};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A memory-backed export that counts flushes and fails the next ones when told to (as a
/// file whose writeback failed: the error is reported once, then flushes succeed again).
pub struct MemExport {
    data: Mutex<Vec<u8>>,
    block: u32,
    read_only: bool,
    flushes: AtomicU64,
    failing_flushes: AtomicU64,
}

impl MemExport {
    /// An export holding `data`, with preferred block size `block`.
    pub fn new(data: Vec<u8>, block: u32, read_only: bool) -> Arc<MemExport> {
        Arc::new(MemExport {
            data: Mutex::new(data),
            block,
            read_only,
            flushes: AtomicU64::new(0),
            failing_flushes: AtomicU64::new(0),
        })
    }

    /// The contents now.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.lock().unwrap().clone()
    }

    /// Flushes so far.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::SeqCst)
    }

    /// The next flush fails with EIO; the ones after it succeed.
    pub fn fail_next_flush(&self) {
        self.failing_flushes.store(1, Ordering::SeqCst);
    }
}

impl Export for MemExport {
    fn size(&self) -> u64 {
        self.data.lock().unwrap().len() as u64
    }
    fn quick_reads(&self) -> bool {
        true
    }
    fn preferred_block_size(&self) -> u32 {
        self.block
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.data.lock().unwrap();
        let o = offset as usize;
        buf.copy_from_slice(&d[o..o + buf.len()]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        assert!(!self.read_only, "the server wrote to a read-only export");
        let mut d = self.data.lock().unwrap();
        let o = offset as usize;
        d[o..o + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        let fail = self
            .failing_flushes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            return Err(io::Error::from_raw_os_error(proto::EIO as i32));
        }
        Ok(())
    }
}

/// An export whose reads and writes take 20 ms each and that records the most that ran at
/// once; a read returns byte `(offset + i) % 251` at `offset + i`.
pub struct SlowExport {
    size: u64,
    active: AtomicU64,
    peak: AtomicU64,
}

impl SlowExport {
    pub fn new(size: u64) -> Arc<SlowExport> {
        Arc::new(SlowExport {
            size,
            active: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        })
    }

    /// The most data operations that ran at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst)
    }

    /// Runs `op` as one data operation: counted as running for 20 ms and while `op` runs.
    fn busy(&self, op: impl FnOnce()) {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(20));
        op();
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Export for SlowExport {
    fn size(&self) -> u64 {
        self.size
    }
    fn preferred_block_size(&self) -> u32 {
        512
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.busy(|| {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = ((offset + i as u64) % 251) as u8;
            }
        });
        Ok(())
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        self.busy(|| {});
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

/// A memory-backed export that completes writes later, on threads of its own, in the
/// reverse of their order within each 8 x 64 KiB (the later a write's place, the sooner it
/// is done), and fails the write at `failing` with EIO without storing it.
pub struct LaterExport {
    data: Arc<Mutex<Vec<u8>>>,
    started: AtomicU64,
    failing: u64,
}

impl LaterExport {
    /// `size` zero bytes; the write at offset `failing` fails.
    pub fn new(size: usize, failing: u64) -> Arc<LaterExport> {
        Arc::new(LaterExport {
            data: Arc::new(Mutex::new(vec![0; size])),
            started: AtomicU64::new(0),
            failing,
        })
    }

    /// The contents now.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.lock().unwrap().clone()
    }

    /// Writes started so far.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

impl Export for LaterExport {
    fn size(&self) -> u64 {
        self.data.lock().unwrap().len() as u64
    }
    fn preferred_block_size(&self) -> u32 {
        512
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.data.lock().unwrap();
        buf.copy_from_slice(&d[offset as usize..][..buf.len()]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.data.lock().unwrap()[offset as usize..][..buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn starts_write(&self, _offset: u64, _len: usize) -> bool {
        true
    }
    fn start_write(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
        done: sectorcrypt_nbd::WriteDone,
    ) {
        self.started.fetch_add(1, Ordering::SeqCst);
        let (data, fails) = (self.data.clone(), offset == self.failing);
        let delay = Duration::from_millis(40 - (offset >> 16) % 8 * 5);
        thread::spawn(move || {
            thread::sleep(delay);
            if fails {
                return done(buf, Err(io::Error::from_raw_os_error(proto::EIO as i32)));
            }
            data.lock().unwrap()[offset as usize..][..range.len()].copy_from_slice(&buf[range]);
            done(buf, Ok(()))
        });
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}
