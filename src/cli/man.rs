//! `paybatch man`: the manual page, generated from the same definitions as the command line
//! itself: `paybatch.1` on stdout, or one page per command written into a directory.
//!
//! The texts the help and the manual share are here, once: the examples of every command (the
//! end of its `--help`, the EXAMPLES section of its page), and the exit codes, environment
//! variables and files of paybatch (the end of `paybatch --help`; EXIT STATUS, ENVIRONMENT and
//! FILES of `paybatch.1`).

use std::io::IsTerminal;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory};

use crate::exit::Exit;

use super::CliError;

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Print the manual page paybatch.1 on stdout (roff), generated from \
paybatch's own command-line definitions; with --out-dir, write paybatch.1 and one page per \
command (paybatch-run.1, paybatch-validate.1, ...) into that directory.";

/// The exit codes of paybatch: (code, meaning).
pub const EXIT_CODES: [(&str, &str); 10] = [
    (
        "0",
        "ok: every row completed, or the command did what it was asked",
    ),
    ("1", "something unexpected"),
    (
        "2",
        "usage or configuration: a bad flag or setting, no key, no ledger to read",
    ),
    (
        "3",
        "invalid, balance too low or not the approved digest: nothing was submitted (close: orders of the month not final)",
    ),
    (
        "4",
        "finished, with failed, rejected, invalid or mismatched rows, or rows held",
    ),
    ("5", "incomplete: run the same command again to resume"),
    ("6", "the ledger is in use by another paybatch"),
    (
        "7",
        "payouts: links expire within --expiring-within days (for a cron job to alert on)",
    ),
    (
        "130",
        "Ctrl-C (SIGINT): what was sent is recorded; run the same command again to resume",
    ),
    (
        "143",
        "SIGTERM: what was sent is recorded; run the same command again to resume",
    ),
];

/// The environment variables paybatch reads: (name, meaning).
pub const ENVIRONMENT: [(&str, &str); 8] = [
    (
        "PAYBATCH_ENV",
        "sim (the embedded simulator, default), playground or production; overrides `env` of the settings file, a flag overrides it",
    ),
    (
        "PAYBATCH_BASE_URL",
        "another service address (e.g. a standalone simulator); overrides `base_url`",
    ),
    (
        "PAYBATCH_API_KEY",
        "the API key, when no key file is given (never a flag, never the settings file)",
    ),
    (
        "PAYBATCH_API_KEY_FILE",
        "a file of mode 0600 holding the API key; overrides `api_key_file`",
    ),
    ("PAYBATCH_LEDGER", "the ledger database; overrides `ledger`"),
    (
        "PAYBATCH_CONFIG",
        "the settings file (default: ./paybatch.toml when there is one)",
    ),
    ("NO_COLOR", "when set and not empty, no colour"),
    ("RUST_LOG", "log filter, overrides -v"),
];

/// The files paybatch reads and writes: (file, what it is).
pub const FILES: [(&str, &str); 7] = [
    (
        "./paybatch.toml",
        "settings: env, base_url, api_key_file, ledger (`paybatch config` shows the effective ones)",
    ),
    (
        "./paybatch.db",
        "the ledger (--ledger): every step of every batch, recorded before it happens; mode 0600; read-only commands never create it",
    ),
    (
        "./paybatch.db.lock",
        "held while a command writes the ledger (exit 6 when another paybatch holds it)",
    ),
    (
        "./paybatch.sim.db",
        "the embedded simulator's state, beside the ledger",
    ),
    (
        "NAME.result.csv",
        "the result file beside the input file (NAME.SIMULATED.result.csv on the simulator): one line per row, with payout links; mode 0600",
    ),
    (
        "REPORT.html",
        "the HTML report (`paybatch report --html`): no payout links; mode 0600",
    ),
    (
        "API key file",
        "mode 0600 or it is refused (--api-key-file, PAYBATCH_API_KEY_FILE, api_key_file)",
    ),
];

/// The examples of each command (by its path, `catalog list`; `` for paybatch itself):
/// (what it does, the command).
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            (
                "Rehearse a batch on the embedded simulator (no real money moves)",
                "paybatch run recipients.csv",
            ),
            (
                "Check the file against production and show its plan digest",
                "paybatch validate recipients.csv --env production",
            ),
            (
                "Where the batches stand, and what to do next",
                "paybatch status",
            ),
            (
                "The HTML report of a batch, for the finance lead",
                "paybatch report --batch recipients --html recipients.html",
            ),
        ],
    ),
    (
        "run",
        &[
            (
                "Rehearse on the embedded simulator; run it again to resume",
                "paybatch run recipients.csv",
            ),
            (
                "Pay on production exactly the plan that was approved (`paybatch validate` shows its digest)",
                "paybatch run recipients.csv --env production --expect-digest sha256:DIGEST --yes",
            ),
            (
                "Pay the valid rows, list the others in the result file",
                "paybatch run recipients.csv --skip-invalid",
            ),
            (
                "From a script: one JSON object on stdout (rows per state, totals, exit code)",
                "paybatch --quiet run recipients.csv --json > run.json",
            ),
        ],
    ),
    (
        "validate",
        &[
            (
                "Check a file as `run` would, with its totals and plan digest",
                "paybatch validate recipients.csv",
            ),
            (
                "The same for production, as JSON",
                "paybatch validate recipients.csv --env production --json",
            ),
        ],
    ),
    (
        "approve",
        &[
            (
                "Approve the plan `validate` showed (recorded with your user name and host)",
                "paybatch approve recipients.csv --expect-digest sha256:DIGEST",
            ),
            (
                "The same for production, for a run that requires a second person",
                "paybatch approve recipients.csv --env production --expect-digest sha256:DIGEST",
            ),
        ],
    ),
    (
        "close",
        &[
            (
                "Close November once its orders are final and its journal is exported",
                "paybatch close 2026-11",
            ),
            (
                "The same for another ledger, as JSON",
                "paybatch close 2026-11 --ledger /srv/paybatch/paybatch.db --json",
            ),
        ],
    ),
    (
        "status",
        &[
            ("Every batch of the ledger", "paybatch status"),
            (
                "One batch in detail, and what to do next",
                "paybatch status --batch recipients",
            ),
            (
                "Another ledger, as JSON",
                "paybatch status --ledger /srv/paybatch/paybatch.db --json",
            ),
        ],
    ),
    (
        "report",
        &[
            (
                "The result file again, beside the input file",
                "paybatch report --batch recipients",
            ),
            (
                "The result CSV on stdout",
                "paybatch report --batch recipients --out - | wc -l",
            ),
            (
                "The HTML report, broken down per department",
                "paybatch report --batch recipients --html recipients.html --group-by department",
            ),
        ],
    ),
    (
        "history",
        &[
            (
                "Did we pay this person already? Every payout to the address, in any batch",
                "paybatch history --email jane.doe@example.com",
            ),
            (
                "Every payout under one reference, as JSON",
                "paybatch history --reference EMP-1042-2026-11 --json",
            ),
            (
                "In another ledger",
                "paybatch history --email jane.doe@example.com --ledger /srv/paybatch/paybatch.db",
            ),
        ],
    ),
    (
        "retry",
        &[
            (
                "Make every FAILED and REJECTED row eligible again, then run",
                "paybatch retry --batch recipients && paybatch run recipients.csv",
            ),
            (
                "Only one row",
                "paybatch retry --batch recipients --reference EMP-1042-2026-11",
            ),
            (
                "The references made payable again, as JSON",
                "paybatch retry --batch recipients --json",
            ),
            (
                "Reissue the rows whose payout link expired, then pay them again",
                "paybatch retry --batch recipients --expired && paybatch run recipients.csv",
            ),
        ],
    ),
    (
        "payouts",
        &[
            (
                "Who has not claimed yet: rows per link status, value outstanding, links expiring soon",
                "paybatch payouts --batch recipients",
            ),
            (
                "The rows to remind, as CSV (mode 0600), with their links",
                "paybatch payouts --batch recipients --list expiring --out remind.csv --with-links",
            ),
            (
                "Every batch, daily from cron: exit 7 when links expire within 14 days",
                "paybatch payouts --all --quiet --json",
            ),
            (
                "The expired ones, then reissue them",
                "paybatch payouts --batch recipients --list expired && paybatch retry --batch recipients --expired",
            ),
        ],
    ),
    (
        "reconcile",
        &[
            (
                "What would change, changing nothing",
                "paybatch reconcile --batch recipients --dry-run",
            ),
            (
                "The ledger was lost: rebuild the batch from its file and the service",
                "paybatch reconcile --batch recipients --rebuild recipients.csv",
            ),
        ],
    ),
    (
        "balance",
        &[
            (
                "Every balance of the account",
                "paybatch balance --env playground",
            ),
            (
                "One currency, as JSON",
                "paybatch balance --currency USD --json",
            ),
        ],
    ),
    (
        "ping",
        &[(
            "Check the key and the environment",
            "paybatch ping --env playground --api-key-file ~/.paybatch/playground.key",
        )],
    ),
    (
        "catalog",
        &[
            ("Refresh the cached catalog", "paybatch catalog sync"),
            (
                "Orderable gift cards redeemable in Germany",
                "paybatch catalog list --country DE --type gift_card --orderable",
            ),
        ],
    ),
    (
        "catalog sync",
        &[(
            "Fetch the whole catalog and cache it in the ledger",
            "paybatch catalog sync --env playground",
        )],
    ),
    (
        "catalog list",
        &[
            (
                "Orderable gift cards redeemable in Germany",
                "paybatch catalog list --country DE --type gift_card --orderable",
            ),
            ("Every product, as JSON", "paybatch catalog list --json"),
        ],
    ),
    (
        "config",
        &[
            (
                "The effective settings and where each came from",
                "paybatch config",
            ),
            (
                "With another settings file, as JSON",
                "paybatch --config /srv/paybatch/paybatch.toml config --json",
            ),
        ],
    ),
    (
        "completions",
        &[
            (
                "Bash",
                "paybatch completions bash > /etc/bash_completion.d/paybatch",
            ),
            (
                "Zsh",
                "paybatch completions zsh > \"${fpath[1]}/_paybatch\"",
            ),
            (
                "Fish",
                "paybatch completions fish > ~/.config/fish/completions/paybatch.fish",
            ),
        ],
    ),
    (
        "man",
        &[
            ("Read the manual", "paybatch man | man -l -"),
            (
                "Install every page",
                "paybatch man --out-dir /usr/local/share/man/man1",
            ),
        ],
    ),
    (
        "sim",
        &[
            (
                "A standalone simulator for another program to talk to",
                "paybatch sim serve --addr 127.0.0.1:8080",
            ),
            (
                "A month after a rehearsal: who has claimed, who has not",
                "paybatch sim clock --advance 30d && paybatch sim payouts",
            ),
        ],
    ),
    (
        "sim clock",
        &[
            (
                "The simulated clock of the embedded simulator beside paybatch.db",
                "paybatch sim clock",
            ),
            (
                "Let a month pass for the payout links of a rehearsal",
                "paybatch sim clock --advance 30d --ledger paybatch.db",
            ),
        ],
    ),
    (
        "sim account",
        &[
            (
                "Links that expire 14 days after payment, set up before the rehearsal",
                "paybatch sim account --link-expiry-days 14",
            ),
            (
                "Links that never expire, half of them claimed",
                "paybatch sim account --link-expiry-days 0 --claim-share 0.5",
            ),
        ],
    ),
    (
        "sim payouts",
        &[(
            "The simulator's own count of payout links by status, as JSON",
            "paybatch sim payouts --ledger paybatch.db --json",
        )],
    ),
    (
        "sim serve",
        &[
            (
                "A standalone simulator on a fixed port, its state kept in a file",
                "paybatch sim serve --addr 127.0.0.1:8080 --state sim.db",
            ),
            (
                "One order in ten fails",
                "paybatch sim serve --failure-rate 0.1",
            ),
        ],
    ),
];

fn examples_of(path: &str) -> &'static [(&'static str, &'static str)] {
    EXAMPLES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, e)| *e)
        .unwrap_or_default()
}

/// The Examples section that ends the `--help` of the command at `path` (`catalog list`).
pub fn examples_help(path: &str) -> String {
    let mut text = String::from("Examples:");
    for (what, command) in examples_of(path) {
        text.push_str(&format!("\n  # {what}\n  {command}"));
    }
    text
}

/// The end of `paybatch --help`: settings, exit codes, examples.
pub fn after_long_help() -> String {
    let mut text = String::from(super::AFTER_LONG_HELP);
    text.push_str("\n\nExit codes:");
    for (code, meaning) in EXIT_CODES {
        text.push_str(&format!("\n  {code:>3}  {meaning}"));
    }
    text.push_str("\n\n");
    text.push_str(&examples_help(""));
    text
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page into this directory instead of printing paybatch.1.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn execute(args: ManArgs) -> Result<Exit, CliError> {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let result = match &args.out_dir {
        None if io::stdout().is_terminal() => match through_pager(&cmd) {
            Some(shown) => shown,
            None => render(&cmd, "", &mut io::stdout().lock()),
        },
        None => render(&cmd, "", &mut io::stdout().lock()),
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| write_pages(&cmd, "", dir))
            .map(|()| eprintln!("manual pages written to {}", dir.display())),
    };
    // A reader that went away (`paybatch man | head`) is not an error.
    let result = result.or_else(|e| match e.kind() {
        io::ErrorKind::BrokenPipe if args.out_dir.is_none() => Ok(()),
        _ => Err(e),
    });
    result.map_err(|e| {
        CliError::new(
            Exit::Unexpected,
            format!("cannot write the manual page: {e}"),
            args.out_dir
                .as_ref()
                .map(|_| "check that the directory is writable"),
        )
    })?;
    Ok(Exit::Ok)
}

/// On a terminal the page is shown as a manual page is, through `man -l -` (which formats it
/// and pages it); `None` when `man` cannot be started (the roff is then printed as it is).
fn through_pager(cmd: &clap::Command) -> Option<io::Result<()>> {
    let mut page = Vec::new();
    if let Err(e) = render(cmd, "", &mut page) {
        return Some(Err(e));
    }
    let mut man = std::process::Command::new("man")
        .args(["-l", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let written = man
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(&page))
        .unwrap_or(Ok(()));
    let waited = man.wait();
    Some(match (written, waited) {
        // The reader quit the pager before the page was all written: not an error.
        (Err(e), _) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(_)) => Ok(()),
    })
}

/// Writes the page of `cmd` (at `path`) and of each of its commands into `dir`.
fn write_pages(cmd: &clap::Command, path: &str, dir: &Path) -> io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_path = format!("{path} {}", sub.get_name()).trim().to_string();
        write_pages(sub, &sub_path, dir)?;
    }
    let name = clap_mangen::Man::new(cmd.clone()).get_filename();
    let mut file = io::BufWriter::new(std::fs::File::create(dir.join(name))?);
    render(cmd, path, &mut file)?;
    file.flush()
}

/// The page of `cmd` (at `path`): clap_mangen's sections, then EXIT STATUS, ENVIRONMENT and
/// FILES (on paybatch.1) and EXAMPLES in place of the help's free text.
fn render(cmd: &clap::Command, path: &str, w: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    if path.is_empty() {
        section(w, "EXIT STATUS", None, &EXIT_CODES)?;
        section(w, "ENVIRONMENT", Some(super::AFTER_LONG_HELP), &ENVIRONMENT)?;
        section(w, "FILES", None, &FILES)?;
    }
    let examples = examples_of(path);
    if !examples.is_empty() {
        w.write_all(b".SH EXAMPLES\n")?;
        for (what, command) in examples {
            paragraph(w, what)?;
            writeln!(w, ".PP\n.RS 4\n.nf\n{}\n.fi\n.RE", roff_text(command))?;
        }
    }
    if cmd.get_version().is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}

/// A section of tagged paragraphs (the tag in bold, then its text), after `intro`.
fn section(
    w: &mut dyn Write,
    title: &str,
    intro: Option<&str>,
    items: &[(&str, &str)],
) -> io::Result<()> {
    writeln!(w, ".SH {title}")?;
    if let Some(text) = intro {
        paragraph(w, text)?;
    }
    for (tag, text) in items {
        writeln!(w, ".TP\n\\fB{}\\fR\n{}", roff_text(tag), roff_text(text))?;
    }
    Ok(())
}

fn paragraph(w: &mut dyn Write, text: &str) -> io::Result<()> {
    writeln!(w, ".PP\n{}", roff_text(text))
}

/// `text` as roff input: backslashes escaped, hyphens kept as hyphens (so that options can be
/// copied), and no line starting with a control character.
fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e")
        .replace('-', "\\-")
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_text_cannot_start_a_request() {
        assert_eq!(roff_text(".SH x\n'y"), "\\&.SH x\n\\&'y");
        assert_eq!(roff_text("--out -"), "\\-\\-out \\-");
        assert_eq!(roff_text("a\\b"), "a\\eb");
    }

    #[test]
    fn every_command_has_examples() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for sub in cmd.get_subcommands() {
                let sub_path = format!("{path} {}", sub.get_name()).trim().to_string();
                if sub.get_name() != "help" && examples_of(&sub_path).is_empty() {
                    missing.push(sub_path.clone());
                }
                walk(sub, &sub_path, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::super::Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "{missing:?}");
    }
}
