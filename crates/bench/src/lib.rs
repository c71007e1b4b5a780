//! `sectorcrypt bench`: this engine and OpenSSL's EVP side by side.
//!
//! Method: each case has our side and a peer. They run interleaved, A B A B, on the same
//! input buffer (each into its own output buffer), at least 7 runs each of at least ~50 ms
//! (3 runs of ~3 ms with `quick`), after a warm-up. A run's throughput is bytes over wall
//! time; a case reports the median, min and max of our runs, the peer's median, the ratio
//! of the medians, and cycles per byte at the clock measured in this process
//! ([`clock::measure_ghz`]).
//!
//! The OpenSSL side does what a disk layer would do with EVP: one context per key, and per
//! sector (or per message) a new IV set with `EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv)`
//! followed by one `EVP_CipherUpdate`.
//!
//! Every AES case also runs, in the same interleaved rotation (ours, then each peer, per
//! run), on the peer libraries of [`peers`] that are present and have its cipher: the
//! newest OpenSSL release and AWS-LC, driven the same way. Each peer's output is checked
//! against ours once before timing; a difference ends the run with an error.
//!
//! The only `unsafe` of the crate is in `peers/ffi.rs` (loading the peer libraries).
#![deny(unsafe_code)]

mod cases;
pub mod clock;
pub mod limit;
pub mod peers;
mod round_limit;
mod stats;
pub mod svg;

use sectorcrypt_crypto::{cpu, Backend};

/// The probe of how the AES and carry-less multiply units share the core (`sectorcrypt
/// bench --probe`): seconds per loop step of named mixes of independent instructions.
pub use sectorcrypt_crypto::hazmat::probe_units;
use serde::Serialize;
use std::io::Write;
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    /// Only cases whose name contains this substring.
    pub filter: Option<String>,
    /// Run sectorcrypt on this backend instead of the selected one.
    pub backend: Option<Backend>,
    /// A short smoke run (CI): fewer runs, smaller totals.
    pub quick: bool,
    /// Threads for the `-mt` cases (default: all cores).
    pub threads: Option<usize>,
    /// Print JSON instead of the table.
    pub json: bool,
    /// The peer libraries to load beside the system OpenSSL ([`peers::locate`]); an absent
    /// one is reported (and is an error under `SECTORCRYPT_STRICT=1`).
    pub peers: Vec<peers::PeerLocation>,
}

/// One peer's figure in a case (the JSON field names are an interface).
#[derive(Debug, Clone, Serialize)]
pub struct PeerResult {
    /// The library (`openssl`, `aws-lc`) or, for the cases whose peer is not a library,
    /// the side's name (`sectorcrypt-1core`).
    pub name: String,
    /// The library's version string (`OpenSSL 3.0.19 27 Jan 2026`); `null` for our own
    /// sides.
    pub version: Option<String>,
    /// Its median throughput.
    pub bytes_per_sec: f64,
    /// Ours over the peer's, medians.
    pub ratio: f64,
}

/// One line of the report (the JSON field names are an interface).
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub backend: String,
    pub bytes_per_sec: f64,
    pub min: f64,
    pub max: f64,
    /// The first peer (the system OpenSSL in the AES cases): its name, median and our
    /// ratio to it, as before there were several peers.
    pub peer: Option<String>,
    pub peer_bytes_per_sec: Option<f64>,
    pub ratio: Option<f64>,
    /// Every peer of the case, the first one included, in the order measured.
    pub peers: Vec<PeerResult>,
    pub cycles_per_byte: f64,
    /// The fraction of this machine's limit for the case that it reaches (AES cases: of
    /// the AES units' rate on the best register width the probe measured, whatever the
    /// backend, [`limit`]); `None` where no limit is stated.
    pub limit: Option<f64>,
    /// GOST cases: the cycles per byte the backend's measured round cost allows (rounds
    /// per block times cycles per round per block, over 8 bytes); `null` for the others.
    pub round_limit_cpb: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub clock_ghz: f64,
    pub cpu_features: Vec<String>,
    /// The peer libraries looked for and absent (`openssl 4: not built; run
    /// scripts/bench-peers.sh`).
    pub peers_absent: Vec<String>,
    pub results: Vec<CaseResult>,
}

/// A side of a case: one call processes `bytes` bytes.
pub(crate) struct Side<'a> {
    pub name: String,
    /// A library's version string (`None` for our sides).
    pub version: Option<String>,
    pub bytes: usize,
    pub call: Box<dyn FnMut() + 'a>,
    /// Where a call leaves its output, and how many leading bytes of it the sides of a case
    /// share (compared once before timing); `None` for a side not compared.
    pub output: Option<(peers::Output, usize)>,
}

/// Timing plan for one side: how many calls make one run.
struct Plan {
    calls: u64,
}

fn plan(side: &mut Side<'_>, run_secs: f64) -> Plan {
    // Warm up, then size a run from the rate seen.
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed().as_secs_f64() < run_secs / 2.0 || calls < 2 {
        (side.call)();
        calls += 1;
    }
    let per_call = start.elapsed().as_secs_f64() / calls as f64;
    Plan {
        calls: ((run_secs / per_call).ceil() as u64).max(1),
    }
}

fn timed_run(side: &mut Side<'_>, plan: &Plan) -> f64 {
    let start = Instant::now();
    for _ in 0..plan.calls {
        (side.call)();
    }
    (side.bytes as u64 * plan.calls) as f64 / start.elapsed().as_secs_f64()
}

/// Runs one case: our side and every peer interleaved (ours, peer 1, peer 2, ..., then
/// again), `runs` times each. Returns our rates and each peer's.
fn measure(
    ours: &mut Side<'_>,
    peers: &mut [Side<'_>],
    runs: usize,
    run_secs: f64,
) -> (Vec<f64>, Vec<Vec<f64>>) {
    let p_ours = plan(ours, run_secs);
    let p_peers: Vec<Plan> = peers.iter_mut().map(|p| plan(p, run_secs)).collect();
    let mut a = vec![];
    let mut b = vec![vec![]; peers.len()];
    for _ in 0..runs {
        a.push(timed_run(ours, &p_ours));
        for ((p, pl), rates) in peers.iter_mut().zip(&p_peers).zip(&mut b) {
            rates.push(timed_run(p, pl));
        }
    }
    (a, b)
}

/// Runs each side that states its output once, ours first, and checks that every peer's
/// output equals ours.
fn check_outputs(case: &str, ours: &mut Side<'_>, peers: &mut [Side<'_>]) -> Result<(), String> {
    let Some((want, n)) = ours.output.clone() else {
        return Ok(());
    };
    (ours.call)();
    for p in peers.iter_mut() {
        let Some((got, m)) = p.output.clone() else {
            continue;
        };
        (p.call)();
        if m != n || want.borrow()[..n] != got.borrow()[..n] {
            return Err(format!(
                "{case}: the output of {} ({}) differs from ours",
                p.name,
                p.version.as_deref().unwrap_or("no version")
            ));
        }
    }
    Ok(())
}

/// The peer libraries of `opts` that are present, loaded, and the notes on those absent.
/// Under `SECTORCRYPT_STRICT=1` an absent one is an error; a file that does not load always
/// is.
fn load_peers(
    opts: &BenchOptions,
    strict: bool,
) -> Result<(Vec<peers::Peer>, Vec<String>), String> {
    let (mut loaded, mut absent) = (vec![], vec![]);
    for loc in &opts.peers {
        match &loc.path {
            Some(path) => loaded.push(peers::Peer::load(path)?),
            None => absent.push(peers::absent_note(loc.kind)),
        }
    }
    if strict && !absent.is_empty() {
        return Err(format!(
            "SECTORCRYPT_STRICT=1 and a peer library is missing: {}",
            absent.join("; ")
        ));
    }
    Ok((loaded, absent))
}

/// A short label of a peer for the table: a library by the first two words of its version
/// (`OpenSSL 4.0.3`, `AWS-LC 5.12.0`), another side by its name, with that version when it
/// has one (`openssl-gostprov (OpenSSL 3.0.19)`).
fn peer_label(name: &str, version: Option<&str>) -> String {
    let words: Vec<&str> = version.unwrap_or("").split_whitespace().take(2).collect();
    match (words.len(), name) {
        (2, "openssl" | "aws-lc") => words.join(" "),
        (2, _) => format!("{name} ({})", words.join(" ")),
        _ => name.to_string(),
    }
}

/// The AES backend sectorcrypt runs on: the one asked for, or the selected one.
pub fn backend_of(opts: &BenchOptions) -> Result<Backend, String> {
    match opts.backend {
        Some(b) => Ok(b),
        None => Backend::selected().map_err(|e| e.to_string()),
    }
}

/// Runs the benchmark, writes the report to `out` (a table, or JSON with `opts.json`) and
/// returns it. Under `SECTORCRYPT_STRICT=1` a peer library of `opts.peers` that is absent
/// is an error.
pub fn run(opts: &BenchOptions, out: &mut dyn Write) -> Result<Report, String> {
    let strict = std::env::var_os("SECTORCRYPT_STRICT").is_some_and(|v| v == "1");
    run_with(opts, out, strict)
}

/// [`run`], with an absent peer library an error when `strict`.
fn run_with(opts: &BenchOptions, out: &mut dyn Write, strict: bool) -> Result<Report, String> {
    let backend = backend_of(opts)?;
    backend.ensure_usable().map_err(|e| e.to_string())?;
    let (runs, run_secs) = if opts.quick { (3, 0.003) } else { (7, 0.05) };
    let threads = opts.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let (libraries, peers_absent) = load_peers(opts, strict)?;
    let clock_ghz = clock::measure_ghz(opts.quick);
    let features: Vec<String> = cpu::features()
        .names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !opts.json {
        writeln!(
            out,
            "clock {clock_ghz:.2} GHz (measured), cpu: {}",
            features.join(" ")
        )
        .map_err(|e| e.to_string())?;
        writeln!(
            out,
            "{:<32} {:<7} {:>9} {:>17} {:>9} {:>7} {:>7} {:>6}  peer",
            "case", "backend", "GB/s", "min-max", "peer GB/s", "ratio", "cyc/B", "limit"
        )
        .map_err(|e| e.to_string())?;
    }
    let cases: Vec<_> = cases::all()
        .into_iter()
        .filter(|c| {
            opts.filter
                .as_ref()
                .is_none_or(|f| c.name.contains(f.as_str()))
        })
        .collect();
    // The probe runs once, and only when a case has an AES limit to state.
    let rate = if cases.iter().any(|c| c.bound != limit::Bound::None) {
        limit::AesRate::from_probe(&probe_units())
    } else {
        limit::AesRate::default()
    };
    let mut results = vec![];
    for case in cases {
        let mut built = (case.build)(backend, opts.quick, threads)
            .map_err(|e| format!("{}: {e}", case.name))?;
        let mut sides: Vec<Side<'static>> = built.peer.take().into_iter().collect();
        if let Some(job) = &built.job {
            sides.extend(libraries.iter().filter_map(|&p| peers::side(p, job)));
        }
        check_outputs(case.name, &mut built.ours, &mut sides)?;
        let (ours, theirs) = measure(&mut built.ours, &mut sides, runs, run_secs);
        let s = stats::summarize(&ours).ok_or("no runs")?;
        let peer_results: Vec<PeerResult> = sides
            .iter()
            .zip(&theirs)
            .filter_map(|(side, rates)| {
                let median = stats::summarize(rates)?.median;
                Some(PeerResult {
                    name: side.name.clone(),
                    version: side.version.clone(),
                    bytes_per_sec: median,
                    ratio: s.median / median,
                })
            })
            .collect();
        let first = peer_results.first();
        let peer_median = first.map(|p| p.bytes_per_sec);
        let mut r = CaseResult {
            name: case.name.to_string(),
            // A case on another algorithm's backend (GOST) names it as `sectorcrypt-gost-NAME`,
            // an engine case its selected backend as `sectorcrypt-engine-NAME`.
            backend: built
                .ours
                .name
                .strip_prefix("sectorcrypt-gost-")
                .or_else(|| built.ours.name.strip_prefix(cases::ENGINE_SIDE))
                .or_else(|| built.ours.name.strip_prefix("sectorcrypt-mac-"))
                .unwrap_or(backend.name())
                .to_string(),
            bytes_per_sec: s.median,
            min: s.min,
            max: s.max,
            peer: first.map(|p| p.name.clone()),
            peer_bytes_per_sec: peer_median,
            ratio: peer_median.map(|p| s.median / p),
            peers: peer_results.clone(),
            cycles_per_byte: clock_ghz * 1e9 / s.median,
            limit: None,
            round_limit_cpb: None,
        };
        r.round_limit_cpb = round_limit::measure(&r.name, &r.backend, clock_ghz);
        r.limit = limit::of_case(case.bound, &rate, threads, s.median)
            // A GOST case's limit is its backend's round cost: the fraction it reaches.
            .or(r.round_limit_cpb.map(|cpb| cpb / r.cycles_per_byte));
        if !opts.json {
            let gb = |x: f64| x / 1e9;
            writeln!(
                out,
                "{:<32} {:<7} {:>9.2} {:>8.2}-{:<8.2} {:>9} {:>7} {:>7.3} {:>6}  {}",
                r.name,
                r.backend,
                gb(r.bytes_per_sec),
                gb(r.min),
                gb(r.max),
                r.peer_bytes_per_sec
                    .map(|p| format!("{:.2}", gb(p)))
                    .unwrap_or_else(|| "-".into()),
                r.ratio
                    .map(|x| format!("{x:.2}x"))
                    .unwrap_or_else(|| "-".into()),
                r.cycles_per_byte,
                r.limit
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "-".into()),
                r.peers
                    .first()
                    .map(|p| peer_label(&p.name, p.version.as_deref()))
                    .unwrap_or_default()
            )
            .map_err(|e| e.to_string())?;
            // The other peers, each on a line of its own under the case, in the peer
            // columns.
            for p in r.peers.iter().skip(1) {
                writeln!(
                    out,
                    "{:<32} {:<7} {:>9} {:>17} {:>9.2} {:>7} {:>7} {:>6}  {}",
                    "",
                    "",
                    "",
                    "",
                    gb(p.bytes_per_sec),
                    format!("{:.2}x", p.ratio),
                    "",
                    "",
                    peer_label(&p.name, p.version.as_deref())
                )
                .map_err(|e| e.to_string())?;
            }
        }
        results.push(r);
    }
    if !opts.json {
        // Under the table (its first two lines stay the clock and the header): the peer
        // libraries loaded, and those absent.
        for p in &libraries {
            writeln!(out, "peer {}: {}", p.name(), p.version()).map_err(|e| e.to_string())?;
        }
        for note in &peers_absent {
            writeln!(out, "peer {note}").map_err(|e| e.to_string())?;
        }
    }
    let report = Report {
        clock_ghz,
        cpu_features: features,
        peers_absent,
        results,
    };
    if opts.json {
        serde_json::to_writer(&mut *out, &report).map_err(|e| e.to_string())?;
        writeln!(out).map_err(|e| e.to_string())?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON report of a quick one-thread run of the cases matching `filter`.
    fn quick_json(filter: &str, backend: Option<Backend>) -> serde_json::Value {
        quick_json_with(filter, backend, vec![])
    }

    /// [`quick_json`] with the peer libraries `peers`.
    fn quick_json_with(
        filter: &str,
        backend: Option<Backend>,
        peers: Vec<peers::PeerLocation>,
    ) -> serde_json::Value {
        let opts = BenchOptions {
            filter: Some(filter.into()),
            backend,
            quick: true,
            threads: Some(1),
            json: true,
            peers,
        };
        let mut out = vec![];
        run(&opts, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn quick_json_run_has_the_documented_shape() {
        let v = quick_json("aes-256-ctr/16384", Some(Backend::Soft));
        assert!(v["clock_ghz"].as_f64().unwrap() > 0.0);
        assert!(v["cpu_features"].is_array());
        let r = &v["results"][0];
        assert_eq!(r["name"], "aes-256-ctr/16384");
        assert_eq!(r["backend"], "soft");
        assert_eq!(r["peer"], "openssl");
        for k in [
            "bytes_per_sec",
            "min",
            "max",
            "peer_bytes_per_sec",
            "ratio",
            "cycles_per_byte",
        ] {
            let x = r[k].as_f64().unwrap_or_else(|| panic!("{k} missing"));
            assert!(x.is_finite() && x > 0.0, "{k} = {x}");
        }
        // The limit is the core's on every backend: the portable one states its (small)
        // fraction of it too, where the probe timed a width.
        if !probe_units().is_empty() {
            let l = r["limit"]
                .as_f64()
                .unwrap_or_else(|| panic!("no limit: {r}"));
            assert!(l > 0.0 && l < 0.5, "{r}");
        }
        assert!(r["min"].as_f64() <= r["bytes_per_sec"].as_f64());
        assert!(r["bytes_per_sec"].as_f64() <= r["max"].as_f64());
        assert_eq!(v["results"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn aes_cases_state_a_plausible_limit_on_the_vaes_backend() {
        if let Err(e) = Backend::Vaes.ensure_usable() {
            eprintln!("vaes: SKIPPED ({e})");
            return;
        }
        let v = quick_json("aes-256-ecb/16384", Some(Backend::Vaes));
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 1, "{v}");
        for r in results {
            // ECB is the mode nearest the units' rate; a debug build of the harness and a
            // loaded machine slow it, but it can never be several times faster.
            let l = r["limit"]
                .as_f64()
                .unwrap_or_else(|| panic!("no limit: {r}"));
            assert!(l > 0.02 && l < 1.5, "{r}");
        }
    }

    #[test]
    fn geli_case_reports_the_engine_backend_and_the_luks2_peer() {
        let v = quick_json("geli-xts/4096", None);
        let r = &v["results"][0];
        assert_eq!(v["results"].as_array().unwrap().len(), 1);
        assert_eq!(r["name"], "geli-xts/4096");
        assert_eq!(r["backend"], Backend::selected().unwrap().name());
        assert_eq!(r["peer"], "sectorcrypt-luks2-xts-engine");
        assert!(r["ratio"].as_f64().unwrap() > 0.0);
    }

    /// A side whose every call writes `bytes` into its output.
    fn fixed_side(name: &str, bytes: &'static [u8]) -> Side<'static> {
        let out: peers::Output = std::rc::Rc::new(std::cell::RefCell::new(vec![0; 8]));
        let o = out.clone();
        Side {
            name: name.into(),
            version: Some(format!("{name} 1.0")),
            bytes: bytes.len(),
            call: Box::new(move || o.borrow_mut()[..bytes.len()].copy_from_slice(bytes)),
            output: Some((out, bytes.len())),
        }
    }

    #[test]
    fn a_peer_whose_output_differs_from_ours_ends_the_case_with_an_error() {
        let mut ours = fixed_side("sectorcrypt", b"abcd");
        let mut same = [fixed_side("same", b"abcd")];
        assert_eq!(check_outputs("c", &mut ours, &mut same), Ok(()));
        let mut peers = [fixed_side("same", b"abcd"), fixed_side("other", b"abcX")];
        assert_eq!(
            check_outputs("c", &mut ours, &mut peers),
            Err("c: the output of other (other 1.0) differs from ours".into())
        );
        // A side that states no output is not compared.
        peers[1].output = None;
        assert_eq!(check_outputs("c", &mut ours, &mut peers), Ok(()));
    }

    #[test]
    fn an_absent_peer_is_noted_and_under_strict_is_an_error() {
        let opts = BenchOptions {
            peers: vec![peers::PeerLocation {
                kind: peers::OPENSSL4,
                path: None,
            }],
            ..BenchOptions::default()
        };
        let note = peers::absent_note(peers::OPENSSL4);
        if std::env::var_os(peers::OPENSSL4.env).is_none() {
            assert_eq!(note, "openssl 4: not built; run scripts/bench-peers.sh");
        }
        let (loaded, absent) = load_peers(&opts, false).unwrap();
        assert!(loaded.is_empty());
        assert_eq!(absent, vec![note.clone()]);
        let err = load_peers(&opts, true).unwrap_err();
        assert!(
            err.contains("SECTORCRYPT_STRICT=1") && err.contains(&note),
            "{err}"
        );
        // Not strict, the report carries the note.
        let mut out = vec![];
        let report = run_with(
            &BenchOptions {
                filter: Some("aes-128-ecb/".into()),
                backend: Some(Backend::Soft),
                quick: true,
                threads: Some(1),
                ..opts
            },
            &mut out,
            false,
        )
        .unwrap();
        assert_eq!(report.peers_absent, vec![note.clone()]);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(&format!("peer {note}\n")), "{text}");
    }

    #[test]
    fn a_file_that_is_no_peer_library_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("sc-no-peer-{}.so", std::process::id()));
        std::fs::write(&path, b"not an ELF file").unwrap();
        let opts = BenchOptions {
            peers: vec![peers::PeerLocation {
                kind: peers::AWS_LC,
                path: Some(path.clone()),
            }],
            ..BenchOptions::default()
        };
        let err = load_peers(&opts, false).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(
            err.starts_with(&format!("peer library {}: ", path.display())),
            "{err}"
        );
    }

    #[test]
    fn table_labels_name_each_peer_by_its_version() {
        assert_eq!(
            peer_label("openssl", Some("OpenSSL 4.0.3 29 Sep 2026")),
            "OpenSSL 4.0.3"
        );
        assert_eq!(peer_label("aws-lc", Some("AWS-LC 5.12.0")), "AWS-LC 5.12.0");
        assert_eq!(
            peer_label("openssl-gostprov", Some("OpenSSL 3.0.19 27 Jan 2026")),
            "openssl-gostprov (OpenSSL 3.0.19)"
        );
        assert_eq!(peer_label("sectorcrypt-1core", None), "sectorcrypt-1core");
    }

    /// The peer libraries scripts/bench-peers.sh builds, or `None` (a skip; a failure under
    /// SECTORCRYPT_STRICT=1) when one is not there.
    fn built_peers() -> Option<Vec<peers::PeerLocation>> {
        let found = peers::locate();
        for loc in &found {
            if loc.path.is_none() {
                sectorcrypt_testkit::skipped!("skipped: {}", peers::absent_note(loc.kind));
                return None;
            }
        }
        Some(found)
    }

    #[test]
    fn every_aes_case_runs_on_every_peer_that_has_its_cipher_with_equal_output() {
        let Some(peers) = built_peers() else {
            return;
        };
        // Outputs are compared inside the run: a difference fails it.
        let v = quick_json_with("aes-", None, peers);
        assert_eq!(v["peers_absent"], serde_json::json!([]));
        let results = v["results"].as_array().unwrap();
        assert!(results.len() >= 14, "{v}");
        for r in results {
            let name = r["name"].as_str().unwrap();
            let peers = r["peers"].as_array().unwrap();
            if name.ends_with("-mt") {
                assert_eq!(peers.len(), 1, "{r}");
                continue;
            }
            let versions: Vec<&str> = peers
                .iter()
                .map(|p| p["version"].as_str().unwrap())
                .collect();
            assert!(
                versions[0].starts_with("OpenSSL 3."),
                "{name}: {versions:?}"
            );
            assert!(
                versions[1].starts_with("OpenSSL 4.0."),
                "{name}: {versions:?}"
            );
            // AWS-LC has every AES mode here but AES-128-XTS.
            if name.starts_with("aes-128-xts") {
                assert_eq!(versions.len(), 2, "{name}: {versions:?}");
            } else {
                assert_eq!(versions.len(), 3, "{name}: {versions:?}");
                assert!(versions[2].starts_with("AWS-LC "), "{name}: {versions:?}");
                assert_eq!(peers[2]["name"], "aws-lc");
            }
            assert_eq!(peers[0]["name"], "openssl");
            assert_eq!(peers[1]["name"], "openssl");
            // The fields of before describe the system OpenSSL.
            assert_eq!(r["peer"], "openssl");
            assert_eq!(r["peer_bytes_per_sec"], peers[0]["bytes_per_sec"]);
            assert_eq!(r["ratio"], peers[0]["ratio"]);
            for p in peers {
                let (rate, ratio) = (p["bytes_per_sec"].as_f64(), p["ratio"].as_f64());
                let ours = r["bytes_per_sec"].as_f64().unwrap();
                assert!(rate.unwrap() > 0.0, "{r}");
                assert!((ratio.unwrap() - ours / rate.unwrap()).abs() < 1e-9, "{r}");
            }
        }
    }
}
