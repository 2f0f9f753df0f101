//! Command-line interface: one file per subcommand; each ends in one `execute` function that
//! the dispatcher calls and that returns the process exit code.

pub mod balance;
pub mod catalog;
pub mod ping;
pub mod reconcile;
pub mod report;
pub mod retry;
pub mod run;
pub mod sim;
pub mod status;
pub mod validate;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::environment::{ConfigError, Environment};
use crate::exit;

#[derive(Debug, Parser)]
#[command(
    name = "paybatch",
    version,
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
    /// Print only errors and warnings.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a CSV batch, pay every row exactly once, write the result file (resumable).
    Run(run::RunArgs),
    /// Check a batch as `run` would, show its totals and its plan digest; pay nothing.
    #[command(long_about = validate::LONG_ABOUT)]
    Validate(validate::ValidateArgs),
    /// What the ledger says: every batch, or one batch in detail, and what to do next.
    #[command(long_about = status::LONG_ABOUT)]
    Status(status::StatusArgs),
    /// Rebuild a batch's result CSV from the ledger; write an HTML report.
    #[command(long_about = report::LONG_ABOUT)]
    Report(report::ReportArgs),
    /// Make FAILED and REJECTED rows of a batch eligible again (new attempt, new key).
    Retry(retry::RetryArgs),
    /// Compare the ledger with the service's orders and repair it (lost ledger, in-doubt orders).
    Reconcile(reconcile::ReconcileArgs),
    /// The account's balances at the service.
    #[command(long_about = balance::LONG_ABOUT)]
    Balance(balance::BalanceArgs),
    /// Check the API key and the environment (GET /ping).
    Ping(ping::PingArgs),
    /// The service's catalog: sync the local cache, list products.
    Catalog(catalog::CatalogArgs),
    /// The embedded playground simulator, standalone.
    Sim(sim::SimArgs),
}

/// The ledger used when none is given.
pub const DEFAULT_LEDGER: &str = "paybatch.db";

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
    pub fn environment(&self) -> Result<Environment, ConfigError> {
        Environment::resolve(self.env.as_deref(), self.base_url.as_deref())
    }
}

/// Prints an error in the `error: ... / help: ...` style.
pub fn print_error(message: &str, help: Option<&str>) {
    eprintln!("error: {message}");
    if let Some(h) = help.filter(|h| !h.is_empty()) {
        eprintln!("help: {h}");
    }
}

/// Prints a configuration error and returns the usage exit code.
pub fn config_failure(e: &ConfigError) -> i32 {
    print_error(&e.to_string(), Some(e.help()));
    exit::USAGE
}

pub async fn dispatch(cli: Cli) -> i32 {
    let quiet = cli.quiet;
    match cli.command {
        Command::Run(args) => run::execute(args, quiet).await,
        Command::Validate(args) => validate::execute(args, quiet).await,
        Command::Status(args) => status::execute(args).await,
        Command::Report(args) => report::execute(args, quiet).await,
        Command::Retry(args) => retry::execute(args).await,
        Command::Ping(args) => ping::execute(args).await,
        Command::Reconcile(args) => reconcile::execute(args).await,
        Command::Balance(args) => balance::execute(args).await,
        Command::Catalog(args) => catalog::execute(args).await,
        Command::Sim(args) => match sim::execute(args).await {
            Ok(()) => exit::OK,
            Err(e) => {
                print_error(&format!("{e:#}"), None);
                exit::UNEXPECTED
            }
        },
    }
}
