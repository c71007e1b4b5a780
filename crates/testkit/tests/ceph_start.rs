//! scripts/ceph.sh starts its cluster on a file system that is nearly full in percent but
//! has room in bytes (a large shared disk at 99%): ceph-mon's own "data avail crit" check
//! used to refuse it, and every rbd test then skipped. Needs root (a small tmpfs is
//! mounted and filled) and Ceph (`scripts/deps.sh ceph`).

use std::path::Path;
use std::process::Command;

struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn a_cluster_starts_on_a_file_system_under_one_percent_free() {
    sectorcrypt_testkit::require!("ceph-mon", "mount", "umount", "fallocate");
    let uid = sectorcrypt_testkit::run_stdout(Command::new("id").arg("-u"));
    if uid.trim() != "0" {
        sectorcrypt_testkit::skipped!("skipped: not root (mounting a tmpfs needs it)");
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let fs = top.path().join("fs");
    std::fs::create_dir(&fs).unwrap();
    sectorcrypt_testkit::run(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4g", "tmpfs"])
            .arg(&fs),
    );
    let _unmount = Unmount(&fs);
    // 30 MiB of 4 GiB left: 0% in ceph-mon's integer percentage, room for its store.
    sectorcrypt_testkit::run(
        Command::new("fallocate")
            .args(["-l", &format!("{}M", 4096 - 30)])
            .arg(fs.join("filler")),
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ceph.sh");
    let dir = fs.join("cluster");
    let out = Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(&dir)
        .env("CEPH_MEMSTORE_BYTES", (64u64 << 20).to_string())
        .output()
        .unwrap();
    let stop = Command::new("bash")
        .arg(&script)
        .arg("stop")
        .arg(&dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let log = std::fs::read_to_string(dir.join("log/start.log")).unwrap_or_default();
    assert!(
        out.status.success() && said.starts_with("ready"),
        "scripts/ceph.sh start on a file system with 30 MiB free: {said}{log}"
    );
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stdout)
    );
}
