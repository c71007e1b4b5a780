//! `sectorcrypt bench`: hands the options to the benchmark crate.

use crate::failure::Failure;
use crate::flags::BenchArgs;
use crate::present::output::Output;
use sectorcrypt_bench::svg::{self, Caption};
use sectorcrypt_bench::{BenchOptions, Report};
use sectorcrypt_crypto::Backend;
use std::fs::Permissions;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub fn run(a: BenchArgs) -> Result<(), Failure> {
    if cfg!(debug_assertions) {
        eprintln!("sectorcrypt: warning: this is a debug build; run `cargo run --release -p sectorcrypt -- bench`");
    }
    let backend = a.backend.as_deref().map(Backend::from_name).transpose()?;
    if let Some(b) = backend {
        b.ensure_usable()?;
    }
    if a.threads == Some(0) {
        return Err(Failure::usage("--threads must be at least 1"));
    }
    if a.probe {
        return probe(a.quick);
    }
    // The chart's file is opened first: a path that cannot be written fails before the run.
    let chart = a
        .svg
        .as_deref()
        .map(|p| Ok::<_, Failure>((p, Output::open_for("--svg", p)?)))
        .transpose()?;
    let opts = BenchOptions {
        filter: a.filter,
        backend,
        quick: a.quick,
        threads: a.threads,
        json: a.json,
        // The newest OpenSSL and AWS-LC, when scripts/bench-peers.sh has built them.
        peers: sectorcrypt_bench::peers::locate(),
    };
    let mut out = std::io::stdout().lock();
    let report = sectorcrypt_bench::run(&opts, &mut out).map_err(Failure::runtime)?;
    if opts.json {
        // The table names them under it; with JSON on standard output, people read this.
        for note in &report.peers_absent {
            eprintln!("sectorcrypt: peer {note}");
        }
    }
    if let Some((path, file)) = chart {
        write_chart(&opts, &report, path, file)?;
    }
    Ok(())
}

/// Draws `report` into `file` (at `path`) and puts it in place.
fn write_chart(
    opts: &BenchOptions,
    report: &Report,
    path: &Path,
    mut file: Output,
) -> Result<(), Failure> {
    let backend = sectorcrypt_bench::backend_of(opts).map_err(Failure::runtime)?;
    let caption = Caption::of_this_machine(backend.name(), opts.filter.as_deref(), opts.quick);
    let svg = svg::render(report, &caption).map_err(Failure::runtime)?;
    let failed = |e: std::io::Error| Failure::runtime(format!("--svg {}: {e}", path.display()));
    if let Output::Replace(f) = &file {
        // A chart is no secret: readable by all, as files usually are.
        f.file()
            .set_permissions(Permissions::from_mode(0o644))
            .map_err(failed)?;
    }
    file.write_all(svg.as_bytes()).map_err(failed)?;
    file.commit().map_err(failed)
}

/// `--probe`: cycles per step of the unit probe, at the clock measured in this process.
fn probe(quick: bool) -> Result<(), Failure> {
    let steps = sectorcrypt_bench::probe_units();
    if steps.is_empty() {
        return Err(Failure::runtime(
            "the probe needs the vaes backend's CPU features",
        ));
    }
    let ghz = sectorcrypt_bench::clock::measure_ghz(quick);
    println!("clock {ghz:.2} GHz (measured); independent chains, nothing spilled");
    println!("{:<32} cycles per step", "step");
    for (name, secs) in &steps {
        println!("{name:<32} {:.2}", secs * ghz * 1e9);
    }
    println!(
        "A mix that costs the slower of its parts overlaps on separate pipes; one that costs\n\
         their sum competes for the same pipes (docs/PERFORMANCE.md reads this table)."
    );
    Ok(())
}
