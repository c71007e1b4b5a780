//! `sectorcrypt completions SHELL` and `sectorcrypt man --dir DIR`: the completion scripts
//! load in the real shells and complete commands and flags (bash, fish) or at least parse
//! (zsh); the man pages, one per command, render through groff without a warning; hidden
//! flags stay out of both; and every command and flag README.md shows is documented in the
//! page of its command. The commands expected are the parser's own, read from `--help`.

mod support;

use sectorcrypt_testkit::{have, require, run, run_stdout};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{code, ok, s, sc};

/// The subcommands `sectorcrypt PATH... --help` lists (`help` included), in order.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let help = ok(sc(&args, b""));
    let mut lines = help.lines().skip_while(|l| *l != "Commands:").skip(1);
    let mut names = Vec::new();
    for l in lines.by_ref().take_while(|l| !l.trim().is_empty()) {
        // A command's line is indented by two spaces; its description may wrap onto lines
        // indented further.
        if l.starts_with("  ") && !l.starts_with("   ") {
            names.push(l.split_whitespace().next().unwrap().to_string());
        }
    }
    names
}

/// Every command path below the top (`["geli", "attach"]`, ...) but `help`, depth first.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        for name in subcommands(&refs) {
            if name == "help" {
                continue;
            }
            path.push(name);
            out.push(path.clone());
            walk(path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&mut Vec::new(), &mut out);
    out
}

/// The page name of a command path: `sectorcrypt-geli-attach`.
fn page_name(path: &[String]) -> String {
    std::iter::once("sectorcrypt")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-")
}

/// `sectorcrypt completions SHELL`, checked to succeed and to be a script of some length.
fn completion_script(shell: &str) -> String {
    let script = ok(sc(&["completions", shell], b""));
    assert!(script.len() > 1000, "{shell}: a short script:\n{script}");
    script
}

/// Writes `text` to a new file `name` in `dir`.
fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// What bash's programmable completion offers for `words` (the last one being completed):
/// the script is sourced, the function `complete -p sectorcrypt` names is called as
/// readline would call it.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let prog = format!(
        r#"set -e
source '{script}'
spec=$(complete -p sectorcrypt)
fn=$(sed -n 's/.*-F \([^ ]*\) .*/\1/p' <<<"$spec")
[ -n "$fn" ] || {{ echo "no completion function in: $spec" >&2; exit 1; }}
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE='{line}'
COMP_POINT=${{#COMP_LINE}}
COMP_TYPE=9
"$fn" sectorcrypt "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        script = s(script),
        words = quoted.join(" "),
    );
    run_stdout(Command::new("bash").args(["--norc", "--noprofile", "-c", &prog]))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_loads_and_completes_commands_and_flags() {
    require!("bash");
    let dir = tempfile::tempdir().unwrap();
    let script = file(dir.path(), "sectorcrypt.bash", &completion_script("bash"));

    let top = bash_complete(&script, &["sectorcrypt", ""]);
    for name in subcommands(&[]) {
        assert!(
            top.contains(&name),
            "`sectorcrypt <TAB>` lacks {name}: {top:?}"
        );
    }
    assert_eq!(bash_complete(&script, &["sectorcrypt", "ge"]), ["geli"]);
    assert_eq!(
        bash_complete(&script, &["sectorcrypt", "geli", "att"]),
        ["attach"]
    );
    let open = bash_complete(&script, &["sectorcrypt", "open", "disk.img", "vault", "--"]);
    for flag in [
        "--loop",
        "--mount",
        "--key-file",
        "--header",
        "--connections",
    ] {
        assert!(
            open.contains(&flag.to_string()),
            "open lacks {flag}: {open:?}"
        );
    }
    // `open --foreground` is the background process's own flag: hidden.
    assert!(!open.contains(&"--foreground".to_string()), "{open:?}");
    let mount = bash_complete(&script, &["sectorcrypt", "mount", "--fo"]);
    assert_eq!(mount, ["--foreground"]);
    // A flag's values, where the parser has a list of them.
    let types = bash_complete(&script, &["sectorcrypt", "format", "d.img", "--type", ""]);
    assert_eq!(types, ["luks2", "luks1", "geli", "veracrypt"]);
}

#[test]
fn zsh_and_fish_scripts_parse_and_name_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut names = subcommands(&[]);
    names.extend(subcommands(&["geli"]));
    names.extend(subcommands(&["header"]));
    for shell in ["zsh", "fish"] {
        let script = completion_script(shell);
        for name in &names {
            let word =
                |w: &str| w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-') == name;
            assert!(
                script
                    .split(|c: char| c.is_whitespace() || c == ':' || c == '\'')
                    .any(word),
                "the {shell} script never names {name}"
            );
        }
        let path = file(dir.path(), &format!("sectorcrypt.{shell}"), &script);
        if !have(shell) {
            sectorcrypt_testkit::skipped!(
                "skipped loading the {shell} script: {shell} is not installed"
            );
            continue;
        }
        let check = if shell == "zsh" { "-n" } else { "--no-execute" };
        run(Command::new(shell).args([check, s(&path)]));
    }
    if have("fish") {
        // fish's own completion engine on the script: `complete -C` prints the candidates.
        let path = dir.path().join("sectorcrypt.fish");
        let offered = |line: &str| {
            let prog = format!("source '{}'; complete -C '{line}'", s(&path));
            run_stdout(Command::new("fish").args(["--no-config", "-c", &prog]))
        };
        let top = offered("sectorcrypt ge");
        assert!(top.lines().any(|l| l.starts_with("geli\t")), "{top}");
        let open = offered("sectorcrypt open disk.img vault --");
        assert!(open.lines().any(|l| l.starts_with("--loop\t")), "{open}");
        assert!(!open.contains("--foreground"), "{open}");
    }
}

#[test]
fn completions_refuse_an_unknown_shell() {
    let o = sc(&["completions", "tcsh"], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("invalid value 'tcsh'") && err.contains("bash, zsh, fish"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// `sectorcrypt man --dir DIR` into a new folder, then each page rendered by groff as a
/// person reads it (plain text, lines wide enough not to wrap an option): page name
/// (`sectorcrypt-geli-attach`) to text. Warnings fail the test.
fn rendered_pages(dir: &Path) -> BTreeMap<String, String> {
    let out = dir.join("man1");
    let listed = ok(sc(&["man", "--dir", s(&out)], b""));
    let mut pages = BTreeMap::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        let stem = name
            .strip_suffix(".1")
            .unwrap_or_else(|| panic!("not a page: {name}"));
        assert!(
            listed.lines().any(|l| l == s(&p)),
            "{name} written, not listed: {listed}"
        );
        let o = run(Command::new("groff").args([
            "-man",
            "-Tutf8",
            "-ww",
            "-rLL=250n",
            "-P-c",
            "-P-b",
            "-P-o",
            "-P-u",
            s(&p),
        ]));
        let warnings = String::from_utf8_lossy(&o.stderr);
        assert!(warnings.is_empty(), "{name}: groff warns:\n{warnings}");
        let text = String::from_utf8(o.stdout).unwrap();
        // groff draws `\-` as a minus sign and may hyphenate with U+2010.
        let text = text.replace(['\u{2212}', '\u{2010}'], "-");
        pages.insert(stem.to_string(), text);
    }
    pages
}

/// The text of a page's OPTIONS section.
fn options_section(page: &str) -> &str {
    let start = page.find("\nOPTIONS\n").map_or(page.len(), |i| i + 9);
    let rest = &page[start..];
    // The next section heading: a line that starts in the first column.
    let end = rest
        .match_indices('\n')
        .find(|(i, _)| rest[i + 1..].starts_with(|c: char| c.is_ascii_uppercase()))
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

/// Whether `flag` occurs in `text` as a whole token (not as part of a longer flag).
fn has_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + flag.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
        !part(before) && !part(after)
    })
}

#[test]
fn man_pages_one_per_command_render_without_warnings() {
    require!("groff");
    let dir = tempfile::tempdir().unwrap();
    let pages = rendered_pages(dir.path());
    let mut expected: BTreeSet<String> = command_paths().iter().map(|p| page_name(p)).collect();
    expected.insert("sectorcrypt".into());
    let made: BTreeSet<String> = pages.keys().cloned().collect();
    assert_eq!(made, expected, "pages made vs the parser's commands");
    assert!(made.contains("sectorcrypt-geli-attach") && made.contains("sectorcrypt-man"));

    for (name, text) in &pages {
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{name}:\n{text}"
        );
        assert!(
            text.contains(&format!("{name} - ")),
            "{name}: no NAME line:\n{text}"
        );
    }
    // A subcommand's flags, the global ones and hidden ones where they belong.
    let open = options_section(&pages["sectorcrypt-open"]);
    for flag in [
        "--loop",
        "--mount",
        "--key-file",
        "--connections",
        "--header",
    ] {
        assert!(has_flag(open, flag), "open's OPTIONS lack {flag}:\n{open}");
    }
    assert!(!has_flag(&pages["sectorcrypt-open"], "--foreground"));
    assert!(has_flag(
        options_section(&pages["sectorcrypt-mount"]),
        "--foreground"
    ));
    // The top page names every command and the exit codes.
    for path in command_paths().iter().filter(|p| p.len() == 1) {
        assert!(
            pages["sectorcrypt"].contains(&format!("sectorcrypt-{}(1)", path[0])),
            "sectorcrypt(1) does not refer to {}",
            path[0]
        );
    }
    assert!(pages["sectorcrypt"].contains("3 wrong passphrase"));
}

#[test]
fn man_refuses_a_dir_that_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(dir.path(), "plain", "keep me");
    let o = sc(&["man", "--dir", s(&f)], b"");
    assert_eq!(code(&o), 2, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains(s(&f)));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep me");
}

/// A `sectorcrypt` command line of README.md: the words after `sectorcrypt`, quoted
/// strings replaced by a placeholder, and the line it came from.
struct Invocation {
    words: Vec<String>,
    line: String,
}

/// What README.md says of the command line: the `sectorcrypt ...` invocations of its shell
/// code blocks and inline code, and the long flags it names elsewhere (comments, prose,
/// inline code that is a bare flag). Other languages' blocks and other programs' command
/// lines are not read.
#[derive(Default)]
struct Readme {
    invocations: Vec<Invocation>,
    loose_flags: BTreeSet<String>,
}

/// Long flags (`--name`, up to any `=`) among the words of `text`.
fn long_flags(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| c.is_whitespace() || "[]()`,;|'\"".contains(c))
        .filter(|w| {
            w.strip_prefix("--")
                .is_some_and(|n| n.starts_with(char::is_alphanumeric))
        })
        .map(|w| w.split('=').next().unwrap().to_string())
}

impl Readme {
    /// Reads README.md's `text`; `top_commands` are sectorcrypt's commands.
    fn parse(text: &str, top_commands: &[String]) -> Readme {
        let mut readme = Readme::default();
        // Inside a fence: whether it holds shell lines (no language, sh, bash, console).
        let mut fence: Option<bool> = None;
        let mut pending = String::new();
        for line in text.lines() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                fence = match fence {
                    Some(_) => None,
                    None => Some(["", "sh", "bash", "shell", "console"].contains(&info.trim())),
                };
                continue;
            }
            match fence {
                Some(false) => continue,
                Some(true) => {}
                None => {
                    // Prose: inline code that is a sectorcrypt command line, or bare flags
                    // (`--retry N`); other programs' command lines are theirs.
                    for (i, span) in line.split('`').enumerate() {
                        if i % 2 == 0 || span.starts_with('-') {
                            readme.loose_flags.extend(long_flags(span));
                        } else if span.starts_with("sectorcrypt ") {
                            readme.shell_line(span, top_commands);
                        }
                    }
                    continue;
                }
            }
            // Shell lines continued with a backslash are one command line.
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                continue;
            }
            pending.push_str(line);
            let whole = std::mem::take(&mut pending);
            readme.shell_line(&whole, top_commands);
        }
        readme
    }

    /// One shell line: quoted strings blanked, the comment's flags kept as loose, then
    /// split into simple commands at `;`, `|`, `&&`, `||` and `$(`.
    fn shell_line(&mut self, line: &str, top_commands: &[String]) {
        let mut code = String::new();
        let mut quote = None;
        let mut chars = line.chars().peekable();
        let mut prev = ' ';
        while let Some(c) = chars.next() {
            match quote {
                Some(q) if c == q => {
                    quote = None;
                    code.push_str("QUOTED");
                }
                Some(_) => {}
                None if c == '\'' || c == '"' => quote = Some(c),
                None if c == '#' && prev.is_whitespace() => {
                    let comment: String = chars.by_ref().collect();
                    self.loose_flags.extend(long_flags(&comment));
                }
                None => code.push(c),
            }
            prev = c;
        }
        let code = code
            .replace("&&", ";")
            .replace("||", ";")
            .replace("$(", ";");
        let mut after_sectorcrypt = false;
        for segment in code.split([';', '|']) {
            let mut words: Vec<&str> = segment
                .split_whitespace()
                .map(|w| w.trim_matches(|c| "[]()".contains(c)))
                .filter(|w| !w.is_empty())
                .collect();
            // Variable assignments and `sudo` before the program.
            while words
                .first()
                .is_some_and(|w| w.contains('=') || *w == "sudo")
            {
                words.remove(0);
            }
            let invocation = match words.first() {
                Some(&"sectorcrypt") => Some(words[1..].to_vec()),
                // `sectorcrypt add-key IMG | change-key IMG`: alternatives of one line.
                Some(w) if after_sectorcrypt && top_commands.iter().any(|c| c == w) => Some(words),
                _ => None,
            };
            after_sectorcrypt = invocation.is_some();
            if let Some(words) = invocation.filter(|w| !w.is_empty()) {
                self.invocations.push(Invocation {
                    words: words.iter().map(|w| w.to_string()).collect(),
                    line: line.to_string(),
                });
            }
        }
    }
}

/// Long flags README.md names outside sectorcrypt command lines that are other programs'.
const OTHER_PROGRAMS_FLAGS: &[(&str, &str)] = &[("--features", "cargo build")];

#[test]
fn every_command_and_flag_in_the_readme_is_in_its_man_page() {
    require!("groff");
    let dir = tempfile::tempdir().unwrap();
    let pages = rendered_pages(dir.path());
    let top: Vec<String> = subcommands(&[]);
    let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = Readme::parse(&std::fs::read_to_string(readme_path).unwrap(), &top);
    assert!(
        readme.invocations.len() > 50,
        "README parsed into too few command lines"
    );

    let mut missing = Vec::new();
    let mut checked = 0;
    for inv in &readme.invocations {
        // The command path: the words that name a page, one level after another.
        let mut page = "sectorcrypt".to_string();
        for w in inv.words.iter().take_while(|w| !w.starts_with('-')) {
            let deeper = format!("{page}-{w}");
            if !pages.contains_key(&deeper) {
                break;
            }
            page = deeper;
        }
        let first = &inv.words[0];
        if page == "sectorcrypt" && !first.starts_with('-') {
            missing.push(format!(
                "command `sectorcrypt {first}` has no page ({})",
                inv.line
            ));
            continue;
        }
        let options = options_section(&pages[&page]);
        for w in &inv.words {
            let flag = w.split('=').next().unwrap();
            let is_flag = flag.len() >= 2
                && flag.starts_with('-')
                && !flag[1..].starts_with(|c: char| c.is_ascii_digit());
            if !is_flag {
                continue;
            }
            checked += 1;
            if !has_flag(options, flag) {
                missing.push(format!("{page}(1) lacks {flag} ({})", inv.line.trim()));
            }
        }
    }
    let everything: String = pages.values().map(String::as_str).collect();
    for flag in &readme.loose_flags {
        if OTHER_PROGRAMS_FLAGS.iter().any(|(f, _)| f == flag) {
            continue;
        }
        checked += 1;
        if !has_flag(&everything, flag) {
            missing.push(format!("no page names {flag}, which README.md mentions"));
        }
    }
    assert!(
        missing.is_empty(),
        "README.md vs the man pages:\n{}",
        missing.join("\n")
    );
    assert!(checked > 100, "only {checked} flags checked");
    eprintln!(
        "{} README command lines, {checked} flags, all in the pages",
        readme.invocations.len()
    );
}
