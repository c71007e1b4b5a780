//! The FUSE mount's workers. fuser's session reads the kernel's requests on one thread;
//! the disk's reads and writes are handed from there to a few worker threads, which run
//! them on the volume and send the replies themselves (a fuser reply may be sent from any
//! thread). So the requests the kernel has in flight at once (the pieces of one
//! asynchronous direct I/O, several processes, a loop device's queue) run on the engine
//! at once, on every core, instead of one after the other.
//!
//! The queue is bounded (a burst waits in the kernel, not in our memory). Write data is
//! copied out of the session's buffer into a recycled buffer before it is handed over, and
//! the volume encrypts it there (`Export::write_owned`), as for the NBD server.
//! [`Workers::finish`] lets every request already handed over complete and reply before it
//! returns, so a flush after it covers every acknowledged write.

use crate::volumes::export::VolumeExport;
use fuser::{ReplyData, ReplyWrite};
use sectorcrypt_nbd::Export;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Requests queued beyond those the workers are running, per worker.
const QUEUED_PER_WORKER: usize = 2;

/// Write buffers kept for reuse.
const KEPT_BUFFERS: usize = 16;

/// A request for a worker.
enum Job {
    Read {
        offset: u64,
        len: usize,
        reply: ReplyData,
    },
    Write {
        offset: u64,
        data: Vec<u8>,
        reply: ReplyWrite,
    },
}

/// What the workers share: the volume, and the write buffers they give back.
struct Shared {
    export: Arc<VolumeExport>,
    spare: Mutex<Vec<Vec<u8>>>,
}

impl Shared {
    fn spare(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn give_back(&self, buf: Vec<u8>) {
        let mut spare = self.spare();
        if spare.len() < KEPT_BUFFERS {
            spare.push(buf);
        }
    }

    /// Runs one request and replies; `scratch` is the worker's read buffer.
    fn run(&self, job: Job, scratch: &mut Vec<u8>) {
        match job {
            Job::Read { offset, len, reply } => {
                if scratch.len() < len {
                    scratch.resize(len, 0);
                }
                match self.export.read_at(&mut scratch[..len], offset) {
                    Ok(()) => reply.data(&scratch[..len]),
                    Err(e) => reply.error(errno(&e)),
                }
            }
            Job::Write {
                offset,
                data,
                reply,
            } => {
                // The buffer is ours: the volume may encrypt in it, as the NBD server's do.
                let len = data.len();
                let (data, r) = self.export.write_owned(data, 0..len, offset);
                match r {
                    Ok(()) => reply.written(len as u32),
                    Err(e) => reply.error(errno(&e)),
                }
                self.give_back(data);
            }
        }
    }
}

/// The errno a failed request replies with.
pub(crate) fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(match e.kind() {
        std::io::ErrorKind::PermissionDenied => libc::EROFS,
        std::io::ErrorKind::InvalidInput => libc::EINVAL,
        _ => libc::EIO,
    })
}

/// The worker threads of one mount.
pub(crate) struct Workers {
    shared: Arc<Shared>,
    queue: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts `n` workers (at least one) on `export`.
    pub(crate) fn start(export: Arc<VolumeExport>, n: usize) -> std::io::Result<Workers> {
        let n = n.max(1);
        let shared = Arc::new(Shared {
            export,
            spare: Mutex::new(Vec::new()),
        });
        let (tx, rx) = sync_channel::<Job>(n * QUEUED_PER_WORKER);
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (shared, rx) = (Arc::clone(&shared), Arc::clone(&rx));
            let t = std::thread::Builder::new()
                .name(format!("fuse-w{i}"))
                .spawn(move || work(&shared, &rx))?;
            threads.push(t);
        }
        Ok(Workers {
            shared,
            queue: Some(tx),
            threads,
        })
    }

    fn submit(&self, job: Job) {
        if let Some(q) = &self.queue {
            // The workers outlive the queue's sender; a send cannot fail before `finish`.
            let _ = q.send(job);
        }
    }

    /// Reads `len` bytes at `offset` of the volume and replies.
    pub(crate) fn read(&self, offset: u64, len: usize, reply: ReplyData) {
        self.submit(Job::Read { offset, len, reply });
    }

    /// Writes `data` at `offset` of the volume and replies.
    pub(crate) fn write(&self, offset: u64, data: &[u8], reply: ReplyWrite) {
        let mut buf = self.shared.spare().pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.submit(Job::Write {
            offset,
            data: buf,
            reply,
        });
    }

    /// Runs every request handed over so far to its reply, then stops the workers.
    pub(crate) fn finish(&mut self) {
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A worker: requests until the queue closes.
fn work(shared: &Shared, rx: &Mutex<Receiver<Job>>) {
    let mut scratch = Vec::new();
    loop {
        let job = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        shared.run(job, &mut scratch);
    }
}
