//! Passphrases and confirmations, the way cryptsetup users expect them: prompted without
//! echo on a terminal (from /dev/tty), one line from standard input when it is not a
//! terminal, or the exact bytes of `--key-file F` ('-' = all of standard input).
//!
//! Every passphrase is read with `read(2)` straight into secret memory
//! ([`Secret`]: locked, out of core dumps, wiped when dropped), never through a
//! buffer of its own or of the standard library: std's standard input keeps what it read
//! ahead in a buffer for the life of the process. A line is read one byte at a time, so
//! what follows it stays in the file for the next reader. Passphrases are never printed.

use crate::failure::Failure;
use crate::flags::KeyArgs;
use rustix::termios::{self, LocalModes, OptionalActions, SpecialCodeIndex};
pub use sectorcrypt_cli::Secret;
use sectorcrypt_cli::{read_byte, read_key_file, read_line, Unbuffered, MAX_KEY_FILE};
use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::path::Path;

/// cryptsetup's limit for an interactive passphrase.
const MAX_TYPED: usize = 512;

/// The bytes of a key file ('-': standard input), read into secret memory.
pub fn from_file(path: &Path) -> Result<Secret, Failure> {
    let (file, stdin);
    let fd = if path == Path::new("-") {
        stdin = io::stdin();
        stdin.as_fd()
    } else {
        file = File::open(path)
            .map_err(|e| Failure::usage(format!("key file {}: {e}", path.display())))?;
        file.as_fd()
    };
    read_key_file(&mut Unbuffered(fd), path)
}

/// One line of standard input (a second line stays for the next read).
fn stdin_line() -> Result<Secret, Failure> {
    read_line(&mut Unbuffered(io::stdin().as_fd()), MAX_KEY_FILE)
        .map_err(|e| Failure::runtime(format!("reading standard input: {e}")))?
        .ok_or_else(|| Failure::usage("passphrase line longer than 8 MiB"))
}

/// The terminal's own settings while a prompt has it raw (a second handle on it), for
/// [`restore_terminal`].
static RAW_TERMINAL: std::sync::Mutex<Option<(File, termios::Termios)>> =
    std::sync::Mutex::new(None);

/// Gives the terminal its settings back if a prompt has it raw: for a process that ends
/// while another thread is prompting (SIGTERM during `open`'s or `serve`'s unlock).
pub fn restore_terminal() {
    let held = RAW_TERMINAL.lock().map(|mut g| g.take());
    if let Ok(Some((tty, saved))) = held {
        let _ = termios::tcsetattr(&tty, OptionalActions::Now, &saved);
    }
}

/// The terminal with echo, line editing and signal keys off while it lives (restored
/// on drop), so that every key comes to [`typed`] as it is pressed.
struct Raw<'a> {
    tty: &'a File,
    saved: termios::Termios,
}

impl<'a> Raw<'a> {
    fn new(tty: &'a File) -> io::Result<Raw<'a>> {
        let saved = termios::tcgetattr(tty)?;
        let mut raw = saved.clone();
        raw.local_modes
            .remove(LocalModes::ECHO | LocalModes::ICANON | LocalModes::ISIG);
        raw.special_codes[SpecialCodeIndex::VMIN] = 1;
        raw.special_codes[SpecialCodeIndex::VTIME] = 0;
        if let (Ok(mut held), Ok(again)) = (RAW_TERMINAL.lock(), tty.try_clone()) {
            *held = Some((again, saved.clone()));
        }
        termios::tcsetattr(tty, OptionalActions::Flush, &raw)?;
        Ok(Raw { tty, saved })
    }
}

impl Drop for Raw<'_> {
    fn drop(&mut self) {
        if let Ok(mut held) = RAW_TERMINAL.lock() {
            *held = None;
        }
        let _ = termios::tcsetattr(self.tty, OptionalActions::Now, &self.saved);
    }
}

/// What the terminal signals rather than types.
enum Typed {
    Line(Secret),
    TooLong,
    Interrupted,
    EndOfFile,
}

/// One passphrase typed on `tty` (in raw mode): Enter ends it, Backspace erases a
/// character, Ctrl-U the line, Ctrl-C interrupts, Ctrl-D on an empty line is the end of
/// input; other control keys are ignored.
fn typed(tty: &File) -> io::Result<Typed> {
    let mut s = Secret::with_capacity(MAX_TYPED + 1);
    loop {
        if !read_byte(&mut Unbuffered(tty.as_fd()), &mut s)? {
            return Ok(Typed::EndOfFile);
        }
        let b = s[s.len() - 1];
        if b >= 0x20 && b != 0x7f {
            if s.len() > MAX_TYPED {
                return Ok(Typed::TooLong);
            }
            continue;
        }
        // A control key: never part of the passphrase.
        let mut n = s.len() - 1;
        match b {
            b'\r' | b'\n' => {
                s.set_len(n);
                return Ok(Typed::Line(s));
            }
            0x03 => return Ok(Typed::Interrupted),
            0x04 if n == 0 => return Ok(Typed::EndOfFile),
            0x15 => n = 0,
            // Backspace: the last character, with its UTF-8 continuation bytes.
            0x7f | 0x08 => {
                while n > 0 && s[n - 1] & 0xc0 == 0x80 {
                    n -= 1;
                }
                n = n.saturating_sub(1);
            }
            _ => {}
        }
        s.set_len(n);
    }
}

/// Prompts with `msg` on the terminal and reads a passphrase without echo.
fn from_terminal(msg: &str) -> Result<Secret, Failure> {
    let failed = |e: io::Error| Failure::runtime(format!("reading the passphrase: {e}"));
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(failed)?;
    tty.write_all(msg.as_bytes()).map_err(failed)?;
    let got = {
        let _raw = Raw::new(&tty).map_err(failed)?;
        typed(&tty).map_err(failed)?
    };
    let _ = tty.write_all(b"\n");
    match got {
        Typed::Line(s) => Ok(s),
        Typed::TooLong => Err(Failure::usage("passphrase longer than 512 characters")),
        Typed::EndOfFile => Err(Failure::usage("no passphrase: end of input")),
        Typed::Interrupted => {
            // The terminal is restored: stop as Ctrl-C would have stopped us.
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::INT,
            );
            Err(Failure::runtime("interrupted"))
        }
    }
}

fn prompt(msg: &str) -> Result<Secret, Failure> {
    if io::stdin().is_terminal() {
        from_terminal(msg)
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
    if key.no_passphrase || key.bitlk_startup_key.is_some() {
        return Ok(Secret::from_slice(&[]));
    }
    match &key.key_file {
        Some(f) => from_file(f),
        None => nonempty(prompt(&format!(
            "Enter passphrase for {}: ",
            crate::present::locator::redacted(image)
        ))?),
    }
}

/// The keyfile components `key` names (GELI's `-k` files), their whole contents in order.
/// Unlike a passphrase file, a keyfile may be empty (`geli init -K /dev/null`).
/// A BitLocker startup key (`--bitlk-startup-key`) is handed to the format the same way,
/// as its one key part.
pub fn keyfiles(key: &KeyArgs) -> Result<Vec<zeroize::Zeroizing<Vec<u8>>>, Failure> {
    if key.bitlk_startup_key.is_some() && !key.keyfile_component.is_empty() {
        return Err(Failure::usage(
            "--bitlk-startup-key and --keyfile-component belong to different formats \
             (BitLocker, GELI): give one",
        ));
    }
    key.keyfile_component
        .iter()
        .chain(&key.bitlk_startup_key)
        .map(|path| {
            let file = File::open(path)
                .map_err(|e| Failure::usage(format!("keyfile {}: {e}", path.display())))?;
            let read = sectorcrypt_cli::read_all(&mut Unbuffered(file.as_fd()), MAX_KEY_FILE)
                .map_err(|e| Failure::runtime(format!("reading keyfile {}: {e}", path.display())))?
                .ok_or_else(|| {
                    Failure::usage(format!("keyfile {} is larger than 8 MiB", path.display()))
                })?;
            Ok(zeroize::Zeroizing::new(read.to_vec()))
        })
        .collect()
}

/// A new passphrase: from `file`, or prompted twice on a terminal.
pub fn new(file: Option<&Path>) -> Result<Secret, Failure> {
    if let Some(f) = file {
        return from_file(f);
    }
    let a = nonempty(prompt("Enter new passphrase: ")?)?;
    if io::stdin().is_terminal() {
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
    if !io::stdin().is_terminal() {
        return Err(Failure::usage(format!(
            "{warning}\nconfirmation needed: rerun with --batch (-q) to proceed without a terminal"
        )));
    }
    eprintln!("WARNING!\n========\n{warning}\n");
    eprint!("Are you sure? (Type 'yes' in capital letters): ");
    // Unbuffered too: whatever follows the answer stays for the next reader.
    let answer = read_line(&mut Unbuffered(io::stdin().as_fd()), MAX_TYPED)
        .map_err(|e| Failure::runtime(format!("reading the answer: {e}")))?;
    if answer.is_some_and(|a| a.trim_ascii() == b"YES") {
        Ok(())
    } else {
        Err(Failure::usage("not confirmed; nothing was changed"))
    }
}
