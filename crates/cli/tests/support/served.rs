//! A `sectorcrypt serve` process for the tests that talk to it over its Unix socket
//! (included with `#[path = "support/served.rs"] mod served;` beside `mod support;` and
//! `mod volumes;`): started and waited for until the socket appears, stopped with a
//! signal, killed if the test ends early.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use crate::support::s;
use crate::volumes;
use sectorcrypt_testkit::run_stdout as run;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `sectorcrypt serve` process; killed if the test ends early.
pub struct Served {
    pub child: Option<Child>,
    pub sock: PathBuf,
}

impl Served {
    /// Starts `sectorcrypt serve ARGS --socket SOCK` and waits for the socket.
    pub fn start(args: &[&str], sock: &Path) -> Served {
        let all = [&["serve"], args, &["--socket", s(sock)]].concat();
        Served::wait(volumes::spawn(&all, Stdio::piped()), sock)
    }

    /// Starts `sectorcrypt ARGS` (a command that serves on `sock`) and waits for the socket.
    pub fn start_command(args: &[&str], sock: &Path) -> Served {
        Served::wait(volumes::spawn(args, Stdio::piped()), sock)
    }

    /// [`Served::start`] under the file mode creation mask `umask` (octal).
    pub fn start_umask(umask: &str, args: &[&str], sock: &Path) -> Served {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
            .arg(crate::support::bin())
            .arg("serve")
            .args(args)
            .arg("--socket")
            .arg(sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Served::wait(child, sock)
    }

    /// Waits until `child` listens on `sock`.
    fn wait(child: Child, sock: &Path) -> Served {
        let mut served = Served {
            child: Some(child),
            sock: sock.to_path_buf(),
        };
        let t0 = Instant::now();
        while !sock.exists() {
            if let Some(st) = served.child.as_mut().unwrap().try_wait().unwrap() {
                let out = served.child.take().unwrap().wait_with_output().unwrap();
                panic!(
                    "serve exited with {st}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        served
    }

    /// The export's NBD URI.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.sock.display())
    }

    /// Sends `signal` and returns the exit status and stderr.
    pub fn stop(mut self, signal: &str) -> (std::process::ExitStatus, String) {
        let child = self.child.take().unwrap();
        run(Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string()));
        let out = child.wait_with_output().unwrap();
        (out.status, String::from_utf8_lossy(&out.stderr).to_string())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `sectorcrypt ARGS`, a command that must fail at start instead of serving; panics
/// when it is still running after 20 seconds (it is killed first). Its output.
pub fn refused(args: &[&str]) -> std::process::Output {
    let mut child = volumes::spawn(args, Stdio::piped());
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after 20 s instead of refusing to start: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
