//! `sectorcrypt serve --config FILE` and `serve --export NAME=LOCATOR`: many volumes behind
//! one server. Three volumes of three makers (a LUKS2 volume made by sectorcrypt, one made
//! by cryptsetup 2.6, a GELI provider) served by one process and read by name with nbdcopy
//! and qemu-img, byte for byte against `sectorcrypt read` of each; `nbdinfo --list` as
//! root and as another user (setpriv), who sees nothing of an export kept for uid 0; the
//! per-export metrics through promtool; TLS clients by certificate subject; a wrong
//! passphrase, a missing key file or image for one export refusing the start with the
//! export's name; the command line's `--export`; socket activation; a SIGHUP reload with a
//! client of an unchanged export reading across it; four reloads under verifying clients
//! (bench/soak_client.py) that lose no acknowledged write and drop no connection.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use sectorcrypt_testkit::metric as value;
use sectorcrypt_testkit::{promtool_check, require, run, run_stdout};
use served::{refused, Served};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use support::{ok, ok_bytes, s, sc};
use volumes::{key_file, FAST};

/// The user a client is run as to be refused (nobody).
const OTHER_UID: u32 = 65534;

/// One volume and its key, with the plaintext `sectorcrypt read` gives.
struct Volume {
    name: &'static str,
    img: PathBuf,
    key: PathBuf,
    plain: Vec<u8>,
}

/// `dir/NAME.img` made by `maker` ("luks2", "cryptsetup" or "geli"), 4 MiB of data,
/// `pattern` written over its first MiB through sectorcrypt, and its plaintext as
/// `sectorcrypt read` gives it.
fn volume(dir: &Path, name: &'static str, maker: &str, pattern: u8) -> Volume {
    let img = dir.join(format!("{name}.img"));
    let key = key_file(dir, &format!("{name}.key"), &format!("pass of {name}"));
    match maker {
        "cryptsetup" => {
            // 16 MiB of LUKS2 header and keyslots, 4 MiB of data.
            std::fs::write(&img, vec![0u8; 20 << 20]).unwrap();
            run(Command::new("cryptsetup")
                .args(["luksFormat", "--type", "luks2", "--batch-mode"])
                .args(FAST)
                .arg("--key-file")
                .arg(&key)
                .arg(&img));
        }
        "geli" => {
            let a = [
                "format",
                s(&img),
                "--type",
                "geli",
                "--size",
                "4100K",
                "--key-file",
                s(&key),
                "--pbkdf-force-iterations",
                "0",
                "-q",
            ];
            ok(sc(&a, b""));
        }
        _ => {
            let mut a = vec!["format", s(&img), "--type", "luks2", "--size", "20M"];
            a.extend(["--key-file", s(&key)]);
            a.extend(FAST);
            a.push("--batch");
            ok(sc(&a, b""));
        }
    }
    let input = dir.join(format!("{name}.in"));
    let data: Vec<u8> = (0..1u32 << 20).map(|i| pattern ^ (i % 251) as u8).collect();
    std::fs::write(&input, &data).unwrap();
    ok(sc(
        &[
            "write",
            s(&img),
            "--key-file",
            s(&key),
            "--input",
            s(&input),
        ],
        b"",
    ));
    let plain = ok_bytes(sc(&["read", s(&img), "--key-file", s(&key)], b""));
    assert_eq!(&plain[..data.len()], &data[..], "{name}: sectorcrypt read");
    Volume {
        name,
        img,
        key,
        plain,
    }
}

/// A directory other users may enter (the socket in it decides who connects).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    dir
}

/// The export names `nbdinfo --list` gives at `sock`, run as root or as [`OTHER_UID`].
fn listed(sock: &Path, as_other: bool) -> Vec<String> {
    let out = nbdinfo(
        &[
            "--list",
            "--json",
            &format!("nbd+unix:///?socket={}", sock.display()),
        ],
        as_other,
    );
    assert!(out.status.success(), "nbdinfo --list: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names: Vec<String> = v["exports"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|e| e["export-name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// nbdinfo with `args`, as root or as [`OTHER_UID`] (its groups cleared).
fn nbdinfo(args: &[&str], as_other: bool) -> Output {
    let mut c = if as_other {
        let id = OTHER_UID.to_string();
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &id, "--regid", &id, "--clear-groups", "nbdinfo"]);
        c
    } else {
        Command::new("nbdinfo")
    };
    c.args(args).output().unwrap()
}

fn root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn uri(name: &str, sock: &Path) -> String {
    format!("nbd+unix:///{name}?socket={}", sock.display())
}

#[test]
fn one_config_serves_three_volumes_by_name_to_the_clients_each_admits() {
    require!(
        "cryptsetup",
        "nbdcopy",
        "nbdinfo",
        "qemu-img",
        "curl",
        "promtool"
    );
    let dir = open_dir();
    let vols = [
        volume(dir.path(), "mine", "luks2", 0x11),
        volume(dir.path(), "theirs", "cryptsetup", 0x22),
        volume(dir.path(), "geli0", "geli", 0x33),
    ];
    let sock = dir.path().join("gw.sock");
    let metrics = dir.path().join("metrics.sock");
    let mut text = format!("listen = [{:?}]\nmetrics = {:?}\n", s(&sock), s(&metrics));
    for v in &vols {
        text.push_str(&format!(
            "\n[[export]]\nname = {:?}\nimage = {:?}\nkey_file = {:?}\n",
            v.name,
            s(&v.img),
            s(&v.key)
        ));
        if v.name == "theirs" {
            // Root's only.
            text.push_str("allow_uids = [0]\n");
        }
        if v.name == "geli0" {
            text.push_str("read_only = true\n");
        }
    }
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, text).unwrap();
    let served = Served::start_command(
        &["serve", "--config", s(&config), "--socket-mode", "0666"],
        &sock,
    );

    assert_eq!(listed(&sock, false), ["geli0", "mine", "theirs"]);
    // Each by name, byte for byte as `sectorcrypt read` gave it.
    for v in &vols {
        let out = dir.path().join(format!("{}.nbdcopy", v.name));
        run(Command::new("nbdcopy").arg(uri(v.name, &sock)).arg(&out));
        assert!(
            std::fs::read(&out).unwrap() == v.plain,
            "{}: nbdcopy read differs from sectorcrypt read",
            v.name
        );
    }
    let out = dir.path().join("theirs.qemu");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(uri("theirs", &sock))
        .arg(&out));
    assert!(
        std::fs::read(&out).unwrap() == vols[1].plain,
        "qemu-img read"
    );

    // Per-export metrics: every byte read by the clients above, under its export.
    let page = run_stdout(
        Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", "--unix-socket"])
            .arg(&metrics)
            .arg("http://localhost/metrics"),
    );
    let read = |name: &str| {
        value(
            &page,
            &format!("sectorcrypt_bytes_total{{export=\"{name}\",type=\"read\"}}"),
        )
    };
    assert_eq!(read("mine"), vols[0].plain.len() as f64);
    assert_eq!(read("theirs"), 2.0 * vols[1].plain.len() as f64);
    assert_eq!(read("geli0"), vols[2].plain.len() as f64);
    // Every client above was counted as it connected (its disconnect may still be on
    // its way: the gauge is not checked here).
    for v in &vols {
        let total = format!("sectorcrypt_connections_total{{export=\"{}\"}}", v.name);
        assert!(value(&page, &total) >= 1.0, "{total}\n{page}");
    }
    for v in &vols {
        let kdf = format!(
            "sectorcrypt_key_derivation_seconds{{export=\"{}\"}}",
            v.name
        );
        assert!(value(&page, &kdf) > 0.0, "{kdf}");
    }
    if let Err(e) = promtool_check(&page) {
        panic!("promtool: {e}\n{page}");
    }

    if root() {
        // Another user sees only what is not root's, and cannot open root's by name.
        assert_eq!(listed(&sock, true), ["geli0", "mine"]);
        let refused = nbdinfo(&[&uri("theirs", &sock)], true);
        assert!(!refused.status.success(), "{refused:?}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(!said.contains("allow"), "{said}");
        assert!(nbdinfo(&[&uri("mine", &sock)], true).status.success());
    }

    // Each export's read_only.
    for (name, read_only) in [("geli0", true), ("mine", false)] {
        let info = nbdinfo(&["--json", &uri(name, &sock)], false);
        let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
        assert_eq!(v["exports"][0]["is_read_only"], read_only, "{name}: {v}");
    }
    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("3 exports flushed"), "{err}");
}

#[test]
fn a_wrong_passphrase_for_one_export_refuses_the_start_and_names_it() {
    let dir = open_dir();
    let good = volume(dir.path(), "good", "luks2", 0x44);
    let bad = volume(dir.path(), "bad", "luks2", 0x55);
    let wrong = key_file(dir.path(), "wrong.key", "not the passphrase");
    let sock = dir.path().join("gw.sock");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[[export]]\nname = \"good\"\nimage = {:?}\nkey_file = {:?}\n\n\
             [[export]]\nname = \"bad\"\nimage = {:?}\nkey_file = {:?}\n",
            s(&good.img),
            s(&good.key),
            s(&bad.img),
            s(&wrong)
        ),
    )
    .unwrap();
    let out = refused(&["serve", "--config", s(&config), "--socket", s(&sock)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("export \"bad\""), "{err}");
    assert!(err.contains("nothing is served"), "{err}");
    assert!(!sock.exists(), "the socket was made");
    // The volume opened before it was closed again: another user may open it.
    let plain = ok_bytes(sc(&["read", s(&good.img), "--key-file", s(&good.key)], b""));
    assert!(plain == good.plain);
}

#[test]
fn a_config_with_an_unknown_key_is_refused_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[[export]]\nname = \"a\"\nimage = \"/nonexistent\"\nno_passphrase = true\nreadonly = true\n",
    )
    .unwrap();
    let out = refused(&[
        "serve",
        "--config",
        s(&config),
        "--socket",
        s(&dir.path().join("s")),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(s(&config)), "{err}");
    assert!(err.contains("line 5"), "{err}");
    assert!(err.contains("readonly"), "{err}");
}

#[test]
fn exports_on_the_command_line_share_the_key_options() {
    require!("nbdcopy", "nbdinfo");
    let dir = open_dir();
    let a = volume(dir.path(), "a", "luks2", 0x66);
    let b = volume(dir.path(), "b", "luks2", 0x77);
    // One key for both.
    std::fs::copy(&a.key, &b.key).unwrap();
    let mut args = vec!["format", s(&b.img), "--type", "luks2", "--size", "20M"];
    args.extend(["--key-file", s(&a.key)]);
    args.extend(FAST);
    args.push("--batch");
    ok(sc(&args, b""));
    let b_plain = ok_bytes(sc(&["read", s(&b.img), "--key-file", s(&a.key)], b""));

    let sock = dir.path().join("gw.sock");
    let export_a = format!("a={}", s(&a.img));
    let export_b = format!("b={}", s(&b.img));
    let served = Served::start(
        &[
            "--export",
            &export_a,
            "--export",
            &export_b,
            "--key-file",
            s(&a.key),
            "--read-only",
        ],
        &sock,
    );
    assert_eq!(listed(&sock, false), ["a", "b"]);
    for (name, plain) in [("a", &a.plain), ("b", &b_plain)] {
        let out = dir.path().join(format!("{name}.out"));
        run(Command::new("nbdcopy").arg(uri(name, &sock)).arg(&out));
        assert!(std::fs::read(&out).unwrap() == *plain, "{name}");
    }
    let info = nbdinfo(&["--json", &uri("b", &sock)], false);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["exports"][0]["is_read_only"], true, "{v}");
    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
}

#[test]
fn export_and_image_together_are_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let out = sc(
        &[
            "serve",
            s(&img),
            "--export",
            "a=/x",
            "--socket",
            "/tmp/never",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not IMAGE with the others"), "{err}");
    let out = sc(&["serve", "--socket", "/tmp/never"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--config FILE"), "{err}");
    // A gateway's name and JSON log are not the one volume's.
    for extra in [["--log-format", "json"], ["--name", "gw"]] {
        let mut a = vec!["serve", s(&img), "--socket", "/tmp/never"];
        a.extend(extra);
        let out = sc(&a, b"");
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("are a gateway's"), "{err}");
    }
}

#[test]
fn a_gateway_name_held_by_a_running_gateway_is_refused_and_names_the_holder() {
    let dir = open_dir();
    let v = volume(dir.path(), "v", "luks2", 0x31);
    let w = volume(dir.path(), "w", "luks2", 0x32);
    let run = dir.path().join("run");
    let start = |sock: &Path, v: &Volume| {
        Command::new(support::bin())
            .args(["serve", "--export", &format!("v={}", s(&v.img))])
            .args(["--key-file", s(&v.key), "--socket", s(sock), "--name", "gw"])
            .env("SECTORCRYPT_RUNTIME_DIR", &run)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = Served {
        child: Some(start(&dir.path().join("a.sock"), &v)),
        sock: dir.path().join("a.sock"),
    };
    let t0 = std::time::Instant::now();
    while !run.join("gw.json").exists() {
        assert!(
            t0.elapsed().as_secs() < 30,
            "the first gateway did not register"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = start(&dir.path().join("b.sock"), &w)
        .wait_with_output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2), "{second:?}");
    let err = String::from_utf8_lossy(&second.stderr);
    let pid = first.child.as_ref().unwrap().id();
    assert!(
        err.contains(&format!("gw is taken by process {pid}")),
        "{err}"
    );
    // `gateway reload` of a gateway of --export says there is nothing to read again.
    let out = sc_in(&run, &["gateway", "reload"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to reload"),
        "{out:?}"
    );
    let (status, stderr) = first.stop("TERM");
    assert!(status.success(), "{stderr}");
    assert!(!run.join("gw.json").exists());
}

/// A Python with libnbd's binding (`import nbd`): the system's, where another Python
/// comes first in PATH.
fn nbd_python() -> Option<&'static str> {
    support::python_with("nbd")
}

/// `nbdinfo --list` at `sock` until it gives `names`, for at most 20 seconds.
fn listed_eventually(sock: &Path, names: &[&str]) {
    let t0 = std::time::Instant::now();
    loop {
        let now = listed(sock, false);
        if now == names {
            return;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "still {now:?}, not {names:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A config file of `exports` (name, volume), each with its volume's key.
fn write_config(path: &Path, exports: &[(&str, &Volume)]) {
    let mut text = String::new();
    for (name, v) in exports {
        text.push_str(&format!(
            "[[export]]\nname = {name:?}\nimage = {:?}\nkey_file = {:?}\n\n",
            s(&v.img),
            s(&v.key)
        ));
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_reload_adds_removes_and_refuses_while_a_client_of_an_unchanged_export_reads_on() {
    require!("nbdcopy", "nbdinfo");
    use std::io::BufRead;
    let Some(py) = nbd_python() else {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    };
    let dir = open_dir();
    let keep = volume(dir.path(), "keep", "luks2", 0x12);
    let gone = volume(dir.path(), "gone", "luks2", 0x13);
    let change = volume(dir.path(), "change", "luks2", 0x14);
    let other = volume(dir.path(), "other", "luks2", 0x15);
    let new = volume(dir.path(), "new", "geli", 0x16);
    let config = dir.path().join("gateway.toml");
    write_config(
        &config,
        &[("keep", &keep), ("gone", &gone), ("change", &change)],
    );
    let sock = dir.path().join("gw.sock");
    // A service manager's notify socket: READY=1, then RELOADING=1 and READY=1 again.
    let notify = dir.path().join("notify");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let receive = || {
        let mut buf = [0u8; 4096];
        let n = manager.recv(&mut buf).expect("a notification within 30 s");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    };
    let child = Command::new(support::bin())
        .args(["serve", "--config", s(&config), "--socket", s(&sock)])
        .env("NOTIFY_SOCKET", &notify)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let served = Served {
        child: Some(child),
        sock: sock.clone(),
    };
    assert!(receive().starts_with("READY=1\n"));

    // "gone" is used once, then idle; the server holds it open (a reader is refused).
    let out = dir.path().join("gone.out");
    run(Command::new("nbdcopy").arg(uri("gone", &sock)).arg(&out));
    assert!(std::fs::read(&out).unwrap() == gone.plain);
    let busy = sc(&["read", s(&gone.img), "--key-file", s(&gone.key)], b"");
    assert_ne!(busy.status.code(), Some(0), "gone.img is not held open");

    // A client of "keep" connected across the reload.
    let flag = dir.path().join("reloaded");
    let script = format!(
        "import os, time, nbd\n\
         h = nbd.NBD()\n\
         h.connect_uri({:?})\n\
         a = h.pread(65536, 0)\n\
         print('first', flush=True)\n\
         t = time.time()\n\
         while not os.path.exists({:?}) and time.time() - t < 30:\n    time.sleep(0.02)\n\
         b = h.pread(65536, 0)\n\
         h.flush()\n\
         print('same' if a == b and len(a) == 65536 else 'differs', flush=True)\n",
        uri("keep", &sock),
        s(&flag)
    );
    let mut client = Command::new(py)
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "first");

    // "gone" removed, "new" added, "change" pointed at another volume (refused).
    write_config(
        &config,
        &[("keep", &keep), ("change", &other), ("new", &new)],
    );
    let pid = served.child.as_ref().unwrap().id().to_string();
    run(Command::new("kill").args(["-HUP", &pid]));
    let reloading = receive();
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading}"
    );
    let ready = receive();
    assert!(
        ready.starts_with("READY=1\nSTATUS=reloaded: added \"new\""),
        "{ready}"
    );
    listed_eventually(&sock, &["change", "keep", "new"]);
    for (name, plain) in [("change", &change.plain), ("new", &new.plain)] {
        let out = dir.path().join(format!("{name}.out"));
        run(Command::new("nbdcopy").arg(uri(name, &sock)).arg(&out));
        assert!(std::fs::read(&out).unwrap() == *plain, "{name}");
    }
    // "gone" was flushed and closed: another process may open it now.
    let t0 = std::time::Instant::now();
    loop {
        let r = sc(&["read", s(&gone.img), "--key-file", s(&gone.key)], b"");
        if r.status.success() {
            assert!(r.stdout == gone.plain);
            break;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "gone.img still held: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!nbdinfo(&[&uri("gone", &sock)], false).status.success());

    // A file that does not check changes nothing, and says why.
    std::fs::write(&config, "[[export]]\nname = \"keep\"\nimage = \"\"\n").unwrap();
    run(Command::new("kill").args(["-HUP", &pid]));
    let refused_reload = receive();
    assert!(
        refused_reload.starts_with("STATUS=reload refused: ")
            && refused_reload.contains(s(&config)),
        "{refused_reload}"
    );
    assert_eq!(listed(&sock, false), ["change", "keep", "new"]);

    std::fs::write(&flag, b"").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "same");
    assert!(client.wait().unwrap().success());

    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("added \"new\""), "{err}");
    assert!(err.contains("removed \"gone\""), "{err}");
    assert!(
        err.contains("export \"change\": refused the change of image"),
        "{err}"
    );
}

#[test]
fn a_tls_client_gets_only_the_exports_its_certificate_subject_is_allowed() {
    require!("nbdinfo", "nbdcopy");
    sectorcrypt_testkit::require_openssl!();
    use sectorcrypt_testkit::tls::{another_client, make_certificates};
    let dir = open_dir();
    let certs = dir.path().join("certs");
    make_certificates(&certs, "gateway test CA");
    let intruder = dir.path().join("intruder");
    another_client(&certs, &intruder, "intruder");
    let open = volume(dir.path(), "open", "luks2", 0x21);
    let backup = volume(dir.path(), "backup", "geli", 0x31);
    let sock = dir.path().join("gw.sock");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[tls]\ncertificates = {:?}\nverify_peer = true\n\n\
             [[export]]\nname = \"open\"\nimage = {:?}\nkey_file = {:?}\n\n\
             [[export]]\nname = \"backup\"\nimage = {:?}\nkey_file = {:?}\n\
             tls_subjects = [\"CN=sectorcrypt test client\"]\n",
            s(&certs),
            s(&open.img),
            s(&open.key),
            s(&backup.img),
            s(&backup.key)
        ),
    )
    .unwrap();
    let served = Served::start(&["--config", s(&config)], &sock);
    let uri = |name: &str, certs: &Path| {
        format!(
            "nbds+unix:///{name}?socket={}&tls-certificates={}",
            sock.display(),
            certs.display()
        )
    };
    let list = |certs: &Path| {
        let out = nbdinfo(&["--list", "--json", &uri("", certs)], false);
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut names: Vec<String> = v["exports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["export-name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(list(&certs), ["backup", "open"]);
    assert_eq!(list(&intruder), ["open"]);
    let out = dir.path().join("backup.out");
    run(Command::new("nbdcopy").arg(uri("backup", &certs)).arg(&out));
    assert!(std::fs::read(&out).unwrap() == backup.plain);
    let refused = nbdinfo(&["--size", &uri("backup", &intruder)], false);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(nbdinfo(&["--size", &uri("open", &intruder)], false)
        .status
        .success());
    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
}

#[test]
fn a_missing_key_file_or_image_refuses_the_start_naming_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let good = volume(dir.path(), "good", "luks2", 0x41);
    let sock = dir.path().join("gw.sock");
    let config = dir.path().join("gateway.toml");
    let missing_key = dir.path().join("no.key");
    let missing_img = dir.path().join("no.img");
    for (name, img, key, says) in [
        ("keyless", &good.img, &missing_key, s(&missing_key)),
        ("imageless", &missing_img, &good.key, s(&missing_img)),
    ] {
        std::fs::write(
            &config,
            format!(
                "[[export]]\nname = \"good\"\nimage = {:?}\nkey_file = {:?}\n\n\
                 [[export]]\nname = {name:?}\nimage = {:?}\nkey_file = {:?}\n",
                s(&good.img),
                s(&good.key),
                s(img),
                s(key)
            ),
        )
        .unwrap();
        let out = refused(&["serve", "--config", s(&config), "--socket", s(&sock)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{err}");
        assert!(err.contains(&format!("export {name:?}")), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!sock.exists());
    }
}

#[test]
fn a_gateway_takes_the_socket_systemd_socket_activate_passes() {
    require!("systemd-socket-activate", "nbdinfo", "nbdcopy");
    let dir = tempfile::tempdir().unwrap();
    let a = volume(dir.path(), "a", "luks2", 0x51);
    let b = volume(dir.path(), "b", "geli", 0x52);
    let config = dir.path().join("gateway.toml");
    write_config(&config, &[("a", &a), ("b", &b)]);
    let sock = dir.path().join("activated.sock");
    let activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&sock)
        .arg("--")
        .arg(support::bin())
        .args(["serve", "--config", s(&config)])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "no socket"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The first client starts the gateway, which takes it from the passed socket.
    assert_eq!(listed(&sock, false), ["a", "b"]);
    let out = dir.path().join("b.out");
    run(Command::new("nbdcopy").arg(uri("b", &sock)).arg(&out));
    assert!(std::fs::read(&out).unwrap() == b.plain);
    run(Command::new("kill").args(["-TERM", &activator.id().to_string()]));
    let done = activator.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "exit {}: {log}", done.status);
    assert!(log.contains("passed by the service manager"), "{log}");
    assert!(sock.exists(), "the passed socket was removed: {log}");
}

/// `sectorcrypt ARGS` with the runtime directory `run`: its output.
fn sc_in(run: &Path, args: &[&str]) -> Output {
    Command::new(support::bin())
        .args(args)
        .env("SECTORCRYPT_RUNTIME_DIR", run)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn status_shows_a_gateways_exports_and_clients_reload_adds_one_and_the_json_log_says_so() {
    require!("nbdinfo", "curl");
    use std::io::{BufRead, Write};
    let Some(py) = nbd_python() else {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    };
    let dir = open_dir();
    let a = volume(dir.path(), "a", "luks2", 0x21);
    let b = volume(dir.path(), "b", "luks2", 0x22);
    let c = volume(dir.path(), "c", "geli", 0x23);
    let config = dir.path().join("gateway.toml");
    write_config(&config, &[("a", &a), ("b", &b)]);
    let sock = dir.path().join("gw.sock");
    let run = dir.path().join("run");
    let child = Command::new(support::bin())
        .args(["serve", "--config", s(&config), "--socket", s(&sock)])
        .args(["--name", "gw1", "--log-format", "json", "--metrics"])
        .arg(dir.path().join("metrics.sock"))
        .env("SECTORCRYPT_RUNTIME_DIR", &run)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let served = Served {
        child: Some(child),
        sock: sock.clone(),
    };
    let t0 = std::time::Instant::now();
    while !sock.exists() || !run.join("gw1.json").exists() {
        assert!(t0.elapsed().as_secs() < 30, "the gateway did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // One client on "a": reads its first 4 KiB, says so, and holds on until told.
    let script = "import nbd, sys\n\
                  h = nbd.NBD()\n\
                  h.connect_uri(sys.argv[1])\n\
                  assert len(h.pread(4096, 0)) == 4096\n\
                  print('ready', flush=True)\n\
                  sys.stdin.readline()\n\
                  h.shutdown()\n";
    let mut client = Command::new(py)
        .args(["-c", script, &uri("a", &sock)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(client.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");

    let out = sc_in(&run, &["status", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gw = all
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "gw1")
        .unwrap_or_else(|| panic!("no gateway in {all:#}"));
    assert_eq!(gw["kind"], "gateway");
    assert_eq!(gw["listen"], format!("unix:{}", sock.display()));
    let exports = gw["exports"].as_array().unwrap_or_else(|| panic!("{gw:#}"));
    let names: Vec<&str> = exports
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let (ea, eb) = (&exports[0], &exports[1]);
    assert_eq!(ea["format"], "luks2");
    assert_eq!(ea["locator"], s(&a.img));
    assert_eq!(ea["key"], "key_file");
    assert_eq!(ea["read_only"], false);
    let clients = ea["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{ea:#}");
    let me = run_stdout(Command::new("id").arg("-u"));
    assert_eq!(clients[0]["peer"]["uid"].to_string(), me.trim());
    assert_eq!(clients[0]["peer"]["pid"], client.id());
    assert!(ea["requests"].as_u64().unwrap() >= 1, "{ea:#}");
    assert!(ea["bytes_read"].as_u64().unwrap() >= 4096, "{ea:#}");
    assert_eq!(eb["clients"].as_array().unwrap().len(), 0, "{eb:#}");
    assert_eq!(eb["bytes_read"], 0);
    // The client counts in its export's connections.
    let page = run_stdout(
        Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", "--unix-socket"])
            .arg(dir.path().join("metrics.sock"))
            .arg("http://localhost/metrics"),
    );
    for (name, n) in [("a", 1.0), ("b", 0.0)] {
        let open = format!("sectorcrypt_connections{{export=\"{name}\"}}");
        assert_eq!(value(&page, &open), n, "{open}\n{page}");
    }
    // No secret: the key file's path is not even given, let alone its bytes.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("pass of a") && !text.contains(s(&a.key)),
        "{text}"
    );
    let out = sc_in(&run, &["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gw1: gateway (process"), "{text}");
    assert!(text.contains("export b: luks2"), "{text}");
    assert!(
        text.contains(&format!("client uid {}", me.trim())),
        "{text}"
    );

    // Reloaded through the command: "c" appears.
    write_config(&config, &[("a", &a), ("b", &b), ("c", &c)]);
    let out = sc_in(&run, &["gateway", "reload"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("added \"c\""),
        "{out:?}"
    );
    assert_eq!(listed(&sock, false), ["a", "b", "c"]);
    // A file that does not parse is refused, and said so.
    std::fs::write(&config, "[[export]\n").unwrap();
    let out = sc_in(&run, &["gateway", "reload", "gw1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refused"),
        "{out:?}"
    );

    // The client leaves; `close` stops the gateway as it stops an `open`ed volume.
    client.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(client.wait().unwrap().success());
    let out = sc_in(&run, &["close", "gw1"]);
    assert!(out.status.success(), "{out:?}");
    let mut served = served;
    let out = served.child.take().unwrap().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(!run.join("gw1.json").exists() && !run.join("gw1.sock").exists());
    // Every line of the log is a JSON object with a time and an event.
    let events: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(events
        .iter()
        .all(|e| e["ts"].is_string() && e["event"].is_string()));
    let of = |event: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["event"] == event).collect()
    };
    let connects = of("connect");
    assert_eq!(connects.len(), 1, "{stderr}");
    assert_eq!(connects[0]["export"], "a");
    assert!(
        connects[0]["peer"]
            .as_str()
            .unwrap()
            .starts_with(&format!("uid {}", me.trim())),
        "{stderr}"
    );
    let disconnects = of("disconnect");
    assert_eq!(disconnects.len(), 1, "{stderr}");
    assert_eq!(disconnects[0]["export"], "a");
    assert_eq!(disconnects[0]["connection"], connects[0]["connection"]);
    let reloads = of("reload");
    assert_eq!(reloads.len(), 2, "{stderr}");
    assert_eq!(reloads[0]["ok"], true);
    assert_eq!(reloads[0]["added"], serde_json::json!(["c"]));
    assert_eq!(reloads[1]["ok"], false);
    assert!(!stderr.contains("pass of"), "{stderr}");
}

/// Processes killed when the test ends, however it ends.
struct Reaped(Vec<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Holds 8 reads stalled, one on each of the exports s0..s7, and 64 idle connections to
/// h0, at the gateway socket argv[1]; says `ready N` (N: stalled reads that completed,
/// which should be none), then, told on stdin that the upstreams go on, waits up to 30 s
/// for the stalled reads and says `done`.
const HOLD: &str = "import nbd, sys, time
sock = sys.argv[1]
stalled = []
for i in range(8):
    h = nbd.NBD()
    h.connect_uri('nbd+unix:///s%d?socket=%s' % (i, sock))
    buf = nbd.Buffer(4096)
    stalled.append((h, h.aio_pread(buf, 0), buf))
idle = []
for i in range(64):
    h = nbd.NBD()
    h.connect_uri('nbd+unix:///h0?socket=' + sock)
    idle.append(h)
time.sleep(0.2)
for h, c, b in stalled:
    h.poll(0)
print('ready', sum(1 for h, c, b in stalled if h.aio_command_completed(c)), flush=True)
sys.stdin.readline()
end = time.time() + 30
for h, c, b in stalled:
    while not h.aio_command_completed(c):
        assert time.time() < end, 'a stalled read did not complete once its upstream went on'
        h.poll(1000)
print('done', flush=True)
";

/// Connects to argv[1], reads the first 4 KiB, prints the seconds that took.
const FIRST_READ: &str = "import nbd, sys, time
t0 = time.monotonic()
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert len(h.pread(4096, 0)) == 4096
print('%.6f' % (time.monotonic() - t0), flush=True)
h.shutdown()
";

#[test]
fn a_new_clients_first_read_is_answered_while_8_exports_stall_and_64_connections_idle() {
    require!("nbdkit");
    use std::io::{BufRead, Read, Write};
    let Some(py) = nbd_python() else {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    };
    let dir = open_dir();
    let d = dir.path();
    let key = key_file(d, "key", "stall");
    let img = |name: &str| {
        let img = d.join(format!("{name}.img"));
        let mut a = vec!["format", s(&img), "--type", "luks2", "--size", "17M"];
        a.extend(["--key-file", s(&key)]);
        a.extend(FAST);
        a.push("--batch");
        ok(sc(&a, b""));
        img
    };
    // Eight upstreams behind nbdkit's pause filter, each a volume of its own.
    let mut reaped = Reaped(Vec::new());
    let mut config = String::from("max_connections = 128\n");
    let mut controls = Vec::new();
    for i in 0..8 {
        let file = img(&format!("s{i}"));
        let (up, ctl) = (d.join(format!("up{i}.sock")), d.join(format!("ctl{i}")));
        reaped.0.push(
            Command::new("nbdkit")
                .args(["-f", "--exit-with-parent", "-U", s(&up), "--filter=pause"])
                .args(["file", s(&file), &format!("pause-control={}", s(&ctl))])
                .spawn()
                .unwrap(),
        );
        config.push_str(&format!(
            "[[export]]\nname = \"s{i}\"\nimage = \"nbd+unix:///?socket={}\"\nkey_file = {:?}\n",
            s(&up),
            s(&key)
        ));
        controls.push((up, ctl));
    }
    let h0 = img("h0");
    config.push_str(&format!(
        "[[export]]\nname = \"h0\"\nimage = {:?}\nkey_file = {:?}\n",
        s(&h0),
        s(&key)
    ));
    let t0 = std::time::Instant::now();
    for (up, ctl) in &controls {
        while !up.exists() || !ctl.exists() {
            assert!(t0.elapsed().as_secs() < 30, "nbdkit did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let cfg = d.join("gw.toml");
    std::fs::write(&cfg, config).unwrap();
    let sock = d.join("gw.sock");
    let served = Served::start(&["--config", s(&cfg)], &sock);
    // The upstreams stall from now on.
    let mut paused = Vec::new();
    for (_, ctl) in &controls {
        let mut c = std::os::unix::net::UnixStream::connect(ctl).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        c.write_all(b"p").unwrap();
        let mut answer = [0u8; 1];
        c.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"P");
        paused.push(c);
    }
    let mut hold = Command::new(py)
        .args(["-c", HOLD, s(&sock)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(hold.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready 0", "the stalled reads did not stall");

    let first = Command::new(py)
        .args(["-c", FIRST_READ, &uri("h0", &sock)])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    let took: f64 = String::from_utf8_lossy(&first.stdout)
        .trim()
        .parse()
        .unwrap();
    eprintln!("first 4 KiB read of a new client: {:.1} ms", took * 1000.0);
    // The target is 100 ms (bench/gateway.sh measures it on a release build); a debug
    // build on a loaded machine gets ten times that.
    assert!(took < 1.0, "the first read took {took:.3} s");

    // The upstreams go on: the stalled reads complete.
    for c in &mut paused {
        c.write_all(b"r").unwrap();
        let mut answer = [0u8; 1];
        c.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"R");
    }
    hold.stdin.take().unwrap().write_all(b"\n").unwrap();
    line.clear();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    assert!(hold.wait().unwrap().success());
    let (status, stderr) = served.stop("TERM");
    assert!(status.success(), "{stderr}");
}

/// `bench/soak_client.py`: random reads and writes over its own region of an export,
/// every read checked against what it wrote, FLUSHes and FUA writes now and then, and
/// the whole region read back and checked at the end; one JSON line with its counts and
/// `errors` (any failed request, a dropped connection included, or data that differs).
fn soak_client(py: &str, uri: &str, ident: u32, clients: u32, secs: u32, state: &Path) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/soak_client.py");
    Command::new(py)
        .arg(script)
        .args([
            uri,
            &ident.to_string(),
            &clients.to_string(),
            &secs.to_string(),
        ])
        .arg(state)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a soak client and checks its report: it exited cleanly, wrote and read,
/// no request failed, and its final read-back matched every acknowledged write.
fn soak_passed(who: &str, client: Child) -> serde_json::Value {
    let out = client.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{who}: {}\n{stdout}\n{stderr}",
        out.status
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{who}: {e}: {stdout:?} {stderr}"));
    assert_eq!(v["errors"], 0, "{who}: {v}");
    assert!(v["writes"].as_u64().unwrap() > 0, "{who}: {v}");
    assert!(v["reads"].as_u64().unwrap() > 0, "{who}: {v}");
    assert!(
        v["final_verified_bytes"].as_u64().unwrap() > 0,
        "{who}: {v}"
    );
    eprintln!("{who}: {v}");
    v
}

#[test]
fn reloads_under_load_lose_no_acknowledged_write_and_drop_no_client_of_an_unchanged_export() {
    require!("nbdinfo");
    let Some(py) = nbd_python() else {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    };
    use std::time::{Duration, Instant};
    let dir = open_dir();
    let a = volume(dir.path(), "a", "luks2", 0x31);
    let b = volume(dir.path(), "b", "luks2", 0x32);
    let gone = volume(dir.path(), "gone", "luks2", 0x33);
    let new = volume(dir.path(), "new", "geli", 0x34);
    let me = run_stdout(Command::new("id").arg("-u")).trim().to_string();
    // The exports (name, volume, extra TOML lines), written as the config.
    let write = |exports: &[(&str, &Volume, &str)]| {
        let mut text = String::new();
        for (name, v, extra) in exports {
            text.push_str(&format!(
                "[[export]]\nname = {name:?}\nimage = {:?}\nkey_file = {:?}\n{extra}\n",
                s(&v.img),
                s(&v.key)
            ));
        }
        std::fs::write(dir.path().join("gateway.toml"), text).unwrap();
    };
    let config = dir.path().join("gateway.toml");
    write(&[("a", &a, ""), ("b", &b, ""), ("gone", &gone, "")]);
    let sock = dir.path().join("gw.sock");
    let rundir = dir.path().join("run");
    let notify = dir.path().join("notify");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let receive = || {
        let mut buf = [0u8; 4096];
        let n = manager.recv(&mut buf).expect("a notification within 30 s");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    };
    // A reload, however asked for, is RELOADING=1 then READY=1 with what it did.
    let reloaded = || {
        let r = receive();
        assert!(r.starts_with("RELOADING=1\n"), "{r}");
        let r = receive();
        assert!(r.starts_with("READY=1\nSTATUS=reloaded: "), "{r}");
        r
    };
    let child = Command::new(support::bin())
        .args(["serve", "--config", s(&config), "--socket", s(&sock)])
        .args(["--name", "gw"])
        .env("NOTIFY_SOCKET", &notify)
        .env("SECTORCRYPT_RUNTIME_DIR", &rundir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let served = Served {
        child: Some(child),
        sock: sock.clone(),
    };
    assert!(receive().starts_with("READY=1\n"));
    let pid = served.child.as_ref().unwrap().id().to_string();
    let hangup = || run(Command::new("kill").args(["-HUP", &pid]));
    let state = dir.path();

    // Two verifying clients on each unchanged export for the whole test, one on the
    // export the first reload removes.
    let t0 = Instant::now();
    let mut steady = Vec::new();
    for name in ["a", "b"] {
        for i in 0..2 {
            let c = soak_client(py, &uri(name, &sock), i, 2, 16, state);
            steady.push((format!("{name}{i}"), c));
        }
    }
    let on_gone = soak_client(py, &uri("gone", &sock), 0, 1, 7, state);
    std::thread::sleep(Duration::from_secs(2));

    // 1. SIGHUP: "gone" removed while its client works on, "new" added.
    write(&[("a", &a, ""), ("b", &b, ""), ("new", &new, "")]);
    hangup();
    let r = reloaded();
    assert!(
        r.contains("added \"new\"") && r.contains("removed \"gone\""),
        "{r}"
    );
    assert_eq!(listed(&sock, false), ["a", "b", "new"]);
    let refused = nbdinfo(&[&uri("gone", &sock)], false);
    assert!(
        !refused.status.success(),
        "a new client of a removed export got it"
    );
    // `status` shows it draining: not offered, its one client still there.
    let out = sc_in(&rundir, &["status", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let draining = all[0]["exports"]
        .as_array()
        .unwrap_or_else(|| panic!("{all:#}"))
        .iter()
        .find(|e| e["name"] == "gone")
        .unwrap_or_else(|| panic!("{all:#}"))
        .clone();
    assert_eq!(draining["offered"], false, "{all:#}");
    assert_eq!(draining["clients"].as_array().unwrap().len(), 1, "{all:#}");
    let on_new = soak_client(py, &uri("new", &sock), 0, 1, 5, state);
    std::thread::sleep(Duration::from_secs(2));

    // 2. `gateway reload`: "b" admits only this uid from the next client on.
    write(&[
        ("a", &a, ""),
        ("b", &b, &format!("allow_uids = [{me}]\n")),
        ("new", &new, ""),
    ]);
    let out = sc_in(&rundir, &["gateway", "reload", "gw"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("new access lists for \"b\""), "{text}");
    let r = reloaded();
    assert!(r.contains("new access lists for \"b\""), "{r}");
    assert_eq!(listed(&sock, false), ["a", "b", "new"]);
    std::thread::sleep(Duration::from_secs(2));

    // 3. `gateway reload`: "new" removed while its client works on.
    write(&[("a", &a, ""), ("b", &b, &format!("allow_uids = [{me}]\n"))]);
    let out = sc_in(&rundir, &["gateway", "reload", "gw"]);
    assert!(out.status.success(), "{out:?}");
    let r = reloaded();
    assert!(r.contains("removed \"new\""), "{r}");
    assert_eq!(listed(&sock, false), ["a", "b"]);
    std::thread::sleep(Duration::from_secs(2));

    // 4. SIGHUP with nothing changed.
    hangup();
    let r = reloaded();
    assert!(r.contains("no change"), "{r}");

    // The removed exports' clients worked on until they left, then the volumes were
    // flushed and closed: another process opens them.
    soak_passed("the client of the removed export \"gone\"", on_gone);
    soak_passed("the client of the removed export \"new\"", on_new);
    for v in [&gone, &new] {
        let t = Instant::now();
        loop {
            let r = sc(&["read", s(&v.img), "--key-file", s(&v.key)], b"");
            if r.status.success() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{} still held: {}",
                v.name,
                String::from_utf8_lossy(&r.stderr)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Every client of the unchanged exports kept its connection through the four
    // reloads (a dropped one fails its next request), and read back every write.
    for (who, c) in steady {
        soak_passed(&who, c);
    }
    assert!(t0.elapsed() < Duration::from_secs(40));
    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
    assert!(
        !err.contains("ended:"),
        "a connection ended on an error: {err}"
    );
}

/// `nbdinfo --list --json URI`: the export names, sorted.
fn listed_at(uri: &str) -> Vec<String> {
    let out = nbdinfo(&["--list", "--json", uri], false);
    assert!(out.status.success(), "nbdinfo --list {uri}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names: Vec<String> = v["exports"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|e| e["export-name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn a_gateway_listens_on_every_address_of_its_config_with_the_same_exports() {
    require!("nbdinfo", "nbdcopy");
    let dir = open_dir();
    let a = volume(dir.path(), "a", "luks2", 0x61);
    let b = volume(dir.path(), "b", "geli", 0x62);
    let sock = dir.path().join("gw.sock");
    // A free loopback port (bound and let go: nobody else takes it in between here).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("gateway.toml");
    let mut text = format!("listen = [{:?}, \"127.0.0.1:{port}\"]\n\n", s(&sock));
    for v in [&a, &b] {
        text.push_str(&format!(
            "[[export]]\nname = {:?}\nimage = {:?}\nkey_file = {:?}\n\n",
            v.name,
            s(&v.img),
            s(&v.key)
        ));
    }
    std::fs::write(&config, text).unwrap();
    let notify = dir.path().join("notify");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let rundir = dir.path().join("run");
    let child = Command::new(support::bin())
        .args(["serve", "--config", s(&config), "--name", "two"])
        .env("NOTIFY_SOCKET", &notify)
        .env("SECTORCRYPT_RUNTIME_DIR", &rundir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let served = Served {
        child: Some(child),
        sock: sock.clone(),
    };
    let mut buf = [0u8; 4096];
    let n = manager.recv(&mut buf).expect("READY=1 within 30 s");
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(
        ready.starts_with(&format!(
            "READY=1\nSTATUS=serving on {}, on 127.0.0.1:{port}",
            sock.display()
        )),
        "{ready}"
    );
    let tcp = format!("nbd://127.0.0.1:{port}");
    let unix = format!("nbd+unix:///?socket={}", sock.display());
    assert_eq!(listed_at(&unix), ["a", "b"]);
    assert_eq!(listed_at(&tcp), ["a", "b"]);
    // `status` names both.
    let out = sc_in(&rundir, &["status", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gw = &all[0];
    let unix_at = format!("unix:{}", sock.display());
    let tcp_at = format!("127.0.0.1:{port}");
    assert_eq!(gw["listen"], unix_at, "{all:#}");
    assert_eq!(
        gw["listen_all"],
        serde_json::json!([unix_at, tcp_at]),
        "{all:#}"
    );
    let out = sc_in(&rundir, &["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("listen:  {unix_at}, {tcp_at}")),
        "{text}"
    );
    // The same volumes behind both.
    for (at, v) in [
        (format!("{tcp}/a"), &a),
        (uri("b", &sock), &b),
        (format!("{tcp}/b"), &b),
    ] {
        let out = dir.path().join("out");
        run(Command::new("nbdcopy").arg(&at).arg(&out));
        assert!(std::fs::read(&out).unwrap() == v.plain, "{at}");
    }
    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
    assert!(
        err.contains(&format!(
            "serving its exports on unix:{}, 127.0.0.1:{port}",
            sock.display()
        )),
        "{err}"
    );
    assert!(err.contains("any local user can connect"), "{err}");
    // Both are closed, and the socket removed.
    assert!(!sock.exists());
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_gateway_serves_on_every_socket_systemd_socket_activate_passes() {
    require!("systemd-socket-activate", "nbdinfo", "nbdcopy");
    let dir = tempfile::tempdir().unwrap();
    let a = volume(dir.path(), "a", "luks2", 0x71);
    let config = dir.path().join("gateway.toml");
    write_config(&config, &[("a", &a)]);
    let one = dir.path().join("one.sock");
    let two = dir.path().join("two.sock");
    let activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&one)
        .arg("-l")
        .arg(&two)
        .arg("--")
        .arg(support::bin())
        .args(["serve", "--config", s(&config)])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reaped = Reaped(vec![activator]);
    let t0 = std::time::Instant::now();
    while !one.exists() || !two.exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "no sockets"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The first client starts the gateway; then both sockets are its.
    assert_eq!(listed(&two, false), ["a"]);
    assert_eq!(listed(&one, false), ["a"]);
    let out = dir.path().join("a.out");
    run(Command::new("nbdcopy").arg(uri("a", &one)).arg(&out));
    assert!(std::fs::read(&out).unwrap() == a.plain);
    let activator = reaped.0.pop().unwrap();
    run(Command::new("kill").args(["-TERM", &activator.id().to_string()]));
    let done = activator.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "exit {}: {log}", done.status);
    assert!(
        log.contains(&format!(
            "on unix:{} (passed by the service manager), unix:{} (passed by the service \
             manager)",
            one.display(),
            two.display()
        )),
        "{log}"
    );
}

#[test]
fn by_default_an_export_of_several_takes_three_quarters_of_the_slots() {
    require!("nbdinfo");
    let Some(py) = nbd_python() else {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    };
    use std::io::{BufRead, Write};
    let dir = open_dir();
    let a = volume(dir.path(), "a", "luks2", 0x81);
    let b = volume(dir.path(), "b", "luks2", 0x82);
    let config = dir.path().join("gateway.toml");
    write_config(&config, &[("a", &a), ("b", &b)]);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("max_connections = 4\n{text}")).unwrap();
    let sock = dir.path().join("gw.sock");
    let served = Served::start(&["--config", s(&config)], &sock);
    // Three clients of "a" (3 of 4 slots) hold on until told.
    let hold = "import nbd, sys\n\
                hs = []\n\
                for i in range(3):\n    h = nbd.NBD()\n    h.connect_uri(sys.argv[1])\n    hs.append(h)\n\
                print('ready', flush=True)\n\
                sys.stdin.readline()\n";
    let mut holder = Command::new(py)
        .args(["-c", hold, &uri("a", &sock)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    // A fourth client of "a" is refused though a slot is free; "b" gets it.
    let out = nbdinfo(&[&uri("a", &sock)], false);
    assert!(!out.status.success(), "{out:?}");
    let out = nbdinfo(&[&uri("b", &sock)], false);
    assert!(out.status.success(), "{out:?}");
    holder.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(holder.wait().unwrap().success());
    // Once they have gone, "a" takes clients again.
    let t0 = std::time::Instant::now();
    while !nbdinfo(&[&uri("a", &sock)], false).status.success() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, err) = served.stop("TERM");
    assert!(status.success(), "{status}: {err}");
    assert!(
        err.contains("refused: export \"a\" has its 3 connections"),
        "{err}"
    );
}
