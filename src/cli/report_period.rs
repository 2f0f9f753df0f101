//! `paybatch report --since DATE [--until DATE]`: every batch completed in a period, into one
//! result CSV (`--out`), one HTML page (`--html`), a JSON object (`--json`) and an accounting
//! journal (`--journal`). Part of `report`, whose arguments give [`PeriodArgs`].

use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::exit::Exit;
use crate::ledger::Ledger;
use crate::ops::period::{self, Outputs, Written};

use super::CliError;

/// What `report --since` was asked.
#[derive(Debug, Clone)]
pub struct PeriodArgs {
    pub since: NaiveDate,
    pub until: Option<NaiveDate>,
    pub out: Option<PathBuf>,
    pub out_format: Option<crate::file_format::OutFormat>,
    pub html: Option<PathBuf>,
    pub json: bool,
    pub journal: Option<PathBuf>,
    pub journal_format: crate::report::journal_format::JournalFormat,
    pub accounts: crate::settings::Accounts,
    pub group_by: Vec<String>,
    /// The ledger's path, as given.
    pub ledger: PathBuf,
}

/// Whether `--out` names stdout.
pub(super) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuses, before anything is written: an output that is the ledger, one of its files, one of
/// the `inputs` or one of the `results` (result files of batches), two outputs at one path (the
/// second would replace the first), and an output that exists and is not a regular file (its
/// atomic write would replace a symbolic link, a device or a fifo with a regular file).
pub(super) fn refuse_clashes(
    outputs: &[(&str, &Option<PathBuf>)],
    ledger: &Path,
    inputs: &[&Path],
    results: &[&Path],
) -> Result<(), CliError> {
    let files: Vec<(&str, &Path)> = outputs
        .iter()
        .filter_map(|(flag, path)| Some((*flag, path.as_deref().filter(|p| !is_stdout(p))?)))
        .collect();
    for (flag, path) in &files {
        if let Some(why) = crate::batch::output::output_clash(path, ledger, inputs, results) {
            return Err(CliError::usage(
                format!("{flag} {why}: writing there would destroy it"),
                "give it another file",
            ));
        }
    }
    for (i, (flag, path)) in files.iter().enumerate() {
        if let Some((other, _)) = files[i + 1..]
            .iter()
            .find(|(_, p)| crate::batch::output::same_file(path, p))
        {
            return Err(CliError::usage(
                format!(
                    "{flag} and {other} both name {}: one would replace the other",
                    path.display()
                ),
                "give each output a file of its own",
            ));
        }
    }
    for (flag, path) in &files {
        if let Some(what) = crate::batch::output::not_a_regular_file(path) {
            let help = if *flag == "--html" {
                "give the path of a regular file"
            } else {
                "give the path of a regular file; `-` writes to stdout"
            };
            return Err(CliError::usage(
                format!(
                    "{flag} {} is {what}: writing there would replace it with a regular file",
                    path.display()
                ),
                help,
            ));
        }
    }
    Ok(())
}

/// What a period cannot be asked: a start after its end, no output at all, two outputs on
/// stdout.
fn refuse_what_cannot_be(
    args: &PeriodArgs,
    since: NaiveDate,
    until: NaiveDate,
) -> Result<(), CliError> {
    if since > until {
        return Err(CliError::usage(
            format!("the period starts after it ends: --since {since} is after --until {until}"),
            "give a --since on or before --until (--until defaults to today, UTC)",
        ));
    }
    if args.out.is_none() && args.html.is_none() && args.journal.is_none() && !args.json {
        return Err(CliError::usage(
            "a period has no default file: say what to write",
            "give --out FILE (or - for stdout), --html FILE, --journal FILE or --json",
        ));
    }
    let journal_on_stdout = args.journal.as_deref().is_some_and(is_stdout);
    if journal_on_stdout && (args.json || args.out.as_deref().is_some_and(is_stdout)) {
        return Err(CliError::usage(
            format!(
                "--journal - and {} would both print on stdout",
                if args.json { "--json" } else { "--out -" }
            ),
            "write one of them to a file (--journal FILE, --out FILE)",
        ));
    }
    Ok(())
}

/// What the period's batches forbid: an output over the ledger, an input file or a result
/// file of one of them (finished or not), and a `--group-by` column none of them has.
fn refuse_for_the_batches(
    args: &PeriodArgs,
    selection: &period::Selection,
) -> Result<(), CliError> {
    let inputs: Vec<PathBuf> = selection
        .batches
        .iter()
        .map(|c| PathBuf::from(&c.batch.input_path))
        .collect();
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let results: Vec<PathBuf> = selection
        .batches
        .iter()
        .map(|c| &c.batch)
        .chain(selection.unfinished.iter().map(|(b, _)| b))
        .map(crate::ops::report::default_result_path)
        .collect();
    let results: Vec<&Path> = results.iter().map(PathBuf::as_path).collect();
    refuse_clashes(
        &[
            ("--out", &args.out),
            ("--html", &args.html),
            ("--journal", &args.journal),
        ],
        &args.ledger,
        &inputs,
        &results,
    )?;
    if let Some(why) = period::missing_group(&args.group_by, &selection.batches) {
        return Err(CliError::usage(
            why,
            "--group-by takes the name of a column of the input files",
        ));
    }
    Ok(())
}

/// The paid rows the journal could not book, said.
fn warn_not_booked(written: &period::Written) {
    if written.not_booked > 0 {
        errln!(
            "warning: {} paid rows have no charge recorded in the ledger (paid before the ledger recorded charges): they are not in the journal",
            written.not_booked
        );
    }
    if written.mismatch_not_booked > 0 {
        errln!(
            "warning: {} MISMATCH rows were charged by orders whose answer does not say what they cost: they are in suspense without a claimed amount; compare them with the account's orders",
            written.mismatch_not_booked
        );
    }
    if written.answered_for_another > 0 {
        errln!(
            "warning: {} rows of orders the service answered with another order (another ledger's, or another of this ledger's): not booked here, the ledger that made that order books it",
            written.answered_for_another
        );
    }
}

pub(super) fn execute(ledger: &Ledger, args: PeriodArgs, quiet: bool) -> Result<Exit, CliError> {
    let since = args.since;
    let until = args
        .until
        .unwrap_or_else(|| chrono::Utc::now().date_naive());
    refuse_what_cannot_be(&args, since, until)?;
    let journal_on_stdout = args.journal.as_deref().is_some_and(is_stdout);
    let unexpected = |e: crate::ops::error::OpError| {
        CliError::new(
            Exit::Unexpected,
            e.to_string(),
            Some("check that the directory exists and is writable"),
        )
    };
    let selection = period::select(ledger, since, until).map_err(unexpected)?;
    refuse_for_the_batches(&args, &selection)?;
    for (batch, rows) in &selection.unfinished {
        errln!(
            "warning: batch {} is not finished ({rows} rows left to finish): it is left out of the period",
            batch.name
        );
    }
    // The journal on stdout is built as the file is (a private file in a private temporary
    // directory, removed afterwards), then copied.
    let temporary = match journal_on_stdout {
        true => Some(tempfile::tempdir().map_err(|e| {
            unexpected(crate::ops::error::OpError::Io {
                path: PathBuf::from("(temporary directory)"),
                message: e.to_string(),
            })
        })?),
        false => None,
    };
    let journal = match &temporary {
        Some(dir) => Some(dir.path().join("journal.csv")),
        None => args.journal.clone(),
    };
    let outputs = Outputs {
        out: args.out.clone(),
        out_format: args.out_format,
        html: args.html.clone(),
        journal: journal.clone(),
        journal_format: args.journal_format,
        accounts: args.accounts.clone(),
        unclaimed: args.json,
    };
    let written = period::write_period(
        ledger,
        &selection,
        &since.to_string(),
        &until.to_string(),
        &args.group_by,
        &outputs,
        &mut std::io::stdout().lock(),
    )
    .map_err(unexpected)?;
    if let (Some(closed), Some(path)) = (written.totals.closed_exactly(), &journal)
        && args.group_by.is_empty()
    {
        compare_with_closed(closed, path, quiet);
    }
    if let (Some(_), Some(path)) = (&temporary, &journal) {
        copy_to_stdout(path).map_err(unexpected)?;
    }
    warn_not_booked(&written);
    if !quiet {
        tell_written(&args, since, until, &written);
    }
    if args.json {
        super::out_json(&written.totals.json());
    }
    Ok(Exit::Ok)
}

/// Compares the journal just written at `path` of a closed month with the one its close
/// recorded: the same bytes are said (unless `quiet`), others warned of.
fn compare_with_closed(closed: &crate::report::period::ClosedJson, path: &Path, quiet: bool) {
    use sha2::{Digest, Sha256};
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    if digest != closed.journal_digest {
        errln!(
            "warning: the journal of {} is not the one its close recorded ({}, now {digest}): compare it with the journal exported when the month was closed",
            closed.month,
            closed.journal_digest
        );
    } else if !quiet {
        errln!(
            "journal of {}: as closed at {} ({digest})",
            closed.month,
            closed.closed_at
        );
    }
}

/// Copies the file at `path` on stdout.
fn copy_to_stdout(path: &Path) -> Result<(), crate::ops::error::OpError> {
    use std::io::Write;
    let at = |path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| crate::ops::error::OpError::Io {
            path,
            message: e.to_string(),
        }
    };
    let mut file = std::fs::File::open(path).map_err(at(path))?;
    let mut stdout = std::io::stdout().lock();
    match std::io::copy(&mut file, &mut stdout).and_then(|_| stdout.flush()) {
        // A reader that went away (`| head`) took what it wanted: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(at(Path::new("(output)"))(e)),
        _ => Ok(()),
    }
}

/// What was written where (on stderr).
fn tell_written(args: &PeriodArgs, since: NaiveDate, until: NaiveDate, written: &Written) {
    errln!(
        "period {since} to {until}: lines of {} booked",
        crate::text::count(written.totals.batches().len(), "batch", "batches")
    );
    let said = [
        (&args.out, "result file (mode 0600: it holds payout links)"),
        (&args.html, "HTML report (no payout links)"),
        (&args.journal, "journal (mode 0600)"),
    ];
    for (path, what) in said {
        if let Some(path) = path.as_ref().filter(|p| !is_stdout(p)) {
            errln!("{what}: {}", path.display());
        }
    }
}
