//! Command-line interface: one file per subcommand; each ends in one `execute` function that
//! the dispatcher calls and that returns how the process exits: an [`Exit`] when the command
//! did its work (a run with failed rows did), a [`CliError`] when it could not; `main` prints
//! the error once.
//!
//! Every line printed goes through [`crate::text`]: `outln!` and `errln!` for a line on
//! stdout or stderr (its control characters escaped: a batch name, a cell, an order id or a
//! product name from the service cannot drive the terminal; and what is or looks like an API
//! key hidden: a cell or a reference can hold one), [`print_error`] and [`print_problem`] for
//! messages, [`out_json`] and [`json_text`] for JSON (the same characters written as JSON
//! escapes, the same values hidden).

/// `println!`, the line's control characters escaped and what looks like an API key hidden
/// ([`crate::text::shown`]). Output into
/// a closed pipe (`paybatch status | head -1`) is dropped quietly, never a panic: the command
/// ends as it would have.
macro_rules! outln {
    () => {
        $crate::cli::out_line("")
    };
    ($($arg:tt)*) => {
        $crate::cli::out_line(&$crate::text::shown(&format!($($arg)*)))
    };
}

/// Writes a line on stdout; a reader that went away (a closed pipe) is not an error.
pub fn out_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// Prints `value` as one line of JSON on stdout (`--json`), as [`json_text`] writes it.
pub fn out_json<T: serde::Serialize + ?Sized>(value: &T) {
    match serde_json::to_value(value) {
        Ok(value) => out_line(&json_text(&value, false)),
        Err(e) => print_error(&format!("cannot write the JSON output: {e}"), None),
    }
}

/// A JSON object whose keys are data (row states, currencies), in the order of its entries.
pub struct InOrder<K, V>(pub Vec<(K, V)>);

impl<K: serde::Serialize, V: serde::Serialize> serde::Serialize for InOrder<K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// `value` as JSON text to print: every string in it (keys too) with what is or looks like an
/// API key hidden ([`crate::api::key::conceal`]), and the characters a terminal would obey
/// written as JSON escapes ([`crate::text::json`]): valid JSON, equal in every other value.
pub fn json_text(value: &serde_json::Value, pretty: bool) -> String {
    fn conceal(v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(crate::api::key::conceal(s).into_owned()),
            Value::Array(items) => Value::Array(items.iter().map(conceal).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (crate::api::key::conceal(k).into_owned(), conceal(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let value = conceal(value);
    let text = if pretty {
        serde_json::to_string_pretty(&value)
    } else {
        serde_json::to_string(&value)
    };
    // A `Value` always serialises (its keys are strings).
    let text = text.unwrap_or_else(|_| "null".into());
    crate::text::json(&text).into_owned()
}

/// `eprintln!`, the line's control characters escaped and what looks like an API key hidden
/// ([`crate::text::shown`]).
macro_rules! errln {
    () => {
        eprintln!()
    };
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::text::shown(&format!($($arg)*)))
    };
}

pub mod approve;
pub mod balance;
pub mod catalog;
pub mod close;
pub mod completions;
pub mod config;
pub mod error;
pub mod history;
pub mod man;
pub mod out_format;
pub mod payouts;
pub mod ping;
pub mod plan_args;
pub mod progress;
pub mod reconcile;
pub mod report;
pub mod report_period;
pub mod retry;
pub mod run;
pub mod run_json;
pub mod signals;
pub mod sim;
pub mod status;
pub mod validate;

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::environment::{Environment, UsageError};
use crate::exit::Exit;
use crate::settings::Source;

pub use error::CliError;

#[derive(Debug, Parser)]
#[command(
    name = "paybatch",
    version,
    after_long_help = man::after_long_help(),
    about = "Pay out digital rewards in batches from CSV files, each row exactly once",
    long_about = "Pay out digital rewards (gift cards, subscriptions, payments) in batches from CSV \
files through the payout ordering service. Every step is recorded in a local SQLite ledger before \
it happens, so an interrupted run is resumed by running the same command again, without paying \
anyone twice.\n\nThe default environment is the embedded simulator: nothing real happens until \
you pass --env playground or --env production."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// More detail on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print only errors (cron); a run that does not end well adds its warnings and summary.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Settings file (default: ./paybatch.toml when there is one).
    #[arg(long, global = true, env = "PAYBATCH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where each service setting came from (filled by [`parse`]).
    #[arg(skip)]
    pub provenance: Provenance,
}

/// Where the effective service settings came from.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// The settings file that was read, if any.
    pub file: Option<PathBuf>,
    pub env: Source,
    pub base_url: Source,
    pub api_key_file: Source,
    pub ledger: Source,
    /// `second_person` as the settings file gives it (`None`: not given).
    pub second_person: Option<bool>,
    /// `[accounts]` as the settings file gives it (`None`: not given, the defaults hold).
    pub accounts: Option<crate::settings::Accounts>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a CSV batch, pay every row exactly once, write the result file (resumable).
    #[command(long_about = run::LONG_ABOUT, after_help = man::examples_help("run"))]
    Run(run::RunArgs),
    /// Check a batch as `run` would, show its totals and its plan digest; pay nothing.
    #[command(long_about = validate::LONG_ABOUT, after_help = man::examples_help("validate"))]
    Validate(validate::ValidateArgs),
    /// Record that you approve a batch's plan (the digest `validate` showed): who, when, what.
    #[command(long_about = approve::LONG_ABOUT, after_help = man::examples_help("approve"))]
    Approve(approve::ApproveArgs),
    /// What the ledger says: every batch, or one batch in detail, and what to do next.
    #[command(long_about = status::LONG_ABOUT, after_help = man::examples_help("status"))]
    Status(status::StatusArgs),
    /// Rebuild a batch's result CSV from the ledger; write an HTML report.
    #[command(long_about = report::LONG_ABOUT, after_help = man::examples_help("report"))]
    Report(report::ReportArgs),
    /// Close a month of the books (YYYY-MM): its journal and report stay as they are.
    #[command(long_about = close::LONG_ABOUT, after_help = man::examples_help("close"))]
    Close(close::CloseArgs),
    /// Every payout to one recipient or reference, across all batches: did we pay them already?
    #[command(long_about = history::LONG_ABOUT, after_help = man::examples_help("history"))]
    History(history::HistoryArgs),
    /// Follow each payout link after payment: claimed, cancelled, expired; list, remind, reissue.
    #[command(long_about = payouts::LONG_ABOUT, after_help = man::examples_help("payouts"))]
    Payouts(payouts::PayoutsArgs),
    /// Make FAILED and REJECTED rows of a batch eligible again (new attempt, new key).
    #[command(after_help = man::examples_help("retry"))]
    Retry(retry::RetryArgs),
    /// Compare the ledger with the service's orders and repair it (lost ledger, in-doubt orders).
    #[command(after_help = man::examples_help("reconcile"))]
    Reconcile(reconcile::ReconcileArgs),
    /// The account's balances at the service.
    #[command(long_about = balance::LONG_ABOUT, after_help = man::examples_help("balance"))]
    Balance(balance::BalanceArgs),
    /// Check the API key and the environment (GET /ping).
    #[command(after_help = man::examples_help("ping"))]
    Ping(ping::PingArgs),
    /// The service's catalog: sync the local cache, list products.
    #[command(after_help = man::examples_help("catalog"))]
    Catalog(catalog::CatalogArgs),
    /// The effective settings and where each came from (file, env, flag, default).
    #[command(long_about = config::LONG_ABOUT, after_help = man::examples_help("config"))]
    Config(config::ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(long_about = completions::LONG_ABOUT, after_help = man::examples_help("completions"))]
    Completions(completions::CompletionsArgs),
    /// Print the manual page, or write one per command into a directory.
    #[command(long_about = man::LONG_ABOUT, after_help = man::examples_help("man"))]
    Man(man::ManArgs),
    /// The embedded playground simulator, standalone.
    #[command(
        after_help = man::examples_help("sim"),
        mut_subcommand("serve", |c| c.after_help(man::examples_help("sim serve"))),
        mut_subcommand("clock", |c| c.after_help(man::examples_help("sim clock"))),
        mut_subcommand("account", |c| c.after_help(man::examples_help("sim account"))),
        mut_subcommand("payouts", |c| c.after_help(man::examples_help("sim payouts")))
    )]
    Sim(sim::SimArgs),
}

impl Command {
    /// The service settings of the command, when it has them.
    pub fn service_mut(&mut self) -> Option<&mut ServiceArgs> {
        match self {
            Command::Run(a) => Some(&mut a.plan.service),
            Command::Validate(a) => Some(&mut a.plan.service),
            Command::Approve(a) => Some(&mut a.plan.service),
            Command::Status(a) => Some(&mut a.service),
            Command::Report(a) => Some(&mut a.service),
            Command::History(a) => Some(&mut a.service),
            Command::Close(a) => Some(&mut a.service),
            Command::Retry(a) => Some(&mut a.service),
            Command::Payouts(a) => Some(&mut a.service),
            Command::Reconcile(a) => Some(&mut a.service),
            Command::Balance(a) => Some(&mut a.service),
            Command::Ping(a) => Some(&mut a.service),
            Command::Config(a) => Some(&mut a.service),
            Command::Catalog(a) => match &mut a.command {
                catalog::CatalogCommand::Sync { service }
                | catalog::CatalogCommand::List { service, .. } => Some(service),
            },
            Command::Completions(_) | Command::Man(_) | Command::Sim(_) => None,
        }
    }
}

/// The settings, at the end of `paybatch --help` (before the exit codes and the examples,
/// [`man::after_long_help`]) and in the manual's ENVIRONMENT section.
const AFTER_LONG_HELP: &str = "Settings: ./paybatch.toml (or --config FILE) gives defaults for \
env, base_url, api_key_file and ledger; PAYBATCH_ENV, PAYBATCH_BASE_URL, PAYBATCH_API_KEY_FILE and \
PAYBATCH_LEDGER override it, and flags override both (`paybatch config` shows the result). It also \
holds `second_person` and the accounts of the double-entry journal (`[accounts]`). The API \
key comes from PAYBATCH_API_KEY or a file of mode 0600, never from a flag or the settings file. \
NO_COLOR turns colour off.";

/// The ledger used when none is given.
pub const DEFAULT_LEDGER: &str = crate::ledger::DEFAULT_PATH;

/// Which service to talk to, with which key, and where the ledger is.
#[derive(Debug, Clone, Args)]
pub struct ServiceArgs {
    /// sim (embedded simulator, default), playground or production.
    #[arg(long, env = "PAYBATCH_ENV", value_name = "ENV")]
    pub env: Option<String>,
    /// Another service address, e.g. http://127.0.0.1:8080/v2 (a standalone simulator).
    #[arg(long, env = "PAYBATCH_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// A file (mode 0600) holding the API key; else PAYBATCH_API_KEY is read.
    #[arg(long, env = "PAYBATCH_API_KEY_FILE", value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// The ledger database.
    #[arg(
        long,
        env = "PAYBATCH_LEDGER",
        value_name = "PATH",
        default_value = DEFAULT_LEDGER
    )]
    pub ledger: PathBuf,
}

impl ServiceArgs {
    pub fn environment(&self) -> Result<Environment, UsageError> {
        Environment::resolve(self.env.as_deref(), self.base_url.as_deref())
    }

    /// The flags that chose the service, its key file and the ledger, as a command this one
    /// suggests repeats them (` --env playground --ledger /srv/p.db`; the ledger only when it
    /// is not the default), each quoted for a shell: pasting the suggestion acts on the same
    /// ledger and service, whatever the settings or the environment of the shell it is pasted
    /// in.
    pub fn repeated(&self) -> String {
        let mut flags = String::new();
        if let Some(e) = &self.env {
            flags.push_str(&format!(" --env {}", crate::text::shell_word(e)));
        }
        if let Some(u) = &self.base_url {
            flags.push_str(&format!(" --base-url {}", crate::text::shell_word(u)));
        }
        if let Some(f) = &self.api_key_file {
            let f = f.display().to_string();
            flags.push_str(&format!(" --api-key-file {}", crate::text::shell_word(&f)));
        }
        if self.ledger != std::path::Path::new(DEFAULT_LEDGER) {
            let l = self.ledger.display().to_string();
            flags.push_str(&format!(" --ledger {}", crate::text::shell_word(&l)));
        }
        flags
    }
}

/// Whether stderr gets colour: it is a terminal that can show it (not `TERM=dumb`), and
/// `NO_COLOR` is unset or empty (no-color.org). Cron and pipes never get colour.
pub fn stderr_color() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
        && !dumb_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `TERM=dumb`: a terminal that draws neither colour nor bars (an editor's shell, a serial line).
pub fn dumb_terminal() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

/// `label` in bold ANSI colour `code` when `on`, else as it is.
pub fn paint(label: &str, code: &str, on: bool) -> String {
    if on {
        format!("\x1b[{code}m{label}\x1b[0m")
    } else {
        label.to_string()
    }
}

/// Prints a problem of the input (its `Display` carries its own `help:` line), its control
/// characters escaped and what looks like an API key hidden.
pub fn print_problem(problem: &impl std::fmt::Display) {
    let text = problem.to_string();
    eprintln!(
        "{}: {}",
        paint("error", "1;31", stderr_color()),
        crate::text::shown_message(&text)
    );
}

/// Kinds listed one by one after the problems shown (the others are counted together).
const LISTED_KINDS: usize = 20;

/// Prints the problems of a file as kept (the first of each kind), then, when some were not
/// kept, how many there are of each kind: a file of a million bad rows prints a page.
pub fn print_problems(problems: &crate::input::rules::Problems) {
    for p in &problems.shown {
        print_problem(p);
    }
    if problems.omitted() == 0 {
        return;
    }
    errln!();
    errln!(
        "... and {} more problem(s) not shown; the {} problem(s) per kind (the first {} of each are above):",
        problems.omitted(),
        problems.total,
        crate::input::rules::KEPT_PER_KIND
    );
    let mut kinds: Vec<(&String, &usize)> = problems.per_kind.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (kind, n) in kinds.iter().take(LISTED_KINDS) {
        errln!("  {kind:<20} {n:>10}");
    }
    if kinds.len() > LISTED_KINDS {
        let rest: usize = kinds[LISTED_KINDS..].iter().map(|(_, n)| **n).sum();
        errln!(
            "  ({} other columns: {rest} problem(s))",
            kinds.len() - LISTED_KINDS
        );
    }
}

/// Prints an error in the `error: ... / help: ...` style, its control characters escaped and
/// what looks like an API key hidden (the message may quote the service, a file or the ledger).
pub fn print_error(message: &str, help: Option<&str>) {
    use crate::text::shown_message as escape_message;
    let color = stderr_color();
    eprintln!(
        "{}: {}",
        paint("error", "1;31", color),
        escape_message(message)
    );
    if let Some(h) = help.filter(|h| !h.is_empty()) {
        eprintln!("{}: {}", paint("help", "1;36", color), escape_message(h));
    }
}

/// The exit of how a run came out.
pub fn outcome_exit(o: crate::batch::outcome::Outcome) -> Exit {
    use crate::batch::outcome::Outcome;
    match o {
        Outcome::Completed => Exit::Ok,
        Outcome::NeedsAPerson => Exit::Failures,
        Outcome::Incomplete => Exit::Incomplete,
    }
}

/// Parses the command line, then fills the service settings that no flag and no environment
/// variable gave from the settings file (`paybatch.toml`). Returns how the process ends when
/// there is nothing to run: `--help` and `--version` (0), clap's usage errors and a bad settings
/// file (2, with the JSON object of a refused run on stdout when `--json` was given).
pub fn parse() -> Result<Cli, CliError> {
    let json = std::env::args_os().any(|a| a == "--json");
    let matches = Cli::command()
        .try_get_matches()
        .map_err(|e| usage_error(&e, json))?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| usage_error(&e, json))?;
    apply_settings(&mut cli, &matches).map_err(|e| {
        if json {
            out_json(&run_json::usage(&e.to_string(), e.help()));
        }
        CliError::from(e)
    })?;
    Ok(cli)
}

/// What clap says of the command line, as clap prints it (help and version on stdout, a usage
/// error on stderr); a usage error is also the JSON object on stdout with `--json`, so a script
/// reading it gets an answer. Returns clap's exit (0 for help, 2 for a usage error), with
/// nothing more to print.
fn usage_error(e: &clap::Error, json: bool) -> CliError {
    use clap::error::ErrorKind;
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if json && !shown {
        // The first paragraph of clap's text: what is wrong, with the arguments it names.
        let text = e.render().to_string();
        let message: Vec<&str> = text
            .lines()
            .map(str::trim)
            .take_while(|l| !l.is_empty())
            .collect();
        let message = message.join(" ");
        out_json(&run_json::usage(
            message.trim_start_matches("error: "),
            "`paybatch help` and `paybatch <command> --help` show the usage",
        ));
    }
    let _ = e.print();
    CliError::reported(if e.exit_code() == 0 {
        Exit::Ok
    } else {
        Exit::Usage
    })
}

/// The matches of the (sub)command that holds the service settings.
fn service_matches(m: &ArgMatches) -> Option<&ArgMatches> {
    if m.ids().any(|id| id.as_str() == "ledger") {
        return Some(m);
    }
    m.subcommand().and_then(|(_, sub)| service_matches(sub))
}

fn source_of(m: &ArgMatches, id: &str) -> Source {
    match m.value_source(id) {
        Some(ValueSource::CommandLine) => Source::Flag,
        Some(ValueSource::EnvVariable) => Source::Env,
        _ => Source::Default,
    }
}

/// Precedence, lowest first: default, settings file, `PAYBATCH_*` variable, flag. `env` and
/// `base_url` both name the service, so they go together: when either comes from a variable or
/// a flag, the file's `env` and `base_url` are not used.
fn apply_settings(cli: &mut Cli, matches: &ArgMatches) -> Result<(), UsageError> {
    let Some(m) = service_matches(matches) else {
        return Ok(());
    };
    let file = crate::settings::load(cli.config.as_deref())?;
    let Some(service) = cli.command.service_mut() else {
        return Ok(());
    };
    let mut p = Provenance {
        file: file.as_ref().map(|f| f.path.clone()),
        env: source_of(m, "env"),
        base_url: source_of(m, "base_url"),
        api_key_file: source_of(m, "api_key_file"),
        ledger: source_of(m, "ledger"),
        second_person: file.as_ref().and_then(|f| f.settings.second_person),
        accounts: file.as_ref().and_then(|f| f.settings.accounts.clone()),
    };
    let second_person = p.second_person == Some(true);
    if let Some(f) = file {
        let s = f.settings;
        if p.env == Source::Default && p.base_url == Source::Default {
            if s.env.is_some() {
                service.env = s.env;
                p.env = Source::File;
            }
            if s.base_url.is_some() {
                service.base_url = s.base_url;
                p.base_url = Source::File;
            }
        }
        if p.api_key_file == Source::Default && s.api_key_file.is_some() {
            service.api_key_file = s.api_key_file;
            p.api_key_file = Source::File;
        }
        if p.ledger == Source::Default
            && let Some(ledger) = s.ledger
        {
            service.ledger = ledger;
            p.ledger = Source::File;
        }
    }
    cli.provenance = p;
    if let Command::Report(report) = &mut cli.command {
        report.accounts = cli.provenance.accounts.clone().unwrap_or_default();
    }
    if let Command::Run(run) = &mut cli.command
        && second_person
    {
        run.second_person = true;
    }
    Ok(())
}

/// Runs the command: how the process ends, or why the command could not do its work.
pub async fn dispatch(cli: Cli) -> Result<Exit, CliError> {
    let quiet = cli.quiet;
    match cli.command {
        Command::Run(args) => run::execute(args, quiet).await,
        Command::Validate(args) => validate::execute(args, quiet).await,
        Command::Approve(args) => approve::execute(args, quiet).await,
        Command::Status(args) => status::execute(args).await,
        Command::Report(args) => report::execute(args, quiet).await,
        Command::History(args) => history::execute(args).await,
        Command::Close(args) => close::execute(args),
        Command::Retry(args) => retry::execute(args).await,
        Command::Payouts(args) => payouts::execute(args, quiet).await,
        Command::Ping(args) => ping::execute(args).await,
        Command::Reconcile(args) => reconcile::execute(args).await,
        Command::Balance(args) => balance::execute(args).await,
        Command::Catalog(args) => catalog::execute(args).await,
        Command::Config(args) => config::execute(args, &cli.provenance).await,
        Command::Completions(args) => completions::execute(args),
        Command::Man(args) => man::execute(args),
        Command::Sim(args) => sim::execute(args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::paint;

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(paint("error", "1;31", false), "error");
        assert_eq!(paint("error", "1;31", true), "\x1b[1;31merror\x1b[0m");
    }
}
