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
