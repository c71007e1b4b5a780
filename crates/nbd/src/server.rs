//! The listener: binds a Unix socket or a loopback TCP port, runs one thread per
//! connection, and shuts down cleanly (stop accepting, stop reading requests, finish the
//! ones in flight, flush the export).

use crate::handshake::{self, Deadline, Outcome};
use crate::proto::*;
use crate::stream::Stream;
use crate::transmission::{self, Budget};
use crate::{Error, Export};
use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket at this path.
    Unix(PathBuf),
    /// A loopback TCP address.
    Tcp(SocketAddr),
}

impl Listen {
    /// Parses `ADDR:PORT` (`[::1]:PORT` for IPv6); refuses every non-loopback address.
    pub fn tcp(addr: &str) -> Result<Listen, Error> {
        let sa: SocketAddr = addr
            .parse()
            .map_err(|_| Error::BadAddress(addr.to_string()))?;
        if !sa.ip().is_loopback() {
            return Err(Error::NotLoopback(addr.to_string()));
        }
        Ok(Listen::Tcp(sa))
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The export's name; clients asking for "" get it too (the default export).
    pub export_name: String,
    /// Shown by NBD_OPT_LIST and NBD_INFO_DESCRIPTION.
    pub description: Option<String>,
    /// Worker threads per connection (requests of one connection run this many at once).
    pub workers_per_connection: usize,
    /// The largest READ or WRITE payload accepted (advertised as the maximum block size).
    pub max_payload: u32,
    /// Connections served at once; more are closed at once (each costs a reader and the
    /// workers' threads).
    pub max_connections: usize,
    /// Log connections and errors on stderr.
    pub log: bool,
    /// The whole handshake (greeting to NBD_OPT_GO) must finish within this time, or the
    /// connection is closed and its slot freed: idle or slow connections in the
    /// handshake count against `max_connections`, so without a bound they could lock
    /// every other client out. Established connections may idle without limit.
    pub handshake_timeout: Duration,
    /// READ and WRITE payload bytes in flight at once over all connections (received
    /// and not yet written to the export, or read and not yet sent): a request waits
    /// for its share before its buffer is allocated, so memory stays bounded however
    /// many clients pipeline large requests. A request larger than the whole budget
    /// waits until it is the only one in flight.
    pub payload_budget: usize,
    /// A reply (or handshake message) that cannot be sent within this time ends its
    /// connection: a client that stops reading cannot hold a worker, its payload budget
    /// or the shutdown forever. Zero: no timeout.
    pub write_timeout: Duration,
    /// On shutdown, connections get this long to finish the requests already read and
    /// send their replies; then their sockets are shut both ways (a blocked send fails at
    /// once), the workers finish, and the export is flushed.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            export_name: String::new(),
            description: None,
            workers_per_connection: 4,
            max_payload: 32 << 20,
            max_connections: 64,
            log: true,
            handshake_timeout: Duration::from_secs(10),
            payload_budget: 256 << 20,
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) export: Arc<dyn Export>,
    pub(crate) config: ServerConfig,
    pub(crate) budget: Arc<Budget>,
}

impl Shared {
    pub(crate) fn name_matches(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.config.export_name.as_bytes()
    }

    pub(crate) fn preferred_block_size(&self) -> u32 {
        self.export
            .preferred_block_size()
            .clamp(self.export.min_block_size().max(1), self.config.max_payload)
    }

    pub(crate) fn transmission_flags(&self) -> u16 {
        let e = &*self.export;
        let mut f = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH;
        if e.read_only() {
            f |= FLAG_READ_ONLY;
        } else {
            f |= FLAG_SEND_FUA | FLAG_SEND_WRITE_ZEROES;
            if e.can_trim() {
                f |= FLAG_SEND_TRIM;
            }
        }
        if e.can_multi_conn() {
            f |= FLAG_CAN_MULTI_CONN;
        }
        f
    }

    pub(crate) fn log(&self, args: fmt::Arguments<'_>) {
        if self.config.log {
            eprintln!("sectorcrypt-nbd: {args}");
        }
    }
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

fn bind_unix(path: &Path) -> Result<UnixListener, Error> {
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
    // Bind under a temporary name and rename into place once listening: the socket path
    // appears only when connections are accepted (a client that waits for the path never
    // sees "connection refused" between bind and listen).
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let _ = fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(|e| Error::Io("binding the socket", e))?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(Error::Io("moving the socket into place", e));
    }
    Ok(listener)
}

impl Server {
    /// Binds `listen` for `export`.
    pub fn bind(
        listen: &Listen,
        export: Arc<dyn Export>,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let (listener, wake) = match listen {
            Listen::Unix(p) => (
                Listener::Unix(bind_unix(p)?, p.clone()),
                Listen::Unix(p.clone()),
            ),
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
                budget: Arc::new(Budget::new(config.payload_budget)),
                config,
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
        let open: Arc<Mutex<HashMap<u64, Stream>>> = Arc::new(Mutex::new(HashMap::new()));
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let listen_desc = match &self.listener {
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into()),
        };
        shared.log(format_args!(
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
                    shared.log(format_args!("accept failed: {e}"));
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            {
                let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
                if open.len() >= shared.config.max_connections {
                    shared.log(format_args!(
                        "connection {id}: refused ({} connections open)",
                        open.len()
                    ));
                    stream.shutdown(Shutdown::Both);
                    continue;
                }
                if let Ok(c) = stream.try_clone() {
                    open.insert(id, c);
                }
            }
            let shared2 = shared.clone();
            let open2 = open.clone();
            let spawned = thread::Builder::new()
                .name(format!("nbd-{id}"))
                .spawn(move || {
                    connection(stream, &shared2, id);
                    open2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    shared.log(format_args!("connection {id}: no thread: {e}"));
                    if let Some(s) = open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
                        s.shutdown(Shutdown::Both);
                    }
                }
            }
            threads.retain(|h| !h.is_finished());
        };

        // Stop reading requests on every connection; the requests already read finish
        // and get their replies.
        for s in open.lock().unwrap_or_else(|e| e.into_inner()).values() {
            s.shutdown(Shutdown::Read);
        }
        // A client that stopped reading replies keeps a worker in a send: after the grace
        // period its socket is shut both ways so the send fails and the worker goes on.
        let grace_end = Instant::now() + shared.config.shutdown_grace;
        while threads.iter().any(|h| !h.is_finished()) && Instant::now() < grace_end {
            thread::sleep(Duration::from_millis(10));
        }
        for s in open.lock().unwrap_or_else(|e| e.into_inner()).values() {
            s.shutdown(Shutdown::Both);
        }
        for h in threads {
            let _ = h.join();
        }
        if let Listener::Unix(_, p) = &self.listener {
            let _ = fs::remove_file(p);
        }
        shared
            .export
            .flush()
            .map_err(|e| Error::Io("flushing the export", e))?;
        shared.log(format_args!("shut down; export flushed"));
        result
    }
}

fn connection(mut stream: Stream, shared: &Arc<Shared>, id: u64) {
    if let Err(e) =
        stream.set_write_timeout(Some(shared.config.write_timeout).filter(|t| !t.is_zero()))
    {
        shared.log(format_args!("connection {id}: no write timeout: {e}"));
        stream.shutdown(Shutdown::Both);
        return;
    }
    let deadline = Instant::now() + shared.config.handshake_timeout;
    let negotiated = handshake::negotiate(&mut Deadline::new(&mut stream, deadline), shared);
    // Established connections may idle (clients keep them open between uses).
    let negotiated = negotiated.and_then(|o| stream.set_read_timeout(None).map(|()| o));
    match negotiated {
        Ok(Outcome::Transmit) => {
            shared.log(format_args!("connection {id}: transmission"));
            if let Err(e) = transmission::serve(stream, shared.clone(), id) {
                shared.log(format_args!("connection {id}: ended: {e}"));
            }
        }
        Ok(Outcome::Close(why)) => {
            shared.log(format_args!("connection {id}: closed in handshake ({why})"));
            stream.shutdown(Shutdown::Both);
        }
        Err(e) => {
            shared.log(format_args!("connection {id}: handshake failed: {e}"));
            stream.shutdown(Shutdown::Both);
        }
    }
}
