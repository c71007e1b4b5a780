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
    let Some([aes, clmul, mixed]) = sectorcrypt_crypto::probe_aes_clmul_units() else {
        return Err(Failure::runtime(
            "the probe needs the vaes backend's CPU features",
        ));
    };
    let ghz = sectorcrypt_bench::clock::measure_ghz(quick);
    let cyc = |s: f64| s * ghz * 1e9;
    let (a, c, m) = (cyc(aes), cyc(clmul), cyc(mixed));
    println!("clock {ghz:.2} GHz (measured); independent chains, nothing spilled");
    println!(
        "8 VAESENC ymm                  {a:.2} cycles per step ({:.2} each)",
        a / 8.0
    );
    println!(
        "4 VPCLMULQDQ ymm               {c:.2} cycles per step ({:.2} each)",
        c / 4.0
    );
    println!("8 VAESENC + 4 VPCLMULQDQ       {m:.2} cycles per step");
    println!(
        "  predicted if the units overlap: {:.2}; if they compete for the same pipes: {:.2}",
        a.max(c),
        a + c
    );
    Ok(())
}
