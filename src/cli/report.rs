//! `paybatch report --batch NAME`: rebuilds a batch's result CSV from the ledger at any time
//! (`--out`), and writes a one-page HTML report for a finance lead (`--html`): the batch's facts,
//! totals per currency and status as a chart and a table, the rows that need attention. Reads
//! the ledger only; both files are written atomically with mode 0600.

use std::path::PathBuf;

use clap::Args;

use crate::batch::{html, options, results};
use crate::environment::Environment;
use crate::exit;

use super::status::{no_such_batch, open_existing};
use super::{ServiceArgs, print_error};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Rebuild a batch's result file from the ledger, at any time (during a run, after \
it, after the result file was lost), and/or write an HTML report of the batch.\n\nWithout --out \
or --html the result CSV is written where `paybatch run` writes it: beside the input file (its \
path as the run recorded it, so relative to the current directory when it was given relative). With \
--html only, only the HTML page is written. The HTML page is self-contained (no script, nothing \
fetched) and can be opened or printed anywhere; it never contains payout links. Both files are \
written atomically with mode 0600.";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The batch to report on.
    #[arg(long)]
    pub batch: String,
    /// Write the result CSV here (it holds payout links).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write a one-page HTML report here (no payout links).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: ReportArgs, quiet: bool) -> i32 {
    let ledger = match open_existing(&args.service.ledger) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let batch = match ledger.batch(&args.batch) {
        Ok(Some(b)) => b,
        Ok(None) => return no_such_batch(&ledger, &args.batch),
        Err(e) => {
            print_error(&e.to_string(), None);
            return exit::UNEXPECTED;
        }
    };
    let csv_path = match (&args.out, &args.html) {
        (Some(out), _) => Some(out.clone()),
        (None, Some(_)) => None,
        (None, None) => {
            let environment = Environment::from_recorded(&batch.environment, &batch.base_url)
                .unwrap_or(Environment::Custom(batch.base_url.clone()));
            Some(options::default_result_path(
                std::path::Path::new(&batch.input_path),
                &environment,
            ))
        }
    };
    if let Some(path) = &csv_path {
        if let Err(e) = results::write_result_file(&ledger, batch.id, &batch.headers, path) {
            print_error(
                &e.to_string(),
                Some("check that the directory exists and is writable, or pass --out FILE"),
            );
            return exit::UNEXPECTED;
        }
        if !quiet {
            errln!(
                "result file of batch {}: {} (mode 0600: it holds payout links)",
                batch.name,
                path.display()
            );
        }
    }
    if let Some(path) = &args.html {
        let mut tally = html::Tally::default();
        let counted = ledger.visit_result_rows(batch.id, |row, _| {
            tally.add(&batch.headers, &row);
            Ok::<(), crate::ledger::LedgerError>(())
        });
        if let Err(e) = counted {
            print_error(&e.to_string(), None);
            return exit::UNEXPECTED;
        }
        let page = html::render_tally(
            &batch,
            &tally,
            &ledger.path().display().to_string(),
            &crate::ledger::now(),
            env!("CARGO_PKG_VERSION"),
        );
        if let Err(e) = html::write_private(path, page.as_bytes()) {
            print_error(
                &format!("cannot write {}: {e}", path.display()),
                Some("check that the directory exists and is writable"),
            );
            return exit::UNEXPECTED;
        }
        if !quiet {
            errln!(
                "HTML report of batch {}: {} (no payout links)",
                batch.name,
                path.display()
            );
        }
    }
    exit::OK
}
