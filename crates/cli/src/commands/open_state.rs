//! Where `open` keeps what it opened: one directory per user (RUNTIME, mode 0700), and
//! per NAME a socket (`NAME.sock`) and a small JSON file (`NAME.json`) that the serving
//! process writes and removes. An entry whose process is gone is stale: its leftovers
//! (loop device, FUSE mount, socket, private mount point) are cleaned up.
//!
//! Nothing in RUNTIME is trusted blindly:
//! - RUNTIME must be a directory (not a symbolic link) owned by the user and writable by
//!   no one else, under directories that others cannot rename it out of (each owned by
//!   the user or root, writable by others only with the sticky bit); otherwise `open`,
//!   `close` and `status` refuse, since anyone who can write it could plant entries,
//!   sockets and symbolic links.
//! - Entries are written to a new temporary file (`O_CREAT|O_EXCL|O_NOFOLLOW`, so a
//!   planted link is never followed) and then linked (a claim: only if the name is free)
//!   or renamed (an update) into place, so an entry is always whole.
//! - An entry is read without following a link, must be a regular file of the user's,
//!   and must name itself; anything else is a bad entry, reported by name and left alone.
//! - An entry's process is the one with its PID *and* its start time (field 22 of
//!   /proc/PID/stat), never a process picked by its command line.
//! - A stale entry's FUSE mount is detached only when it is a sectorcrypt FUSE mount whose
//!   server is gone, and its loop device only when it is still attached to that mount's
//!   disk file: a planted entry cannot make `status` unmount anything else.

use crate::failure::Failure;
use serde_json::Value;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The longest NAME, in bytes.
const NAME_MAX: usize = 64;

/// The largest entry file read, in bytes (an entry is a few hundred).
const ENTRY_MAX: u64 = 64 << 10;

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

/// Creates the runtime directory (mode 0700) when missing, then checks it as
/// [`existing_runtime_dir`] does.
pub fn create_runtime_dir(dir: &Path) -> Result<(), Failure> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Failure::runtime(format!("{}: {e}", dir.display())))?;
    if existing_runtime_dir(dir)? {
        Ok(())
    } else {
        Err(Failure::runtime(format!("{}: vanished", dir.display())))
    }
}

/// Whether the runtime directory exists (false: nothing is open), refusing one that
/// another user could write: it must be a directory of the user's (not a link), writable
/// by neither group nor others, and no directory above it (as written, links included,
/// and as resolved) may let others rename it: each is owned by the user or root, writable
/// by group or others only with the sticky bit (as /tmp).
pub fn existing_runtime_dir(dir: &Path) -> Result<bool, Failure> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Failure::runtime(format!("{}: {e}", dir.display()))),
    };
    let me = rustix::process::geteuid().as_raw();
    let refuse = |why: String| {
        Err(Failure::usage(format!(
            "the runtime directory {} {why}: anyone who can write it could plant entries, \
             sockets and links there; use a directory of your own, mode 0700 (set \
             SECTORCRYPT_RUNTIME_DIR or XDG_RUNTIME_DIR)",
            crate::present::escape::printable(&dir.to_string_lossy())
        )))
    };
    if meta.file_type().is_symlink() {
        return refuse("is a symbolic link".into());
    }
    if !meta.is_dir() {
        return refuse("is not a directory".into());
    }
    if meta.uid() != me {
        return refuse(format!(
            "is owned by uid {}, not by you (uid {me})",
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return refuse(format!("is writable by group or others (mode {mode:04o})"));
    }
    // Every directory above it, both as written (a link on the way can be replaced by
    // whoever owns it or may write where it is) and as resolved: a user who can rename
    // any of them can put another runtime directory in its place.
    let parent = match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from("."),
    };
    let mut above: Vec<PathBuf> = Vec::new();
    if let Ok(written) = std::path::absolute(&parent) {
        above.extend(written.ancestors().map(Path::to_path_buf));
    }
    if let Ok(real) = fs::canonicalize(&parent) {
        above.extend(real.ancestors().map(Path::to_path_buf));
    }
    let mut seen = std::collections::HashSet::new();
    for a in above.into_iter().filter(|a| seen.insert(a.clone())) {
        let Ok(m) = fs::symlink_metadata(&a) else {
            continue;
        };
        let shown = crate::present::escape::printable(&a.to_string_lossy());
        // Its owner may rename what is in it whatever the mode, sticky bit or not.
        if m.uid() != me && m.uid() != 0 {
            return refuse(format!(
                "is under {shown}, which is owned by uid {}, who could rename it away and \
                 put another in its place",
                m.uid()
            ));
        }
        let amode = m.permissions().mode() & 0o7777;
        // Group write lets the group rename entries whoever owns the directory.
        if m.is_dir() && amode & 0o022 != 0 && amode & 0o1000 == 0 {
            return refuse(format!(
                "is under {shown}, which others can write (mode {amode:04o}, no sticky bit)"
            ));
        }
    }
    Ok(true)
}

/// Refuses a NAME that is not made of letters, digits, '.', '_' and '-' (not first '.'
/// or '-'), 1 to 64 bytes: a name is a file name, a command-line word and a line of
/// `status` at once.
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
    } else if name.starts_with('.') {
        "it starts with '.'"
    } else if name.chars().any(char::is_control) {
        "it contains a control character"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        "only letters, digits, '.', '_' and '-' are allowed"
    } else {
        return Ok(());
    };
    // {:?} shows control characters escaped, never raw.
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

/// The entry of `name`, if there is one (possibly stale, possibly still starting). A bad
/// entry (a link, not a regular file, not the user's, not JSON, naming another name) is
/// an error naming it.
pub fn read(dir: &Path, name: &str) -> Result<Option<Value>, Failure> {
    let path = state_path(dir, name);
    let bad = |why: String| {
        Failure::runtime(format!(
            "bad entry {} ({}): {why}; it was left alone",
            crate::present::escape::printable(name),
            crate::present::escape::printable(&path.to_string_lossy())
        ))
    };
    // O_NONBLOCK: a planted FIFO does not block the read.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(bad("it is a symbolic link (not followed)".into()))
        }
        Err(e) => return Err(bad(e.to_string())),
    };
    let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_file() {
        return Err(bad("it is not a regular file".into()));
    }
    if meta.uid() != me {
        return Err(bad(format!(
            "it is owned by uid {}, not by you",
            meta.uid()
        )));
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(ENTRY_MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    let entry: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    if entry["name"].as_str() != Some(name) {
        return Err(bad("it names another NAME".into()));
    }
    if !entry["pid"]
        .as_u64()
        .is_some_and(|p| p > 0 && p <= i32::MAX as u64)
    {
        return Err(bad("it has no process id".into()));
    }
    Ok(Some(entry))
}

/// The entry's process id.
pub fn pid(entry: &Value) -> u32 {
    entry["pid"].as_u64().unwrap_or(0) as u32
}

pub use crate::host::process::start_time;

/// Whether the process that wrote `entry` is still running: the same PID and the same
/// start time (a reused PID, or a process that merely has NAME in its arguments, is not).
pub fn alive(entry: &Value) -> bool {
    let pid = pid(entry);
    match entry["start"].as_u64() {
        Some(start) if pid > 0 => start_time(pid) == Some(start),
        _ => false,
    }
}

/// The entry fields that say which process holds `name`: its name, PID and start time.
pub fn owner_fields(name: &str) -> Result<serde_json::Map<String, Value>, Failure> {
    let pid = std::process::id();
    let start = start_time(pid)
        .ok_or_else(|| Failure::runtime("cannot read this process's start time from /proc"))?;
    let mut m = serde_json::Map::new();
    m.insert("name".into(), name.into());
    m.insert("pid".into(), pid.into());
    m.insert("start".into(), start.into());
    Ok(m)
}

/// Writes `entry` to a new temporary file in `dir` (never through a link, never over a
/// file that exists), returning its path.
fn write_new(dir: &Path, name: &str, entry: &Value) -> std::io::Result<PathBuf> {
    static SERIAL: AtomicU32 = AtomicU32::new(0);
    let tmp = dir.join(format!(
        ".{name}.json.{}-{}.new",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&tmp)?;
    let written = f
        .write_all(format!("{entry:#}\n").as_bytes())
        .and_then(|()| f.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Claims `name` for this process: the entry (`ready: false`) is put in place only when
/// there is none, whole (a temporary file hard-linked to the entry's name). Returns false
/// when another entry holds the name.
pub fn reserve(dir: &Path, name: &str) -> Result<bool, Failure> {
    let path = state_path(dir, name);
    let mut entry = owner_fields(name)?;
    entry.insert("ready".into(), false.into());
    let tmp = write_new(dir, name, &Value::Object(entry))
        .map_err(|e| Failure::runtime(format!("{}: {e}", path.display())))?;
    let linked = fs::hard_link(&tmp, &path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Failure::runtime(format!("{}: {e}", path.display()))),
    }
}

/// Replaces the entry of `name` at once (a new file renamed over the old one).
pub fn publish(dir: &Path, name: &str, entry: &Value) -> Result<(), Failure> {
    let path = state_path(dir, name);
    let tmp = write_new(dir, name, entry)
        .map_err(|e| Failure::runtime(format!("{}: {e}", path.display())))?;
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Failure::runtime(format!("{}: {e}", path.display()))
    })
}

/// Removes the entry of `name` and its socket.
pub fn remove(dir: &Path, name: &str) {
    let _ = fs::remove_file(socket_path(dir, name));
    let _ = fs::remove_file(state_path(dir, name));
}

/// The names with an entry, sorted (names that are no valid NAME included, so that
/// `status` can report them).
pub fn names(dir: &Path) -> Vec<String> {
    let Ok(list) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = list
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter_map(|f| f.strip_suffix(".json").map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Undoes what a dead process left behind for `name`: its FUSE mount (detached lazily:
/// its server is gone) and the loop device on it, its private mount point, socket and
/// entry (while the entry is still `entry`: one that replaced it is left alone). A mount
/// is touched only when it is a sectorcrypt FUSE mount whose server is gone, a loop device
/// only while it is attached to that mount's disk file.
pub fn clean_stale(dir: &Path, name: &str, entry: &Value) {
    if let Some(mp) = entry["mount"].as_str().map(Path::new) {
        if dead_fuse_mount(mp) {
            if let Some(dev) = entry["loop"].as_str() {
                // Only while it is still ours: the number may have been given to someone else.
                if loop_backing(dev).is_some_and(|f| f == mp.join("disk")) {
                    let _ = Command::new("losetup").arg("-d").arg(dev).output();
                }
            }
            let _ = crate::fuse::mount::unmount_lazily(mp);
        }
    }
    let _ = fs::remove_dir(private_mount(dir, name));
    // Only while the entry is still the stale one: another open may have cleaned it up
    // and claimed the name since it was read, and its entry and socket are not ours to
    // remove (a server whose socket vanishes stops).
    if read(dir, name).is_ok_and(|now| now.is_some_and(|now| same_process(&now, entry))) {
        remove(dir, name);
    }
}

/// Whether two entries were written by the same process (the same PID and start time).
fn same_process(a: &Value, b: &Value) -> bool {
    a["pid"] == b["pid"] && a["start"] == b["start"]
}

/// Whether `mp` is a sectorcrypt FUSE mount (in this mount namespace) whose server is gone
/// (the kernel answers ENOTCONN).
fn dead_fuse_mount(mp: &Path) -> bool {
    // Mounted directly by root the type is plain "fuse"; through fusermount it carries
    // the subtype. The source is the name `fuse/mount.rs` gives it.
    let ours = crate::host::busy::mounts_here().iter().any(|m| {
        m.point == mp
            && (m.fstype == "fuse" || m.fstype == "fuse.sectorcrypt")
            && m.source == "sectorcrypt"
    });
    ours && fs::metadata(mp).is_err_and(|e| e.raw_os_error() == Some(libc::ENOTCONN))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_entry_replaced_since_it_was_read_is_not_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        create_runtime_dir(&dir).unwrap();
        // A dead process's entry: PID 1 never has this start time.
        let stale = serde_json::json!({ "name": "v", "pid": 1, "start": u64::MAX, "ready": true });
        publish(&dir, "v", &stale).unwrap();
        let seen = read(&dir, "v").unwrap().unwrap();
        assert!(!alive(&seen));
        // Meanwhile another open cleaned it up and claimed the name (this process here).
        fs::remove_file(state_path(&dir, "v")).unwrap();
        assert!(reserve(&dir, "v").unwrap());
        fs::write(socket_path(&dir, "v"), b"").unwrap();
        clean_stale(&dir, "v", &seen);
        let now = read(&dir, "v").unwrap().expect("the new entry was removed");
        assert_eq!(pid(&now), std::process::id());
        assert!(
            socket_path(&dir, "v").exists(),
            "the new socket was removed"
        );
        // The stale entry itself is still cleaned up.
        publish(&dir, "v", &stale).unwrap();
        clean_stale(&dir, "v", &seen);
        assert!(read(&dir, "v").unwrap().is_none());
        assert!(!socket_path(&dir, "v").exists());
    }
}
