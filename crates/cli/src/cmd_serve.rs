//! `sectorcrypt serve`: the plaintext of a volume over NBD, until SIGINT or SIGTERM.

use crate::args::ServeArgs;
use crate::failure::Failure;
use crate::volume_export;
use sectorcrypt_nbd::{Listen, Server, ServerConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

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
    let mut export = volume_export::open(&a.open)?;
    export.allow_discards(a.allow_discards);
    let config = ServerConfig {
        export_name: a.export_name.clone(),
        description: Some(format!("sectorcrypt {}", a.open.image.display())),
        ..ServerConfig::default()
    };
    let server =
        Server::bind(&listen, std::sync::Arc::new(export), config).map_err(|e| match e {
            sectorcrypt_nbd::Error::Io(..) => Failure::runtime(e),
            _ => Failure::usage(e),
        })?;
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
