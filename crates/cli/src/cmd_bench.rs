//! `sectorcrypt bench`: hands the options to the benchmark crate.

use crate::args::BenchArgs;
use crate::failure::Failure;
use sectorcrypt_bench::BenchOptions;
use sectorcrypt_crypto::Backend;

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
    let opts = BenchOptions {
        filter: a.filter,
        backend,
        quick: a.quick,
        threads: a.threads,
        json: a.json,
    };
    let mut out = std::io::stdout().lock();
    sectorcrypt_bench::run(&opts, &mut out).map_err(Failure::runtime)
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
