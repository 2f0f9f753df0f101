//! `report --since DATE --until DATE`: every batch of the ledger completed in a period, read
//! once each, one row at a time, into any of: one result CSV of all of them (a `batch` column
//! first), the period's totals (its HTML page and `--json`), and an accounting journal.
//!
//! A batch completed when the last of its orders was answered final (COMPLETED, FAILED,
//! REJECTED or MISMATCH), once none of its rows is left to finish (PENDING, PLANNED or
//! SUBMITTED): the UTC date of that time ([`crate::ledger::Completion`]) places it in a
//! period. A batch with rows left to finish is in no period.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::batch::outcome::OpError;
use crate::batch::output::{ResultLine, ResultWriter};
use crate::batch::results::{InBackground, payout_note_of, result_line};
use crate::file_format::{FileFormat, OutFormat};
use crate::ledger::{BatchRecord, Ledger, RowState, Specs};
use crate::report::journal::{Journal, JournalLine, utc_date};
use crate::report::period::PeriodTally;
use crate::report::tally::column_index;
use crate::report::{Tally, write_private};

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
}

/// What was made of a period: its totals (for `--json`), and the paid rows that could not be
/// booked in the journal (no charge recorded).
pub struct Written {
    pub totals: PeriodTally,
    pub not_booked: usize,
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
/// batch of the period has it; `None` without either.
pub fn journal_group(group_by: &[String], batches: &[Completed]) -> Option<String> {
    if let Some(first) = group_by.first() {
        return Some(first.clone());
    }
    batches
        .iter()
        .any(|c| column_index(&c.batch.headers, DEFAULT_GROUP).is_some())
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
    let headers = union_headers(&selection.batches);
    let mut csv_headers = vec!["batch".to_string()];
    csv_headers.extend(headers.iter().cloned());
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
        Some(path) => Some(InBackground::start(
            ResultWriter::create(
                path,
                &csv_headers,
                period_format(&selection.batches, outputs.out_format),
            )
            .map_err(io_at(path))?,
        )),
        None => None,
    };
    let group = journal_group(group_by, &selection.batches);
    let mut journal = match &outputs.journal {
        Some(path) => Some(Journal::create(path, group.as_deref()).map_err(io_at(path))?),
        None => None,
    };
    let mut not_booked = 0;
    for completed in &selection.batches {
        let mut reading = BatchReading::new(ledger, completed, &headers, group.as_deref());
        reading.journal_path = outputs.journal.as_deref();
        for column in group_by {
            reading.tally.group_by_or_blank(column);
        }
        reading.read(lines.as_mut(), journal.as_mut(), csv_path.as_deref())?;
        not_booked += reading.not_booked;
        totals.absorb(&completed.batch.name, &completed.at, &reading.tally);
    }
    if let (Some(lines), Some(path)) = (lines, &csv_path) {
        lines
            .end()
            .and_then(ResultWriter::finish)
            .map_err(io_at(path))?;
    }
    if let (Some(journal), Some(path)) = (journal, &outputs.journal) {
        journal.finish().map_err(io_at(path))?;
    }
    if let (Some(_), Some(path)) = (&temporary, &csv_path) {
        let mut file = std::fs::File::open(path).map_err(io_at(path))?;
        std::io::copy(&mut file, stdout)
            .and_then(|_| stdout.flush())
            .map_err(io_at(Path::new("(output)")))?;
    }
    if let Some(path) = &outputs.html {
        write_page(ledger, selection, &totals, path)?;
    }
    Ok(Written { totals, not_booked })
}

/// Writes the period's HTML page at `path` (mode 0600).
fn write_page(
    ledger: &Ledger,
    selection: &Selection,
    totals: &PeriodTally,
    path: &Path,
) -> Result<(), OpError> {
    let mut environments: Vec<&str> = selection
        .batches
        .iter()
        .map(|c| c.batch.environment.as_str())
        .collect();
    environments.sort_unstable();
    environments.dedup();
    let page = totals
        .render(
            &environments.join(", "),
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

/// One batch of the period being read: its rows once, into the tally, the journal and the
/// period's result CSV.
struct BatchReading<'a> {
    ledger: &'a Ledger,
    completed: &'a Completed,
    /// Per column of the batch, its position among the period's input columns.
    positions: Vec<usize>,
    /// How many input columns the period has.
    width: usize,
    /// The journal's group column in this batch.
    group: Option<usize>,
    tally: Tally,
    journal_path: Option<&'a Path>,
    not_booked: usize,
}

impl<'a> BatchReading<'a> {
    /// Ready to read `completed`, whose cells go to their places among the period's input
    /// columns `headers`; `group` is the journal's group column.
    fn new(
        ledger: &'a Ledger,
        completed: &'a Completed,
        headers: &[String],
        group: Option<&str>,
    ) -> Self {
        let batch_headers = &completed.batch.headers;
        BatchReading {
            ledger,
            completed,
            positions: batch_headers
                .iter()
                .map(|h| headers.iter().position(|u| u == h).unwrap_or(usize::MAX))
                .collect(),
            width: headers.len(),
            group: group.and_then(|g| column_index(batch_headers, g)),
            tally: Tally::for_period(&completed.batch),
            journal_path: None,
            not_booked: 0,
        }
    }

    fn read(
        &mut self,
        mut lines: Option<&mut InBackground>,
        mut journal: Option<&mut Journal>,
        csv_path: Option<&Path>,
    ) -> Result<(), OpError> {
        let ledger = self.ledger;
        let batch = &self.completed.batch;
        ledger.visit_result_rows(batch.id, Specs::Read, |row, order| {
            let products = self.tally.add(&row, order.as_ref());
            if let Some(journal) = journal.as_deref_mut()
                && row.state == RowState::Completed
            {
                let order_id = order.as_ref().and_then(|o| o.service_order_id.as_deref());
                self.book(journal, &row, &products, order_id)?;
            }
            if let (Some(lines), Some(path)) = (lines.as_deref_mut(), csv_path) {
                let note = payout_note_of(ledger, &row)?;
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
        })?;
        ledger.visit_earlier_charges(batch.id, |earlier| {
            let products = self.tally.add_earlier_charge(&earlier);
            if let Some(journal) = journal.as_deref_mut() {
                let order_id = earlier
                    .order
                    .as_ref()
                    .and_then(|o| o.service_order_id.as_deref());
                self.book(journal, &earlier.row, &products, order_id)?;
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

    /// Books one paid attempt of a row in the journal; one without a recorded charge is
    /// counted in `not_booked` instead.
    fn book(
        &mut self,
        journal: &mut Journal,
        row: &crate::ledger::RowRecord,
        products: &str,
        order_id: Option<&str>,
    ) -> Result<(), OpError> {
        let (Some(amount), Some(currency)) = (&row.debited_amount, &row.debited_currency) else {
            self.not_booked += 1;
            return Ok(());
        };
        let group = self
            .group
            .and_then(|i| row.fields.get(i))
            .map_or("", String::as_str);
        journal
            .add(&JournalLine {
                completed_at: row.completed_at.as_deref().unwrap_or(&self.completed.at),
                batch: &self.completed.batch.name,
                currency,
                amount,
                group,
                product: products,
                reference: &row.reference,
                order_id: order_id.unwrap_or_default(),
            })
            .map_err(|e| OpError::Io {
                path: self
                    .journal_path
                    .unwrap_or(Path::new("(journal)"))
                    .to_path_buf(),
                message: e.to_string(),
            })
    }
}
