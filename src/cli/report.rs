//! `paybatch report --batch NAME`: rebuilds a batch's result CSV from the ledger at any time
//! (`--out FILE`, or `--out -` for stdout), and writes a one-page HTML report for the finance
//! lead who signs the batch off (`--html`, with `--group-by COLUMN` breakdowns). Reads the
//! ledger only, and never creates one; both files are written atomically with mode 0600.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::exit::Exit;
use crate::file_format::ResultFormat;
use crate::ledger::{BatchRecord, Ledger};
use crate::ops::{report, status};
use crate::report::Tally;

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
0600.\n\nReads the ledger only (a ledger of an earlier paybatch is first brought to this version's schema); a ledger that does not exist is an error (exit 2), never created.";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The batch to report on.
    #[arg(long)]
    pub batch: String,
    /// Write the result CSV here, `-` for stdout (it holds payout links).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write a one-page HTML report here (no payout links).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "FORMAT", help = super::out_format::HELP)]
    pub out_format: Option<crate::file_format::OutFormat>,
    /// In the HTML report, a breakdown per value of this input column (repeatable).
    #[arg(long, value_name = "COLUMN", requires = "html")]
    pub group_by: Vec<String>,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: ReportArgs, quiet: bool) -> Result<Exit, CliError> {
    let ledger = status::open_existing(&args.service.ledger)?;
    let batch = status::find_batch(&ledger, &args.batch)?;
    // A bad --group-by is refused before anything is written.
    let mut tally = Tally::new(&batch);
    for column in &args.group_by {
        tally.group_by(column).map_err(|e| {
            CliError::usage(e, "--group-by takes the name of a column of the input file")
        })?;
    }
    // Neither output may be the ledger, one of its files, or the batch's input file.
    let input = std::path::PathBuf::from(&batch.input_path);
    for (flag, path) in [("--out", &args.out), ("--html", &args.html)] {
        let Some(path) = path.as_ref().filter(|p| !is_stdout(p)) else {
            continue;
        };
        if let Some(why) =
            crate::batch::output::output_clash(path, &args.service.ledger, &[input.as_path()])
        {
            return Err(CliError::usage(
                format!("{flag} {why}: writing there would destroy it"),
                "give it another file",
            ));
        }
    }
    let csv_path = match (&args.out, &args.html) {
        (Some(out), _) => Some(out.clone()),
        (None, Some(_)) => None,
        (None, None) => Some(report::default_result_path(&batch)),
    };
    if let Some(path) = &csv_path {
        let format = report::result_format(&batch, args.out_format);
        write_csv(&ledger, &batch, path, format, quiet)?;
    }
    if let Some(path) = &args.html {
        write_html(&ledger, &batch, path, tally, quiet)?;
    }
    Ok(Exit::Ok)
}

/// Whether `--out` names stdout.
fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
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
