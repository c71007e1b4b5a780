//! The gateway's control socket: how `sectorcrypt status` asks a running gateway what it
//! serves and to whom, and how `sectorcrypt gateway reload` asks it to read its
//! configuration again.
//!
//! A Unix socket in the user's runtime directory (which `open` uses too, mode 0700, and
//! checked as `open` checks it), itself mode 0600: only the gateway's user (and root)
//! can connect, the same rule as for the entries beside it. The protocol is one request
//! line (`status` or `reload`, at most [`MAX_REQUEST`] bytes, within
//! [`REQUEST_TIMEOUT`]) and one JSON object in answer, then the connection closes. An
//! unknown request is answered `{"error": ...}`.
//!
//! Why a socket of its own rather than a route on the metrics HTTP server: the metrics
//! endpoint is optional and may be a TCP port every local user reaches, while the status
//! names clients (uids, addresses, certificate subjects) and a reload is an action; a
//! signal alone (SIGHUP) cannot say what the reload did. The socket answers both, needs
//! no port, and is found the way `status` already finds what `open` started.

use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest request line read.
pub const MAX_REQUEST: u64 = 256;

/// How long a client may take to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the socket answers: a request's word to its JSON answer.
pub type Handler = Arc<dyn Fn(&str) -> Value + Send + Sync>;

/// The control socket, served on a thread of its own until [`Control::close`].
#[derive(Debug)]
pub struct Control {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Control {
    /// Binds `path` (mode 0600; a socket left there by a process that died is
    /// replaced, one that answers is not) and answers each request with `handler`.
    pub fn serve(path: &Path, handler: Handler) -> io::Result<Control> {
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by another process", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let handler = handler.clone();
                    // One thread per request: a reload that opens volumes for a while
                    // does not hold up a status.
                    let _ = std::thread::Builder::new()
                        .name("control-request".into())
                        .spawn(move || answer(conn, &*handler));
                }
            })?;
        Ok(Control {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops answering and removes the socket.
    pub fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads one request from `conn` and writes `handler`'s answer.
fn answer(conn: UnixStream, handler: &(dyn Fn(&str) -> Value + Send + Sync)) {
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = conn.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut line = String::new();
    let read = BufReader::new((&conn).take(MAX_REQUEST)).read_line(&mut line);
    let reply = match read {
        Ok(_) => match line.trim() {
            w @ ("status" | "reload") => handler(w),
            other => json!({ "error": format!("unknown request {other:?}: status or reload") }),
        },
        Err(e) => json!({ "error": format!("reading the request: {e}") }),
    };
    let _ = (&conn).write_all(format!("{reply}\n").as_bytes());
}

/// Asks the gateway at `path` `request` (`status`, `reload`), waiting `timeout` at most
/// for the answer.
pub fn ask(path: &Path, request: &str, timeout: Duration) -> io::Result<Value> {
    let conn = UnixStream::connect(path)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    (&conn).write_all(format!("{request}\n").as_bytes())?;
    let mut answer = Vec::new();
    (&conn).take(64 << 20).read_to_end(&mut answer)?;
    serde_json::from_slice(&answer).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the gateway's answer is not JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gets_the_handlers_answer_and_a_bad_one_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("gw.sock");
        let c = Control::serve(&path, Arc::new(|w: &str| json!({ "asked": w }))).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let t = Duration::from_secs(5);
        assert_eq!(ask(&path, "status", t).unwrap()["asked"], "status");
        assert_eq!(ask(&path, "reload", t).unwrap()["asked"], "reload");
        let bad = ask(&path, "rm -rf", t).unwrap();
        assert!(
            bad["error"].as_str().unwrap().contains("unknown request"),
            "{bad}"
        );
        // A second server on the same path is refused while the first answers.
        assert!(Control::serve(&path, Arc::new(|_: &str| json!({}))).is_err());
        c.close();
        assert!(!path.exists());
        assert!(ask(&path, "status", t).is_err());
    }
}
