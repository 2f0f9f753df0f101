//! `paybatch report --batch NAME`: rebuilds a batch's result CSV from the ledger at any time
//! (`--out FILE`, or `--out -` for stdout), writes a one-page HTML report for the finance
//! lead who signs the batch off (`--html`, with `--group-by COLUMN` breakdowns), and says what
//! the batch cost where finance books it (`--json`). `paybatch report --since DATE` does the
//! same for every batch completed in a period, and writes its accounting journal
//! (`--journal`). Reads the ledger only, and never creates one; every file is written
//! atomically with mode 0600.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use clap::Args;

use crate::exit::Exit;
use crate::file_format::ResultFormat;
use crate::ledger::{BatchRecord, Ledger};
use crate::ops::{report, status};
use crate::report::Tally;

use super::report_period::{self, PeriodArgs, is_stdout, refuse_clashes};
use super::{CliError, ServiceArgs};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Rebuild a batch's result file from the ledger, at any time (during a run, after \
it, after the result file was lost), and/or write an HTML report of the batch.\n\nWithout --out \
or --html the result CSV is written where `paybatch run` writes it: beside the input file (its \
path as the run recorded it, so relative to the current directory when it was given relative). \
`--out -` writes it on stdout (messages stay on stderr). It is written in the layout the batch \
recorded (as its input file by default: delimiter, byte-order mark, line ends), so it is the file \
`run` wrote, byte for byte, even once the input file is gone; --out-format writes another. With \
--html only, only the HTML page is written.\n\nThe HTML page is for the finance lead who signs the batch off: what left each paying \
balance (conversions included) and the plan digest first, then the rows per currency and status, \
per product and per any column of the file (--group-by), the rows that need attention with their \
reasons, and the technical details last. It is self-contained (no script, nothing fetched), opens \
and prints anywhere, and never contains payout links. Both files are written atomically with mode \
0600.\n\n--json prints what the batch cost, where finance books it, as one JSON object on stdout \
(nothing else is printed there, so --out - is refused with it): what left each paying balance, \
and per product and per --group-by column the rows paid, their face value, price and discount \
(in the product's currency), what was charged (in the paying balance's currency) and the \
effective rate of a conversion (charged / price, 6 significant digits).\n\nA period: --since \
DATE [--until DATE] (UTC dates, YYYY-MM-DD, both included; --until defaults to today) takes \
every batch of the ledger completed in the period. A batch completed when the last of its \
orders was answered final (COMPLETED, FAILED, REJECTED or MISMATCH), once none of its rows is \
left to finish; a batch still unfinished is named in a warning and left out. Give at least one \
of --out FILE|- (one result CSV of every batch, a `batch` column first, the input columns of \
all the batches), --html FILE (totals per balance, product and --group-by column, and a line \
per batch), --json, and --journal FILE|- (the accounting journal, `-` for stdout: one line per paid row and \
attempt, `line,date,environment,batch,status,balance_currency,debit_amount,<group>,product,\
reference,order_id`, where the group column is the first --group-by column, else cost_center \
when the batches have one; then one `total` line per environment and balance currency). The \
journal and what left each balance book every paid attempt whose order became final in the \
period, whichever batch it belongs to, MISMATCH rows included. --journal-format double-entry \
writes the same attempts as entries that balance, for an accounting tool's manual-journal import \
(`entry,date,account,debit,credit,currency,memo,<group>,batch,reference,order_id,environment`: \
the expense account of the group's value debited, the prepaid balance account of the paying \
currency credited; MISMATCH and unconfirmed charges to the suspense account), the accounts and \
the date format from [accounts] in paybatch.toml (`paybatch config` shows them). The journal is \
plain CSV (`,`, LF, no BOM) unless --out-format asks for another layout.\n\nReads the ledger only (a ledger of an earlier paybatch is first brought to this version's schema); a ledger that does not exist is an error (exit 2), never created.";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The batch to report on (or a period: --since).
    #[arg(long, required_unless_present = "since", conflicts_with = "since")]
    pub batch: Option<String>,
    /// A period: the batches completed from this UTC date on (YYYY-MM-DD).
    #[arg(long, value_name = "DATE", value_parser = parse_date)]
    pub since: Option<NaiveDate>,
    /// The last UTC date of the period (YYYY-MM-DD, included; default: today).
    #[arg(long, value_name = "DATE", value_parser = parse_date, requires = "since")]
    pub until: Option<NaiveDate>,
    /// Write the result CSV here, `-` for stdout (it holds payout links).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write a one-page HTML report here (no payout links).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "FORMAT", help = super::out_format::HELP)]
    pub out_format: Option<crate::file_format::OutFormat>,
    /// Print what the batch or period cost as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A period's accounting journal (CSV), `-` for stdout: one line per paid attempt, totals
    /// per environment and balance currency.
    #[arg(long, value_name = "FILE", requires = "since")]
    pub journal: Option<PathBuf>,
    /// The journal's format: `plain` (one line per paid attempt, then totals) or
    /// `double-entry` (entries that balance, for an accounting tool's manual-journal import;
    /// accounts from [accounts] in paybatch.toml).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value = "plain",
        requires = "journal"
    )]
    pub journal_format: crate::report::journal_format::JournalFormat,
    /// The accounts of the double-entry journal (`[accounts]` of the settings file).
    #[arg(skip)]
    pub accounts: crate::settings::Accounts,
    /// Costs and breakdowns per value of this input column (repeatable; with --html, --json
    /// or --journal).
    #[arg(long, value_name = "COLUMN")]
    pub group_by: Vec<String>,
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// A date of a period: `YYYY-MM-DD`, nothing else.
fn parse_date(text: &str) -> Result<NaiveDate, String> {
    let shape = text.len() == 10
        && text.char_indices().all(|(i, c)| {
            if i == 4 || i == 7 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }
        });
    shape
        .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
        .flatten()
        .ok_or_else(|| format!("`{text}` is not a date written YYYY-MM-DD (such as 2026-11-30)"))
}

pub async fn execute(args: ReportArgs, quiet: bool) -> Result<Exit, CliError> {
    if args.json && args.out.as_deref().is_some_and(is_stdout) {
        return Err(CliError::usage(
            "--json and --out - would both print on stdout",
            "write the result CSV to a file (--out FILE), or leave out --json",
        ));
    }
    if !args.group_by.is_empty() && args.html.is_none() && !args.json && args.journal.is_none() {
        return Err(CliError::usage(
            "--group-by needs an output that breaks rows down",
            "add --html FILE, --json or (with --since) --journal FILE",
        ));
    }
    let ledger = status::open_existing(&args.service.ledger)?;
    match (&args.batch, args.since) {
        (Some(name), _) => report_batch(&ledger, name, &args, quiet),
        (None, Some(since)) => {
            let period = PeriodArgs {
                since,
                until: args.until,
                out: args.out,
                out_format: args.out_format,
                html: args.html,
                json: args.json,
                journal: args.journal,
                journal_format: args.journal_format,
                accounts: args.accounts,
                group_by: args.group_by,
                ledger: args.service.ledger,
            };
            report_period::execute(&ledger, period, quiet)
        }
        (None, None) => Err(CliError::usage(
            "report needs --batch NAME or --since DATE",
            "give the batch to report on, or the first day of a period",
        )),
    }
}

fn report_batch(
    ledger: &Ledger,
    name: &str,
    args: &ReportArgs,
    quiet: bool,
) -> Result<Exit, CliError> {
    let batch = status::find_batch(ledger, name)?;
    // A bad --group-by is refused before anything is written.
    let tally = tally_of(&batch, &args.group_by)?;
    // No output may be a link or a special file, the other output, the ledger, one of its
    // files, or the batch's input file; the HTML page may not be its result file either (the
    // result CSV may: it is rebuilt).
    let input = std::path::PathBuf::from(&batch.input_path);
    refuse_clashes(
        &[("--out", &args.out), ("--html", &args.html)],
        &args.service.ledger,
        &[input.as_path()],
        &[],
    )?;
    let result = report::default_result_path(&batch);
    refuse_clashes(
        &[("--html", &args.html)],
        &args.service.ledger,
        &[input.as_path()],
        &[result.as_path()],
    )?;
    let csv_path = match (&args.out, &args.html, args.json) {
        (Some(out), _, _) => Some(out.clone()),
        (None, Some(_), _) | (None, None, true) => None,
        (None, None, false) => Some(report::default_result_path(&batch)),
    };
    if let Some(path) = &csv_path {
        let format = report::result_format(&batch, args.out_format);
        write_csv(ledger, &batch, path, format, quiet)?;
    }
    if let Some(path) = &args.html {
        write_html(ledger, &batch, path, tally, quiet)?;
    }
    if args.json {
        let tally = tally_of(&batch, &args.group_by)?;
        let costs = report::batch_costs(ledger, &batch, tally)
            .map_err(|e| CliError::new(Exit::Unexpected, e.to_string(), None))?;
        super::out_json(&costs);
    }
    Ok(Exit::Ok)
}

/// An empty tally of `batch` with a breakdown per `group_by` column; a column the batch's
/// file does not have is refused.
fn tally_of(batch: &BatchRecord, group_by: &[String]) -> Result<Tally, CliError> {
    let mut tally = Tally::new(batch);
    for column in group_by {
        tally.group_by(column).map_err(|e| {
            CliError::usage(e, "--group-by takes the name of a column of the input file")
        })?;
    }
    Ok(tally)
}

fn write_csv(
    ledger: &Ledger,
    batch: &BatchRecord,
    path: &Path,
    format: ResultFormat,
    quiet: bool,
) -> Result<(), CliError> {
    let written = if is_stdout(path) {
        report::copy_result_file_as(ledger, batch, format, &mut std::io::stdout().lock())
    } else {
        report::write_result_file_as(ledger, batch, path, format)
    };
    written.map_err(|e| {
        CliError::new(
            Exit::Unexpected,
            e.to_string(),
            Some("check that the directory exists and is writable, or pass --out FILE"),
        )
    })?;
    if !quiet && !is_stdout(path) {
        errln!(
            "result file of batch {}: {}{} (mode 0600: it holds payout links)",
            batch.name,
            path.display(),
            format.note()
        );
    }
    Ok(())
}

fn write_html(
    ledger: &Ledger,
    batch: &BatchRecord,
    path: &Path,
    tally: Tally,
    quiet: bool,
) -> Result<(), CliError> {
    report::write_html(ledger, batch, path, tally).map_err(|e| {
        CliError::new(
            Exit::Unexpected,
            e.to_string(),
            Some("check that the directory exists and is writable"),
        )
    })?;
    if !quiet {
        errln!(
            "HTML report of batch {}: {} (no payout links)",
            batch.name,
            path.display()
        );
    }
    Ok(())
}
