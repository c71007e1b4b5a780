//! `sectorcrypt serve`: the plaintext of a volume over NBD, until SIGINT or SIGTERM (or
//! until its Unix socket is removed and its last client gone). Who may connect is said once at the start: a
//! warning when any local user can connect and be served, that is over TCP, or through a
//! Unix socket whose mode lets others in (`--socket-mode`) in directories every user can
//! reach, unless TLS is required with client certificates (`--tls-verify-peer`). TLS
//! (`--tls`, `--tls-certificates`, `--tls-verify-peer`) is set up before the volume is
//! opened, so a bad certificate directory (or a private key others can read) costs no
//! passphrase. SIGINT and SIGTERM stop it while it is still unlocking, too. A stop waits
//! for the requests in flight and flushes; a second SIGINT or SIGTERM stops at once (an
//! upstream that never answers, with no `--remote-timeout`, holds the first for ever).
//!
//! Over a remote store (an NBD URI or an `rbd:` image: the encrypting proxy) each
//! connection gets more workers: their requests wait on the network, not on the CPU, and
//! every request in flight downstream is one in flight upstream, which is what hides the
//! store's latency. An NBD upstream gets 16 per connection (with 1 ms of latency upstream
//! fewer left the proxy below the plain forwarder, bench/remote.sh); an RBD image 6: librbd
//! queues and sends each request by its own threads, 4 connections x 6 already keep more
//! in flight than the OSDs need, and each waiting worker costs context switches on the
//! cores the OSDs share (sequential NBD writes over a single-node cluster, bench/ceph.sh:
//! 53-65 centiseconds of server CPU per GiB with 6, 61-78 with 16, qemu-nbd 48-64).
//!
//! Under a service manager (`$NOTIFY_SOCKET`, systemd's `Type=notify`) the server says
//! READY=1 once its socket accepts connections, STOPPING=1 when a signal stops it, and
//! WATCHDOG=1 at half of `$WATCHDOG_USEC`. `--metrics` serves the export's counters in
//! Prometheus' text format (`sectorcrypt_service::metrics`), its connections counted by
//! the NBD server's observer (`sectorcrypt_gateway::clients::Counted`).
//!
//! With `--config FILE` or `--export NAME=LOCATOR` in place of IMAGE it serves many
//! volumes, each under its name (`commands::gateway` turns the command line into the
//! gateway's configuration; `sectorcrypt_gateway::table` opens the volumes into the
//! server's export table, each counted under its name for `--metrics` and `status`).
//! SIGHUP, and `sectorcrypt gateway reload` through the control socket, read a `--config`
//! file again (`sectorcrypt_gateway::live`), between RELOADING=1 and READY=1. A gateway
//! registers in the runtime directory (`commands::gateway::register`) and logs through
//! `sectorcrypt_gateway::log` (`--log-format text|json`), the NBD server's messages and
//! its clients' connects and disconnects included (`sectorcrypt_gateway::clients`).

use crate::failure::Failure;
use crate::flags::tls::{TlsArgs, TlsMode};
use crate::flags::ServeArgs;
use sectorcrypt_gateway::clients::{Clients, Counted};
use sectorcrypt_gateway::live::Gateway;
use sectorcrypt_gateway::log::{Log, LogFormat};
use sectorcrypt_gateway::metered::Metered;
use sectorcrypt_image::reencrypt::{Online, ReencryptOptions};
use sectorcrypt_nbd::tls::{ServerTls, TlsError};
use sectorcrypt_nbd::{Adopted, Listen, Server, ServerConfig};
use sectorcrypt_service::activation::{listeners, Listener};
use sectorcrypt_service::http::{Endpoint, MetricsServer};
use sectorcrypt_service::metrics::{ExportMetrics, Metrics};
use sectorcrypt_service::notify::{watchdog_interval, Notifier};
use sectorcrypt_service::process_env;
use sectorcrypt_volume::luks::luks2::reencrypt::Outcome;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Workers per connection when the volume is on an NBD export.
const NBD_WORKERS: usize = 16;

/// Workers per connection when the volume is on an RBD image.
const RBD_WORKERS: usize = 6;

pub fn run(a: ServeArgs) -> Result<(), Failure> {
    crate::volumes::image::request(&a.tcrypt)?;
    // Many volumes (--config, --export) or the one IMAGE.
    let gateway = crate::commands::gateway::from_args(&a)?;
    if gateway.is_some() && a.tcrypt.named.is_some() {
        return Err(Failure::usage(
            "--type names the format of one volume IMAGE, not of a gateway's exports",
        ));
    }
    if a.reencrypt && gateway.is_some() {
        return Err(Failure::usage(
            "--reencrypt serves one volume (IMAGE), not a gateway's exports",
        ));
    }
    let log_format: LogFormat = a.log_format.parse().map_err(Failure::usage)?;
    if gateway.is_none() && (a.name.is_some() || log_format != LogFormat::Text) {
        return Err(Failure::usage(
            "--name and --log-format json are a gateway's (--config FILE or --export \
             NAME=LOCATOR), not of one volume IMAGE",
        ));
    }
    // Where to listen: the command line's one address, or the configuration's (a
    // gateway listens on each of them).
    let listen: Vec<Listen> = match (&a.socket, &a.listen) {
        (Some(p), None) => vec![Listen::Unix(p.clone())],
        (None, Some(addr)) => vec![Listen::tcp(addr).map_err(Failure::usage)?],
        (None, None) => match &gateway {
            Some(c) => crate::commands::gateway::listen(c)?,
            None => Vec::new(),
        },
        _ => return Err(Failure::usage("give exactly one of --socket and --listen")),
    };
    // Without any, the sockets systemd passes (socket activation), taken now: they are
    // this process's, and none is a usage error before any passphrase is asked. A
    // gateway serves on every socket passed, one volume on one.
    let mut adopted = match listen.is_empty() {
        false => Vec::new(),
        true => passed_sockets(gateway.is_some())?,
    }
    .into_iter();
    let first_adopted = adopted.next();
    // Signals are caught before anything is opened, so a stop that comes early still
    // goes through the clean path.
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::runtime(format!("cannot catch signals: {e}")))?;
    // A gateway reloads its configuration on SIGHUP (caught from now on: one that comes
    // while the volumes are opened waits for the server).
    let hup = match &gateway {
        Some(_) => Some(
            Signals::new([SIGHUP])
                .map_err(|e| Failure::runtime(format!("cannot catch SIGHUP: {e}")))?,
        ),
        None => None,
    };
    let tls = match &gateway {
        Some(c) => server_tls(&crate::commands::gateway::tls_args(c, &a.tls)?)?,
        None => server_tls(&a.tls)?,
    };
    let tls_kind = tls.as_ref().map(|t| (t.required(), t.verify_peer()));
    // Unlocked on a thread of its own: a signal during a key derivation made to last for
    // hours stops the server at once.
    let notifier = Notifier::from_env(&process_env)
        .map_err(|e| Failure::usage(format!("NOTIFY_SOCKET: {e}")))?
        .map(Arc::new);
    let metrics_given = a
        .metrics
        .clone()
        .or_else(|| gateway.as_ref().and_then(|c| c.metrics.clone()));
    let metrics_at = match &metrics_given {
        Some(m) => Some(metrics_endpoint(m)?),
        None => None,
    };
    let defaults = ServerConfig::default();
    let socket_mode = a.socket_mode.unwrap_or(defaults.socket_mode);
    let mut config = ServerConfig {
        read_timeout: Duration::from_secs(a.timeout),
        idle_timeout: Duration::from_secs(a.idle_timeout),
        socket_mode,
        exit_after_last: a.exit_after_last,
        tls,
        ..defaults
    };
    let metrics = metrics_at.as_ref().map(|_| {
        let backend = sectorcrypt_crypto::Backend::selected()
            .map(|b| b.name())
            .unwrap_or("unknown");
        Arc::new(Metrics::new(backend))
    });
    let spawn_metrics = |at: &Endpoint, metrics: Arc<Metrics>| {
        MetricsServer::spawn(at, metrics).map_err(|e| {
            Failure::runtime(format!(
                "--metrics {}: {e}",
                metrics_given.as_deref().unwrap_or("")
            ))
        })
    };
    let served = match gateway {
        Some(gateway) => {
            // Its requests are always counted: `status` shows them, with or without
            // --metrics.
            let counted = metrics.clone().unwrap_or_else(|| {
                let backend = sectorcrypt_crypto::Backend::selected()
                    .map(|b| b.name())
                    .unwrap_or("unknown");
                Arc::new(Metrics::new(backend))
            });
            // The gateway's log, and its clients (for `status` and the connection
            // metrics) told by the server.
            let log = Arc::new(Log::stderr(log_format));
            let clients = Arc::new(Clients::new(log.clone(), Some(counted.clone())));
            config.observer = Some(clients.clone());
            config.workers_per_connection = gateway
                .exports
                .iter()
                .map(|e| workers_for(std::path::Path::new(&e.image)))
                .try_fold(config.workers_per_connection, |most, w| {
                    w.map(|w| most.max(w))
                })?;
            if let Some(n) = gateway.max_connections {
                config.max_connections = n;
            }
            config.max_connections_per_export =
                gateway.connections_per_export(config.max_connections);
            let opts = sectorcrypt_gateway::table::Options {
                credentials: std::env::var_os("CREDENTIALS_DIRECTORY").map(Into::into),
                threads: a.open.threads,
                allow_discards: a.allow_discards,
                metrics: Some(counted),
                log: Some(log.clone()),
            };
            let (gateway, opened) =
                interruptibly(&mut signals, "opening the exports", move || {
                    crate::host::memory::hold_keys_for_long();
                    let opened = Gateway::open(gateway, opts);
                    crate::host::memory::scrub_after_unlock();
                    opened
                })?
                .map_err(crate::commands::gateway::open_failure)?;
            crate::host::memory::warn_through_if_key_memory_not_locked(&|w| log.warning(w));
            for o in &opened {
                log.info(crate::commands::gateway::opened_line(o));
            }
            if let (Some(at), Some(m)) = (&metrics_at, metrics) {
                spawn_metrics(at, m)?;
            }
            let gateway = Arc::new(gateway);
            let table: Arc<dyn sectorcrypt_nbd::Exports> = gateway.clone();
            let bound = match (listen.first(), first_adopted) {
                (Some(l), _) => Server::bind_exports(l, table, config),
                (None, Some(passed)) => Server::adopt_exports(passed, table, config),
                (None, None) => unreachable!("a socket to listen on was found above"),
            };
            let running = Running {
                gateway,
                clients,
                log,
            };
            (bound, Some(running), None, None)
        }
        None => {
            let unlocking = Instant::now();
            let (mut export, online) = if a.reencrypt {
                let o = reencrypt_options(&a)?;
                let (export, online) = crate::volumes::export::open_online(&a.open, &o)?;
                (export, Some(online))
            } else {
                let export = crate::commands::open::unlock_interruptibly(&a.open, &mut signals)?;
                (export, None)
            };
            let unlock_took = unlocking.elapsed();
            export.allow_discards(a.allow_discards);
            config.workers_per_connection = workers_for(&a.open.image)?;
            config.export_name = a.export_name.clone();
            config.description = Some(format!(
                "sectorcrypt {}",
                crate::present::locator::redacted(&a.open.image)
            ));
            let mut counting = None;
            let export: Arc<dyn sectorcrypt_nbd::Export> = match (&metrics_at, metrics) {
                (Some(at), Some(metrics)) => {
                    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
                    let counted = Arc::new(ExportMetrics::new(&a.export_name, threads));
                    counted.key_derived(unlock_took);
                    metrics.add(counted.clone());
                    spawn_metrics(at, metrics)?;
                    counting = Some(counted.clone());
                    // The connections are counted by the server, which knows them.
                    config.observer = Some(Arc::new(Counted::new(counted.clone())));
                    Arc::new(Metered::new(export, counted))
                }
                _ => Arc::new(export),
            };
            let bound = match (listen.first(), first_adopted) {
                (Some(l), _) => Server::bind(l, export, config),
                (None, Some(passed)) => Server::adopt(passed, export, config),
                (None, None) => unreachable!("a socket to listen on was found above"),
            };
            (bound, None, online, counting)
        }
    };
    let (served, gateway, online, counting) = served;
    let failed = |e: sectorcrypt_nbd::Error| match e {
        sectorcrypt_nbd::Error::Io(..) => Failure::runtime(e),
        _ => Failure::usage(e),
    };
    let mut server = served.map_err(failed)?;
    // A gateway's other addresses, and the other sockets passed.
    for l in listen.iter().skip(1) {
        server.also_bind(l).map_err(failed)?;
    }
    for passed in adopted {
        server.also_adopt(passed).map_err(failed)?;
    }
    let log = gateway.as_ref().map(|g| g.log.clone());
    for at in server.locals() {
        if let Some(warning) = open_to_all(&at, socket_mode, tls_kind) {
            match &log {
                Some(log) => log.warning(warning),
                None => eprintln!("sectorcrypt: warning: {warning}"),
            }
        }
    }
    let (reloader, registered) = match (gateway, hup) {
        (Some(running), Some(hup)) => {
            let reload = Arc::new(Reload {
                gateway: running.gateway.clone(),
                path: a.config.clone(),
                exports: server.exports_handle(),
                notifier: notifier.clone(),
                log: running.log.clone(),
            });
            let answer = {
                let (running, reload) = (running.clone(), reload.clone());
                Arc::new(move |request: &str| match request {
                    "reload" => reload.run(),
                    _ => running.gateway.status(&running.clients),
                })
            };
            let registered = crate::commands::gateway::register(
                a.name.as_deref(),
                &server.locals(),
                a.config.as_deref(),
                answer,
                &running.log,
            )?;
            if let Some(r) = &registered {
                running.log.info(format!(
                    "gateway {}: `sectorcrypt status` shows it, `sectorcrypt gateway reload \
                     {}` reloads it",
                    r.name(),
                    r.name()
                ));
            }
            (Some(reload_on_hangup(hup, reload)), registered)
        }
        _ => (None, None),
    };
    let stop_reencrypting = Arc::new(AtomicBool::new(false));
    let reencrypting = online.map(|o| reencrypt_beside(o, stop_reencrypting.clone(), counting, &a));
    let result = serve_until_stopped(server, signals, notifier, log);
    // A stopped server leaves the re-encryption stopped cleanly between two hotzones.
    stop_reencrypting.store(true, Ordering::Relaxed);
    if let Some(t) = reencrypting {
        match t.join() {
            Ok(Err(e)) => eprintln!("sectorcrypt: re-encryption: {}", e.message()),
            Err(_) => eprintln!("sectorcrypt: re-encryption: its thread panicked"),
            Ok(Ok(())) => {}
        }
    }
    if let Some((handle, thread)) = reloader {
        handle.close();
        let _ = thread.join();
    }
    if let Some(r) = registered {
        r.remove();
    }
    result
}

/// A running gateway: its exports, its clients and its log.
#[derive(Clone)]
struct Running {
    gateway: Arc<Gateway>,
    clients: Arc<Clients>,
    log: Arc<Log>,
}

/// How a gateway reloads, on SIGHUP and on `sectorcrypt gateway reload`.
struct Reload {
    gateway: Arc<Gateway>,
    /// The configuration file (`None`: the exports came from the command line, and there
    /// is nothing to read again).
    path: Option<std::path::PathBuf>,
    exports: sectorcrypt_nbd::ExportsHandle,
    notifier: Option<Arc<Notifier>>,
    log: Arc<Log>,
}

impl Reload {
    /// Reads the file again and applies it, then lets the server close the exports
    /// removed that no client uses; says RELOADING=1 and READY=1 (or STATUS= with why
    /// a file was refused) to the service manager. What happened, as JSON (and logged).
    fn run(&self) -> serde_json::Value {
        let Some(path) = &self.path else {
            let message = "nothing to reload (the exports come from --export; --config FILE \
                           can be reloaded)";
            self.log.info(format!("reload: {message}"));
            return serde_json::json!({ "ok": false, "message": message });
        };
        // Type=notify-reload: RELOADING=1 (with the time), READY=1 when done.
        let starting = || {
            if let Some(n) = &self.notifier {
                let _ = n.reloading();
            }
        };
        let done = self.gateway.reload_from(path, &self.log, &starting);
        let message = done["message"].as_str().unwrap_or_default();
        if done["ok"] == serde_json::Value::Bool(true) {
            for e in self.exports.release_unoffered() {
                self.log
                    .warning(format!("reload: flushing a removed export: {e}"));
            }
            if let Some(n) = &self.notifier {
                let _ = n.ready(&format!("reloaded: {message}"));
            }
        } else if let Some(n) = &self.notifier {
            let _ = n.status(&format!("reload {message}"));
        }
        done
    }
}

/// Reloads the gateway at each SIGHUP (one line on the log each time; a file that does
/// not parse or check changes nothing).
fn reload_on_hangup(
    mut hup: Signals,
    reload: Arc<Reload>,
) -> (signal_hook::iterator::Handle, std::thread::JoinHandle<()>) {
    let handle = hup.handle();
    let thread = std::thread::spawn(move || {
        for _ in hup.forever() {
            reload.run();
        }
    });
    (handle, thread)
}

/// Runs `server` until SIGINT or SIGTERM (a second one stops at once), saying READY,
/// WATCHDOG and STOPPING to the service manager through `notifier`.
fn serve_until_stopped(
    server: Server,
    mut signals: Signals,
    notifier: Option<Arc<Notifier>>,
    log: Option<Arc<Log>>,
) -> Result<(), Failure> {
    let say = move |text: String| match &log {
        Some(log) => log.info(text),
        None => eprintln!("sectorcrypt: {text}"),
    };
    let handle = server.shutdown_handle();
    let signals_handle = signals.handle();
    if let Some(n) = &notifier {
        // A manager that is not listening is no reason to stop serving.
        let at: Vec<String> = server.locals().iter().map(describe).collect();
        let _ = n.ready(&format!("serving {}", at.join(", ")));
        if let Some(every) = watchdog_interval(&process_env) {
            let n = n.clone();
            std::thread::spawn(move || loop {
                let _ = n.watchdog();
                std::thread::sleep(every);
            });
        }
    }
    let stopping = notifier.clone();
    let watcher = std::thread::spawn(move || {
        let mut caught = signals.forever();
        if let Some(sig) = caught.next() {
            say(format!(
                "signal {sig}: finishing requests in flight and flushing (a second signal \
                 stops at once)"
            ));
            if let Some(n) = &stopping {
                let _ = n.stopping("finishing requests in flight and flushing");
            }
            handle.shutdown();
        }
        // The requests in flight are waited for: over a remote store without a
        // --remote-timeout, an upstream that never answers would hold the server for
        // ever. A second signal ends it there and then (the iterator ends, without one,
        // once the server has stopped by itself).
        if let Some(sig) = caught.next() {
            say(format!(
                "signal {sig} again: stopping now, without waiting for the requests in \
                 flight or the final flush"
            ));
            std::process::exit(1);
        }
    });
    let result = server.run().map_err(Failure::runtime);
    signals_handle.close();
    let _ = watcher.join();
    result
}

/// The re-encryption options of `serve --reencrypt`.
fn reencrypt_options(a: &ServeArgs) -> Result<ReencryptOptions, Failure> {
    let hotzone = match &a.hotzone_size {
        Some(s) => Some(sectorcrypt_cli::parse_size(s)?),
        None => None,
    };
    Ok(ReencryptOptions {
        resilience: a.resilience.clone(),
        hotzone,
        kdf: None,
        key_slot: a.open.key_slot,
        ..ReencryptOptions::default()
    })
}

/// Runs the re-encryption of a served volume on a thread of its own until it ends or
/// `stop` is set. Between two hotzones it waits as long as the last one took (no request
/// waits then), so clients keep at least about half of their throughput.
fn reencrypt_beside(
    mut online: Online,
    stop: Arc<AtomicBool>,
    metrics: Option<Arc<ExportMetrics>>,
    a: &ServeArgs,
) -> std::thread::JoinHandle<Result<(), Failure>> {
    let name = crate::present::locator::redacted(&a.open.image);
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut last = Instant::now();
        let mut tenth = 0;
        let mut progress = |done: u64, total: u64| {
            let took = last.elapsed();
            if done > 0 && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(took.min(Duration::from_secs(1)));
            }
            last = Instant::now();
            if let Some(m) = &metrics {
                m.reencryption(done, total);
            }
            let now = done.saturating_mul(10) / total.max(1);
            if now > tenth && done < total {
                tenth = now;
                eprintln!(
                    "sectorcrypt: {name}: re-encryption at {}% ({done} of {total} bytes)",
                    now * 10
                );
            }
            !stop.load(Ordering::Relaxed)
        };
        match online.run(&mut progress)? {
            Outcome::Finished => eprintln!(
                "sectorcrypt: {name}: re-encrypted while served ({:.1} s); the old keys are \
                 gone",
                started.elapsed().as_secs_f64()
            ),
            Outcome::Stopped { done, total } => eprintln!(
                "sectorcrypt: {name}: re-encryption stopped at {done} of {total} bytes; \
                 `serve --reencrypt` or `sectorcrypt reencrypt` resumes it"
            ),
        }
        drop(online);
        Ok(())
    })
}

/// Workers per connection for a volume at `image`: more over a remote store, whose
/// requests wait on the network.
fn workers_for(image: &std::path::Path) -> Result<usize, Failure> {
    use crate::present::locator::{locate, Location};
    Ok(match locate(image)? {
        Location::Local => ServerConfig::default().workers_per_connection,
        Location::Nbd(_) => NBD_WORKERS,
        Location::Rbd(_) => RBD_WORKERS,
    })
}

/// Runs `work` on a thread of its own and gives its result, unless SIGINT or SIGTERM
/// comes first (`doing` says what was stopped); the work is then abandoned with the
/// process.
fn interruptibly<T: Send + 'static>(
    signals: &mut Signals,
    doing: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Failure> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("unlock".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| Failure::runtime(format!("starting the unlock thread: {e}")))?;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(done) => return Ok(done),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Failure::runtime(format!(
                    "{doing} failed (its thread ended)"
                )))
            }
        }
        if let Some(sig) = signals.pending().next() {
            return Err(Failure::runtime(format!(
                "signal {sig}: stopped while {doing} (the key derivations were abandoned)"
            )));
        }
    }
}

/// The listening sockets systemd passed (`ListenStream=` of a socket unit), as the NBD
/// server adopts them: one, or (`many`: a gateway) one or more.
fn passed_sockets(many: bool) -> Result<Vec<Adopted>, Failure> {
    let passed =
        listeners(&process_env).map_err(|e| Failure::usage(format!("socket activation: {e}")))?;
    match passed.len() {
        0 => Err(Failure::usage(
            "give --socket PATH or --listen ADDR:PORT (or start under systemd socket \
             activation, which passes the socket)",
        )),
        n if n > 1 && !many => Err(Failure::usage(format!(
            "socket activation passed {n} sockets; serve IMAGE listens on one (one \
             ListenStream= in the socket unit; a gateway, --config or --export, takes \
             several)"
        ))),
        _ => Ok(passed
            .into_iter()
            .map(|p| match p.listener {
                Listener::Unix(l) => Adopted::Unix(l),
                Listener::Tcp(l) => Adopted::Tcp(l),
            })
            .collect()),
    }
}

/// Where the server listens, for the service manager's status line.
fn describe(listen: &Listen) -> String {
    match listen {
        Listen::Unix(p) => format!("on {}", p.display()),
        Listen::Tcp(a) => format!("on {a}"),
    }
}

/// The `--metrics` endpoint: a Unix socket's path, or a loopback TCP address (the metrics
/// name the export and its traffic, which is no one else's business).
fn metrics_endpoint(s: &str) -> Result<Endpoint, Failure> {
    match s.parse::<Endpoint>().map_err(Failure::usage)? {
        Endpoint::Tcp(a) if !a.ip().is_loopback() => Err(Failure::usage(format!(
            "--metrics {a}: not a loopback address (use 127.0.0.1:PORT, [::1]:PORT or a \
             socket path)"
        ))),
        e => Ok(e),
    }
}

/// The warning to give when any local user can connect and be served, or `None`: only
/// clients with a certificate of the CA get in when TLS is required with peer
/// verification (`tls`: (required, verify_peer)); otherwise every local user can reach a
/// TCP port, and a Unix socket whose mode lets others write it when every directory above
/// it lets others through.
fn open_to_all(listen: &Listen, mode: u32, tls: Option<(bool, bool)>) -> Option<String> {
    if tls == Some((true, true)) {
        return None;
    }
    let hint = match tls {
        Some((true, false)) => "; TLS without --tls-verify-peer encrypts but admits anyone",
        Some((false, _)) => "; --tls on lets clients skip TLS",
        _ => "",
    };
    match listen {
        Listen::Tcp(addr) => Some(format!(
            "listening on TCP {addr}: any local user can connect and read and write the \
             volume (a --socket is mode 0600 instead{hint})"
        )),
        Listen::Unix(p) if mode & 0o002 != 0 && reachable_by_others(p) => Some(format!(
            "socket {} is mode {mode:04o} in directories every user can enter: any local \
             user can connect and read and write the volume{hint}",
            p.display()
        )),
        Listen::Unix(_) => None,
    }
}

/// Whether users other than the owner and group can reach `path`: every directory above
/// it lets others through (their execute bit). In doubt (a directory that cannot be
/// read), yes.
fn reachable_by_others(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(parent) = path.parent() else {
        return true;
    };
    let parent = if parent.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        parent
    };
    let Ok(dir) = parent.canonicalize() else {
        return true;
    };
    dir.ancestors().all(|d| {
        std::fs::metadata(d)
            .map(|m| m.permissions().mode() & 0o001 != 0)
            .unwrap_or(true)
    })
}

/// The server's TLS from the options: `--tls` defaults to `require` when a certificates
/// directory is given, to `off` otherwise; contradictions are usage errors.
fn server_tls(a: &TlsArgs) -> Result<Option<ServerTls>, Failure> {
    let mode = a.tls.unwrap_or(match a.tls_certificates {
        Some(_) => TlsMode::Require,
        None => TlsMode::Off,
    });
    match (mode, &a.tls_certificates) {
        (TlsMode::Off, None) if a.tls_verify_peer => Err(Failure::usage(
            "--tls-verify-peer needs TLS (--tls-certificates DIR)",
        )),
        (TlsMode::Off, None) => Ok(None),
        (TlsMode::Off, Some(_)) => Err(Failure::usage(
            "--tls-certificates is given but --tls is off: drop one of them",
        )),
        (_, None) => Err(Failure::usage(
            "--tls on|require needs --tls-certificates DIR (with server-cert.pem and \
             server-key.pem)",
        )),
        (mode, Some(dir)) => ServerTls::from_dir(dir, a.tls_verify_peer, mode == TlsMode::Require)
            .map(Some)
            .map_err(|e| match e {
                TlsError::Read(..) => Failure::runtime(format!("TLS: {e}")),
                _ => Failure::usage(format!("TLS: {e}")),
            }),
    }
}
