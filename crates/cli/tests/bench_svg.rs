//! `sectorcrypt bench --svg FILE`: the chart read back against the JSON report of the same
//! run (names, bar lengths on each panel's axis, whiskers, limit marks), with the table
//! or the JSON on standard output, rendered by rsvg-convert, and a bad path refused before
//! the run with nothing left behind.

#[path = "support/chart.rs"]
mod chart;
mod support;

use sectorcrypt_bench::svg::{render, Caption};
use sectorcrypt_bench::{CaseResult, Report};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{code, ok, s, sc};

/// Renders `svg` to PNG with rsvg-convert (as a person would look at it); skips with the
/// reason printed when rsvg-convert is missing (`scripts/deps.sh docs` installs it).
fn renders(svg: &Path) {
    if !sectorcrypt_testkit::have("rsvg-convert") {
        sectorcrypt_testkit::skipped!(
            "skipped rendering: rsvg-convert is not installed (scripts/deps.sh docs)"
        );
        return;
    }
    let png = svg.with_extension("png");
    let out = Command::new("rsvg-convert")
        .arg(svg)
        .arg("-o")
        .arg(&png)
        .output()
        .expect("run rsvg-convert");
    assert!(
        out.status.success(),
        "rsvg-convert: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let image = std::fs::read(&png).unwrap();
    assert!(
        image.starts_with(b"\x89PNG") && image.len() > 10_000,
        "{png:?}"
    );
}

/// The chart's texts, a line each.
fn words(svg: &str) -> String {
    let texts: Vec<String> = chart::parse(svg)
        .texts
        .into_iter()
        .map(|t| t.content)
        .collect();
    texts.join("\n")
}

/// The title's words: the CPU model, the backend, the clock, a date.
fn title_names_the_machine(svg: &str, backend: &str) {
    let all = words(svg);
    assert!(all.contains(&format!("backend {backend}")), "{all}");
    assert!(all.contains("GHz (measured)"), "{all}");
    assert!(all.contains("cpu features:"), "{all}");
    if let Some(model) = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
    {
        assert!(all.contains(model.1.trim()), "{all}");
    }
    let year = all.lines().any(|t| {
        t.split(" · ")
            .any(|w| w.len() == 20 && w.ends_with(" UTC") && w.starts_with("20"))
    });
    assert!(year, "no date: {all}");
}

#[test]
fn chart_of_a_quick_run_matches_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("run.svg");
    let args = ["bench", "--quick", "--threads", "1", "--json"];
    let filter = ["--filter", "ctr/16384", "--svg", s(&svg)];
    let v: Value = serde_json::from_str(&ok(sc(&[&args[..], &filter].concat(), b""))).unwrap();
    let results = v["results"].as_array().unwrap();
    // AES-CTR and Magma-CTR: an AES case with a limit on AES units, a GOST one.
    assert_eq!(results.len(), 2, "{v}");
    let text = std::fs::read_to_string(&svg).unwrap();
    chart::check(&text, results);
    let backend = results[0]["backend"].as_str().unwrap();
    title_names_the_machine(&text, backend);
    let words = words(&text);
    assert!(words.contains("cases matching \"ctr/16384\""), "{words}");
    assert!(words.contains("quick run"), "{words}");
    renders(&svg);
    // Only the chart is left in the directory (and the PNG made here).
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.ends_with(".png"))
        .collect();
    assert_eq!(left, ["run.svg"]);
}

#[test]
fn chart_beside_the_table_on_the_portable_backend() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("table.svg");
    std::fs::write(&svg, "an older chart").unwrap();
    let args = ["bench", "--quick", "--threads", "1", "--backend", "soft"];
    let table = ok(sc(
        &[
            &args[..],
            &["--filter", "aes-256-xts/512", "--svg", s(&svg)],
        ]
        .concat(),
        b"",
    ));
    // The table as without --svg: its header and the case's line.
    assert!(
        table.lines().nth(1).unwrap().starts_with("case "),
        "{table}"
    );
    assert!(table.contains("aes-256-xts/512"), "{table}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let names: Vec<String> = chart::parse(&text)
        .names()
        .iter()
        .map(|t| t.content.clone())
        .collect();
    assert_eq!(names, ["aes-256-xts/512"]);
    // The portable backend is held to the core's limit as every backend is (the probe
    // times the core's AES instructions, where it has them): a fraction near nothing.
    let has_aes = std::fs::read_to_string("/proc/cpuinfo")
        .is_ok_and(|c| c.split_whitespace().any(|w| w == "aes"));
    assert_eq!(text.contains("% of the limit"), has_aes, "{text}");
    title_names_the_machine(&text, "soft");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&svg).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "a chart is readable by all");
}

fn case(
    name: &str,
    gbs: f64,
    spread: (f64, f64),
    peer: Option<f64>,
    limit: Option<f64>,
) -> CaseResult {
    let b = gbs * 1e9;
    CaseResult {
        name: name.into(),
        backend: "vaes".into(),
        bytes_per_sec: b,
        min: spread.0 * 1e9,
        max: spread.1 * 1e9,
        peer: peer.map(|_| "openssl".into()),
        peer_bytes_per_sec: peer.map(|p| p * 1e9),
        ratio: peer.map(|p| gbs / p),
        peers: vec![],
        cycles_per_byte: 4.0 / gbs,
        limit,
        round_limit_cpb: None,
    }
}

/// Cases twenty times apart get panels of their own, each read on its own axis; in each
/// the bars, whiskers and limit marks stand where the figures say.
#[test]
fn cases_far_apart_in_speed_get_panels_of_their_own() {
    let results = vec![
        case("aes-256-xts/4096", 16.0, (15.0, 16.5), Some(7.2), Some(0.8)),
        case("gost89-cnt/16384", 1.2, (1.1, 1.25), Some(0.08), Some(0.6)),
        case(
            "aes-256-ctr/16384",
            17.5,
            (12.0, 18.0),
            Some(8.5),
            Some(0.9),
        ),
        case("gost89-ecb/16384", 1.5, (1.4, 1.6), None, None),
        case("aes-256-gcm/512", 5.5, (5.4, 5.9), Some(1.3), Some(0.05)),
    ];
    let report = Report {
        clock_ghz: 4.2,
        cpu_features: vec!["aes".into(), "avx2".into(), "vaes".into()],
        peers_absent: vec![],
        results,
    };
    let caption = Caption {
        cpu: "AMD EPYC".into(),
        backend: "vaes".into(),
        date: "2026-11-24 07:00 UTC".into(),
        filter: None,
        quick: false,
    };
    let svg = render(&report, &caption).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let axes = chart::check(&svg, json["results"].as_array().unwrap());
    // AES on one axis, GOST on another with a scale under 2 GB/s.
    assert_eq!(axes[0], axes[2]);
    assert_eq!(axes[0], axes[4]);
    assert_eq!(axes[1], axes[3]);
    assert_ne!(axes[0], axes[1]);
    assert!(axes[1].max_gbs <= 2.5, "{:?}", axes[1]);
    assert!(axes[0].max_gbs >= 20.0, "{:?}", axes[0]);
    assert!(svg.contains("AMD EPYC · backend vaes · clock 4.20 GHz (measured) · 2026-11-24"));
    // GCM/512 at 5% of its limit: the mark would be 20 times its bar, off the axis.
    assert!(svg.contains("5% of the limit"));
}

/// A path that cannot be written is refused before the run, and nothing is left behind:
/// a missing directory (exit 1, as `read --output`), a directory or a symbolic link
/// (exit 2). An existing file stays as it was.
#[test]
fn bad_chart_paths_fail_before_the_run_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["bench", "--quick", "--filter", "aes-256-ecb/16384", "--svg"];
    let missing = dir.path().join("no/such/dir/chart.svg");
    let out = sc(&[&args[..], &[s(&missing)]].concat(), b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains(s(&missing)) && err.contains("No such file"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "the run did not start");
    let out = sc(&[&args[..], &[s(dir.path())]].concat(), b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("--svg") && err.contains("is a directory"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let target = dir.path().join("kept.svg");
    std::fs::write(&target, "kept").unwrap();
    let link = dir.path().join("link.svg");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = sc(&[&args[..], &[s(&link)]].concat(), b"");
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    // --probe draws nothing: the two are refused together.
    let out = sc(&["bench", "--probe", "--svg", s(&target)], b"");
    assert_eq!(code(&out), 2);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["kept.svg", "link.svg"], "no temporary file is left");
}
