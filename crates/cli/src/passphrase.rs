//! Passphrases and confirmations, the way cryptsetup users expect them: prompted without
//! echo on a terminal (from /dev/tty), one line from standard input when it is not a
//! terminal, or the exact bytes of `--key-file F` ('-' = all of standard input).
//! Passphrases are kept in zeroizing buffers and never printed.

use crate::args::KeyArgs;
use crate::failure::Failure;
pub use sectorcrypt_cli::Secret;
use sectorcrypt_cli::{append, read_key_file, MAX_KEY_FILE};
use std::io::{IsTerminal, Read};
use std::path::Path;
use zeroize::Zeroizing;

/// cryptsetup's limit for an interactive passphrase.
const MAX_TYPED: usize = 512;

/// The bytes of a key file ('-': standard input).
fn from_file(path: &Path) -> Result<Secret, Failure> {
    let mut input: Box<dyn Read> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| Failure::usage(format!("key file {}: {e}", path.display())))?,
        )
    };
    read_key_file(&mut *input, path)
}

/// One line of standard input, byte by byte (so a second line stays for the next read).
fn stdin_line() -> Result<Secret, Failure> {
    let mut line = Zeroizing::new(Vec::new());
    let mut stdin = std::io::stdin().lock();
    let mut b = [0u8; 1];
    loop {
        match stdin.read(&mut b) {
            Ok(0) => break,
            Ok(_) if b[0] == b'\n' => break,
            Ok(_) => append(&mut line, &b),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::runtime(format!("reading standard input: {e}"))),
        }
        if line.len() > MAX_KEY_FILE as usize {
            return Err(Failure::usage("passphrase line longer than 8 MiB"));
        }
    }
    Ok(line)
}

fn prompt(msg: &str) -> Result<Secret, Failure> {
    if std::io::stdin().is_terminal() {
        let s = rpassword::prompt_password(msg)
            .map_err(|e| Failure::runtime(format!("reading the passphrase: {e}")))?;
        let s = Zeroizing::new(s.into_bytes());
        if s.len() > MAX_TYPED {
            return Err(Failure::usage("passphrase longer than 512 characters"));
        }
        Ok(s)
    } else {
        stdin_line()
    }
}

fn nonempty(s: Secret) -> Result<Secret, Failure> {
    if s.is_empty() {
        Err(Failure::usage("empty passphrase"))
    } else {
        Ok(s)
    }
}

/// An existing passphrase of `image`.
pub fn existing(key: &KeyArgs, image: &Path) -> Result<Secret, Failure> {
    match &key.key_file {
        Some(f) => from_file(f),
        None => nonempty(prompt(&format!(
            "Enter passphrase for {}: ",
            image.display()
        ))?),
    }
}

/// A new passphrase: from `file`, or prompted twice on a terminal.
pub fn new(file: Option<&Path>) -> Result<Secret, Failure> {
    if let Some(f) = file {
        return from_file(f);
    }
    let a = nonempty(prompt("Enter new passphrase: ")?)?;
    if std::io::stdin().is_terminal() {
        let b = prompt("Verify passphrase: ")?;
        if *a != *b {
            return Err(Failure::usage("passphrases do not match"));
        }
    }
    Ok(a)
}

/// Refuses two reads of standard input for two different passphrases.
pub fn check_one_stdin(a: Option<&Path>, b: Option<&Path>) -> Result<(), Failure> {
    if a == Some(Path::new("-")) && b == Some(Path::new("-")) {
        return Err(Failure::usage(
            "only one of the passphrases can come from standard input",
        ));
    }
    Ok(())
}

/// Asks for confirmation (typed `YES`, as cryptsetup), unless `batch`. Without a terminal
/// and without `--batch` the answer is no.
pub fn confirm(warning: &str, batch: bool) -> Result<(), Failure> {
    if batch {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(format!(
            "{warning}\nconfirmation needed: rerun with --batch (-q) to proceed without a terminal"
        )));
    }
    eprintln!("WARNING!\n========\n{warning}\n");
    eprint!("Are you sure? (Type 'yes' in capital letters): ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Failure::runtime(format!("reading the answer: {e}")))?;
    if answer.trim() == "YES" {
        Ok(())
    } else {
        Err(Failure::usage("not confirmed; nothing was changed"))
    }
}
