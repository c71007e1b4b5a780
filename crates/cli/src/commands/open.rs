//! `sectorcrypt open IMAGE NAME`, `close NAME` and `status [NAME]`: a volume unlocked
//! once and served under a name by one background process, over NBD at RUNTIME/NAME.sock
//! and, on request, as a FUSE file with a loop device on it (`open_state` keeps the
//! entries). A gateway (`serve --config`) registers there too, its entry of kind
//! `gateway` and RUNTIME/NAME.sock its control socket: `status` asks it for its exports
//! and clients (`commands::gateway::with_exports`), and `close` stops it.
//!
//! `open` checks the name, starts itself again with `--foreground` (as `mount` does: same
//! arguments, standard input and error, so every way of unlocking works), and returns once
//! the serving process has published its entry as ready. That process claims the name
//! first (the entry file is created only when missing), unlocks, binds the socket, mounts
//! the disk file and attaches the loop device, then serves until SIGTERM or SIGINT. On the
//! way out it detaches the loop device, unmounts (the file system's end flushes), stops the
//! server, flushes and removes its entry; a failure half-way undoes what was set up.
//! `close` refuses while the loop device or the disk file is in use anywhere (`busy`:
//! holders, mounts in any mount namespace, open descriptors, mappings), unless `--force`;
//! then it detaches the loop device itself so that an error reaches the user, signals the
//! process and waits for it.
//!
//! The volume is unlocked on a thread of its own while the main thread watches for
//! SIGINT and SIGTERM ([`unlock_interruptibly`], used by `serve` too): a header whose key
//! derivation is made to last for hours is abandoned at once, the name released. `open`
//! itself passes a SIGINT or SIGTERM it gets before the entry is ready on to that process
//! (`mount::background`), so stopping the command stops the unlock too.

use crate::commands::open_state::{self as state, alive};
use crate::failure::Failure;
use crate::flags::open::{CloseArgs, NamedArgs, StatusArgs};
use crate::flags::OpenArgs;
use crate::fuse::mount;
use crate::host::busy;
use crate::present::escape::printable;
use crate::volumes::export::{self as volume_export, VolumeExport};
use sectorcrypt_nbd::{Export, Listen, Server, ServerConfig};
use serde_json::{json, Value};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `close` waits for the serving process to finish and exit.
const CLOSE_WAIT: Duration = Duration::from_secs(120);
/// How long the serving process waits for the FUSE session to end once unmounted.
const FUSE_WAIT: Duration = Duration::from_secs(10);

/// A line on stderr; errors are ignored (in the background nobody may be reading).
fn log(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "sectorcrypt: {args}");
}

pub fn open(volume: OpenArgs, a: NamedArgs) -> Result<(), Failure> {
    state::check_name(&a.name)?;
    let dir = state::runtime_dir()?;
    if a.loop_device && !rustix::process::geteuid().is_root() {
        return Err(Failure::usage("--loop needs root (losetup)"));
    }
    if a.foreground {
        return serve(&volume, &a, &dir);
    }
    if let Some(d) = &a.mount {
        mount::mount_point(d)?;
    }
    let entry = match state::existing_runtime_dir(&dir)? {
        true => state::read(&dir, &a.name)?,
        false => None,
    };
    if let Some(entry) = entry {
        if alive(&entry) {
            return Err(in_use(&a.name, &entry));
        }
        state::clean_stale(&dir, &a.name, &entry);
        log(format_args!(
            "{}: its process was gone; the stale entry was removed",
            a.name
        ));
    }
    mount::background("opening", |pid| {
        state::read(&dir, &a.name)
            .ok()
            .flatten()
            .is_some_and(|e| state::pid(&e) == pid && e["ready"] == Value::Bool(true))
    })?;
    let entry = state::read(&dir, &a.name)?
        .ok_or_else(|| Failure::runtime(format!("{}: the entry is gone", a.name)))?;
    let mut out = format!("{}\n", entry["uri"].as_str().unwrap_or_default());
    if let Some(mp) = entry["mount"].as_str().filter(|_| a.mount.is_some()) {
        out.push_str(&format!("{}/disk\n", mp));
    }
    if let Some(dev) = entry["loop"].as_str() {
        out.push_str(&format!("{dev}\n"));
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(|e| Failure::runtime(format!("standard output: {e}")))
}

fn in_use(name: &str, entry: &Value) -> Failure {
    let what = match entry["image"].as_str() {
        Some(image) => format!("{} is open under it", printable(image)),
        None => "a volume is being opened under it".to_string(),
    };
    Failure::usage(format!(
        "NAME {name} is in use: {what} (process {}); `sectorcrypt close {name}` first",
        state::pid(entry)
    ))
}

/// Claims `name` for this process, removing a stale entry first.
fn claim_name(dir: &Path, name: &str) -> Result<(), Failure> {
    for _ in 0..2 {
        if state::reserve(dir, name)? {
            return Ok(());
        }
        match state::read(dir, name)? {
            Some(e) if alive(&e) => return Err(in_use(name, &e)),
            Some(e) => state::clean_stale(dir, name, &e),
            None => {}
        }
    }
    Err(Failure::usage(format!(
        "NAME {name} is in use (another open is starting)"
    )))
}

/// What the serving process set up, undone in reverse order when dropped.
struct Served {
    dir: PathBuf,
    name: String,
    /// The FUSE mount point, and whether it is the private one (removed at the end).
    mount: Option<(PathBuf, bool)>,
    fuse: Option<fuser::BackgroundSession>,
    loop_dev: Option<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let (Some(dev), Some((mp, _))) = (self.loop_dev.take(), &self.mount) {
            // `close` detached it already; otherwise (a signal, a failure) do it here.
            if is_our_loop(&dev, mp) {
                drop_partitions(&dev);
                if let Err(e) = run_tool(Command::new("losetup").arg("-d").arg(&dev)) {
                    log(format_args!("detaching {dev}: {e}"));
                }
            }
        }
        if let (Some(session), Some((mp, _))) = (self.fuse.take(), &self.mount) {
            stop_fuse(session, mp);
        }
        if let Some((mp, true)) = &self.mount {
            let _ = std::fs::remove_dir(mp);
        }
        state::remove(&self.dir, &self.name);
    }
}

/// Whether `dev` is a loop device on the disk file under `mp`.
fn is_our_loop(dev: &str, mp: &Path) -> bool {
    let disk = mp.join("disk");
    state::loop_backing(dev)
        .is_some_and(|f| f.to_string_lossy().starts_with(&*disk.to_string_lossy()))
}

/// Removes the partitions the kernel was told of on the loop device `dev` (`partx -a`):
/// they outlive its detaching, and would show the next file attached to it at their old
/// offsets. A partition in use stays (only `close --force` gets here with one), logged.
fn drop_partitions(dev: &str) {
    let Some(base) = Path::new(dev).file_name().and_then(|b| b.to_str()) else {
        return;
    };
    let any = std::fs::read_dir(Path::new("/sys/block").join(base)).is_ok_and(|list| {
        list.filter_map(Result::ok)
            .any(|e| e.path().join("partition").exists())
    });
    if any {
        if let Err(e) = run_tool(Command::new("partx").args(["-d", dev])) {
            log(format_args!("removing the partitions of {dev}: {e}"));
        }
    }
}

/// Unmounts the disk file (lazily when it is busy) and lets its session finish, which
/// flushes the volume.
fn stop_fuse(session: fuser::BackgroundSession, mp: &Path) {
    if mount::is_mounted(mp) {
        if let Err(e) = mount::unmount(mp) {
            log(format_args!("{e}; detaching it lazily"));
            let _ = mount::unmount_lazily(mp);
        }
    }
    let guard = session.guard;
    let until = Instant::now() + FUSE_WAIT;
    while !guard.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a tool; its stdout (trimmed) on success, its stderr as the error.
fn run_tool(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// The serving process: claim, unlock, serve, publish, and serve until signalled.
fn serve(volume: &OpenArgs, a: &NamedArgs, dir: &Path) -> Result<(), Failure> {
    state::create_runtime_dir(dir)?;
    claim_name(dir, &a.name)?;
    let mut served = Served {
        dir: dir.to_path_buf(),
        name: a.name.clone(),
        mount: None,
        fuse: None,
        loop_dev: None,
    };
    // Signals are caught before anything is opened, so an early stop still cleans up.
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::runtime(format!("cannot catch signals: {e}")))?;
    let mount_dir = match (&a.mount, a.loop_device) {
        (Some(d), _) => Some((d.clone(), false)),
        (None, true) => {
            let p = state::private_mount(dir, &a.name);
            let _ = std::fs::remove_dir(&p);
            std::fs::DirBuilder::new()
                .create(&p)
                .map_err(|e| Failure::runtime(format!("{}: {e}", p.display())))?;
            served.mount = Some((p.clone(), true));
            Some((p, true))
        }
        (None, false) => None,
    };
    let mount_dir = match mount_dir {
        Some((d, private)) => Some((mount::mount_point(&d)?, private)),
        None => None,
    };
    let mut export = unlock_interruptibly(volume, &mut signals)?;
    export.allow_discards(a.allow_discards);
    let export = Arc::new(export);

    let socket = state::socket_path(dir, &a.name);
    let defaults = ServerConfig::default();
    let config = ServerConfig {
        description: Some(format!(
            "sectorcrypt {}",
            crate::present::locator::redacted(&volume.image)
        )),
        // Nobody reads this process's stderr once `open` has returned.
        log: false,
        // A mount or loop device in use must not go away with the socket.
        stop_when_socket_gone: mount_dir.is_none(),
        ..defaults
    };
    let server = Server::bind(
        &Listen::Unix(socket.clone()),
        export.clone() as Arc<dyn Export>,
        config,
    )
    .map_err(|e| Failure::runtime(format!("{}: {e}", socket.display())))?;

    if let Some((mp, _)) = &mount_dir {
        served.mount = mount_dir.clone();
        served.fuse = Some(mount::spawn(&export, &volume.image, mp)?);
        if a.loop_device {
            let mut losetup = Command::new("losetup");
            losetup.args(["-f", "--show"]);
            if export.read_only() {
                losetup.arg("-r");
            }
            let dev = run_tool(losetup.arg(mp.join("disk")))
                .map_err(|e| Failure::runtime(format!("attaching a loop device: {e}")))?;
            served.loop_dev = Some(dev);
        }
    }
    state::publish(dir, &a.name, &entry(volume, a, &export, &socket, &served)?)?;

    let handle = server.shutdown_handle();
    let signals_handle = signals.handle();
    let watcher = std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            log(format_args!("signal {sig}: closing"));
            handle.shutdown();
        }
    });
    let result = server.run().map_err(Failure::runtime);
    signals_handle.close();
    let _ = watcher.join();
    drop(served);
    let flushed = export
        .flush()
        .map_err(|e| Failure::runtime(format!("flushing the volume: {e}")));
    result?;
    flushed
}

/// Unlocks the volume on a thread of its own while this one watches `signals`: SIGINT or
/// SIGTERM during the key derivation (which a hostile header can make last for hours)
/// ends the wait at once with an error; the thread is abandoned with the process.
pub fn unlock_interruptibly(
    volume: &OpenArgs,
    signals: &mut Signals,
) -> Result<VolumeExport, Failure> {
    let (tx, rx) = std::sync::mpsc::channel();
    let args = volume.clone();
    std::thread::Builder::new()
        .name("unlock".into())
        .spawn(move || {
            let _ = tx.send(volume_export::open(&args));
        })
        .map_err(|e| Failure::runtime(format!("starting the unlock thread: {e}")))?;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(opened) => return opened,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Failure::runtime(
                    "unlocking the volume failed (its thread ended)",
                ))
            }
        }
        if let Some(sig) = signals.pending().next() {
            // The unlock thread may be prompting with the terminal's echo off.
            crate::passphrase::restore_terminal();
            return Err(Failure::runtime(format!(
                "signal {sig}: stopped while unlocking {} (the key derivation was abandoned)",
                crate::present::locator::redacted(&volume.image)
            )));
        }
    }
}

/// The entry `status` shows.
fn entry(
    volume: &OpenArgs,
    a: &NamedArgs,
    export: &VolumeExport,
    socket: &Path,
    served: &Served,
) -> Result<Value, Failure> {
    let (format, cipher) = export.described();
    let socket = socket.to_string_lossy();
    // A local path as an absolute one (status may run elsewhere); a URI or spec without
    // its secrets.
    let full = |p: &Path| match std::fs::canonicalize(p) {
        Ok(full) => full.to_string_lossy().into_owned(),
        Err(_) => crate::present::locator::redacted(p),
    };
    let mut entry = state::owner_fields(&a.name)?;
    let rest = json!({
        "ready": true,
        "image": full(&volume.image),
        "header": volume.header.file.as_deref().map(full),
        "format": format,
        "cipher": cipher,
        "size": export.size(),
        "sector_size": export.preferred_block_size(),
        "read_only": export.read_only(),
        "socket": socket,
        "uri": format!("nbd+unix:///?socket={socket}"),
        "mount": served.mount.as_ref().map(|(m, _)| m.to_string_lossy()),
        "loop": served.loop_dev,
    });
    if let Value::Object(rest) = rest {
        entry.extend(rest);
    }
    Ok(Value::Object(entry))
}

/// What uses the volume's loop device or disk file (`busy`), one phrase each.
fn users(entry: &Value) -> Vec<String> {
    let dev = entry["loop"].as_str();
    let mut found = Vec::new();
    if let Some(dev) = dev {
        found.extend(
            busy::device_users(dev)
                .into_iter()
                .map(|u| format!("{dev} is {u}")),
        );
    }
    if let Some(mp) = entry["mount"].as_str() {
        let disk = Path::new(mp).join("disk");
        let shown = printable(&disk.to_string_lossy());
        found.extend(
            busy::file_users(&disk, dev)
                .into_iter()
                .map(|u| format!("{shown} is {u}")),
        );
    }
    found
}

/// Refuses when the block device `dev` cannot be opened exclusively: the kernel's own
/// answer, in every mount namespace, to whether a file system is mounted on it or a device
/// is stacked on it, including holders no process in /proc shows (a mount namespace kept
/// by a bind mount of its nsfs file, with no process left in it).
fn unclaimed(name: &str, dev: &str) -> Result<(), Failure> {
    let claim = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(dev);
    match claim {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(Failure::usage(format!(
            "{name} is busy: {dev} is claimed by a mount or a device on top of it that no \
             process shows (a mount namespace kept without a process, say); unmount it first \
             (or `close --force`, which loses writes the file system on it has not yet \
             written back)"
        ))),
        // Released at once: held through `losetup -d`, it would defer the detach.
        _ => Ok(()),
    }
}

/// Sends SIGTERM to the process of `entry`, through a pidfd opened before its start time
/// is checked again: the signal reaches that process and never one that was given its PID
/// in between (plain kill(2) where the kernel has no pidfd). A process already gone is
/// not an error: the caller's wait ends at once.
fn terminate(name: &str, entry: &Value) -> Result<(), Failure> {
    use rustix::process::{Pid, PidfdFlags, Signal};
    let pid = state::pid(entry);
    let target = Pid::from_raw(pid as i32)
        .ok_or_else(|| Failure::runtime(format!("{name}: bad process id {pid}")))?;
    let stopping = |e: rustix::io::Errno| Failure::runtime(format!("stopping process {pid}: {e}"));
    match rustix::process::pidfd_open(target, PidfdFlags::empty()) {
        Ok(pidfd) if alive(entry) => {
            rustix::process::pidfd_send_signal(&pidfd, Signal::TERM).map_err(stopping)
        }
        Ok(_) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(rustix::io::Errno::NOSYS) if alive(entry) => {
            rustix::process::kill_process(target, Signal::TERM).map_err(stopping)
        }
        Err(rustix::io::Errno::NOSYS) => Ok(()),
        Err(e) => Err(stopping(e)),
    }
}

pub fn close(a: CloseArgs) -> Result<(), Failure> {
    state::check_name(&a.name)?;
    let dir = state::runtime_dir()?;
    let entry = match state::existing_runtime_dir(&dir)? {
        true => state::read(&dir, &a.name)?,
        false => None,
    };
    let Some(entry) = entry else {
        return Err(Failure::usage(format!("nothing is open under {}", a.name)));
    };
    let pid = state::pid(&entry);
    if !alive(&entry) {
        state::clean_stale(&dir, &a.name, &entry);
        log(format_args!(
            "{}: its process was gone; the stale entry was removed",
            a.name
        ));
        return Ok(());
    }
    let in_use = users(&entry);
    if !in_use.is_empty() {
        if !a.force {
            return Err(Failure::usage(format!(
                "{} is busy: {}; unmount it first and stop what holds it (or `close --force`, \
                 which loses writes the file system on it has not yet written back)",
                a.name,
                in_use.join("; ")
            )));
        }
        log(format_args!(
            "{}: closing by force while busy: {}",
            a.name,
            in_use.join("; ")
        ));
    }
    if let (Some(dev), false) = (entry["loop"].as_str(), a.force) {
        unclaimed(&a.name, dev)?;
    }
    if let (Some(dev), Some(mp)) = (entry["loop"].as_str(), entry["mount"].as_str()) {
        if is_our_loop(dev, Path::new(mp)) {
            drop_partitions(dev);
            run_tool(Command::new("losetup").arg("-d").arg(dev))
                .map_err(|e| Failure::runtime(format!("detaching {dev}: {e}")))?;
        }
    }
    terminate(&a.name, &entry)?;
    let until = Instant::now() + CLOSE_WAIT;
    while alive(&entry) {
        if Instant::now() > until {
            return Err(Failure::runtime(format!(
                "process {pid} serving {} did not stop within {} s",
                a.name,
                CLOSE_WAIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The process removes its entry; if it could not (killed), its leftovers go here.
    if let Ok(Some(left)) = state::read(&dir, &a.name) {
        if state::pid(&left) == pid && left["start"] == entry["start"] {
            state::clean_stale(&dir, &a.name, &left);
        }
    }
    Ok(())
}

pub fn status(a: StatusArgs) -> Result<(), Failure> {
    let dir = state::runtime_dir()?;
    if let Some(n) = &a.name {
        state::check_name(n)?;
    }
    let names = match (&a.name, state::existing_runtime_dir(&dir)?) {
        (_, false) => Vec::new(),
        (Some(n), true) => vec![n.clone()],
        (None, true) => state::names(&dir),
    };
    let mut open = Vec::new();
    for name in names {
        // One bad entry is reported by name; the others are still listed.
        let read = state::check_name(&name).and_then(|()| state::read(&dir, &name));
        let entry = match (read, &a.name) {
            (Ok(Some(entry)), _) => entry,
            (Ok(None), _) => continue,
            (Err(e), Some(_)) => return Err(e),
            (Err(e), None) => {
                log(format_args!("{}", e.message()));
                continue;
            }
        };
        if !alive(&entry) {
            state::clean_stale(&dir, &name, &entry);
            log(format_args!(
                "{name}: its process was gone; the stale entry was removed"
            ));
        } else if entry["ready"] == Value::Bool(true) {
            let entry = match entry["kind"].as_str() {
                Some("gateway") => crate::commands::gateway::with_exports(entry),
                _ => entry,
            };
            if let Value::Object(o) = entry {
                open.push(o.into_iter().filter(|(k, _)| k != "ready").collect());
            }
        }
    }
    let text = match (&a.name, a.json) {
        (Some(n), _) if open.is_empty() => {
            return Err(Failure::usage(format!("nothing is open under {n}")))
        }
        (Some(_), true) => crate::present::escape::printable_json(&format!("{:#}\n", open[0])),
        (None, true) => {
            crate::present::escape::printable_json(&format!("{:#}\n", Value::Array(open)))
        }
        (_, false) => open.iter().map(describe).collect(),
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| Failure::runtime(format!("standard output: {e}")))
}

/// An entry for people (control characters shown escaped, never raw).
fn describe(e: &Value) -> String {
    if e["kind"] == "gateway" {
        return describe_gateway(e);
    }
    let s = |k: &str| printable(e[k].as_str().unwrap_or("-"));
    let n = |k: &str| printable(&e[k].to_string());
    let mut out = format!("{}: open (process {})\n", s("name"), n("pid"));
    out.push_str(&format!("  image:   {}\n", s("image")));
    if let Some(h) = e["header"].as_str() {
        out.push_str(&format!("  header:  {}\n", printable(h)));
    }
    out.push_str(&format!("  format:  {}\n", s("format")));
    out.push_str(&format!("  cipher:  {}\n", s("cipher")));
    out.push_str(&format!(
        "  size:    {} bytes, {}-byte sectors\n",
        n("size"),
        n("sector_size")
    ));
    let mode = if e["read_only"] == Value::Bool(true) {
        "read-only"
    } else {
        "read-write"
    };
    out.push_str(&format!("  access:  {mode}\n"));
    out.push_str(&format!("  uri:     {}\n", s("uri")));
    if let Some(m) = e["mount"].as_str() {
        out.push_str(&format!("  mount:   {}/disk\n", printable(m)));
    }
    if let Some(d) = e["loop"].as_str() {
        out.push_str(&format!("  loop:    {}\n", printable(d)));
    }
    out
}

/// A gateway's entry for people: where it listens, then each export with its clients.
fn describe_gateway(e: &Value) -> String {
    let s = |v: &Value| printable(v.as_str().unwrap_or("-"));
    // Every address (`listen_all`), or the one of a gateway that predates the list.
    let listen = match e["listen_all"].as_array() {
        Some(all) => all.iter().map(s).collect::<Vec<_>>().join(", "),
        None => s(&e["listen"]),
    };
    let mut out = format!(
        "{}: gateway (process {})\n  listen:  {listen}\n",
        s(&e["name"]),
        e["pid"],
    );
    if let Some(c) = e["config"].as_str() {
        out.push_str(&format!("  config:  {}\n", printable(c)));
    }
    if let Some(err) = e["error"].as_str() {
        out.push_str(&format!("  error:   {}\n", printable(err)));
    }
    for x in e["exports"].as_array().into_iter().flatten() {
        let mode = if x["read_only"] == Value::Bool(true) {
            "read-only"
        } else {
            "read-write"
        };
        let clients = x["clients"].as_array().map_or(0, Vec::len);
        out.push_str(&format!("  export {}:", s(&x["name"])));
        if x["offered"] == Value::Bool(false) {
            out.push_str(" removed, draining");
        } else {
            out.push_str(&format!(
                " {} {}, {} bytes, {mode}, {}",
                s(&x["format"]),
                s(&x["locator"]),
                x["size"],
                s(&x["cipher"])
            ));
        }
        out.push_str(&format!(
            "\n    {clients} client(s); {} requests, {} bytes read, {} bytes written, {} errors\n",
            x["requests"], x["bytes_read"], x["bytes_written"], x["errors"]
        ));
        for c in x["clients"].as_array().into_iter().flatten() {
            let p = &c["peer"];
            let who = match (p["uid"].as_u64(), p["address"].as_str()) {
                (Some(uid), _) => format!("uid {uid} gid {} pid {}", p["gid"], p["pid"]),
                (None, Some(a)) => printable(a),
                (None, None) => "unknown peer".into(),
            };
            let subject = match p["tls_subject"].as_str() {
                Some(t) => format!(", TLS subject {}", printable(t)),
                None if c["tls"] == Value::Bool(true) => ", TLS".into(),
                None => String::new(),
            };
            out.push_str(&format!(
                "    client {who}{subject} (connection {}, since {})\n",
                c["connection"],
                s(&c["since"])
            ));
        }
    }
    out
}
