//! The command line of `completions` and `man`: shell completion scripts and manual pages,
//! both made from the clap definitions themselves.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

pub const COMPLETIONS_HELP: &str = "\
Examples:
  sectorcrypt completions bash > /etc/bash_completion.d/sectorcrypt
  sectorcrypt completions zsh > \"${fpath[1]}/_sectorcrypt\"
  sectorcrypt completions fish > ~/.config/fish/completions/sectorcrypt.fish
  source <(sectorcrypt completions bash)    # this bash session only

The script completes every command, subcommand and flag, and the values of flags that
take one of a list (--cipher, --type, ...).";

pub const MAN_HELP: &str = "\
One page per command: sectorcrypt.1, sectorcrypt-format.1, sectorcrypt-geli.1,
sectorcrypt-geli-attach.1, ... (a subcommand's page is named after its whole path). DIR is
created when missing; a page already there is replaced. Each path written is printed.
Examples:
  sectorcrypt man --dir /usr/local/share/man/man1 && man sectorcrypt-open
  sectorcrypt man --dir /tmp/man1 && man -l /tmp/man1/sectorcrypt-geli-attach.1";

/// The shells `completions` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `sectorcrypt completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// `sectorcrypt man --dir DIR`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The folder the pages are written to (man1 of a manual path, for `man NAME`).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}
