//! An `nbdkit` process serving one test: started in the foreground on a Unix socket (or a
//! loopback TCP port), waited for until it listens (its pid file appears once it does, so
//! no connection is made to find out), killed when dropped. Tests that need
//! it first check `have("nbdkit")` (through `require!`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nbdkit; killed when dropped.
#[derive(Debug)]
pub struct Nbdkit {
    child: Option<Child>,
    /// Its Unix socket (`None` when it listens on TCP).
    pub sock: Option<PathBuf>,
    /// Its loopback TCP port (when it listens on TCP).
    pub port: Option<u16>,
    args: Vec<String>,
}

impl Nbdkit {
    /// `nbdkit -f -U SOCK ARGS` (ARGS: options, filters, the plugin and its parameters).
    pub fn unix(sock: &Path, args: &[&str]) -> Nbdkit {
        let mut n = Nbdkit {
            child: None,
            sock: Some(sock.to_path_buf()),
            port: None,
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        n.restart();
        n
    }

    /// `nbdkit -f -i 127.0.0.1 -p PORT ARGS` on a free port.
    pub fn tcp(args: &[&str]) -> Nbdkit {
        for _ in 0..20 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut n = Nbdkit {
                child: None,
                sock: None,
                port: Some(port),
                args: args.iter().map(|s| s.to_string()).collect(),
            };
            if n.try_start() {
                return n;
            }
        }
        panic!("nbdkit could not listen on any loopback port");
    }

    /// The NBD URI of its default export.
    pub fn uri(&self) -> String {
        match (&self.sock, self.port) {
            (Some(s), _) => format!("nbd+unix:///?socket={}", s.display()),
            (None, Some(p)) => format!("nbd://127.0.0.1:{p}/"),
            _ => unreachable!("nbdkit listens somewhere"),
        }
    }

    /// Kills the process (SIGKILL) and waits for it: the export vanishes mid-flight.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again with the same arguments (after [`Nbdkit::kill`]).
    pub fn restart(&mut self) {
        assert!(self.try_start(), "nbdkit {:?} did not start", self.args);
    }

    fn try_start(&mut self) -> bool {
        self.kill();
        let pidfile = match (&self.sock, self.port) {
            (Some(s), _) => s.with_extension("pid"),
            (None, p) => std::env::temp_dir().join(format!(
                "nbdkit-{}-{}.pid",
                std::process::id(),
                p.unwrap_or(0)
            )),
        };
        let _ = std::fs::remove_file(&pidfile);
        let mut cmd = Command::new("nbdkit");
        cmd.args(["-f", "--exit-with-parent", "-P"]).arg(&pidfile);
        if let Some(s) = &self.sock {
            let _ = std::fs::remove_file(s);
            cmd.arg("-U").arg(s);
        }
        if let Some(p) = self.port {
            cmd.args(["-i", "127.0.0.1", "-p", &p.to_string()]);
        }
        let mut child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run nbdkit");
        let t0 = Instant::now();
        loop {
            if std::fs::metadata(&pidfile).is_ok_and(|m| m.len() > 0) {
                let _ = std::fs::remove_file(&pidfile);
                self.child = Some(child);
                return true;
            }
            if child.try_wait().ok().flatten().is_some() || t0.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        self.kill();
    }
}
