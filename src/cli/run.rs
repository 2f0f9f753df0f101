//! `paybatch run FILE`: the main job. Validates the batch, pays every row exactly once, polls
//! until every order is terminal and writes the result file. Running the same command again
//! resumes an interrupted run from the ledger.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::api::models::ExecutionMode;
use crate::batch::pipeline::{self, RunError, RunOptions, RunSummary};
use crate::batch::report::Reporter;
use crate::exit;

use super::{ServiceArgs, config_failure, print_error};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The CSV file of recipients.
    pub file: PathBuf,
    #[command(flatten)]
    pub service: ServiceArgs,
    /// The batch name (default: the file name without extension). Re-use it to resume.
    #[arg(long)]
    pub batch: Option<String>,
    /// Where to write the result CSV (default: beside the input).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Field delimiter (default: detected among , ; and tab).
    #[arg(long, value_parser = parse_delimiter)]
    pub delimiter: Option<u8>,
    /// Submit the valid rows and mark the others INVALID instead of stopping.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Allow the same (email, product, amount) more than once.
    #[arg(long)]
    pub allow_duplicates: bool,
    /// Balance to pay from for rows whose product currency has no balance (EUR, GBP, USD, CAD).
    #[arg(long, value_name = "CUR")]
    pub payment_currency: Option<String>,
    /// Create orders synchronously (one item per order) instead of asynchronously.
    #[arg(long)]
    pub sync: bool,
    /// Rows per order, 1 to 200 (rows are grouped by payment currency, in input order).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=200))]
    pub items_per_order: u16,
    /// Order creations per minute (the service allows 180).
    #[arg(long, default_value_t = pipeline::DEFAULT_ORDER_RATE, value_name = "N")]
    pub order_rate: u32,
    /// Orders in flight at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub concurrency: usize,
    /// Stop polling after this many seconds; the run exits 5 and resumes later.
    #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
    pub poll_timeout: u64,
    /// Refresh the cached catalog when older than this many seconds.
    #[arg(long, default_value_t = 86_400, value_name = "SECONDS")]
    pub catalog_ttl: u64,
    /// An order sent this many hours ago (fractions allowed) without a recorded answer is looked
    /// up at the service (`paybatch reconcile`) before it may be sent again.
    #[arg(long, default_value_t = 24.0, value_name = "HOURS", value_parser = parse_hours)]
    pub in_doubt_hours: f64,
}

/// Hours as a positive finite number, at most ten years (`0.5`, `24`, `0.0001`).
fn parse_hours(s: &str) -> Result<f64, String> {
    let hours: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of hours"))?;
    if !hours.is_finite() || !(0.0..=24.0 * 3650.0).contains(&hours) {
        return Err(format!("`{s}` hours: give a number from 0 to 87600"));
    }
    Ok(hours)
}

fn parse_delimiter(s: &str) -> Result<u8, String> {
    match s {
        "," | "comma" => Ok(b','),
        ";" | "semicolon" => Ok(b';'),
        "\\t" | "\t" | "tab" => Ok(b'\t'),
        "|" | "pipe" => Ok(b'|'),
        other => Err(format!("`{other}` is not a delimiter: use , ; tab or |")),
    }
}

impl RunArgs {
    fn options(&self) -> Result<RunOptions, crate::environment::ConfigError> {
        let mut o = RunOptions::new(&self.file);
        o.environment = self.service.environment()?;
        o.batch = self.batch.clone();
        o.ledger = self.service.ledger.clone();
        o.api_key_file = self.service.api_key_file.clone();
        o.out = self.out.clone();
        o.delimiter = self.delimiter;
        o.skip_invalid = self.skip_invalid;
        o.allow_duplicates = self.allow_duplicates;
        o.default_payment_currency = self.payment_currency.clone();
        o.mode = if self.sync {
            ExecutionMode::Sync
        } else {
            ExecutionMode::Async
        };
        if self.sync && self.items_per_order > 1 {
            return Err(crate::environment::ConfigError::new(
                "--sync orders hold one item only (the service's rule)",
                "drop --sync, or use --items-per-order 1",
            ));
        }
        o.items_per_order = self.items_per_order as usize;
        o.order_rate = self.order_rate;
        o.concurrency = self.concurrency;
        o.poll_timeout = Duration::from_secs(self.poll_timeout);
        o.catalog_ttl = Duration::from_secs(self.catalog_ttl);
        o.in_doubt_window = Duration::from_secs_f64(self.in_doubt_hours * 3600.0);
        Ok(o)
    }
}

pub async fn execute(args: RunArgs, quiet: bool) -> i32 {
    let opts = match args.options() {
        Ok(o) => o,
        Err(e) => return config_failure(&e),
    };
    let reporter = Reporter::new(quiet);
    match pipeline::run(&opts, reporter).await {
        Ok(summary) => {
            print_summary(&summary, quiet);
            summary.exit_code()
        }
        Err(e) => report_error(&e),
    }
}

pub fn report_error(e: &RunError) -> i32 {
    if let RunError::Invalid { problems, .. } = e {
        for p in problems {
            eprintln!("error: {p}");
        }
        eprintln!();
    }
    print_error(&e.to_string(), e.help().as_deref());
    e.exit_code()
}

fn print_summary(s: &RunSummary, quiet: bool) {
    let code = s.exit_code();
    if quiet && code == exit::OK {
        return;
    }
    let label = if s.environment.is_simulated() {
        " (SIMULATED: no real money moved)"
    } else {
        ""
    };
    eprintln!();
    eprintln!("batch {}{label}", s.batch);
    eprintln!("  {:<12} {:>8}", "status", "rows");
    for (state, n) in &s.counts {
        eprintln!("  {:<12} {:>8}", state.as_str(), n);
    }
    if !s.totals.is_empty() {
        eprintln!("  completed totals:");
        eprintln!("  {:<8} {:>14} {:>14}", "currency", "face value", "price");
        for (cur, (face, price)) in &s.totals {
            eprintln!("  {:<8} {:>14} {:>14}", cur, face, price);
        }
    }
    eprintln!("result file: {}", s.result_path.display());
    let verdict = match code {
        exit::OK => "every row completed".to_string(),
        exit::FAILURES => "finished with failed, rejected or invalid rows (see the result file; `paybatch retry` after fixing the cause)".to_string(),
        _ => format!(
            "incomplete{}: run the same command again to resume",
            s.incomplete_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
    };
    eprintln!("paybatch run: {verdict} (exit {code})");
}
