//! `sectorcrypt`: policy only. Parses the command line, runs one command, maps failures to
//! exit codes: 0 success, 1 a runtime failure (I/O), 2 bad usage or bad input, 3 a wrong
//! passphrase.
#![forbid(unsafe_code)]
// The doc comments of the argument structs are clap's --help text, written for a
// terminal (`[::1]:PORT`, `<prov>`), not rustdoc markup.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod args;
mod args_bitlk;
mod args_geli;
mod args_manuals;
mod args_open;
mod args_tls;
mod busy;
mod ciphers;
mod cmd_backends;
mod cmd_bench;
mod cmd_cipher;
mod cmd_demo;
mod cmd_geli;
mod cmd_geli_front;
mod cmd_manuals;
mod cmd_mount;
mod cmd_open;
mod cmd_serve;
mod cmd_volume;
mod cmd_volume_io;
mod escape;
mod fuse_workers;
mod image;
mod json_report;
mod listed;
mod locator;
mod memory;
mod open_state;
mod output;
mod passphrase;
mod process;
mod progress;
mod volume_export;

// How a command fails, shared with the library target (values.rs).
use sectorcrypt_cli::failure;

use args::{Cli, Command};
use clap::Parser;

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
    image::configure(cli.remote.options());
    progress::configure(cli.progress);
    let result = match cli.command {
        Command::Cipher(a) => cmd_cipher::run(a),
        Command::Backends(a) => cmd_backends::run(a.json),
        Command::Bench(a) => cmd_bench::run(a),
        Command::Demo => cmd_demo::run(),
        Command::Format(a) => cmd_volume::format(a),
        Command::Dump(a) => cmd_volume::dump(a),
        Command::AddKey(a) => cmd_volume::add_key(a),
        Command::RemoveKey(a) => cmd_volume::remove_key(a),
        Command::ChangeKey(a) => cmd_volume::change_key(a),
        Command::TestKey(a) => cmd_volume::test_key(a),
        Command::Header(c) => cmd_volume::header(c),
        Command::Repair(a) => cmd_volume::repair(a),
        Command::Erase(a) => cmd_volume::erase(a),
        Command::Resize(a) => cmd_geli::resize(a),
        Command::Geli(a) => cmd_geli_front::run(a),
        Command::Read(a) => cmd_volume_io::read(a),
        Command::Write(a) => cmd_volume_io::write(a),
        Command::Serve(a) => cmd_serve::run(a),
        Command::Mount(a) => cmd_mount::run(a),
        Command::Umount(a) => cmd_mount::umount(a),
        Command::Open { open, named } => cmd_open::open(open, named),
        Command::Close(a) => cmd_open::close(a),
        Command::Status(a) => cmd_open::status(a),
        Command::Completions(a) => cmd_manuals::completions(a),
        Command::Man(a) => cmd_manuals::man(a),
    };
    memory::warn_if_key_memory_not_locked();
    if let Err(f) = result {
        eprintln!("sectorcrypt: {}", f.message());
        std::process::exit(f.exit_code());
    }
}
