//! Messages to the service manager: systemd's `sd_notify` protocol.
//!
//! The manager names a Unix datagram socket in `$NOTIFY_SOCKET` (a path, or `@name` for
//! an abstract socket). Each message is one datagram of `KEY=VALUE` lines: `READY=1` once
//! the server accepts connections, `STATUS=...` free text shown by `systemctl status`,
//! `STOPPING=1` when it begins to shut down, `RELOADING=1` with `MONOTONIC_USEC` while it
//! rereads its configuration, `WATCHDOG=1` at least every half of `$WATCHDOG_USEC`.
//! Without `$NOTIFY_SOCKET` there is no manager to tell, and [`Notifier::from_env`]
//! gives `None`: callers need no check of their own.

use crate::Env;
use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::time::Duration;

/// Where the messages go, and the socket they leave from.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    to: Target,
}

#[derive(Debug)]
enum Target {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` names, `None` when it is unset or empty. A value
    /// that is neither an absolute path nor `@name` is an error: the manager expects
    /// messages that would never arrive.
    pub fn from_env(env: Env<'_>) -> io::Result<Option<Notifier>> {
        let Some(value) = env("NOTIFY_SOCKET").filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let to = if let Some(name) = value.strip_prefix('@') {
            Target::Abstract(name.as_bytes().to_vec())
        } else if value.starts_with('/') {
            Target::Path(PathBuf::from(value))
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("NOTIFY_SOCKET={value:?} is neither an absolute path nor @NAME"),
            ));
        };
        let socket = UnixDatagram::unbound()?;
        Ok(Some(Notifier { socket, to }))
    }

    /// Sends one message of `KEY=VALUE` lines as it is.
    pub fn send(&self, message: &str) -> io::Result<()> {
        let sent = match &self.to {
            Target::Path(p) => self.socket.send_to(message.as_bytes(), p)?,
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt as _;
                let addr = SocketAddr::from_abstract_name(name)?;
                self.socket.send_to_addr(message.as_bytes(), &addr)?
            }
        };
        if sent != message.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the notification was cut short",
            ));
        }
        Ok(())
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// A status line (`systemctl status` shows it).
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.send(&format!("STATUS={}", one_line(status)))
    }

    /// `STOPPING=1` with a status line.
    pub fn stopping(&self, status: &str) -> io::Result<()> {
        self.send(&format!("STOPPING=1\nSTATUS={}", one_line(status)))
    }

    /// `RELOADING=1` with the monotonic clock's time, as `Type=notify-reload` wants;
    /// [`Notifier::ready`] ends the reload.
    pub fn reloading(&self) -> io::Result<()> {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map_err(io::Error::from)?;
        let usec = now.tv_sec() as u64 * 1_000_000 + now.tv_nsec() as u64 / 1_000;
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"))
    }

    /// `WATCHDOG=1`: the server is alive.
    pub fn watchdog(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }
}

/// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when it is set and
/// `$WATCHDOG_PID` (if set) is this process; `None` when the manager watches nothing.
pub fn watchdog_interval(env: Env<'_>) -> Option<Duration> {
    let usec: u64 = env("WATCHDOG_USEC")?.parse().ok().filter(|&u| u > 0)?;
    if let Some(pid) = env("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    Some(Duration::from_micros(usec) / 2)
}

/// A status is one line: the protocol separates fields by newlines.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn receive(s: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = s.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn messages_reach_the_socket_the_environment_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let manager = UnixDatagram::bind(&path).unwrap();
        manager
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let e = env(&[("NOTIFY_SOCKET", path.to_str().unwrap())]);
        let n = Notifier::from_env(&e).unwrap().unwrap();
        n.ready("serving 2 exports\nsecond line").unwrap();
        assert_eq!(
            receive(&manager),
            "READY=1\nSTATUS=serving 2 exports second line"
        );
        n.status("3 clients").unwrap();
        assert_eq!(receive(&manager), "STATUS=3 clients");
        n.watchdog().unwrap();
        assert_eq!(receive(&manager), "WATCHDOG=1");
        n.reloading().unwrap();
        let r = receive(&manager);
        let usec = r.strip_prefix("RELOADING=1\nMONOTONIC_USEC=").unwrap();
        assert!(usec.parse::<u64>().unwrap() > 0, "{r}");
        n.stopping("draining").unwrap();
        assert_eq!(receive(&manager), "STOPPING=1\nSTATUS=draining");
    }

    #[test]
    fn an_abstract_socket_is_named_with_an_at_sign() {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("sectorcrypt-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let manager = UnixDatagram::bind_addr(&addr).unwrap();
        manager
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let value = format!("@{name}");
        let e = env(&[("NOTIFY_SOCKET", &value)]);
        Notifier::from_env(&e)
            .unwrap()
            .unwrap()
            .ready("up")
            .unwrap();
        assert_eq!(receive(&manager), "READY=1\nSTATUS=up");
    }

    #[test]
    fn no_socket_means_no_notifier_and_a_relative_one_is_an_error() {
        assert!(Notifier::from_env(&env(&[])).unwrap().is_none());
        assert!(Notifier::from_env(&env(&[("NOTIFY_SOCKET", "")]))
            .unwrap()
            .is_none());
        let e = Notifier::from_env(&env(&[("NOTIFY_SOCKET", "run/notify")])).unwrap_err();
        assert!(e.to_string().contains("neither an absolute path"), "{e}");
    }

    #[test]
    fn the_watchdog_is_pinged_at_half_its_interval_and_only_for_its_process() {
        let me = std::process::id().to_string();
        let other = (std::process::id() + 1).to_string();
        assert_eq!(
            watchdog_interval(&env(&[("WATCHDOG_USEC", "30000000")])),
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            watchdog_interval(&env(&[("WATCHDOG_USEC", "4000000"), ("WATCHDOG_PID", &me)])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            watchdog_interval(&env(&[
                ("WATCHDOG_USEC", "4000000"),
                ("WATCHDOG_PID", &other)
            ])),
            None
        );
        assert_eq!(watchdog_interval(&env(&[("WATCHDOG_USEC", "0")])), None);
        assert_eq!(watchdog_interval(&env(&[])), None);
    }
}
