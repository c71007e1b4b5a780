//! `sectorcrypt serve`: the plaintext of a volume over NBD, until SIGINT or SIGTERM. Who
//! may connect is said once at the start: a Unix socket's mode (0600 unless widened), or a
//! warning that a TCP port is open to every local user. TLS (`--tls`,
//! `--tls-certificates`, `--tls-verify-peer`) is set up before the volume is opened, so a
//! bad certificate directory costs no passphrase. SIGINT and SIGTERM stop it while it is
//! still unlocking, too.
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

use crate::args::ServeArgs;
use crate::args_tls::{TlsArgs, TlsMode};
use crate::failure::Failure;
use sectorcrypt_nbd::tls::{ServerTls, TlsError};
use sectorcrypt_nbd::{Listen, Server, ServerConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::time::Duration;

/// Workers per connection when the volume is on an NBD export.
const NBD_WORKERS: usize = 16;

/// Workers per connection when the volume is on an RBD image.
const RBD_WORKERS: usize = 6;

pub fn run(a: ServeArgs) -> Result<(), Failure> {
    let listen = match (&a.socket, &a.listen) {
        (Some(p), None) => Listen::Unix(p.clone()),
        (None, Some(addr)) => Listen::tcp(addr).map_err(Failure::usage)?,
        _ => return Err(Failure::usage("give exactly one of --socket and --listen")),
    };
    // Signals are caught before anything is opened, so a stop that comes early still
    // goes through the clean path.
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::runtime(format!("cannot catch signals: {e}")))?;
    let tls = server_tls(&a.tls)?;
    // Unlocked on a thread of its own: a signal during a key derivation made to last for
    // hours stops the server at once.
    let mut export = crate::cmd_open::unlock_interruptibly(&a.open, &mut signals)?;
    export.allow_discards(a.allow_discards);
    let defaults = ServerConfig::default();
    let remote = crate::locator::locate(&a.open.image)?;
    let workers = match remote {
        crate::locator::Location::Local => defaults.workers_per_connection,
        crate::locator::Location::Nbd(_) => NBD_WORKERS,
        crate::locator::Location::Rbd(_) => RBD_WORKERS,
    };
    let config = ServerConfig {
        workers_per_connection: workers,
        export_name: a.export_name.clone(),
        description: Some(format!(
            "sectorcrypt {}",
            crate::locator::redacted(&a.open.image)
        )),
        read_timeout: Duration::from_secs(a.timeout),
        idle_timeout: Duration::from_secs(a.idle_timeout),
        socket_mode: a.socket_mode.unwrap_or(defaults.socket_mode),
        exit_after_last: a.exit_after_last,
        tls,
        ..defaults
    };
    let server =
        Server::bind(&listen, std::sync::Arc::new(export), config).map_err(|e| match e {
            sectorcrypt_nbd::Error::Io(..) => Failure::runtime(e),
            _ => Failure::usage(e),
        })?;
    if let Listen::Tcp(addr) = server.local() {
        eprintln!(
            "sectorcrypt: warning: listening on TCP {addr}: any local user can connect and \
             read and write the volume (a --socket is mode 0600 instead)"
        );
    }
    let handle = server.shutdown_handle();
    let signals_handle = signals.handle();
    let watcher = std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("sectorcrypt: signal {sig}: finishing requests in flight and flushing");
            handle.shutdown();
        }
    });
    let result = server.run().map_err(Failure::runtime);
    signals_handle.close();
    let _ = watcher.join();
    result
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
