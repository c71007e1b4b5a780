//! `sectorcrypt bench` (being written).
#![forbid(unsafe_code)]

use sectorcrypt_crypto::Backend;
use std::io::Write;

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
}

/// Runs the benchmark and writes the report to `out`.
pub fn run(_opts: &BenchOptions, _out: &mut dyn Write) -> Result<(), String> {
    Err("sectorcrypt bench is not implemented yet".into())
}
