//! `sectorcrypt completions SHELL` and `sectorcrypt man --dir DIR`: the shell completion
//! script (clap_complete) and one manual page per command (clap_mangen), both generated
//! from the clap definitions of [`crate::flags`], so that they name exactly the commands
//! and flags the parser accepts. Hidden commands and flags stay out of both, as they stay
//! out of `--help`; the `help` pseudo-command gets no page.

use crate::failure::Failure;
use crate::flags::manuals::{CompletionsArgs, ManArgs, Shell};
use crate::flags::{Cli, EXIT_CODES};
use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Prints the completion script of `a.shell` to standard output.
pub fn completions(a: CompletionsArgs) -> Result<(), Failure> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // Generated into memory first: the generator panics on a failed write, and a closed
    // standard output is a failure to report like any other.
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut shown(&Cli::command()),
        "sectorcrypt",
        &mut script,
    );
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .map_err(|e| Failure::runtime(format!("standard output: {e}")))
}

/// A copy of the (unbuilt) command `cmd` without its hidden arguments and subcommands, at
/// every depth: clap_complete's generators offer hidden items too. The copy keeps what
/// the generators read: names, visible aliases, help texts, version, arguments and groups.
fn shown(cmd: &clap::Command) -> clap::Command {
    let visible = |a: &&clap::Arg| !a.is_hide_set();
    let kept: Vec<&clap::Id> = cmd
        .get_arguments()
        .filter(visible)
        .map(|a| a.get_id())
        .collect();
    let groups = cmd.get_groups().map(|g| {
        clap::ArgGroup::new(g.get_id().clone())
            .args(g.get_args().filter(|id| kept.contains(id)).cloned())
            .multiple(g.clone().is_multiple())
            .required(g.is_required_set())
    });
    let mut copy = clap::Command::new(cmd.get_name().to_string())
        .visible_aliases(cmd.get_visible_aliases().map(str::to_string))
        .subcommand_required(cmd.is_subcommand_required_set())
        .args(cmd.get_arguments().filter(visible).cloned())
        .groups(groups)
        .subcommands(
            cmd.get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(shown),
        );
    if let Some(about) = cmd.get_about() {
        copy = copy.about(about.clone());
    }
    if let Some(about) = cmd.get_long_about() {
        copy = copy.long_about(about.clone());
    }
    // With them, `--help` is described as "Print help (see more with '--help')".
    if let Some(after) = cmd.get_after_help() {
        copy = copy.after_help(after.clone());
    }
    if let Some(after) = cmd.get_after_long_help() {
        copy = copy.after_long_help(after.clone());
    }
    if let Some(version) = cmd.get_version() {
        copy = copy.version(version.to_string());
    }
    copy
}

/// Writes the page of `sectorcrypt` and of each of its commands, at every depth, into
/// `a.dir` (created when missing), then prints each path written.
pub fn man(a: ManArgs) -> Result<(), Failure> {
    std::fs::create_dir_all(&a.dir).map_err(|e| Failure::cannot_open(&a.dir, e))?;
    if !a.dir.is_dir() {
        return Err(Failure::usage(format!(
            "{}: not a directory",
            a.dir.display()
        )));
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // NAME reads "sectorcrypt - a userspace ...", not "sectorcrypt - sectorcrypt: a ...".
    let about = cmd.get_about().map(|a| a.to_string());
    if let Some(short) = about
        .as_deref()
        .and_then(|a| a.strip_prefix("sectorcrypt: "))
    {
        cmd = cmd.about(short.to_string());
    }
    cmd.build();
    let source = format!("sectorcrypt {}", env!("CARGO_PKG_VERSION"));
    let mut written = Vec::new();
    write_pages(&cmd, None, &a.dir, &source, &mut written)?;
    let mut out = std::io::stdout().lock();
    written
        .iter()
        .try_for_each(|p| writeln!(out, "{}", p.display()))
        .and_then(|()| out.flush())
        .map_err(|e| Failure::runtime(format!("standard output: {e}")))
}

/// Writes the page of `cmd`, then those of its visible subcommands, and adds their paths
/// to `written` (`cmd` is built: each subcommand's display name is its whole path,
/// `sectorcrypt-geli-attach`). `parent` is the page of the command above, if any.
fn write_pages(
    cmd: &clap::Command,
    parent: Option<&str>,
    dir: &Path,
    source: &str,
    written: &mut Vec<PathBuf>,
) -> Result<(), Failure> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let page = clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .source(source)
        .manual("sectorcrypt manual");
    let path = dir.join(page.get_filename());
    let mut roff = Vec::new();
    render(cmd, parent, &page, &mut roff)
        .and_then(|()| std::fs::write(&path, roff))
        .map_err(|e| Failure::runtime(format!("{}: {e}", path.display())))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, Some(name), dir, source, written)?;
    }
    Ok(())
}

/// One page: clap_mangen's sections, with the command's long help (its examples and
/// details, as `--help` shows them after the options) in DESCRIPTION, then EXIT STATUS
/// and SEE ALSO.
fn render(
    cmd: &clap::Command,
    parent: Option<&str>,
    page: &clap_mangen::Man,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    page.render_title(w)?;
    page.render_name_section(w)?;
    page.render_synopsis_section(w)?;
    page.render_description_section(w)?;
    let mut more = Roff::new();
    let details = cmd.get_after_long_help().or_else(|| cmd.get_after_help());
    if let Some(details) = details.map(|d| d.to_string()) {
        if details != EXIT_CODES {
            help_text(&mut more, &details);
        }
    }
    more.to_writer(w)?;
    page.render_options_section(w)?;
    if cmd.has_subcommands() {
        page.render_subcommands_section(w)?;
    }
    if cmd.get_version().is_some() {
        page.render_version_section(w)?;
    }
    let mut end = Roff::new();
    end.control("SH", ["EXIT STATUS"]).text([roman(EXIT_CODES)]);
    end.control("SH", ["SEE ALSO"]);
    match parent {
        Some(parent) => end.text([bold(parent), roman("(1)")]),
        None => end.text([
            bold("cryptsetup"),
            roman("(8), "),
            bold("geli"),
            roman("(8)"),
        ]),
    };
    end.to_writer(w)
}

/// Help text as roff: lines that start in the first column are filled into paragraphs,
/// indented lines (examples, continued synopses) are kept as they are.
fn help_text(roff: &mut Roff, text: &str) {
    let mut verbatim = false;
    let mut paragraph = false;
    let mut last = "";
    for line in text.lines() {
        let indented = line.starts_with(' ');
        if line.trim().is_empty() {
            paragraph = false;
            continue;
        }
        if indented && !verbatim {
            // After "Examples:" the block follows on the next line, else after a gap.
            if !(paragraph && last.ends_with(':')) {
                roff.control("PP", []);
            }
            roff.control("nf", []).control("RS", ["2"]);
            verbatim = true;
        } else if !indented && verbatim {
            roff.control("RE", []).control("fi", []);
            verbatim = false;
            paragraph = false;
        }
        if !indented && !paragraph {
            roff.control("PP", []);
            paragraph = true;
        }
        roff.text([roman(line.strip_prefix("  ").unwrap_or(line))]);
        last = line;
    }
    if verbatim {
        roff.control("RE", []).control("fi", []);
    }
}
