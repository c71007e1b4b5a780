//! The NBD target: the bytes are everything a client sends (greeting reply, options,
//! requests and payloads), written over a socket pair to one connection of the real
//! server ([`serve_connection`]) while another thread reads whatever the server answers.
//! The export is memory that records any access outside its range, and the harness
//! panics on it once the connection is over (the server's workers run the export, and a
//! worker's panic would end only that worker): a malformed request must never reach it.

use sectorcrypt_nbd::{serve_connection, Export, ServerConfig};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::Duration;

/// The export's size: 1 MiB, as the captured client traffic in the corpus assumes.
const EXPORT_SIZE: usize = 1 << 20;

/// Memory behind the server, checking every access.
struct CheckedExport {
    data: Mutex<Vec<u8>>,
    /// The first access outside the export.
    violation: Mutex<Option<String>>,
}

impl CheckedExport {
    /// The range of `len` bytes at `offset`, or an error (recorded) when it leaves the
    /// export.
    fn range(&self, offset: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
        let end = offset.checked_add(len as u64);
        if end.is_some_and(|e| e <= EXPORT_SIZE as u64) {
            return Ok(offset as usize..offset as usize + len);
        }
        let what =
            format!("the server passed {len} bytes at {offset} to a {EXPORT_SIZE}-byte export");
        self.violation.lock().unwrap().get_or_insert(what.clone());
        Err(io::Error::other(what))
    }
}

impl Export for CheckedExport {
    fn size(&self) -> u64 {
        EXPORT_SIZE as u64
    }
    fn preferred_block_size(&self) -> u32 {
        512
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        buf.copy_from_slice(&self.data.lock().unwrap()[r]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        self.data.lock().unwrap()[r].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn can_trim(&self) -> bool {
        true
    }
    fn trim(&self, offset: u64, length: u64) -> io::Result<()> {
        let r = self.range(offset, length as usize)?;
        self.data.lock().unwrap()[r].fill(0);
        Ok(())
    }
}

/// A libFuzzer binary starts in C, without Rust's runtime setup that ignores SIGPIPE: a
/// write to a socket the other side closed would kill the process. A handler that only
/// sets a flag turns that into the EPIPE error the server expects.
pub(crate) fn survive_sigpipe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let flag = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGPIPE, flag).expect("a SIGPIPE handler");
    });
}

/// The NBD target.
pub fn nbd(data: &[u8]) {
    survive_sigpipe();
    let export = Arc::new(CheckedExport {
        data: Mutex::new(vec![0u8; EXPORT_SIZE]),
        violation: Mutex::new(None),
    });
    let config = ServerConfig {
        export_name: "fuzz".into(),
        description: Some("fuzz export".into()),
        workers_per_connection: 2,
        // Small limits keep each run fast; the code paths are the same.
        max_payload: 256 << 10,
        connection_budget: 512 << 10,
        log: false,
        // The client half is shut for writing once the input is sent, so reads end at
        // once; the limits only bound a server that waits on something else.
        handshake_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(5),
        ..ServerConfig::default()
    };
    let (mut client, server) = UnixStream::pair().expect("a socket pair");
    let served = export.clone();
    let server = thread::spawn(move || serve_connection(server, served, config));
    let mut replies = client.try_clone().expect("a second handle");
    let reader = thread::spawn(move || {
        let mut sink = [0u8; 64 << 10];
        while let Ok(n) = replies.read(&mut sink) {
            if n == 0 {
                break;
            }
        }
    });
    // The server may close first (a protocol violation, NBD_CMD_DISC): write errors end
    // the input early.
    let _ = client.write_all(data);
    let _ = client.shutdown(Shutdown::Write);
    if let Err(panic) = server.join() {
        std::panic::resume_unwind(panic);
    }
    let _ = client.shutdown(Shutdown::Both);
    reader.join().expect("the reply reader");
    let violation = export.violation.lock().unwrap().take();
    if let Some(what) = violation {
        panic!("{what}");
    }
}
