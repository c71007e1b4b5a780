//! `sectorcrypt`: policy only. Parses the command line, runs one command, maps failures to
//! exit codes: 0 success, 1 a runtime failure (I/O), 2 bad usage or bad input, 3 a wrong
//! passphrase.
#![forbid(unsafe_code)]
// The doc comments of the argument structs are clap's --help text, written for a
// terminal (`[::1]:PORT`, `<prov>`), not rustdoc markup.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod commands;
mod flags;
mod fuse;
mod host;
mod passphrase;
mod present;
mod volumes;

// How a command fails, shared with the library target (values.rs).
use sectorcrypt_cli::failure;

use clap::Parser;
use flags::{Cli, Command};

/// Output to a reader that has gone (`sectorcrypt dump --json | head`) makes `println!`
/// panic ("failed printing to stdout: Broken pipe"), Rust having set SIGPIPE aside. Such a
/// panic ends the process quietly instead, with the status a shell shows for a process
/// that SIGPIPE ended (141), as `cat` or `cryptsetup` would end; any other panic is
/// reported as usual.
fn end_quietly_on_a_broken_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = (payload.downcast_ref::<String>().map(String::as_str))
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

fn main() {
    end_quietly_on_a_broken_pipe();
    let cli = Cli::parse();
    volumes::image::configure(cli.remote.options());
    present::progress::configure(cli.progress);
    let result = match cli.command {
        Command::Cipher(a) => commands::cipher::run(a),
        Command::Backends(a) => commands::backends::run(a.json),
        Command::Bench(a) => commands::bench::run(a),
        Command::Demo => commands::demo::run(),
        Command::Format(a) => commands::volume::format(a),
        Command::Dump(a) => commands::volume::dump(a),
        Command::AddKey(a) => commands::volume::add_key(a),
        Command::RemoveKey(a) => commands::volume::remove_key(a),
        Command::ChangeKey(a) => commands::volume::change_key(a),
        Command::TestKey(a) => commands::volume::test_key(a),
        Command::Header(c) => commands::volume::header(c),
        Command::Repair(a) => commands::volume::repair(a),
        Command::Erase(a) => commands::volume::erase(a),
        Command::Reencrypt(a) => commands::reencrypt::reencrypt(a),
        Command::Convert(a) => commands::convert::run(a),
        Command::Resize(a) => commands::geli::resize(a),
        Command::Geli(a) => commands::geli_front::run(a),
        Command::Read(a) => commands::volume_io::read(a),
        Command::Write(a) => commands::volume_io::write(a),
        Command::Serve(a) => commands::serve::run(a),
        Command::Mount(a) => fuse::mount::run(a),
        Command::Umount(a) => fuse::mount::umount(a),
        Command::Open { open, named } => commands::open::open(open, named),
        Command::Close(a) => commands::open::close(a),
        Command::Status(a) => commands::open::status(a),
        Command::Gateway(a) => commands::gateway::command(a),
        Command::Completions(a) => commands::manuals::completions(a),
        Command::Man(a) => commands::manuals::man(a),
    };
    host::memory::warn_if_key_memory_not_locked();
    if let Err(f) = result {
        eprintln!("sectorcrypt: {}", f.message());
        std::process::exit(f.exit_code());
    }
}
