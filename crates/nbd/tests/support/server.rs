//! A server for one test: its own Unix socket in a temporary directory, run on a thread,
//! stopped (and checked to stop cleanly) at the end.

use sectorcrypt_nbd::{Export, Exports, Listen, Server, ServerConfig, ShutdownHandle};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::{self, JoinHandle};

/// A running server.
pub struct Running {
    _dir: tempfile::TempDir,
    /// The socket it listens on.
    pub sock: PathBuf,
    pub handle: ShutdownHandle,
    /// The thread running [`Server::run`]; taken by [`Running::stop`].
    pub thread: Option<JoinHandle<Result<(), sectorcrypt_nbd::Error>>>,
}

impl Running {
    /// The NBD URI of the export (for nbdinfo, nbdcopy, qemu-io, qemu-img).
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.sock.display())
    }

    /// The NBD URI of export `name`.
    pub fn uri_of(&self, name: &str) -> String {
        format!("nbd+unix:///{name}?socket={}", self.sock.display())
    }

    /// Shuts the server down; panics unless `run` returns `Ok`.
    pub fn stop(mut self) {
        self.handle.shutdown();
        self.thread.take().unwrap().join().unwrap().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.handle.shutdown();
            let _ = t.join();
        }
    }
}

/// Binds a server for `export` on a fresh socket and runs it.
pub fn start(export: Arc<dyn Export>, config: ServerConfig) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::bind(&Listen::Unix(sock.clone()), export, config).unwrap();
    let handle = server.shutdown_handle();
    let thread = thread::spawn(move || server.run());
    Running {
        _dir: dir,
        sock,
        handle,
        thread: Some(thread),
    }
}

/// Binds a server for the exports of `exports` on a fresh socket and runs it. The
/// socket's directory may be entered by every user, so that the socket's mode
/// ([`ServerConfig::socket_mode`]) decides who may connect.
pub fn start_exports(exports: Arc<dyn Exports>, config: ServerConfig) -> Running {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::bind_exports(&Listen::Unix(sock.clone()), exports, config).unwrap();
    let handle = server.shutdown_handle();
    let thread = thread::spawn(move || server.run());
    Running {
        _dir: dir,
        sock,
        handle,
        thread: Some(thread),
    }
}

/// The tests' configuration: export "vol" with a description, no logging.
pub fn quiet() -> ServerConfig {
    ServerConfig {
        export_name: "vol".into(),
        description: Some("test volume".into()),
        log: false,
        ..ServerConfig::default()
    }
}
