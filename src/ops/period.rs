//! `report --since DATE --until DATE`: the lines of the books booked in a period, and the
//! batches of the ledger completed in it, read once each, one row at a time, into any of: one
//! result CSV of those batches (a `batch` column first), the period's totals (its HTML page and
//! `--json`), and an accounting journal.
//!
//! A batch completed when the last of its orders was booked final (COMPLETED, FAILED, REJECTED
//! or MISMATCH), once none of its rows is left to finish (PENDING, PLANNED or SUBMITTED): the
//! UTC date of that booking time ([`crate::ledger::Completion`]) places its rows in the result
//! CSV of a period. A batch with rows left to finish is in no period's result CSV.
//!
//! Money follows the lines of the books, not the batches ([`lines`]): every attempt whose
//! order was booked on a date of the period (the ledger's one clock of the books), whichever
//! batch it belongs to and whenever the batch's other attempts were booked, so that
//! reissuing expired links in a later month books the reissues in that month and leaves the
//! earlier month as it was. What left each balance, the costs per product and per column, the
//! line per batch and the journal's totals are all counted from those lines. A row the
//! service completed otherwise than sent (MISMATCH), or whose order's total could not be
//! confirmed, is a suspense line, totalled apart; an order the service answered with another's
//! order is not booked by this ledger. Totals are per environment: a rehearsal's money is
//! never added to another environment's.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::batch::output::{ResultLine, ResultWriter};
use crate::batch::results::{InBackground, result_line};
use crate::file_format::{FileFormat, OutFormat};
use crate::ledger::{BatchRecord, Ledger, Specs};
use crate::ops::error::OpError;
use crate::report::journal::utc_date;
use crate::report::journal_format::{JournalFormat, JournalWriter};
use crate::report::period::{ClosedJson, PeriodTally};
use crate::report::tally::column_index;
use crate::report::unclaimed::Unclaimed;
use crate::report::{Tally, write_private};

pub mod lines;

/// The default group column of the journal, when the batches have it.
pub const DEFAULT_GROUP: &str = "cost_center";

/// A batch of the period and when it completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub batch: BatchRecord,
    /// When its last order became final (RFC 3339, UTC).
    pub at: String,
}

/// The batches of a period ([`select`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Completed in the period, in order of completion.
    pub batches: Vec<Completed>,
    /// Not finished (rows left to finish), created on or before the period's last day: left out.
    pub unfinished: Vec<(BatchRecord, i64)>,
}

/// The batches of the ledger completed from `since` to `until` (UTC dates, both included).
pub fn select(ledger: &Ledger, since: NaiveDate, until: NaiveDate) -> Result<Selection, OpError> {
    let mut selection = Selection::default();
    for batch in ledger.batches()? {
        let completion = ledger.batch_completion(batch.id)?;
        match completion.completed_at() {
            Some(at) => {
                let day = NaiveDate::parse_from_str(&utc_date(at), "%Y-%m-%d").ok();
                if day.is_some_and(|d| since <= d && d <= until) {
                    selection.batches.push(Completed {
                        at: at.to_string(),
                        batch,
                    });
                }
            }
            None if completion.rows_not_final > 0 => {
                let created = NaiveDate::parse_from_str(&utc_date(&batch.created_at), "%Y-%m-%d");
                if created.is_ok_and(|d| d <= until) {
                    selection
                        .unfinished
                        .push((batch, completion.rows_not_final));
                }
            }
            None => {} // no order was ever answered: it paid nothing, in no period
        }
    }
    selection
        .batches
        .sort_by(|a, b| (&a.at, &a.batch.name).cmp(&(&b.at, &b.batch.name)));
    Ok(selection)
}

/// Where a period's outputs go; `None` leaves one out.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// The result CSV of the period; `-` for a writer given to [`write_period`].
    pub out: Option<PathBuf>,
    /// The `--out-format` asked for the result CSV, if any ([`period_format`]).
    pub out_format: Option<OutFormat>,
    pub html: Option<PathBuf>,
    pub journal: Option<PathBuf>,
    /// The journal's format (`--journal-format`) and the accounts a double-entry one posts to.
    pub journal_format: JournalFormat,
    pub accounts: crate::settings::Accounts,
    /// Whether the totals say what links not claimed cost (the page always does).
    pub unclaimed: bool,
}

/// What the links of the period's batches not claimed yet, expired and cancelled cost the
/// paying balances, aged at the ledger's now (on the simulator, its clock).
pub fn unclaimed_of(ledger: &Ledger, selection: &Selection) -> Result<Unclaimed, OpError> {
    let simulated = selection
        .batches
        .iter()
        .any(|c| c.batch.environment == crate::environment::Environment::Sim.name());
    let now = crate::ops::payouts::clock_of(simulated, ledger.path());
    let mut unclaimed = Unclaimed::default();
    for completed in &selection.batches {
        // Only what the value needs, read without an order: not every row of the batch.
        ledger.visit_unclaimed(completed.batch.id, |row| unclaimed.add_charge(row, now))?;
    }
    Ok(unclaimed.rounded())
}

/// The layout of the journal: as `--out-format` asks (`same`: the first booked batch's
/// input), else plain CSV (`,`, LF, no BOM: what accounting tools import, and what earlier
/// versions wrote).
pub fn journal_layout(booked: &[BatchRecord], asked: Option<OutFormat>) -> FileFormat {
    asked.map_or(FileFormat::CSV, |asked| {
        asked.resolve(booked.first().and_then(|b| b.input_format))
    })
}

/// What was made of a period: its totals (for `--json`), and what of its lines could not be
/// booked as the others ([`lines::Counts`]).
pub struct Written {
    pub totals: PeriodTally,
    pub not_booked: usize,
    pub mismatch_not_booked: usize,
    /// Rows of orders the service answered with another's order: never booked here.
    pub answered_for_another: usize,
}

/// The name of the period's own batch column in its result CSV: `batch`, or `paybatch_batch`
/// when an input column is already named `batch` in any case or spacing (then
/// `paybatch_batch_2`, ... should that be taken too).
pub fn batch_column(headers: &[String]) -> String {
    let taken = |name: &str| headers.iter().any(|h| h.trim().eq_ignore_ascii_case(name));
    if !taken("batch") {
        return "batch".to_string();
    }
    let mut name = "paybatch_batch".to_string();
    let mut n = 1;
    while taken(&name) {
        n += 1;
        name = format!("paybatch_batch_{n}");
    }
    name
}

/// A `--group-by` column that no batch of the period has (when it has batches), with the
/// columns its batches have: the period refuses it as `report --batch` does.
pub fn missing_group(group_by: &[String], batches: &[Completed]) -> Option<String> {
    if batches.is_empty() {
        return None;
    }
    let column = group_by.iter().find(|column| {
        batches
            .iter()
            .all(|c| column_index(&c.batch.headers, column).is_none())
    })?;
    Some(format!(
        "no batch of the period has a column `{column}`; their columns: {}",
        union_headers(batches).join(", ")
    ))
}

/// The layout of a period's result CSV: `asked` for the input layout of the period's first
/// batch; without `--out-format`, the layout every batch of the period wrote its result file
/// in when they all agree (an Excel `;` team's months stay `;`), else plain CSV.
pub fn period_format(batches: &[Completed], asked: Option<OutFormat>) -> FileFormat {
    if let Some(asked) = asked {
        return asked.resolve(batches.first().and_then(|c| c.batch.input_format));
    }
    let mut layouts = batches
        .iter()
        .map(|c| c.batch.result_format_or_earlier().format);
    match layouts.next() {
        Some(first) if layouts.all(|l| l == first) => first,
        _ => FileFormat::CSV,
    }
}

/// The journal's group column: the first `--group-by` column, else [`DEFAULT_GROUP`] when a
/// batch with lines in the period (`booked`) has it; `None` without either. Decided by the
/// period's lines alone, so that a month's journal is the same whatever else the ledger holds.
pub fn journal_group(group_by: &[String], booked: &[BatchRecord]) -> Option<String> {
    if let Some(first) = group_by.first() {
        return Some(first.clone());
    }
    booked
        .iter()
        .any(|b| column_index(&b.headers, DEFAULT_GROUP).is_some())
        .then(|| DEFAULT_GROUP.to_string())
}

/// The input columns of the period's result CSV: every batch's header, in the order first
/// seen.
pub fn union_headers(batches: &[Completed]) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for c in batches {
        for h in &c.batch.headers {
            if !all.contains(h) {
                all.push(h.clone());
            }
        }
    }
    all
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> OpError + '_ {
    move |e| OpError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Reads every batch of `selection` once and writes what `outputs` asks for; `stdout` takes
/// the result CSV when `outputs.out` is `-` (built in a private temporary file first). The
/// lines of the books booked from `since` to `until` make the journal and every total. The
/// period's totals are returned for `--json`.
pub fn write_period(
    ledger: &Ledger,
    selection: &Selection,
    since: &str,
    until: &str,
    group_by: &[String],
    outputs: &Outputs,
    stdout: &mut dyn Write,
) -> Result<Written, OpError> {
    let mut totals = PeriodTally::new(since, until, group_by);
    for (b, _) in &selection.unfinished {
        totals.unfinished(&b.name);
    }
    note_closed(ledger, since, until, &mut totals)?;
    let headers = union_headers(&selection.batches);
    // The CSV on stdout is built as the file is, in a private temporary directory.
    let temporary = match &outputs.out {
        Some(p) if p.as_os_str() == "-" => {
            Some(tempfile::tempdir().map_err(io_at(Path::new("(temporary directory)")))?)
        }
        _ => None,
    };
    let csv_path = match (&temporary, &outputs.out) {
        (Some(dir), _) => Some(dir.path().join("period.csv")),
        (None, out) => out.clone(),
    };
    let mut lines = match &csv_path {
        Some(path) => Some(start_csv(path, &headers, selection, outputs)?),
        None => None,
    };
    for completed in &selection.batches {
        let mut reading = BatchReading::new(ledger, completed, &headers);
        for column in group_by {
            reading.tally.group_by_or_blank(column);
        }
        reading.read(lines.as_mut(), csv_path.as_deref())?;
        totals.absorb(&reading.tally);
    }
    let counts = book_lines(ledger, since, until, group_by, outputs, &mut totals)?;
    if let (Some(lines), Some(path)) = (lines, &csv_path) {
        lines
            .end()
            .and_then(ResultWriter::finish)
            .map_err(io_at(path))?;
    }
    if let (Some(_), Some(path)) = (&temporary, &csv_path) {
        copy_out(path, stdout)?;
    }
    // What is not claimed changes every day: a closed month's page and JSON, which are
    // reproduced as closed, leave it to `paybatch payouts`.
    if (outputs.html.is_some() || outputs.unclaimed) && totals.closed_exactly().is_none() {
        totals.set_unclaimed(unclaimed_of(ledger, selection)?);
    }
    if let Some(path) = &outputs.html {
        write_page(ledger, selection, &totals, path)?;
    }
    Ok(Written {
        totals,
        not_booked: counts.not_booked,
        mismatch_not_booked: counts.mismatch_not_booked,
        answered_for_another: counts.answered_for_another,
    })
}

/// Books the lines of the period into `totals`, and into the journal when asked.
pub fn book_lines(
    ledger: &Ledger,
    since: &str,
    until: &str,
    group_by: &[String],
    outputs: &Outputs,
    totals: &mut PeriodTally,
) -> Result<lines::Counts, OpError> {
    let booked = lines::batches_booked(ledger, since, until)?;
    let group = journal_group(group_by, &booked);
    let mut journal = match &outputs.journal {
        Some(path) => Some(
            JournalWriter::create(
                path,
                group.as_deref(),
                outputs.journal_format,
                journal_layout(&booked, outputs.out_format),
                &outputs.accounts,
            )
            .map_err(io_at(path))?,
        ),
        None => None,
    };
    let target = match (journal.as_mut(), outputs.journal.as_deref()) {
        (Some(j), Some(path)) => Some((j, path)),
        _ => None,
    };
    let counts =
        lines::Books::new(ledger, group.as_deref(), group_by, target, totals).book(since, until)?;
    if let (Some(journal), Some(path)) = (journal, &outputs.journal) {
        journal.finish().map_err(io_at(path))?;
    }
    Ok(counts)
}

/// Names the closed months the period from `since` to `until` holds, and whether it is one.
fn note_closed(
    ledger: &Ledger,
    since: &str,
    until: &str,
    totals: &mut PeriodTally,
) -> Result<(), OpError> {
    for closed in ledger.closed_months()? {
        let Some((first, last)) = month_bounds(&closed.month) else {
            continue;
        };
        let (first, last) = (first.to_string(), last.to_string());
        if last.as_str() < since || until < first.as_str() {
            continue;
        }
        let exactly = since == first && until == last;
        totals.closed(
            ClosedJson {
                by: format!("{}@{}", closed.user, closed.host),
                month: closed.month,
                closed_at: closed.closed_at,
                journal_digest: closed.journal_digest,
            },
            exactly,
        );
    }
    Ok(())
}

/// The first and last days of `month` (`YYYY-MM`).
pub fn month_bounds(month: &str) -> Option<(NaiveDate, NaiveDate)> {
    let first = NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").ok()?;
    let last = crate::ledger::books::next_month(month)?.pred_opt()?;
    Some((first, last))
}

/// Starts the period's result CSV at `path`: the batch column, then `headers`, in the layout
/// [`period_format`] gives.
fn start_csv(
    path: &Path,
    headers: &[String],
    selection: &Selection,
    outputs: &Outputs,
) -> Result<InBackground, OpError> {
    let mut csv_headers = vec![batch_column(headers)];
    csv_headers.extend(headers.iter().cloned());
    let format = period_format(&selection.batches, outputs.out_format);
    let writer = ResultWriter::create(path, &csv_headers, format).map_err(io_at(path))?;
    Ok(InBackground::start(writer))
}

/// Copies the finished file at `path` to `out` (the CSV asked on stdout).
fn copy_out(path: &Path, out: &mut dyn Write) -> Result<(), OpError> {
    let mut file = std::fs::File::open(path).map_err(io_at(path))?;
    match std::io::copy(&mut file, out).and_then(|_| out.flush()) {
        // A reader that went away (`| head`) took what it wanted: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(io_at(Path::new("(output)"))(e))
        }
        _ => Ok(()),
    }
}

/// Writes the period's HTML page at `path` (mode 0600).
fn write_page(
    ledger: &Ledger,
    selection: &Selection,
    totals: &PeriodTally,
    path: &Path,
) -> Result<(), OpError> {
    // The environments of the period's lines; of its batches when it has none.
    let mut environments: Vec<&str> = selection
        .batches
        .iter()
        .map(|c| c.batch.environment.as_str())
        .collect();
    environments.sort_unstable();
    environments.dedup();
    let of_lines = totals.environments();
    let environments = match of_lines.is_empty() {
        true => environments.join(", "),
        false => of_lines,
    };
    let page = totals
        .render(
            &environments,
            &ledger.path().display().to_string(),
            &crate::ledger::now(),
            env!("CARGO_PKG_VERSION"),
        )
        .map_err(|e| OpError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    write_private(path, page.as_bytes()).map_err(io_at(path))
}

/// One batch of the period being read: its rows once, into the tally (its rows and
/// approvals) and the period's result CSV.
struct BatchReading<'a> {
    ledger: &'a Ledger,
    completed: &'a Completed,
    /// Per column of the batch, its position among the period's input columns.
    positions: Vec<usize>,
    /// How many input columns the period has.
    width: usize,
    tally: Tally,
}

impl<'a> BatchReading<'a> {
    /// Ready to read `completed`, whose cells go to their places among the period's input
    /// columns `headers`.
    fn new(ledger: &'a Ledger, completed: &'a Completed, headers: &[String]) -> Self {
        let batch_headers = &completed.batch.headers;
        BatchReading {
            ledger,
            completed,
            positions: batch_headers
                .iter()
                .map(|h| headers.iter().position(|u| u == h).unwrap_or(usize::MAX))
                .collect(),
            width: headers.len(),
            tally: Tally::for_period(&completed.batch),
        }
    }

    /// Reads the batch once: every row into the tally and the result CSV.
    fn read(
        &mut self,
        mut lines: Option<&mut InBackground>,
        csv_path: Option<&Path>,
    ) -> Result<(), OpError> {
        let ledger = self.ledger;
        let batch = &self.completed.batch;
        ledger.visit_result_rows(batch.id, Specs::Read, |row, order, note| {
            self.tally.add(&row, order.as_ref());
            if let (Some(lines), Some(path)) = (lines.as_deref_mut(), csv_path) {
                let mut line: ResultLine = result_line(row, order, note);
                line.fields = self.period_cells(std::mem::take(&mut line.fields));
                if !lines.push(line) {
                    return Err(OpError::Io {
                        path: path.to_path_buf(),
                        message: "the result file could not be written".into(),
                    });
                }
            }
            Ok::<(), OpError>(())
        })
    }

    /// The row's cells in the period's columns, after the batch's name.
    fn period_cells(&self, fields: Vec<String>) -> Vec<String> {
        let mut cells = vec![String::new(); self.width + 1];
        cells[0] = self.completed.batch.name.clone();
        for (i, cell) in fields.into_iter().enumerate() {
            if let Some(at) = self.positions.get(i).and_then(|p| cells.get_mut(p + 1)) {
                *at = cell;
            }
        }
        cells
    }
}
