//! The service glue against the real tools: systemd's `systemd-socket-activate` passes
//! listening sockets to a child as systemd does (the child is this test binary again,
//! running [`activated_child`]); `promtool check metrics` judges the metrics text a
//! scrape with `curl` fetches.

use sectorcrypt_service::activation::{listeners, Listener};
use sectorcrypt_service::http::{Endpoint, MetricsServer};
use sectorcrypt_service::metrics::{ExportMetrics, Metrics, Op};
use sectorcrypt_service::process_env;
use sectorcrypt_testkit::require;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Set in the child's environment: it then plays the activated service.
const CHILD: &str = "SECTORCRYPT_SERVICE_TEST_CHILD";

/// The activated service: takes the passed sockets and answers one connection on each
/// Unix listener with the listeners' names and kinds. Does nothing in a normal test run.
#[test]
fn activated_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let got = listeners(&process_env).expect("the passed sockets");
    let summary: Vec<String> = got
        .iter()
        .map(|i| match &i.listener {
            Listener::Unix(_) => format!("{}=unix", i.name),
            Listener::Tcp(_) => format!("{}=tcp", i.name),
        })
        .collect();
    let again = listeners(&process_env).map(|v| v.len());
    let line = format!("{} again:{}\n", summary.join(","), again.is_ok());
    for i in &got {
        if let Listener::Unix(l) = &i.listener {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(line.as_bytes()).unwrap();
        }
    }
}

fn wait_for(path: &Path) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sockets_passed_by_systemd_socket_activate_are_taken_with_their_names() {
    require!("systemd-socket-activate");
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.sock");
    let b = dir.path().join("b.sock");
    let me = std::env::current_exe().unwrap();
    let mut activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&a)
        .arg("-l")
        .arg(&b)
        .args(["--fdname=export:metrics", "-E", CHILD, "--"])
        .arg(&me)
        .args([
            "activated_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&a);
    wait_for(&b);
    // The first connection starts the child; it answers on both sockets.
    let mut first = UnixStream::connect(&a).unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut second = UnixStream::connect(&b).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = String::new();
    first.read_to_string(&mut got).unwrap();
    let mut got2 = String::new();
    second.read_to_string(&mut got2).unwrap();
    let _ = activator.kill();
    let out = activator.wait_with_output().unwrap();
    assert_eq!(
        got,
        "export=unix,metrics=unix again:false\n",
        "activator said: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got2, got);
}

#[test]
fn sockets_meant_for_another_process_are_left_alone() {
    let env = |k: &str| match k {
        "LISTEN_FDS" => Some("2".to_string()),
        "LISTEN_PID" => Some((std::process::id() + 1).to_string()),
        _ => None,
    };
    assert!(listeners(&env).unwrap().is_empty());
    let env = |k: &str| match k {
        "LISTEN_FDS" => Some("2".to_string()),
        "LISTEN_PID" => Some(std::process::id().to_string()),
        "LISTEN_FDNAMES" => Some("only-one".to_string()),
        _ => None,
    };
    let e = listeners(&env).unwrap_err();
    assert!(e.to_string().contains("names 1 sockets"), "{e}");
}

fn scrape(metrics: Arc<Metrics>, dir: &Path) -> String {
    let server = MetricsServer::spawn(&"127.0.0.1:0".parse().unwrap(), metrics.clone()).unwrap();
    let Endpoint::Tcp(addr) = server.endpoint else {
        unreachable!()
    };
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10"])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // And over a Unix socket.
    let sock = dir.join("metrics.sock");
    MetricsServer::spawn(&Endpoint::Unix(sock.clone()), metrics).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10", "--unix-socket"])
        .arg(&sock)
        .arg("http://localhost/metrics")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("requests_in_flight"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(head(&String::from_utf8(out.stdout).unwrap()), head(&text));
    text
}

#[test]
fn a_scrape_passes_promtool_and_counts_what_was_recorded() {
    require!("curl", "promtool");
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(Metrics::new("vaes"));
    for name in ["disk0", "rbd \"pool\"/img"] {
        let e = Arc::new(ExportMetrics::new(name, 4));
        drop(e.connected());
        e.record(Op::Read, 4096, Duration::from_micros(80), 0);
        e.record(Op::Write, 65536, Duration::from_millis(2), 0);
        e.record(Op::Flush, 0, Duration::from_millis(12), 5);
        e.record(Op::Trim, 1 << 20, Duration::from_micros(30), 0);
        e.key_derived(Duration::from_millis(1500));
        m.add(e);
    }
    let text = scrape(m, dir.path());
    if let Err(e) = sectorcrypt_testkit::promtool_check(&text) {
        panic!("promtool: {e}\n{text}");
    }
    for line in [
        "sectorcrypt_requests_total{export=\"disk0\",type=\"trim\"} 1",
        "sectorcrypt_bytes_total{export=\"disk0\",type=\"write\"} 65536",
        "sectorcrypt_request_errors_total{export=\"disk0\",errno=\"EIO\"} 1",
        "sectorcrypt_request_duration_seconds_count{export=\"disk0\",type=\"flush\"} 1",
        "sectorcrypt_connections_total{export=\"rbd \\\"pool\\\"/img\"} 1",
        "sectorcrypt_key_derivation_seconds{export=\"disk0\"} 1.5",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

#[test]
fn the_endpoint_answers_only_get_of_metrics() {
    let m = Arc::new(Metrics::new("soft"));
    let server = MetricsServer::spawn(&"127.0.0.1:0".parse().unwrap(), m).unwrap();
    let Endpoint::Tcp(addr) = server.endpoint else {
        unreachable!()
    };
    let ask = |req: &[u8]| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req).unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    assert!(ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
    assert!(ask(b"GET /secret HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(ask(b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let head = ask(b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200 OK") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    let mut long = b"GET /metrics HTTP/1.1\r\n".to_vec();
    long.extend(std::iter::repeat_n(b'x', 9000));
    assert!(ask(&long).starts_with("HTTP/1.1 431"));
    // A scraper that says nothing is dropped at the deadline; the next one is answered.
    let silent = std::net::TcpStream::connect(addr).unwrap();
    let t0 = Instant::now();
    assert!(ask(b"GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
    assert!(t0.elapsed() < Duration::from_secs(9));
    drop(silent);
    let e = "no".parse::<Endpoint>().unwrap_err();
    assert!(e.contains("HOST:PORT"), "{e}");
}
