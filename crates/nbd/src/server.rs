//! The listener: binds a Unix socket (its mode set before anyone can reach it) or a
//! loopback TCP port, runs one thread per connection, makes room for a new connection by
//! closing the one idle longest when every slot is taken, and shuts down cleanly (stop
//! accepting, stop reading requests, finish the ones in flight, flush the export).
//!
//! The top of the crate's socket code: a connection is the handshake, then the
//! transmission phase, each in its own module, which know nothing of the listener. What
//! they share across connections (the export, the configuration, the flushes) is owned
//! here and lent to them; the export's description is taken once per connection.

use crate::activity::{Activity, Admission, Connections};
use crate::config::{Listen, ServerConfig};
use crate::error::Error;
use crate::export::Export;
use crate::export_info::ExportInfo;
use crate::handshake::{self, Haggle, Outcome, TlsMode};
use crate::stream::{Deadline, Stream};
use crate::tls::{self, ServerTls};
use crate::transmission::{self, Context};
use crate::writeback::Writeback;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What every connection shares.
struct Shared {
    export: Arc<dyn Export>,
    config: ServerConfig,
    writeback: Writeback,
    /// What connection times are measured from.
    epoch: Instant,
}

enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

/// Stops a running [`Server`] from another thread (a signal handler thread, a test).
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    stop: Arc<AtomicBool>,
    wake: Listen,
}

impl ShutdownHandle {
    /// Asks the server to stop; [`Server::run`] returns once the requests in flight are
    /// done and the export is flushed.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop with a connection of our own.
        let _ = match &self.wake {
            Listen::Unix(p) => UnixStream::connect(p).map(drop),
            Listen::Tcp(a) => TcpStream::connect(a).map(drop),
        };
    }
}

/// An NBD server for one export.
pub struct Server {
    listener: Listener,
    shared: Arc<Shared>,
    handle: ShutdownHandle,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("listen", &self.handle.wake)
            .field("export_name", &self.shared.config.export_name)
            .finish_non_exhaustive()
    }
}

fn bind_unix(path: &Path, mode: u32) -> Result<UnixListener, Error> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            // A socket left by a server that died: replace it only if nobody answers.
            if UnixStream::connect(path).is_ok() {
                return Err(Error::Io(
                    "binding the socket",
                    std::io::Error::new(
                        std::io::ErrorKind::AddrInUse,
                        format!("{} is in use by another server", path.display()),
                    ),
                ));
            }
            fs::remove_file(path).map_err(|e| Error::Io("removing a stale socket", e))?;
        }
        Ok(_) => return Err(Error::SocketPathTaken(path.display().to_string())),
        Err(_) => {}
    }
    // Bind in a private directory beside the path (mode 0700: nobody else can reach the
    // socket inside), give the socket its mode, and rename it into place: the socket path
    // appears only when connections are accepted (a client that waits for the path never
    // sees "connection refused" between bind and listen), with its final mode whatever the
    // umask, and no one connects in between. The names are short: a socket's path is
    // limited to 107 bytes, and the temporary one must fit too.
    let private = private_dir(path)?;
    let tmp = private.join("s");
    let bound = UnixListener::bind(&tmp)
        .map_err(|e| Error::Io("binding the socket", e))
        .and_then(|l| {
            fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))
                .map_err(|e| Error::Io("setting the socket's mode", e))?;
            fs::rename(&tmp, path).map_err(|e| Error::Io("moving the socket into place", e))?;
            Ok(l)
        });
    if bound.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    let _ = fs::remove_dir(&private);
    bound
}

/// Creates a new directory of mode 0700 beside `path` (never one that exists already).
fn private_dir(path: &Path) -> Result<PathBuf, Error> {
    let mut n = 0;
    loop {
        let dir = path.with_file_name(format!(".sc{}-{n}", std::process::id()));
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => return Err(Error::Io("creating a directory for the socket", e)),
        }
    }
}

impl Server {
    /// Binds `listen` for `export`.
    pub fn bind(
        listen: &Listen,
        export: Arc<dyn Export>,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let (listener, wake) = match listen {
            Listen::Unix(p) => {
                if config.socket_mode & !0o777 != 0 {
                    return Err(Error::SocketMode(config.socket_mode));
                }
                (
                    Listener::Unix(bind_unix(p, config.socket_mode)?, p.clone()),
                    Listen::Unix(p.clone()),
                )
            }
            Listen::Tcp(a) => {
                if !a.ip().is_loopback() {
                    return Err(Error::NotLoopback(a.to_string()));
                }
                let l = TcpListener::bind(a).map_err(|e| Error::Io("binding the port", e))?;
                let local = l
                    .local_addr()
                    .map_err(|e| Error::Io("reading the bound address", e))?;
                (Listener::Tcp(l), Listen::Tcp(local))
            }
        };
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                export,
                config,
                writeback: Writeback::default(),
                epoch: Instant::now(),
            }),
            handle: ShutdownHandle {
                stop: Arc::new(AtomicBool::new(false)),
                wake,
            },
        })
    }

    /// Where the server listens (for TCP port 0, the port actually bound).
    pub fn local(&self) -> &Listen {
        &self.handle.wake
    }

    /// A handle that stops [`Server::run`].
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// Accepts and serves connections until shut down; then waits for every connection's
    /// requests in flight and flushes the export.
    pub fn run(self) -> Result<(), Error> {
        let shared = self.shared.clone();
        let stop = self.handle.stop.clone();
        let next_id = AtomicU64::new(1);
        let open = Arc::new(Connections::new(shared.config.max_connections));
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let listen_desc = match &self.listener {
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into()),
        };
        shared.config.log(format_args!(
            "serving export {:?} ({} bytes{}) on {listen_desc}",
            shared.config.export_name,
            shared.export.size(),
            if shared.export.read_only() {
                ", read-only"
            } else {
                ""
            }
        ));

        let result = loop {
            let accepted = match &self.listener {
                Listener::Unix(l, _) => l.accept().map(|(s, _)| Stream::Unix(s)),
                Listener::Tcp(l) => l.accept().map(|(s, _)| {
                    let _ = s.set_nodelay(true);
                    Stream::Tcp(s)
                }),
            };
            if stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            let stream = match accepted {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors and the like: log, back off, keep serving.
                    shared.config.log(format_args!("accept failed: {e}"));
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            let activity = Arc::new(Activity::new(shared.epoch));
            let Ok(handle) = stream.try_clone() else {
                shared
                    .config
                    .log(format_args!("connection {id}: refused (no descriptor)"));
                stream.shutdown(Shutdown::Both);
                continue;
            };
            match open.admit(id, handle, activity.clone()) {
                Admission::Admitted => {}
                Admission::ClosedIdle { closed, idle_for } => {
                    shared.config.log(format_args!(
                        "connection {closed}: closed after {:.1} s idle, to make room for \
                         connection {id} ({} connections open)",
                        idle_for.as_secs_f64(),
                        shared.config.max_connections
                    ));
                }
                Admission::Full => {
                    shared.config.log(format_args!(
                        "connection {id}: refused ({} connections open, none idle)",
                        shared.config.max_connections
                    ));
                    stream.shutdown(Shutdown::Both);
                    continue;
                }
            }
            let shared2 = shared.clone();
            let open2 = open.clone();
            let last = shared.config.exit_after_last.then(|| self.handle.clone());
            let spawned = thread::Builder::new()
                .name(format!("nbd-{id}"))
                .spawn(move || {
                    // The slot is freed however the connection ends, a panic included.
                    let _leaving = Leaving(&open2, id, last);
                    connection(stream, &shared2, &activity, id);
                });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    shared
                        .config
                        .log(format_args!("connection {id}: no thread: {e}"));
                    open.remove(id);
                }
            }
            threads.retain(|h| !h.is_finished());
        };

        // Stop reading requests on every connection; the requests already read finish
        // and get their replies.
        open.shutdown_all(Shutdown::Read);
        // A client that stopped reading replies keeps a worker in a send: after the grace
        // period its socket is shut both ways so the send fails and the worker goes on.
        let grace_end = Instant::now() + shared.config.shutdown_grace;
        while threads.iter().any(|h| !h.is_finished()) && Instant::now() < grace_end {
            thread::sleep(Duration::from_millis(10));
        }
        open.shutdown_all(Shutdown::Both);
        for h in threads {
            let _ = h.join();
        }
        if let Listener::Unix(_, p) = &self.listener {
            let _ = fs::remove_file(p);
        }
        shared
            .writeback
            .flush(&*shared.export)
            .map_err(|e| Error::Io("flushing the export", e))?;
        shared.config.log(format_args!("shut down; export flushed"));
        result
    }
}

/// Removes a connection from the open table when dropped; stops the server through the
/// handle, when there is one, if it was the last connection open.
struct Leaving<'a>(&'a Connections, u64, Option<ShutdownHandle>);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        let left = self.0.remove(self.1);
        if let (0, Some(handle)) = (left, &self.2) {
            handle.shutdown();
        }
    }
}

/// Serves one client already connected on `stream`, as [`Server::run`] serves a connection
/// it accepted (the handshake within its deadline, then the transmission phase with the
/// connection's own payload budget and timeouts) until the client disconnects. Flush
/// failures stick for this connection alone: it shares no writeback state with any other.
/// For a socket handed over by another process, and for driving the protocol over a
/// socket pair (the fuzz targets).
pub fn serve_connection(stream: UnixStream, export: Arc<dyn Export>, config: ServerConfig) {
    let epoch = Instant::now();
    let shared = Shared {
        export,
        config,
        writeback: Writeback::default(),
        epoch,
    };
    connection(Stream::Unix(stream), &shared, &Activity::new(epoch), 0);
}

fn connection(mut stream: Stream, shared: &Shared, activity: &Activity, id: u64) {
    let log = |args: fmt::Arguments<'_>| shared.config.log(args);
    if let Err(e) =
        stream.set_write_timeout(Some(shared.config.write_timeout).filter(|t| !t.is_zero()))
    {
        log(format_args!("connection {id}: no write timeout: {e}"));
        stream.shutdown(Shutdown::Both);
        return;
    }
    let info = ExportInfo::new(&*shared.export, &shared.config);
    let deadline = Instant::now() + shared.config.handshake_timeout;
    let negotiated = handshake_phase(&mut stream, deadline, &info, shared.config.tls.as_ref());
    match negotiated {
        Ok((Outcome::Transmit, session)) => {
            let over = if session.is_some() { " over TLS" } else { "" };
            log(format_args!("connection {id}: transmission{over}"));
            let cx = Context {
                export: &*shared.export,
                info: &info,
                config: &shared.config,
                writeback: &shared.writeback,
                activity,
                id,
            };
            if let Err(e) = transmission::serve(stream, session, cx) {
                log(format_args!("connection {id}: ended: {e}"));
            }
        }
        Ok((Outcome::Close(why), _)) => {
            log(format_args!("connection {id}: closed in handshake ({why})"));
            stream.shutdown(Shutdown::Both);
        }
        Ok((Outcome::StartTls, _)) => {
            log(format_args!(
                "connection {id}: closed in handshake (no TLS)"
            ));
            stream.shutdown(Shutdown::Both);
        }
        Err(e) => {
            log(format_args!("connection {id}: handshake failed: {e}"));
            stream.shutdown(Shutdown::Both);
        }
    }
}

/// The handshake, all of it before `deadline`: the option haggling, and when the client
/// starts TLS, the TLS handshake and the rest of the haggling over it. Gives the TLS
/// session the transmission phase goes on in, if any.
fn handshake_phase(
    stream: &mut Stream,
    deadline: Instant,
    info: &ExportInfo,
    tls: Option<&ServerTls>,
) -> io::Result<(Outcome, Option<rustls::ServerConnection>)> {
    let mode = match tls {
        None => TlsMode::Off,
        Some(t) if t.required() => TlsMode::Required,
        Some(_) => TlsMode::Allowed,
    };
    let mut plain = Deadline::new(stream, deadline);
    let mut haggle = Haggle::new(info, mode);
    let outcome = handshake::negotiate(&mut plain, &mut haggle)?;
    let (Outcome::StartTls, Some(tls)) = (&outcome, tls) else {
        return Ok((outcome, None));
    };
    let mut session = tls::accept(tls, &mut plain)?;
    let mut secure = rustls::Stream::new(&mut session, &mut plain);
    let outcome = handshake::negotiate(&mut secure, &mut haggle)?;
    secure.flush()?;
    Ok((outcome, Some(session)))
}
