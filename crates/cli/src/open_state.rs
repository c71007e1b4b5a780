//! Where `open` keeps what it opened: one directory per user (RUNTIME, mode 0700), and
//! per NAME a socket (`NAME.sock`) and a small JSON file (`NAME.json`) that the serving
//! process writes and removes. An entry whose process is gone is stale: its leftovers
//! (loop device, FUSE mount, socket, private mount point) are cleaned up.

use crate::failure::Failure;
use serde_json::Value;
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The longest NAME, in bytes.
const NAME_MAX: usize = 64;

/// The runtime directory: $SECTORCRYPT_RUNTIME_DIR, else /run/sectorcrypt for root, else
/// $XDG_RUNTIME_DIR/sectorcrypt.
pub fn runtime_dir() -> Result<PathBuf, Failure> {
    if let Some(d) = std::env::var_os("SECTORCRYPT_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from("/run/sectorcrypt"));
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => Ok(Path::new(&d).join("sectorcrypt")),
        None => Err(Failure::usage(
            "XDG_RUNTIME_DIR is not set: set it (or SECTORCRYPT_RUNTIME_DIR) to a directory \
             of your own",
        )),
    }
}

/// Creates the runtime directory (mode 0700) when missing.
pub fn create_runtime_dir(dir: &Path) -> Result<(), Failure> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Failure::runtime(format!("{}: {e}", dir.display())))
}

/// Refuses a NAME that could not be a file name of its own.
pub fn check_name(name: &str) -> Result<(), Failure> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.len() > NAME_MAX {
        "it is longer than 64 bytes"
    } else if name.contains('/') || name.contains('\0') {
        "it contains '/' or a NUL byte"
    } else if name == "." || name == ".." {
        "it is '.' or '..'"
    } else if name.starts_with('-') {
        "it starts with '-'"
    } else {
        return Ok(());
    };
    Err(Failure::usage(format!("bad NAME {name:?}: {why}")))
}

/// The JSON file of `name`.
pub fn state_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// The NBD socket of `name`.
pub fn socket_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.sock"))
}

/// The mount point `--loop` uses when no `--mount` is given.
pub fn private_mount(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.mnt"))
}

/// The entry of `name`, if there is one (possibly stale, possibly still starting).
pub fn read(dir: &Path, name: &str) -> Result<Option<Value>, Failure> {
    let path = state_path(dir, name);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Failure::runtime(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::runtime(format!("{}: {e}", path.display()))),
    }
}

/// The entry's process id.
pub fn pid(entry: &Value) -> u32 {
    entry["pid"].as_u64().unwrap_or(0) as u32
}

/// Whether the process serving `name` is still running: `pid` exists, is not a zombie,
/// and is `sectorcrypt open ... NAME ... --foreground` (a reused pid is not).
pub fn alive(pid: u32, name: &str) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    args.contains(&name.as_bytes()) && args.contains(&b"--foreground".as_slice())
}

/// Claims `name` for the process `pid`: the entry is created only when there is none.
/// Returns false when another entry holds the name.
pub fn reserve(dir: &Path, name: &str, pid: u32) -> Result<bool, Failure> {
    let path = state_path(dir, name);
    let entry = serde_json::json!({ "name": name, "pid": pid, "ready": false });
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => f
            .write_all(entry.to_string().as_bytes())
            .map(|()| true)
            .map_err(|e| Failure::runtime(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Failure::runtime(format!("{}: {e}", path.display()))),
    }
}

/// Replaces the entry of `name` at once (a new file renamed over the old one).
pub fn publish(dir: &Path, name: &str, entry: &Value) -> Result<(), Failure> {
    let path = state_path(dir, name);
    let tmp = dir.join(format!(".{name}.json.new"));
    let write = || -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(format!("{entry:#}\n").as_bytes())?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| Failure::runtime(format!("{}: {e}", path.display())))
}

/// Removes the entry of `name` and its socket.
pub fn remove(dir: &Path, name: &str) {
    let _ = fs::remove_file(socket_path(dir, name));
    let _ = fs::remove_file(state_path(dir, name));
}

/// The names with an entry, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let Ok(list) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = list
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".json").map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Undoes what a dead process left behind for `name`: its loop device, its FUSE mount
/// (detached lazily: its server is gone), its private mount point, socket and entry.
pub fn clean_stale(dir: &Path, name: &str, entry: &Value) {
    if let (Some(dev), Some(mp)) = (entry["loop"].as_str(), entry["mount"].as_str()) {
        // Only while it is still ours: the number may have been given to someone else.
        if loop_backing(dev).is_some_and(|f| f == Path::new(mp).join("disk")) {
            let _ = Command::new("losetup").arg("-d").arg(dev).output();
        }
    }
    if let Some(mp) = entry["mount"].as_str() {
        let mp = Path::new(mp);
        if crate::cmd_mount::is_mounted(mp) {
            let _ = crate::cmd_mount::unmount_lazily(mp);
        }
    }
    let _ = fs::remove_dir(private_mount(dir, name));
    remove(dir, name);
}

/// The file a loop device is attached to (`losetup -n -O BACK-FILE`), when it is.
pub fn loop_backing(dev: &str) -> Option<PathBuf> {
    let out = Command::new("losetup")
        .args(["-n", "-O", "BACK-FILE", dev])
        .output()
        .ok()?;
    let file = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !file.is_empty()).then(|| PathBuf::from(file))
}
