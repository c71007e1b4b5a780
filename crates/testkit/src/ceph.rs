//! A single-node Ceph cluster shared by all the tests of one test binary: the first test
//! that asks starts it with `scripts/ceph.sh start DIR --until-exit PID` (the script's
//! watcher stops it and removes DIR once the binary has exited); every later test gets
//! the same one, or the same reason why there is none, and skips with it printed (fails
//! with it under `SECTORCRYPT_STRICT=1`: CI installs Ceph). `SECTORCRYPT_CEPH=off` skips
//! without trying (a failure under `SECTORCRYPT_STRICT=1` too).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A running cluster: its state directory and its configuration file.
#[derive(Debug)]
pub struct Cluster {
    /// The state directory (removed when the test binary exits).
    pub dir: PathBuf,
    /// `ceph.conf`: what `CEPH_CONF` and the `conf=` of an `rbd:` spec point at.
    pub conf: PathBuf,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn start() -> Result<Cluster, String> {
    if std::env::var("SECTORCRYPT_CEPH").is_ok_and(|v| v == "off") {
        return Err("SECTORCRYPT_CEPH=off".into());
    }
    let base = std::env::temp_dir().join(format!("sectorcrypt-ceph-{}", std::process::id()));
    let out = Command::new("bash")
        .arg(repo().join("scripts/ceph.sh"))
        .arg("start")
        .arg(&base)
        .arg("--until-exit")
        .arg(std::process::id().to_string())
        .output()
        .map_err(|e| format!("scripts/ceph.sh: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let why = text.lines().last().unwrap_or("").trim().to_string();
        return Err(if why.is_empty() {
            format!(
                "scripts/ceph.sh failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        } else {
            why
        });
    }
    let conf = base.join("ceph.conf");
    Ok(Cluster { dir: base, conf })
}

/// The binary's cluster, started on first use; or why there is none.
pub fn cluster() -> Result<&'static Cluster, &'static str> {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            let started = start();
            if let Err(why) = &started {
                eprintln!("ceph tests skipped: {why}");
            }
            started
        })
        .as_ref()
        .map_err(|e| e.as_str())
}

/// Returns from the calling test, printing why ([`skip`](crate::skip): a failure under
/// `SECTORCRYPT_STRICT=1`), unless the shared cluster runs; otherwise binds it.
#[macro_export]
macro_rules! require_ceph {
    () => {
        match $crate::ceph::cluster() {
            Ok(c) => c,
            Err(why) => {
                $crate::skipped!("skipped: no ceph cluster ({why})");
                return;
            }
        }
    };
}

impl Cluster {
    /// A command (`rbd`, `ceph`, `qemu-img`...) with `CEPH_CONF` set to this cluster.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("CEPH_CONF", &self.conf);
        c
    }

    /// Runs `rbd ARGS` against this cluster; panics with its output on failure.
    pub fn rbd(&self, args: &[&str]) -> String {
        crate::run_stdout(self.command("rbd").args(args))
    }

    /// The `rbd:` spec of `pool/image` on this cluster (its conf file given explicitly).
    pub fn spec(&self, image: &str) -> String {
        format!("rbd:{image}:conf={}", self.conf.display())
    }

    /// A directory holding `bin/qemu-img`, `bin/qemu-nbd`, `bin/qemu-io` with qemu's rbd
    /// driver (`scripts/ceph.sh qemu`), or why there is none.
    pub fn qemu(&self) -> Result<&'static Path, &'static str> {
        static QEMU: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        QEMU.get_or_init(|| {
            let out = Command::new("bash")
                .arg(repo().join("scripts/ceph.sh"))
                .arg("qemu")
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() {
                Ok(PathBuf::from(text))
            } else {
                Err(text)
            }
        })
        .as_ref()
        .map(|p| p.as_path())
        .map_err(|e| e.as_str())
    }
}
