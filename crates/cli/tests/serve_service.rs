//! `sectorcrypt serve` under a service manager and a metrics scraper: the readiness,
//! stopping and watchdog messages a notify socket receives (a datagram listener in the
//! test, as systemd's would be), and the Prometheus metrics `--metrics` serves, counted
//! from real NBD traffic (nbdcopy) and judged by `promtool`.

mod support;

use sectorcrypt_testkit::metric as value;
use sectorcrypt_testkit::promtool_check;
use sectorcrypt_testkit::{require, run_stdout as run};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::s;

fn receive(s: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = s.recv(&mut buf).expect("a notification within the timeout");
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

fn wait_for(path: &Path) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_tells_the_manager_it_is_ready_and_stopping_and_counts_its_traffic() {
    require!("nbdcopy", "curl", "promtool");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 4 << 20]).unwrap();
    let notify = dir.path().join("notify");
    let manager = UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let sock = dir.path().join("s.sock");
    let metrics = dir.path().join("metrics.sock");
    let mut child = Command::new(support::bin())
        .args([
            "serve",
            s(&img),
            "--onetime",
            "--export-name",
            "disk",
            "--socket",
            s(&sock),
        ])
        .args(["--metrics", s(&metrics)])
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "400000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let ready = receive(&manager);
    assert!(ready.starts_with("READY=1\nSTATUS=serving on "), "{ready}");
    assert!(
        sock.exists(),
        "READY=1 came before the socket accepted connections"
    );
    // The watchdog is pinged at half of WATCHDOG_USEC.
    assert_eq!(receive(&manager), "WATCHDOG=1");
    assert_eq!(receive(&manager), "WATCHDOG=1");

    let input = dir.path().join("in.bin");
    std::fs::write(&input, vec![7u8; 1 << 20]).unwrap();
    let uri = format!("nbd+unix:///disk?socket={}", sock.display());
    run(Command::new("nbdcopy").arg("--flush").arg(&input).arg(&uri));
    let out = dir.path().join("out.bin");
    run(Command::new("nbdcopy").arg(&uri).arg(&out));
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 4 << 20);

    wait_for(&metrics);
    let text = run(Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10", "--unix-socket"])
        .arg(&metrics)
        .arg("http://localhost/metrics"));
    let series = |k: &str| format!("sectorcrypt_{k}");
    assert_eq!(
        value(
            &text,
            &series("bytes_total{export=\"disk\",type=\"write\"}")
        ),
        (1u64 << 20) as f64
    );
    assert_eq!(
        value(&text, &series("bytes_total{export=\"disk\",type=\"read\"}")),
        (4u64 << 20) as f64
    );
    assert!(
        value(
            &text,
            &series("requests_total{export=\"disk\",type=\"flush\"}")
        ) >= 1.0
    );
    assert!(value(&text, &series("key_derivation_seconds{export=\"disk\"}")) > 0.0);
    assert!(text.contains("sectorcrypt_info{version="), "{text}");
    if let Err(e) = promtool_check(&text) {
        panic!("promtool: {e}\n{text}");
    }

    run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    // Watchdog pings may come before the stop.
    let stopping = loop {
        let m = receive(&manager);
        if m != "WATCHDOG=1" {
            break m;
        }
    };
    assert!(stopping.starts_with("STOPPING=1\nSTATUS="), "{stopping}");
    let status = child.wait().unwrap();
    assert!(status.success(), "exit {status}");
}

/// The metrics page `--metrics SOCKET` serves now.
fn scrape(metrics: &Path) -> String {
    wait_for(metrics);
    run(Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10", "--unix-socket"])
        .arg(metrics)
        .arg("http://localhost/metrics"))
}

/// Runs the client script `client` on `uri`, a newline already on its stdin: it connects, reads and leaves.
fn holder_once(py: &str, client: &str, uri: &str) -> std::process::Output {
    use std::io::Write;
    let mut c = Command::new(py)
        .args(["-c", client, uri])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"\n").unwrap();
    c.wait_with_output().unwrap()
}

#[test]
fn the_metrics_of_one_volume_count_its_connections() {
    require!("curl", "promtool");
    use std::io::{BufRead, Write};
    // The system's Python, which has libnbd's binding (another may come first in PATH).
    let Some(py) = support::python_with("nbd") else {
        sectorcrypt_testkit::skipped!("skipped: no python3 with libnbd's binding (python3-libnbd)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 4 << 20]).unwrap();
    let sock = dir.path().join("s.sock");
    let metrics = dir.path().join("metrics.sock");
    let mut child = Command::new(support::bin())
        .args(["serve", s(&img), "--onetime", "--export-name", "disk"])
        .args(["--socket", s(&sock)])
        .args(["--metrics", s(&metrics)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&sock);
    let uri = format!("nbd+unix:///disk?socket={}", sock.display());
    // A client that reads, says so, and stays connected until told.
    let client = "import nbd, sys\n\
                  h = nbd.NBD()\n\
                  h.connect_uri(sys.argv[1])\n\
                  h.pread(4096, 0)\n\
                  print('ready', flush=True)\n\
                  sys.stdin.readline()\n\
                  h.shutdown()\n";
    let mut holder = Command::new(py)
        .args(["-c", client, &uri])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    let open = "sectorcrypt_connections{export=\"disk\"}";
    let total = "sectorcrypt_connections_total{export=\"disk\"}";
    let text = scrape(&metrics);
    assert_eq!(value(&text, open), 1.0, "{text}");
    assert_eq!(value(&text, total), 1.0, "{text}");
    if let Err(e) = promtool_check(&text) {
        panic!("promtool: {e}\n{text}");
    }
    holder.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(holder.wait().unwrap().success());
    // Another client comes and goes.
    let out = holder_once(py, client, &uri);
    assert!(out.status.success(), "{out:?}");
    // The server is told of a disconnection on the connection's own thread, a moment
    // after the client has gone.
    let t0 = Instant::now();
    let text = loop {
        let text = scrape(&metrics);
        if value(&text, open) == 0.0 || t0.elapsed() > Duration::from_secs(10) {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(value(&text, open), 0.0, "{text}");
    assert_eq!(value(&text, total), 2.0, "{text}");

    run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    let status = child.wait().unwrap();
    assert!(status.success(), "exit {status}");
    // The server's lines go to stderr as before, with their prefix.
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("sectorcrypt-nbd: connection 1: transmission"),
        "{err}"
    );
}

#[test]
fn metrics_on_a_non_loopback_address_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    let out = Command::new(support::bin())
        .args(["serve", s(&img), "--onetime", "--socket"])
        .arg(dir.path().join("s.sock"))
        .args(["--metrics", "0.0.0.0:9560"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
}

/// The unit file of contrib/systemd, with its paths moved into `dir` and the binary the
/// tests built: what systemd would run for the instance `vol`.
fn template_unit(dir: &Path) -> String {
    unit_file(dir, "sectorcrypt@.service")
}

/// A unit file of contrib/systemd as [`template_unit`] rewrites it.
fn unit_file(dir: &Path, name: &str) -> String {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../contrib/systemd")
            .join(name),
    )
    .unwrap();
    unit.replace("/usr/bin/sectorcrypt", support::bin())
        .replace("/etc/sectorcrypt", s(&dir.join("etc")))
        .replace("/run/sectorcrypt", s(&dir.join("run")))
        .replace("%i", "vol")
}

#[test]
fn the_template_unit_verifies_and_its_command_serves_with_the_credential() {
    require!("systemd-analyze", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let unit = template_unit(dir.path());
    verify(dir.path(), &[("sectorcrypt@vol.service", &unit)]);

    // Run ExecStart as systemd would: the environment file's IMAGE, the credential.
    let etc = dir.path().join("etc");
    let run_dir = dir.path().join("run");
    let creds = dir.path().join("credentials");
    for d in [&etc, &run_dir, &creds] {
        std::fs::create_dir_all(d).unwrap();
    }
    let img = dir.path().join("vol.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(20 << 20)
        .unwrap();
    let passphrase = creds.join("passphrase");
    std::fs::write(&passphrase, "unit passphrase").unwrap();
    std::fs::set_permissions(
        &passphrase,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let pass = s(&passphrase).to_string();
    run(Command::new(support::bin())
        .args([
            "format",
            s(&img),
            "--batch",
            "--pbkdf-force-iterations",
            "1000",
        ])
        .args(["--pbkdf", "pbkdf2", "--key-file", &pass]));
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .replace("${IMAGE}", s(&img))
        .replace("${CREDENTIALS_DIRECTORY}", s(&creds))
        .replace("$SERVE_OPTIONS", "");
    let words: Vec<&str> = exec.split_whitespace().collect();
    let notify = dir.path().join("notify");
    let manager = UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut child = Command::new(words[0])
        .args(&words[1..])
        .env("NOTIFY_SOCKET", &notify)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = receive(&manager);
    assert!(ready.starts_with("READY=1"), "{ready}");
    let sock = run_dir.join("vol.sock");
    let size = run(Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd+unix:///?socket={}", sock.display())));
    assert!(size.trim().parse::<u64>().unwrap() > 0, "{size}");
    run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    assert!(child.wait().unwrap().success());
}

#[test]
fn serve_takes_the_socket_systemd_socket_activate_passes_and_leaves_it_in_place() {
    require!("systemd-socket-activate", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 3 << 20]).unwrap();
    let sock = dir.path().join("activated.sock");
    let activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&sock)
        .arg("--")
        .arg(support::bin())
        .args(["serve", s(&img), "--onetime"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&sock);
    // The first client starts the server (systemd-socket-activate execs it in its own
    // process), which takes the waiting connection from the passed socket.
    let size = run(Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd+unix:///?socket={}", sock.display())));
    assert_eq!(size.trim(), (3u64 << 20).to_string());
    run(Command::new("kill").args(["-TERM", &activator.id().to_string()]));
    let out = activator.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {log}", out.status);
    assert!(log.contains("passed by the service manager"), "{log}");
    // The socket is systemd's: the server leaves it for the next start.
    assert!(sock.exists(), "the passed socket was removed: {log}");
}

#[test]
fn serve_without_a_socket_and_without_activation_says_how_to_give_one() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("scratch.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    let out = Command::new(support::bin())
        .args(["serve", s(&img), "--onetime"])
        .env_remove("LISTEN_FDS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--socket PATH or --listen") && err.contains("socket activation"),
        "{err}"
    );
}

/// `systemd-analyze verify` of `units` (name, text) written into `dir`: nothing said.
fn verify(dir: &Path, units: &[(&str, &str)]) {
    let paths: Vec<std::path::PathBuf> = units
        .iter()
        .map(|(name, text)| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        })
        .collect();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&paths)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(said.trim().is_empty(), "systemd-analyze verify: {said}");
}

#[test]
fn the_socket_activated_units_verify_and_serve_on_the_socket_unit_path() {
    require!("systemd-analyze", "systemd-socket-activate", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let socket_unit = unit_file(dir.path(), "sectorcrypt-nbd@.socket");
    let service_unit = unit_file(dir.path(), "sectorcrypt-nbd@.service");
    verify(
        dir.path(),
        &[
            ("sectorcrypt-nbd@vol.socket", &socket_unit),
            ("sectorcrypt-nbd@vol.service", &service_unit),
        ],
    );
    let listen = socket_unit
        .lines()
        .find_map(|l| l.strip_prefix("ListenStream="))
        .unwrap()
        .to_string();
    std::fs::create_dir_all(Path::new(&listen).parent().unwrap()).unwrap();
    let creds = dir.path().join("credentials");
    std::fs::create_dir_all(&creds).unwrap();
    let passphrase = creds.join("passphrase");
    std::fs::write(&passphrase, "unit passphrase").unwrap();
    let img = dir.path().join("vol.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(20 << 20)
        .unwrap();
    run(Command::new(support::bin())
        .args([
            "format",
            s(&img),
            "--batch",
            "--pbkdf-force-iterations",
            "1000",
        ])
        .args(["--pbkdf", "pbkdf2", "--key-file", s(&passphrase)]));
    let exec = service_unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .replace("${IMAGE}", s(&img))
        .replace("${CREDENTIALS_DIRECTORY}", s(&creds))
        .replace("$SERVE_OPTIONS", "");
    let notify = dir.path().join("notify");
    let manager = UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&listen)
        // It passes on only the variables named with -E.
        .args(["-E", "NOTIFY_SOCKET", "--"])
        .args(exec.split_whitespace())
        .env("NOTIFY_SOCKET", &notify)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Path::new(&listen));
    let size = run(Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd+unix:///?socket={listen}")));
    assert!(size.trim().parse::<u64>().unwrap() > 0, "{size}");
    assert!(receive(&manager).starts_with("READY=1"));
    run(Command::new("kill").args(["-TERM", &activator.id().to_string()]));
    let out = activator.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_gateway_units_verify_and_serve_exports_keyed_by_credentials() {
    require!("systemd-analyze", "systemd-socket-activate", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let socket_unit = unit_file(dir.path(), "sectorcrypt-gateway.socket");
    let service_unit = unit_file(dir.path(), "sectorcrypt-gateway.service");
    verify(
        dir.path(),
        &[
            ("sectorcrypt-gateway.socket", &socket_unit),
            ("sectorcrypt-gateway.service", &service_unit),
        ],
    );
    let listen = socket_unit
        .lines()
        .find_map(|l| l.strip_prefix("ListenStream="))
        .unwrap()
        .to_string();
    std::fs::create_dir_all(Path::new(&listen).parent().unwrap()).unwrap();
    // What LoadCredential=keys:DIR gives the service: each file as keys_FILE.
    let creds = dir.path().join("credentials");
    std::fs::create_dir_all(&creds).unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let mut config = String::new();
    for (name, size) in [("vm1", 20u64 << 20), ("vm2", 24 << 20)] {
        let key = creds.join(format!("keys_{name}"));
        std::fs::write(&key, format!("passphrase of {name}")).unwrap();
        let img = dir.path().join(format!("{name}.img"));
        std::fs::File::create(&img).unwrap().set_len(size).unwrap();
        run(Command::new(support::bin())
            .args([
                "format",
                s(&img),
                "--batch",
                "--pbkdf-force-iterations",
                "1000",
            ])
            .args(["--pbkdf", "pbkdf2", "--key-file", s(&key)]));
        config.push_str(&format!(
            "[[export]]\nname = {name:?}\nimage = {:?}\ncredential = \"keys_{name}\"\n\n",
            s(&img)
        ));
    }
    std::fs::write(etc.join("gateway.toml"), config).unwrap();
    let exec = service_unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .to_string();
    let activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&listen)
        .args(["-E", "CREDENTIALS_DIRECTORY", "--"])
        .args(exec.split_whitespace())
        .env("CREDENTIALS_DIRECTORY", &creds)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Path::new(&listen));
    for (name, size) in [("vm1", 4u64 << 20), ("vm2", 8 << 20)] {
        let got = run(Command::new("nbdinfo")
            .arg("--size")
            .arg(format!("nbd+unix:///{name}?socket={listen}")));
        assert_eq!(got.trim(), size.to_string(), "{name}");
    }
    run(Command::new("kill").args(["-TERM", &activator.id().to_string()]));
    let out = activator.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
