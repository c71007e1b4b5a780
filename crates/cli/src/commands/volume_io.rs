//! `read` and `write`: plaintext in and out of a volume through the sector engine's
//! pipelined `read_to` / `write_from` (the standard stream or file is served by a second
//! thread while the engine's workers encrypt or decrypt). `read` replaces a regular
//! `--output` file only on success and writes through a FIFO or device (`present/output.rs`);
//! `write` checks that a file input fits, and that the volume takes all of it (a protected
//! hidden volume), before writing anything (stdin's length is unknown: it stops with an
//! error at the end of the volume, or at the first piece the volume refuses). Progress: the bytes
//! the caller's input or output passes are counted (`present/progress.rs`).

use crate::failure::Failure;
use crate::flags::{HeaderArg, KeyArgs, ReadArgs, WriteArgs};
use crate::present::output::Output;
use crate::present::progress::Progress;
use crate::volumes::image::{self, Claims};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::Path;

fn io_err(what: impl std::fmt::Display, e: std::io::Error) -> Failure {
    Failure::runtime(format!("{what}: {e}"))
}

/// The volume of `image` (with its header in `header` when detached) for reading or
/// writing, and the claims on its files to hold while it is used (listed first: dropped
/// after the volume).
fn open_volume(
    image: &Path,
    header: &HeaderArg,
    key: &KeyArgs,
    write: bool,
    shared: bool,
) -> Result<(Claims, Volume), Failure> {
    let opts = EngineOptions {
        read_only: !write,
        ..EngineOptions::default()
    };
    let opened = image::open_volume(image, header, key, opts, shared)?;
    Ok((opened.claims, opened.volume))
}

/// Refuses an `--offset` beyond the end of the volume.
fn check_offset(vol: &Volume, offset: u64) -> Result<(), Failure> {
    if offset > vol.size() {
        return Err(Failure::usage(format!(
            "--offset {offset} is beyond the end of the volume ({} bytes)",
            vol.size()
        )));
    }
    Ok(())
}

/// The caller's input or output, counting the bytes for the progress and noting whether
/// an error was its own (rather than the volume's).
struct Counted<'a, T: ?Sized> {
    inner: &'a mut T,
    progress: &'a Progress,
    failed: bool,
}

impl<T: Read + ?Sized> Read for Counted<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf).inspect_err(|_| self.failed = true)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

impl<T: Write + ?Sized> Write for Counted<'_, T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf).inspect_err(|_| self.failed = true)?;
        self.progress.add(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}

pub fn read(a: ReadArgs) -> Result<(), Failure> {
    crate::volumes::image::request(&a.tcrypt)?;
    let (_claims, vol) = open_volume(&a.image, &a.header, &a.key, false, a.shared)?;
    let offset = a.offset.unwrap_or(0);
    check_offset(&vol, offset)?;
    let length = a.length.unwrap_or(vol.size() - offset);
    if offset.checked_add(length).is_none_or(|e| e > vol.size()) {
        return Err(Failure::usage(format!(
            "--offset {offset} + --length {length} goes beyond the end of the volume ({} bytes)",
            vol.size()
        )));
    }
    // Output: a regular file is replaced only on success, a FIFO or device written
    // through (see `present/output.rs`).
    let mut file = a.output.as_deref().map(Output::open).transpose()?;
    let mut stdout = std::io::stdout();
    let out: &mut (dyn Write + Send) = match file.as_mut() {
        Some(f) => f,
        None => &mut stdout,
    };
    let progress = Progress::bytes("read", Some(length));
    let mut counted = Counted {
        inner: out,
        progress: &progress,
        failed: false,
    };
    vol.read_to(&mut counted, offset, length).map_err(|e| {
        if counted.failed {
            io_err("output", e)
        } else {
            io_err(crate::present::locator::redacted(&a.image), e)
        }
    })?;
    if let (Some(f), Some(p)) = (file, &a.output) {
        f.commit().map_err(|e| io_err(p.display(), e))?;
    }
    progress.finish();
    Ok(())
}

pub fn write(a: WriteArgs) -> Result<(), Failure> {
    crate::volumes::image::request(&a.tcrypt)?;
    let from_stdin = a.input.is_none() || a.input.as_deref() == Some(Path::new("-"));
    if from_stdin && a.key.key_file.as_deref() == Some(Path::new("-")) {
        return Err(Failure::usage(
            "the data comes from standard input: give the passphrase with --key-file FILE or on a terminal",
        ));
    }
    if from_stdin && a.key.key_file.is_none() && !std::io::stdin().is_terminal() {
        // Prompting would read the passphrase from the data; rpassword needs a terminal.
        if std::fs::File::open("/dev/tty").is_err() {
            return Err(Failure::usage(
                "the data comes from standard input: give the passphrase with --key-file FILE",
            ));
        }
    }
    let mut input: Box<dyn Read + Send> = match &a.input {
        Some(p) if p != Path::new("-") => {
            Box::new(File::open(p).map_err(|e| Failure::cannot_open(p, e))?)
        }
        _ => Box::new(std::io::stdin()),
    };
    let known_len = match &a.input {
        Some(p) if p != Path::new("-") => std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len()),
        _ => None,
    };
    let (_claims, vol) = open_volume(&a.image, &a.header, &a.key, true, false)?;
    let offset = a.offset.unwrap_or(0);
    check_offset(&vol, offset)?;
    if let Some(len) = known_len {
        if offset + len > vol.size() {
            return Err(Failure::usage(format!(
                "the input ({len} bytes) at --offset {offset} does not fit in the volume ({} bytes); nothing was written",
                vol.size()
            )));
        }
        // A range the volume refuses (a protected hidden volume) is refused whole, before
        // its first piece is written.
        vol.check_write(offset, len)
            .map_err(|e| io_err(crate::present::locator::redacted(&a.image), e))?;
    }
    let progress = Progress::bytes("write", known_len);
    let mut counted = Counted {
        inner: &mut input,
        progress: &progress,
        failed: false,
    };
    // The engine reads the next piece of input on a second thread while it encrypts and
    // writes the current one.
    let result = vol.write_from(&mut counted, offset).map_err(|e| {
        if counted.failed {
            io_err("input", e)
        } else if e.kind() == std::io::ErrorKind::InvalidInput {
            Failure::usage(e.to_string())
        } else {
            io_err(crate::present::locator::redacted(&a.image), e)
        }
    });
    // Flush what was written even when the input failed part-way.
    vol.flush()
        .map_err(|e| io_err(crate::present::locator::redacted(&a.image), e))?;
    let stored = result?;
    progress.finish();
    eprintln!(
        "{stored} bytes written to {}",
        crate::present::locator::redacted(&a.image)
    );
    Ok(())
}
