//! `sectorcrypt cipher encrypt|decrypt|mac`: the command line is checked against the
//! cipher table before the input is read ([`job`]), the whole input is transformed in
//! memory, and a regular `--output` file is replaced atomically, so bad input never leaves
//! a partial or truncated output behind (a FIFO or device is written through:
//! `present/output.rs`).
//!
//! - [`crate::flags::ciphers`]: every cipher with its key lengths, IV rule, tag rule and options,
//!   and the help generated from them;
//! - [`job`]: the command line checked against the table, then run.

mod job;

use crate::failure::Failure;
use crate::flags::CipherArgs;
use crate::present::output::Output;
use job::Job;
use std::io::{Read, Write};
use std::path::Path;

pub fn run(a: CipherArgs) -> Result<(), Failure> {
    let job = Job::parse(&a)?;
    let data = read_input(a.input.as_deref())?;
    let out = job.run(data)?;
    write_output(a.output.as_deref(), &out)
}

fn read_input(path: Option<&Path>) -> Result<Vec<u8>, Failure> {
    let mut data = vec![];
    match path {
        Some(p) => {
            data = std::fs::read(p)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", p.display())))?
        }
        None => {
            std::io::stdin()
                .read_to_end(&mut data)
                .map_err(|e| Failure::runtime(format!("reading standard input: {e}")))?;
        }
    }
    Ok(data)
}

/// Writes all of `data`, to standard output or to `path` (see [`Output`]).
fn write_output(path: Option<&Path>, data: &[u8]) -> Result<(), Failure> {
    let Some(path) = path else {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(data)
            .and_then(|()| out.flush())
            .map_err(|e| Failure::runtime(format!("writing standard output: {e}")));
    };
    let mut out = Output::open(path)?;
    out.write_all(data)
        .and_then(|()| out.commit())
        .map_err(|e| Failure::runtime(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use crate::flags::Cli;
    use clap::CommandFactory;
    use sectorcrypt_crypto::gost89::Sbox;

    #[test]
    fn the_help_lists_every_cipher_and_sbox() {
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("cipher")
            .expect("the cipher command")
            .render_long_help()
            .to_string();
        for c in crate::flags::ciphers::CIPHERS {
            assert!(
                help.contains(&format!("- {}:", c.name)),
                "{} in {help}",
                c.name
            );
        }
        for s in Sbox::ALL {
            assert!(help.contains(s.name()), "{} in {help}", s.name());
        }
    }
}
