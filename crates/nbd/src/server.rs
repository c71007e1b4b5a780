//! The listener: binds a Unix socket (its mode set before anyone can reach it) or a
//! loopback TCP port, runs one thread per connection, gives a connection a handshake slot
//! at `accept()` and an open slot only once its handshake is over (making room by closing
//! the one idle longest when every slot is taken: `activity`), and shuts down cleanly
//! (stop accepting, stop reading requests, finish the ones in flight, flush the export).
//!
//! The accept loop is woken for shutdown by shutting the listening socket down, not by
//! connecting to it: a stop needs no path, so a server whose Unix socket was removed, or
//! whose path no client could reach, still stops. A Unix socket removed or replaced while
//! the server runs is noticed within a second: the clients connected are still served,
//! and the server stops when the last has left ([`Error::SocketGone`]), unless
//! [`ServerConfig::stop_when_socket_gone`] is off.
//!
//! A server offers the exports of a table ([`Exports`]): each client picks one by name in
//! its handshake, and sees and gets only what the table admits for it (its Unix
//! credentials, its TCP address, its TLS certificate's subject: [`Peer`](crate::Peer)).
//! [`Server::bind`] serves one export, a table of one; [`Server::bind_exports`] any table.
//! [`Server::also_bind`] and [`Server::also_adopt`] add listening sockets: each has its
//! own accept thread, and all share the table, the slots and the shutdown.
//!
//! The top of the crate's socket code: a connection is the handshake, then the
//! transmission phase, each in its own module, which know nothing of the listener. What
//! they share across connections (the table, the configuration, each export's flushes:
//! `served`) is owned here and lent to them; what a client is told of its export is taken
//! when it chooses it. Connections to one export share nothing with those to another but
//! the listener's slots: each has its own reader and workers, and each export its own
//! flushes, so an export whose store stalls holds up its own connections only.

use crate::activity::{Activity, Admission, Connections};
use crate::config::{Connection, Listen, Observer, ServerConfig};
use crate::error::{Error, MAX_SOCKET_PATH};
use crate::export::Export;
use crate::exports::{ExportTable, Exports};
use crate::handshake::{self, Busy, Chosen, Haggle, Outcome, TlsMode};
use crate::served::Served;
use crate::stream::{Deadline, Stream};
use crate::tls::{self, ServerTls};
use crate::transmission::{self, Context};
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::net::{Shutdown, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What every connection shares.
struct Shared {
    exports: Arc<dyn Exports>,
    config: ServerConfig,
    /// The exports in use and their flushes.
    served: Served,
    /// What the server serves, for its first log line.
    serving: String,
    /// What connection times are measured from.
    epoch: Instant,
}

#[derive(Debug)]
enum Listener {
    /// The socket, its path, and the identity (device, inode) of the socket file bound.
    Unix(UnixListener, PathBuf, (u64, u64)),
    Tcp(TcpListener),
    /// A listening socket the server was given ([`Server::adopt`]): its owner (systemd)
    /// keeps it, its path and its queue of waiting clients after the server stops.
    Adopted(Adopted),
}

/// A listening socket made by someone else (systemd's socket activation) for
/// [`Server::adopt`].
#[derive(Debug)]
pub enum Adopted {
    /// A Unix stream socket.
    Unix(UnixListener),
    /// A TCP socket.
    Tcp(TcpListener),
}

impl Listener {
    /// Wakes a blocked `accept()`. The server's own socket is shut down (the accept
    /// returns an error at once on Linux, and new connections are refused); an adopted
    /// one is shared with its owner, which goes on listening on it for the next start, so
    /// it is woken by a connection of its own instead, which the stopping server drops.
    fn shut(&self) {
        let fd = match self {
            Listener::Unix(l, ..) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Adopted(Adopted::Unix(l)) => {
                if let Some(p) = l
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(PathBuf::from))
                {
                    let _ = UnixStream::connect(p);
                }
                return;
            }
            Listener::Adopted(Adopted::Tcp(l)) => {
                if let Ok(a) = l.local_addr() {
                    let _ = std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1));
                }
                return;
            }
        };
        let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
    }
}

/// Stops a running [`Server`] from another thread (a signal handler thread, a test).
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    stop: Arc<AtomicBool>,
    /// The listeners, while the server has them: shut to wake the accept loops.
    listeners: Arc<Mutex<Vec<Weak<Listener>>>>,
    wake: Listen,
}

impl ShutdownHandle {
    /// Asks the server to stop; [`Server::run`] returns once the requests in flight are
    /// done and the export is flushed.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for l in listeners.iter().filter_map(Weak::upgrade) {
            l.shut();
        }
    }
}

/// Lets go of the exports a running [`Server`]'s table no longer offers (after a
/// reload of an [`Exports`] whose contents change).
#[derive(Clone)]
pub struct ExportsHandle {
    shared: Weak<Shared>,
}

impl fmt::Debug for ExportsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportsHandle").finish_non_exhaustive()
    }
}

impl ExportsHandle {
    /// Flushes and closes every export that no connection uses and the table no longer
    /// holds (one still used is flushed and closed when its last client leaves); the
    /// failed flushes. Nothing once the server has stopped.
    pub fn release_unoffered(&self) -> Vec<io::Error> {
        let Some(shared) = self.shared.upgrade() else {
            return Vec::new();
        };
        shared
            .served
            .release_idle()
            .into_iter()
            .filter_map(Result::err)
            .collect()
    }
}

/// An NBD server for the exports of a table.
pub struct Server {
    /// The first listener, the one [`Server::local`] names.
    listener: Arc<Listener>,
    /// The ones [`Server::also_bind`] and [`Server::also_adopt`] added, with their
    /// addresses.
    more: Vec<(Arc<Listener>, Listen)>,
    shared: Arc<Shared>,
    handle: ShutdownHandle,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("listen", &self.handle.wake)
            .field("serving", &self.shared.serving)
            .finish_non_exhaustive()
    }
}

/// The identity of the file at `path` (not following a symbolic link): device and inode.
fn identity(path: &Path) -> Option<(u64, u64)> {
    fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuses a socket path longer than a socket address holds: bound through a detour
/// (below), such a path would exist, but no client, and not the server's own stop, could
/// connect to it.
fn check_socket_path(path: &Path) -> Result<(), Error> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(Error::SocketPathTooLong(path.display().to_string(), len));
    }
    Ok(())
}

fn bind_unix(path: &Path, mode: u32) -> Result<(UnixListener, (u64, u64)), Error> {
    check_socket_path(path)?;
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
    // umask, and no one connects in between.
    let private = private_dir(path)?;
    let tmp = private.join("s");
    let bound = bind_in(&private).and_then(|l| {
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))
            .map_err(|e| Error::Io("setting the socket's mode", e))?;
        let id = identity(&tmp).ok_or_else(|| {
            Error::Io("reading the socket's inode", io::ErrorKind::NotFound.into())
        })?;
        fs::rename(&tmp, path).map_err(|e| Error::Io("moving the socket into place", e))?;
        Ok((l, id))
    });
    if bound.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    let _ = fs::remove_dir(&private);
    bound
}

/// Binds a socket named `s` in the directory `dir`. The temporary directory adds its own
/// name to the path, so a path of 107 bytes or a little less with a short file name would
/// not fit a socket address any more: the socket is bound through the directory's
/// descriptor (`/proc/self/fd/N/s`, a few bytes whatever the path), and through its path
/// only where /proc is missing.
fn bind_in(dir: &Path) -> Result<UnixListener, Error> {
    let failed = |e| Error::Io("binding the socket", e);
    let handle = fs::File::open(dir).map_err(failed)?;
    let fd_path = Path::new("/proc/self/fd").join(handle.as_raw_fd().to_string());
    if fs::metadata(&fd_path).is_ok_and(|m| m.is_dir()) {
        return UnixListener::bind(fd_path.join("s")).map_err(failed);
    }
    let tmp = dir.join("s");
    check_socket_path(&tmp)?;
    UnixListener::bind(&tmp).map_err(failed)
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

/// Binds `listen` (a loopback TCP address, or a Unix socket with
/// [`ServerConfig::socket_mode`]); gives the listener and the address it is reached at.
fn bind_listener(listen: &Listen, config: &ServerConfig) -> Result<(Listener, Listen), Error> {
    match listen {
        Listen::Unix(p) => {
            if config.socket_mode & !0o777 != 0 {
                return Err(Error::SocketMode(config.socket_mode));
            }
            let (l, id) = bind_unix(p, config.socket_mode)?;
            Ok((Listener::Unix(l, p.clone(), id), Listen::Unix(p.clone())))
        }
        Listen::Tcp(a) => {
            if !a.ip().is_loopback() {
                return Err(Error::NotLoopback(a.to_string()));
            }
            let l = TcpListener::bind(a).map_err(|e| Error::Io("binding the port", e))?;
            let local = l
                .local_addr()
                .map_err(|e| Error::Io("reading the bound address", e))?;
            Ok((Listener::Tcp(l), Listen::Tcp(local)))
        }
    }
}

/// The address a socket handed over by another process is reached at.
fn adopted_address(listener: &Adopted) -> Result<Listen, Error> {
    let failed = |e| Error::Io("reading the passed socket's address", e);
    Ok(match listener {
        Adopted::Unix(l) => {
            let addr = l.local_addr().map_err(failed)?;
            Listen::Unix(addr.as_pathname().map(PathBuf::from).unwrap_or_default())
        }
        Adopted::Tcp(l) => Listen::Tcp(l.local_addr().map_err(failed)?),
    })
}

/// A table of one export, named [`ServerConfig::export_name`], kept in use until the
/// server stops; and what the server's first log line says it serves.
fn single(export: Arc<dyn Export>, config: &ServerConfig) -> (Arc<dyn Exports>, Served, String) {
    let serving = format!(
        "export {:?} ({} bytes{})",
        config.export_name,
        export.size(),
        if export.read_only() {
            ", read-only"
        } else {
            ""
        }
    );
    let table = ExportTable::single(
        &config.export_name,
        config.description.clone(),
        export.clone(),
    );
    let served = Served::default();
    served.keep(export);
    (Arc::new(table), served, serving)
}

impl Server {
    /// Binds `listen` for `export` alone, named [`ServerConfig::export_name`] and
    /// described by [`ServerConfig::description`], for every client that reaches the
    /// socket; it answers to the default name "" too. Flushed when the server stops.
    pub fn bind(
        listen: &Listen,
        export: Arc<dyn Export>,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let (listener, wake) = bind_listener(listen, &config)?;
        let (table, served, serving) = single(export, &config);
        Ok(Server::over(listener, wake, table, served, serving, config))
    }

    /// Binds `listen` for the exports of `exports`: a client sees the names
    /// [`Exports::list`] gives it and uses the export [`Exports::lookup`] finds for it.
    /// [`ServerConfig::export_name`] and [`ServerConfig::description`] play no part. An
    /// export is flushed when its last client leaves if the table no longer offers it,
    /// and when the server stops otherwise.
    pub fn bind_exports(
        listen: &Listen,
        exports: Arc<dyn Exports>,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let (listener, wake) = bind_listener(listen, &config)?;
        let serving = "its exports".to_string();
        Ok(Server::over(
            listener,
            wake,
            exports,
            Served::default(),
            serving,
            config,
        ))
    }

    /// Serves `export` on a listening socket made elsewhere (systemd's socket activation:
    /// `ListenStream=`), which the server neither removes nor shuts: the socket's owner
    /// keeps accepting clients into its queue while the service is stopped.
    pub fn adopt(
        listener: Adopted,
        export: Arc<dyn Export>,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let wake = adopted_address(&listener)?;
        let (table, served, serving) = single(export, &config);
        let listener = Listener::Adopted(listener);
        Ok(Server::over(listener, wake, table, served, serving, config))
    }

    /// Serves the exports of `exports` (as [`Server::bind_exports`]) on a listening socket
    /// made elsewhere (as [`Server::adopt`]).
    pub fn adopt_exports(
        listener: Adopted,
        exports: Arc<dyn Exports>,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let wake = adopted_address(&listener)?;
        let listener = Listener::Adopted(listener);
        let serving = "its exports".to_string();
        Ok(Server::over(
            listener,
            wake,
            exports,
            Served::default(),
            serving,
            config,
        ))
    }

    /// A server on `listener` (reached at `wake`) for the exports of `exports`.
    fn over(
        listener: Listener,
        wake: Listen,
        exports: Arc<dyn Exports>,
        served: Served,
        serving: String,
        config: ServerConfig,
    ) -> Server {
        let listener = Arc::new(listener);
        Server {
            handle: ShutdownHandle {
                stop: Arc::new(AtomicBool::new(false)),
                listeners: Arc::new(Mutex::new(vec![Arc::downgrade(&listener)])),
                wake,
            },
            listener,
            more: Vec::new(),
            shared: Arc::new(Shared {
                exports,
                config,
                served,
                serving,
                epoch: Instant::now(),
            }),
        }
    }

    /// Where the server listens (for TCP port 0, the port actually bound): its first
    /// listener's address.
    pub fn local(&self) -> &Listen {
        &self.handle.wake
    }

    /// Every address the server listens on, the first one first.
    pub fn locals(&self) -> Vec<Listen> {
        std::iter::once(self.handle.wake.clone())
            .chain(self.more.iter().map(|(_, l)| l.clone()))
            .collect()
    }

    /// Binds `listen` too (with the same [`ServerConfig`]: the socket's mode), served as
    /// the first: the same table, slots and shutdown. Gives the address bound (for TCP
    /// port 0, the port). With more than one listener, a removed Unix socket does not stop
    /// the server ([`ServerConfig::stop_when_socket_gone`] applies to a server of one).
    pub fn also_bind(&mut self, listen: &Listen) -> Result<Listen, Error> {
        let (listener, at) = bind_listener(listen, &self.shared.config)?;
        self.add(listener, at.clone());
        Ok(at)
    }

    /// Serves on `listener`, made elsewhere (as [`Server::adopt`]), too; as
    /// [`Server::also_bind`].
    pub fn also_adopt(&mut self, listener: Adopted) -> Result<Listen, Error> {
        let at = adopted_address(&listener)?;
        self.add(Listener::Adopted(listener), at.clone());
        Ok(at)
    }

    fn add(&mut self, listener: Listener, at: Listen) {
        let listener = Arc::new(listener);
        self.handle
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&listener));
        self.more.push((listener, at));
    }

    /// A handle that stops [`Server::run`].
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// A handle that lets go of the exports the table no longer offers.
    pub fn exports_handle(&self) -> ExportsHandle {
        ExportsHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Accepts and serves connections until shut down; then waits for every connection's
    /// requests in flight and flushes the exports in use.
    pub fn run(self) -> Result<(), Error> {
        let shared = self.shared.clone();
        let next_id = Arc::new(AtomicU64::new(1));
        let open = Arc::new(Connections::new(
            shared.config.max_connections,
            shared.config.max_handshakes,
        ));
        let threads = Arc::new(Mutex::new(Vec::<JoinHandle<()>>::new()));
        let all: Vec<&Arc<Listener>> = std::iter::once(&self.listener)
            .chain(self.more.iter().map(|(l, _)| l))
            .collect();
        let listen_desc = all
            .iter()
            .map(|l| describe(l))
            .collect::<Vec<_>>()
            .join(", ");
        shared
            .config
            .log(format_args!("serving {} on {listen_desc}", shared.serving));

        // A removed socket stops a server that has no other way in.
        let lost = Arc::new(AtomicBool::new(false));
        let (watch_stop, watcher) = match &*self.listener {
            Listener::Unix(_, p, id)
                if shared.config.stop_when_socket_gone && self.more.is_empty() =>
            {
                let (tx, rx) = mpsc::channel::<()>();
                let w = watch_socket(
                    p.clone(),
                    *id,
                    rx,
                    self.handle.clone(),
                    lost.clone(),
                    open.clone(),
                    shared.config.observer.clone(),
                );
                (Some(tx), Some(w))
            }
            _ => (None, None),
        };

        let accepting = Accepting {
            shared: shared.clone(),
            next_id,
            open: open.clone(),
            threads: threads.clone(),
            handle: self.handle.clone(),
        };
        let mut loops = Vec::new();
        for (l, _) in &self.more {
            let (l, a) = (l.clone(), accepting.clone());
            match thread::Builder::new()
                .name("nbd-accept".into())
                .spawn(move || a.serve(&l))
            {
                Ok(h) => loops.push(h),
                Err(e) => {
                    self.handle.shutdown();
                    for h in loops {
                        let _ = h.join();
                    }
                    return Err(Error::Io("starting an accept thread", e));
                }
            }
        }
        accepting.serve(&self.listener);
        // The others were shut with this one.
        for h in loops {
            let _ = h.join();
        }
        let result = Ok(());
        let threads: Vec<JoinHandle<()>> =
            std::mem::take(&mut *threads.lock().unwrap_or_else(PoisonError::into_inner));

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
        // No new connection waits in the backlog of a server that has stopped. (An
        // adopted socket's backlog is its owner's: clients waiting there start the next
        // run of the service.)
        for l in &all {
            if !matches!(***l, Listener::Adopted(_)) {
                l.shut();
            }
        }
        drop(watch_stop);
        if let Some(w) = watcher {
            let _ = w.join();
        }
        for l in &all {
            if let Listener::Unix(_, p, id) = &***l {
                // Only our own socket: one that replaced it belongs to someone else.
                if identity(p) == Some(*id) {
                    let _ = fs::remove_file(p);
                }
            }
        }
        let flushed = shared.served.len();
        let mut failed = shared.served.flush_all().into_iter();
        if let Some(e) = failed.next() {
            for other in failed {
                shared
                    .config
                    .log(format_args!("flushing an export at shutdown: {other}"));
            }
            return Err(Error::Io("flushing the export", e));
        }
        shared.config.log(format_args!(
            "shut down; {}",
            if flushed == 1 {
                "export flushed".to_string()
            } else {
                format!("{flushed} exports flushed")
            }
        ));
        match &*self.listener {
            Listener::Unix(_, p, _) if lost.load(Ordering::SeqCst) => {
                result.and(Err(Error::SocketGone(p.display().to_string())))
            }
            _ => result,
        }
    }
}

/// How a listener is named in the log.
fn describe(l: &Listener) -> String {
    match l {
        Listener::Unix(_, p, _) => format!("unix:{}", p.display()),
        Listener::Tcp(l) | Listener::Adopted(Adopted::Tcp(l)) => l
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into()),
        Listener::Adopted(Adopted::Unix(l)) => match l.local_addr() {
            Ok(a) => match a.as_pathname() {
                Some(p) => format!("unix:{} (passed by the service manager)", p.display()),
                None => "an unnamed Unix socket (passed by the service manager)".into(),
            },
            Err(_) => "?".into(),
        },
    }
}

/// What every accept loop of a server shares: connection numbers, slots, the
/// connections' threads.
#[derive(Clone)]
struct Accepting {
    shared: Arc<Shared>,
    next_id: Arc<AtomicU64>,
    open: Arc<Connections>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    handle: ShutdownHandle,
}

impl Accepting {
    /// Accepts connections on `listener`, each served on a thread of its own, until the
    /// server is shut down.
    fn serve(&self, listener: &Listener) {
        let shared = &self.shared;
        let open = &self.open;
        loop {
            let accepted = match listener {
                Listener::Unix(l, ..) | Listener::Adopted(Adopted::Unix(l)) => {
                    l.accept().map(|(s, _)| Stream::Unix(s))
                }
                Listener::Tcp(l) | Listener::Adopted(Adopted::Tcp(l)) => {
                    l.accept().map(|(s, _)| {
                        let _ = s.set_nodelay(true);
                        Stream::Tcp(s)
                    })
                }
            };
            if self.handle.stop.load(Ordering::SeqCst) {
                return;
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
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let Ok(handle) = stream.try_clone() else {
                shared
                    .config
                    .log(format_args!("connection {id}: refused (no descriptor)"));
                stream.shutdown(Shutdown::Both);
                continue;
            };
            if let Admission::ClosedIdle { closed, idle_for } = open.arrive(id, handle) {
                shared.config.log(format_args!(
                    "connection {closed}: closed after {:.1} s in its handshake, to make \
                     room for connection {id} ({} handshakes at once)",
                    idle_for.as_secs_f64(),
                    shared.config.max_handshakes
                ));
            }
            let shared2 = shared.clone();
            let open2 = open.clone();
            let last = shared.config.exit_after_last.then(|| self.handle.clone());
            let spawned = thread::Builder::new()
                .name(format!("nbd-{id}"))
                .spawn(move || {
                    // The slot is freed however the connection ends, a panic included.
                    let _leaving = Leaving(&open2, id, last);
                    connection(stream, &shared2, id, Some(&open2));
                });
            let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
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
        }
    }
}

/// How often a Unix socket's path is checked to be still the server's socket.
const SOCKET_CHECK: Duration = Duration::from_millis(500);

/// Watches that `path` is still the socket `id` the server bound, until `done` is
/// dropped or sent to. When it is gone or replaced, no new client can reach the server:
/// sets `lost`, and stops the server once no client past its handshake is left (the
/// clients connected keep being served: a kernel NBD client under a mounted file system
/// would lose the writes it has not flushed if the server went away under it).
fn watch_socket(
    path: PathBuf,
    id: (u64, u64),
    done: mpsc::Receiver<()>,
    handle: ShutdownHandle,
    lost: Arc<AtomicBool>,
    open: Arc<Connections>,
    observer: Option<Arc<dyn Observer>>,
) -> JoinHandle<()> {
    thread::spawn(move || {
        while let Err(mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(SOCKET_CHECK) {
            if lost.load(Ordering::SeqCst) {
                if open.served() == 0 {
                    handle.shutdown();
                    return;
                }
            } else if identity(&path) != Some(id) {
                let served = open.served();
                let line = format!(
                    "the socket {} was removed or replaced: no new client can connect; \
                     stopping {}",
                    path.display(),
                    if served == 0 {
                        "now".to_string()
                    } else {
                        format!("when the {served} connected client(s) have disconnected")
                    }
                );
                // Said whether or not logging is on: the server is going away.
                match &observer {
                    Some(o) => o.message(format_args!("{line}")),
                    None => eprintln!("sectorcrypt-nbd: {line}"),
                }
                lost.store(true, Ordering::SeqCst);
                if served == 0 {
                    handle.shutdown();
                    return;
                }
            }
        }
    })
}

/// Removes a connection from the tables when dropped; stops the server through the
/// handle, when there is one, if it was the last connection past its handshake (one that
/// leaves in its handshake, or was closed to make room, never stops the server).
struct Leaving<'a>(&'a Connections, u64, Option<ShutdownHandle>);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        let left = self.0.remove(self.1);
        if let (Some(0), Some(handle)) = (left, &self.2) {
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
    let table = ExportTable::single(&config.export_name, config.description.clone(), export);
    let shared = Shared {
        exports: Arc::new(table),
        config,
        served: Served::default(),
        serving: String::new(),
        epoch: Instant::now(),
    };
    connection(Stream::Unix(stream), &shared, 0, None);
}

/// Serves connection `id` on `stream`: its handshake, then, once `open` (the listener's
/// tables, when there are some) has given it a slot for the export it chose, the
/// transmission phase on that export.
fn connection(mut stream: Stream, shared: &Shared, id: u64, open: Option<&Connections>) {
    let log = |args: fmt::Arguments<'_>| shared.config.log(args);
    let write_timeout = Some(shared.config.write_timeout).filter(|t| !t.is_zero());
    let deadline = Instant::now() + shared.config.handshake_timeout;
    // The slot, asked for once the export is chosen: one of the export's own, if it has
    // a limit, then one of the server's; the connection's activity starts then (idle),
    // and it uses the export's flushes.
    let mut admitted = None;
    let mut admit = |chosen: &Chosen| {
        let per_export = shared.config.max_connections_per_export;
        let Some(writeback) = shared.served.try_enter(&chosen.export, per_export) else {
            log(format_args!(
                "connection {id}: refused: export {:?} has its {per_export} connections",
                chosen.info.name
            ));
            return Err(Busy::Export);
        };
        let a = Arc::new(Activity::new(shared.epoch));
        match open.map(|o| o.admit(id, a.clone())) {
            None | Some(Admission::Admitted) => {}
            Some(Admission::ClosedIdle { closed, idle_for }) => log(format_args!(
                "connection {closed}: closed after {:.1} s idle, to make room for connection \
                 {id} ({} connections open)",
                idle_for.as_secs_f64(),
                shared.config.max_connections,
            )),
            Some(Admission::Full) => {
                leave(shared, id, &chosen.export, &chosen.info.name);
                return Err(Busy::Server);
            }
        }
        admitted = Some((a, writeback, chosen.export.clone()));
        Ok(())
    };
    let mut haggle = Haggle::new(
        &*shared.exports,
        stream.peer(),
        shared.config.max_payload,
        match &shared.config.tls {
            None => TlsMode::Off,
            Some(t) if t.required() => TlsMode::Required,
            Some(_) => TlsMode::Allowed,
        },
    );
    let tls = shared.config.tls.as_ref();
    let negotiated = handshake_phase(&mut stream, deadline, &mut haggle, tls, &mut admit)
        .and_then(|n| stream.set_write_timeout(write_timeout).map(|()| n));
    let peer = haggle.peer().clone();
    let chosen = haggle.take_chosen();
    let (negotiated, admitted, chosen) = match (negotiated, admitted, chosen) {
        (Ok((Outcome::Transmit, session)), Some((activity, writeback, held)), Some(chosen)) => {
            // One hold on the export is enough (`leave` counts the holders).
            drop(held);
            let over = if session.is_some() { " over TLS" } else { "" };
            let Chosen { export, info } = chosen;
            log(format_args!(
                "connection {id}: transmission{over} on export {:?} for {peer}",
                info.name
            ));
            let seen = Connection {
                id,
                export: &info.name,
                peer: &peer,
                tls: session.is_some(),
            };
            // Told of the end however it comes (a panic in the export included).
            let observed = shared.config.observer.as_ref().map(|o| {
                o.connected(&seen);
                Observed {
                    observer: &**o,
                    seen,
                    error: None,
                }
            });
            let cx = Context {
                export: &*export,
                info: &info,
                config: &shared.config,
                writeback: &writeback,
                activity: &activity,
                id,
            };
            let ended = transmission::serve(stream, session, cx);
            if let Err(e) = &ended {
                log(format_args!("connection {id}: ended: {e}"));
            }
            if let (Some(mut o), Err(e)) = (observed, ended) {
                o.error = Some(e);
                drop(o);
            }
            leave(shared, id, &export, &info.name);
            return;
        }
        other => other,
    };
    // The handshake ended without the transmission phase: an export admitted (its
    // acknowledgement failed to leave) is given back.
    if let Some((_, _, export)) = admitted {
        let name = chosen.map(|c| c.info.name).unwrap_or_default();
        leave(shared, id, &export, &name);
    }
    match negotiated {
        Ok((Outcome::Transmit, _)) => {
            // Unreachable: the transmission phase follows an admission and a choice.
        }
        Ok((Outcome::Close(why), _)) => {
            log(format_args!("connection {id}: closed in handshake ({why})"));
        }
        Ok((Outcome::StartTls, _)) => {
            log(format_args!(
                "connection {id}: closed in handshake (no TLS)"
            ));
        }
        Err(e) => {
            log(format_args!("connection {id}: handshake failed: {e}"));
        }
    }
    stream.shutdown(Shutdown::Both);
}

/// Tells the observer that a connection ended when dropped, with its error if one was
/// set.
struct Observed<'a> {
    observer: &'a dyn Observer,
    seen: Connection<'a>,
    error: Option<io::Error>,
}

impl Drop for Observed<'_> {
    fn drop(&mut self) {
        self.observer.disconnected(&self.seen, self.error.as_ref());
    }
}

/// Connection `id` stops using `export` (named `name`); logs the flush of an export its
/// table let go, when it was the last connection.
fn leave(shared: &Shared, id: u64, export: &Arc<dyn Export>, name: &str) {
    match shared.served.leave(export) {
        Some(Err(e)) => shared.config.log(format_args!(
            "connection {id}: flushing export {name:?}, which its table no longer offers, \
             after its last client left: {e}"
        )),
        Some(Ok(())) => shared.config.log(format_args!(
            "connection {id}: export {name:?} flushed and closed after its last client left \
             (its table no longer offers it)"
        )),
        None => {}
    }
}

/// The handshake `haggle`, all of it before `deadline` (reads and writes): the option
/// haggling, and when the client starts TLS, the TLS handshake and the rest of the
/// haggling over it, with the subject of the client's certificate added to the peer;
/// `admit` is asked for a slot once the export is chosen. Gives the TLS session the
/// transmission phase goes on in, if any.
fn handshake_phase(
    stream: &mut Stream,
    deadline: Instant,
    haggle: &mut Haggle<'_>,
    tls: Option<&ServerTls>,
    admit: &mut dyn FnMut(&Chosen) -> Result<(), Busy>,
) -> io::Result<(Outcome, Option<rustls::ServerConnection>)> {
    let mut plain = Deadline::new(stream, deadline);
    let outcome = handshake::negotiate(&mut plain, haggle, admit)?;
    let (Outcome::StartTls, Some(tls)) = (&outcome, tls) else {
        return Ok((outcome, None));
    };
    let mut session = tls::accept(tls, &mut plain)?;
    haggle.set_tls_subject(tls::client_subject(tls, &session));
    let mut secure = rustls::Stream::new(&mut session, &mut plain);
    let outcome = handshake::negotiate(&mut secure, haggle, admit)?;
    secure.flush()?;
    Ok((outcome, Some(session)))
}
